//! The frontier: the positions growth may take next, each with its priority and the depth to grow it to.
//!
//! The frontier is found by a walk of the tree from the sources' seeds ([`walk`]). A seed that games go on from
//! ([`Seed::follow`]: a book's root, a game's exit) is walked as games from it would go, once for each side the tree
//! plays there: where the tree's side is to move, the game goes on with the tree's move if the tree knows the
//! position at least the target deep (counted as a game's `go` policy counts it, §7.1 of docs/design.md:
//! [`known_depth`]) and the game's history does not change its verdict; where the opponent is to move, it goes into
//! each valued reply with probability `exp(-loss / temperature)`, normalised over the replies (`loss`: centipawns
//! below the opponent's best), as long as the moves never valued are bounded a move distance below the best.
//! Where a game leaves the tree (the tree's side with no answer deep enough, or the opponent's replies never
//! searched) the position is on the frontier, with the reach of the games that arrive there (transpositions add up)
//! and the depth it is known to. Where the tree answers, the position is on the frontier too, to be known a ply
//! deeper (depth past the target is what a tree answer gains over the search it replaces): up to the aim, and past
//! it within a time or node budget. A seed that is only itself (a root to deepen, a task, a session's position) is
//! on the frontier as long as it is known less deep than its target.
//!
//! An item is grown by the settle-then-deepen search of `super::super::analysis` ([`Item::settle`]): a position of
//! the tree's side to the software depth that brings its target (0, one search, where the engine depth is enough),
//! one of the opponent's to software depth 1 (its replies searched at the engine depth), one the tree answers to the
//! software depth a ply past what it is known to, a seed that is only itself to its next software depth (or, alone
//! in its run, to its target at once: nothing competes for the engines).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use shakmaty::{Chess, Color, Position, uci::UciMove};

use crate::{
    game::Line,
    store::{ReadView, StoreError, key::PositionKey, node::Node},
};

use super::{
    super::{
        analysis::{Params, known_depth},
        tree,
    },
    priority::{DEFAULT_BEYOND, Terms, priority},
};

/// Replies scored more than this many temperatures below the best are taken as never played.
const MAX_LOSS_IN_TEMPERATURES: f64 = 5.0;

/// A position a source feeds growth with.
#[derive(Debug, Clone)]
pub struct Seed {
    /// The way there (its history, for repetitions).
    pub line: Line,
    /// How progress lines name it (`line 7`, `game 3 ply 12`, `task 2`, an opening's name).
    pub label: String,
    /// How much play it stands for: games that left the tree there, `2^priority` for a task, 1 for a root of a list.
    pub weight: f64,
    /// Games go on from it: the walk follows them past it. Otherwise it is deepened itself.
    pub follow: bool,
    /// With `follow`: the side the tree plays for there (`None`: both, each with half the weight).
    pub side: Option<Color>,
    /// The depth it is grown to, where not the run's target (a task's deepest depth).
    pub target: Option<u32>,
    /// Wall time the run may spend on it (a task's budget left); `None`: the run's budget alone.
    pub budget: Option<Duration>,
    /// The engine depth of its searches, where not the run's.
    pub engine_depth: Option<u8>,
}

impl Seed {
    /// A root to deepen, of weight 1.
    pub fn root(line: Line, label: impl Into<String>) -> Seed {
        Seed {
            line,
            label: label.into(),
            weight: 1.0,
            follow: false,
            side: None,
            target: None,
            budget: None,
            engine_depth: None,
        }
    }

    /// A root games go on from, played by both sides, of weight `weight`.
    pub fn games_from(line: Line, label: impl Into<String>, weight: f64) -> Seed {
        Seed { weight, follow: true, ..Seed::root(line, label) }
    }
}

/// The depth a game needs at a position for the tree to answer there, by the men on the board: a search of the same
/// time sees deeper as men come off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Targets {
    by_men: [u32; 33],
}

