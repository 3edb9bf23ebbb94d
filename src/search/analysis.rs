//! Settle-then-deepen: the deep-analysis search of a root (docs/design.md §3).
//!
//! A pass at software depth `d` walks the stored graph from the root, alpha-beta, and plans an inner-engine search
//! for every position it reaches that needs one: a position with no evaluation, or a node whose search for
//! alternatives must go on because its unsearched moves could still be within the move distance of its best move.
//! The planned searches run on all workers at once; their answers are stored, the graph is minimaxed again (the
//! writer keeps idea values up to date), and the pass is repeated until it plans nothing: depth `d` is settled, and
//! `d + 1` begins.
//!
//! Each pass plans from the store as it was when the pass began, and its answers are stored together, so which
//! positions are searched and what the settled tree holds do not depend on how many workers run or in which order
//! their answers arrive.
//!
//! Here: the parameters and options, the report and the loop over depths and passes ([`Analysis`]). It owns three
//! parts, one job each: `walk` plans the searches of a pass from the stored graph; `scheduler` runs them on the
//! engines (and, on the engines a pass leaves free, searches ahead of their turn), shares them with other processes
//! through claims and cancels those no longer needed; `recorder` turns the answers into store changes, writes them and
//! counts what the run did.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use shakmaty::{Chess, fen::Fen};

use crate::store::{Store, StoreError, key::PositionKey};

use crate::{game::Line, logger::Progress, score::Score, values::graph::StoreGraph};

use super::{evaluator::Evaluator, host::Planned, show::san_of as san};

/// The three parameters of the search, and its budget.
#[derive(Debug, Clone)]
pub struct Params {
    /// Engine depth `D` of every inner-engine search.
    pub engine_depth: u8,
    /// Move distance `δ` in centipawns at plies 0 and 1.
    pub move_distance: i32,
    /// The move distance of White's moves and of Black's where they differ from `move_distance` (a repertoire wide
    /// for one colour, narrow for the other): `[white, black]`, `None` for `move_distance`.
    pub side_distances: [Option<i32>; 2],
    /// Deepest software depth to settle.
    pub max_depth: u8,
    /// Wall-clock budget.
    pub time: Option<Duration>,
    /// Budget of engine nodes: the run stops once the nodes its engines reported for the searches answered reach it
    /// (searches still running then are abandoned, so the run may overshoot by what the last answers reported).
    pub nodes: Option<u64>,
    /// Deep Blue's "no progress" rule in the walk ([`alpha::loses_tempo`](super::alpha::loses_tempo)): a move into a
    /// position the same side could have reached earlier on the path is refused.
    pub no_progress: bool,
    /// Screening of alternatives ([`Screening`]); `None` searches every alternative at the engine depth.
    pub screen: Option<Screening>,
}

impl Default for Params {
    /// The settings' defaults (engine depth 18, move distance 20 cp), every software depth (no limit but a `stop`),
    /// no time budget, no "no progress" rule, no screening.
    fn default() -> Params {
        Params {
            engine_depth: 18,
            move_distance: 20,
            side_distances: [None, None],
            max_depth: u8::MAX - 1,
            time: None,
            nodes: None,
            no_progress: false,
            screen: None,
        }
    }
}

impl Params {
    /// The search's two chess parameters, the rest as [`Params::default`].
    pub fn new(engine_depth: u8, move_distance: i32) -> Params {
        Params { engine_depth, move_distance, ..Params::default() }
    }

    /// Settles no deeper than software depth `max_depth`.
    #[must_use]
    pub fn with_max_depth(self, max_depth: u8) -> Params {
        Params { max_depth, ..self }
    }

    /// Stops after `time` of wall clock (`None`: no budget).
    #[must_use]
    pub fn with_time(self, time: Option<Duration>) -> Params {
        Params { time, ..self }
    }

