//! Settle-then-deepen: the deep-analysis search of a root.
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

use std::{
    collections::{HashMap, HashSet, VecDeque},
    fmt,
    fs::File,
    io::{BufWriter, IsTerminal, Write},
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use shakmaty::{Chess, Position, fen::Fen, uci::UciMove};

use crate::{
    score::{Bound, Score},
    store::{
        Change, Store, StoreError,
        key::{KeyMap, KeySet, PositionKey},
        node::{Edge, Eval, Node, PackedPosition, RestBound},
        play_uci,
    },
};

use super::{
    evaluator::{Answer, Evaluator, Job},
    graph::{Records, StoreGraph},
    host::{Flights, JobKey, Planned, Purpose},
    minimax::{UNROLL_BUDGET, alpha_of_edge, alpha_of_node},
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
}

/// The move distance at `ply`: `δ` at plies 0 and 1, halved at each ply after (20, 20, 10, 5, 2, 1, 0 ...).
pub fn move_distance_at(move_distance: i32, ply: u8) -> i32 {
    if ply <= 1 { move_distance } else { move_distance >> (ply - 1).min(31) }
}

/// A root as UCI gives it: a start position and moves played from it. The last position is the root; the earlier
/// ones are its history.
#[derive(Debug, Clone)]
pub struct Line {
    pub start: Chess,
    /// In their stored (canonical) form, whichever castling notation they came in.
    pub moves: Vec<UciMove>,
    /// Positions from the start to the root, both included.
    pub positions: Vec<Chess>,
    /// Chess960: asked for, or implied by the FEN (Shredder-FEN, or castling rights only Chess960 has).
    pub chess960: bool,
}

/// A root that cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    BadFen { fen: String, reason: String },
    BadMove { uci: String, ply: usize, reason: &'static str },
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::BadFen { fen, reason } => write!(f, "bad FEN {}: {reason}", quote(fen)),
            LineError::BadMove { uci, ply, reason } => write!(f, "move {} ({}): {reason}", ply + 1, quote(uci)),
        }
    }
}

impl std::error::Error for LineError {}

/// User input quoted in an error message: `'text'`, or for a longer text its first 80 characters and its length
/// (`'e2e4e2e4...' (5000000 characters)`), so that a message stays readable whatever was sent.
pub fn quote(text: &str) -> String {
    const SHOWN: usize = 80;
    match text.char_indices().nth(SHOWN) {
        None => format!("'{text}'"),
        Some((end, _)) => format!("'{}...' ({} characters)", &text[..end], text.chars().count()),
    }
}

impl Line {
    /// Parses `fen` (the start position when `None`) and the space-separated UCI `moves`, checking each is legal.
    pub fn parse(fen: Option<&str>, moves: &str) -> Result<Line, LineError> {
        Line::parse_in(fen, moves, false)
    }

    /// As [`Line::parse`], with positions set up for Chess960 when `chess960` (or when the FEN implies it). Castling
    /// is accepted as the king's move and as the king taking its rook, and kept in the stored form.
    pub fn parse_in(fen: Option<&str>, moves: &str, chess960: bool) -> Result<Line, LineError> {
        let (start, chess960) = match fen.map(str::trim).filter(|f| !f.is_empty() && *f != "startpos") {
            None => (crate::notation::start_position(chess960), chess960),
            Some(fen) => crate::notation::parse_position(fen, chess960)
                .map_err(|reason| LineError::BadFen { fen: fen.to_owned(), reason })?,
        };
        let mut positions = vec![start.clone()];
        let mut parsed = Vec::new();
        for (ply, text) in moves.split_whitespace().enumerate() {
            let uci: UciMove =
                text.parse().map_err(|_| LineError::BadMove { uci: text.to_owned(), ply, reason: "not a UCI move" })?;
            let current = positions.last().cloned().unwrap_or_default();
            let m = uci.to_move(&current).map_err(|_| LineError::BadMove {
                uci: text.to_owned(),
                ply,
                reason: "illegal in its position",
            })?;
            let mut next = current;
            next.play_unchecked(m);
            positions.push(next);
            parsed.push(crate::notation::canonical(m));
        }
        Ok(Line { start, moves: parsed, positions, chess960 })
    }

    /// The standard start position with no moves.
    pub fn start_position() -> Line {
        Line { start: Chess::default(), moves: Vec::new(), positions: vec![Chess::default()], chess960: false }
    }

    pub fn root(&self) -> &Chess {
        self.positions.last().unwrap_or(&self.start)
    }

    /// Keys of the positions before the root, oldest first.
    pub fn history_keys(&self) -> Vec<PositionKey> {
        self.positions[..self.positions.len().saturating_sub(1)].iter().map(PositionKey::of).collect()
    }
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
    /// Inner-engine searches answered this run, ahead of their turn or not.
    pub evaluations: u64,
    /// Answers stored: the searches a run with one engine asks.
    pub stored: u64,
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
    /// Stopped by the time limit or an interrupt before `max_depth` settled.
    pub stopped: bool,
    /// Searches the engines failed (left for a later run).
    pub failed: u64,
}

