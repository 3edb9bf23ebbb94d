//! What a search thread is given: its [`Context`] (the options and engines' configurations of its `go`, the store, a
//! snapshot of the depth model) and its [`Control`], the receiving end of the session's [`Signal`]s.
//!
//! The session owns its state. A search thread borrows what it needs by value and hands the engines back with its
//! answer; the session steers it only by messages: `stop` and `ponderhit` are [`Signal`]s on a channel, and a
//! search blocks on that channel (with a deadline where it also has something to report), never on a flag polled
//! with sleeps.

use std::{sync::Arc, time::Instant};

use crossbeam_channel::{Receiver, Sender, select, unbounded};

use super::{depth::DepthModel, message::InfoOut, options::Options, time::Overhead};
use crate::{
    engine::{EngineConfig, StopHandle},
    store::Store,
};

/// What the session tells a running search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The GUI's `stop`: answer now.
    Stop,
    /// The GUI's `ponderhit`: the move pondered on was played, the clock runs.
    PonderHit,
}

/// The session's end of a search's signals, and of the stop handles its direct engine searches announce.
#[derive(Debug)]
pub struct Steer {
    signals: Sender<Signal>,
    stop_handles: Receiver<StopHandle>,
    /// The search may still announce stop handles (its end of the channel is open).
    announcing: bool,
    /// The last stop handle announced: `stop` stops the direct engine's search at once through it.
    handle: Option<StopHandle>,
    stop_sent: bool,
    /// `ponderhit` has been sent.
    ponderhit_sent: bool,
}

impl Steer {
    /// A pair: the session keeps the [`Steer`], the search thread takes the [`Control`].
    pub fn pair(received: Instant) -> (Steer, Control) {
        let (signals, rx) = unbounded();
        let (handles, stop_handles) = unbounded();
        let steer =
            Steer { signals, stop_handles, announcing: true, handle: None, stop_sent: false, ponderhit_sent: false };
        (steer, Control { signals: rx, handles: Some(handles), stopped: false, ponderhit: false, received })
    }

    /// Sends a signal (`stop` also stops the direct engine's search, and `ponderhit` reaches a direct engine that
    /// ponders); a search that has ended no longer listens, and that is no error.
    pub fn send(&mut self, signal: Signal) {
        match signal {
            Signal::Stop => {
                self.stop_sent = true;
                if let Some(handle) = &self.handle {
                    handle.stop();
                }
            }
            Signal::PonderHit => {
                self.ponderhit_sent = true;
                if let Some(handle) = &self.handle {
                    handle.ponderhit();
                }
            }
        }
        let _ = self.signals.send(signal);
    }

    /// `stop` has been sent.
    pub fn stop_sent(&self) -> bool {
        self.stop_sent
    }

    /// `ponderhit` has been sent.
    pub fn ponderhit_sent(&self) -> bool {
        self.ponderhit_sent
    }

    /// The stop handles the search may still announce, to select on (never ready once it can announce none).
    pub fn handles(&self) -> Receiver<StopHandle> {
        if self.announcing { self.stop_handles.clone() } else { crossbeam_channel::never() }
    }

    /// What [`Steer::handles`] gave: a handle to keep, or the end of the announcements.
    pub fn heard(&mut self, handle: Result<StopHandle, crossbeam_channel::RecvError>) {
        match handle {
            Ok(handle) => self.take_handle(handle),
            Err(_) => self.announcing = false,
        }
    }

    /// A stop handle the search announced: kept for the next `stop` (or `ponderhit`), used at once if `stop` (or
    /// `ponderhit`, which reaches only a `go ponder`) came before it.
    fn take_handle(&mut self, handle: StopHandle) {
        if self.stop_sent {
            handle.stop();
        } else if self.ponderhit_sent {
            handle.ponderhit();
        }
        self.handle = Some(handle);
    }
}

/// A search thread's end of the session's signals, with what it has heard so far.
#[derive(Debug)]
pub struct Control {
    signals: Receiver<Signal>,
    /// Where the direct engine's stop handle is announced to the session (none for a quick search after `stop`).
    handles: Option<Sender<StopHandle>>,
    stopped: bool,
    ponderhit: bool,
    /// When the GUI's `go` was read.
    pub received: Instant,
}

impl Control {
    fn take(&mut self, signal: Signal) {
        match signal {
            Signal::Stop => self.stopped = true,
            Signal::PonderHit => self.ponderhit = true,
        }
    }

