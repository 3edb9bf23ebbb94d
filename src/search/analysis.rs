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
//! Here: the parameters, the root's line, the report and the loop over depths and passes. The walk of a pass is in
//! `walk`; how a pass runs its searches, and what the engines it leaves free do ahead of their turn, is in `ahead`.

use std::{
    collections::HashMap,
    fmt,
    fs::File,
    io::{BufWriter, Write},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use shakmaty::{Chess, Position, fen::Fen};

use crate::store::{
    Change, Store, StoreError,
    claims::{ClaimedAnswer, Claims},
    key::{KeySet, PositionKey},
    node::{Edge, Eval, Node, PackedPosition, RestBound, ScreenBound},
};

use crate::{game::Line, logger::Progress, score::Score, values::graph::StoreGraph};

use super::{
    evaluator::{Answer, Evaluator, Job},
    host::{Flights, Planned, Purpose},
    overlay::Overlay,
    show::san_of as san,
};

/// The three parameters of the search, and its budget.
#[derive(Debug, Clone)]
pub struct Params {
    /// Engine depth `D` of every inner-engine search.
    pub engine_depth: u8,
    /// Move distance `δ` in centipawns at plies 0 and 1.
    pub move_distance: i32,
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
}

/// Screening (docs/design.md §4.1): a node's moves without an edge are searched at the engine depth `D` only when
/// a shallower look says they could still enter the window.
///
/// The search for alternatives is asked at depth `D` as always, but screened: it stops at the first iteration of depth
/// `D - reduction` or deeper whose score, plus `margin`, is below the node's threshold (best - move distance), and that
/// shallower score is stored as the node's [`ScreenBound`], never as a depth-`D` value. The walk closes a node whose
/// screen bound, plus the margin, is below its threshold, and searches its alternatives at `D` (unscreened) once a
/// wider window, or a best move that dropped, lets the screened score reach it. A screen bounds the moves that had no
/// edge when it was found: once one of them gains an edge, the rest are screened again before any further search at `D`
/// (Muller's "more drastic IID").
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
#[derive(Debug, Clone, serde::Serialize)]
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

/// One line per decision, so a user can tell why a position was or was not analysed.
pub struct Trace {
    out: Option<BufWriter<File>>,
}

impl Trace {
    pub fn off() -> Trace {
        Trace { out: None }
    }

    pub fn to_file(path: &Path) -> Result<Trace, AnalysisError> {
        Ok(Trace { out: Some(BufWriter::new(File::create(path).map_err(AnalysisError::Trace)?)) })
    }

    fn enabled(&self) -> bool {
        self.out.is_some()
    }

    fn line(&mut self, args: fmt::Arguments) {
        if let Some(out) = &mut self.out
            && writeln!(out, "{args}").is_err()
        {
            log::warn!("the trace file could not be written; tracing stops");
            self.out = None;
        }
    }

    fn flush(&mut self) {
        if let Some(out) = &mut self.out {
            let _ = out.flush();
        }
    }
}

macro_rules! trace {
    ($trace:expr, $($arg:tt)*) => {
        if $trace.enabled() {
            $trace.line(format_args!($($arg)*));
        }
    };
}

mod ahead;
mod walk;

use ahead::Speculation;
use walk::{WalkResult, walk_tree};

fn fen(pos: &Chess) -> String {
    Fen::from_position(pos, shakmaty::EnPassantMode::Legal).to_string()
}

/// The root of a run: its position, its key and the positions of the game before it.
struct Root {
    position: Chess,
    key: PositionKey,
    history: Vec<PositionKey>,
}

/// The deep-analysis search of one root.
pub struct Analysis<'a, E: Evaluator> {
    pub store: &'a Store,
    pub evaluator: E,
    pub params: Params,
    pub trace: Trace,
    /// Set to stop cleanly (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Where a live progress line is shown (the command's status line); `None` shows none.
    pub progress: Option<Arc<dyn Progress>>,
    /// Store the root's line as engine-scored edges first (off when the caller has stored the line itself).
    pub line_edges: bool,
    /// How many software depths past the one being settled the host may look for searches to run ahead of their
    /// turn when an engine is free. `None` runs nothing ahead: every pass waits for its slowest search.
    pub look_ahead: Option<u8>,
    /// Nodes the inner engines reported for the searches answered so far, readable while the run goes on (a GUI's
    /// `info nodes` while the tree grows).
    pub nodes_so_far: Arc<AtomicU64>,
    flights: Flights,
    speculation: Speculation,
    root: Option<Root>,
    failed: KeySet,
    /// Engine searches answered this run, ahead of their turn or not.
    evaluations: u64,
    /// Nodes the inner engines reported for the answered searches.
    engine_nodes: u64,
    /// Answers the passes stored: what a run with one engine asks.
    stored_answers: u64,
    /// Searches stopped before their answer.
    abandoned: u64,
    /// Numbers of the engines in the store's list, by the names answers give.
    engine_numbers: HashMap<String, u16>,
    /// Engine time that searches stopped as no longer needed had run, and that stopping them saved.
    aborted_ran: Duration,
    aborted_saved: Duration,
    failures: u64,
    /// This run's claims on searches in the store, shared with other processes; `None` when they cannot be used
    /// (the run then shares nothing).
    claims: Option<Claims>,
    /// Answers taken from other processes' searches.
    shared: u64,
    started: Instant,
}

