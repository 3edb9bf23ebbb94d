//! One inner-engine process and the handle that talks to it.
//!
//! An [`Engine`] owns its child: it spawns it, speaks UCI with it (one write, flushed, per command), and kills and
//! reaps it when dropped. Every wait has a deadline; end of output is [`EngineError::Eof`]. The engine's stderr is
//! forwarded to the log. Nothing the engine sends can make the handle panic.
//!
//! - `config`: how to run it ([`EngineConfig`]) and who it says it is ([`EngineIdentity`]);
//! - `spawn`: starting the process and its threads, and killing and reaping it;
//! - `watchdog`: the deadlines, kept by a thread per engine, and the [`StopHandle`];
//! - `handshake`: `uci`, options, `ucinewgame`, `isready`;
//! - `search`: one search, from `go` to the checked [`Evaluation`](super::Evaluation).

mod config;
mod handshake;
mod search;
mod spawn;
mod watchdog;

use std::{
    io::BufReader,
    process::ChildStdout,
    sync::{Arc, atomic::Ordering},
    thread,
    time::Duration,
};

use log::debug;

use self::watchdog::{Link, Phase, io_error};
pub use self::{
    config::{
        EngineConfig, EngineIdentity, OUTSIDE_SEARCHMOVES, RestartPolicy, Searchmoves, Timeouts, canonical_label,
        engine_label, note_option_not_set,
    },
    watchdog::{STOP_ANSWER, StopHandle},
};
use super::{
    EngineError,
    protocol::{EngineMessage, ReadLine, parse_line, read_line},
};

/// Longest engine line kept; the rest of a longer line is dropped.
const MAX_LINE: usize = 64 * 1024;

/// The handle of one running engine process.
///
/// The handle's own thread writes commands and reads the engine's output straight from the pipes. A watchdog thread
/// per engine keeps the deadlines: it asks a silent searching engine `isready`, and kills the engine (its whole
/// process group, so that a wrapper's children go too) when an answer is late; the blocked read then ends with the
/// [`EngineError::Timeout`] that names the answer. Reading a line costs no more than a bare loop's read.
pub struct Engine {
    link: Arc<Link>,
    output: BufReader<ChildStdout>,
    /// The line being read.
    partial: Vec<u8>,
    watchdog: Option<thread::JoinHandle<()>>,
    identity: Arc<EngineIdentity>,
    name: Arc<str>,
    /// MultiPV currently set in the engine.
    multipv: u32,
    /// Every configuring command sent so far is followed by an `isready`.
    covered: bool,
    /// `UCI_Chess960` is set: castling is written and read as king takes rook.
    chess960: bool,
    /// Whether the engine keeps to `go ... searchmoves`: learnt at its first search with them, or set by its
    /// configuration (see [`Searchmoves`]).
    searchmoves: Searchmoves,
}

impl Engine {
    /// The engine is known not to keep to `searchmoves`: a search with them is asked another way (see
    /// [`Engine::searchmoves_method`]).
    pub fn ignores_searchmoves(&self) -> bool {
        matches!(self.searchmoves, Searchmoves::Ignored | Searchmoves::MultiPv)
    }

    /// How a search restricted to `searchmoves` is asked of this engine, as known now.
    pub fn searchmoves_method(&self) -> Searchmoves {
        self.searchmoves
    }

    /// What the engine said about itself in the handshake.
    pub fn identity(&self) -> &Arc<EngineIdentity> {
        &self.identity
    }

    /// Operating-system id of the process.
    pub fn pid(&self) -> u32 {
        self.link.pid
    }

    /// A handle that stops the current search, or the next one if none is running.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle { link: Arc::downgrade(&self.link), generation: self.link.state.lock().generation }
    }

    fn until(&self, timeout: Duration, what: &'static str) {
        let mut state = self.link.state.lock();
        self.link.until(&mut state, timeout, what);
    }

    fn idle(&self) {
        let mut state = self.link.state.lock();
        self.link.enter(&mut state, Phase::Idle);
    }

    fn send(&mut self, command: &str) -> Result<(), EngineError> {
        self.link.send(command)
    }

    /// The next message. The end of the engine's output is [`EngineError::Eof`], or the timeout that made the
    /// watchdog kill it.
    fn recv(&mut self) -> Result<EngineMessage, EngineError> {
        let line = self.next_line().map_err(|e| self.link.state.lock().expired.take().unwrap_or(e))?;
        self.link.last_line.store(self.link.now_nanos(), Ordering::Relaxed);
        debug!("{} ({}) << {line}", self.link.label, self.link.pid);
        let message = parse_line(&line);
        match message {
            EngineMessage::ReadyOk => {
                let mut state = self.link.state.lock();
                state.pending_readyok = state.pending_readyok.saturating_sub(1);
                if state.pending_readyok == 0 && matches!(state.phase, Phase::Search { ping: Some(_) }) {
                    self.link.enter(&mut state, Phase::Search { ping: None });
                }
            }
            EngineMessage::Unknown if !line.trim().is_empty() => debug!("{}: ignored line {line:?}", self.name),
            _ => {}
        }
        Ok(message)
    }

    /// The next line (lossy UTF-8, without its line ending; over-long lines skipped).
    fn next_line(&mut self) -> Result<String, EngineError> {
        loop {
            match read_line(&mut self.output, &mut self.partial, MAX_LINE) {
                Ok(ReadLine::Line { text, .. }) => return Ok(text),
                Ok(ReadLine::Skipped) => debug!("{}: skipped a line longer than {MAX_LINE} bytes", self.name),
                Ok(ReadLine::End) => return Err(EngineError::Eof),
                Err(e) => return Err(io_error(e)),
            }
        }
    }
}