    /// Takes the signals already sent, without waiting. A session that has gone counts as `stop`.
    fn poll(&mut self) {
        loop {
            match self.signals.try_recv() {
                Ok(signal) => self.take(signal),
                Err(crossbeam_channel::TryRecvError::Empty) => return,
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    self.stopped = true;
                    return;
                }
            }
        }
    }

    /// `stop` has come.
    pub fn stopped(&mut self) -> bool {
        self.poll();
        self.stopped
    }

    /// `ponderhit` has come (and not `stop`).
    pub fn ponderhit(&mut self) -> bool {
        self.poll();
        self.ponderhit && !self.stopped
    }

    /// `stop` or `ponderhit` has come: a `go ponder` may end.
    pub fn released(&mut self) -> bool {
        self.poll();
        self.stopped || self.ponderhit
    }

    /// Blocks until the GUI lets a search that answers only when told end: `stop`, or for `go ponder` also
    /// `ponderhit`.
    pub fn wait_until_told(&mut self, ponder: bool) {
        if ponder { self.wait_for_release() } else { self.wait_for_stop() }
    }

    /// Waits for the next signal until `deadline`, or until `done` has a message or is closed.
    pub fn wait(&mut self, done: &Receiver<()>, deadline: Instant) -> Woke {
        let timeout = deadline.saturating_duration_since(Instant::now());
        select! {
            recv(self.signals) -> signal => {
                match signal {
                    Ok(signal) => self.take(signal),
                    Err(_) => self.stopped = true,
                }
                Woke::Signal
            }
            recv(done) -> _ => Woke::Done,
            default(timeout) => Woke::Deadline,
        }
    }

    /// Blocks until `stop` or `ponderhit`.
    pub fn wait_for_release(&mut self) {
        while !self.released() {
            match self.signals.recv() {
                Ok(signal) => self.take(signal),
                Err(_) => self.stopped = true,
            }
        }
    }

    /// Announces the direct engine's stop handle for the search about to start, so that `stop` reaches the engine
    /// at once while this thread waits for its answer.
    pub fn stoppable(&self, handle: StopHandle) {
        if let Some(handles) = &self.handles {
            let _ = handles.send(handle);
        }
    }

    /// Blocks until `stop`.
    pub fn wait_for_stop(&mut self) {
        while !self.stopped() {
            match self.signals.recv() {
                Ok(signal) => self.take(signal),
                Err(_) => self.stopped = true,
            }
        }
    }

    /// This control hears nothing and announces nothing (see [`Control::quiet`]).
    pub fn is_quiet(&self) -> bool {
        self.handles.is_none()
    }

    /// A control that hears nothing more and announces nothing (its `received` kept): for the quick search after a
    /// `stop` that is spent. It never reports `stop`, so nothing may wait on it for one.
    pub fn quiet(&self) -> Control {
        Control {
            signals: crossbeam_channel::never(),
            handles: None,
            stopped: false,
            ponderhit: false,
            received: self.received,
        }
    }
}

/// Why [`Control::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// A signal came (or the session has gone, read as `stop`).
    Signal,
    /// The other side said it is done.
    Done,
    Deadline,
}

/// What a search thread is given with its `go`: everything by value or shared read-only; it changes nothing of the
/// session's.
pub struct Context {
    /// `info` lines only: the answer goes back to the session, which writes it.
    pub out: InfoOut,
    pub store: Option<Arc<Store>>,
    pub options: Options,
    /// The direct engine's configuration: all `Threads` and all of `Hash`.
    pub config_direct: EngineConfig,
    /// The tree's workers, one configuration each.
    pub config_tree: Vec<EngineConfig>,
    pub overhead: Overhead,
    /// The session's depth model as it was at the `go`; what the search learns comes back with its answer.
    pub depth_model: DepthModel,
    /// Moves go to the GUI as king takes rook (`UCI_Chess960`, or a Chess960 position).
    pub chess960: bool,
}

impl Context {
    /// Whether the tree cannot grow because the store takes no more writes: a write failed on its disk (no space, an
    /// I/O error). Growth (background analysis, `go infinite`, `ThinkMode tree`) then pauses for the rest of the
    /// session, and games go on with direct searches. The first caller to find it says it, once per store, in an
    /// `info string error: tree growth paused: ...` (and the log). `false` without a store.
    pub fn growth_paused(&self) -> bool {
        let Some(store) = &self.store else { return false };
        if store.write_failure().is_none() {
            return false;
        }
        if let Some(failure) = store.write_failure_notice() {
            log::error!("tree growth paused: {failure}");
            self.out.error(format!("tree growth paused: {failure}"));
        }
        true
    }
}
