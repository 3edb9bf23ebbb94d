//! One inner-engine process and the handle that talks to it.
//!
//! An [`Engine`] owns its child: it spawns it, speaks UCI with it over pipes (flushing after every command), and kills
//! and reaps it when dropped. A thread per pipe turns the engine's output into lines on a channel, so every wait has a
//! deadline; end of output is [`EngineError::Eof`]. Nothing the engine sends can make the handle panic.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, BufWriter, Read, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::Arc,
    thread,
    time::{Duration, Instant},
};

use crossbeam_channel::{Receiver, Sender, never, select, unbounded};
use log::{debug, trace, warn};
use shakmaty::{Chess, Position, uci::UciMove};

use super::{
    EngineError,
    command::{resolve_program, split_command_line},
    protocol::{EngineMessage, EngineOption, Info, OptionKind, parse_line},
    request::{EvalRequest, Evaluation, PvLine},
};
use crate::score::{Bound, Score};

/// Longest engine line kept; the rest of a longer line is dropped.
const MAX_LINE: usize = 64 * 1024;

/// Deadlines of the conversation with an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// For `uciok`, `readyok`, and `bestmove` after `stop`.
    pub handshake: Duration,
    /// Silence during a search after which the engine is asked `isready`; if it does not answer within `handshake`
    /// too, it is hung.
    pub search_silence: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts { handshake: Duration::from_secs(10), search_silence: Duration::from_secs(60) }
    }
}

/// How a worker restarts its engine after a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Back-off before the first restart after a success; it doubles with every further fault, with jitter.
    pub first_delay: Duration,
    pub max_delay: Duration,
    /// A job that fails on this many fresh processes in a row is reported failed.
    pub fresh_attempts: u32,
}

impl Default for RestartPolicy {
    fn default() -> RestartPolicy {
        RestartPolicy { first_delay: Duration::from_millis(100), max_delay: Duration::from_secs(30), fresh_attempts: 3 }
    }
}

/// How to run one engine: its command line and the options set after every (re)start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// Any command line: `stockfish`, a path, a wrapper script, `ssh host stockfish`.
    pub command: String,
    /// `(name, value)` pairs sent with `setoption` after the handshake, in order (`Threads` is 1 unless set).
    pub options: Vec<(String, String)>,
    pub timeouts: Timeouts,
    pub restart: RestartPolicy,
}

impl EngineConfig {
    /// `command` with `Threads` = 1 and default timeouts.
    pub fn new(command: impl Into<String>) -> EngineConfig {
        EngineConfig {
            command: command.into(),
            options: vec![("Threads".to_owned(), "1".to_owned())],
            timeouts: Timeouts::default(),
            restart: RestartPolicy::default(),
        }
    }

    /// The inner engine of the settings: its command, `Hash`, `Threads` = 1 and the configured timeouts.
    pub fn from_config(config: &crate::config::Config) -> EngineConfig {
        let mut engine = EngineConfig::new(config.engine.clone()).with_option("Hash", config.engine_hash_mib);
        engine.timeouts = Timeouts {
            handshake: Duration::from_secs(config.engine_handshake_timeout_secs.max(1)),
            search_silence: Duration::from_secs(config.engine_search_timeout_secs.max(1)),
        };
        engine
    }

    /// Sets an option (replacing an earlier value of the same name, compared as UCI does, ignoring case).
    pub fn with_option(mut self, name: &str, value: impl ToString) -> EngineConfig {
        let value = value.to_string();
        match self.options.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some(slot) => slot.1 = value,
            None => self.options.push((name.to_owned(), value)),
        }
        self
    }

    pub fn with_timeouts(mut self, timeouts: Timeouts) -> EngineConfig {
        self.timeouts = timeouts;
        self
    }

    pub fn with_restart(mut self, restart: RestartPolicy) -> EngineConfig {
        self.restart = restart;
        self
    }
}

/// Who an engine says it is, and what it offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineIdentity {
    /// `id name`, or the program's file name when the engine sent none.
    pub name: String,
    pub author: Option<String>,
    /// Options in the order the engine declared them.
    pub options: Vec<EngineOption>,
    /// The command line it was started with.
    pub command: String,
}

impl EngineIdentity {
    /// The option called `name` (UCI option names ignore case).
    pub fn option(&self, name: &str) -> Option<&EngineOption> {
        self.options.iter().find(|o| o.name.eq_ignore_ascii_case(name))
    }
}

