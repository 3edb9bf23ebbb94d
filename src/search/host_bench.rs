//! `deeptree bench host`: how well the host keeps its engines busy, against the fake engine.
//!
//! The fake engine in its `keyed` or `smooth` mode (`--scores`) plays a chess engine whose every search takes a fixed
//! latency and whose scores depend only on the position, so the move distance window closes as with a real engine
//! and a run is the same whatever the timing. `smooth` scores also change little from one ply to the next, as a real
//! engine's do; `keyed` scores jump by up to 120 cp, which keeps reopening windows (a harder case for the host). The bench settles the start position to software depth K with 1 worker, then with N, each
//! in a fresh store, and compares:
//! - speed-up: the 1-worker run's wall time over the N-worker run's (both settle depth K);
//! - utilization of the N-worker run: engine-seconds spent searching (searches answered times the latency, plus the
//!   time searches stopped early had run) over engines times wall time;
//! - the host's own time per search: the 1-worker run's wall time less its searches' latency, per search (pipes,
//!   the engine handle, the tree walk and the store).
//!
//! Without `--depth`, K is the smallest depth whose 1-worker run asks 5,000 searches or more (found with runs at no
//! latency, which ask the same searches).

use crate::game::Line;
use std::{
    path::Path,
    time::{Duration, Instant},
};

use serde::Serialize;

use crate::{
    engine::{EngineConfig, EnginePool},
    search::{
        analysis::{Analysis, AnalysisOptions, DEFAULT_LOOK_AHEAD, Params},
        evaluator::PoolEvaluator,
    },
    store::{Store, StoreOptions},
};

/// Searches the 1-worker run must ask at the default depth.
const DEFAULT_SEARCHES: u64 = 5_000;
/// The deepest default depth tried.
const DEEPEST_DEFAULT: u8 = 12;

/// One settling run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct HostRun {
    pub workers: usize,
    pub seconds: f64,
    pub searches: u64,
    /// Engine seconds of searches stopped before their answer because the tree no longer led to them.
    pub stopped_seconds: f64,
    pub settled_depth: Option<u8>,
}

/// The result of `deeptree bench host`.
#[derive(Debug, Clone, Serialize)]
pub struct HostBench {
    pub workers: usize,
    pub latency_ms: u64,
    pub depth: u8,
    pub speedup: f64,
    pub utilization: f64,
    pub host_us_per_search: f64,
    pub one: HostRun,
    pub many: HostRun,
}

/// Settles the start position to `depth` with `workers` fake engines of `latency_ms`, in a fresh store.
/// One settling run; `look_ahead` off runs nothing ahead of its turn.
fn settle(
    fake: &Path,
    scores: &str,
    workers: usize,
    latency_ms: u64,
    depth: u8,
    look_ahead: bool,
    scratch: &Path,
) -> Result<HostRun, String> {
    let dir = scratch.join(format!("tree-{workers}-{latency_ms}-{depth}"));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, &StoreOptions::default()).map_err(|e| e.to_string())?;
    let config = EngineConfig::new(format!("{} --mode {scores} --latency-ms {latency_ms}", fake.display()));
    let pool = EnginePool::uniform(&config, workers).map_err(|e| e.to_string())?;
    let params = Params::new(10, 20).with_max_depth(depth);
    let options =
        AnalysisOptions { look_ahead: look_ahead.then_some(DEFAULT_LOOK_AHEAD), ..AnalysisOptions::default() };
    let mut analysis = Analysis::with_options(&store, PoolEvaluator::new(pool), params, options);
    let line = Line::start_position();
    let started = Instant::now();
    let report = analysis.run(&line, |_| {}).map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs_f64();
    drop(analysis);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(HostRun {
        workers,
        seconds,
        searches: report.evaluations,
        stopped_seconds: report.aborted_seconds_ran,
        settled_depth: report.settled_depth,
    })
}

/// Runs the bench: 1 worker against `workers`, searches of `latency_ms`, to `depth` (or the default depth).
/// `scores` is the fake engine's mode: `keyed` or `smooth`.
pub fn host_bench(
    fake: &Path,
    scores: &str,
    workers: usize,
    latency_ms: u64,
    depth: Option<u8>,
    look_ahead: bool,
) -> Result<HostBench, String> {
    // Removed with everything in it when it is dropped, however the bench ends.
    let scratch = tempfile::Builder::new()
        .prefix("deeptree-bench-host-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    run(fake, scores, workers.max(1), latency_ms, depth, look_ahead, scratch.path())
}

fn run(
    fake: &Path,
    scores: &str,
    workers: usize,
    latency_ms: u64,
    depth: Option<u8>,
    look_ahead: bool,
    scratch: &Path,
) -> Result<HostBench, String> {
    let depth = match depth {
        Some(depth) => depth,
        None => {
            let mut chosen = DEEPEST_DEFAULT;
            for depth in 1..=DEEPEST_DEFAULT {
                let probe = settle(fake, scores, 1, 0, depth, true, scratch)?;
                log::info!("bench host: depth {depth} asks {} searches", probe.searches);
                if probe.searches >= DEFAULT_SEARCHES {
                    chosen = depth;
                    break;
                }
            }
            chosen
        }
    };
    let one = settle(fake, scores, 1, latency_ms, depth, true, scratch)?;
    let many = settle(fake, scores, workers, latency_ms, depth, look_ahead, scratch)?;
    if one.settled_depth != many.settled_depth {
        return Err(format!(
            "the runs settled different depths ({:?} with 1 worker, {:?} with {workers})",
            one.settled_depth, many.settled_depth
        ));
    }
    let latency = Duration::from_millis(latency_ms).as_secs_f64();
    // Searches thrown away count as busy, those stopped early for as long as they ran.
    let busy = many.searches as f64 * latency + many.stopped_seconds;
    Ok(HostBench {
        workers,
        latency_ms,
        depth,
        speedup: one.seconds / many.seconds.max(1e-9),
        utilization: busy / (workers as f64 * many.seconds.max(1e-9)),
        host_us_per_search: (one.seconds - one.searches as f64 * latency).max(0.0) / one.searches.max(1) as f64 * 1e6,
        one,
        many,
    })
}