/// Why an analysis could not run.
#[derive(Debug)]
pub enum AnalysisError {
    Store(StoreError),
    Trace(std::io::Error),
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalysisError::Store(e) => e.fmt(f),
            AnalysisError::Trace(e) => write!(f, "cannot write the trace: {e}"),
        }
    }
}

impl std::error::Error for AnalysisError {}

impl From<StoreError> for AnalysisError {
    fn from(e: StoreError) -> AnalysisError {
        AnalysisError::Store(e)
    }
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

fn fen(pos: &Chess) -> String {
    Fen::from_position(pos, shakmaty::EnPassantMode::Legal).to_string()
}

/// One pass: the alpha-beta walk that plans searches.
struct Walk<'t, G: Records> {
    tree: &'t G,
    params: &'t Params,
    depth: u8,
    trace: &'t mut Trace,
    planned: Vec<Planned>,
    planned_keys: KeySet,
    failed: &'t KeySet,
    /// Lowest ply at which each node was walked in this pass, and the beta its walk was cut at (if it was).
    walked: KeyMap<(u8, Option<Score>)>,
    terminal: Vec<Change>,
    min_leaf: u8,
    max_ply: u8,
    /// Searches not planned because they failed earlier in this run: a pass with any is not settled.
    skipped: usize,
}

const MINUS_INFINITY: Score = Score::MATED_NOW;
const PLUS_INFINITY: Score = Score::MATE_NOW;

