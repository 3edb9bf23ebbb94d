//! A pool of inner-engine workers, each owning its own process on its own thread.
//!
//! Jobs go in through one queue that every worker takes from; results come back on one channel as they finish, in
//! any order, tagged with the caller's job id. Every submitted job yields exactly one [`JobResult`].

use std::{
    collections::HashMap,
    sync::{Arc, atomic::AtomicU64},
    thread,
};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use parking_lot::Mutex;

pub use super::jobs::{JobId, JobOutcome, JobResult};
use super::{
    EngineError,
    jobs::{JobState, Queued, Shared},
    process::{EngineConfig, EngineIdentity},
    request::EvalRequest,
    worker::Worker,
};

/// N workers, each with its own engine process (commands may differ per worker).
///
/// ```no_run
/// use deeptree::engine::{EngineConfig, EnginePool, EnginePosition, EvalRequest, JobOutcome, Limit, default_workers};
///
/// let pool = EnginePool::uniform(&EngineConfig::new("stockfish").with_option("Hash", 64), default_workers())?;
/// let start = EnginePosition::of(&shakmaty::Chess::default());
/// pool.submit(7, EvalRequest::new(start, Limit::Depth(12)))?;
/// let result = pool.results().recv()?;
/// assert_eq!(result.id, 7);
/// if let JobOutcome::Done(eval) = result.outcome {
///     println!("{} {} by {}", eval.best_move, eval.score(), eval.engine);
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
pub struct EnginePool {
    queue: Option<Sender<Queued>>,
    shared: Arc<Shared>,
    results: Receiver<JobResult>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl EnginePool {
    /// Starts one worker per config and waits until every engine has completed its handshake; the first engine
    /// that cannot start is the error (and the others are shut down).
    pub fn start(configs: Vec<EngineConfig>) -> Result<EnginePool, EngineError> {
        if configs.is_empty() {
            return Err(EngineError::InvalidRequest("an engine pool needs at least one worker".into()));
        }
        let (queue, queue_rx) = unbounded::<Queued>();
        let (results_tx, results) = unbounded();
        let shared = Arc::new(Shared {
            jobs: Mutex::new(HashMap::new()),
            results: results_tx,
            identities: Mutex::new(vec![None; configs.len()]),
            searched: Arc::default(),
        });
        let mut pool = EnginePool { queue: Some(queue), shared, results, threads: Vec::new() };
        let mut ready = Vec::new();
        for (index, config) in configs.into_iter().enumerate() {
            let (ready_tx, ready_rx) = bounded(1);
            let (shared, jobs) = (Arc::clone(&pool.shared), queue_rx.clone());
            let command = config.command.clone();
            let thread = thread::Builder::new()
                .name(format!("engine-worker-{index}"))
                .spawn(move || match Worker::start(index, config, shared) {
                    Ok(worker) => {
                        let _ = ready_tx.send(Ok(()));
                        worker.run(&jobs);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                })
                .map_err(|source| EngineError::Spawn { command, source: Arc::new(source) })?;
            pool.threads.push(thread);
            ready.push(ready_rx);
        }
        for ready_rx in ready {
            ready_rx.recv().unwrap_or(Err(EngineError::Eof))?;
        }
        Ok(pool)
    }

    /// `workers` workers running the same engine.
    pub fn uniform(config: &EngineConfig, workers: usize) -> Result<EnginePool, EngineError> {
        EnginePool::start(vec![config.clone(); workers.max(1)])
    }

    /// Queues a job. The request is checked first; `id` must not be in flight already.
    pub fn submit(&self, id: JobId, request: EvalRequest) -> Result<(), EngineError> {
        request.validate()?;
        let queue = self.queue.as_ref().ok_or_else(|| EngineError::InvalidRequest("pool shut down".into()))?;
        {
            let mut jobs = self.shared.jobs.lock();
            if jobs.contains_key(&id) {
                return Err(EngineError::InvalidRequest(format!("job {id} is already in flight")));
            }
            jobs.insert(id, JobState::Queued);
        }
        queue.send(Queued { id, request }).map_err(|_| EngineError::InvalidRequest("pool shut down".into()))
    }

    /// Cancels job `id`: a queued job is answered [`JobOutcome::Cancelled`] at once; a running one is sent `stop`,
    /// and is answered `Cancelled` once the engine has returned its best move (or `Done` if its search had already
    /// completed). Returns false when the job is not in flight.
    pub fn cancel(&self, id: JobId) -> bool {
        self.shared.cancel(id)
    }

    /// The nodes the pool's engines have searched so far, all jobs together, finished or not: each engine's count
    /// as it reports it in its `info` lines (and its final count when it answers). It only grows, and it grows
    /// whenever an engine reports more; a reader keeps the handle while the pool is busy elsewhere.
    pub fn searched_nodes(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.shared.searched)
    }

    /// Results, as they finish.
    pub fn results(&self) -> &Receiver<JobResult> {
        &self.results
    }

    /// Jobs queued or running.
    pub fn in_flight(&self) -> usize {
        self.shared.jobs.lock().len()
    }

    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    /// The identity of worker `worker`'s engine (as of its latest start).
    pub fn identity(&self, worker: usize) -> Option<Arc<EngineIdentity>> {
        self.shared.identities.lock().get(worker).cloned().flatten()
    }

    /// The identity of every worker's engine, in worker order.
    pub fn identities(&self) -> Vec<Arc<EngineIdentity>> {
        self.shared.identities.lock().iter().flatten().cloned().collect()
    }
}

impl Drop for EnginePool {
    /// Drops queued jobs, stops running ones and waits for the workers, whose engines are killed as they end.
    fn drop(&mut self) {
        let running: Vec<JobId> = {
            let mut jobs = self.shared.jobs.lock();
            jobs.retain(|_, state| !matches!(state, JobState::Queued));
            jobs.keys().copied().collect()
        };
        for id in running {
            self.shared.cancel(id);
        }
        self.queue = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
