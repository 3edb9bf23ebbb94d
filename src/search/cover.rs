//! Growth for play (`analyze --roots BOOK --cover`): the positions a game from the book's roots is most likely to
//! reach where the tree would not answer at once (docs/design.md §6.2).
//!
//! ```
//! use std::{collections::HashSet, sync::{Arc, atomic::AtomicBool}};
//! use deeptree::game::Line;
//! use deeptree::search::{analysis::Params, cover::{Cover, walk}, evaluator::ScriptedEvaluator,
//!     roots::{BookRoot, grow}};
//! use deeptree::store::{Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let roots = vec![BookRoot::new(Line::parse(None, "e2e4 c7c5")?, "Sicilian")];
//! let params = Params::new(8, 20).with_max_depth(1);
//! let cover = Cover::new(8, params.clone());
//! // An empty tree: every game leaves it at the root. White's half wants the tree's move there, Black's half wants
//! // White's replies searched: two leaves of one position, each of half the games.
//! let leaves = walk(&store.read()?, &roots, &cover, &HashSet::new())?.leaves;
//! assert_eq!(leaves.len(), 2);
//! assert!(leaves.iter().all(|leaf| leaf.ply == 0 && (leaf.reach - 0.5).abs() < 1e-9));
//! // Its moves evaluated at the engine depth, games go on into the replies.
//! let stop = Arc::new(AtomicBool::new(false));
//! grow(&store, vec![ScriptedEvaluator::new(1, 7)], &roots, &params, None, &stop, None, |_| {})?;
//! let leaves = walk(&store.read()?, &roots, &cover, &HashSet::new())?.leaves;
//! assert!(leaves.iter().all(|leaf| leaf.ply >= 1));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # The priority: the reach of a position
//!
//! A game from a root is walked twice, once for each side the book may play. Where the book's side is to move, the
//! game goes on with the tree's move (its best by alpha score, the move a game gets), if the tree knows the position
//! at least `play_depth` deep (the engine depth of its evaluation and the software depth settled below it, stored or
//! found in the stored graph with the move distance narrowed as a game's policy narrows it, §7.1 of
//! docs/design.md: [`known_depth`]), `play_depth` being the depth a direct search reaches in the time control
//! played (at 2+0.02 with the inner engine on one thread, 12.5 for a fresh session and about 15 to 16 once its
//! depth model has been fitted to its own searches); else the game leaves the tree there. Where the game's history
//! (the root's line) changes the tree's verdict, a game searches too, but growth would not change that: the walk
//! stops there without a leaf. Where the opponent is to move, the game goes into each valued reply with a
//! probability that falls with how much worse the reply scores than the best one: `exp(-loss / temperature)`,
//! normalised over the replies (a strong opponent plays one of the best few moves, not always the tree's). A
//! position of the opponent whose moves not valued are not bounded a move distance below the best is where the game
//! leaves. One position may be a leaf of both kinds, in
//! the two sides' walks: each kind is its own leaf. The *reach* of a position is the probability that a game from the
//! roots (each root weighted by [`BookRoot::weight`], both sides alike) arrives there; transpositions add up.
//!
//! Each round grows the positions of highest reach where a game leaves the tree: a position of the book's side to
//! the software depth that makes it known `play_depth` deep (0, a single search, where the engine depth is
//! enough), one of the opponent's to software depth 1 (its replies searched at the engine depth, each then known
//! by its own evaluation). The walk is then run again, so
//! the next round goes on past what this one grew: `analyze --cover` runs it as soon as an engine has nothing left
//! to grow, while the others finish the round before ([`super::roots::grow_fed`]). A position grown in this run is
//! not taken again (a game-ending position or one whose searches failed is left). Each round says what it grows and the tree moves a game from the
//! roots is expected to get: the sum of the reach of the book's positions the tree answers.
//!
//! # Depth where games go
//!
//! With [`Cover::deepen`] (a factor `F` above 1), a position the tree answers on the book's side is a leaf too: to be
//! known one ply past what it is known to now, settled at the engine depth of its own evaluation ([`Deeper`]), of
//! priority its reach divided by `F` for each ply past `play_depth` it would then be known to ([`Cover::priority`]).
//! The other leaves' priority is their reach; a round grows the leaves of highest priority. With `F = 2`, the first
//! ply past `play_depth` where games arrive twice as often ranks with a new leaf, each further ply at half that.
//!
//! Even growth (`analyze --roots`) deepens every root; cover growth widens the tree where games go, at the depth a
//! time control needs. The two are measured against each other in docs/strength.md: at 120 CPU-minutes the cover
//! tree grown with the policy's count scored +7.0 +/- 10.9 against the even one over 800 games at 2+0.02, and two
//! cover trees pooled +6.8 +/- 8.1 over 1,592 games (LOS 94.9 %), and a tree grown with `deepen` 2 +7.8 +/- 10.3
//! over 800 games (LOS 93.2 %): none a measured difference. A declared match of 1,592 games then measured the
//! `deepen` tree's gain: +7.4 +/- 7.2 (+0.2 to +14.6), LOS 97.8 %.

