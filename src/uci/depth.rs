//! How deep the inner engine would search in a move's budget: the yardstick the tree's answer must reach.
//!
//! The tree answers a `go` at once only when its combined depth (engine depth plus settled software depth) is at
//! least the depth a direct search would reach. That depth is estimated from this game's own direct searches: each
//! one is a sample of nodes searched, time spent and depth reached.
//!
//! ```
//! use deeptree::uci::depth::{DepthModel, Phase};
//! use std::time::Duration;
//!
//! let opening = Phase::of_men(32);
//! let mut model = DepthModel::default();
//! let before = model.depth_for_time(opening, Duration::from_millis(100));
//! // This game's engine is slow: 200k nodes in a second reach only depth 12.
//! model.record(opening, 200_000, Duration::from_secs(1), 12);
//! assert!(model.depth_for_time(opening, Duration::from_millis(100)) < before);
//! assert!(model.depth_for_nodes(opening, 1_000_000) > model.depth_for_nodes(opening, 100_000));
//! ```
//!
//! The model: depth grows with the logarithm of the nodes searched, `depth = offset + SLOPE * ln(nodes)` (an
//! effective branching factor of about 1.87, what alpha-beta engines such as Stockfish show from depth 10 to 25),
//! and nodes grow with time at the engine's speed. The slope is fixed; the speed is fitted to the samples, and the
//! offset to the samples of each [`Phase`] apart, with the last game's fit (or a default for a Stockfish-like engine
//! on one thread) counting as one sample.
//!
//! The offset depends on the phase: Stockfish 15.1 at 2 s + 0.02 s reaches about 1.5 plies less in the opening
//! (27 men or more) than a fit over whole games says, and about 4 more with 4 men. One offset for the game would ask
//! the tree for more depth in the opening than a search there reaches.

use shakmaty::Position;
use std::time::Duration;

use crate::store::clock::DepthFit;

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

/// Phases the offset is fitted for.
const PHASES: usize = 5;

/// The stage of the game a search ran in, by the men on the board (kings and pawns included): as they come off, a
/// search of the same nodes sees deeper.
///
/// ```
/// use deeptree::uci::depth::Phase;
/// use shakmaty::Chess;
///
/// assert_eq!(Phase::of(&Chess::default()), Phase::of_men(27));
/// assert_ne!(Phase::of_men(26), Phase::of_men(27));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase(usize);

/// The phases, from the opening (27 men or more) to the endgame (8 or fewer).
pub const PHASES_IN_ORDER: [Phase; PHASES] = [Phase(0), Phase(1), Phase(2), Phase(3), Phase(4)];

impl Phase {
    /// The phase of a position.
    pub fn of(position: &impl Position) -> Phase {
        Phase::of_men(position.board().occupied().count())
    }

    /// The phase with `men` on the board: 27 to 32, 21 to 26, 15 to 20, 9 to 14, and 8 or fewer.
    pub fn of_men(men: usize) -> Phase {
        Phase(match men {
            27.. => 0,
            21..=26 => 1,
            15..=20 => 2,
            9..=14 => 3,
            _ => 4,
        })
    }
}

/// Depth reached against nodes and time, fitted to one game's direct searches.
#[derive(Debug, Clone)]
pub struct DepthModel {
    prior_offsets: [f64; PHASES],
    prior_nps: f64,
    /// Sums over this game's samples, per phase.
    offsets: [f64; PHASES],
    samples: [u32; PHASES],
    /// Sums over this game's samples.
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
        DepthModel::with_prior([DEFAULT_OFFSET; PHASES], DEFAULT_NPS)
    }
}