    /// Stops once the engines reported `nodes` in all (`None`: no budget).
    #[must_use]
    pub fn with_nodes(self, nodes: Option<u64>) -> Params {
        Params { nodes, ..self }
    }

    /// Deep Blue's "no progress" rule on or off.
    #[must_use]
    pub fn with_no_progress(self, no_progress: bool) -> Params {
        Params { no_progress, ..self }
    }

    /// Screening of alternatives (`None`: off).
    #[must_use]
    pub fn with_screen(self, screen: Option<Screening>) -> Params {
        Params { screen, ..self }
    }

    /// Another engine depth.
    #[must_use]
    pub fn with_engine_depth(self, engine_depth: u8) -> Params {
        Params { engine_depth, ..self }
    }

    /// Another move distance.
    #[must_use]
    pub fn with_move_distance(self, move_distance: i32) -> Params {
        Params { move_distance, ..self }
    }

    /// The move distance of each side where it differs: `[white, black]` (`None`: the move distance).
    #[must_use]
    pub fn with_side_distances(self, side_distances: [Option<i32>; 2]) -> Params {
        Params { side_distances, ..self }
    }

    /// The move distance at plies 0 and 1 of the moves of `side`.
    pub fn move_distance_of(&self, side: shakmaty::Color) -> i32 {
        let index = if side.is_white() { 0 } else { 1 };
        self.side_distances[index].unwrap_or(self.move_distance)
    }
}

/// The combined depth the tree knows at `line`'s root, as a game's policy credits it (docs/design.md §7.1), looked
/// for up to `play_depth`: the engine depth of its evaluation plus the software depth settled below it, stored at an
/// analysed root or found by walking the stored graph up to `play_depth`, at most [`MAX_CHECKED_DEPTH`] below the
/// evaluation; `None` without an evaluation. A depth of `play_depth` or more means the position is known deep enough
/// for play: stored that deep, or found with the full move distance or a narrowed one ([`settles_narrowed`]). A
/// smaller one is what the walk at the full move distance settles (or the stored settled depth, if more).
pub fn known_depth(
    view: &crate::store::ReadView<'_>,
    line: &Line,
    params: &Params,
    play_depth: u8,
) -> Result<Option<u32>, crate::store::StoreError> {
    let Some(node) = view.node(PositionKey::of(line.root()))? else { return Ok(None) };
    let Some(eval) = &node.eval else { return Ok(None) };
    let stored = eval.depth.saturating_add(node.settled_depth.unwrap_or(0));
    if stored >= play_depth {
        return Ok(Some(u32::from(eval.depth) + u32::from(node.settled_depth.unwrap_or(0))));
    }
    let needed = play_depth - eval.depth;
    let at_engine_depth = params.clone().with_engine_depth(eval.depth);
    let settled = SettledInStore::new(view, line);
    // The full move distance first (the first step of the narrowed check, whose depth is reported when short).
    let walked = settled.deepest(&at_engine_depth, 1, needed.min(MAX_CHECKED_DEPTH))?;
    if walked == Some(needed) || narrowed_from(&settled, &at_engine_depth, needed, 1)?.is_some() {
        return Ok(Some(u32::from(play_depth)));
    }
    let settled = walked.unwrap_or(0).max(node.settled_depth.unwrap_or(0));
    Ok(Some(u32::from(eval.depth) + u32::from(settled)))
}

/// Halvings of the move distance [`settles_narrowed`] may use, each counted as one ply less.
pub const MAX_NARROWING: u8 = 2;

/// Narrowest move distance [`settles_narrowed`] uses, in centipawns: below it a pass follows little more than the
/// best line.
pub const MIN_CHECKED_DISTANCE: i32 = 5;