impl Targets {
    /// The same depth everywhere.
    pub fn flat(depth: u32) -> Targets {
        Targets { by_men: [depth; 33] }
    }

    /// The depth `depth(men)` with `men` on the board (2 to 32).
    pub fn by_men(depth: impl Fn(usize) -> u32) -> Targets {
        Targets { by_men: std::array::from_fn(depth) }
    }

    /// The depth at `pos`.
    pub fn at(&self, pos: &Chess) -> u32 {
        self.by_men[pos.board().occupied().count().min(32)]
    }

    /// The shallowest and the deepest.
    pub fn range(&self) -> (u32, u32) {
        let men = &self.by_men[2..];
        (men.iter().copied().min().unwrap_or(0), men.iter().copied().max().unwrap_or(0))
    }
}

/// How the walk models play, and what it grows to.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The depth a game needs at a position for the tree to answer there (the clock's depth, less the margin).
    pub targets: Targets,
    /// The tree's search: its engine depth, and its move distances (the opponent's moves bounded a move distance
    /// below its best are taken as never played).
    pub params: Params,
    /// Centipawns a reply may score below the best for its probability to fall by a factor e.
    pub temperature: u32,
    /// Walks stop below this reach (a share of one seed's games).
    pub floor: f64,
    /// Plies below a seed past which the walk stops.
    pub max_plies: usize,
    /// Plies past the target that positions the tree answers are deepened to before new exits of equal reach (the
    /// aim, `priority`'s module docs).
    pub beyond: u32,
}

impl Policy {
    /// Whether the run has a time or node budget: only then is depth grown past the aim.
    pub fn budgeted(&self) -> bool {
        self.params.time.is_some() || self.params.nodes.is_some()
    }

    /// Growth to `target` with the tree's search `params`: temperature 20 cp, walks down to a reach of 1/1000 and
    /// 40 plies, aiming [`DEFAULT_BEYOND`] plies past the target.
    pub fn new(target: u32, params: Params) -> Policy {
        Policy {
            targets: Targets::flat(target),
            params,
            temperature: 20,
            floor: 1e-3,
            max_plies: 40,
            beyond: DEFAULT_BEYOND,
        }
    }
}

/// What an item is, among those a run has grown: its position, whether the tree's side is to move there (a
/// seed's own position counts as the tree's), and the software depth it was grown to.
pub type ItemId = (PositionKey, bool, u8);

/// What growing an item does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A seed deepened itself: its next software depth.
    Seed,
    /// A position of the tree's side where games leave the tree: known to the target.
    TreeMove,
    /// A position of the tree's side where the tree answers: known a ply deeper.
    Deeper,
    /// A position of the opponent's whose replies are not all searched: its replies searched.
    Replies,
}

impl Kind {
    /// How progress lines and the trace name it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Seed => "the seed itself",
            Kind::TreeMove => "the tree's move",
            Kind::Deeper => "the tree's move a ply deeper",
            Kind::Replies => "the replies",
        }
    }
}

/// A position on the frontier.
#[derive(Debug, Clone)]
pub struct Item {
    pub kind: Kind,
    /// The way there from its seed's line (the first way the walk found).
    pub line: Line,
    pub key: PositionKey,
    /// Its seed's place in the run's list (the first way).
    pub seed: usize,
    /// Plies below its seed (the first way).
    pub ply: usize,
    /// The tree's side is to move (or it is a seed deepened itself); else the opponent's replies are wanted.
    pub ours: bool,
    /// Share of the sources' games that arrive there, the depth it is known to and the depth it needs.
    pub terms: Terms,
    /// `reach x 2^lack` ([`priority`]).
    pub priority: f64,
    /// The engine depth of its searches.
    pub engine_depth: u8,
    /// The software depth to settle there.
    pub settle: u8,
}

impl Item {
    /// What it is among the items a run grows.
    pub fn id(&self) -> ItemId {
        (self.key, self.ours, self.settle)
    }

