//! Alpha values: the negamax from a root, where a move into a position of the game or of the line is a draw.
//!
//! ```
//! use deeptree::score::Score;
//! use deeptree::search::alpha::alpha_of_edges;
//! use deeptree::store::key::PositionKey;
//! use deeptree::values::graph::{GraphEdge, GraphNode, MemGraph};
//! use deeptree::values::idea::propagate;
//!
//! // A (to move) can go to B, and B back to A: a repetition.
//! let (a, b) = (PositionKey(1), PositionKey(2));
//! let mut g = MemGraph::default();
//! g.insert(GraphNode::leaf(a, vec![GraphEdge::new(b, Score::cp(-30), true)]));
//! g.insert(GraphNode::leaf(b, vec![GraphEdge::new(a, Score::cp(40), true)]));
//! propagate(&mut g, [a, b]);
//! // From root A, B's move back to A repeats the root, a draw, so A's move scores 0 (its idea value is -40).
//! assert_eq!(alpha_of_edges(&g, a, &[]), vec![Score::cp(0)]);
//! ```
//!
//! **Alpha** value of a move from a root (docs/design.md §3.7): the idea negamax ([`crate::values::idea`]), but a move
//! into a position that occurred in the root's game history or earlier on the path scores 0 (a draw). A position from
//! which no cycle is reachable cannot reach the path either, so its alpha value is its cached idea value: only cyclic
//! regions are walked.
//!
//! Sign flips: every value is from the side to move at its node; an edge's value is its child's value backed up
//! ([`Score::back_up`]: negated, mate one ply further).

use crate::{
    score::Score,
    store::key::PositionKey,
    values::{
        graph::{Graph, GraphNode},
        idea::UNROLL_BUDGET,
    },
};

/// Most plies one walk of cyclic regions goes below the node where it began before it takes a position's cached idea
/// value, as when its node budget is spent: a repetition further down than this is left to the idea value. It keeps
/// the walk's recursion (two frames a ply) far inside a thread's stack whatever the size of a region; a long simple
/// path through thousands of shuffling positions used to go as deep as the node budget let it (200,000 nodes).
pub const UNROLL_DEPTH: usize = 512;

/// What one walk of cyclic regions may spend: nodes visited in all, and plies below where it began
/// ([`UNROLL_DEPTH`]). [`Unroll::default`] gives [`UNROLL_BUDGET`] nodes.
#[derive(Debug, Clone)]
pub struct Unroll {
    nodes: usize,
    below: usize,
}

impl Unroll {
    /// A walk that may visit `nodes` nodes.
    pub fn new(nodes: usize) -> Unroll {
        Unroll { nodes, below: 0 }
    }

    /// Whether the walk may go down into one more node.
    fn may_enter(&self) -> bool {
        self.nodes > 0 && self.below < UNROLL_DEPTH
    }

    /// `value` of a node one ply down: the ply counted while it is computed.
    fn down<T>(&mut self, value: impl FnOnce(&mut Unroll) -> T) -> T {
        self.below += 1;
        let value = value(self);
        self.below -= 1;
        value
    }
}

impl Default for Unroll {
    fn default() -> Unroll {
        Unroll::new(UNROLL_BUDGET)
    }
}

/// Brute-force alpha values of the root's moves (in the root's edge order), `history` being the positions of the
/// game before the root.
pub fn alpha_brute<G: Graph>(g: &G, root: PositionKey, history: &[PositionKey]) -> Vec<Score> {
    let Some(node) = g.node(root) else {
        return Vec::new();
    };
    let mut path: Vec<PositionKey> = history.to_vec();
    path.push(root);
    node.edges
        .iter()
        .map(|edge| {
            if path.contains(&edge.child) {
                return Score::DRAW;
            }
            match g.node(edge.child).filter(|c| c.evaluated) {
                Some(child) => {
                    path.push(edge.child);
                    let v = unroll_alpha_brute(g, &child, &mut path).back_up();
                    path.pop();
                    v
                }
                None => edge.score,
            }
        })
        .collect()
}

