//! One inner-engine process and the handle that talks to it.
//!
//! An [`Engine`] owns its child: it spawns it, speaks UCI with it (one write, flushed, per command), and kills and
//! reaps it when dropped. Every wait has a deadline; end of output is [`EngineError::Eof`]. The engine's stderr is
//! forwarded to the log. Nothing the engine sends can make the handle panic.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, ErrorKind, Read, Write},
    os::unix::process::CommandExt,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{
        Arc, Weak,
        atomic::{AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use log::{debug, trace, warn};
use parking_lot::{Condvar, Mutex};
use shakmaty::{Position, uci::UciMove};

use super::{
    EngineError,
    command::{resolve_program, split_command_line},
    protocol::{EngineMessage, EngineOption, Info, OptionKind, parse_line},
    request::{Asked, EvalRequest, Evaluation, Limit, PvLine, ScreenCut, SearchTiming},
};
use crate::{
    notation::{canonical, played},
    score::{Bound, Score},
};

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

impl Timeouts {
    /// Deadlines are kept within a year, so that adding them to a point in time cannot overflow.
    fn bounded(self) -> Timeouts {
        const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
        Timeouts { handshake: self.handshake.min(YEAR), search_silence: self.search_silence.min(YEAR) }
    }
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

/// An engine's name and command line as evaluations record them (see [`EngineIdentity::label`]).
/// `command` with its program as the path it runs from (`stockfish` is `/usr/games/stockfish` where that is the one
/// found): one program started by name or by path is one engine in the store's list.
fn program_resolved(command: &str) -> String {
    match split_command_line(command) {
        Ok(words) if words.first().is_some_and(|program| !program.contains('/')) => {
            let program = resolve_program(&words[0]);
            if program.is_absolute() {
                let mut resolved = vec![program.display().to_string()];
                resolved.extend(words.into_iter().skip(1));
                return resolved.join(" ");
            }
            command.to_owned()
        }
        _ => command.to_owned(),
    }
}

/// The engine as the store records it: `NAME (COMMAND)`, the program of the command line resolved (see
/// [`program_resolved`]).
pub fn engine_label(name: &str, command: &str) -> String {
    format!("{name} ({})", program_resolved(command))
}

/// A label of the store's list as [`engine_label`] writes it today: `NAME (COMMAND)` with its program resolved
/// (a store written before programs were resolved lists `Stockfish 15.1 (stockfish)` beside `Stockfish 15.1
/// (/usr/games/stockfish)`: one engine, under one label once both are made canonical). The command is the text in
/// the last pair of parentheses that closes the label where the name before it and the command are both balanced
/// (a name may hold parentheses, a command may too). A label of another shape (`scripted`) is kept as it is. Local
/// programs only are resolved: `ssh a stockfish` and `ssh b stockfish` stay two engines.
pub fn canonical_label(label: &str) -> String {
    let Some(inner) = label.strip_suffix(')') else { return label.to_owned() };
    let balanced = |text: &str| {
        let mut depth = 0i32;
        for c in text.chars() {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            if depth < 0 {
                return false;
            }
        }
        depth == 0
    };
    let split = inner
        .match_indices(" (")
        .map(|(at, _)| (&inner[..at], &inner[at + 2..]))
        .filter(|(name, command)| !name.is_empty() && !command.is_empty() && balanced(name) && balanced(command))
        .last();
    match split {
        Some((name, command)) => engine_label(name, command),
        None => label.to_owned(),
    }
}

/// Says that engine `engine` did not take option `option` (it has none of that name, or the value does not fit):
/// a warning the first time in this process for that engine and option, a debug line after, so that an engine
/// started again and again (a pool's workers, a restart after a crash, new settings) is not warned about each time.
pub fn note_option_not_set(engine: &str, option: &str, error: &EngineError) {
    static NOTED: parking_lot::Mutex<Vec<(String, String)>> = parking_lot::Mutex::new(Vec::new());
    let key = (engine.to_owned(), option.to_ascii_lowercase());
    let first = {
        let mut noted = NOTED.lock();
        let first = !noted.contains(&key);
        if first {
            noted.push(key);
        }
        first
    };
    if first {
        warn!("{engine}: option not set (said once): {error}");
    } else {
        debug!("{engine}: option not set: {error}");
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
    /// Clear the engine (`ucinewgame`) before every search: answers then depend on what is asked alone.
    pub fresh: bool,
    /// Whether the engine keeps to `searchmoves`: `Unknown` learns it at the first answer outside them.
    pub searchmoves: Searchmoves,
}

impl EngineConfig {
    /// `command` with `Threads` = 1 and default timeouts.
    pub fn new(command: impl Into<String>) -> EngineConfig {
        EngineConfig {
            command: command.into(),
            options: vec![("Threads".to_owned(), "1".to_owned())],
            timeouts: Timeouts::default(),
            restart: RestartPolicy::default(),
            fresh: false,
            searchmoves: Searchmoves::Unknown,
        }
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
    /// The engine as evaluations record it: its name and the command line that started it, so that the same
    /// program here and on another machine are told apart.
    pub fn label(&self) -> String {
        engine_label(&self.name, &self.command)
    }

    /// The option called `name` (UCI option names ignore case).
    pub fn option(&self, name: &str) -> Option<&EngineOption> {
        self.options.iter().find(|o| o.name.eq_ignore_ascii_case(name))
    }

    /// The option that counts the engine's threads: `Threads`, or for an engine without it a number option whose name
    /// speaks of threads (Toga II's `Number of Threads`).
    pub fn thread_option(&self) -> Option<&EngineOption> {
        self.option("Threads").or_else(|| {
            self.options
                .iter()
                .find(|o| o.name.to_ascii_lowercase().contains("thread") && matches!(o.kind, OptionKind::Spin { .. }))
        })
    }
}

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

/// Whether an engine keeps to `searchmoves`. Some do not (Ethereal 12, Toga II 3.0 answer with a move outside them);
/// for those, a search restricted to some moves is asked as one search of the position after each move, one ply
/// shallower (see [`Engine::search`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Searchmoves {
    /// Not known: trusted until the engine answers with a move outside them (in this process: an engine of the same
    /// command that did so before starts as `Ignored`).
    #[default]
    Unknown,
    /// Kept (set in the configuration): a move outside them is an engine fault.
    Honoured,
    /// Ignored (seen, for an engine without a MultiPV option, or set in the configuration): each move is searched
    /// on its own.
    Ignored,
    /// Ignored, and the moves allowed are asked through MultiPV (seen, for an engine with a MultiPV option, or set
    /// in the configuration): one search of the whole position with one line more than the moves left out, whose
    /// best line among the moves allowed answers (each move alone where the engine's MultiPV does not reach that
    /// far, or fewer moves are allowed than lines would be needed).
    MultiPv,
}

/// What this process has learnt of engines that do not keep to `searchmoves`, by command line (its program resolved,
/// as [`engine_label`] records it): an engine started again (a restart after a fault, another worker of the same
/// command, the direct engine after new settings) starts knowing it, instead of losing a first search to the same
/// violation again.
static IGNORING_SEARCHMOVES: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());

/// Whether an engine of `command` was seen in this process answering outside `searchmoves`.
fn known_to_ignore_searchmoves(command: &str) -> bool {
    let command = program_resolved(command);
    IGNORING_SEARCHMOVES.lock().contains(&command)
}

/// Remembers that the engine of `command` does not keep to `searchmoves` (see [`known_to_ignore_searchmoves`]).
fn learnt_to_ignore_searchmoves(command: &str) {
    let command = program_resolved(command);
    let mut known = IGNORING_SEARCHMOVES.lock();
    if !known.contains(&command) {
        known.push(command);
    }
}

/// The `what` of the [`EngineError::IllegalMove`] for a best move outside `searchmoves`.
pub const OUTSIDE_SEARCHMOVES: &str = "best move outside searchmoves";

/// What the handle shares with its watchdog and its [`StopHandle`]s.
struct Link {
    input: Mutex<ChildStdin>,
    state: Mutex<LinkState>,
    /// Wakes the watchdog when a deadline comes earlier than it planned to look.
    wake: Condvar,
    timeouts: Timeouts,
    pid: u32,
    /// The engine's name in the log: every line to and from it is logged at debug level (see [`Link::send`]).
    label: Arc<str>,
    /// When the last line came, in nanoseconds since `epoch` (written for every line, without a lock).
    last_line: AtomicU64,
    epoch: Instant,
}

struct LinkState {
    child: Child,
    phase: Phase,
    /// When the watchdog will look next (`None`: only when woken).
    watch_at: Option<Instant>,
    /// The deadline that the watchdog enforced, for the handle to report.
    expired: Option<EngineError>,
    closed: bool,
    /// `isready` sent whose `readyok` has not come yet.
    pending_readyok: u32,
    /// Counts searches; a stop handle stops only the search of its generation.
    generation: u64,
    searching: bool,
    /// `stop` asked for before `go` was sent.
    stop_requested: bool,
    stop_sent: bool,
    /// The search running is a `go ponder` that has heard neither `ponderhit` nor `stop`.
    pondering: bool,
    /// `ponderhit` asked for before `go ponder` was sent: it follows the `go` at once.
    ponderhit_requested: bool,
}

/// What the engine is expected to do next.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Nothing: no deadline.
    Idle,
    /// Answer by `deadline`.
    Until { deadline: Instant, what: &'static str, after: Duration },
    /// Search, saying something at least every `search_silence`; after a silence it was asked `isready` at `ping`.
    Search { ping: Option<Instant> },
}

impl Link {
    /// Writes a command (or several, a line each): the one place every line to the engine goes through, logged at
    /// debug level with the engine's name and pid (the logger adds the time at that level).
    fn send(&self, command: &str) -> Result<(), EngineError> {
        let mut line = String::with_capacity(command.len() + 1);
        line.push_str(command);
        line.push('\n');
        let mut input = self.input.lock();
        let written = input.write_all(line.as_bytes()).and_then(|()| input.flush()).map_err(io_error);
        drop(input);
        for command in command.lines() {
            debug!("{} ({}) >> {command}", self.label, self.pid);
        }
        written
    }

    fn now_nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn last_line(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.last_line.load(Ordering::Relaxed))
    }

    /// Enters `phase`, waking the watchdog if it must look earlier than planned.
    fn enter(&self, state: &mut LinkState, phase: Phase) {
        state.phase = phase;
        let due = match phase {
            Phase::Idle => return,
            Phase::Until { deadline, .. } => deadline,
            Phase::Search { ping: Some(at) } => at + self.timeouts.handshake,
            Phase::Search { ping: None } => {
                self.last_line.store(self.now_nanos(), Ordering::Relaxed);
                Instant::now() + self.timeouts.search_silence
            }
        };
        if state.watch_at.is_none_or(|at| due < at) {
            self.wake.notify_one();
        }
    }

    fn until(&self, state: &mut LinkState, timeout: Duration, what: &'static str) {
        let deadline = Instant::now() + timeout;
        self.enter(state, Phase::Until { deadline, what, after: timeout });
    }

    /// The watchdog's loop: enforce the deadline of the current phase until the engine is dropped.
    fn watch(&self) {
        let mut state = self.state.lock();
        loop {
            if state.closed {
                return;
            }
            let now = Instant::now();
            let due = match state.phase {
                Phase::Idle => None,
                Phase::Until { deadline, what, after } if now >= deadline => {
                    self.expire(&mut state, what, after);
                    continue;
                }
                Phase::Until { deadline, .. } => Some(deadline),
                Phase::Search { ping: Some(at) } if now >= at + self.timeouts.handshake => {
                    self.expire(&mut state, "readyok during a search", self.timeouts.handshake);
                    continue;
                }
                Phase::Search { ping: Some(at) } => Some(at + self.timeouts.handshake),
                Phase::Search { ping: None } => {
                    let due = self.last_line() + self.timeouts.search_silence;
                    if now < due {
                        Some(due)
                    } else {
                        debug!(
                            "engine pid {}: silent for {:?} in a search, asking isready",
                            self.pid,
                            now - self.last_line()
                        );
                        state.phase = Phase::Search { ping: Some(now) };
                        state.pending_readyok += 1;
                        drop(state);
                        // A failed write: the engine is gone, and its reader sees that.
                        let _ = self.send("isready");
                        state = self.state.lock();
                        continue;
                    }
                }
            };
            state.watch_at = due;
            match due {
                Some(at) => {
                    self.wake.wait_until(&mut state, at);
                }
                None => self.wake.wait(&mut state),
            }
            state.watch_at = None;
        }
    }

    /// A deadline passed: kill the engine, so that its reader sees the end of its output.
    fn expire(&self, state: &mut LinkState, what: &'static str, after: Duration) {
        warn!("engine pid {}: no {what} within {after:?}, killing it", self.pid);
        state.expired = Some(EngineError::Timeout { waiting_for: what, after });
        state.phase = Phase::Idle;
        let _ = state.child.kill();
        kill_process_group(self.pid);
    }
}

/// Kills the process group that an engine leads (it was started as a group of its own), so that the children of a
/// wrapper script that did not `exec` its engine go too (while one of them holds the output open, the handle's read
/// cannot end). There is no std call for it, hence kill(1), on this rare path only; the direct child has been killed
/// already.
fn kill_process_group(pid: u32) {
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{pid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn io_error(e: std::io::Error) -> EngineError {
    EngineError::Io { source: Arc::new(e) }
}

/// How long an engine may take to answer `stop` with its `bestmove` (at most the handshake timeout): an engine that
/// ignores `stop` is taken for hung then, killed and restarted, so that a GUI's `stop` is answered within a second.
pub const STOP_ANSWER: Duration = Duration::from_secs(1);

/// Stops the search an [`Engine`] is running (or is about to run), from any thread.
///
/// A handle belongs to one search: the one running when it was taken, else the next one. Stopping a search that has
/// ended, or an engine that is gone, does nothing.
#[derive(Clone)]
pub struct StopHandle {
    link: Weak<Link>,
    generation: u64,
}

impl std::fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopHandle").field("generation", &self.generation).finish_non_exhaustive()
    }
}

impl StopHandle {
    /// Sends `stop` if the search is running (its `bestmove` is then due within [`STOP_ANSWER`]); if it has
    /// not started, it will not (it ends as [`EngineError::Stopped`]).
    pub fn stop(&self) {
        let Some(link) = self.link.upgrade() else { return };
        let mut state = link.state.lock();
        if state.generation != self.generation {
            return;
        }
        if !state.searching {
            state.stop_requested = true;
        } else if !state.stop_sent {
            state.stop_sent = true;
            link.until(&mut state, link.timeouts.handshake.min(STOP_ANSWER), "bestmove after stop");
            // Sent under the lock, so that it cannot reach a later search. A failed write: the engine is gone, and
            // the search sees that.
            let _ = link.send("stop");
        }
    }

    /// Sends `ponderhit` if the search is a `go ponder` still pondering: the opponent played the expected move, and
    /// the engine's clock runs from here. Before the search has started, the `ponderhit` follows its `go` at once;
    /// to any other search it sends nothing.
    pub fn ponderhit(&self) {
        let Some(link) = self.link.upgrade() else { return };
        let mut state = link.state.lock();
        if state.generation != self.generation || state.stop_sent {
            return;
        }
        if !state.searching {
            state.ponderhit_requested = true;
        } else if state.pondering {
            state.pondering = false;
            // Sent under the lock, as `stop` is: it cannot reach a later search.
            let _ = link.send("ponderhit");
        }
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
            // Its own process group: a timeout kills wrapper and engine together, and a Ctrl-C meant for deeptree
            // does not reach the engines directly.
            .process_group(0)
            .spawn()
            .map_err(spawn_error)?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_error(std::io::Error::other("no pipes to the child")));
        };
        let label = program_path.file_name().map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
        let link = Arc::new(Link {
            input: Mutex::new(stdin),
            state: Mutex::new(LinkState {
                child,
                phase: Phase::Idle,
                watch_at: None,
                expired: None,
                closed: false,
                pending_readyok: 0,
                generation: 0,
                searching: false,
                stop_requested: false,
                stop_sent: false,
                pondering: false,
                ponderhit_requested: false,
            }),
            wake: Condvar::new(),
            timeouts: config.timeouts.bounded(),
            pid,
            label: Arc::from(label.as_str()),
            last_line: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let identity = Arc::new(EngineIdentity {
            name: label.clone(),
            author: None,
            options: Vec::new(),
            command: config.command.clone(),
        });
        let mut engine = Engine {
            link: Arc::clone(&link),
            output: BufReader::new(stdout),
            partial: Vec::new(),
            watchdog: None,
            name: Arc::from(label.as_str()),
            identity,
            multipv: 1,
            searchmoves: config.searchmoves,
            covered: false,
            chess960: false,
        };
        let err_label = label.clone();
        engine.watchdog = Some(
            thread::Builder::new()
                .name(format!("engine-{pid}-watch"))
                .spawn(move || link.watch())
                .and_then(|watchdog| {
                    thread::Builder::new()
                        .name(format!("engine-{pid}-err"))
                        .spawn(move || forward_stderr(stderr, &err_label, pid))
                        .map(|_| watchdog)
                })
                .map_err(spawn_error)?,
        );
        debug!("started engine {:?} (pid {pid})", config.command);
        engine.handshake(config)?;
        // Learnt from an earlier process of the same command, where the configuration does not say.
        if engine.searchmoves == Searchmoves::Unknown && known_to_ignore_searchmoves(&config.command) {
            engine.searchmoves = engine.learnt_method();
        }
        Ok(engine)
    }

    /// How an engine found not to keep to `searchmoves` is asked for the best of some moves: through MultiPV where
    /// it has the option (the cheaper method: `scripts/alternatives` measured a third of the nodes of searching
    /// each move alone), else each move alone.
    fn learnt_method(&self) -> Searchmoves {
        match self.identity.option("MultiPV").map(|o| &o.kind) {
            Some(OptionKind::Spin { max, .. }) if *max > 1 => Searchmoves::MultiPv,
            _ => Searchmoves::Ignored,
        }
    }

    fn handshake(&mut self, config: &EngineConfig) -> Result<(), EngineError> {
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
    fn await_ready(&mut self) -> Result<(), EngineError> {
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

    /// Runs a search to its limit and returns the result.
    pub fn evaluate(&mut self, request: &EvalRequest) -> Result<Evaluation, EngineError> {
        self.search(request, &mut |_| {})
    }

    /// Runs a search; `on_info` sees every `info` line as it comes. A [`StopHandle`] (see [`Engine::stop_handle`])
    /// ends it early: the engine is sent `stop` and its `bestmove` ends the search, marked `stopped`; a stop asked
    /// for before the search started is [`EngineError::Stopped`], and nothing is sent.
    ///
    /// The engine has answered `readyok` to everything that configured it before `go` is sent. The request is
    /// checked before anything is sent; every move the engine sends is checked legal before it is used, and an
    /// illegal (or outside `searchmoves`) best move is an [`EngineError::IllegalMove`].
    ///
    /// Deadlines: an engine silent for [`Timeouts::search_silence`] is asked `isready`, and is hung if it does not
    /// answer within [`Timeouts::handshake`]; after `stop`, `bestmove` must come within [`Timeouts::handshake`].
    ///
    /// `searchmoves` with an engine that does not keep to them (see [`Searchmoves`]): each move is searched on its
    /// own, as the position after it one ply shallower (a depth or node limit is shared out; the replies' own `info`
    /// lines are not passed on, but one line for this position after each move is valued: the best so far), and the
    /// best of the replies' scores, backed up one ply, is the answer at the depth asked.
    pub fn search(&mut self, request: &EvalRequest, on_info: &mut dyn FnMut(&Info)) -> Result<Evaluation, EngineError> {
        let each_move = !request.searchmoves.is_empty() && request.multipv == 1;
        let started = Instant::now();
        let result = if each_move && self.searchmoves == Searchmoves::Ignored {
            self.search_each_move(request, Duration::ZERO, on_info)
        } else if each_move && self.searchmoves == Searchmoves::MultiPv {
            self.search_by_multipv(request, Duration::ZERO, on_info)
        } else {
            match self.start_and_read(request, on_info) {
                // An answer within `searchmoves` proves nothing (the engine's own best move may be among them):
                // only a violation is learnt, and only the configuration says an engine keeps to them.
                // A search cut short by `stop` may answer with any move (its hash's, the first legal one): no lesson,
                // and no second search for a caller that wanted it over.
                Err(EngineError::IllegalMove { what: OUTSIDE_SEARCHMOVES, .. })
                    if each_move && self.link.state.lock().stop_sent =>
                {
                    Err(EngineError::Stopped)
                }
                Err(EngineError::IllegalMove { what: OUTSIDE_SEARCHMOVES, .. })
                    if each_move && self.searchmoves == Searchmoves::Unknown =>
                {
                    self.searchmoves = self.learnt_method();
                    let how = if self.searchmoves == Searchmoves::MultiPv {
                        "the moves allowed are asked through MultiPV (each alone where fewer are allowed than its \
                         lines would need)"
                    } else {
                        "each move is searched on its own"
                    };
                    warn!("{} does not keep to searchmoves: {how}", self.name);
                    learnt_to_ignore_searchmoves(&self.identity.command);
                    let spent = started.elapsed();
                    self.end_search_phase(false);
                    if self.searchmoves == Searchmoves::MultiPv {
                        self.search_by_multipv(request, spent, on_info)
                    } else {
                        self.search_each_move(request, spent, on_info)
                    }
                }
                result => result,
            }
        };
        // However the search ended, it is over: its stop handles no longer apply.
        self.end_search_phase(true);
        result
    }

    /// Back to idle after a search; `last`: the search asked for is over, so that its stop handles no longer apply
    /// (otherwise one of several searches that answer it ended, and a stop still applies to the next).
    fn end_search_phase(&self, last: bool) {
        let mut state = self.link.state.lock();
        state.searching = false;
        state.pondering = false;
        // A stop sent to one of several searches that answer one request holds for the rest of them.
        state.stop_requested |= state.stop_sent && !last;
        state.stop_sent = false;
        if last {
            state.stop_requested = false;
            state.ponderhit_requested = false;
            state.generation += 1;
        }
        self.link.enter(&mut state, Phase::Idle);
    }

    /// A search restricted to `searchmoves` as one search of the whole position with MultiPV (see
    /// [`Searchmoves::MultiPv`]): with `n` moves left out, `n + 1` lines hold the best of the moves allowed, and
    /// the first line whose move is allowed answers, with its score and depth. Each move is searched alone instead
    /// where the engine's MultiPV does not reach `n + 1`, where fewer moves are allowed than that (a search of one
    /// move would cost all the lines of the others), or where no line came for an allowed move. `spent`: the time a
    /// first search (the one that broke `searchmoves`) already took of a `movetime`.
    ///
    /// `on_info` gets, at each depth, the engine's first line for an allowed move (the best of them at that depth),
    /// without its multipv: the other lines are of moves the caller did not ask about, or worse.
    fn search_by_multipv(
        &mut self,
        request: &EvalRequest,
        spent: Duration,
        on_info: &mut dyn FnMut(&Info),
    ) -> Result<Evaluation, EngineError> {
        request.validate()?;
        let pos = request.position.position().clone();
        let allowed =
            |first: &UciMove| request.searchmoves.iter().any(|s| s.to_move(&pos).ok() == first.to_move(&pos).ok());
        let left_out = pos.legal_moves().len().saturating_sub(request.searchmoves.len());
        let lines = u32::try_from(left_out + 1).unwrap_or(u32::MAX);
        let reaches = match self.identity.option("MultiPV").map(|o| &o.kind) {
            Some(OptionKind::Spin { max, .. }) => i64::from(lines) <= *max,
            _ => false,
        };
        if !reaches || request.searchmoves.len() < left_out + 1 {
            debug!(
                "{}: {lines} lines of MultiPV for {} moves: each move is searched alone",
                self.name,
                request.searchmoves.len()
            );
            return self.search_each_move(request, spent, on_info);
        }
        let limit = match request.limit {
            Limit::MoveTime(time) => Limit::MoveTime(time.saturating_sub(spent).max(Duration::from_millis(1))),
            limit => limit,
        };
        // A screen's bound is for the moves allowed; the first lines here may be of others.
        let whole = EvalRequest { searchmoves: Vec::new(), multipv: lines, limit, screen: None, ..request.clone() };
        let mut shown_depth = 0;
        let mut relay = |info: &Info| {
            let (Some(depth), Some(first)) = (info.depth, info.pv.first()) else { return };
            if depth > shown_depth && allowed(first) {
                shown_depth = depth;
                on_info(&Info { multipv: None, ..info.clone() });
            }
        };
        let evaluation = self.start_and_read(&whole, &mut relay)?;
        let best = evaluation.lines().filter(|l| l.pv.first().is_some_and(&allowed)).min_by_key(|l| l.multipv).cloned();
        let Some(mut line) = best else {
            if evaluation.stopped {
                return Err(EngineError::Stopped);
            }
            debug!("{}: no line of MultiPV {lines} for a move allowed: each move is searched alone", self.name);
            self.end_search_phase(false);
            return self.search_each_move(request, spent, on_info);
        };
        line.multipv = 1;
        // The line's moves are legal from the position: the collector checked them as they came.
        let Some(&best_move) = line.pv.first() else { return Err(EngineError::NoScore) };
        Ok(Evaluation {
            best_move,
            ponder: line.pv.get(1).copied(),
            line,
            other_lines: Vec::new(),
            asked: Asked::MultiPv,
            ..evaluation
        })
    }

    /// A search restricted to `searchmoves` as one search of the position after each move (see [`Engine::search`]).
    /// `spent`: the time a first search (the one that broke `searchmoves`) already took of a time limit.
    ///
    /// The replies' own `info` lines are not passed on (they are for the positions after the moves): after each move
    /// is valued, `on_info` gets one line for the position asked: the best so far (its line, its score backed up,
    /// a lower bound while moves are left), the depth of the shallowest reply plus one, the replies' nodes summed
    /// and the time since the search began (`spent` included).
    fn search_each_move(
        &mut self,
        request: &EvalRequest,
        spent: Duration,
        on_info: &mut dyn FnMut(&Info),
    ) -> Result<Evaluation, EngineError> {
        request.validate()?;
        let began = Instant::now();
        let count = request.searchmoves.len() as u32;
        let white = request.position.position().turn().is_white();
        let limit = match request.limit {
            Limit::Depth(depth) => Limit::Depth(depth.saturating_sub(1).max(1)),
            Limit::Nodes(nodes) => Limit::Nodes((nodes / u64::from(count)).max(1)),
            Limit::MoveTime(time) => Limit::MoveTime(time.saturating_sub(spent) / count),
            // A clock: a share of the side's own time (a thirtieth and half the increment), less what was spent.
            Limit::Clock { wtime, btime, winc, binc, .. } => {
                let (own, inc) = if white { (wtime, winc) } else { (btime, binc) };
                let share = Duration::from_millis(own / 30 + inc / 2);
                Limit::MoveTime(share.saturating_sub(spent) / count)
            }
            Limit::Infinite | Limit::PonderClock { .. } => {
                return Err(EngineError::InvalidRequest(format!(
                    "{} does not keep to searchmoves, and a search without a limit cannot be shared out among the \
                     moves",
                    self.name
                )));
            }
        };
        let pos = request.position.position().clone();
        let mut best: Option<(Score, UciMove, PvLine, Option<UciMove>)> = None;
        let (mut nodes, mut stopped, mut first_go, mut last_read) = (0u64, false, None, None);
        // The shallowest reply (a depth reached by all of them), and the moves valued.
        let mut reply_depth: Option<u32> = None;
        let mut searched = 0usize;
        for uci in &request.searchmoves {
            let m =
                uci.to_move(&pos).map_err(|_| EngineError::InvalidRequest(format!("searchmove {uci} is illegal")))?;
            let mut after = pos.clone();
            after.play_unchecked(m);
            // A move that ends the game is valued here: nothing is left to search after it.
            // A draw by rule after the move is one too: searched as its own root, the engine would not see it.
            let (score, bound, line, ponder) = if after.is_checkmate() {
                (Score::mate_in_plies(1), Bound::Exact, vec![canonical(m)], None)
            } else if after.is_stalemate()
                || after.is_insufficient_material()
                || after.halfmoves() >= 100
                || request.position.occurrences(&after) >= 2
            {
                (Score::cp(0), Bound::Exact, vec![canonical(m)], None)
            } else {
                let reply = EvalRequest::new(request.position.then(uci)?, limit);
                let evaluation = match self.start_and_read(&reply, &mut |_| {}) {
                    Ok(evaluation) => evaluation,
                    // Stopped between two searches: what was found so far answers.
                    Err(EngineError::Stopped) if best.is_some() => {
                        stopped = true;
                        break;
                    }
                    Err(e) => return Err(e),
                };
                self.end_search_phase(false);
                nodes += evaluation.nodes;
                first_go.get_or_insert(evaluation.timing.go_sent);
                last_read = Some(evaluation.timing.bestmove_read);
                stopped |= evaluation.stopped;
                reply_depth = Some(reply_depth.map_or(evaluation.line.depth, |d: u32| d.min(evaluation.line.depth)));
                // Sign flip: the reply's score is for the side to move after the move; backed up one ply, and a
                // bound of the reply is the other bound for the mover.
                let score = evaluation.line.score.back_up();
                let bound = evaluation.line.bound.flipped();
                let mut line = vec![canonical(m)];
                line.extend(evaluation.line.pv.iter().copied());
                (score, bound, line, Some(evaluation.best_move))
            };
            searched += 1;
            if best.as_ref().is_none_or(|(b, ..)| score.value() > b.value()) {
                let pv = PvLine { multipv: 1, score, bound, depth: 0, seldepth: 0, pv: line };
                best = Some((score, canonical(m), pv, ponder));
            }
            if let Some((score, _, line, _)) = &best {
                // The best of the moves valued so far: while moves are left, the best of all is at least as good.
                let bound = if searched < request.searchmoves.len() { Bound::Lower } else { line.bound };
                // Since the search began: the first search, which broke searchmoves, counts.
                let elapsed_ms = (spent + began.elapsed()).as_millis() as u64;
                on_info(&Info {
                    depth: Some(reply_depth.map_or(1, |d| d + 1)),
                    score: Some((*score, bound)),
                    nodes: Some(nodes),
                    nps: (elapsed_ms > 0).then(|| nodes.saturating_mul(1000) / elapsed_ms),
                    time_ms: Some(elapsed_ms),
                    pv: line.pv.clone(),
                    ..Info::default()
                });
            }
            if stopped {
                break;
            }
        }
        let Some((_, best_move, mut line, ponder)) = best else { return Err(EngineError::Stopped) };
        let depth = match (request.limit, reply_depth) {
            (Limit::Depth(depth), _) if !stopped => depth,
            (_, Some(reply)) => reply + 1,
            (_, None) => 1,
        };
        (line.depth, line.seldepth) = (depth, depth);
        // Stopped before every move was valued: the best of some moves, a lower bound of the best of all.
        if searched < request.searchmoves.len() {
            line.bound = Bound::Lower;
        }
        let now = Instant::now();
        Ok(Evaluation {
            best_move,
            ponder,
            line,
            other_lines: Vec::new(),
            nodes,
            stopped,
            screened: None,
            engine: Arc::clone(&self.name),
            timing: SearchTiming { go_sent: first_go.unwrap_or(now), bestmove_read: last_read.unwrap_or(now) },
            asked: Asked::EachMove,
        })
    }

    fn start_and_read(
        &mut self,
        request: &EvalRequest,
        on_info: &mut dyn FnMut(&Info),
    ) -> Result<Evaluation, EngineError> {
        request.validate()?;
        if request.multipv != self.multipv {
            self.set_option("MultiPV", &request.multipv.to_string())?;
        }
        self.await_ready()?;
        {
            let mut state = self.link.state.lock();
            if state.stop_requested {
                return Err(EngineError::Stopped);
            }
            state.searching = true;
            let ponder = matches!(request.limit, Limit::PonderClock { .. });
            state.pondering = ponder && !state.ponderhit_requested;
            self.link.enter(&mut state, Phase::Search { ping: None });
            // Sent under the lock, so that a stop comes either before this (and is kept) or after `go`, and a
            // `ponderhit` that came before `go ponder` follows it at once.
            let mut command =
                format!("{}\n{}", request.position.uci_command_in(self.chess960), request.go_command_in(self.chess960));
            if ponder && std::mem::take(&mut state.ponderhit_requested) {
                command.push_str("\nponderhit");
            }
            self.link.send(&command)?;
        }
        let go_sent = Instant::now();
        self.read_search(request, on_info, go_sent)
    }

    fn read_search(
        &mut self,
        request: &EvalRequest,
        on_info: &mut dyn FnMut(&Info),
        go_sent: Instant,
    ) -> Result<Evaluation, EngineError> {
        let mut collector = Collector::new(request.multipv);
        let mut screened: Option<PvLine> = None;
        loop {
            match self.recv()? {
                EngineMessage::Info(info) => {
                    collector.add(&info);
                    on_info(&info);
                    let cut = if screened.is_none() {
                        request.screen.and_then(|cut| screen_cut(request, &info, cut))
                    } else {
                        None
                    };
                    // Lines after a `stop` (a cancel's) come from an iteration cut short: never a screen's answer.
                    let stop_sent = cut.is_some() && self.link.state.lock().stop_sent;
                    if let Some(line) = cut.filter(|_| !stop_sent) {
                        trace!("{} screened at depth {} ({}): stop", self.name, line.depth, line.score);
                        screened = Some(line);
                        self.stop_handle().stop();
                    }
                }
                EngineMessage::BestMove { best, ponder } => {
                    let timing = SearchTiming { go_sent, bestmove_read: Instant::now() };
                    let stopped = self.link.state.lock().stop_sent;
                    let mut evaluation =
                        collector.finish(request, &best, ponder.as_deref(), stopped, &self.name, timing)?;
                    evaluation.screened = screened;
                    return Ok(evaluation);
                }
                _ => {}
            }
        }
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
        let mut skipping = false;
        loop {
            self.partial.clear();
            match (&mut self.output).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut self.partial) {
                Ok(0) => return Err(EngineError::Eof),
                Ok(_) if self.partial.last() != Some(&b'\n') && self.partial.len() > MAX_LINE => skipping = true,
                Ok(_) if skipping => {
                    debug!("{}: skipped a line longer than {MAX_LINE} bytes", self.name);
                    skipping = false;
                }
                Ok(_) => {
                    while matches!(self.partial.last(), Some(b'\n' | b'\r')) {
                        self.partial.pop();
                    }
                    return Ok(String::from_utf8_lossy(&self.partial).into_owned());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(e)),
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let pid = self.link.pid;
        {
            let mut state = self.link.state.lock();
            state.closed = true;
            self.link.wake.notify_one();
            let _ = state.child.kill();
            match state.child.wait() {
                Ok(status) => debug!("engine {} (pid {pid}) ended: {status}", self.name),
                Err(e) => warn!("engine {} (pid {pid}) not reaped: {e}", self.name),
            }
        }
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
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

/// The line at which `cut` stops the search: an exact score for the best line, at the screen's depth or deeper,
/// below its bound, with a legal first move (among `searchmoves` when they were given).
fn screen_cut(request: &EvalRequest, info: &Info, cut: ScreenCut) -> Option<PvLine> {
    let (score, bound) = info.score?;
    let depth = info.depth?;
    if bound != Bound::Exact || info.multipv.unwrap_or(1) != 1 || depth < cut.from_depth || score >= cut.below {
        return None;
    }
    // The search's own last iteration ends it anyway: no `stop` to send after its `bestmove`.
    if let Limit::Depth(limit) = request.limit
        && depth >= limit
    {
        return None;
    }
    let pos = request.position.position();
    let moves = played(pos, &info.pv);
    let first = *moves.first()?;
    if !request.searchmoves.is_empty() && !request.searchmoves.iter().any(|s| s.to_move(pos).ok() == Some(first)) {
        return None;
    }
    let pv = moves.into_iter().map(canonical).collect();
    Some(PvLine { multipv: 1, score, bound, depth, seldepth: info.seldepth.unwrap_or(depth), pv })
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
        timing: SearchTiming,
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
            return Err(illegal(OUTSIDE_SEARCHMOVES));
        }
        let mut after = pos.clone();
        after.play_unchecked(best_move);
        let ponder = ponder
            .and_then(|p| UciMove::from_ascii(p.as_bytes()).ok())
            .and_then(|uci| uci.to_move(&after).ok().map(canonical));
        let mut lines = self.slots.into_iter().filter_map(|(multipv, slot)| {
            let raw = slot.exact.or(slot.bounded)?;
            Some(PvLine {
                multipv,
                score: raw.score,
                bound: raw.bound,
                depth: raw.depth,
                seldepth: raw.seldepth,
                pv: played(pos, &raw.pv).into_iter().map(canonical).collect(),
            })
        });
        let line = match lines.next().filter(|l| l.multipv == 1) {
            Some(line) => line,
            // Stopped before its first scored line: not the engine's fault.
            None if stopped => return Err(EngineError::Stopped),
            None => return Err(EngineError::NoScore),
        };
        Ok(Evaluation {
            best_move: canonical(best_move),
            ponder,
            line,
            other_lines: lines.collect(),
            nodes: self.nodes,
            stopped,
            screened: None,
            engine: Arc::clone(engine),
            timing,
            asked: Asked::AsRequested,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_option_is_threads_or_the_engines_own_count_of_threads() {
        let spin =
            |name: &str| EngineOption { name: name.into(), kind: OptionKind::Spin { default: 1, min: 1, max: 8 } };
        let identity = |options: Vec<EngineOption>| EngineIdentity {
            name: "x".into(),
            author: None,
            options,
            command: "x".into(),
        };
        let stockfish = identity(vec![spin("Hash"), spin("Threads")]);
        assert_eq!(stockfish.thread_option().map(|o| o.name.as_str()), Some("Threads"));
        let toga = identity(vec![spin("Hash"), spin("Number of Threads")]);
        assert_eq!(toga.thread_option().map(|o| o.name.as_str()), Some("Number of Threads"));
        let single = identity(vec![spin("Hash")]);
        assert!(single.thread_option().is_none());
    }

    #[test]
    fn one_program_by_name_or_by_path_is_one_engine_label() {
        let path = resolve_program("sh");
        assert!(path.is_absolute(), "sh is on PATH: {}", path.display());
        let by_name =
            EngineIdentity { name: "X".into(), author: None, options: vec![], command: "sh -c 'true'".into() };
        let by_path = EngineIdentity { command: format!("{} -c true", path.display()), ..by_name.clone() };
        assert_eq!(by_name.label(), by_path.label());
        // A program that is not found, or a path, is recorded as given.
        let missing = EngineIdentity { command: "no-such-engine-here --x".into(), ..by_name.clone() };
        assert_eq!(missing.label(), "X (no-such-engine-here --x)");
        let relative = EngineIdentity { command: "./engines/sf".into(), ..by_name };
        assert_eq!(relative.label(), "X (./engines/sf)");
    }

    #[test]
    fn a_label_of_the_store_is_made_canonical_as_engine_label_writes_it() {
        let sh = resolve_program("sh").display().to_string();
        // Written before programs were resolved, and today: one label.
        assert_eq!(canonical_label("Shell 1.0 (sh -c true)"), format!("Shell 1.0 ({sh} -c true)"));
        assert_eq!(canonical_label(&format!("Shell 1.0 ({sh} -c true)")), format!("Shell 1.0 ({sh} -c true)"));
        // Parentheses in the name or in the command.
        assert_eq!(canonical_label("Fish (dev) (sh -c 'x (y)')"), format!("Fish (dev) ({sh} -c x (y))"));
        // Remote engines on two machines stay two; labels of other shapes and missing programs stay as they are.
        assert_ne!(canonical_label("SF 15 (ssh a stockfish)"), canonical_label("SF 15 (ssh b stockfish)"));
        for kept in ["scripted", "X (no-such-engine-here --x)", "X (./engines/sf)", "odd )(", "(sh)"] {
            assert_eq!(canonical_label(kept), kept);
        }
    }
}
