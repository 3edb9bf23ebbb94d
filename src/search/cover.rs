//! Growth for play (`analyze --roots BOOK --cover`): the positions a game from the book's roots is most likely to
//! reach where the tree would not answer at once (docs/design.md §6.2).
//!
//! ```
//! use std::{collections::HashSet, sync::{Arc, atomic::AtomicBool}};
//! use deeptree::game::Line;
//! use deeptree::search::{analysis::Params, cover::{Cover, uncovered}, evaluator::ScriptedEvaluator,
//!     roots::{BookRoot, grow}};
//! use deeptree::store::{Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let roots = vec![BookRoot::new(Line::parse(None, "e2e4 c7c5")?, "Sicilian")];
//! let cover = Cover::new(8, 8, 20);
//! // An empty tree: the root itself is where a game leaves it, whichever side the book plays.
//! let leaves = uncovered(&store.read()?, &roots, &cover, &HashSet::new())?;
//! assert_eq!(leaves.len(), 1);
//! assert!((leaves[0].reach - 1.0).abs() < 1e-9);
//! // Its moves evaluated at the engine depth, a game goes on into the replies.
//! let params = Params::new(8, 20).with_max_depth(1);
//! let stop = Arc::new(AtomicBool::new(false));
//! grow(&store, vec![ScriptedEvaluator::new(1, 7)], &roots, &params, None, &stop, None, |_| {})?;
//! let leaves = uncovered(&store.read()?, &roots, &cover, &HashSet::new())?;
//! assert!(leaves.iter().all(|leaf| leaf.ply >= 1));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # The priority: the reach of a position
//!
//! A game from a root is walked twice, once for each side the book may play. Where the book's side is to move, the
//! game goes on with the tree's move (its best valued move, else the best move of the position's own evaluation),
//! if the tree knows the position at least `play_depth` deep: the depth a direct search reaches in the time control
//! played (12 to 14 at 2+0.02 with the inner engine on one thread); else the game leaves the tree there. Where the
//! opponent is to move, the game goes into each valued reply with a probability that falls with how much worse the
//! reply scores than the best one: `exp(-loss / temperature)`, normalised over the replies (a strong opponent plays
//! one of the best few moves, not always the tree's). A position of the opponent whose replies were never searched at
//! the engine depth is where the game leaves. The *reach* of a position is the probability that a game from the
//! roots (each root weighted by [`BookRoot::weight`], both sides alike) arrives there; transpositions add up.
//!
//! Each round grows the positions of highest reach where a game leaves the tree: a position of the book's side to
//! the software depth that makes it known `play_depth` deep (0, a single search, where the engine depth is
//! enough), one of the opponent's to software depth 1
//! (its replies searched at the engine depth, each then known by its own evaluation). The walk is then run again, so
//! the next round goes on past what this one grew. A position grown in this run is not taken again (a game-ending
//! position or one whose searches failed is left). Each round says what it grows and the tree moves a game from the
//! roots is expected to get: the sum of the reach of the book's positions the tree answers.
//!
//! Even growth (`analyze --roots`) deepens every root; cover growth widens the tree where games go, at the depth a
//! time control needs. The two are measured against each other in docs/strength.md.

use std::collections::{HashMap, HashSet};

use shakmaty::{Chess, Color, Position, uci::UciMove};

use crate::{
    game::Line,
    store::{ReadView, StoreError, key::PositionKey, node::Node},
};

use super::roots::BookRoot;

/// Replies scored more than this many temperatures below the best are taken as never played.
const MAX_LOSS_IN_TEMPERATURES: f64 = 5.0;

/// How the walk models play.
#[derive(Debug, Clone)]
pub struct Cover {
    /// The depth a direct search reaches in the time control played: a position known less deep is where a game
    /// leaves the tree.
    pub play_depth: u8,
    /// The engine depth of the tree's searches.
    pub engine_depth: u8,
    /// The move distance of the tree's searches at plies 0 and 1, in centipawns: moves the search bounded this far
    /// below the best are taken as never played.
    pub move_distance: u32,
    /// Centipawns a reply may score below the best for its probability to fall by a factor e.
    pub temperature: u32,
    /// Walks stop below this reach (a share of one game from one root).
    pub floor: f64,
    /// Plies from a root past which the walk stops.
    pub max_plies: usize,
}

impl Cover {
    /// The walk for a time control whose searches reach `play_depth`, in a tree searched at `engine_depth` and
    /// `move_distance`: temperature 20 cp, walks down to a reach of 1/1000 and 40 plies.
    pub fn new(play_depth: u8, engine_depth: u8, move_distance: u32) -> Cover {
        Cover { play_depth, engine_depth, move_distance, temperature: 20, floor: 1e-3, max_plies: 40 }
    }
}