impl<G: Records> Walk<'_, G> {
    fn plan(&mut self, key: PositionKey, purpose: Purpose, job: Job) {
        if self.failed.contains(&key) {
            trace!(self.trace, "skip {key}: its engine search failed earlier in this run");
            self.skipped += 1;
            return;
        }
        if self.planned_keys.insert(key) {
            self.planned.push(Planned { key, purpose, job });
        }
    }

    fn leaf(&mut self, ply: u8) {
        self.min_leaf = self.min_leaf.min(ply);
        self.max_ply = self.max_ply.max(ply);
    }

    /// Walks `pos` at `ply`; returns its value for the side to move, or `None` when it has no evaluation yet.
    fn visit(
        &mut self,
        pos: &Chess,
        key: PositionKey,
        ply: u8,
        alpha: Score,
        beta: Score,
        path: &mut Vec<PositionKey>,
    ) -> Result<Option<Score>, StoreError> {
        self.max_ply = self.max_ply.max(ply);
        let node = self.tree.record(key)?;
        let needs_eval = node.as_ref().and_then(|n| n.eval.as_ref()).is_none_or(|e| e.depth < self.params.engine_depth);
        if needs_eval {
            return Ok(self.evaluate(pos, key, ply));
        }
        let Some(node) = node else { return Ok(None) };
        let Some(gnode) = self.tree.node(key) else { return Ok(None) };
        let mut budget = UNROLL_BUDGET;
        if ply >= self.depth || gnode.edges.is_empty() {
            self.leaf(ply);
            return Ok(Some(alpha_of_node(self.tree, &gnode, path, &mut budget)));
        }
        if self.walked_enough(key, ply, beta) {
            return Ok(Some(alpha_of_node(self.tree, &gnode, path, &mut budget)));
        }

        // Estimates of every move from the minimaxed graph (alpha: repetitions of the path are draws).
        let mut moves: Vec<(usize, Score)> = gnode
            .edges
            .iter()
            .enumerate()
            .map(|(i, e)| (i, alpha_of_edge(self.tree, e.child, e.score, path, &mut budget)))
            .collect();
        moves.sort_by_key(|m| std::cmp::Reverse(m.1));
        let best_estimate = moves.first().map_or(MINUS_INFINITY, |m| m.1);
        let distance = move_distance_at(self.params.move_distance, ply);
        let threshold = best_estimate.minus_cp(distance);
        self.search_alternatives(pos, key, ply, &node, Window { best_estimate, distance, threshold });

        let mut best: Option<Score> = None;
        let mut alpha = alpha;
        let mut cut = false;
        for (index, estimate) in moves {
            let edge = &gnode.edges[index];
            let Some(uci) = edge.uci else { continue };
            let imported = node.edge(&uci).is_some_and(|e| e.imported);
            if cut && !imported {
                continue; // after a cut-off only imported moves, which the search keeps, are still walked
            }
            if estimate < threshold && !imported {
                trace!(
                    self.trace,
                    "refuse ply={ply} {} {}: {estimate} < best {best_estimate} - {distance} = {threshold}",
                    key,
                    san(pos, &uci)
                );
                best = Some(best.map_or(estimate, |b| b.max(estimate)));
                continue;
            }
            trace!(
                self.trace,
                "admit ply={ply} {} {}: {estimate} >= {threshold}{}",
                key,
                san(pos, &uci),
                if imported && estimate < threshold { " (imported)" } else { "" }
            );
            let value = if path.contains(&edge.child) {
                self.leaf(ply + 1);
                Score::DRAW
            } else {
                let Some(child) = play_uci(pos, &uci) else { continue };
                path.push(edge.child);
                // Sign flip: the child's window and value are from the opponent's side.
                let child_value = self.visit(&child, edge.child, ply + 1, beta.back_up(), alpha.back_up(), path)?;
                path.pop();
                child_value.map_or(estimate, Score::back_up)
            };
            best = Some(best.map_or(value, |b| b.max(value)));
            alpha = alpha.max(value);
            if ply >= 2 && value >= beta && !cut {
                trace!(self.trace, "cut ply={ply} {} after {}: {value} >= beta {beta}", key, san(pos, &uci));
                cut = true;
            }
        }
        self.remember_walk(key, ply, cut.then_some(beta));
        Ok(best)
    }

    /// A position with no evaluation at the engine depth: a checkmate or stalemate is valued at once (no engine
    /// needed); any other is planned for an evaluation and has no value in this pass.
    fn evaluate(&mut self, pos: &Chess, key: PositionKey, ply: u8) -> Option<Score> {
        self.leaf(ply);
        if pos.legal_moves().is_empty() {
            let score = if pos.is_check() { Score::MATED_NOW } else { Score::DRAW };
            let mut terminal = Node::new(PackedPosition::of(pos));
            terminal.eval =
                Some(Eval { score, bound: Bound::Exact, depth: self.params.engine_depth, best: None, nodes: 0 });
            trace!(self.trace, "terminal ply={ply} {key} {}: {score}", fen(pos));
            self.terminal.push(Change::Merge { key, node: terminal, children: Vec::new() });
            return Some(score);
        }
        trace!(
            self.trace,
            "evaluate ply={ply} {key} {}: no evaluation at depth {}",
            fen(pos),
            self.params.engine_depth
        );
        self.plan(
            key,
            Purpose::Evaluate,
            Job { position: pos.clone(), searchmoves: Vec::new(), depth: self.params.engine_depth },
        );
        None
    }

    /// A transposition already walked in this pass at this ply or a shallower one, and not cut short of what the
    /// window `beta` needs: its value can be taken as it stands.
    fn walked_enough(&self, key: PositionKey, ply: u8, beta: Score) -> bool {
        self.walked
            .get(&key)
            .is_some_and(|&(earlier, cut_at)| earlier <= ply && cut_at.is_none_or(|cut_beta| beta <= cut_beta))
    }

    /// The search for alternatives goes on while the unsearched moves could be within the window: their bound (the
    /// node's rest bound, or the best estimate when it has none) at least the threshold.
    fn search_alternatives(&mut self, pos: &Chess, key: PositionKey, ply: u8, node: &Node, window: Window) {
        let Window { best_estimate, distance, threshold } = window;
        let unsearched: Vec<UciMove> = pos
            .legal_moves()
            .iter()
            .map(|m| crate::notation::canonical(*m))
            .filter(|u| node.edge(u).is_none())
            .collect();
        if unsearched.is_empty() {
            return;
        }
        let rest = node.rest.map_or(best_estimate, |r: RestBound| r.score);
        if rest >= threshold {
            trace!(
                self.trace,
                "alternatives ply={ply} {key} {}: unsearched moves bounded by {rest} >= best {best_estimate} - {distance} = {threshold}; searching {} moves",
                fen(pos),
                unsearched.len()
            );
            let count = unsearched.len();
            self.plan(
                key,
                Purpose::Alternatives { unsearched: count },
                Job { position: pos.clone(), searchmoves: unsearched, depth: self.params.engine_depth },
            );
        } else {
            trace!(
                self.trace,
                "closed ply={ply} {key}: {} unsearched moves bounded by {rest} < best {best_estimate} - {distance} = {threshold}",
                unsearched.len()
            );
        }
    }

    /// Remembers the walk of `key` (and the beta it was cut at) so that a transposition can reuse it; a walk at a
    /// shallower ply is kept.
    fn remember_walk(&mut self, key: PositionKey, ply: u8, cut_at: Option<Score>) {
        let earlier = self.walked.get(&key).copied();
        let entry = match earlier {
            Some((earlier_ply, _)) if earlier_ply < ply => (earlier_ply, earlier.and_then(|e| e.1)),
            _ => (ply, cut_at),
        };
        self.walked.insert(key, entry);
    }
}

/// The move distance window at a node: its best estimate, the distance at its ply and the threshold below which a
/// move is refused.
#[derive(Clone, Copy)]
struct Window {
    best_estimate: Score,
    distance: i32,
    threshold: Score,
}

/// What one pass found to do.
#[derive(Default)]
struct WalkResult {
    planned: Vec<Planned>,
    terminal: Vec<Change>,
    min_leaf: u8,
    max_ply: u8,
    skipped: usize,
}

/// The root of a run: its position, its key and the positions of the game before it.
struct Root {
    position: Chess,
    key: PositionKey,
    history: Vec<PositionKey>,
}

