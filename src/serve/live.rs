//! What `deeptree serve` measures over time: a background thread samples the store every [`SAMPLE_EVERY`] (its
//! positions and edges, the root's score and settled depth) into a bounded ring. When the ring is full every other
//! sample is dropped and the sampling stride doubles, so the samples always cover the time since serve started.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use serde::Serialize;

use crate::{
    game::Line,
    score::Score,
    search::tree,
    store::{Store, StoreError},
};

/// How often the sampler looks at the store.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// The most samples kept.
pub const MAX_SAMPLES: usize = 1024;
/// The span over which the growth rate is measured.
const RATE_SPAN: f64 = 10.0;

/// One look at the store.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since serve started.
    pub t: f64,
    pub positions: u64,
    pub edges: u64,
    /// The tree's score of the root (its best move's alpha score), when it has one.
    pub score: Option<Score>,
    pub settled_depth: Option<u8>,
    /// Engine depth of the root's own evaluation.
    pub engine_depth: Option<u8>,
}

/// The samples since serve started, thinned to at most [`MAX_SAMPLES`] and the newest.
#[derive(Debug, Default)]
pub struct Ring {
    kept: Vec<Sample>,
    /// The newest sample, when the stride did not keep it.
    latest: Option<Sample>,
    /// One sample of this many taken is kept.
    stride: u64,
    taken: u64,
    /// The last samples' times and positions, for the growth rate.
    recent: std::collections::VecDeque<(f64, u64)>,
}

impl Ring {
    pub fn new() -> Ring {
        Ring { kept: Vec::new(), latest: None, stride: 1, taken: 0, recent: Default::default() }
    }

    /// Adds `sample`: kept when the stride says so, else held as the newest until the next one.
    pub fn push(&mut self, sample: Sample) {
        self.recent.push_back((sample.t, sample.positions));
        while self.recent.front().is_some_and(|(t, _)| sample.t - t > RATE_SPAN) {
            self.recent.pop_front();
        }
        if self.taken.is_multiple_of(self.stride) {
            self.kept.push(sample);
            self.latest = None;
            if self.kept.len() >= MAX_SAMPLES {
                let mut i = 0;
                self.kept.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        } else {
            self.latest = Some(sample);
        }
        self.taken += 1;
    }

    /// The samples, oldest first, the newest always last.
    pub fn samples(&self) -> Vec<Sample> {
        self.kept.iter().chain(&self.latest).cloned().collect()
    }

    /// Positions added per second from the oldest of the last [`RATE_SPAN`] seconds' samples to `positions` now, at
    /// `t` seconds since serve started; 0 without a sample before `t`.
    pub fn rate(&self, t: f64, positions: u64) -> f64 {
        let Some(&(t0, p0)) = self.recent.iter().find(|(t0, _)| t - t0 <= RATE_SPAN).or(self.recent.back()) else {
            return 0.0;
        };
        let dt = t - t0;
        if dt <= 0.0 { 0.0 } else { positions.saturating_sub(p0) as f64 / dt }
    }
}

/// Samples `store` at `root`.
pub fn sample(store: &Store, root: &Line, t: f64) -> Result<Sample, StoreError> {
    let stats = store.stats()?;
    let view = store.read()?;
    let seen = tree::view(&view, root.root(), &root.history_keys())?;
    let node = view.node(crate::store::key::PositionKey::of(root.root()))?;
    drop(view);
    Ok(Sample {
        t,
        positions: stats.positions,
        edges: stats.edges,
        score: seen.as_ref().and_then(|s| s.candidates.first()).map(|c| c.alpha).filter(|s| s.is_valued()),
        settled_depth: node.as_ref().and_then(|n| n.settled_depth),
        engine_depth: node.as_ref().and_then(|n| n.eval.as_ref()).map(|e| e.depth),
    })
}

/// Starts the sampling thread; it runs as long as the process.
pub fn spawn_sampler(store: Arc<Store>, root: Line, ring: Arc<Mutex<Ring>>, started: Instant) {
    std::thread::Builder::new()
        .name("serve-sampler".into())
        .spawn(move || {
            loop {
                match sample(&store, &root, started.elapsed().as_secs_f64()) {
                    Ok(s) => ring.lock().push(s),
                    Err(e) => {
                        crate::store::fault::stop_if_damaged(&e);
                        log::warn!("serve: cannot sample the store: {e}")
                    }
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        })
        .expect("a thread starts");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64, positions: u64) -> Sample {
        Sample { t, positions, edges: 0, score: None, settled_depth: None, engine_depth: None }
    }

    #[test]
    fn the_ring_stays_bounded_and_covers_the_whole_run() {
        let mut ring = Ring::new();
        for i in 0..10_000u64 {
            ring.push(at(i as f64, i));
            assert!(ring.samples().len() <= MAX_SAMPLES + 1);
        }
        let samples = ring.samples();
        assert_eq!(samples[0].t, 0.0);
        assert_eq!(samples.last().unwrap().t, 9999.0, "the newest sample is kept");
        assert!(samples.windows(2).all(|w| w[0].t < w[1].t));
        assert!(samples.len() > MAX_SAMPLES / 4);
    }

    #[test]
    fn the_rate_is_positions_per_second_over_the_last_seconds() {
        let mut ring = Ring::new();
        assert_eq!(ring.rate(1.0, 10), 0.0);
        ring.push(at(0.0, 0));
        assert_eq!(ring.rate(0.0, 0), 0.0);
        assert_eq!(ring.rate(0.5, 10), 20.0, "measured to the positions now");
        for i in 1..=30u64 {
            ring.push(at(i as f64, if i <= 20 { 0 } else { (i - 20) * 5 }));
        }
        assert!((ring.rate(30.0, 50) - 5.0).abs() < 1e-9, "{}", ring.rate(30.0, 50));
        assert!((ring.rate(31.0, 60) - 5.5).abs() < 1e-9, "{}", ring.rate(31.0, 60));
    }
}
