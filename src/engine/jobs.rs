//! The job board the pool and its workers share: jobs queued and running, and the channel their results leave by.
//!
//! The pool ([`super::pool`]) puts jobs on the board and cancels them; each worker ([`super::worker`]) takes them,
//! arms them with its engine's stop handle and posts what they came to. Both use this module; neither uses the
//! other's internals.

use std::{
    collections::HashMap,
    sync::{Arc, atomic::AtomicU64},
};

use crossbeam_channel::{Receiver, Sender, bounded};
use parking_lot::Mutex;

use super::{
    EngineError,
    process::{EngineIdentity, StopHandle},
    request::{EvalRequest, Evaluation},
};

/// The caller's name for a job; unique among the jobs in flight.
pub type JobId = u64;

/// The one answer to a submitted job.
#[derive(Debug)]
pub struct JobResult {
    pub id: JobId,
    /// The worker that ran it (`None` for a job cancelled before any worker took it).
    pub worker: Option<usize>,
    /// Engine runs it took: 1 normally, more when it was retried on fresh processes.
    pub attempts: u32,
    pub outcome: JobOutcome,
}

#[derive(Debug)]
pub enum JobOutcome {
    Done(Evaluation),
    /// The request was invalid, or the job failed on the fresh processes it was given (the last error).
    Failed(EngineError),
    /// Cancelled while queued, or stopped while running.
    Cancelled,
}

pub(crate) struct Queued {
    pub(crate) id: JobId,
    pub(crate) request: EvalRequest,
}

pub(crate) enum JobState {
    Queued,
    /// `wake` interrupts the worker's back-off; `engine` stops the search of the engine running the job.
    Running {
        wake: Sender<()>,
        engine: Option<StopHandle>,
        cancelled: bool,
    },
}

/// What the pool and its workers share.
pub(crate) struct Shared {
    pub(crate) jobs: Mutex<HashMap<JobId, JobState>>,
    pub(crate) results: Sender<JobResult>,
    pub(crate) identities: Mutex<Vec<Option<Arc<EngineIdentity>>>>,
    /// The nodes every worker's engine has searched so far, counted as the engines report them (see
    /// [`super::EnginePool::searched_nodes`]).
    pub(crate) searched: Arc<AtomicU64>,
}

impl Shared {
    /// A worker takes job `id`: the receiver that a cancel wakes it on, or `None` when the job was cancelled.
    pub(crate) fn begin(&self, id: JobId) -> Option<Receiver<()>> {
        let mut jobs = self.jobs.lock();
        let state = jobs.get_mut(&id)?;
        if !matches!(state, JobState::Queued) {
            return None;
        }
        let (wake, wake_rx) = bounded(1);
        *state = JobState::Running { wake, engine: None, cancelled: false };
        Some(wake_rx)
    }

    /// Job `id` is about to run on the engine that `stop` stops; false when the job has been cancelled.
    pub(crate) fn arm(&self, id: JobId, stop: StopHandle) -> bool {
        match self.jobs.lock().get_mut(&id) {
            Some(JobState::Running { engine, cancelled, .. }) => {
                *engine = Some(stop);
                !*cancelled
            }
            _ => false,
        }
    }

    pub(crate) fn finish(&self, id: JobId, worker: usize, ran: Ran) {
        let mut jobs = self.jobs.lock();
        jobs.remove(&id);
        let _ = self.results.send(JobResult { id, worker: Some(worker), attempts: ran.attempts, outcome: ran.outcome });
    }

    pub(crate) fn is_cancelled(&self, id: JobId) -> bool {
        matches!(self.jobs.lock().get(&id), Some(JobState::Running { cancelled: true, .. }))
    }

    pub(crate) fn set_identity(&self, worker: usize, identity: Arc<EngineIdentity>) {
        if let Some(slot) = self.identities.lock().get_mut(worker) {
            *slot = Some(identity);
        }
    }

    pub(crate) fn cancel(&self, id: JobId) -> bool {
        let mut jobs = self.jobs.lock();
        let engine = match jobs.get_mut(&id) {
            None => return false,
            Some(JobState::Queued) => {
                jobs.remove(&id);
                let _ = self.results.send(JobResult { id, worker: None, attempts: 0, outcome: JobOutcome::Cancelled });
                return true;
            }
            Some(JobState::Running { wake, engine, cancelled }) => {
                *cancelled = true;
                let _ = wake.try_send(());
                engine.clone()
            }
        };
        drop(jobs);
        if let Some(engine) = engine {
            engine.stop();
        }
        true
    }
}

/// What a job came to, and how many engine runs (processes started or used) it took.
pub(crate) struct Ran {
    pub(crate) outcome: JobOutcome,
    pub(crate) attempts: u32,
}