use std::collections::{HashMap, HashSet};

use shakmaty::{Chess, Color, Position, uci::UciMove};

use crate::{
    game::Line,
    store::{ReadView, StoreError, key::PositionKey, node::Node},
};

use super::{
    analysis::{Params, known_depth},
    roots::BookRoot,
    tree,
};

/// Replies scored more than this many temperatures below the best are taken as never played.
const MAX_LOSS_IN_TEMPERATURES: f64 = 5.0;

/// How the walk models play.
#[derive(Debug, Clone)]
pub struct Cover {
    /// The depth a direct search reaches in the time control played: a position known less deep is where a game
    /// leaves the tree.
    pub play_depth: u8,
    /// The tree's search: its engine depth, and its move distances, which say which moves it takes as worth
    /// searching (the opponent's moves it bounded a move distance below the best are taken as never played).
    pub params: Params,
    /// Centipawns a reply may score below the best for its probability to fall by a factor e.
    pub temperature: u32,
    /// Walks stop below this reach (a share of one game from one root).
    pub floor: f64,
    /// Plies from a root past which the walk stops.
    pub max_plies: usize,
    /// Depth where games go: a position the tree answers is also a leaf, to be known one ply deeper, of priority
    /// its reach divided by this factor for each ply past `play_depth` it would then be known to (`None`: breadth
    /// only). With 2, the first ply past `play_depth` where games arrive twice as often ranks with a new leaf.
    pub deepen: Option<f64>,
}

impl Cover {
    /// The walk for a time control whose searches reach `play_depth`, in a tree searched with `params`:
    /// temperature 20 cp, walks down to a reach of 1/1000 and 40 plies.
    pub fn new(play_depth: u8, params: Params) -> Cover {
        Cover { play_depth, params, temperature: 20, floor: 1e-3, max_plies: 40, deepen: None }
    }

    /// The software depth to grow a leaf to: the book's side's position until it is known `play_depth` deep (depth
    /// 0, one search of the position, where the engine depth is enough), the opponent's to depth 1 (its replies
    /// searched at the engine depth), a position to deepen one ply past what it is known to, at the engine depth of
    /// its own evaluation.
    pub fn grow_depth(&self, leaf: &Leaf) -> u8 {
        match leaf.deeper {
            Some(deeper) => deeper.settle,
            None if leaf.ours => self.play_depth.saturating_sub(self.params.engine_depth),
            None => 1,
        }
    }

    /// The priority of a leaf: its reach, divided by [`Cover::deepen`] for each ply past `play_depth` a position to
    /// deepen would be known to.
    pub fn priority(&self, leaf: &Leaf) -> f64 {
        match leaf.deeper {
            Some(deeper) => self.deeper_priority(leaf.reach, deeper),
            None => leaf.reach,
        }
    }

    /// `reach` divided by [`Cover::deepen`] for each ply past `play_depth` that `deeper` would make a position known
    /// to.
    fn deeper_priority(&self, reach: f64, deeper: Deeper) -> f64 {
        let plies =
            (u32::from(deeper.engine_depth) + u32::from(deeper.settle)).saturating_sub(u32::from(self.play_depth));
        self.deepen.map_or(reach, |factor| reach / factor.powf(f64::from(plies)))
    }
}

/// A position the tree answers, to be known one ply deeper: its evaluation's engine depth and the software depth to
/// settle below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deeper {
    pub engine_depth: u8,
    pub settle: u8,
}

/// What a leaf is, for the positions a run has grown: its position, whether the book's side is to move, and for a
/// position to deepen, what it was to be deepened to.
pub type LeafId = (PositionKey, bool, Option<Deeper>);

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
    /// A position the tree answers (the book's side to move), to be known one ply deeper ([`Cover::deepen`]).
    pub deeper: Option<Deeper>,
}

impl Leaf {
    /// What it is among the leaves a run grows.
    pub fn id(&self) -> LeafId {
        (self.key, self.ours, self.deeper)
    }
}

