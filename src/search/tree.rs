//! What the tree says about a position: its moves ranked as `show` ranks them ([`super::show::ranking`]), each with its
//! principal variation, the settled depth and the engine depth of the position's own evaluation.

use crate::game::play_uci;
use shakmaty::{Chess, uci::UciMove};

use std::cmp::Reverse;

use crate::{
    score::Score,
    search::{
        alpha::{Unroll, alpha_of_edge, alpha_of_edges},
        show::ranking,
    },
    store::{ReadView, StoreError, key::PositionKey},
    values::{
        graph::{Graph, StoreGraph},
        idea::idea_of_edge,
    },
};

/// One candidate move of a root as the tree values it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub uci: UciMove,
    pub alpha: Score,
    /// The alpha score with the root as the only position before the move: the game's history ignored. It differs
    /// from `alpha` where the line reaches a position of the game (or, rarely, where either walk ran out of its
    /// budget and fell back to cached idea values).
    pub alpha_from_root: Score,
    pub idea: Score,
    /// The move and the tree's best continuation after it.
    pub pv: Vec<UciMove>,
}

/// The tree's view of a root.
#[derive(Debug, Clone)]
pub struct TreeView {
    /// Moves best first: valued before unvalued, then by alpha score, then by idea score ([`ranking`]).
    pub candidates: Vec<Candidate>,
    /// Software depth settled from this root, if any.
    pub settled_depth: Option<u8>,
    /// Engine depth of the root's own evaluation.
    pub engine_depth: u8,
    /// Inner-engine nodes behind the root's evaluation.
    pub nodes: u64,
    /// The best move's child has been evaluated: the tree looks at least one ply below the root.
    pub deepened: bool,
}

impl TreeView {
    /// The tree's move among the valued candidates `allowed` lets through (its best by alpha), and whether the game's
    /// history changes the tree's verdict on it: its alpha differs from its alpha with the root alone, or another
    /// allowed move is better with the root alone. Where it does, a game searches rather than play the tree's move
    /// (docs/design.md §7.1), and growth that follows play stops there.
    pub fn best_with_history(&self, allowed: impl Fn(&Candidate) -> bool) -> Option<(&Candidate, bool)> {
        let mut moves = self.candidates.iter().filter(|c| c.alpha.is_valued() && allowed(c));
        let best = moves.next()?;
        let best_from_root = moves.map(|c| c.alpha_from_root).fold(best.alpha_from_root, Score::max);
        Some((best, best.alpha != best.alpha_from_root || best.alpha != best_from_root))
    }
}

/// Reads the tree at `root` (reached after `history`); `None` when the root has no evaluation.
pub fn view(view: &ReadView<'_>, root: &Chess, history: &[PositionKey]) -> Result<Option<TreeView>, StoreError> {
    let root_key = PositionKey::of(root);
    let Some(node) = view.node(root_key)? else { return Ok(None) };
    let Some(eval) = &node.eval else { return Ok(None) };
    let graph = StoreGraph::new(view);
    let Some(gnode) = graph.node(root_key) else { return Ok(None) };
    let alphas = alpha_of_edges(&graph, root_key, history);
    // With the root alone on the path. Only a root from which a cycle is reachable can reach a position of its
    // history (the game's moves to it are stored edges), so elsewhere the two are the same and one walk does.
    let alphas_from_root =
        if history.is_empty() || !gnode.cyclic { alphas.clone() } else { alpha_of_edges(&graph, root_key, &[]) };
    let mut path: Vec<PositionKey> = history.to_vec();
    path.push(root_key);
    let mut candidates: Vec<Candidate> = gnode
        .edges
        .iter()
        .zip(alphas.into_iter().zip(alphas_from_root))
        .filter_map(|(edge, (alpha, alpha_from_root))| {
            let uci = edge.uci?;
            let idea = idea_of_edge(&graph, edge.child, edge.score, &[root_key]);
            let mut pv = vec![uci];
            let child = play_uci(root, &uci)?;
            path.push(edge.child);
            principal_variation(&graph, &child, &mut path, &mut pv);
            path.truncate(history.len() + 1);
            Some(Candidate { uci, alpha, alpha_from_root, idea, pv })
        })
        .collect();
    candidates.sort_by_key(|c| Reverse(ranking(c.idea, c.alpha)));
    let deepened = candidates
        .first()
        .and_then(|c| play_uci(root, &c.uci))
        .and_then(|child| graph.node(PositionKey::of(&child)))
        .is_some_and(|child| child.evaluated);
    if let Some(e) = graph.take_error() {
        return Err(e);
    }
    Ok(Some(TreeView {
        candidates,
        settled_depth: node.settled_depth,
        engine_depth: eval.depth,
        nodes: eval.nodes,
        deepened,
    }))
}

/// Follows the best alpha move down from `pos` while the tree has evaluated positions.
fn principal_variation<G: Graph>(g: &G, pos: &Chess, path: &mut Vec<PositionKey>, pv: &mut Vec<UciMove>) {
    let mut pos = pos.clone();
    let mut budget = Unroll::default();
    while pv.len() < 40 {
        let key = PositionKey::of(&pos);
        let Some(node) = g.node(key).filter(|n| n.evaluated) else { return };
        let best = node
            .edges
            .iter()
            .filter_map(|e| Some((alpha_of_edge(g, e.child, e.score, path, &mut budget), e.uci?, e.child)))
            .max_by_key(|(alpha, _, _)| *alpha);
        let Some((_, uci, child_key)) = best else { return };
        let Some(child) = play_uci(&pos, &uci) else { return };
        pv.push(uci);
        if path.contains(&child_key) {
            return;
        }
        path.push(child_key);
        pos = child;
    }
}