impl<'a, E: Evaluator> Analysis<'a, E> {
    pub fn new(store: &'a Store, evaluator: E, params: Params) -> Self {
        Analysis {
            store,
            evaluator,
            params,
            trace: Trace::off(),
            stop: Arc::new(AtomicBool::new(false)),
            progress: None,
            line_edges: true,
            look_ahead: Some(DEFAULT_LOOK_AHEAD),
            flights: Flights::default(),
            speculation: Speculation::default(),
            root: None,
            failed: KeySet::default(),
            evaluations: 0,
            engine_nodes: 0,
            nodes_so_far: Arc::new(AtomicU64::new(0)),
            stored_answers: 0,
            abandoned: 0,
            engine_numbers: HashMap::new(),
            aborted_ran: Duration::ZERO,
            aborted_saved: Duration::ZERO,
            failures: 0,
            claims: None,
            shared: 0,
            started: Instant::now(),
        }
    }

    /// The run must end: stopped, or its time or node budget is spent.
    fn out_of_time(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self.params.time.is_some_and(|t| self.started.elapsed() >= t)
            || self.params.nodes.is_some_and(|n| self.engine_nodes >= n)
    }

    /// Runs the analysis of `line`'s root, calling `on_iteration` after each settled depth.
    pub fn run(&mut self, line: &Line, mut on_iteration: impl FnMut(&Iteration)) -> Result<Report, AnalysisError> {
        self.started = Instant::now();
        self.store.writer().submit(vec![Change::SetEngine(self.evaluator.identity())]).wait()?;
        let names = self.evaluator.engine_names();
        let numbers = self.store.engine_numbers(&names)?;
        self.engine_numbers =
            names.into_iter().zip(numbers).filter_map(|(name, number)| Some((name, number?))).collect();
        let root = line.root().clone();
        let root_key = PositionKey::of(&root);
        self.root = Some(Root { position: root.clone(), key: root_key, history: line.history_keys() });
        self.claims = match self.store.claims() {
            Ok(claims) => Some(claims),
            Err(e) => {
                log::log!(crate::store::claims::level_of(&e), "searches are not shared with other processes: {e}");
                None
            }
        };
        self.speculation = Speculation::default();
        if self.look_ahead.is_some() && self.evaluator.workers() > 1 {
            self.speculation.overlay = Some(Overlay::default());
        }
        trace!(
            self.trace,
            "analysis of {} (key {root_key}) with {} history positions: engine depth {}, move distance {}, max depth {}",
            fen(&root),
            line.history_keys().len(),
            self.params.engine_depth,
            self.params.move_distance,
            self.params.max_depth
        );
        let mut stopped = self.line_edges && self.store_line(line)?;
        let mut iterations = Vec::new();
        let mut settled = None;
        let mut depth = 0u8;
        while !stopped && depth <= self.params.max_depth {
            // A depth that plans no search (every line ends in a mate or a repetition) settles without asking the
            // engines, which check the budget themselves: the budget is checked here too, or such a tree would run
            // on to the last depth whatever the clock.
            if depth > 0 && self.out_of_time() {
                stopped = true;
                break;
            }
            let stored_before = self.stored_answers;
            let depth_started = Instant::now();
            let mut passes = 0u32;
            loop {
                passes += 1;
                let walk_started = Instant::now();
                let WalkResult { planned, terminal, min_leaf, max_ply, skipped } = self.walk(depth, passes)?;
                log::debug!(
                    "depth {depth} pass {passes}: walk {:.1} ms, {} searches planned",
                    walk_started.elapsed().as_secs_f64() * 1e3,
                    planned.len()
                );
                if !terminal.is_empty() {
                    self.lay_over(&terminal)?;
                    self.store.writer().submit(terminal).wait()?;
                }
                if planned.is_empty() && skipped > 0 {
                    // Positions whose searches failed are still missing: this depth is not settled, and deeper
                    // ones cannot be; stop here (a later run retries them).
                    log::warn!("depth {depth} cannot settle: {skipped} searches failed in this run");
                    trace!(self.trace, "depth {depth} not settled: {skipped} searches failed; the analysis ends");
                    stopped = true;
                    break;
                }
                if planned.is_empty() {
                    let mut mark = Node::new(PackedPosition::of(&root));
                    mark.settled_depth = Some(depth);
                    self.store
                        .writer()
                        .submit(vec![Change::Merge { key: root_key, node: mark, children: vec![] }])
                        .wait()?;
                    settled = Some(depth);
                    let iteration = Iteration {
                        software_depth: depth,
                        min_depth: min_leaf.min(max_ply),
                        max_depth: max_ply,
                        combined_min: u16::from(min_leaf.min(max_ply)) + u16::from(self.params.engine_depth),
                        combined_max: u16::from(max_ply) + u16::from(self.params.engine_depth),
                        evaluations: self.stored_answers - stored_before,
                        passes,
                        positions: self.store.stats()?.positions,
                        elapsed_seconds: depth_started.elapsed().as_secs_f64(),
                    };
                    trace!(
                        self.trace,
                        "settled depth {depth} after {passes} passes, {} evaluations", iteration.evaluations
                    );
                    on_iteration(&iteration);
                    iterations.push(iteration);
                    break;
                }
                trace!(self.trace, "pass {passes} at depth {depth} planned {} searches", planned.len());
                if self.run_pass(planned, depth, passes)? {
                    stopped = true;
                    break;
                }
            }
            depth = depth.saturating_add(1);
            if depth == u8::MAX {
                break;
            }
        }
        // Searches still running were started ahead of their turn and no pass will ask for them now.
        self.abandon();
        // Releases what is still claimed; answers stay for other processes.
        self.claims = None;
        let unused = self.speculation.started.saturating_sub(self.speculation.used);
        // Answered here and never taken: the answers of other processes kept beside them are theirs.
        let unasked = self.flights.waiting().filter(|job| !self.speculation.from_others.contains(*job)).count() as u64;
        if self.speculation.started > 0 {
            trace!(
                self.trace,
                "searches run ahead of their turn: {} started, {} taken by a pass, {unused} not needed; {} stopped when \
                 the tree no longer led to them ({:.1} engine seconds saved)",
                self.speculation.started,
                self.speculation.used,
                self.speculation.aborted,
                self.aborted_saved.as_secs_f64()
            );
        }
        self.trace.flush();
        if let Some(progress) = &self.progress {
            progress.clear();
        }
        Ok(Report {
            evaluations: self.evaluations,
            engine_nodes: self.engine_nodes,
            stored: self.stored_answers,
            unasked,
            ahead: self.speculation.started,
            ahead_used: self.speculation.used,
            abandoned: self.abandoned,
            aborted: self.speculation.aborted,
            aborted_seconds_ran: self.aborted_ran.as_secs_f64(),
            aborted_seconds_saved: self.aborted_saved.as_secs_f64(),
            positions: self.store.stats()?.positions,
            settled_depth: settled,
            iterations,
            stopped,
            node_budget: self.params.nodes,
            node_overshoot: self.params.nodes.map(|n| self.engine_nodes.saturating_sub(n)),
            failed: self.failures,
            shared: self.shared,
        })
    }