/// What a walk found: the leaves, highest priority first ([`Cover::priority`]: reach, but for positions to deepen),
/// and the tree moves a game is expected to get.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    pub leaves: Vec<Leaf>,
    /// Sum over the book's positions the tree answers of their reach, over the roots' total weight: tree moves a game
    /// (of one side) is expected to get.
    pub expected_answers: f64,
}

/// The walk of the module docs: the positions games from `roots` leave the tree at (with [`Cover::deepen`], the
/// positions it answers too), highest priority first, leaving out `grown` (leaves this run grew already), and the
/// tree moves a game is expected to get.
pub fn walk(
    view: &ReadView<'_>,
    roots: &[BookRoot],
    cover: &Cover,
    grown: &HashSet<LeafId>,
) -> Result<Walk, StoreError> {
    // A position is a leaf of either kind: where the tree would play (the book's side to move) and where the
    // opponent's replies are wanted; one position may be both, in the two sides' walks.
    // With deepening, a position the tree answers is a third kind: to know one ply deeper.
    let mut leaves: HashMap<LeafKind, Leaf> = HashMap::new();
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
                let before = &line.positions[line.positions.len().saturating_sub(1 + ply)..line.positions.len() - 1];
                if before.iter().any(|p| PositionKey::of(p) == key) {
                    continue;
                }
                let ours = pos.turn() == side;
                let leaf_here = |deeper| Leaf { line: line.clone(), key, reach, ply, ours, root: index, deeper };
                let next: Option<Vec<(UciMove, f64)>> = if ours {
                    match tree_move(view, &line, cover)? {
                        BookMove::Plays { uci, known, engine_depth } => {
                            // One ply past what it is known to (never less than its engine depth: at least one ply to
                            // settle), at its own evaluation's engine depth.
                            let settle = (known + 1).saturating_sub(u32::from(engine_depth));
                            let target = u8::try_from(settle)
                                .ok()
                                .map(|settle| Deeper { engine_depth, settle })
                                .filter(|_| cover.deepen.is_some())
                                .filter(|t| !grown.contains(&(key, true, Some(*t))))
                                // Below the walk's floor, as a new leaf of that reach would be: so the run ends.
                                .filter(|t| cover.deeper_priority(reach, *t) >= cover.floor * share);
                            if let Some(target) = target {
                                add_leaf(&mut leaves, leaf_here(Some(target)));
                            }
                            Some(vec![(uci, 1.0)])
                        }
                        BookMove::Unknown => None,
                        // Growth cannot change what the game's history does to the verdict: not a leaf.
                        BookMove::Searches => Some(Vec::new()),
                    }
                } else {
                    match view.node(key)? {
                        Some(node) => replies(pos, &node, cover.temperature, cover.params.move_distance_of(pos.turn())),
                        None => None,
                    }
                };
                // Grown in this run and still not known: a game end, or searches that failed. Left.
                let next = if next.is_none() && grown.contains(&(key, ours, None)) { Some(Vec::new()) } else { next };
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
                    None => add_leaf(&mut leaves, leaf_here(None)),
                }
            }
        }
    }
    let mut leaves: Vec<Leaf> = leaves.into_values().collect();
    for leaf in &mut leaves {
        leaf.reach /= total_weight.max(1.0);
    }
    leaves.sort_by(|a, b| {
        cover
            .priority(b)
            .total_cmp(&cover.priority(a))
            .then(a.ply.cmp(&b.ply))
            .then(a.key.cmp(&b.key))
            .then(b.ours.cmp(&a.ours))
            .then(a.deeper.is_some().cmp(&b.deeper.is_some()))
    });
    Ok(Walk { leaves, expected_answers: answered / total_weight.max(1.0) })
}

/// A leaf's position, whether the book's side is to move there, and whether it is to be deepened: the ways to one
/// leaf add up their reach.
type LeafKind = (PositionKey, bool, bool);

/// Adds `leaf` to `leaves`, or its reach to the leaf of the same kind found by another way (a transposition, another
/// root or side).
fn add_leaf(leaves: &mut HashMap<LeafKind, Leaf>, leaf: Leaf) {
    let reach = leaf.reach;
    leaves.entry((leaf.key, leaf.ours, leaf.deeper.is_some())).and_modify(|l| l.reach += reach).or_insert(leaf);
}

/// What a game gets in a position of the book's side.
enum BookMove {
    /// The tree's move, and the depth the position is known to ([`known_depth`], at least `play_depth`) with the
    /// engine depth of its evaluation.
    Plays { uci: UciMove, known: u32, engine_depth: u8 },
    /// A search: the tree does not know the position `play_depth` deep. The game leaves the tree here.
    Unknown,
    /// A search: the tree knows the position deep enough, but the game's history changes its verdict. Growth would
    /// not change that; the walk stops here without a leaf.
    Searches,
}