impl DepthModel {
    fn with_prior(prior_offsets: [f64; PHASES], prior_nps: f64) -> DepthModel {
        DepthModel {
            prior_offsets,
            prior_nps,
            offsets: [0.0; PHASES],
            samples: [0; PHASES],
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

    /// One finished direct search in `phase`: `nodes` searched in `time`, reaching `depth`.
    pub fn record(&mut self, phase: Phase, nodes: u64, time: Duration, depth: u32) {
        if nodes == 0 || depth == 0 {
            return;
        }
        let nodes = nodes as f64;
        self.offsets[phase.0] += f64::from(depth) - SLOPE * nodes.ln();
        self.samples[phase.0] += 1;
        self.nodes += nodes;
        self.seconds += time.as_secs_f64();
    }

    /// A new game: this game's fit becomes the prior of the next, and its samples are dropped.
    pub fn new_game(&mut self) {
        let spend = self.expected_time(Duration::from_secs(1)).as_secs_f64();
        let offsets = std::array::from_fn(|phase| self.offset(Phase(phase)));
        *self = DepthModel::with_prior(offsets, self.nps());
        self.prior_spend = spend;
    }

    /// The model as a store keeps it ([`DepthFit`]): this game's fit together with its prior, of `engine` (its command
    /// line) searching on `threads` threads.
    pub fn fit(&self, engine: &str, threads: u32) -> DepthFit {
        DepthFit {
            offsets: std::array::from_fn(|phase| self.offset(Phase(phase))),
            nps: self.nps(),
            spend: self.expected_time(Duration::from_secs(1)).as_secs_f64(),
            samples: self.samples(),
            engine: engine.to_owned(),
            threads,
        }
    }

    /// A model that starts from a stored fit, as the next game of the session that fitted it would (a fit that
    /// does not read as numbers is the default's).
    pub fn from_fit(fit: &DepthFit) -> DepthModel {
        let sound = fit.offsets.iter().all(|o| o.is_finite())
            && fit.nps.is_finite()
            && fit.nps > 0.0
            && fit.spend.is_finite()
            && fit.spend > 0.0;
        if !sound {
            return DepthModel::default();
        }
        let mut model = DepthModel::with_prior(fit.offsets, fit.nps);
        model.prior_spend = fit.spend.clamp(0.01, 100.0);
        model
    }

    /// Searches recorded in this game.
    pub fn samples(&self) -> u32 {
        self.samples.iter().sum()
    }

    fn offset(&self, phase: Phase) -> f64 {
        (self.prior_offsets[phase.0] + self.offsets[phase.0]) / f64::from(self.samples[phase.0] + 1)
    }

    /// Nodes a second, this game's searches together with the prior.
    pub fn nps(&self) -> f64 {
        (self.prior_nps * PRIOR_SECONDS + self.nodes) / (PRIOR_SECONDS + self.seconds)
    }

    /// The depth a search of `nodes` nodes reaches in `phase`.
    pub fn depth_for_nodes(&self, phase: Phase, nodes: u64) -> f64 {
        (self.offset(phase) + SLOPE * (nodes.max(1) as f64).ln()).max(1.0)
    }

    /// The depth a search of `time` reaches in `phase`.
    pub fn depth_for_time(&self, phase: Phase, time: Duration) -> f64 {
        let nodes = (self.nps() * time.as_secs_f64()).clamp(1.0, u64::MAX as f64);
        self.depth_for_nodes(phase, nodes as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_stockfish_like_engine_on_one_thread() {
        let model = DepthModel::default();
        let at = |ms| model.depth_for_time(Phase::of_men(32), Duration::from_millis(ms));
        assert!((12.0..15.0).contains(&at(100)), "{}", at(100));
        assert!((15.0..18.0).contains(&at(500)), "{}", at(500));
        assert!((19.0..23.0).contains(&at(10_000)), "{}", at(10_000));
    }

    #[test]
    fn samples_pull_the_estimate_to_this_games_engine() {
        let mut model = DepthModel::default();
        for _ in 0..20 {
            // A fast engine: 10M nodes a second, depth 22 in a second.
            model.record(Phase::of_men(20), 10_000_000, Duration::from_secs(1), 22);
        }
        let depth = model.depth_for_time(Phase::of_men(20), Duration::from_secs(1));
        assert!((21.0..23.0).contains(&depth), "{depth}");
        assert!(model.nps() > 9_000_000.0, "{}", model.nps());
        // A new game starts from this game's fit, with no samples of its own.
        model.new_game();
        assert_eq!(model.samples(), 0);
        let carried = model.depth_for_time(Phase::of_men(20), Duration::from_secs(1));
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
        let phase = Phase::of_men(32);
        let before = model.depth_for_nodes(phase, 1000);
        model.record(phase, 0, Duration::from_millis(5), 7);
        model.record(phase, 500, Duration::from_millis(5), 0);
        assert_eq!(model.samples(), 0);
        assert_eq!(model.depth_for_nodes(phase, 1000), before);
    }

    #[test]
    fn each_phase_is_fitted_apart() {
        let (opening, endgame) = (Phase::of_men(30), Phase::of_men(5));
        let mut model = DepthModel::default();
        let nodes = 100_000;
        for _ in 0..20 {
            // Stockfish-like: the same nodes reach depth 12 in the opening and 18 with five men.
            model.record(opening, nodes, Duration::from_millis(100), 12);
            model.record(endgame, nodes, Duration::from_millis(100), 18);
        }
        let (early, late) = (model.depth_for_nodes(opening, nodes), model.depth_for_nodes(endgame, nodes));
        assert!((11.5..12.5).contains(&early), "{early}");
        assert!((17.0..18.5).contains(&late), "{late}");
        // A phase with no sample of its own keeps its prior.
        assert_eq!(
            model.depth_for_nodes(Phase::of_men(18), nodes),
            DepthModel::default().depth_for_nodes(Phase::of_men(18), nodes)
        );
        // The next game starts from each phase's fit.
        model.new_game();
        let (early, late) = (model.depth_for_nodes(opening, nodes), model.depth_for_nodes(endgame, nodes));
        assert!((11.5..12.5).contains(&early), "{early}");
        assert!((17.0..18.5).contains(&late), "{late}");
    }

    #[test]
    fn a_stored_fit_starts_the_next_model_where_this_one_ended() {
        let mut model = DepthModel::default();
        for _ in 0..20 {
            model.record(Phase::of_men(30), 2_000_000, Duration::from_secs(1), 21);
            model.record_clock(Duration::from_millis(30), Duration::from_millis(60));
        }
        let again = DepthModel::from_fit(&model.fit("stockfish", 1));
        for phase in PHASES_IN_ORDER {
            let (a, b) = (model.depth_for_nodes(phase, 100_000), again.depth_for_nodes(phase, 100_000));
            assert!((a - b).abs() < 1e-9, "{a} {b}");
        }
        assert!((model.nps() - again.nps()).abs() < 1e-6);
        let share = Duration::from_millis(100);
        assert_eq!(model.expected_time(share).as_millis(), again.expected_time(share).as_millis());
        let broken = DepthFit { nps: f64::NAN, ..model.fit("x", 1) };
        let default = DepthModel::default();
        assert_eq!(
            DepthModel::from_fit(&broken).depth_for_nodes(Phase::of_men(30), 1000),
            default.depth_for_nodes(Phase::of_men(30), 1000)
        );
    }

    #[test]
    fn men_on_the_board_name_the_phase() {
        let phases: Vec<Phase> = (2..=32).map(Phase::of_men).collect();
        assert!(phases.windows(2).all(|w| w[0].0 >= w[1].0), "fewer men, a later phase");
        assert_eq!(Phase::of_men(2), Phase::of_men(8));
        assert_ne!(Phase::of_men(8), Phase::of_men(9));
        assert_eq!(Phase::of(&shakmaty::Chess::default()), Phase::of_men(32));
    }
}