/// A position where games leave the tree.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The way there from its root's line (the first way the walk found).
    pub line: Line,
    pub key: PositionKey,
    /// The share of games from the roots that arrive there (summed over roots, sides and ways).
    pub reach: f64,
    /// Plies below its root (the first way).
    pub ply: usize,
    /// The book's side is to move: the tree would play here; else the opponent's replies are not searched.
    pub ours: bool,
    /// Its root's place in the list (from 0), the first way.
    pub root: usize,
}

/// What a walk found: the leaves, highest reach first, and the tree moves a game is expected to get.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    pub leaves: Vec<Leaf>,
    /// Sum over the book's positions the tree answers of their reach, over the roots' total weight: tree moves a game
    /// (of one side) is expected to get.
    pub expected_answers: f64,
}

/// The positions games from `roots` leave the tree at, highest reach first, leaving out `grown` (positions this
/// run grew already). See the module docs.
pub fn uncovered(
    view: &ReadView<'_>,
    roots: &[BookRoot],
    cover: &Cover,
    grown: &HashSet<PositionKey>,
) -> Result<Vec<Leaf>, StoreError> {
    Ok(walk(view, roots, cover, grown)?.leaves)
}

/// The walk of the module docs: its leaves and the tree moves a game is expected to get.
pub fn walk(
    view: &ReadView<'_>,
    roots: &[BookRoot],
    cover: &Cover,
    grown: &HashSet<PositionKey>,
) -> Result<Walk, StoreError> {
    let mut leaves: HashMap<PositionKey, Leaf> = HashMap::new();
    let mut answered = 0.0;
    let total_weight: f64 = roots.iter().map(|r| f64::from(r.weight.max(1))).sum();
    for (index, root) in roots.iter().enumerate() {
        for side in [Color::White, Color::Black] {
            // Each side gets half of the root's games.
            let share = f64::from(root.weight.max(1)) / 2.0;
            let mut stack = vec![(root.line.clone(), share, 0usize)];
            while let Some((line, reach, ply)) = stack.pop() {
                let pos = line.root();
                if reach < cover.floor * share || ply > cover.max_plies || pos.is_game_over() {
                    continue;
                }
                let key = PositionKey::of(pos);
                // A repetition inside the walk: the game is drawn or goes on as before; no need to go round again.
                if line.positions[line.positions.len().saturating_sub(1 + ply)..line.positions.len() - 1]
                    .iter()
                    .any(|p| PositionKey::of(p) == key)
                {
                    continue;
                }
                let node = view.node(key)?;
                let ours = pos.turn() == side;
                let next: Option<Vec<(UciMove, f64)>> = match (&node, ours) {
                    (Some(node), true) => tree_move(node, cover.play_depth, cover.engine_depth).map(|m| vec![(m, 1.0)]),
                    (Some(node), false) => replies(pos, node, cover.temperature, cover.move_distance),
                    (None, _) => None,
                };
                let next = if grown.contains(&key) && next.is_none() { Some(Vec::new()) } else { next };
                match next {
                    Some(moves) => {
                        if ours && !moves.is_empty() {
                            answered += reach;
                        }
                        for (uci, probability) in moves {
                            if let Some(child) = line.then(&uci) {
                                stack.push((child, reach * probability, ply + 1));
                            }
                        }
                    }
                    None => {
                        leaves.entry(key).and_modify(|leaf| leaf.reach += reach).or_insert(Leaf {
                            line: line.clone(),
                            key,
                            reach,
                            ply,
                            ours,
                            root: index,
                        });
                    }
                }
            }
        }
    }
    let mut leaves: Vec<Leaf> = leaves.into_values().collect();
    for leaf in &mut leaves {
        leaf.reach /= total_weight.max(1.0);
    }
    leaves.sort_by(|a, b| b.reach.total_cmp(&a.reach).then(a.ply.cmp(&b.ply)).then(a.key.cmp(&b.key)));
    Ok(Walk { leaves, expected_answers: answered / total_weight.max(1.0) })
}

/// The software depth to grow a leaf to: the book's side's position until it is known `play_depth` deep (depth 0,
/// one search of the position, where the engine depth is enough), the opponent's to depth 1 (its replies searched
/// at the engine depth).
pub fn depth_for(leaf: &Leaf, play_depth: u8, engine_depth: u8) -> u8 {
    if leaf.ours { play_depth.saturating_sub(engine_depth) } else { 1 }
}

