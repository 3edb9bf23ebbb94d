//! The walk of one pass: alpha-beta over the stored graph (or the graph with answers laid over it), planning a
//! search for every position it reaches that needs one (docs/design.md §3.3; beta cuts from ply 2, §3.4).
//!
//! [`Walker`] is the analysis' planner: it walks from the run's root with the run's parameters, over the store for a
//! pass, over the store with a pass's answers laid over it to predict the next pass, and over the overlay of every
//! answer for the searches to run ahead of their turn. It plans; it neither runs searches nor writes.

use crate::game::{Line, play_uci};
use shakmaty::{Chess, Position, uci::UciMove};

use crate::{
    engine::ScreenCut,
    score::Score,
    store::{
        Change, ReadView, Store, StoreError,
        answer::terminal_record,
        key::{KeyMap, KeySet, PositionKey},
        marks::searchable_moves,
        node::{Edge, Node, PackedPosition, RestBound},
    },
};

use super::{AnalysisError, Params, Root, Trace, fen, move_distance_at, san};
use crate::search::{
    alpha::{Unroll, alpha_of_edge, alpha_of_node, loses_tempo},
    evaluator::Job,
    host::{Planned, Purpose},
    overlay::Overlay,
};
use crate::values::graph::{GraphNode, Records, StoreGraph};

/// The planner of an analysis: the walks from its root (docs/design.md §3.3).
pub(super) struct Walker<'a> {
    store: &'a Store,
    params: Params,
    /// The run's root; `None` before the run begins.
    root: Option<Root>,
}

impl<'a> Walker<'a> {
    pub(super) fn new(store: &'a Store, params: Params) -> Self {
        Walker { store, params, root: None }
    }

    pub(super) fn params(&self) -> &Params {
        &self.params
    }

    /// Walks from `line`'s root from now on.
    pub(super) fn begin(&mut self, line: &Line) {
        self.root = Some(Root::of(line));
    }

    /// The run's root, once it began.
    pub(super) fn root(&self) -> Option<&Root> {
        self.root.as_ref()
    }

    /// One pass's walk of the store at software depth `depth`.
    pub(super) fn pass(
        &self,
        trace: &mut Trace,
        failed: &KeySet,
        depth: u8,
        pass: u32,
    ) -> Result<WalkResult, AnalysisError> {
        let Some(root) = &self.root else { return Ok(WalkResult::default()) };
        let view = self.store.read()?;
        let graph = StoreGraph::new(&view);
        trace!(trace, "pass {pass} at software depth {depth}");
        let result = walk_tree(&graph, &self.params, trace, failed, root, depth)?;
        match graph.take_error() {
            Some(e) => Err(e.into()),
            None => Ok(result),
        }
    }

    /// What a pass at `depth` would ask for with `changes` (answers not stored yet) laid over the store.
    pub(super) fn pass_with(
        &self,
        changes: &[Change],
        failed: &KeySet,
        depth: u8,
    ) -> Result<Vec<Planned>, AnalysisError> {
        let Some(root) = &self.root else { return Ok(Vec::new()) };
        let view = self.store.read()?;
        let mut next = Overlay::default();
        next.apply(&view, changes)?;
        let graph = StoreGraph::new(&view);
        let result = walk_tree(&next.over(&graph), &self.params, &mut Trace::off(), failed, root, depth)?;
        if let Some(e) = graph.take_error() {
            return Err(e.into());
        }
        Ok(result.planned)
    }

    /// The walks of the store in `view` with `overlay` laid over it, at each software depth from `depth` up to
    /// `look_ahead` depths past it (no deeper than the deepest to settle), shallowest first.
    pub(super) fn ahead(
        &self,
        view: &ReadView<'_>,
        overlay: &Overlay,
        failed: &KeySet,
        depth: u8,
        look_ahead: u8,
    ) -> Result<Vec<WalkResult>, AnalysisError> {
        let Some(root) = &self.root else { return Ok(Vec::new()) };
        let last = depth.saturating_add(look_ahead).min(self.params.max_depth);
        let graph = StoreGraph::new(view);
        let tree = overlay.over(&graph);
        let mut quiet = Trace::off();
        let walks = (depth..=last)
            .map(|ahead| walk_tree(&tree, &self.params, &mut quiet, failed, root, ahead))
            .collect::<Result<Vec<_>, _>>()?;
        match graph.take_error() {
            Some(e) => Err(e.into()),
            None => Ok(walks),
        }
    }

