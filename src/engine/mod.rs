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

use std::{io, sync::Arc, time::Duration};

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
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// The command line is empty or badly quoted.
    #[error("bad engine command {command:?}: {reason}")]
    BadCommand { command: String, reason: String },
    /// The process could not be started.
    #[error("cannot start engine {command:?}: {source}")]
    Spawn { command: String, source: Arc<io::Error> },
    /// Reading from or writing to the engine failed (a broken pipe: it died).
    #[error("cannot talk to the engine: {source}")]
    Io { source: Arc<io::Error> },
    /// The engine closed its output: it exited or crashed.
    #[error("the engine closed its output (it exited or crashed)")]
    Eof,
    /// The engine did not answer in time.
    #[error("the engine did not answer in {after:?} (waiting for {waiting_for})")]
    Timeout { waiting_for: &'static str, after: Duration },
    /// The engine sent a best move that is illegal (or not one of `searchmoves`).
    #[error("the engine sent {what} {mv:?} in {fen}")]
    IllegalMove { mv: String, fen: String, what: &'static str },
    /// The engine ended a search without a score for its first line.
    #[error("the engine ended its search without a score")]
    NoScore,
    /// The search was stopped before it started; nothing was sent.
    #[error("the search was stopped before it started")]
    Stopped,
    /// The request cannot be sent (bad FEN, illegal move, no legal move, unknown option...). Not the engine's fault.
    #[error("invalid engine request: {0}")]
    InvalidRequest(String),
}

impl EngineError {
    /// A fault of the engine process: it is killed and restarted, and the job retried. Other errors are the
    /// request's or the command line's.
    pub fn is_engine_fault(&self) -> bool {
        !matches!(self, EngineError::InvalidRequest(_) | EngineError::BadCommand { .. } | EngineError::Stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    /// The I/O error under a failed start or a broken pipe is reachable through `source()` (as the shared
    /// `Arc<io::Error>` the variant holds, as with [`StoreError`](crate::store::StoreError)).
    #[test]
    fn wrapped_errors_are_sources() {
        let spawn = EngineError::Spawn {
            command: "stockfish".to_owned(),
            source: Arc::new(io::Error::new(io::ErrorKind::NotFound, "no such file")),
        };
        assert_eq!(spawn.to_string(), "cannot start engine \"stockfish\": no such file");
        let source = spawn.source().expect("a source");
        assert_eq!(source.to_string(), "no such file");
        assert_eq!(source.downcast_ref::<Arc<io::Error>>().map(|e| e.kind()), Some(io::ErrorKind::NotFound));
        assert!(source.source().is_none());

        let pipe = EngineError::Io { source: Arc::new(io::Error::from(io::ErrorKind::BrokenPipe)) };
        assert_eq!(
            pipe.source().and_then(|e| e.downcast_ref::<Arc<io::Error>>()).map(|e| e.kind()),
            Some(io::ErrorKind::BrokenPipe)
        );
        assert!(EngineError::Eof.source().is_none());
    }

    /// The messages, word for word.
    #[test]
    fn messages() {
        let cases = [
            (
                EngineError::BadCommand { command: "a 'b".into(), reason: "missing closing quote".into() },
                "bad engine command \"a 'b\": missing closing quote",
            ),
            (
                EngineError::Io { source: Arc::new(io::Error::other("broken pipe")) },
                "cannot talk to the engine: broken pipe",
            ),
            (EngineError::Eof, "the engine closed its output (it exited or crashed)"),
            (
                EngineError::Timeout { waiting_for: "readyok", after: Duration::from_millis(1500) },
                "the engine did not answer in 1.5s (waiting for readyok)",
            ),
            (
                EngineError::IllegalMove {
                    mv: "e2e5".into(),
                    fen: "8/8/8/8/8/8/8/K1k5 w - - 0 1".into(),
                    what: "bestmove",
                },
                "the engine sent bestmove \"e2e5\" in 8/8/8/8/8/8/8/K1k5 w - - 0 1",
            ),
            (EngineError::NoScore, "the engine ended its search without a score"),
            (EngineError::Stopped, "the search was stopped before it started"),
            (EngineError::InvalidRequest("no legal move".into()), "invalid engine request: no legal move"),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
    }
}
