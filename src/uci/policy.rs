//! The `go` policy: the tree's move when it knows more than a search would find, else the direct engine's.
//!
//! A tree move is played at once only when the tree's combined depth at the root (the engine depth of the root's
//! evaluation plus the software depth settled below it, as the `info` line shows) is at least the depth the inner
//! engine would reach in this move's budget ([`super::depth::DepthModel`], fitted to this game's direct searches),
//! less the `TreeDepthMargin` option's plies when the budget is a clock or a `movetime` (0 by default).
//! Below an analysed root, where no settled depth is stored, the depth the root's passes settled is found by walking
//! the stored graph ([`known_deep_enough`]).
//! Otherwise the direct engine searches, exactly as the bare engine would. `go infinite` and `go ponder` grow the
//! tree instead (see `growth`).

use std::{
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use shakmaty::{Chess, Position, uci::UciMove};

use super::{
    command::Go,
    depth::{DepthModel, Phase},
    direct::{bestmove, direct},
    growth::grow_tree,
    session::{Control, Shared},
    time::share,
    tree,
};
use crate::{
    notation::{canonical_uci, legal_line},
    score::{Bound, Score},
    search::analysis::{Line, SettledInStore},
    store::{
        Change,
        key::PositionKey,
        node::{Edge, Node, PackedPosition},
    },
};

/// The search thread: always ends with exactly one `bestmove`, preceded by an `info` line.
pub fn search(shared: Shared, line: Line, go: Go, control: Control) {
    let started = control.received;
    let root = line.root().clone();
    if root.legal_moves().is_empty() {
        let score = if root.is_check() { "mate 0" } else { "cp 0" };
        shared.out.send(&format!("info depth 0 score {score}"));
        wait_for_release(&go, &control);
        shared.bestmove("bestmove 0000");
        return;
    }
    // In stored form, whichever castling notation the GUI used.
    let searchmoves: Vec<UciMove> =
        go.searchmoves.iter().filter_map(|m| canonical_uci(&root, &m.parse::<UciMove>().ok()?)).collect();
    if go.searchmoves.len() != searchmoves.len() {
        shared.out.error("go searchmoves: some moves are not legal here and were left out");
    }

    if go.infinite || go.ponder {
        // No clock runs yet: the game's moves are stored first, so the tree knows its repetitions.
        store_game_line(&shared, &line);
        // Grow the tree around the position, reporting as it grows, until stop (or ponderhit).
        let until = if go.ponder { Some(control.ponderhit.clone()) } else { None };
        grow_tree(&shared, &line, &control.stop, until.map(|p| (p, started)), true);
        if go.ponder && control.ponderhit.load(Ordering::SeqCst) && !control.stop.load(Ordering::SeqCst) {
            // The opponent played the expected move: the clock runs now.
            let mut timed = go.clone();
            timed.ponder = false;
            let control = Control { received: Instant::now(), ..control };
            play(&shared, &line, &timed, &searchmoves, &control);
            return;
        }
        // After stop: answer with the tree's best move (or, if it has none, a quick direct search).
        if let Some(answer) = tree_answer(&shared, &line, &searchmoves) {
            answer.send(&shared, &line, started);
        } else {
            // The GUI's stop is spent: the quick search gets a flag of its own (it keeps the GUI's stop handle).
            let quick = Go { depth: Some(1), ..Go::default() };
            let quick_control = Control {
                stop: Arc::default(),
                ponderhit: control.ponderhit.clone(),
                direct_stop: control.direct_stop.clone(),
                received: control.received,
            };
            direct(&shared, &line, &quick, &searchmoves, &quick_control);
        }
        return;
    }
    play(&shared, &line, &go, &searchmoves, &control);
}

/// In `go infinite` and `go ponder`, `bestmove` waits for `stop` or `ponderhit`.
pub fn wait_for_release(go: &Go, control: &Control) {
    if go.infinite || go.ponder {
        while !control.stop.load(Ordering::SeqCst) && !control.ponderhit.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A move to play: from the tree when it knows more than a search would find, else by the direct engine.
fn play(shared: &Shared, line: &Line, go: &Go, searchmoves: &[UciMove], control: &Control) {
    if !shared.options.analyse_mode {
        let (expected, timed) = {
            let model = shared.depth_model.lock();
            expected_depth(go, line.root(), &model, shared.options.config.engine_depth)
        };
        // The margin the user allows lowers the estimate for a clock or `movetime`, never a limit the GUI set.
        let margin = if timed { shared.options.config.tree_depth_margin } else { 0 };
        let needed = expected - f64::from(margin);
        // The tree's word counts where it knows at least as deep as the search would see (less the margin), and where
        // the game's history does not change its verdict: a move that would repeat a position of this game scores a
        // draw in alpha, not with the root alone, and the engine, which sees the game, searches instead. Repetitions
        // inside the tree below the root count in both and do not keep the tree from answering.
        if let Some(mut answer) = tree_answer(shared, line, searchmoves)
            && answer.score == answer.score_from_root
            && answer.score == answer.best_from_root
            && (f64::from(answer.combined_depth) >= needed
                || known_deep_enough(shared, line, searchmoves, &mut answer, needed))
        {
            let margin = if margin > 0 { format!(", margin {margin}") } else { String::new() };
            shared.out.send(&format!(
                "info string tree move: combined depth {} (engine {} + software {}) against {expected:.1} for a \
                 search{margin}",
                answer.combined_depth,
                answer.combined_depth - answer.software_depth,
                answer.software_depth
            ));
            answer.send(shared, line, control.received);
            store_game_line(shared, line);
            return;
        }
    }
    direct(shared, line, go, searchmoves, control);
}

/// Most software depth the tree's answer is checked for below an analysed root. A walk of the stored graph per depth
/// asked; deeper than this, a position is only known as deep as its own settled depth says.
pub const MAX_CHECKED_DEPTH: u8 = 8;

/// Halvings of the move distance the check may use, each counted as one ply less (see [`known_deep_enough`]).
pub const MAX_NARROWING: u8 = 2;

/// Narrowest move distance the check uses, in centipawns: below it a pass follows little more than the best line.
pub const MIN_CHECKED_DISTANCE: u32 = 5;

/// Whether the tree knows `line`'s root deep enough for a move in `expected` plies, though its own settled depth says
/// less: the position lies below an analysed root, whose passes evaluated the lines through it. The stored graph is
/// walked from the position as the passes of an analysis of it would walk it ([`SettledInStore`]), at the engine depth
/// of its evaluation, each software depth from 1 to the one needed (engine depth plus software depth at least
/// `expected`); when none of them would plan a search, `answer` claims the depth needed.
///
/// A position `p` plies below a root was walked with the root's move distance halved `p - 1` times, so a pass with
/// the full distance may ask for alternatives the root never needed. The check tries the full distance, then halves
/// it up to [`MAX_NARROWING`] times (not below [`MIN_CHECKED_DISTANCE`]), and counts each halving as one ply less:
/// with half the move distance, the depth needed plus one must settle. That exchange is a rule of this policy, not a
/// result of the search. With `searchmoves` the tree's answer is the best allowed move, which the walk need not
/// have deepened: no check then.
fn known_deep_enough(
    shared: &Shared,
    line: &Line,
    searchmoves: &[UciMove],
    answer: &mut TreeAnswer,
    expected: f64,
) -> bool {
    let Some(store) = &shared.store else { return false };
    if !expected.is_finite() || !searchmoves.is_empty() {
        return false;
    }
    let engine_depth = answer.combined_depth - answer.software_depth;
    let Ok(needed) = u8::try_from((expected.ceil() as i64 - i64::from(engine_depth)).max(0)) else { return false };
    if needed > MAX_CHECKED_DEPTH || needed == 0 {
        return false;
    }
    let Ok(view) = store.read() else { return false };
    let settled = SettledInStore::new(&view, line);
    let started = Instant::now();
    for narrowing in 0..=MAX_NARROWING {
        let move_distance = shared.options.config.move_distance >> narrowing;
        if narrowing > 0 && move_distance < MIN_CHECKED_DISTANCE {
            break;
        }
        let params = shared
            .options
            .analysis_params()
            .with_engine_depth(u8::try_from(engine_depth).unwrap_or(u8::MAX))
            .with_move_distance(move_distance as i32);
        let depth = needed + narrowing;
        match settled.deepest(&params, 1, depth) {
            Ok(Some(found)) if found == depth => {
                log::debug!(
                    "tree known to software depth {depth} at move distance {move_distance} ({:.2} ms)",
                    started.elapsed().as_secs_f64() * 1e3
                );
                answer.software_depth = u32::from(needed);
                answer.combined_depth = engine_depth + u32::from(needed);
                return true;
            }
            Ok(_) => {}
            Err(e) => {
                log::warn!("the tree's depth here could not be read: {e}");
                return false;
            }
        }
    }
    log::debug!("tree not known to software depth {needed} ({:.2} ms)", started.elapsed().as_secs_f64() * 1e3);
    false
}

/// The depth the direct engine would reach in `position` for this `go`: the depth asked for, or the model's estimate
/// for the nodes or the time it would spend in the position's phase. The flag says the estimate is the clock's (a
/// clock or a `movetime`, the only budget `TreeDepthMargin` lowers), not a limit the GUI set.
pub fn expected_depth(go: &Go, position: &Chess, model: &DepthModel, engine_depth: u8) -> (f64, bool) {
    if let Some(depth) = go.depth {
        return (depth as f64, false);
    }
    let phase = Phase::of(position);
    if let Some(nodes) = go.nodes {
        return (model.depth_for_nodes(phase, nodes), false);
    }
    if go.mate.is_some() {
        // A mate search is the engine's job.
        return (f64::INFINITY, false);
    }
    match share(go, position.turn().is_white()) {
        Some(share) if go.movetime.is_some() => (model.depth_for_time(phase, share), true),
        Some(share) => (model.depth_for_time(phase, model.expected_time(share)), true),
        None => (f64::from(engine_depth), false),
    }
}

/// The tree's move for a position.
pub struct TreeAnswer {
    best: UciMove,
    /// Alpha score of the move (repetitions of the game count as draws).
    score: Score,
    /// The move's alpha score with the game's history ignored, and the best such score of the moves allowed: where
    /// either differs from `score`, the game's history changes the tree's verdict.
    score_from_root: Score,
    best_from_root: Score,
    pv: Vec<UciMove>,
    /// Engine depth of the root's evaluation plus the software depth settled below it.
    pub combined_depth: u32,
    pub software_depth: u32,
    nodes: u64,
}

impl TreeAnswer {
    /// The `info` line (its PV starts with the move) and `bestmove`, in the GUI's notation.
    pub fn send(&self, shared: &Shared, line: &Line, started: Instant) {
        let pv: Vec<String> =
            legal_line(line.root(), &self.pv, shared.chess960).iter().map(ToString::to_string).collect();
        shared.out.send(&format!(
            "info depth {} score {} nodes {} time {} pv {}",
            self.combined_depth,
            self.score,
            self.nodes,
            started.elapsed().as_millis(),
            pv.join(" ")
        ));
        let ponder = self.pv.get(1).copied().filter(|_| shared.options.ponder);
        shared.bestmove(&bestmove(line.root(), self.best, ponder, shared.chess960));
    }
}

/// The tree's move for the position: its best move by alpha score (repetitions of the game are draws), when the
/// root has an evaluation.
pub fn tree_answer(shared: &Shared, line: &Line, searchmoves: &[UciMove]) -> Option<TreeAnswer> {
    let store = shared.store.as_ref()?;
    let view = store.read().ok()?;
    // The common case in a game out of the book: the root has no evaluation; nothing more is read or computed.
    view.node(PositionKey::of(line.root())).ok()??.eval.as_ref()?;
    let tree = tree::view(&view, line.root(), &line.history_keys()).ok()??;
    // A move nothing has valued yet keeps the placeholder score: never the tree's word.
    let allowed =
        |c: &&tree::Candidate| c.alpha != Score::MATED_NOW && (searchmoves.is_empty() || searchmoves.contains(&c.uci));
    let best = tree.candidates.iter().find(allowed)?;
    let best_from_root = tree.candidates.iter().filter(allowed).map(|c| c.alpha_from_root).max()?;
    let software = u32::from(tree.settled_depth.unwrap_or(0));
    Some(TreeAnswer {
        best: best.uci,
        score: best.alpha,
        score_from_root: best.alpha_from_root,
        best_from_root,
        pv: best.pv.clone(),
        combined_depth: software + u32::from(tree.engine_depth),
        software_depth: software,
        nodes: tree.nodes,
    })
}

/// Stores the game's moves as edges (a placeholder score until analysed), so that the tree knows the game's
/// positions and repetitions of them. Called once the GUI has its move (or before growth, where no clock runs).
pub fn store_game_line(shared: &Shared, line: &Line) {
    let Some(store) = &shared.store else { return };
    let Ok(view) = store.read() else { return };
    let mut changes = Vec::new();
    for (pos, uci) in line.positions.iter().zip(&line.moves) {
        let key = PositionKey::of(pos);
        if view.node(key).ok().flatten().is_some_and(|n| n.edge(uci).is_some()) {
            continue;
        }
        let mut node = Node::new(PackedPosition::of(pos));
        let mut edge = Edge::new(*uci, Score::MATED_NOW, Bound::Upper, 0);
        edge.imported = true;
        node.edges.push(edge);
        if let Ok(change) = Change::merge(pos, node) {
            changes.push(change);
        }
    }
    drop(view);
    if !changes.is_empty()
        && let Err(e) = store.writer().submit(changes).wait()
    {
        log::warn!("the game's moves were not stored: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_yardstick_is_the_limit_the_gui_set() {
        let model = DepthModel::default();
        let depth = |go: Go| expected_depth(&go, &Chess::default(), &model, 18).0;
        assert_eq!(depth(Go { depth: Some(9), ..Go::default() }), 9.0);
        assert_eq!(depth(Go::default()), 18.0, "no limit: the engine depth");
        assert_eq!(depth(Go { mate: Some(3), ..Go::default() }), f64::INFINITY);
        assert!(
            depth(Go { nodes: Some(1_000_000), ..Go::default() }) > depth(Go { nodes: Some(10_000), ..Go::default() })
        );
        let fast = Go { wtime: Some(1000), btime: Some(1000), winc: Some(10), binc: Some(10), ..Go::default() };
        let slow =
            Go { wtime: Some(600_000), btime: Some(600_000), winc: Some(5000), binc: Some(5000), ..Go::default() };
        assert!(depth(slow.clone()) > depth(fast.clone()) + 5.0);
        // Only a clock or a movetime is the clock's estimate (what TreeDepthMargin may lower).
        let timed = |go: Go| expected_depth(&go, &Chess::default(), &model, 18).1;
        assert!(timed(fast.clone()) && timed(slow) && timed(Go { movetime: Some(100), ..Go::default() }));
        assert!(!timed(Go { depth: Some(9), ..fast.clone() }) && !timed(Go { nodes: Some(10_000), ..fast }));
        assert!(!timed(Go::default()) && !timed(Go { mate: Some(3), ..Go::default() }));
    }
}