/// The handle of one running engine process.
pub struct Engine {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    lines: Receiver<String>,
    identity: Arc<EngineIdentity>,
    name: Arc<str>,
    timeouts: Timeouts,
    /// MultiPV currently set in the engine.
    multipv: u32,
    /// `isready` sent whose `readyok` has not come yet.
    pending_readyok: u32,
}

/// A wait for an answer, for the error that names it.
struct Wait {
    deadline: Instant,
    timeout: Duration,
    what: &'static str,
}

impl Wait {
    fn new(timeout: Duration, what: &'static str) -> Wait {
        Wait { deadline: Instant::now() + timeout, timeout, what }
    }

    fn expired(&self) -> EngineError {
        EngineError::Timeout { waiting_for: self.what, after: self.timeout }
    }
}

impl Engine {
    /// Starts the engine, completes the handshake (`uci`/`uciok`), sets the configured options and waits for
    /// `readyok`. Options the engine does not have, or values that do not fit them, are skipped with a warning.
    pub fn spawn(config: &EngineConfig) -> Result<Engine, EngineError> {
        let words = split_command_line(&config.command)?;
        let Some((program, args)) = words.split_first() else {
            return Err(EngineError::BadCommand { command: config.command.clone(), reason: "empty command".into() });
        };
        let program_path = resolve_program(program);
        let spawn_error = |source| EngineError::Spawn { command: config.command.clone(), source: Arc::new(source) };
        let mut child = Command::new(&program_path)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_error(std::io::Error::other("no pipes to the child")));
        };
        let pid = child.id();
        let (line_tx, lines) = unbounded();
        let label = program_path.file_name().map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
        let started = thread::Builder::new()
            .name(format!("engine-{pid}-out"))
            .spawn(move || read_lines(stdout, &line_tx))
            .and_then(|_| {
                let label = label.clone();
                thread::Builder::new()
                    .name(format!("engine-{pid}-err"))
                    .spawn(move || forward_stderr(stderr, &label, pid))
            });
        let identity = Arc::new(EngineIdentity {
            name: label.clone(),
            author: None,
            options: Vec::new(),
            command: config.command.clone(),
        });
        let mut engine = Engine {
            child,
            stdin: BufWriter::new(stdin),
            lines,
            name: Arc::from(label.as_str()),
            identity,
            timeouts: config.timeouts,
            multipv: 1,
            pending_readyok: 0,
        };
        started.map_err(spawn_error)?;
        debug!("started engine {:?} (pid {pid})", config.command);
        engine.handshake(config)?;
        Ok(engine)
    }

    fn handshake(&mut self, config: &EngineConfig) -> Result<(), EngineError> {
        self.send("uci")?;
        let wait = Wait::new(self.timeouts.handshake, "uciok");
        let (mut name, mut author, mut options) = (None, None, Vec::new());
        loop {
            match self.recv(&wait)? {
                EngineMessage::IdName(n) => name = Some(n),
                EngineMessage::IdAuthor(a) => author = Some(a),
                EngineMessage::Option(o) => options.push(o),
                EngineMessage::UciOk => break,
                _ => {}
            }
        }
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
            match self.set_option(name, value) {
                Err(e) if !e.is_engine_fault() => warn!("{}: option not set: {e}", self.name),
                other => other?,
            }
        }
        self.is_ready()
    }

    /// What the engine said about itself in the handshake.
    pub fn identity(&self) -> &Arc<EngineIdentity> {
        &self.identity
    }

    /// Operating-system id of the process.
    pub fn pid(&self) -> u32 {
        self.child.id()
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
        if option.name.eq_ignore_ascii_case("MultiPV") {
            self.multipv = value.parse().unwrap_or(1);
        }
        Ok(())
    }

    /// `isready`, then waits for `readyok` (and for any earlier `isready` still unanswered).
    pub fn is_ready(&mut self) -> Result<(), EngineError> {
        self.send("isready")?;
        self.pending_readyok += 1;
        let wait = Wait::new(self.timeouts.handshake, "readyok");
        while self.pending_readyok > 0 {
            self.recv(&wait)?;
        }
        Ok(())
    }

    /// `ucinewgame`, then waits for `readyok`.
    pub fn new_game(&mut self) -> Result<(), EngineError> {
        self.send("ucinewgame")?;
        self.is_ready()
    }

    /// Runs a search to its limit and returns the result.
    pub fn evaluate(&mut self, request: &EvalRequest) -> Result<Evaluation, EngineError> {
        self.search(request, &never(), &mut |_| {})
    }

    /// Runs a search; a message on `stop` sends `stop` and the search ends with the engine's `bestmove` (the result
    /// is then marked `stopped`). `on_info` sees every `info` line as it comes.
    ///
    /// The request is checked before anything is sent; every move the engine sends is checked legal before it is
    /// used, and an illegal (or outside `searchmoves`) best move is an [`EngineError::IllegalMove`].
    pub fn search(
        &mut self,
        request: &EvalRequest,
        stop: &Receiver<()>,
        on_info: &mut dyn FnMut(&Info),
    ) -> Result<Evaluation, EngineError> {
        request.validate()?;
        if request.multipv != self.multipv {
            self.set_option("MultiPV", &request.multipv.to_string())?;
        }
        self.send(&request.position.uci_command())?;
        self.is_ready()?;
        self.send(&request.go_command())?;

        let mut collector = Collector::new(request.multipv);
        let mut stop = stop.clone();
        let mut stopping: Option<Wait> = None;
        let mut ping: Option<Wait> = None;
        let mut silence = Instant::now() + self.timeouts.search_silence;
        loop {
            let deadline = stopping.as_ref().or(ping.as_ref()).map_or(silence, |w| w.deadline);
            select! {
                recv(self.lines) -> line => {
                    let line = line.map_err(|_| EngineError::Eof)?;
                    silence = Instant::now() + self.timeouts.search_silence;
                    match self.parse(&line) {
                        EngineMessage::Info(info) => {
                            collector.add(&info);
                            on_info(&info);
                        }
                        EngineMessage::BestMove { best, ponder } => {
                            return collector.finish(request, &best, ponder.as_deref(), stopping.is_some(), &self.name);
                        }
                        _ => {}
                    }
                    if self.pending_readyok == 0 {
                        ping = None;
                    }
                }
                recv(stop) -> message => match message {
                    Ok(()) if stopping.is_none() => {
                        self.send("stop")?;
                        stopping = Some(Wait::new(self.timeouts.handshake, "bestmove after stop"));
                    }
                    Ok(()) => {}
                    Err(_) => stop = never(),
                },
                default(deadline.saturating_duration_since(Instant::now())) => {
                    if let Some(wait) = stopping.as_ref().or(ping.as_ref()) {
                        return Err(wait.expired());
                    }
                    debug!("{}: silent for {:?} in a search, asking isready", self.name, self.timeouts.search_silence);
                    self.send("isready")?;
                    self.pending_readyok += 1;
                    ping = Some(Wait::new(self.timeouts.handshake, "readyok during a search"));
                }
            }
        }
    }

    fn send(&mut self, command: &str) -> Result<(), EngineError> {
        trace!("{} >> {command}", self.name);
        let written = self.stdin.write_all(command.as_bytes());
        written
            .and_then(|()| self.stdin.write_all(b"\n"))
            .and_then(|()| self.stdin.flush())
            .map_err(|e| EngineError::Write { source: Arc::new(e) })
    }

    fn recv(&mut self, wait: &Wait) -> Result<EngineMessage, EngineError> {
        match self.lines.recv_deadline(wait.deadline) {
            Ok(line) => Ok(self.parse(&line)),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(wait.expired()),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(EngineError::Eof),
        }
    }

    /// Parses a line, counting `readyok`s against pending `isready`s.
    fn parse(&mut self, line: &str) -> EngineMessage {
        trace!("{} << {line}", self.name);
        let message = parse_line(line);
        match message {
            EngineMessage::ReadyOk => self.pending_readyok = self.pending_readyok.saturating_sub(1),
            EngineMessage::Unknown if !line.trim().is_empty() => {
                debug!("{}: ignored line {line:?}", self.name)
            }
            _ => {}
        }
        message
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let pid = self.child.id();
        let _ = self.child.kill();
        match self.child.wait() {
            Ok(status) => debug!("engine {} (pid {pid}) ended: {status}", self.name),
            Err(e) => warn!("engine {} (pid {pid}) not reaped: {e}", self.name),
        }
    }
}

