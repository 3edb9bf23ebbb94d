//! The conversation that configures an engine: `uci`/`uciok` and what it declares, `setoption`, `ucinewgame`, and
//! the `isready`/`readyok` round trips that make sure it has taken them before a search.

use std::sync::Arc;

use log::debug;

use super::{
    super::{
        EngineError,
        protocol::{EngineMessage, OptionKind},
    },
    Engine,
    config::{EngineConfig, EngineIdentity, Searchmoves, note_option_not_set},
};

impl Engine {
    /// How an engine found not to keep to `searchmoves` is asked for the best of some moves: through MultiPV where
    /// it has the option (the cheaper method: `scripts/alternatives` measured a third of the nodes of searching
    /// each move alone), else each move alone.
    pub(super) fn learnt_method(&self) -> Searchmoves {
        match self.identity.option("MultiPV").map(|o| &o.kind) {
            Some(OptionKind::Spin { max, .. }) if *max > 1 => Searchmoves::MultiPv,
            _ => Searchmoves::Ignored,
        }
    }

    pub(super) fn handshake(&mut self, config: &EngineConfig) -> Result<(), EngineError> {
        self.until(self.link.timeouts.handshake, "uciok");
        self.send("uci")?;
        let (mut name, mut author, mut options) = (None, None, Vec::new());
        loop {
            match self.recv()? {
                EngineMessage::IdName(n) => name = Some(n),
                EngineMessage::IdAuthor(a) => author = Some(a),
                EngineMessage::Option(o) => options.push(o),
                EngineMessage::UciOk => break,
                _ => {}
            }
        }
        self.idle();
        let identity = EngineIdentity {
            name: name.filter(|n| !n.is_empty()).unwrap_or_else(|| self.identity.name.clone()),
            author,
            options,
            command: config.command.clone(),
        };
        self.multipv = match identity.option("MultiPV").map(|o| &o.kind) {
            Some(OptionKind::Spin { default, .. }) => u32::try_from(*default).unwrap_or(1),
            _ => 1,
        };
        self.name = Arc::from(identity.name.as_str());
        self.identity = Arc::new(identity);
        for (name, value) in &config.options {
            // deeptree's count of threads goes to the engine's own thread option, whatever its name.
            let threads = name.eq_ignore_ascii_case("Threads");
            let identity = Arc::clone(&self.identity);
            let name = match identity.thread_option() {
                Some(option) if threads => option.name.as_str(),
                _ => name.as_str(),
            };
            // An engine with no thread option at all searches with one thread: asking for one is no reason to warn
            // (at every start of such an engine).
            let single_thread = threads && value == "1";
            match self.set_option(name, value) {
                Err(e) if single_thread && identity.thread_option().is_none() => debug!("{}: {e}", self.name),
                Err(e) if !e.is_engine_fault() => note_option_not_set(&self.name, name, &e),
                other => other?,
            }
        }
        self.is_ready()
    }

    /// Sends `setoption`. The option must be one the engine declared; the value is checked against its type (a
    /// spin is clamped to its range). A mismatch is [`EngineError::InvalidRequest`] and sends nothing.
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<(), EngineError> {
        let identity = Arc::clone(&self.identity);
        let option = identity
            .option(name)
            .ok_or_else(|| EngineError::InvalidRequest(format!("{} has no option {name:?}", self.name)))?;
        let value = option
            .checked_value(value)
            .ok_or_else(|| EngineError::InvalidRequest(format!("{value:?} does not fit {}", option.to_uci())))?;
        if option.kind == OptionKind::Button {
            self.send(&format!("setoption name {}", option.name))?;
        } else {
            self.send(&format!("setoption name {} value {value}", option.name))?;
        }
        self.covered = false;
        if option.name.eq_ignore_ascii_case("MultiPV") {
            self.multipv = value.parse().unwrap_or(1);
        }
        if option.name.eq_ignore_ascii_case("UCI_Chess960") {
            self.chess960 = value == "true";
        }
        Ok(())
    }

    /// `isready`, then waits for `readyok` (and for any earlier `isready` still unanswered).
    pub fn is_ready(&mut self) -> Result<(), EngineError> {
        self.covered = false;
        self.await_ready()
    }

    /// Waits until the engine has answered `isready` for every command sent so far that configures it (the
    /// handshake, `setoption`, `ucinewgame`), sending `isready` only when such a command is not followed by one yet.
    /// After `bestmove` an engine is idle by the protocol, so back-to-back searches need no round trip.
    pub(super) fn await_ready(&mut self) -> Result<(), EngineError> {
        if !self.covered {
            self.until(self.link.timeouts.handshake, "readyok");
            self.link.state.lock().pending_readyok += 1;
            self.send("isready")?;
            self.covered = true;
        } else if self.link.state.lock().pending_readyok > 0 {
            self.until(self.link.timeouts.handshake, "readyok");
        } else {
            return Ok(());
        }
        while self.link.state.lock().pending_readyok > 0 {
            self.recv()?;
        }
        self.idle();
        Ok(())
    }

    /// `ucinewgame`, then waits for `readyok`.
    pub fn new_game(&mut self) -> Result<(), EngineError> {
        self.begin_new_game()?;
        self.sync()
    }

    /// Sends `ucinewgame` without waiting: the engine clears its state while the caller goes on, and the next
    /// [`Engine::sync`] or search waits for it (`isready`/`readyok`), so no search starts before it is done.
    pub fn begin_new_game(&mut self) -> Result<(), EngineError> {
        self.send("ucinewgame")?;
        self.covered = false;
        Ok(())
    }

    /// Every configuring command sent so far has been answered by `readyok`: a search would start with no round trip.
    pub fn is_synced(&self) -> bool {
        self.covered && self.link.state.lock().pending_readyok == 0
    }

    /// Waits until the engine has taken every configuring command sent so far (`setoption`, `ucinewgame`): one
    /// `isready` round trip when such a command is not yet followed by one, none otherwise.
    pub fn sync(&mut self) -> Result<(), EngineError> {
        self.await_ready()
    }
}
