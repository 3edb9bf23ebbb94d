//! What the handle shares with its watchdog thread and its stop handles: the pipe to the engine, the phase of the
//! conversation and its deadline. The watchdog asks a silent searching engine `isready` and kills an engine whose
//! answer is late (its whole process group), so that the worker restarts it; a [`StopHandle`] sends `stop` or
//! `ponderhit` from any thread.

use std::{
    io::Write,
    process::{Child, ChildStdin},
    sync::{
        Arc, Weak,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use log::{debug, warn};
use parking_lot::{Condvar, Mutex};

use super::{super::EngineError, config::Timeouts};

/// What the handle shares with its watchdog and its [`StopHandle`]s.
pub(super) struct Link {
    pub(super) input: Mutex<ChildStdin>,
    pub(super) state: Mutex<LinkState>,
    /// Wakes the watchdog when a deadline comes earlier than it planned to look.
    pub(super) wake: Condvar,
    pub(super) timeouts: Timeouts,
    pub(super) pid: u32,
    /// The engine's name in the log: every line to and from it is logged at debug level (see [`Link::send`]).
    pub(super) label: Arc<str>,
    /// When the last line came, in nanoseconds since `epoch` (written for every line, without a lock).
    pub(super) last_line: AtomicU64,
    pub(super) epoch: Instant,
}

pub(super) struct LinkState {
    pub(super) child: Child,
    pub(super) phase: Phase,
    /// When the watchdog will look next (`None`: only when woken).
    pub(super) watch_at: Option<Instant>,
    /// The deadline that the watchdog enforced, for the handle to report.
    pub(super) expired: Option<EngineError>,
    pub(super) closed: bool,
    /// `isready` sent whose `readyok` has not come yet.
    pub(super) pending_readyok: u32,
    /// Counts searches; a stop handle stops only the search of its generation.
    pub(super) generation: u64,
    pub(super) searching: bool,
    /// `stop` asked for before `go` was sent.
    pub(super) stop_requested: bool,
    pub(super) stop_sent: bool,
    /// The search running is a `go ponder` that has heard neither `ponderhit` nor `stop`.
    pub(super) pondering: bool,
    /// `ponderhit` asked for before `go ponder` was sent: it follows the `go` at once.
    pub(super) ponderhit_requested: bool,
}

/// What the engine is expected to do next.
#[derive(Debug, Clone, Copy)]
pub(super) enum Phase {
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
    pub(super) fn send(&self, command: &str) -> Result<(), EngineError> {
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

    pub(super) fn now_nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub(super) fn last_line(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.last_line.load(Ordering::Relaxed))
    }

    /// Enters `phase`, waking the watchdog if it must look earlier than planned.
    pub(super) fn enter(&self, state: &mut LinkState, phase: Phase) {
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

    pub(super) fn until(&self, state: &mut LinkState, timeout: Duration, what: &'static str) {
        let deadline = Instant::now() + timeout;
        self.enter(state, Phase::Until { deadline, what, after: timeout });
    }

    /// The watchdog's loop: enforce the deadline of the current phase until the engine is dropped.
    pub(super) fn watch(&self) {
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
/// cannot end). Called before the leader is reaped, so that its group id cannot have been taken by another process.
/// By kill(2) itself: a machine without a kill(1) program (a slim container) must not leave a hung engine running.
pub(super) fn kill_process_group(pid: u32) {
    // Never 0 or 1: kill(0) and kill(-1) would reach deeptree's own group and every process of the user.
    let Some(group) = i32::try_from(pid).ok().filter(|&pid| pid > 1) else { return };
    // SAFETY: kill(2) with a negative pid and SIGKILL only sends a signal; it touches no memory of this process.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

pub(super) fn io_error(e: std::io::Error) -> EngineError {
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
    pub(super) link: Weak<Link>,
    pub(super) generation: u64,
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