/// Whether the stored graph settles software depth `needed` (at least 1) below `settled`'s root with `params`, whose
/// engine depth is the root's evaluation's: the halvings of the move distance that did it, or `None`.
///
/// A position `p` plies below an analysed root was walked with the root's move distance halved `p - 1` times, so a
/// pass with the full distance may ask for alternatives the root never needed. The check tries the full distance,
/// then halves it up to [`MAX_NARROWING`] times (not below [`MIN_CHECKED_DISTANCE`]; never where either side has its
/// own distance: those are checked as they are), and counts each halving as one ply less: with half the move
/// distance, the depth needed plus one must settle. That exchange is a rule of the go policy, not a result of the
/// search; growth that follows play and `--from-games` count the depth a position is known to as the policy does
/// ([`known_depth`]).
pub fn settles_narrowed(
    settled: &SettledInStore<'_, '_>,
    params: &Params,
    needed: u8,
) -> Result<Option<u8>, StoreError> {
    narrowed_from(settled, params, needed, 0)
}

/// [`settles_narrowed`] from `from` halvings on.
fn narrowed_from(
    settled: &SettledInStore<'_, '_>,
    params: &Params,
    needed: u8,
    from: u8,
) -> Result<Option<u8>, StoreError> {
    if needed == 0 || needed > MAX_CHECKED_DEPTH {
        return Ok(None);
    }
    let by_side = params.side_distances.iter().any(Option::is_some);
    for narrowing in from..=MAX_NARROWING {
        let move_distance = params.move_distance >> narrowing;
        if narrowing > 0 && (move_distance < MIN_CHECKED_DISTANCE || by_side) {
            break;
        }
        let depth = needed + narrowing;
        let narrowed = params.clone().with_move_distance(move_distance);
        if settled.deepest(&narrowed, 1, depth)? == Some(depth) {
            return Ok(Some(narrowing));
        }
    }
    Ok(None)
}

/// Screening (docs/design.md §4.1): a node's moves without an edge are searched at the engine depth `D` only when
/// a shallower look says they could still enter the window.
///
/// The search for alternatives is asked at depth `D` as always, but screened: it stops at the first iteration of depth
/// `D - reduction` or deeper whose score, plus `margin`, is below the node's threshold (best - move distance), and that
/// shallower score is stored as the node's [`ScreenBound`](crate::store::node::ScreenBound), never as a depth-`D`
/// value. The walk closes a node whose screen bound, plus the margin, is below its threshold, and searches its
/// alternatives at `D` (unscreened) once a wider window, or a best move that dropped, lets the screened score reach it.
/// A screen bounds the moves that had no edge when it was found: once one of them gains an edge, the rest are screened
/// again before any further search at `D` (Muller's "more drastic IID").
///
/// An inner engine deepens one iteration after another, so a screen that does not cut costs the engine nothing: its
/// shallower iterations are those the search at `D` runs anyway. With several engines, a screened search runs whole
/// on one of them (it is not split into searches of each move alone, which would each run to `D`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screening {
    /// Plies below the engine depth from which a search may be cut.
    pub reduction: u8,
    /// Centipawns added to a screened score before it is compared with the threshold: how far a deeper search may
    /// raise it.
    pub margin: i32,
}

impl Screening {
    /// The rule and margin measured in docs/benchmarks.md ("Screening").
    pub const DEFAULT: Screening = Screening { reduction: 2, margin: 15 };

    /// Screening as a setting gives it (on or off, and a margin in centipawns): `None` when it is off.
    pub fn of_setting(on: bool, margin: u32) -> Option<Screening> {
        on.then(|| Screening { margin: margin.min(10_000) as i32, ..Screening::DEFAULT })
    }

    /// The shallowest depth a screen may cut at, for searches at `engine_depth`; `None` when it would be below 1.
    pub fn depth(&self, engine_depth: u8) -> Option<u8> {
        engine_depth.checked_sub(self.reduction).filter(|d| *d >= 1 && self.reduction > 0)
    }

    /// The score a screened bound may reach at the engine depth: the bound plus the margin (a mate score as it is).
    pub fn reach(&self, screened: Score) -> Score {
        if screened.is_mate() { screened } else { screened.minus_cp(-self.margin) }
    }
}

