//! How deep the inner engine would search in a move's budget: the yardstick the tree's answer must reach.
//!
//! The tree answers a `go` at once only when its combined depth (engine depth plus settled software depth) is at
//! least the depth a direct search would reach. That depth is estimated from this game's own direct searches: each
//! one is a sample of nodes searched, time spent and depth reached.
//!
//! ```
//! use deeptree::uci::depth::DepthModel;
//! use std::time::Duration;
//!
//! let mut model = DepthModel::default();
//! let before = model.depth_for_time(Duration::from_millis(100));
//! // This game's engine is slow: 200k nodes in a second reach only depth 12.
//! model.record(200_000, Duration::from_secs(1), 12);
//! assert!(model.depth_for_time(Duration::from_millis(100)) < before);
//! assert!(model.depth_for_nodes(1_000_000) > model.depth_for_nodes(100_000));
//! ```
//!
//! The model: depth grows with the logarithm of the nodes searched, `depth = offset + SLOPE * ln(nodes)` (an
//! effective branching factor of about 1.87, what alpha-beta engines such as Stockfish show from depth 10 to 25),
//! and nodes grow with time at the engine's speed. The slope is fixed; the offset and the speed are fitted to the
//! samples, with the last game's fit (or a default for a Stockfish-like engine on one thread) counting as one sample.

use std::time::Duration;

/// Plies gained each time the nodes searched grow by a factor e.
pub const SLOPE: f64 = 1.6;

/// Before any sample: depth 15 at 300,000 nodes.
const DEFAULT_OFFSET: f64 = 15.0 - SLOPE * 12.611_537_753_638_338; // ln(300_000)
/// Before any sample: 800,000 nodes a second.
const DEFAULT_NPS: f64 = 800_000.0;
/// What the prior's speed counts for, in seconds of search.
const PRIOR_SECONDS: f64 = 0.1;
/// Before any timed search: the engine spends its share of the clock. The prior counts as this much of a share.
const PRIOR_SHARE_SECONDS: f64 = 0.1;

/// Depth reached against nodes and time, fitted to one game's direct searches.
#[derive(Debug, Clone)]
pub struct DepthModel {
    prior_offset: f64,
    prior_nps: f64,
    /// Sums over this game's samples.
    offsets: f64,
    samples: u32,
    nodes: f64,
    seconds: f64,
    /// The engine's spend against the clock's share (`spent / share`), before this game's timed searches.
    prior_spend: f64,
    /// Sums over this game's timed searches: seconds spent, seconds of the clock's share.
    spent: f64,
    shares: f64,
}

impl Default for DepthModel {
    fn default() -> DepthModel {
        DepthModel::with_prior(DEFAULT_OFFSET, DEFAULT_NPS)
    }
}

impl DepthModel {
    fn with_prior(prior_offset: f64, prior_nps: f64) -> DepthModel {
        DepthModel {
            prior_offset,
            prior_nps,
            offsets: 0.0,
            samples: 0,
            nodes: 0.0,
            seconds: 0.0,
            prior_spend: 1.0,
            spent: 0.0,
            shares: 0.0,
        }
    }

    /// One finished search under a game clock: the engine spent `spent` where the clock's share was `share`.
    pub fn record_clock(&mut self, spent: Duration, share: Duration) {
        self.spent += spent.as_secs_f64();
        self.shares += share.as_secs_f64();
    }

    /// How long the engine will think where the clock's share is `share`, judged by how it has spent its shares in
    /// this game (engines think longer early in a game and when a move is hard; this follows the average).
    pub fn expected_time(&self, share: Duration) -> Duration {
        let spend = (self.prior_spend * PRIOR_SHARE_SECONDS + self.spent) / (PRIOR_SHARE_SECONDS + self.shares);
        share.mul_f64(spend.clamp(0.01, 100.0))
    }

    /// One finished direct search: `nodes` searched in `time`, reaching `depth`.
    pub fn record(&mut self, nodes: u64, time: Duration, depth: u32) {
        if nodes == 0 || depth == 0 {
            return;
        }
        let nodes = nodes as f64;
        self.offsets += f64::from(depth) - SLOPE * nodes.ln();
        self.samples += 1;
        self.nodes += nodes;
        self.seconds += time.as_secs_f64();
    }

    /// A new game: this game's fit becomes the prior of the next, and its samples are dropped.
    pub fn new_game(&mut self) {
        let spend = self.expected_time(Duration::from_secs(1)).as_secs_f64();
        *self = DepthModel::with_prior(self.offset(), self.nps());
        self.prior_spend = spend;
    }

    /// Searches recorded in this game.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    fn offset(&self) -> f64 {
        (self.prior_offset + self.offsets) / f64::from(self.samples + 1)
    }

    /// Nodes a second, this game's searches together with the prior.
    pub fn nps(&self) -> f64 {
        (self.prior_nps * PRIOR_SECONDS + self.nodes) / (PRIOR_SECONDS + self.seconds)
    }

    /// The depth a search of `nodes` nodes reaches.
    pub fn depth_for_nodes(&self, nodes: u64) -> f64 {
        (self.offset() + SLOPE * (nodes.max(1) as f64).ln()).max(1.0)
    }

    /// The depth a search of `time` reaches.
    pub fn depth_for_time(&self, time: Duration) -> f64 {
        let nodes = (self.nps() * time.as_secs_f64()).clamp(1.0, u64::MAX as f64);
        self.depth_for_nodes(nodes as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_stockfish_like_engine_on_one_thread() {
        let model = DepthModel::default();
        let at = |ms| model.depth_for_time(Duration::from_millis(ms));
        assert!((12.0..15.0).contains(&at(100)), "{}", at(100));
        assert!((15.0..18.0).contains(&at(500)), "{}", at(500));
        assert!((19.0..23.0).contains(&at(10_000)), "{}", at(10_000));
    }

    #[test]
    fn samples_pull_the_estimate_to_this_games_engine() {
        let mut model = DepthModel::default();
        for _ in 0..20 {
            // A fast engine: 10M nodes a second, depth 22 in a second.
            model.record(10_000_000, Duration::from_secs(1), 22);
        }
        let depth = model.depth_for_time(Duration::from_secs(1));
        assert!((21.0..23.0).contains(&depth), "{depth}");
        assert!(model.nps() > 9_000_000.0, "{}", model.nps());
        // A new game starts from this game's fit, with no samples of its own.
        model.new_game();
        assert_eq!(model.samples(), 0);
        let carried = model.depth_for_time(Duration::from_secs(1));
        assert!((21.0..23.0).contains(&carried), "{carried}");
    }

    #[test]
    fn the_engines_spend_against_the_clock_is_learnt() {
        let mut model = DepthModel::default();
        let share = Duration::from_millis(40);
        assert_eq!(model.expected_time(share), share, "before any search: the share itself");
        for _ in 0..30 {
            // This engine thinks half its share.
            model.record_clock(Duration::from_millis(20), share);
        }
        let expected = model.expected_time(share).as_secs_f64();
        assert!((0.019..0.025).contains(&expected), "{expected}");
        model.new_game();
        let carried = model.expected_time(share).as_secs_f64();
        assert!((0.019..0.025).contains(&carried), "{carried}");
    }

    #[test]
    fn empty_searches_teach_nothing() {
        let mut model = DepthModel::default();
        let before = model.depth_for_nodes(1000);
        model.record(0, Duration::from_millis(5), 7);
        model.record(500, Duration::from_millis(5), 0);
        assert_eq!(model.samples(), 0);
        assert_eq!(model.depth_for_nodes(1000), before);
    }
}