/// The tree's move at a position of the book's side when the tree knows the position `play_depth` deep: its best
/// valued move where the position was settled as a root that deep (engine depth and software depth), or its moves
/// were searched at least `play_depth - 1` deep (with the position's ply, `play_depth`); else its own evaluation's
/// best move at `play_depth` or deeper.
fn tree_move(node: &Node, play_depth: u8, engine_depth: u8) -> Option<UciMove> {
    // Settled as a root: its combined depth is the engine depth and the software depth settled below it.
    let settled_deep_enough =
        node.settled_depth.is_some_and(|d| d >= 1 && engine_depth.saturating_add(d) >= play_depth);
    let best_edge = node
        .edges
        .iter()
        .filter(|e| e.is_valued() && !e.is_excluded())
        .filter(|e| settled_deep_enough || e.depth.saturating_add(1) >= play_depth)
        .max_by_key(|e| e.score.value());
    if let Some(edge) = best_edge {
        return Some(edge.uci);
    }
    node.eval.as_ref().filter(|e| e.depth >= play_depth).and_then(|e| e.best)
}

/// The opponent's replies in `pos` and the probability of each, where its likely replies were all searched: every
/// legal move has a value, or the moves without one are bounded (by the rest, the first move found outside the move
/// distance, or by a screen) at least `move_distance` below the best: the search's own line between the moves worth
/// searching and the others. `None` where they were not: a move never searched may be as good as the best.
fn replies(pos: &Chess, node: &Node, temperature: u32, move_distance: u32) -> Option<Vec<(UciMove, f64)>> {
    let valued: Vec<_> = node.edges.iter().filter(|e| e.is_valued() && !e.is_excluded()).collect();
    // Scores are the opponent's, its side to move: higher is better for it.
    let best = valued.iter().map(|e| e.score.value()).max()?;
    let temperature = f64::from(temperature.max(1));
    let unvalued = pos.legal_moves().len().saturating_sub(valued.len());
    if unvalued > 0 {
        let bound = [node.rest.map(|r| r.score), node.screen.map(|s| s.score)].into_iter().flatten().max();
        let searched = bound.is_some_and(|b| i64::from(best) - i64::from(b.value()) >= i64::from(move_distance));
        if !searched {
            return None;
        }
    }
    let weights: Vec<(UciMove, f64)> = valued
        .iter()
        .filter_map(|e| {
            let loss = f64::from(best - e.score.value()) / temperature;
            (loss <= MAX_LOSS_IN_TEMPERATURES).then(|| (e.uci, (-loss).exp()))
        })
        .collect();
    let sum: f64 = weights.iter().map(|(_, w)| w).sum();
    Some(weights.into_iter().map(|(m, w)| (m, w / sum)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        score::{Bound, Score},
        store::node::{Edge, Eval, PackedPosition, RestBound},
    };

    fn edge(uci: &str, cp: i32, depth: u8) -> Edge {
        Edge::new(uci.parse().unwrap(), Score::cp(cp), Bound::Exact, depth)
    }

    #[test]
    fn replies_fall_with_their_loss() {
        let start = Chess::default();
        let mut node = Node::new(PackedPosition::of(&start));
        node.edges = vec![edge("e2e4", 30, 14), edge("d2d4", 10, 14), edge("a2a3", -300, 14)];
        // 17 moves never searched, bounded by nothing: any of them may be the best.
        assert!(replies(&start, &node, 20, 20).is_none());
        // Bounded, but only 15 cp below the best, inside the move distance: still likely.
        node.rest = Some(RestBound { score: Score::cp(15), depth: 14 });
        assert!(replies(&start, &node, 20, 20).is_none());
        node.rest = Some(RestBound { score: Score::cp(10), depth: 14 });
        let replies = replies(&start, &node, 20, 20).unwrap();
        assert_eq!(replies.len(), 2, "a move 330 cp worse is never played");
        let p = |m: &str| replies.iter().find(|(u, _)| u.to_string() == m).unwrap().1;
        assert!((p("e2e4") + p("d2d4") - 1.0).abs() < 1e-9);
        // 20 cp worse at temperature 20: e times less likely.
        assert!((p("e2e4") / p("d2d4") - std::f64::consts::E).abs() < 1e-9);
    }

    #[test]
    fn the_tree_moves_only_where_it_knows_the_play_depth() {
        let mut node = Node::new(PackedPosition::of(&Chess::default()));
        node.eval = Some(Eval {
            score: Score::cp(20),
            bound: Bound::Exact,
            depth: 12,
            best: Some("g1f3".parse().unwrap()),
            nodes: 0,
            engine: None,
        });
        assert_eq!(tree_move(&node, 14, 12), None);
        assert_eq!(tree_move(&node, 12, 12).map(|m| m.to_string()), Some("g1f3".to_owned()));
        node.edges = vec![edge("e2e4", 30, 13), edge("d2d4", 10, 13)];
        assert_eq!(tree_move(&node, 14, 13).map(|m| m.to_string()), Some("e2e4".to_owned()));
        assert_eq!(tree_move(&node, 15, 13), None);
        node.settled_depth = Some(2);
        assert_eq!(tree_move(&node, 15, 13).map(|m| m.to_string()), Some("e2e4".to_owned()));
        assert_eq!(tree_move(&node, 16, 13), None, "settled to 13 + 2 only");
    }
}
