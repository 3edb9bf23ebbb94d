//! The loop that runs one engine process for the pool: it takes jobs, restarts the engine after a fault with a
//! growing, jittered back-off, and retries a job on fresh processes.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use log::{debug, info, warn};

use super::{
    EngineError,
    jobs::{JobId, JobOutcome, Queued, Ran, Shared},
    process::{Engine, EngineConfig, RestartPolicy},
    request::EvalRequest,
};

/// Delays between restarts: the first after a success is `first_delay`, each further one doubles up to `max_delay`;
/// each is jittered to between half and all of its nominal value so restarting workers spread out.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    policy: RestartPolicy,
    nominal: Duration,
    rng: fastrand::Rng,
}

impl Backoff {
    pub(crate) fn new(policy: RestartPolicy) -> Backoff {
        Backoff { policy, nominal: Duration::ZERO, rng: fastrand::Rng::new() }
    }

    pub(crate) fn next_delay(&mut self) -> Duration {
        self.nominal = if self.nominal.is_zero() {
            self.policy.first_delay
        } else {
            self.nominal.saturating_mul(2).min(self.policy.max_delay.max(self.policy.first_delay))
        };
        self.nominal.mul_f64(0.5 + 0.5 * self.rng.f64())
    }

    pub(crate) fn reset(&mut self) {
        self.nominal = Duration::ZERO;
    }
}

/// One worker: its own engine process, run on its own thread.
pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) config: EngineConfig,
    /// The running process; `None` after a fault until the next restart.
    pub(crate) engine: Option<Engine>,
    /// The process has not finished a job yet.
    pub(crate) fresh: bool,
    pub(crate) backoff: Backoff,
    pub(crate) shared: Arc<Shared>,
}

impl Worker {
    /// Starts the first process (no back-off: a failure here is reported to the pool's creator).
    pub(crate) fn start(index: usize, config: EngineConfig, shared: Arc<Shared>) -> Result<Worker, EngineError> {
        let engine = Engine::spawn(&config)?;
        shared.set_identity(index, Arc::clone(engine.identity()));
        let backoff = Backoff::new(config.restart);
        Ok(Worker { index, config, engine: Some(engine), fresh: true, backoff, shared })
    }

    /// Takes jobs until the queue closes.
    pub(crate) fn run(mut self, jobs: &Receiver<Queued>) {
        while let Ok(job) = jobs.recv() {
            let Some(wake) = self.shared.begin(job.id) else {
                continue;
            };
            let ran = self.run_job(job.id, &job.request, &wake);
            self.shared.finish(job.id, self.index, ran);
        }
        debug!("worker {} done", self.index);
    }

    /// Runs a job until it is done, failed or cancelled; a cancel stops the engine's search or, during a back-off,
    /// arrives on `wake`.
    fn run_job(&mut self, id: JobId, request: &EvalRequest, wake: &Receiver<()>) -> Ran {
        let mut attempts = 0;
        let mut fresh_failures = 0;
        loop {
            if self.engine.is_none() {
                match wake.recv_timeout(self.backoff.next_delay()) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                        return Ran { outcome: JobOutcome::Cancelled, attempts };
                    }
                }
                attempts += 1;
                match Engine::spawn(&self.config) {
                    Ok(engine) => {
                        info!("worker {}: engine restarted (pid {})", self.index, engine.pid());
                        self.shared.set_identity(self.index, Arc::clone(engine.identity()));
                        self.engine = Some(engine);
                        self.fresh = true;
                    }
                    Err(e) => {
                        warn!("worker {}: engine {:?} did not start: {e}", self.index, self.config.command);
                        fresh_failures += 1;
                        if fresh_failures >= self.config.restart.fresh_attempts {
                            return Ran { outcome: JobOutcome::Failed(e), attempts };
                        }
                        continue;
                    }
                }
            } else {
                attempts += 1;
            }
            let Some(engine) = self.engine.as_mut() else {
                continue;
            };
            if !self.shared.arm(id, engine.stop_handle()) {
                return Ran { outcome: JobOutcome::Cancelled, attempts };
            }
            // The search waits for `readyok` after this, so it starts on a cleared engine.
            let cleared = if self.config.fresh { engine.begin_new_game() } else { Ok(()) };
            // The engine's count of this search as it reports it, added to the pool's count as it grows.
            let mut counted = 0;
            let mut count = |nodes: u64| {
                if nodes > counted {
                    self.shared.searched.fetch_add(nodes - counted, Ordering::Relaxed);
                    counted = nodes;
                }
            };
            let searched = cleared.and_then(|()| engine.search(request, &mut |info| count(info.nodes.unwrap_or(0))));
            if let Ok(evaluation) = &searched {
                count(evaluation.nodes);
            }
            match searched {
                Ok(evaluation) => {
                    self.fresh = false;
                    self.backoff.reset();
                    // A search its screen stopped has its answer; one stopped otherwise was cancelled.
                    let cancelled = evaluation.stopped && evaluation.screened.is_none();
                    let outcome = if cancelled { JobOutcome::Cancelled } else { JobOutcome::Done(evaluation) };
                    return Ran { outcome, attempts };
                }
                Err(EngineError::Stopped) => return Ran { outcome: JobOutcome::Cancelled, attempts },
                Err(e) if !e.is_engine_fault() => {
                    return Ran { outcome: JobOutcome::Failed(e), attempts };
                }
                Err(e) => {
                    warn!("worker {}: engine fault, restarting it: {e}", self.index);
                    // Dropping the handle kills and reaps the process.
                    self.engine = None;
                    if self.fresh {
                        fresh_failures += 1;
                    }
                    if self.shared.is_cancelled(id) {
                        return Ran { outcome: JobOutcome::Cancelled, attempts };
                    }
                    if fresh_failures >= self.config.restart.fresh_attempts {
                        return Ran { outcome: JobOutcome::Failed(e), attempts };
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_is_capped_and_resets() {
        let policy = RestartPolicy {
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            fresh_attempts: 3,
        };
        let mut backoff = Backoff::new(policy);
        let nominal = [100, 200, 400, 800, 1000, 1000];
        for n in nominal {
            let d = backoff.next_delay();
            let n = Duration::from_millis(n);
            assert!(d >= n / 2 && d <= n, "{d:?} for nominal {n:?}");
        }
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(100));
        let delays: Vec<_> = (0..20)
            .map(|_| {
                backoff.reset();
                backoff.next_delay()
            })
            .collect();
        assert!(delays.iter().any(|d| *d != delays[0]), "jittered");
    }
}