    /// Its position.
    pub fn position(&self) -> &Chess {
        self.line.root()
    }
}

/// What a walk found: the frontier, highest priority first, and the tree moves a game is expected to get.
#[derive(Debug, Clone, Default)]
pub struct Frontier {
    pub items: Vec<Item>,
    /// Over the seeds games go on from: the sum of the reach of the positions of the tree's side that the tree
    /// answers, over their total weight (tree moves a game, of one side, is expected to get).
    pub expected_answers: f64,
    /// The share of the reach of the positions of the tree's side the walk met (down to its floor) that the tree
    /// answers at the target: the games that get the tree's move where they arrive.
    pub answered_share: f64,
}

/// What the walk leaves out: items this run grew already, positions being grown, seeds closed (budget spent).
#[derive(Debug, Default)]
pub struct Skip<'a> {
    pub grown: Option<&'a HashSet<ItemId>>,
    pub in_flight: Option<&'a HashSet<PositionKey>>,
    pub closed: Option<&'a [bool]>,
}

/// The frontier of `seeds` in the tree of `view` for `policy` (the module docs), highest priority first.
pub fn walk(view: &ReadView<'_>, seeds: &[Seed], policy: &Policy, skip: &Skip<'_>) -> Result<Frontier, StoreError> {
    let mut found: HashMap<(PositionKey, bool), Item> = HashMap::new();
    let mut answered = 0.0;
    // The reach of the positions of the tree's side met, answered or not.
    let mut met = 0.0;
    let total = total_weight(seeds);
    let followed: f64 = seeds.iter().filter(|s| s.follow).map(|s| s.weight.max(0.0)).sum();
    let alone = alone(seeds);
    for (index, seed) in seeds.iter().enumerate() {
        if skip.closed.is_some_and(|closed| closed.get(index).copied().unwrap_or(false)) {
            continue;
        }
        if !seed.follow {
            if let Some(item) = seed_item(view, seed, index, policy, seed.weight / total, alone)? {
                add(&mut found, item, skip);
            }
            continue;
        }
        let sides = match seed.side {
            Some(side) => vec![side],
            None => vec![Color::White, Color::Black],
        };
        let share = seed.weight.max(0.0) / sides.len() as f64;
        for side in sides {
            let mut stack = vec![(seed.line.clone(), share, 0usize)];
            while let Some((line, reach, ply)) = stack.pop() {
                let pos = line.root();
                if reach < policy.floor * share || ply > policy.max_plies || pos.is_game_over() {
                    continue;
                }
                let key = PositionKey::of(pos);
                // A repetition inside the walk: the game is drawn or goes on as before; no need to go round again.
                let before = &line.positions[line.positions.len().saturating_sub(1 + ply)..line.positions.len() - 1];
                if before.iter().any(|p| PositionKey::of(p) == key) {
                    continue;
                }
                let ours = pos.turn() == side;
                let target = seed.target.unwrap_or(policy.targets.at(pos));
                let aim = target.saturating_add(policy.beyond);
                let node = view.node(key)?;
                // Searched at the run's engine depth, or at its own evaluation's where that is deeper (what is stored
                // is taken, never searched again shallower).
                let eval_depth = node.as_ref().and_then(|n| n.eval.as_ref()).map_or(0, |e| e.depth);
                let engine_depth = seed.engine_depth.unwrap_or(policy.params.engine_depth).max(eval_depth);
                let item = |kind: Kind, terms: Terms, settle: u8| Item {
                    kind,
                    line: line.clone(),
                    key,
                    seed: index,
                    ply,
                    ours,
                    terms,
                    priority: priority(terms),
                    engine_depth,
                    settle,
                };
                let next: Option<Vec<(UciMove, f64)>> = if ours {
                    match tree_move(view, &line, policy, target, aim)? {
                        // The tree answers: the position is also grown a ply past what it is known to; past the
                        // aim only within a budget (`--time`, `--nodes`), so that a run without one ends when every
                        // position games reach is known to the aim.
                        BookMove::Plays(uci, known) if known >= aim && !policy.budgeted() => Some(vec![(uci, 1.0)]),
                        BookMove::Plays(uci, known) => {
                            let terms = Terms { reach: reach / total, known, target, aim, exit: false };
                            let settle = clamp_u8((known + 1).saturating_sub(u32::from(engine_depth)));
                            add(&mut found, item(Kind::Deeper, terms, settle), skip);
                            Some(vec![(uci, 1.0)])
                        }
                        BookMove::Unknown => None,
                        // Growth cannot change what the game's history does to the verdict: not on the frontier.
                        BookMove::Searches => Some(Vec::new()),
                    }
                } else {
                    node.as_ref().and_then(|node| {
                        replies(pos, node, policy.temperature, policy.params.move_distance_of(pos.turn()))
                    })
                };
                if ours {
                    met += reach;
                }
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
                        let known = if ours {
                            known_depth(view, &line, &policy.params, clamp_u8(target))?.unwrap_or(0)
                        } else {
                            // Its replies not all searched, a position of the opponent lacks at least the ply of
                            // its replies, however deep its own evaluation (the other side's growth searched it).
                            stored_depth(node.as_ref()).min(target.saturating_sub(1))
                        };
                        let settle = if ours { clamp_u8(target.saturating_sub(u32::from(engine_depth))) } else { 1 };
                        let terms = Terms { reach: reach / total, known, target, aim, exit: true };
                        let kind = if ours { Kind::TreeMove } else { Kind::Replies };
                        add(&mut found, item(kind, terms, settle), skip);
                    }
                }
            }
        }
    }
    let mut items: Vec<Item> = found
        .into_values()
        .map(|mut item| {
            item.priority = priority(item.terms);
            item
        })
        .filter(|item| item.priority > 0.0)
        .collect();
    rank(&mut items);
    let expected_answers = if followed > 0.0 { answered / followed } else { 0.0 };
    let answered_share = if met > 0.0 { answered / met } else { 0.0 };
    Ok(Frontier { items, expected_answers, answered_share })
}