/// Sends each line of `out` (lossy UTF-8, without its line ending; over-long lines cut) until end of output.
fn read_lines(out: impl Read, lines: &Sender<String>) {
    let mut reader = BufReader::new(out);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.by_ref().take(MAX_LINE as u64).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buf.last() != Some(&b'\n') && buf.len() == MAX_LINE {
            // Drop the rest of an over-long line.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                match reader.by_ref().take(MAX_LINE as u64).read_until(b'\n', &mut rest) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if rest.last() == Some(&b'\n') => break,
                    Ok(_) => {}
                }
            }
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        if lines.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
            return;
        }
    }
}

fn forward_stderr(err: impl Read, label: &str, pid: u32) {
    for line in BufReader::new(err).split(b'\n') {
        let Ok(line) = line else { return };
        warn!("{label} (pid {pid}) stderr: {}", String::from_utf8_lossy(&line).trim_end());
    }
}

/// One multipv slot: the deepest exact line, and the deepest bounded one (used only when no exact line came).
#[derive(Default)]
struct Slot {
    exact: Option<RawLine>,
    bounded: Option<RawLine>,
}

struct RawLine {
    score: Score,
    bound: Bound,
    depth: u32,
    seldepth: u32,
    pv: Vec<UciMove>,
}

/// Gathers `info` lines into the result of a search.
struct Collector {
    multipv: u32,
    slots: BTreeMap<u32, Slot>,
    nodes: u64,
}

