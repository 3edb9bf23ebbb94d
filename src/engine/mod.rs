//! Inner engines: UCI processes that evaluate positions for the tree.
//!
//! - [`Engine`] is the handle of one process: spawn, handshake, options, `position`/`go`/`stop`, with deadlines.
//! - [`EnginePool`] runs N workers, each owning its own process on its own thread, and restarts an engine that
//!   fails (with a growing, jittered back-off), retrying its job on fresh processes.
//! - [`protocol`] parses engine output; [`EvalRequest`]/[`Evaluation`] are what is asked and answered.
//! - [`bench`](mod@bench) measures the pool against a bare loop over pipes.
//!
//! Scores are from the point of view of the side to move in the searched position. Every move an engine sends is
//! checked legal before it is used, and nothing an engine sends can make deeptree panic.

pub mod bench;
mod command;
mod jobs;
mod pool;
mod process;
pub mod protocol;
mod request;
pub mod spec;
mod worker;

use std::{fmt, io, sync::Arc, time::Duration};

pub use self::command::{program_exists, resolve_program, split_command_line};
pub use self::pool::{EnginePool, JobId, JobOutcome, JobResult};
pub use self::process::{
    Engine, EngineConfig, EngineIdentity, OUTSIDE_SEARCHMOVES, RestartPolicy, STOP_ANSWER, Searchmoves, StopHandle,
    Timeouts, canonical_label, engine_label, note_option_not_set,
};
pub use self::request::{Asked, EnginePosition, EvalRequest, Evaluation, Limit, PvLine, ScreenCut, SearchTiming};

/// Workers to run by default: one per available core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What can go wrong with an inner engine or a request to it.
#[derive(Debug, Clone)]
pub enum EngineError {
    /// The command line is empty or badly quoted.
    BadCommand { command: String, reason: String },
    /// The process could not be started.
    Spawn { command: String, source: Arc<io::Error> },
    /// Reading from or writing to the engine failed (a broken pipe: it died).
    Io { source: Arc<io::Error> },
    /// The engine closed its output: it exited or crashed.
    Eof,
    /// The engine did not answer in time.
    Timeout { waiting_for: &'static str, after: Duration },
    /// The engine sent a best move that is illegal (or not one of `searchmoves`).
    IllegalMove { mv: String, fen: String, what: &'static str },
    /// The engine ended a search without a score for its first line.
    NoScore,
    /// The search was stopped before it started; nothing was sent.
    Stopped,
    /// The request cannot be sent (bad FEN, illegal move, no legal move, unknown option...). Not the engine's fault.
    InvalidRequest(String),
}

impl EngineError {
    /// A fault of the engine process: it is killed and restarted, and the job retried. Other errors are the
    /// request's or the command line's.
    pub fn is_engine_fault(&self) -> bool {
        !matches!(self, EngineError::InvalidRequest(_) | EngineError::BadCommand { .. } | EngineError::Stopped)
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::BadCommand { command, reason } => {
                write!(f, "bad engine command {command:?}: {reason}")
            }
            EngineError::Spawn { command, source } => {
                write!(f, "cannot start engine {command:?}: {source}")
            }
            EngineError::Io { source } => write!(f, "cannot talk to the engine: {source}"),
            EngineError::Eof => write!(f, "the engine closed its output (it exited or crashed)"),
            EngineError::Timeout { waiting_for, after } => {
                write!(f, "the engine did not answer in {after:?} (waiting for {waiting_for})")
            }
            EngineError::IllegalMove { mv, fen, what } => {
                write!(f, "the engine sent {what} {mv:?} in {fen}")
            }
            EngineError::NoScore => write!(f, "the engine ended its search without a score"),
            EngineError::Stopped => write!(f, "the search was stopped before it started"),
            EngineError::InvalidRequest(reason) => write!(f, "invalid engine request: {reason}"),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Spawn { source, .. } | EngineError::Io { source } => Some(source.as_ref()),
            _ => None,
        }
    }
}