/// The move distance at `ply`: `δ` at plies 0 and 1, halved at each ply after (20, 20, 10, 5, 2, 1, 0 ...).
pub fn move_distance_at(move_distance: i32, ply: u8) -> i32 {
    if ply <= 1 { move_distance } else { move_distance >> (ply - 1).min(31) }
}

/// One settled software depth, as Deep Blue's table 3 reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Iteration {
    pub software_depth: u8,
    /// Shallowest and deepest ply at which the settling pass relied on an engine score.
    pub min_depth: u8,
    pub max_depth: u8,
    /// Software depth plus the engine depth.
    pub combined_min: u16,
    pub combined_max: u16,
    /// Inner-engine searches during this depth.
    pub evaluations: u64,
    pub passes: u32,
    /// Positions in the store when it settled.
    pub positions: u64,
    pub elapsed_seconds: f64,
}

/// What an analysis did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Inner-engine searches answered this run, ahead of their turn or not: `stored` less `shared`, plus `unasked`.
    pub evaluations: u64,
    /// Nodes the inner engines reported for those searches.
    pub engine_nodes: u64,
    /// Answers stored: the searches a run with one engine asks. Each is one evaluation `stats` counts (a position's
    /// own evaluation, or a move searched from it), new where the tree had none, else replacing a shallower one.
    pub stored: u64,
    /// Answers of this run's engines that no pass asked for (searches run ahead of their turn, or moves searched
    /// alone beside a better one): not stored in the tree, they stay in the claims for other processes.
    pub unasked: u64,
    /// Searches started ahead of their turn, to keep engines busy.
    pub ahead: u64,
    /// Of those, the searches a pass asked for (the rest were not needed, or not yet when the run ended).
    pub ahead_used: u64,
    /// Searches stopped before their answer: when the run ended, those still running.
    pub abandoned: u64,
    /// Searches running ahead of their turn that were stopped because the tree no longer led to them (their node was
    /// cut off or left the window).
    pub aborted: u64,
    /// Engine seconds those stopped searches had run, and would still have taken (the mean search time, less what
    /// each ran).
    pub aborted_seconds_ran: f64,
    pub aborted_seconds_saved: f64,
    /// Positions in the store.
    pub positions: u64,
    pub settled_depth: Option<u8>,
    pub iterations: Vec<Iteration>,
    /// Stopped by the time limit, the node budget or an interrupt before `max_depth` settled.
    pub stopped: bool,
    /// The node budget (`--nodes`), and by how many nodes the searches answered went past it.
    pub node_budget: Option<u64>,
    pub node_overshoot: Option<u64>,
    /// Searches the engines failed (left for a later run).
    pub failed: u64,
    /// Answers taken from searches another process sharing the store ran (claimed in the store), instead of asking
    /// them again.
    pub shared: u64,
}

/// Why an analysis could not run.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// The store could not be read or written (its message as it is; `source()` is the store's error).
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The trace file could not be created.
    #[error("cannot write the trace: {0}")]
    Trace(#[source] std::io::Error),
}

macro_rules! trace {
    ($trace:expr, $($arg:tt)*) => {
        if $trace.enabled() {
            $trace.line(format_args!($($arg)*));
        }
    };
}

mod recorder;
mod scheduler;
mod trace;
mod walk;

pub use self::trace::Trace;

use recorder::Recorder;
use scheduler::{Context, Scheduler};
use walk::{WalkResult, Walker};

fn fen(pos: &Chess) -> String {
    Fen::from_position(pos, shakmaty::EnPassantMode::Legal).to_string()
}

/// The root of a run: its position, its key and the positions of the game before it.
struct Root {
    position: Chess,
    key: PositionKey,
    history: Vec<PositionKey>,
}

impl Root {
    fn of(line: &Line) -> Root {
        Root { position: line.root().clone(), key: PositionKey::of(line.root()), history: line.history_keys() }
    }
}