impl Collector {
    fn new(multipv: u32) -> Collector {
        Collector { multipv, slots: BTreeMap::new(), nodes: 0 }
    }

    fn add(&mut self, info: &Info) {
        self.nodes = self.nodes.max(info.nodes.unwrap_or(0));
        let Some((score, bound)) = info.score else {
            return;
        };
        let index = info.multipv.unwrap_or(1);
        if index == 0 || index > self.multipv {
            return;
        }
        let depth = info.depth.unwrap_or(0);
        let slot = self.slots.entry(index).or_default();
        let keep = if bound == Bound::Exact { &mut slot.exact } else { &mut slot.bounded };
        // The last line at the deepest depth wins.
        if keep.as_ref().is_none_or(|line| depth >= line.depth) {
            *keep =
                Some(RawLine { score, bound, depth, seldepth: info.seldepth.unwrap_or(depth), pv: info.pv.clone() });
        }
    }

    fn finish(
        self,
        request: &EvalRequest,
        best: &str,
        ponder: Option<&str>,
        stopped: bool,
        engine: &Arc<str>,
    ) -> Result<Evaluation, EngineError> {
        let pos = request.position.position();
        let illegal =
            |what: &'static str| EngineError::IllegalMove { mv: best.to_owned(), fen: request.position.fen(), what };
        let best_move = UciMove::from_ascii(best.as_bytes())
            .ok()
            .and_then(|uci| uci.to_move(pos).ok())
            .ok_or_else(|| illegal("illegal best move"))?;
        if !request.searchmoves.is_empty()
            && !request.searchmoves.iter().any(|s| s.to_move(pos).ok() == Some(best_move))
        {
            return Err(illegal("best move outside searchmoves"));
        }
        let mut after = pos.clone();
        after.play_unchecked(best_move);
        let ponder = ponder
            .and_then(|p| UciMove::from_ascii(p.as_bytes()).ok())
            .and_then(|uci| uci.to_move(&after).ok().map(UciMove::from_standard));
        let mut lines = self.slots.into_iter().filter_map(|(multipv, slot)| {
            let raw = slot.exact.or(slot.bounded)?;
            Some(PvLine {
                multipv,
                score: raw.score,
                bound: raw.bound,
                depth: raw.depth,
                seldepth: raw.seldepth,
                pv: legal_prefix(pos, &raw.pv),
            })
        });
        let line = lines.next().filter(|l| l.multipv == 1).ok_or(EngineError::NoScore)?;
        Ok(Evaluation {
            best_move: UciMove::from_standard(best_move),
            ponder,
            line,
            other_lines: lines.collect(),
            nodes: self.nodes,
            stopped,
            engine: Arc::clone(engine),
        })
    }
}

/// The moves of `pv` up to the first that is not legal where it is played.
fn legal_prefix(pos: &Chess, pv: &[UciMove]) -> Vec<UciMove> {
    let mut pos = pos.clone();
    let mut legal = Vec::with_capacity(pv.len());
    for uci in pv {
        let Ok(m) = uci.to_move(&pos) else {
            debug!("pv cut at illegal move {uci}");
            break;
        };
        legal.push(UciMove::from_standard(m));
        pos.play_unchecked(m);
    }
    legal
}
