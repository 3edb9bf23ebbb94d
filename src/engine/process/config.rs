//! How to run one inner engine and who it says it is: its command line, options, deadlines and restart policy
//! ([`EngineConfig`]), the identity it gives in the handshake, the label the store records it under, and what this
//! process has learnt of engines that do not keep to `searchmoves`.

use std::time::Duration;

use log::{debug, warn};

use super::super::{
    EngineError,
    command::{resolve_program, split_command_line},
    protocol::{EngineOption, OptionKind},
};

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
    pub(super) fn bounded(self) -> Timeouts {
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
pub(super) fn program_resolved(command: &str) -> String {
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
pub(super) fn known_to_ignore_searchmoves(command: &str) -> bool {
    let command = program_resolved(command);
    IGNORING_SEARCHMOVES.lock().contains(&command)
}

/// Remembers that the engine of `command` does not keep to `searchmoves` (see [`known_to_ignore_searchmoves`]).
pub(super) fn learnt_to_ignore_searchmoves(command: &str) {
    let command = program_resolved(command);
    let mut known = IGNORING_SEARCHMOVES.lock();
    if !known.contains(&command) {
        known.push(command);
    }
}

/// The `what` of the [`EngineError::IllegalMove`] for a best move outside `searchmoves`.
pub const OUTSIDE_SEARCHMOVES: &str = "best move outside searchmoves";

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