/// Puts the frontier in the order growth takes it: the highest [`priority`] first; among equals the nearer its seed
/// first, then by seed, position and side (the tree's first), so that a walk's order never depends on a map's.
pub fn rank(items: &mut [Item]) {
    items.sort_by(ranked_before);
}

/// The order of [`rank`]: `Less` where `a` is taken before `b`.
pub fn ranked_before(a: &Item, b: &Item) -> std::cmp::Ordering {
    b.priority
        .total_cmp(&a.priority)
        .then(a.ply.cmp(&b.ply))
        .then(a.seed.cmp(&b.seed))
        .then(a.key.cmp(&b.key))
        .then(b.ours.cmp(&a.ours))
}

/// The seeds' weight in all: a position's reach is a share of it.
fn total_weight(seeds: &[Seed]) -> f64 {
    seeds.iter().map(|s| s.weight.max(0.0)).sum::<f64>().max(f64::MIN_POSITIVE)
}

/// A seed alone in its run is grown to its target in one step; but one with a budget of its own (a task) a depth a
/// step, that its progress is saved after each.
fn alone(seeds: &[Seed]) -> bool {
    seeds.len() == 1 && seeds.iter().all(|s| s.budget.is_none())
}

/// The next item of seed `index` (deepened itself) as a walk would find it now, at its priority: after a step of a
/// seed it is put in the queue at its rank, so that seeds of different weights are ranked against each other at
/// every step (a walk's batch holds each seed's next step only once). `None` where the seed lacks nothing.
pub fn next_of_seed(
    view: &ReadView<'_>,
    seeds: &[Seed],
    index: usize,
    policy: &Policy,
) -> Result<Option<Item>, StoreError> {
    let Some(seed) = seeds.get(index) else { return Ok(None) };
    let (total, alone) = (total_weight(seeds), alone(seeds));
    Ok(seed_item(view, seed, index, policy, seed.weight / total, alone)?.filter(|item| item.priority > 0.0))
}