/// Searches run ahead of their turn, so that no engine waits while a pass waits for its slowest search (DESIGN.md
/// section 2.5).
///
/// When an engine is free and the pass has nothing more to start, the host walks the tree as it will be once every
/// answer received so far is stored (the [`Overlay`]), at the depth being settled and then deeper, and starts the
/// first search that walk plans: the next alternative of a node, the child of a move just found, the next depth's
/// leaves. Its answer waits in [`Flights`] until a pass asks for that very search, and only then is it stored. So the
/// store, and every decision the search settles, are those of a run with one engine; a search no pass asks for is
/// dropped at the end of the run, and counted.
#[derive(Default)]
struct Speculation {
    /// The tree with every answer of this run in it; `None` when nothing is run ahead.
    overlay: Option<Overlay>,
    /// Searches the last look ahead found, most useful first.
    queue: VecDeque<Planned>,
    /// The overlay generation the queue was planned from.
    planned_at: Option<u64>,
    /// Searches started ahead of their turn.
    started: u64,
    /// Of those, searches a pass took.
    used: u64,
    /// Every search the last look ahead reached, running or not: one running ahead that is not among them is
    /// stopped.
    wanted: HashSet<JobKey>,
    /// Searches stopped because no look ahead reached them any more.
    aborted: u64,
    /// Engine time of answered searches and their count, for the time an aborted search would have taken.
    answered_time: Duration,
    answered: u64,
}

impl Speculation {
    /// The engine time stopping a search after `ran` saves: what a search takes on average, less what it ran.
    fn saved_by_stopping(&self, ran: Duration) -> Duration {
        let mean = self.answered_time.checked_div(self.answered.max(1) as u32).unwrap_or_default();
        mean.saturating_sub(ran)
    }
}