fn unroll_alpha_brute<G: Graph>(g: &G, node: &GraphNode, path: &mut Vec<PositionKey>) -> Score {
    if node.edges.is_empty() {
        return node.eval_score.unwrap_or(Score::DRAW);
    }
    let mut best: Option<Score> = None;
    for edge in &node.edges {
        let value = if path.contains(&edge.child) {
            Score::DRAW
        } else {
            match g.node(edge.child).filter(|c| c.evaluated) {
                Some(child) => {
                    path.push(edge.child);
                    // Sign flip: the child's value is from the opponent's side.
                    let v = unroll_alpha_brute(g, &child, path).back_up();
                    path.pop();
                    v
                }
                None => edge.score,
            }
        };
        best = Some(best.map_or(value, |b| b.max(value)));
    }
    best.unwrap_or(Score::DRAW)
}

/// Alpha value of a node reached on `path` (which holds the root's history, the root and the nodes down to here).
pub fn alpha_of_node<G: Graph>(g: &G, node: &GraphNode, path: &mut Vec<PositionKey>, budget: &mut Unroll) -> Score {
    if !node.cyclic
        && let Some(idea) = node.idea
    {
        return idea;
    }
    if node.edges.is_empty() {
        return node.eval_score.unwrap_or(Score::DRAW);
    }
    budget.nodes = budget.nodes.saturating_sub(1);
    let mut best: Option<Score> = None;
    for edge in &node.edges {
        let value = alpha_of_edge(g, edge.child, edge.score, path, budget);
        best = Some(best.map_or(value, |b| b.max(value)));
    }
    best.unwrap_or(Score::DRAW)
}

/// Alpha value of one move into `child` (engine score `score`) from the last node of `path`.
pub fn alpha_of_edge<G: Graph>(
    g: &G,
    child: PositionKey,
    score: Score,
    path: &mut Vec<PositionKey>,
    budget: &mut Unroll,
) -> Score {
    if path.contains(&child) {
        return Score::DRAW; // a repetition of the game or of the line: a draw
    }
    match g.node(child).filter(|c| c.evaluated) {
        Some(node) if budget.may_enter() => {
            path.push(child);
            // Sign flip: the child's value is from the opponent's side.
            let v = budget.down(|budget| alpha_of_node(g, &node, path, budget)).back_up();
            path.pop();
            v
        }
        Some(node) => node.idea.map_or(score, Score::back_up),
        None => score,
    }
}

/// Alpha values of the root's moves, in the root's edge order.
pub fn alpha_of_edges<G: Graph>(g: &G, root: PositionKey, history: &[PositionKey]) -> Vec<Score> {
    let Some(node) = g.node(root) else {
        return Vec::new();
    };
    let mut path: Vec<PositionKey> = history.to_vec();
    path.push(root);
    let mut budget = Unroll::default();
    node.edges.iter().map(|e| alpha_of_edge(g, e.child, e.score, &mut path, &mut budget)).collect()
}

/// Deep Blue's "no progress" rule: would the move from the last node of `path` into `child` reach a position the
/// same side could have reached earlier? True when `child` is a child, through another move, of a node higher on
/// the path with the same side to move (`path[j]` with `j` of the same parity as the last index, `j >= root_at`;
/// the positions before `root_at` are the game's history, which the rule leaves alone). Such a move is refused as a
/// fail-low for the side to move: it could have played into `child` earlier, a tempo sooner.
pub fn loses_tempo<G: Graph>(g: &G, path: &[PositionKey], root_at: usize, child: PositionKey) -> Option<usize> {
    let mut j = path.len().checked_sub(1)?;
    while j >= root_at + 2 {
        j -= 2;
        if path[j + 1] != child && g.node(path[j]).is_some_and(|n| n.edges.iter().any(|e| e.child == child)) {
            return Some(j);
        }
    }
    None
}