/// Adds `item`, or its reach to the item of the same position and side found by another way (a transposition,
/// another seed or side); an item grown in this run or being grown is left out.
fn add(found: &mut HashMap<(PositionKey, bool), Item>, item: Item, skip: &Skip<'_>) {
    if skip.grown.is_some_and(|grown| grown.contains(&item.id()))
        || skip.in_flight.is_some_and(|keys| keys.contains(&item.key))
    {
        return;
    }
    let reach = item.terms.reach;
    found.entry((item.key, item.ours)).and_modify(|i| i.terms.reach += reach).or_insert(item);
}

/// A seed deepened itself: on the frontier while known less deep than `target`, to settle its next software depth
/// at its engine depth (alone in its run: its target at once).
fn seed_item(
    view: &ReadView<'_>,
    seed: &Seed,
    index: usize,
    policy: &Policy,
    reach: f64,
    alone: bool,
) -> Result<Option<Item>, StoreError> {
    // Ranked against the run's target, that seeds with a depth of their own (a task's) rank with those without; grown
    // no deeper than their own.
    let ranked = policy.targets.at(seed.line.root());
    let target = seed.target.unwrap_or(ranked);
    let key = PositionKey::of(seed.line.root());
    let engine_depth = seed.engine_depth.unwrap_or(policy.params.engine_depth);
    let node = view.node(key)?;
    let evaluated = node.as_ref().is_some_and(|n| n.eval.is_some());
    let settled = node.as_ref().and_then(|n| n.settled_depth);
    // Known: the engine depth and the software depth settled below it at that engine depth (0 unknown).
    let known = match settled {
        Some(depth) if evaluated => u32::from(engine_depth) + u32::from(depth),
        _ => 0,
    };
    let last = clamp_u8(target.saturating_sub(u32::from(engine_depth)));
    let next = settled.map_or(0, |d| d.saturating_add(1));
    // Settled to the target (the engine depth and `last` software depths): nothing lacking.
    if next > last {
        return Ok(None);
    }
    let ranked = ranked.max(known + 1);
    let terms = Terms { reach, known, target: ranked, aim: ranked, exit: false };
    Ok(Some(Item {
        kind: Kind::Seed,
        line: seed.line.clone(),
        key,
        seed: index,
        ply: 0,
        ours: true,
        terms,
        priority: priority(terms),
        engine_depth,
        settle: if alone { last } else { next },
    }))
}

/// The combined depth stored at a position: its evaluation's engine depth and the software depth settled below it
/// (0 without an evaluation).
fn stored_depth(node: Option<&Node>) -> u32 {
    node.and_then(|n| n.eval.as_ref().map(|e| u32::from(e.depth) + u32::from(n.settled_depth.unwrap_or(0))))
        .unwrap_or(0)
}

fn clamp_u8(depth: u32) -> u8 {
    u8::try_from(depth).unwrap_or(u8::MAX - 1).min(u8::MAX - 1)
}

/// What a game gets in a position of the tree's side.
enum BookMove {
    /// The tree's move, and the depth the tree knows the position to (at least the target).
    Plays(UciMove, u32),
    /// A search: the tree does not know the position deep enough. The game leaves the tree.
    Unknown,
    /// A search: the tree knows the position deep enough, but the game's history changes its verdict. Growth would
    /// not change that; the walk stops here without an item.
    Searches,
}