/// The deep-analysis search of one root.
pub struct Analysis<'a, E: Evaluator> {
    pub store: &'a Store,
    pub evaluator: E,
    pub params: Params,
    pub trace: Trace,
    /// Set to stop cleanly (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Show a live progress line on stderr (only when it is a terminal).
    pub progress: bool,
    /// Store the root's line as engine-scored edges first (off when the caller has stored the line itself).
    pub line_edges: bool,
    /// How many software depths past the one being settled the host may look for searches to run ahead of their
    /// turn when an engine is free. `None` runs nothing ahead: every pass waits for its slowest search.
    pub look_ahead: Option<u8>,
    flights: Flights,
    speculation: Speculation,
    root: Option<Root>,
    failed: KeySet,
    /// Engine searches answered this run, ahead of their turn or not.
    evaluations: u64,
    /// Answers the passes stored: what a run with one engine asks.
    stored_answers: u64,
    /// Searches stopped before their answer.
    abandoned: u64,
    /// Engine time that searches stopped as no longer needed had run, and that stopping them saved.
    aborted_ran: Duration,
    aborted_saved: Duration,
    failures: u64,
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
            progress: false,
            line_edges: true,
            look_ahead: Some(DEFAULT_LOOK_AHEAD),
            flights: Flights::default(),
            speculation: Speculation::default(),
            root: None,
            failed: KeySet::default(),
            evaluations: 0,
            stored_answers: 0,
            abandoned: 0,
            aborted_ran: Duration::ZERO,
            aborted_saved: Duration::ZERO,
            failures: 0,
            started: Instant::now(),
        }
    }

    fn out_of_time(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.params.time.is_some_and(|t| self.started.elapsed() >= t)
    }

    /// Runs the analysis of `line`'s root, calling `on_iteration` after each settled depth.
    pub fn run(&mut self, line: &Line, mut on_iteration: impl FnMut(&Iteration)) -> Result<Report, AnalysisError> {
        self.started = Instant::now();
        self.store.writer().submit(vec![Change::SetEngine(self.evaluator.identity())]).wait()?;
        let root = line.root().clone();
        let root_key = PositionKey::of(&root);
        self.root = Some(Root { position: root.clone(), key: root_key, history: line.history_keys() });
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
        let unused = self.speculation.started - self.speculation.used;
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
        if self.progress && std::io::stderr().is_terminal() {
            eprint!("\r\x1b[2K");
        }
        Ok(Report {
            evaluations: self.evaluations,
            stored: self.stored_answers,
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
            failed: self.failures,
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
                            job: Job {
                                position: pos.clone(),
                                searchmoves: vec![*uci],
                                depth: self.params.engine_depth,
                            },
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

    /// Runs a pass's planned searches and stores every answer, together; engines the pass leaves free run searches
    /// ahead of their turn. Returns true when stopped.
    ///
    /// A planned search that already ran ahead is not asked again: its answer is taken, or awaited while it runs. A
    /// search for alternatives whose every move was searched alone ahead of its turn is answered by the best of them.
    fn run_pass(&mut self, planned: Vec<Planned>, depth: u8, pass_number: u32) -> Result<bool, AnalysisError> {
        let pass_started = Instant::now();
        let total = planned.len();
        let mut pass = Pass {
            answers: vec![None; total],
            waiting: HashMap::with_capacity(total),
            composites: Vec::new(),
            outstanding: 0,
            known: 0,
            predicted_at: None,
            next: VecDeque::new(),
            predicted: HashSet::new(),
        };
        let mut to_start: VecDeque<usize> = VecDeque::new();
        for (i, plan) in planned.iter().enumerate() {
            let job = JobKey::of(plan);
            if let Some(answer) = self.flights.take(&job) {
                trace!(self.trace, "adopt {} {:?}: answered ahead of its turn", plan.key, plan.purpose);
                self.speculation.used += 1;
                pass.answer(i, Ok(answer));
                continue;
            }
            if let Some(parts) = self.composable(plan) {
                trace!(
                    self.trace,
                    "compose {} {:?}: every move searched alone ahead of its turn", plan.key, plan.purpose
                );
                let composite = pass.composites.len();
                let mut missing = 0;
                for part in &parts {
                    if !self.flights.has_answer(part) {
                        missing += 1;
                        pass.waiting.entry(part.clone()).or_default().push(Waiter::Part(composite));
                    }
                }
                if missing == 0 {
                    pass.answer(i, self.compose(&parts));
                } else {
                    pass.outstanding += 1;
                }
                pass.composites.push(Composite { index: i, parts, missing, failure: None });
                continue;
            }
            match self.flights.claim(&job) {
                Some(true) => {
                    trace!(self.trace, "adopt {} {:?}: running ahead of its turn", plan.key, plan.purpose);
                    self.speculation.used += 1;
                }
                Some(false) => {}
                None => to_start.push_back(i),
            }
            pass.waiting.entry(job).or_default().push(Waiter::Plan(i));
            pass.outstanding += 1;
        }
        // Engines this pass leaves free look ahead, even when it has everything it needs.
        self.start_searches(&planned, &mut to_start, &mut pass, depth)?;
        let mut stopped = false;
        while pass.outstanding > 0 {
            if self.out_of_time() {
                self.abandon();
                stopped = true;
                break;
            }
            self.start_searches(&planned, &mut to_start, &mut pass, depth)?;
            self.show_progress(depth, pass_number, total - pass.outstanding, total);
            let Some(first) = self.evaluator.next(Duration::from_millis(100)) else { continue };
            // Every answer that is in now, before the next look ahead.
            let mut overlay_changes = Vec::new();
            let mut next = Some(first);
            while let Some((id, result)) = next.take() {
                overlay_changes.extend(self.land(id, result, &mut pass));
                next = self.evaluator.next(Duration::ZERO);
            }
            self.lay_over(&overlay_changes)?;
            self.stop_unwanted(depth, &pass)?;
        }
        let answers_done = Instant::now();
        let mut receipts = Vec::with_capacity(total);
        for (plan, answer) in planned.iter().zip(pass.answers) {
            match answer {
                None => {} // stopped before it was answered
                Some(Ok(answer)) => {
                    self.stored_answers += 1;
                    trace!(
                        self.trace,
                        "answer {} {:?}: {} {} depth {}",
                        plan.key,
                        plan.purpose,
                        answer.best,
                        answer.score,
                        answer.depth
                    );
                    match change_for(plan, &answer) {
                        Some(change) => receipts.push(self.store.writer().submit(vec![change])),
                        None => {
                            log::warn!("answer for {} does not fit its position; left out", plan.key);
                            self.failed.insert(plan.key);
                            self.failures += 1;
                        }
                    }
                }
                Some(Err(e)) if stopped => {
                    log::debug!("engine search of {} ended with the analysis: {e}", plan.key);
                    self.failed.insert(plan.key);
                }
                Some(Err(e)) => {
                    log::warn!("engine search of {} failed: {e}", plan.key);
                    trace!(self.trace, "failed {} {:?}: {e}", plan.key, plan.purpose);
                    self.failed.insert(plan.key);
                    self.failures += 1;
                }
            }
        }
        for receipt in receipts {
            receipt.wait()?;
        }
        log::debug!(
            "depth {depth} pass {pass_number}: {total} searches answered after {:.1} ms, stored {:.1} ms later",
            (answers_done - pass_started).as_secs_f64() * 1e3,
            answers_done.elapsed().as_secs_f64() * 1e3
        );
        self.trace.flush();
        Ok(stopped)
    }

    /// The searches of each move alone that answer `plan`, a search for the best of several alternatives, when every
    /// one of them ran (or runs) ahead of its turn.
    fn composable(&self, plan: &Planned) -> Option<Vec<JobKey>> {
        if !plan.splits() {
            return None;
        }
        let parts: Vec<JobKey> =
            plan.job.searchmoves.iter().map(|m| JobKey::single(plan.key, m, plan.job.depth)).collect();
        parts.iter().all(|p| self.flights.has_answer(p) || self.flights.is_running(p)).then_some(parts)
    }

    /// The best of the answers of moves searched alone: the answer a search of all of them would give. Ties go to
    /// the move that comes first in UCI notation, so the answer does not depend on the order they came in. The best
    /// move's answer is taken; the others stay for the next search of the node's alternatives.
    fn compose(&mut self, parts: &[JobKey]) -> Result<Answer, String> {
        let best = parts
            .iter()
            .filter_map(|part| Some((part, self.flights.peek(part)?)))
            .max_by(|a, b| a.1.score.cmp(&b.1.score).then_with(|| b.1.best.to_string().cmp(&a.1.best.to_string())))
            .map(|(part, _)| part.clone())
            .ok_or_else(|| "no move was answered".to_owned())?;
        let nodes = parts.iter().filter_map(|part| self.flights.peek(part)).map(|a| a.nodes).sum();
        self.speculation.used += 1;
        let mut answer = self.flights.take(&best).ok_or_else(|| "the best move's answer is gone".to_owned())?;
        answer.nodes = nodes;
        Ok(answer)
    }

    /// Fills free engines: first with the pass's own searches, then with searches ahead of their turn.
    fn start_searches(
        &mut self,
        planned: &[Planned],
        to_start: &mut VecDeque<usize>,
        pass: &mut Pass,
        depth: u8,
    ) -> Result<(), AnalysisError> {
        let workers = self.evaluator.workers();
        while self.flights.running() < workers {
            if let Some(i) = to_start.pop_front() {
                let plan = planned[i].clone();
                let id = self.flights.book(plan.clone(), false);
                if let Err(e) = self.evaluator.submit(id, plan.job) {
                    log::warn!("search of {} not started: {e}", plan.key);
                    if let Some(flight) = self.flights.land(id) {
                        pass.waiting.remove(&flight.job);
                    }
                    pass.answer(i, Err(e));
                    pass.outstanding -= 1;
                }
                continue;
            }
            let Some(plan) = self.next_ahead(depth, planned, pass)? else { break };
            trace!(self.trace, "ahead {} {:?}: started ahead of its turn", plan.key, plan.purpose);
            let id = self.flights.book(plan.clone(), true);
            self.speculation.started += 1;
            if let Err(e) = self.evaluator.submit(id, plan.job) {
                log::debug!("search ahead of {} not started: {e}", plan.key);
                self.flights.land(id);
                self.speculation.started -= 1;
                break;
            }
        }
        Ok(())
    }

    /// The most useful search to run ahead of its turn, if any. First what the next pass will likely ask for, as far
    /// as this pass's answers tell; then the first search the look-ahead walk planned that is neither running nor
    /// answered. Each walk is made again whenever answers came in since the last one.
    fn next_ahead(
        &mut self,
        depth: u8,
        planned: &[Planned],
        pass: &mut Pass,
    ) -> Result<Option<Planned>, AnalysisError> {
        let Some(generation) = self.speculation.overlay.as_ref().map(Overlay::generation) else { return Ok(None) };
        if pass.predicted_at != Some(pass.known) {
            let predicted = self.predict_next_pass(depth, planned, pass)?;
            pass.predicted = predicted.iter().map(JobKey::of).collect();
            pass.next = predicted.into_iter().filter(|plan| self.flights.is_new(&JobKey::of(plan))).collect();
            pass.predicted_at = Some(pass.known);
        }
        while let Some(plan) = pass.next.pop_front() {
            let job = JobKey::of(&plan);
            if self.flights.is_new(&job) {
                return Ok(Some(plan));
            }
        }
        if self.speculation.planned_at != Some(generation) {
            self.look_ahead_walk(depth)?;
        }
        while let Some(plan) = self.speculation.queue.pop_front() {
            let job = JobKey::of(&plan);
            if self.flights.is_new(&job) {
                return Ok(Some(plan));
            }
        }
        Ok(None)
    }

    /// What the next pass will ask for where it depends only on this pass's answers in so far: the walk of the store
    /// with them laid over it.
    fn predict_next_pass(&self, depth: u8, planned: &[Planned], pass: &Pass) -> Result<Vec<Planned>, AnalysisError> {
        let Some(root) = &self.root else { return Ok(Vec::new()) };
        let changes: Vec<Change> = planned
            .iter()
            .zip(&pass.answers)
            .filter_map(|(plan, answer)| change_for(plan, answer.as_ref()?.as_ref().ok()?))
            .collect();
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let view = self.store.read()?;
        let mut next = Overlay::default();
        next.apply(&view, &changes)?;
        let graph = StoreGraph::new(&view);
        let mut quiet = Trace::off();
        let result = walk_tree(&next.over(&graph), &self.params, &mut quiet, &self.failed, root, depth)?;
        if let Some(e) = graph.take_error() {
            return Err(e.into());
        }
        Ok(result.planned)
    }

    /// Walks the overlaid tree at `depth` and at each depth after it up to the look ahead, and queues the new
    /// searches they plan, shallowest depth first. Where engines would still be left free, the searches for
    /// alternatives it planned are split into searches of each move alone, queued last. Every search the walks reach
    /// (new, running or answered), and the moves of every search for alternatives, are the wanted ones.
    fn look_ahead_walk(&mut self, depth: u8) -> Result<(), AnalysisError> {
        let (Some(root), Some(overlay)) = (&self.root, &self.speculation.overlay) else { return Ok(()) };
        let free = self.evaluator.workers().saturating_sub(self.flights.running());
        let last = depth.saturating_add(self.look_ahead.unwrap_or(0)).min(self.params.max_depth);
        let view = self.store.read()?;
        let graph = StoreGraph::new(&view);
        let tree = overlay.over(&graph);
        let mut queue = VecDeque::new();
        let mut wanted: HashSet<JobKey> = HashSet::new();
        let mut terminal = Vec::new();
        let mut quiet = Trace::off();
        let flights = &self.flights;
        let enqueue = |plan: Planned, queue: &mut VecDeque<Planned>, wanted: &mut HashSet<JobKey>| {
            let job = JobKey::of(&plan);
            if wanted.insert(job.clone()) && flights.is_new(&job) {
                queue.push_back(plan);
            }
        };
        let mut alternatives = Vec::new();
        for ahead in depth..=last {
            let result = walk_tree(&tree, &self.params, &mut quiet, &self.failed, root, ahead)?;
            terminal.extend(result.terminal);
            for plan in result.planned {
                if plan.splits() {
                    alternatives.push(plan.clone());
                }
                enqueue(plan, &mut queue, &mut wanted);
            }
        }
        for plan in alternatives.into_iter().flat_map(singles) {
            if queue.len() >= free {
                wanted.insert(JobKey::of(&plan));
            } else {
                enqueue(plan, &mut queue, &mut wanted);
            }
        }
        if let Some(e) = graph.take_error() {
            return Err(e.into());
        }
        self.speculation.queue = queue;
        self.speculation.wanted = wanted;
        if let Some(overlay) = &mut self.speculation.overlay {
            overlay.apply(&view, &terminal)?;
            self.speculation.planned_at = Some(overlay.generation());
        }
        Ok(())
    }

    /// Takes in the answer of search `id`: a pass's answer goes to the pass, one that ran ahead waits for its turn.
    /// Returns the change that lays the answer over the tree for the next look ahead.
    fn land(&mut self, id: u64, result: Result<Answer, String>, pass: &mut Pass) -> Option<Change> {
        let flight = self.flights.land(id)?;
        let waiters = pass.waiting.remove(&flight.job).unwrap_or_default();
        let mut taken = false;
        let mut complete = Vec::new();
        for waiter in &waiters {
            match waiter {
                Waiter::Plan(i) => {
                    pass.answer(*i, result.clone());
                    pass.outstanding -= 1;
                    taken = true;
                }
                Waiter::Part(c) => {
                    let composite = &mut pass.composites[*c];
                    if let Err(e) = &result {
                        composite.failure.get_or_insert_with(|| e.clone());
                    }
                    composite.missing -= 1;
                    if composite.missing == 0 {
                        pass.outstanding -= 1;
                        complete.push(*c);
                    }
                }
            }
        }
        let laid_over = self.speculation.overlay.is_some();
        let change = match result {
            Ok(answer) => {
                self.evaluations += 1;
                self.speculation.answered_time += flight.started.elapsed();
                self.speculation.answered += 1;
                // The change is needed to keep the answer (it must fit its position) or to lay it over the tree.
                let change = (laid_over || !taken).then(|| change_for(&flight.plan, &answer)).flatten();
                if !taken {
                    match change {
                        Some(_) => self.flights.keep(flight.job, answer),
                        None => log::debug!("answer for {} does not fit its position; dropped", flight.plan.key),
                    }
                }
                change.filter(|_| laid_over)
            }
            Err(e) => {
                if waiters.is_empty() {
                    // A pass that needs it will ask again.
                    log::debug!("search ahead of {} failed: {e}", flight.plan.key);
                }
                None
            }
        };
        for c in complete {
            let composite = &pass.composites[c];
            let (index, failure, parts) = (composite.index, composite.failure.clone(), composite.parts.clone());
            let answer = match failure {
                Some(e) => Err(e),
                None => self.compose(&parts),
            };
            pass.answer(index, answer);
        }
        change
    }

    /// Stops the searches running ahead of their turn that the tree, with every answer in so far, no longer leads to
    /// (their node was cut off or left the window), unless this pass waits for them or predicts them for the next.
    fn stop_unwanted(&mut self, depth: u8, pass: &Pass) -> Result<(), AnalysisError> {
        let Some(generation) = self.speculation.overlay.as_ref().map(Overlay::generation) else { return Ok(()) };
        if self.flights.speculative().next().is_none() {
            return Ok(());
        }
        if self.speculation.planned_at != Some(generation) {
            self.look_ahead_walk(depth)?;
        }
        let unwanted: Vec<u64> = self
            .flights
            .speculative()
            .filter(|(_, job)| {
                !self.speculation.wanted.contains(job)
                    && !pass.waiting.contains_key(job)
                    && !pass.predicted.contains(job)
            })
            .map(|(id, _)| id)
            .collect();
        for id in unwanted {
            if !self.evaluator.cancel(id) {
                continue;
            }
            let Some(flight) = self.flights.land(id) else { continue };
            let ran = flight.started.elapsed();
            trace!(
                self.trace,
                "abort {} {:?}: the tree no longer leads to it; ran {:.1} ms",
                flight.plan.key,
                flight.plan.purpose,
                ran.as_secs_f64() * 1e3
            );
            self.speculation.aborted += 1;
            self.aborted_ran += ran;
            self.aborted_saved += self.speculation.saved_by_stopping(ran);
        }
        Ok(())
    }

    /// Lays changes over the tree that the look ahead walks (nothing when nothing runs ahead).
    fn lay_over(&mut self, changes: &[Change]) -> Result<(), AnalysisError> {
        if let Some(overlay) = &mut self.speculation.overlay
            && !changes.is_empty()
        {
            let view = self.store.read()?;
            overlay.apply(&view, changes)?;
        }
        Ok(())
    }

    /// Stops every running search; their answers, if they still come, are ignored.
    fn abandon(&mut self) {
        if self.flights.running() > 0 {
            self.abandoned += self.flights.running() as u64;
            self.evaluator.cancel_all();
            self.flights.abandon_all();
        }
    }

    fn show_progress(&self, depth: u8, pass: u32, done: usize, total: usize) {
        if self.progress && std::io::stderr().is_terminal() {
            let secs = self.started.elapsed().as_secs();
            eprint!(
                "\r\x1b[2Kdepth {depth} pass {pass}: {done}/{total} searches, {} evaluations, {}:{:02}:{:02}",
                self.evaluations,
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            );
        }
    }
}

/// What a pass waits for.
struct Pass {
    answers: Vec<Option<Result<Answer, String>>>,
    /// Who waits for each running search.
    waiting: HashMap<JobKey, Vec<Waiter>>,
    composites: Vec<Composite>,
    /// Planned searches still without an answer.
    outstanding: usize,
    /// Answers in so far, and how many there were when the next pass was last predicted from them.
    known: usize,
    predicted_at: Option<usize>,
    /// Searches the next pass will likely ask for, as far as this pass's answers tell: those to start, and all of
    /// them (a search started for the next pass is not stopped).
    next: VecDeque<Planned>,
    predicted: HashSet<JobKey>,
}

impl Pass {
    /// The answer of planned search `i`.
    fn answer(&mut self, i: usize, answer: Result<Answer, String>) {
        self.answers[i] = Some(answer);
        self.known += 1;
    }
}

/// Who waits for a running search.
#[derive(Debug, Clone, Copy)]
enum Waiter {
    /// The pass's planned search `i`.
    Plan(usize),
    /// A move of composite `c`.
    Part(usize),
}

/// A planned search for alternatives answered by searches of each move alone.
struct Composite {
    /// Its place in the pass.
    index: usize,
    parts: Vec<JobKey>,
    /// Parts still running.
    missing: usize,
    failure: Option<String>,
}

/// The searches a look ahead runs for a planned one: a search for the best of several alternatives becomes one
/// search of each move alone, so that they run at once.
fn singles(plan: Planned) -> Vec<Planned> {
    if !plan.splits() {
        return vec![plan];
    }
    plan.job
        .searchmoves
        .iter()
        .map(|m| Planned {
            key: plan.key,
            purpose: Purpose::Single,
            job: Job { position: plan.job.position.clone(), searchmoves: vec![*m], depth: plan.job.depth },
        })
        .collect()
}

/// Software depths past the one being settled that the host looks ahead by default.
pub const DEFAULT_LOOK_AHEAD: u8 = 2;

/// Walks `tree` from the root at software depth `depth`: what it plans, the terminal positions it met, the plies it
/// reached.
fn walk_tree<G: Records>(
    tree: &G,
    params: &Params,
    trace: &mut Trace,
    failed: &KeySet,
    root: &Root,
    depth: u8,
) -> Result<WalkResult, StoreError> {
    let mut walk = Walk {
        tree,
        params,
        depth,
        trace,
        planned: Vec::new(),
        planned_keys: KeySet::default(),
        failed,
        walked: KeyMap::default(),
        terminal: Vec::new(),
        min_leaf: u8::MAX,
        max_ply: 0,
        skipped: 0,
    };
    let mut path: Vec<PositionKey> = root.history.clone();
    path.push(root.key);
    walk.visit(&root.position, root.key, 0, MINUS_INFINITY, PLUS_INFINITY, &mut path)?;
    Ok(WalkResult {
        planned: walk.planned,
        terminal: walk.terminal,
        min_leaf: walk.min_leaf,
        max_ply: walk.max_ply,
        skipped: walk.skipped,
    })
}

/// The change that stores an answer.
fn change_for(plan: &Planned, answer: &Answer) -> Option<Change> {
    let pos = &plan.job.position;
    if !plan.job.searchmoves.is_empty() && !plan.job.searchmoves.contains(&answer.best) {
        return None;
    }
    let mut node = Node::new(PackedPosition::of(pos));
    let mut edge = Edge::new(answer.best, answer.score, answer.bound, answer.depth);
    match plan.purpose {
        Purpose::Evaluate => {
            node.eval = Some(Eval {
                score: answer.score,
                bound: answer.bound,
                depth: answer.depth,
                best: Some(answer.best),
                nodes: answer.nodes,
            });
            // The best move bounds every other move from above.
            if pos.legal_moves().len() > 1 {
                node.rest = Some(RestBound { score: answer.score, depth: answer.depth });
            }
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