/// When a run must end: stopped from outside, or its time or node budget spent.
struct Budget {
    /// Set to stop cleanly.
    stop: Arc<AtomicBool>,
    time: Option<Duration>,
    nodes: Option<u64>,
    started: Instant,
}

impl Budget {
    /// The clock of the time budget starts now.
    fn start(&mut self) {
        self.started = Instant::now();
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The run must end: stopped, or its time spent, or the engines reported `engine_nodes` of a node budget.
    fn spent(&self, engine_nodes: u64) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self.time.is_some_and(|t| self.started.elapsed() >= t)
            || self.nodes.is_some_and(|n| engine_nodes >= n)
    }
}

/// How an analysis runs, beside its [`Params`]: all set when it is made ([`Analysis::with_options`]).
pub struct AnalysisOptions {
    /// How many software depths past the one being settled the host may look for searches to run ahead of their
    /// turn when an engine is free. `None` runs nothing ahead: every pass waits for its slowest search.
    pub look_ahead: Option<u8>,
    /// One line per decision ([`Trace::to_file`]); off by default.
    pub trace: Trace,
    /// Where a live progress line is shown (a command's status line, [`StatusLine`](crate::logger::StatusLine));
    /// `None` shows none.
    pub progress: Option<Arc<dyn Progress>>,
    /// Set to stop cleanly (Ctrl-C, a GUI's stop).
    pub stop: Arc<AtomicBool>,
    /// Store the root's line as engine-scored edges first (off when the caller has stored the line itself).
    pub line_edges: bool,
    /// Counts the nodes the inner engines report for the answered searches, as they come (`None`: a counter of its
    /// own, [`Analysis::nodes_so_far`]); runs that share one count together, and a node budget ([`Params::nodes`])
    /// is then on the shared count.
    pub nodes: Option<Arc<AtomicU64>>,
}

impl Default for AnalysisOptions {
    /// The default look ahead, no trace, no progress line, a stop flag of its own, the line stored as edges.
    fn default() -> AnalysisOptions {
        AnalysisOptions {
            look_ahead: Some(DEFAULT_LOOK_AHEAD),
            trace: Trace::off(),
            progress: None,
            stop: Arc::new(AtomicBool::new(false)),
            line_edges: true,
            nodes: None,
        }
    }
}

/// The deep-analysis search of one root: the loop over depths and passes. It owns the three parts that do the work:
/// the walk, which plans the searches of a pass from the stored graph (`walk`); the scheduler, which runs them on
/// the engines, ahead of their turn where engines are free, shared with other processes through claims
/// (`scheduler`); and the recorder, which turns their answers into store changes and counts what the run did
/// (`recorder`).
pub struct Analysis<'a, E: Evaluator> {
    walk: Walker<'a>,
    scheduler: Scheduler<'a, E>,
    recorder: Recorder<'a>,
    store: &'a Store,
    trace: Trace,
    progress: Option<Arc<dyn Progress>>,
    budget: Budget,
    line_edges: bool,
}

impl<'a, E: Evaluator> Analysis<'a, E> {
    /// An analysis with the default [`AnalysisOptions`].
    pub fn new(store: &'a Store, evaluator: E, params: Params) -> Self {
        Analysis::with_options(store, evaluator, params, AnalysisOptions::default())
    }

    /// An analysis of `store` with `evaluator`'s engines, everything about it set here: nothing is set after.
    pub fn with_options(store: &'a Store, evaluator: E, params: Params, options: AnalysisOptions) -> Self {
        let AnalysisOptions { look_ahead, trace, progress, stop, line_edges, nodes } = options;
        Analysis {
            budget: Budget { stop, time: params.time, nodes: params.nodes, started: Instant::now() },
            walk: Walker::new(store, params),
            scheduler: Scheduler::new(store, evaluator, look_ahead),
            recorder: Recorder::new(store, nodes.unwrap_or_default()),
            store,
            trace,
            progress,
            line_edges,
        }
    }