    /// Stores the root's line as edges (one search of each line move it lacks). Returns true when stopped.
    fn store_line(&mut self, line: &Line) -> Result<bool, AnalysisError> {
        let mut planned = Vec::new();
        let mut marks = Vec::new();
        {
            let view = self.store.read()?;
            for (pos, uci) in line.positions.iter().zip(&line.moves) {
                let key = PositionKey::of(pos);
                let stored = view.node(key)?.and_then(|n| n.edge(uci).cloned());
                // A move already searched at the engine depth (by an earlier pass or run) is not asked again: a
                // second answer at the same depth would only replace the first. It is marked as a line move.
                match stored.filter(|e| e.depth >= self.params.engine_depth) {
                    Some(edge) if edge.imported => {}
                    Some(mut edge) => {
                        trace!(self.trace, "line move {} in {key} {}: already searched, kept", san(pos, uci), fen(pos));
                        edge.imported = true;
                        let mut node = Node::new(PackedPosition::of(pos));
                        node.edges.push(edge);
                        marks.push(Change::merge(pos, node)?);
                    }
                    None => {
                        trace!(self.trace, "line move {} in {key} {}: stored as an edge", san(pos, uci), fen(pos));
                        planned.push(Planned {
                            key,
                            purpose: Purpose::LineMove,
                            job: Job::new(pos.clone(), vec![*uci], self.params.engine_depth),
                        });
                    }
                }
            }
        }
        if !marks.is_empty() {
            self.lay_over(&marks)?;
            self.store.writer().submit(marks).wait()?;
        }
        if planned.is_empty() {
            return Ok(false);
        }
        self.run_pass(planned, 0, 0)
    }