    /// The searches that store `line`'s moves as edges (one search of each line move the store lacks at the engine
    /// depth), and the changes that mark as line moves those it already has.
    pub(super) fn line(&self, trace: &mut Trace, line: &Line) -> Result<(Vec<Planned>, Vec<Change>), AnalysisError> {
        let mut planned = Vec::new();
        let mut marks = Vec::new();
        let view = self.store.read()?;
        for (pos, uci) in line.positions.iter().zip(&line.moves) {
            let key = PositionKey::of(pos);
            let stored = view.node(key)?.and_then(|n| n.edge(uci).cloned());
            // A move already searched at the engine depth (by an earlier pass or run) is not asked again: a second
            // answer at the same depth would only replace the first. It is marked as a line move.
            match stored.filter(|e| e.depth >= self.params.engine_depth) {
                Some(edge) if edge.imported => {}
                Some(mut edge) => {
                    trace!(trace, "line move {} in {key} {}: already searched, kept", san(pos, uci), fen(pos));
                    edge.imported = true;
                    let mut node = Node::new(PackedPosition::of(pos));
                    node.edges.push(edge);
                    marks.push(Change::merge(pos, node)?);
                }
                None => {
                    trace!(trace, "line move {} in {key} {}: stored as an edge", san(pos, uci), fen(pos));
                    planned.push(Planned {
                        key,
                        purpose: Purpose::LineMove,
                        job: Job::new(pos.clone(), vec![*uci], self.params.engine_depth),
                    });
                }
            }
        }
        Ok((planned, marks))
    }
}