    /// The parameters it searches with.
    pub fn params(&self) -> &Params {
        self.walk.params()
    }

    /// Its evaluator (a test's recording of the searches asked, say).
    pub fn evaluator(&self) -> &E {
        self.scheduler.evaluator()
    }

    /// Its evaluator, to take what it recorded.
    pub fn evaluator_mut(&mut self) -> &mut E {
        self.scheduler.evaluator_mut()
    }

    /// Nodes the inner engines reported for the searches answered so far, readable while the run goes on (a GUI's
    /// `info nodes` while the tree grows).
    pub fn nodes_so_far(&self) -> Arc<AtomicU64> {
        self.recorder.nodes_so_far()
    }

    /// The run must end: stopped, or its time or node budget is spent.
    fn out_of_time(&self) -> bool {
        // The count the run shares (with the other searches of a growth, where it is shared): a node budget is the
        // whole run's.
        self.budget.spent(self.recorder.nodes_so_far().load(Ordering::Relaxed))
    }

    /// Runs the analysis of `line`'s root, calling `on_iteration` after each settled depth.
    pub fn run(&mut self, line: &Line, mut on_iteration: impl FnMut(&Iteration)) -> Result<Report, AnalysisError> {
        self.begin(line)?;
        let mut stopped = self.line_edges && self.store_line(line)?;
        let mut iterations = Vec::new();
        let mut settled = None;
        let mut depth = 0u8;
        while !stopped && depth <= self.walk.params().max_depth {
            // A depth that plans no search (every line ends in a mate or a repetition) settles without asking the
            // engines, which check the budget themselves: the budget is checked here too, or such a tree would run
            // on to the last depth whatever the clock.
            if depth > 0 && self.out_of_time() {
                stopped = true;
                break;
            }
            match self.settle(depth)? {
                Some(iteration) => {
                    settled = Some(depth);
                    on_iteration(&iteration);
                    iterations.push(iteration);
                }
                None => stopped = true,
            }
            depth = depth.saturating_add(1);
            if depth == u8::MAX {
                break;
            }
        }
        self.finish(iterations, settled, stopped)
    }

    /// Starts a run from `line`'s root: the clock, the engines in the store, the root, the claims.
    fn begin(&mut self, line: &Line) -> Result<(), AnalysisError> {
        self.budget.start();
        let evaluator = self.scheduler.evaluator();
        self.recorder.begin(evaluator.identity(), evaluator.engine_names())?;
        self.walk.begin(line);
        self.scheduler.begin();
        let params = self.walk.params();
        trace!(
            self.trace,
            "analysis of {} (key {}) with {} history positions: engine depth {}, move distance {}, max depth {}",
            fen(line.root()),
            PositionKey::of(line.root()),
            line.history_keys().len(),
            params.engine_depth,
            params.move_distance,
            params.max_depth
        );
        Ok(())
    }

    /// Settles software depth `depth`: passes until one plans nothing. `None` where the run ends first: stopped, out
    /// of budget, or a search failed so that the depth cannot settle.
    fn settle(&mut self, depth: u8) -> Result<Option<Iteration>, AnalysisError> {
        let stored_before = self.recorder.stored();
        let depth_started = Instant::now();
        let mut passes = 0u32;
        loop {
            passes += 1;
            let walk_started = Instant::now();
            let WalkResult { planned, terminal, min_leaf, max_ply, skipped } =
                self.walk.pass(&mut self.trace, self.recorder.failed(), depth, passes)?;
            log::debug!(
                "depth {depth} pass {passes}: walk {:.1} ms, {} searches planned",
                walk_started.elapsed().as_secs_f64() * 1e3,
                planned.len()
            );
            if !terminal.is_empty() {
                self.scheduler.lay_over(&terminal)?;
                self.recorder.write(terminal)?;
            }
            if planned.is_empty() && skipped > 0 {
                // Positions whose searches failed are still missing: this depth is not settled, and deeper
                // ones cannot be; stop here (a later run retries them).
                log::warn!("depth {depth} cannot settle: {skipped} searches failed in this run");
                trace!(self.trace, "depth {depth} not settled: {skipped} searches failed; the analysis ends");
                return Ok(None);
            }
            if planned.is_empty() {
                let plies = (min_leaf.min(max_ply), max_ply);
                let evaluations = self.recorder.stored() - stored_before;
                return self.settled(depth, passes, plies, evaluations, depth_started).map(Some);
            }
            trace!(self.trace, "pass {passes} at depth {depth} planned {} searches", planned.len());
            if self.run_pass(planned, depth, passes)? {
                return Ok(None);
            }
        }
    }