    /// One pass's walk of the store at software depth `depth`.
    fn walk(&mut self, depth: u8, pass: u32) -> Result<WalkResult, AnalysisError> {
        let Some(root) = &self.root else { return Ok(WalkResult::default()) };
        let view = self.store.read()?;
        let graph = StoreGraph::new(&view);
        trace!(self.trace, "pass {pass} at software depth {depth}");
        let result = walk_tree(&graph, &self.params, &mut self.trace, &self.failed, root, depth)?;
        match graph.take_error() {
            Some(e) => Err(e.into()),
            None => Ok(result),
        }
    }

    /// The number of the engine that gave `answer` in the store's list, adding an engine not seen at the start (one
    /// whose name changed when it was started again).
    fn engine_number(&mut self, answer: &Answer) -> Option<u16> {
        let name = answer.engine.as_ref()?;
        if let Some(number) = self.engine_numbers.get(name) {
            return Some(*number);
        }
        match self.store.engine_numbers(std::slice::from_ref(name)) {
            Ok(numbers) => {
                let number = numbers.first().copied().flatten()?;
                self.engine_numbers.insert(name.clone(), number);
                Some(number)
            }
            Err(e) => {
                log::warn!("engine {name} not added to the store's list: {e}");
                None
            }
        }
    }

    fn show_progress(&self, depth: u8, pass: u32, done: usize, total: usize) {
        if let Some(progress) = &self.progress {
            let secs = self.started.elapsed().as_secs();
            progress.show(&format!(
                "depth {depth} pass {pass}: {done}/{total} searches, {} evaluations, {}:{:02}:{:02}",
                self.evaluations,
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            ));
        }
    }
}

/// Software depths past the one being settled that the host looks ahead by default.
pub const DEFAULT_LOOK_AHEAD: u8 = 2;

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
        let root =
            Root { position: line.root().clone(), key: PositionKey::of(line.root()), history: line.history_keys() };
        SettledInStore { graph: StoreGraph::new(view), root }
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

/// An answer as claims keep it for other processes.
fn claimed(answer: &Answer) -> ClaimedAnswer {
    ClaimedAnswer {
        best: answer.best,
        score: answer.score,
        bound: answer.bound,
        depth: answer.depth,
        nodes: answer.nodes,
        engine: answer.engine.clone(),
    }
}

/// An answer another process found.
fn from_claim(answer: ClaimedAnswer) -> Answer {
    Answer {
        best: answer.best,
        score: answer.score,
        bound: answer.bound,
        depth: answer.depth,
        nodes: answer.nodes,
        engine: answer.engine,
    }
}

/// The change that stores an answer; `engine` is the number of the engine that gave it in the store's list.
fn change_for(plan: &Planned, answer: &Answer, engine: Option<u16>) -> Option<Change> {
    let pos = &plan.job.position;
    if !plan.job.searchmoves.is_empty() && !plan.job.searchmoves.contains(&answer.best) {
        return None;
    }
    let mut node = Node::new(PackedPosition::of(pos));
    let mut edge = Edge::new(answer.best, answer.score, answer.bound, answer.depth);
    edge.engine = engine;
    match plan.purpose {
        Purpose::Evaluate => {
            node.eval = Some(Eval {
                score: answer.score,
                bound: answer.bound,
                depth: answer.depth,
                best: Some(answer.best),
                nodes: answer.nodes,
                engine,
            });
            // The best move bounds every other move from above.
            if pos.legal_moves().len() > 1 {
                node.rest = Some(RestBound { score: answer.score, depth: answer.depth });
            }
        }
        Purpose::Alternatives { unsearched }
            if plan.job.screen.is_some_and(|cut| u32::from(answer.depth) >= cut.from_depth)
                && answer.depth < plan.job.depth =>
        {
            // Cut by its screen: a shallower bound for every unsearched move, kept apart from depth-D values.
            node.screen =
                Some(ScreenBound { score: answer.score, depth: answer.depth, moves: unsearched.min(255) as u8 });
            return Change::merge(pos, node).ok();
        }
        Purpose::Alternatives { unsearched } => {
            // The best of the unsearched moves bounds the ones still unsearched.
            if unsearched > 1 {
                node.rest = Some(RestBound { score: answer.score, depth: answer.depth });
            }
        }
        Purpose::LineMove => edge.imported = true,
        Purpose::Single => {}
    }
    node.edges.push(edge);
    Change::merge(pos, node).ok()
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