/// Most nodes the alpha estimates at one node of the walk may unroll in cyclic regions before they fall back to
/// cached idea values. The estimates order the moves and set the window; the walk itself then goes down the moves
/// it admits. A full unroll at every node of the walk made a pass in an endgame of shuffling kings and rooks cost
/// minutes of host time.
const WALK_UNROLL_BUDGET: usize = 4_096;

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
    /// Where the root stands in the path (the game's history comes before it).
    root_at: usize,
    /// Stop at the first search planned (or skipped): the caller asks only whether the pass would plan any.
    until_first_plan: bool,
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
        if self.until_first_plan && (!self.planned.is_empty() || self.skipped > 0) {
            return Ok(None);
        }
        self.max_ply = self.max_ply.max(ply);
        let node = self.tree.record(key)?;
        // An evaluation whose best move the analyst excluded is the excluded line's: the position is searched again
        // without it (the search's answer takes its place in the record).
        let needs_eval = node.as_ref().is_none_or(|n| {
            n.eval.as_ref().is_none_or(|e| {
                e.depth < self.params.engine_depth || e.best.is_some_and(|b| n.edge(&b).is_some_and(Edge::is_excluded))
            })
        });
        if needs_eval {
            return Ok(self.evaluate(pos, key, ply, node.as_ref()));
        }
        let Some(node) = node else { return Ok(None) };
        let Some(gnode) = self.tree.node(key) else { return Ok(None) };
        let mut budget = Unroll::new(WALK_UNROLL_BUDGET);
        // Every move with an edge excluded by the analyst: the other moves are still to be searched, whatever the
        // position's own evaluation (its best move may be the excluded one).
        let only_excluded = gnode.edges.is_empty() && node.edges.iter().any(Edge::is_excluded);
        if ply >= self.depth || (gnode.edges.is_empty() && !only_excluded) {
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
        if self.params.no_progress {
            self.refuse_lost_tempi(pos, key, ply, &gnode, path, &mut moves);
        }
        for excluded in node.edges.iter().filter(|e| e.is_excluded()) {
            trace!(self.trace, "excluded ply={ply} {key} {}: the analyst's mark; not walked", san(pos, &excluded.uci));
        }
        let best_estimate = moves.first().map_or(MINUS_INFINITY, |m| m.1);
        // The window of the side to move here: each side may have its own move distance.
        let distance = move_distance_at(self.params.move_distance_of(pos.turn()), ply);
        let threshold = best_estimate.minus_cp(distance);
        let window = Window { best_estimate, distance, threshold };
        self.search_alternatives(pos, key, ply, &node, window);
        self.walk_moves(&At { pos, key, ply, node: &node, gnode: &gnode }, moves, window, (alpha, beta), path)
    }

    /// Walks the moves of a node, best estimate first, within the move distance `window` and the alpha-beta window
    /// `(alpha, beta)`; returns the node's value. After a beta cut (from ply 2) only imported moves are still walked.
    fn walk_moves(
        &mut self,
        at: &At<'_>,
        moves: Vec<(usize, Score)>,
        Window { best_estimate, distance, threshold }: Window,
        (mut alpha, beta): (Score, Score),
        path: &mut Vec<PositionKey>,
    ) -> Result<Option<Score>, StoreError> {
        let &At { pos, key, ply, node, gnode } = at;
        let mut best: Option<Score> = None;
        let mut cut = false;
        for (index, estimate) in moves {
            let edge = &gnode.edges[index];
            let Some(uci) = edge.uci else { continue };
            // Imported and included moves are kept whatever their window.
            let stored = node.edge(&uci);
            let kept = stored.is_some_and(Edge::is_kept);
            if cut && !kept {
                continue; // after a cut-off only kept moves (imported, included) are still walked
            }
            if estimate < threshold && !kept {
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
                match stored {
                    Some(edge) if kept && estimate < threshold && edge.steering.is_some() => " (included)",
                    Some(_) if kept && estimate < threshold => " (imported)",
                    _ => "",
                }
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

    /// Deep Blue's "no progress": drops the moves into a position that the side to move could have reached earlier
    /// on the path (a fail-low for it: it lost a tempo), unless that would drop them all.
    fn refuse_lost_tempi(
        &mut self,
        pos: &Chess,
        key: PositionKey,
        ply: u8,
        gnode: &GraphNode,
        path: &[PositionKey],
        moves: &mut Vec<(usize, Score)>,
    ) {
        let earlier: Vec<Option<usize>> = moves
            .iter()
            .map(|&(index, _)| loses_tempo(self.tree, path, self.root_at, gnode.edges[index].child))
            .collect();
        if earlier.iter().all(Option::is_some) {
            return;
        }
        for (&(index, estimate), earlier) in moves.iter().zip(&earlier) {
            let (Some(at), Some(uci)) = (earlier, gnode.edges[index].uci) else { continue };
            trace!(
                self.trace,
                "no-progress ply={ply} {} {}: {estimate} refused, its position is a move of {} at ply {}",
                key,
                san(pos, &uci),
                path[*at],
                at - self.root_at
            );
        }
        let mut kept = earlier.iter().map(Option::is_none);
        moves.retain(|_| kept.next().unwrap_or(true));
    }

    /// A position with no evaluation at the engine depth: a checkmate or stalemate is valued at once (no engine
    /// needed); any other is planned for an evaluation (of the moves the analyst did not exclude in `node`) and has
    /// no value in this pass.
    fn evaluate(&mut self, pos: &Chess, key: PositionKey, ply: u8, node: Option<&Node>) -> Option<Score> {
        self.leaf(ply);
        if pos.legal_moves().is_empty() {
            let terminal = terminal_record(pos, self.params.engine_depth, 0);
            let score = terminal.eval.as_ref().map_or(Score::DRAW, |e| e.score);
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
        self.plan(key, Purpose::Evaluate, Job::new(pos.clone(), searchable_moves(pos, node), self.params.engine_depth));
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
    /// node's rest bound, or the best estimate when it has none) at least the threshold. With screening, a screen
    /// of the same moves must also reach it (see [`Screening`](super::Screening)).
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
            let count = unsearched.len();
            let Some(screen) = self.screen(key, ply, node, count, window) else { return };
            trace!(
                self.trace,
                "alternatives ply={ply} {key} {}: unsearched moves bounded by {rest} >= best {best_estimate} - {distance} = {threshold}; searching {} moves{}",
                fen(pos),
                count,
                match screen {
                    Some(cut) => format!(", screened from depth {} below {}", cut.from_depth, cut.below),
                    None => String::new(),
                }
            );
            let mut job = Job::new(pos.clone(), unsearched, self.params.engine_depth);
            job.screen = screen;
            self.plan(key, Purpose::Alternatives { unsearched: count }, job);
        } else {
            trace!(
                self.trace,
                "closed ply={ply} {key}: {} unsearched moves bounded by {rest} < best {best_estimate} - {distance} = {threshold}",
                unsearched.len()
            );
        }
    }

    /// Screening of a search for `count` alternatives that their rest bound lets into the window: `None` when the
    /// node's screen bound closes it; else the screen the search at the engine depth gets (none when screening is off,
    /// or when a screen of these very moves already reaches the threshold).
    fn screen(
        &mut self,
        key: PositionKey,
        ply: u8,
        node: &Node,
        count: usize,
        window: Window,
    ) -> Option<Option<ScreenCut>> {
        let Window { best_estimate, distance, threshold } = window;
        let Some(screening) = self.params.screen else { return Some(None) };
        let Some(screen_depth) = screening.depth(self.params.engine_depth) else { return Some(None) };
        // A screen of other moves (some have gained an edge since) says nothing of these: screen them again.
        let bound = node.screen.filter(|b| usize::from(b.moves) == count && b.depth >= screen_depth);
        let Some(bound) = bound else {
            return Some(Some(ScreenCut {
                from_depth: u32::from(screen_depth),
                below: threshold.minus_cp(screening.margin),
            }));
        };
        let reach = if bound.depth < self.params.engine_depth { screening.reach(bound.score) } else { bound.score };
        if reach < threshold {
            trace!(
                self.trace,
                "screened ply={ply} {key}: {count} unsearched moves screened at depth {}: {} + margin {} < best {best_estimate} - {distance} = {threshold}",
                bound.depth,
                bound.score,
                screening.margin
            );
            return None;
        }
        trace!(
            self.trace,
            "screen admits ply={ply} {key}: {count} unsearched moves screened at depth {}: {} + margin {} >= best {best_estimate} - {distance} = {threshold}",
            bound.depth,
            bound.score,
            screening.margin
        );
        Some(None)
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

/// The node a walk is at: its position, key and ply, its record and its edges in the graph.
struct At<'n> {
    pos: &'n Chess,
    key: PositionKey,
    ply: u8,
    node: &'n Node,
    gnode: &'n GraphNode,
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
pub(super) struct WalkResult {
    pub(super) planned: Vec<Planned>,
    pub(super) terminal: Vec<Change>,
    pub(super) min_leaf: u8,
    pub(super) max_ply: u8,
    pub(super) skipped: usize,
}

/// Walks `tree` from the root at software depth `depth`: what it plans, the terminal positions it met, the plies it
/// reached.
pub(super) fn walk_tree<G: Records>(
    tree: &G,
    params: &Params,
    trace: &mut Trace,
    failed: &KeySet,
    root: &Root,
    depth: u8,
) -> Result<WalkResult, StoreError> {
    walk_from(tree, params, trace, failed, root, depth, false)
}

/// Whether a pass at software depth `depth` from the root would plan no search (nor skip one); the walk stops at the
/// first search it would plan.
pub(super) fn plans_nothing<G: Records>(tree: &G, params: &Params, root: &Root, depth: u8) -> Result<bool, StoreError> {
    let result = walk_from(tree, params, &mut Trace::off(), &KeySet::default(), root, depth, true)?;
    Ok(result.planned.is_empty() && result.skipped == 0)
}

fn walk_from<G: Records>(
    tree: &G,
    params: &Params,
    trace: &mut Trace,
    failed: &KeySet,
    root: &Root,
    depth: u8,
    until_first_plan: bool,
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
        root_at: root.history.len(),
        until_first_plan,
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