    /// Depth `depth` settled after `passes`, its leaves at `plies` (shallowest, deepest): marked at the root, and
    /// reported.
    fn settled(
        &mut self,
        depth: u8,
        passes: u32,
        (min_depth, max_depth): (u8, u8),
        evaluations: u64,
        started: Instant,
    ) -> Result<Iteration, AnalysisError> {
        if let Some(root) = self.walk.root() {
            self.recorder.settled(&root.position, root.key, depth)?;
        }
        let engine_depth = u16::from(self.walk.params().engine_depth);
        let iteration = Iteration {
            software_depth: depth,
            min_depth,
            max_depth,
            combined_min: u16::from(min_depth) + engine_depth,
            combined_max: u16::from(max_depth) + engine_depth,
            evaluations,
            passes,
            positions: self.store.stats()?.positions,
            elapsed_seconds: started.elapsed().as_secs_f64(),
        };
        trace!(self.trace, "settled depth {depth} after {passes} passes, {} evaluations", iteration.evaluations);
        Ok(iteration)
    }

    /// Ends a run: what still runs is stopped, the claims released, the trace flushed, the progress line cleared.
    fn finish(
        &mut self,
        iterations: Vec<Iteration>,
        settled: Option<u8>,
        stopped: bool,
    ) -> Result<Report, AnalysisError> {
        let scheduled = self.scheduler.end(&mut self.trace);
        self.trace.flush();
        if let Some(progress) = &self.progress {
            progress.clear();
        }
        let (recorder, nodes) = (&self.recorder, self.walk.params().nodes);
        Ok(Report {
            evaluations: recorder.evaluations(),
            engine_nodes: recorder.engine_nodes(),
            stored: recorder.stored(),
            unasked: scheduled.unasked,
            ahead: scheduled.started,
            ahead_used: scheduled.used,
            abandoned: scheduled.abandoned,
            aborted: scheduled.aborted,
            aborted_seconds_ran: scheduled.aborted_ran.as_secs_f64(),
            aborted_seconds_saved: scheduled.aborted_saved.as_secs_f64(),
            positions: self.store.stats()?.positions,
            settled_depth: settled,
            iterations,
            stopped,
            node_budget: nodes,
            node_overshoot: nodes.map(|n| recorder.engine_nodes().saturating_sub(n)),
            failed: recorder.failures(),
            shared: recorder.shared(),
        })
    }

    /// Stores the root's line as edges (one search of each line move it lacks). Returns true when stopped.
    fn store_line(&mut self, line: &Line) -> Result<bool, AnalysisError> {
        let (planned, marks) = self.walk.line(&mut self.trace, line)?;
        if !marks.is_empty() {
            self.scheduler.lay_over(&marks)?;
            self.recorder.write(marks)?;
        }
        if planned.is_empty() {
            return Ok(false);
        }
        self.run_pass(planned, 0, 0)
    }