/// The tree's move at `line`'s root, a position of the tree's side, where a game would get it: the position is
/// known at least `target` deep ([`known_depth`]), the game's history (the line) leaves the tree's verdict as the
/// position alone gives it, and the move is the one the tree plays, its best by alpha score. The depth it is known
/// to is looked for up to `aim` (or past it where stored).
fn tree_move(view: &ReadView<'_>, line: &Line, policy: &Policy, target: u32, aim: u32) -> Result<BookMove, StoreError> {
    let mut known = known_depth(view, line, &policy.params, clamp_u8(aim))?;
    if aim > target && known.is_none_or(|k| k < target) {
        // The stored graph may settle the target with the move distance narrowed, and not the aim: asked as a game's
        // policy asks it.
        known = known_depth(view, line, &policy.params, clamp_u8(target))?;
    }
    let Some(known) = known.filter(|k| *k >= target) else { return Ok(BookMove::Unknown) };
    let Some(tree) = tree::view(view, line.root(), &line.history_keys())? else { return Ok(BookMove::Unknown) };
    // Where the game's history changes the tree's verdict (a move repeating a position of the game scores a draw in
    // alpha, not from the root alone), a game's policy searches instead: so does the walk.
    Ok(match tree.best_with_history(|_| true) {
        Some((best, false)) => BookMove::Plays(best.uci, known),
        Some((_, true)) => BookMove::Searches,
        None => BookMove::Unknown,
    })
}

/// The opponent's replies in `pos` and the probability of each, where its likely replies were all searched: no move
/// is left unvalued but those without an edge, and these are bounded at least `move_distance` below the best (the
/// search's own line between the moves worth searching and the others) by the rest (the first move found outside
/// the move distance) or by a screen of exactly those moves, the tighter of the two. `None` where they were not: a
/// move never searched may be as good as the best.
pub fn replies(pos: &Chess, node: &Node, temperature: u32, move_distance: i32) -> Option<Vec<(UciMove, f64)>> {
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

    proptest::proptest! {
        /// A hand-made frontier, ranked, is in the order docs/design.md §6.1 states: by log2(reach) + lack, the
        /// larger first (lack 1 at an exit, aim - known where the tree answers), the nearer its seed first among
        /// equals; no item with no reach is ranked above one with some.
        #[test]
        fn a_hand_made_frontier_ranks_by_reach_and_lack(
            made in proptest::collection::vec((0u32..6, 0u32..30, proptest::bool::ANY, 0usize..12), 1..40),
            target in 10u32..20, beyond in 0u32..5,
        ) {
            let aim = target + beyond;
            let line = Line::parse(None, "").unwrap();
            let mut items: Vec<Item> = made
                .iter()
                .enumerate()
                .map(|(i, &(halvings, known, exit, ply))| {
                    // Reach in powers of 2 (1 down to 1/32, and 0 for the last kind): the order is then exact.
                    let reach = if halvings == 5 { 0.0 } else { 0.5f64.powi(halvings as i32) };
                    let terms = Terms { reach, known, target, aim, exit };
                    Item {
                        kind: if exit { Kind::TreeMove } else { Kind::Deeper },
                        line: line.clone(),
                        key: PositionKey(i as u64),
                        seed: 0,
                        ply,
                        ours: true,
                        terms,
                        priority: priority(terms),
                        engine_depth: 16,
                        settle: 1,
                    }
                })
                .collect();
            rank(&mut items);
            let stated = |item: &Item| {
                let lack = if item.terms.exit { 1 } else { i64::from(aim) - i64::from(item.terms.known) };
                item.terms.reach.log2() + lack as f64
            };
            for pair in items.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                if a.terms.reach == 0.0 {
                    proptest::prop_assert_eq!(b.terms.reach, 0.0, "nothing reached ranks last");
                } else if b.terms.reach > 0.0 {
                    proptest::prop_assert!(stated(a) >= stated(b), "{:?} before {:?}", a.terms, b.terms);
                    if stated(a) == stated(b) {
                        proptest::prop_assert!(a.ply <= b.ply, "the nearer first among equals");
                    }
                }
            }
        }
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