/// The tree's move at `line`'s root, a position of the book's side, where a game would get it: the position is
/// known at least `play_depth` deep (its evaluation's engine depth and the software depth settled below it, stored or
/// found in the stored graph, as a game's policy counts it: [`known_depth`]), the game's history (the root's line)
/// leaves the tree's verdict as the position alone gives it, and the move is the one the tree plays, its best by
/// alpha score.
fn tree_move(view: &ReadView<'_>, line: &Line, cover: &Cover) -> Result<BookMove, StoreError> {
    let Some(known) = known_depth(view, line, &cover.params, cover.play_depth)? else { return Ok(BookMove::Unknown) };
    if known < u32::from(cover.play_depth) {
        return Ok(BookMove::Unknown);
    }
    let Some(tree) = tree::view(view, line.root(), &line.history_keys())? else { return Ok(BookMove::Unknown) };
    // Where the game's history changes the tree's verdict (a move repeating a position of the game scores a draw in
    // alpha, not from the root alone), a game's policy searches instead: so does the walk.
    Ok(match tree.best_with_history(|_| true) {
        Some((best, false)) => BookMove::Plays { uci: best.uci, known, engine_depth: tree.engine_depth },
        Some((_, true)) => BookMove::Searches,
        None => BookMove::Unknown,
    })
}

/// The opponent's replies in `pos` and the probability of each, where its likely replies were all searched: no move
/// is left unvalued but those without an edge, and these are bounded at least `move_distance` below the best (the
/// search's own line between the moves worth searching and the others) by the rest (the first move found outside
/// the move distance) or by a screen of exactly those moves, the tighter of the two. `None` where they were not: a
/// move never searched may be as good as the best.
fn replies(pos: &Chess, node: &Node, temperature: u32, move_distance: i32) -> Option<Vec<(UciMove, f64)>> {
    let live: Vec<_> = node.edges.iter().filter(|e| !e.is_excluded()).collect();
    // A move known but never valued (a game's, a book's) is not bounded by anything.
    if live.iter().any(|e| !e.is_valued()) {
        return None;
    }
    // Scores are the opponent's, its side to move: higher is better for it.
    let best = live.iter().map(|e| e.score.value()).max()?;
    let without_edge = pos.legal_moves().len().saturating_sub(node.edges.len());
    if without_edge > 0 {
        let screen = node.screen.filter(|s| usize::from(s.moves) == without_edge).map(|s| s.score);
        let bound = [node.rest.map(|r| r.score), screen].into_iter().flatten().min();
        let searched = bound.is_some_and(|b| i64::from(best) - i64::from(b.value()) >= i64::from(move_distance));
        if !searched {
            return None;
        }
    }
    let temperature = f64::from(temperature.max(1));
    let weights: Vec<(UciMove, f64)> = live
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
        store::node::{Edge, PackedPosition, RestBound, ScreenBound},
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
        // A screen of exactly the 17 moves without an edge, tighter than the rest: it bounds them.
        node.screen = Some(ScreenBound { score: Score::cp(0), depth: 12, moves: 17 });
        assert!(replies(&start, &node, 20, 20).is_some());
        // A stale screen (of other moves) bounds nothing.
        node.screen = Some(ScreenBound { score: Score::cp(0), depth: 12, moves: 18 });
        assert!(replies(&start, &node, 20, 20).is_none());
        node.screen = None;
        node.rest = Some(RestBound { score: Score::cp(10), depth: 14 });
        let replies = replies(&start, &node, 20, 20).unwrap();
        assert_eq!(replies.len(), 2, "a move 330 cp worse is never played");
        let p = |m: &str| replies.iter().find(|(u, _)| u.to_string() == m).unwrap().1;
        assert!((p("e2e4") + p("d2d4") - 1.0).abs() < 1e-9);
        // 20 cp worse at temperature 20: e times less likely.
        assert!((p("e2e4") / p("d2d4") - std::f64::consts::E).abs() < 1e-9);
    }

    #[test]
    fn a_move_known_but_never_valued_leaves_the_replies_open() {
        let start = Chess::default();
        let mut node = Node::new(PackedPosition::of(&start));
        node.edges = vec![edge("e2e4", 30, 14), Edge::placeholder("g1f3".parse().unwrap())];
        node.rest = Some(RestBound { score: Score::cp(-50), depth: 14 });
        assert!(replies(&start, &node, 20, 20).is_none());
    }
}