    /// Runs a pass's planned searches on the engines and stores every answer, together. Returns true when stopped.
    fn run_pass(&mut self, planned: Vec<Planned>, depth: u8, pass_number: u32) -> Result<bool, AnalysisError> {
        let pass_started = Instant::now();
        let mut ctx = Context {
            walk: &self.walk,
            recorder: &mut self.recorder,
            trace: &mut self.trace,
            budget: &self.budget,
            progress: self.progress.as_deref(),
        };
        let (answers, stopped) = self.scheduler.answer_pass(&mut ctx, &planned, depth, pass_number)?;
        let answers_done = Instant::now();
        self.recorder.record_pass(&planned, answers, stopped, &mut self.trace)?;
        log::debug!(
            "depth {depth} pass {pass_number}: {} searches answered after {:.1} ms, stored {:.1} ms later",
            planned.len(),
            (answers_done - pass_started).as_secs_f64() * 1e3,
            answers_done.elapsed().as_secs_f64() * 1e3
        );
        self.trace.flush();
        Ok(stopped)
    }
}

/// Software depths past the one being settled that the host looks ahead by default.
pub const DEFAULT_LOOK_AHEAD: u8 = 2;

/// Most software depths below a position that a check of what the tree knows there walks (the go policy's below an
/// analysed root, growth that follows play's exits): a walk of the stored graph per depth; deeper than this, a
/// position is only known as deep as its own settled depth says.
pub const MAX_CHECKED_DEPTH: u8 = 8;

/// The software depths a pass from `line`'s root would settle with what the store holds now, without a search.
///
/// A position below an analysed root has no settled depth of its own (that is written only where an analysis had it
/// as root), but the root's passes evaluated the lines through it. `SettledInStore` asks, for one depth at a time,
/// what a pass of an analysis of this position would ask: would the walk of the stored graph at that depth, with the
/// position as root, its game history and `params`, plan any search? The terminal positions it meets do not count:
/// an analysis stores them and settles in the same pass. Nothing is written and no engine runs; a walk stops at the
/// first search it would plan, and the walks share one cache of decoded records.
///
/// A depth that plans nothing here is not always one an analysis would report as settled: an analysis settles the
/// depths in order, with the engine depth of its settings, where a caller here may give the engine depth of the
/// position's own evaluation or a narrower move distance.
pub struct SettledInStore<'v, 's> {
    graph: StoreGraph<'v, 's>,
    root: Root,
}

impl<'v, 's> SettledInStore<'v, 's> {
    pub fn new(view: &'v crate::store::ReadView<'s>, line: &Line) -> Self {
        SettledInStore { graph: StoreGraph::new(view), root: Root::of(line) }
    }

    /// Whether a pass at software depth `depth` with `params` would plan no search.
    pub fn plans_nothing(&self, params: &Params, depth: u8) -> Result<bool, StoreError> {
        let nothing = walk::plans_nothing(&self.graph, params, &self.root, depth)?;
        match self.graph.take_error() {
            Some(e) => Err(e),
            None => Ok(nothing),
        }
    }

    /// The last of the depths `from`, `from + 1`, ... `up_to` that plan nothing, each after all the ones before it;
    /// `None` when `from` plans a search (or `from > up_to`).
    pub fn deepest(&self, params: &Params, from: u8, up_to: u8) -> Result<Option<u8>, StoreError> {
        let mut settled = None;
        for depth in from..=up_to {
            if !self.plans_nothing(params, depth)? {
                break;
            }
            settled = Some(depth);
        }
        Ok(settled)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn an_analysis_error_says_what_it_said_and_gives_its_source() {
        let store = StoreError::Missing { path: "/nowhere".into() };
        let e = AnalysisError::from(store.clone());
        assert_eq!(e.to_string(), store.to_string());
        assert_eq!(e.source().map(ToString::to_string), Some(store.to_string()));
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = AnalysisError::Trace(io);
        assert_eq!(e.to_string(), "cannot write the trace: denied");
        assert_eq!(e.source().map(ToString::to_string).as_deref(), Some("denied"));
    }
}