/// Alpha values of the root's moves with the "no progress" rule ([`loses_tempo`]) applied in the first `plies`
/// plies below the root, as the walk of a pass at software depth `plies` applies it; deeper, plain alpha values.
///
/// A refused move takes no part in its node's maximum. A node whose every move is refused keeps the maximum over
/// all of them: the rule prunes a move only while another is left.
pub fn alpha_of_edges_no_progress<G: Graph>(
    g: &G,
    root: PositionKey,
    history: &[PositionKey],
    plies: u8,
) -> Vec<Score> {
    let Some(node) = g.node(root) else {
        return Vec::new();
    };
    let mut path: Vec<PositionKey> = history.to_vec();
    path.push(root);
    let root_at = history.len();
    let mut budget = Unroll::default();
    node.edges
        .iter()
        .map(|e| alpha_of_edge_no_progress(g, e.child, e.score, &mut path, root_at, plies, &mut budget))
        .collect()
}

fn alpha_of_edge_no_progress<G: Graph>(
    g: &G,
    child: PositionKey,
    score: Score,
    path: &mut Vec<PositionKey>,
    root_at: usize,
    plies: u8,
    budget: &mut Unroll,
) -> Score {
    let ply = path.len() - root_at; // the child's ply
    if ply >= usize::from(plies) || path.contains(&child) {
        return alpha_of_edge(g, child, score, path, budget);
    }
    match g.node(child).filter(|c| c.evaluated) {
        Some(node) if budget.may_enter() && !node.edges.is_empty() => {
            budget.nodes = budget.nodes.saturating_sub(1);
            path.push(child);
            let mut kept: Option<Score> = None;
            let mut refused: Option<Score> = None;
            for edge in &node.edges {
                let value = budget
                    .down(|budget| alpha_of_edge_no_progress(g, edge.child, edge.score, path, root_at, plies, budget));
                let slot = if loses_tempo(g, path, root_at, edge.child).is_some() { &mut refused } else { &mut kept };
                *slot = Some(slot.map_or(value, |v: Score| v.max(value)));
            }
            path.pop();
            // Sign flip: the child's value is from the opponent's side.
            kept.or(refused).map_or(score, Score::back_up)
        }
        _ => alpha_of_edge(g, child, score, path, budget),
    }
}

/// Brute-force reference of [`alpha_of_edges_no_progress`]: unrolls every simple path to `plies` plies with the rule
/// checked by scanning the path, then brute-force alpha values below (exponential; the test reference).
pub fn alpha_brute_no_progress<G: Graph>(g: &G, root: PositionKey, history: &[PositionKey], plies: u8) -> Vec<Score> {
    let Some(node) = g.node(root) else {
        return Vec::new();
    };
    let mut path: Vec<PositionKey> = history.to_vec();
    path.push(root);
    let root_at = history.len();
    node.edges.iter().map(|e| brute_edge_no_progress(g, e.child, e.score, &mut path, root_at, plies)).collect()
}

fn brute_edge_no_progress<G: Graph>(
    g: &G,
    child: PositionKey,
    score: Score,
    path: &mut Vec<PositionKey>,
    root_at: usize,
    plies: u8,
) -> Score {
    if path.contains(&child) {
        return Score::DRAW;
    }
    let Some(node) = g.node(child).filter(|c| c.evaluated) else { return score };
    path.push(child);
    let value = if path.len() - 1 - root_at >= usize::from(plies) || node.edges.is_empty() {
        unroll_alpha_brute(g, &node, path)
    } else {
        // Every move of the child, each marked by scanning the whole path for an earlier way into its position.
        let mut kept: Option<Score> = None;
        let mut refused: Option<Score> = None;
        let last = path.len() - 1;
        for edge in &node.edges {
            let value = brute_edge_no_progress(g, edge.child, edge.score, path, root_at, plies);
            let earlier = (root_at..last).filter(|j| (last - j).is_multiple_of(2)).any(|j| {
                path[j + 1] != edge.child
                    && g.node(path[j]).is_some_and(|n| n.edges.iter().any(|e| e.child == edge.child))
            });
            let slot = if earlier { &mut refused } else { &mut kept };
            *slot = Some(slot.map_or(value, |v: Score| v.max(value)));
        }
        kept.or(refused).unwrap_or(Score::DRAW)
    };
    path.pop();
    // Sign flip: the child's value is from the opponent's side.
    value.back_up()
}
