//! The `go` policy: the tree's move when it knows more than a search would find, else the direct engine's
//! (docs/design.md §7.1).
//!
//! A tree move is played at once only when the tree's combined depth at the root (the engine depth of the root's
//! evaluation plus the software depth settled below it, as the `info` line shows) is at least the depth the inner
//! engine would reach in this move's budget ([`super::depth::DepthModel`], fitted to this game's direct searches),
//! less the `TreeDepthMargin` option's plies when the budget is a clock or a `movetime` (0 by default).
//! Below an analysed root, where no settled depth is stored, the depth the root's passes settled is found by walking
//! the stored graph ([`known_deep_enough`]).
//! Otherwise the direct engine searches, exactly as the bare engine would. `go infinite` and `go ponder` grow the
//! tree instead (see `growth`).

use crate::game::Line;
use std::time::Instant;

use shakmaty::{Chess, Position, uci::UciMove};

use super::{
    answer::{Outcome, TreeAnswer, tree_answer},
    command::Go,
    control::{Context, Control},
    depth::{DepthModel, Phase},
    direct::{Aftermath, DirectSlot, direct, limit_of},
    growth::{Growth, TreePool, grow_tree, grown_answer, report},
    message::Info,
    time::share,
};
use crate::{
    config::ThinkMode,
    engine::Limit,
    notation::canonical_uci,
    score::{Bound, Score},
    search::analysis::{MAX_CHECKED_DEPTH, SettledInStore, settles_narrowed},
    store::{key::PositionKey, node::Edge},
};

/// The engines a search borrows from the session, handed back with its answer.
pub struct Lent {
    pub direct: DirectSlot,
    pub pool: Option<TreePool>,
}

/// A search's work for one `go`: its one outcome (which the session writes), and what it stores after.
pub fn think(ctx: &Context, lent: &mut Lent, line: &Line, go: &Go, control: &mut Control) -> (Outcome, Aftermath) {
    let started = control.received;
    let root = line.root().clone();
    let released_only = go.infinite || go.ponder;
    if root.legal_moves().is_empty() {
        // Mated, or stalemated: from the side to move's point of view, a loss now or a draw.
        let score = if root.is_check() { Score::MATED_NOW } else { Score::cp(0) };
        ctx.out.send(Info { depth: Some(0), score: Some((score, Bound::Exact)), ..Info::default() });
        if released_only {
            control.wait_until_told(go.ponder);
        }
        return (Outcome::no_move(Vec::new()), Aftermath::NONE);
    }
    // In stored form, whichever castling notation the GUI used.
    let searchmoves: Vec<UciMove> =
        go.searchmoves.iter().filter_map(|m| canonical_uci(&root, &m.parse::<UciMove>().ok()?)).collect();
    if go.searchmoves.len() != searchmoves.len() {
        ctx.out.error("go searchmoves: some moves are not legal here and were left out");
    }
    let searchmoves = without_excluded(ctx, &root, searchmoves);
    if !released_only {
        return play(ctx, lent, line, go, &searchmoves, control);
    }
    if relays_ponder(ctx, line, go, &searchmoves) {
        // A position the tree would not answer: the direct engine ponders on it, as the bare engine would, and
        // `ponderhit` (or `stop`) reaches it through the control. Growing the tree here instead would cost the move
        // the engine's pondering.
        return direct(ctx, &mut lent.direct, line, go, &searchmoves, control);
    }
    // No clock runs yet: the game's moves are stored first, so the tree knows its repetitions.
    super::answer::store_game_line(ctx, line);
    // Grow the tree around the position, reporting as it grows, until stop (or ponderhit); then wait for the GUI
    // where growth ended on its own (everything settled, or nothing to grow).
    let growth = Growth {
        params: ctx.options.analysis_params(),
        until_ponderhit: go.ponder,
        reporting: true,
        searchmoves: searchmoves.clone(),
    };
    let grown = grow_tree(ctx, &mut lent.pool, line, control, growth);
    // Growth ended before the GUI ended it (everything settled): the GUI sees the tree as it stays while it waits.
    if grown.ended_alone
        && let Some(store) = &ctx.store
    {
        report(ctx, store, line, &searchmoves, started, grown.nodes);
    }
    control.wait_until_told(go.ponder);
    if go.ponder && control.ponderhit() {
        // The opponent played the expected move: the clock runs now. The GUI's node count goes on from the growth's.
        let timed = Go { ponder: false, ..go.clone() };
        control.received = Instant::now();
        ctx.out.count_from(grown.nodes);
        return play(ctx, lent, line, &timed, &searchmoves, control);
    }
    // After stop: answer with the tree's best move after the final batch (or, if it has none, a quick direct search).
    if let Some(outcome) = grown_answer(ctx, line, &searchmoves, started, grown, Vec::new()) {
        return (outcome, Aftermath::NONE);
    }
    // The GUI's stop is spent: the quick search hears no more signals.
    let quick = Go { depth: Some(1), ..Go::default() };
    direct(ctx, &mut lent.direct, line, &quick, &searchmoves, &mut control.quiet())
}

/// `searchmoves` (every legal move when empty) less the moves the analyst excluded at `root` (see
/// [`crate::store::marks`]): no search, of the tree or of the direct engine, considers them. Moves the GUI named are
/// kept when every one of them is excluded: the GUI's word is the last.
fn without_excluded(ctx: &Context, root: &Chess, searchmoves: Vec<UciMove>) -> Vec<UciMove> {
    let Some(store) = &ctx.store else { return searchmoves };
    let record = store.read().and_then(|view| view.node(PositionKey::of(root)));
    let node = match record {
        Ok(Some(node)) if node.edges.iter().any(Edge::is_excluded) => node,
        Ok(_) => return searchmoves,
        Err(e) => {
            log::warn!("the analyst's marks could not be read: {e}");
            return searchmoves;
        }
    };
    let searchable = crate::store::marks::searchable_moves(root, Some(&node));
    let allowed: Vec<UciMove> = if searchmoves.is_empty() {
        searchable
    } else {
        searchmoves.iter().filter(|m| searchable.contains(m)).copied().collect()
    };
    if allowed.is_empty() { searchmoves } else { allowed }
}

/// Whether a `go ponder` of a game (a clock, no depth or node limit of the GUI's, no analysis) goes to the direct
/// engine as `go ponder`: where, after `ponderhit`, the move would come from a direct search (ThinkMode direct or
/// auto, and the tree does not know the position deeply enough to answer). Elsewhere the ponder time grows the tree.
fn relays_ponder(ctx: &Context, line: &Line, go: &Go, searchmoves: &[UciMove]) -> bool {
    // The direct engine would be asked to ponder on a clock: no depth, nodes or movetime of the GUI's.
    matches!(limit_of(go, ctx.options.config.engine_depth), Limit::PonderClock { .. })
        && go.mate.is_none()
        && searchmoves.is_empty()
        && !ctx.options.analyse_mode
        && ctx.options.config.think_mode != ThinkMode::Tree
        && tree_move(ctx, line, expected_here(ctx, line, go), searchmoves, Instant::now()).is_none()
}

/// The depth a search of `go`'s budget is expected to reach at `line`'s root, and whether that budget is `timed`: a
/// clock or a `movetime` (no depth, nodes or mate the GUI set), what TreeDepthMargin lowers and what ThinkMode may
/// spend on the tree.
fn expected_here(ctx: &Context, line: &Line, go: &Go) -> (f64, bool) {
    expected_depth(go, line.root(), &ctx.depth_model, ctx.options.config.engine_depth)
}

/// The tree's move where it knows more than a search would find (`expected` deep, `timed` as [`expected_here`] says;
/// less the margin the user allows), and the game's history does not change its verdict; `None` in analysis mode.
fn tree_move(
    ctx: &Context,
    line: &Line,
    (expected, timed): (f64, bool),
    searchmoves: &[UciMove],
    received: Instant,
) -> Option<(Outcome, Aftermath)> {
    if !ctx.options.analyse_mode {
        // The margin the user allows lowers the estimate for a clock or `movetime`, never a limit the GUI set.
        let margin = if timed { ctx.options.config.tree_depth_margin } else { 0 };
        let needed = expected - f64::from(margin);
        // The tree's word counts where it knows at least as deep as the search would see (less the margin), and where
        // the game's history does not change its verdict: a move that would repeat a position of this game scores a
        // draw in alpha, not with the root alone, and the engine, which sees the game, searches instead. Repetitions
        // inside the tree below the root count in both and do not keep the tree from answering.
        if let Some(mut answer) = tree_answer(ctx, line, searchmoves)
            && !answer.history_changes_verdict
            && (f64::from(answer.combined_depth) >= needed
                || known_deep_enough(ctx, line, searchmoves, &mut answer, needed))
        {
            let margin = if margin > 0 { format!(", margin {margin}") } else { String::new() };
            let note = Info::string(format!(
                "tree move: combined depth {} (engine {} + software {}) against {expected:.1} for a search{margin}",
                answer.combined_depth,
                answer.combined_depth - answer.software_depth,
                answer.software_depth
            ));
            return Some((answer.outcome(ctx, line, received, vec![note]), Aftermath::GAME_LINE));
        }
    }
    None
}

/// A move to play: from the tree when it knows more than a search would find, else by the direct engine.
fn play(
    ctx: &Context,
    lent: &mut Lent,
    line: &Line,
    go: &Go,
    searchmoves: &[UciMove],
    control: &mut Control,
) -> (Outcome, Aftermath) {
    let expected = expected_here(ctx, line, go);
    if let Some(answer) = tree_move(ctx, line, expected, searchmoves, control.received) {
        return answer;
    }
    let (_, timed) = expected;
    match ctx.options.config.think_mode {
        ThinkMode::Tree if timed => think_with_tree(ctx, lent, line, go, searchmoves, control),
        ThinkMode::Auto if timed => {
            ctx.out.send(Info::string(
                "think mode auto: direct (docs/duel.md names no budget at which the tree's own search wins)",
            ));
            direct(ctx, &mut lent.direct, line, go, searchmoves, control)
        }
        _ => direct(ctx, &mut lent.direct, line, go, searchmoves, control),
    }
}

/// Leaf searches a tree search of one move is planned for: the engine depth is chosen so that about this many
/// complete in the move's time share (see [`tree_engine_depth`]).
pub const PLANNED_LEAVES: f64 = 32.0;

/// The engine depth of a tree search of one move: the depth the inner engine reaches, by this game's depth model, in
/// the nodes one leaf search may spend, when `workers` single-threaded workers share the budget among
/// [`PLANNED_LEAVES`] searches. The model is fitted to the direct engine, which runs `threads` threads: one worker
/// searches `1 / threads` of its nodes a second. At least 4, at most the `EngineDepth` option.
pub fn tree_engine_depth(
    model: &DepthModel,
    phase: Phase,
    budget: std::time::Duration,
    workers: usize,
    threads: u32,
    max_depth: u8,
) -> u8 {
    let worker_nps = model.nps() / f64::from(threads.max(1));
    let leaf_nodes = budget.as_secs_f64() * workers.max(1) as f64 / PLANNED_LEAVES * worker_nps;
    let depth = model.depth_for_nodes(phase, leaf_nodes.clamp(1.0, u64::MAX as f64) as u64).floor();
    (depth as u8).clamp(4.min(max_depth), max_depth.max(1))
}

/// `ThinkMode tree`: the tree is grown from the game's position for the move's time share (what the direct engine
/// would spend, by the depth model), with all the tree's workers, reporting as `go infinite` does; then its best move
/// by alpha, with the game's history, is played. What one move grew stays in the store for the next; the search's
/// evaluations merge into the stored ones as every analysis' do (a deeper evaluation is never replaced by a
/// shallower one). Where nothing is valued at the deadline, a depth-1 search of the direct engine answers, and the
/// `info string` says so.
fn think_with_tree(
    ctx: &Context,
    lent: &mut Lent,
    line: &Line,
    go: &Go,
    searchmoves: &[UciMove],
    control: &mut Control,
) -> (Outcome, Aftermath) {
    let root = line.root();
    // A store whose disk failed cannot grow (said once): the move is the direct engine's, with its whole share.
    let paused = ctx.store.as_ref().is_some_and(|store| super::growth::growth_paused(ctx, store));
    let Some(share) = share(go, root.turn().is_white()).filter(|_| !paused) else {
        return direct(ctx, &mut lent.direct, line, go, searchmoves, control);
    };
    let budget = if go.movetime.is_some() { share } else { ctx.depth_model.expected_time(share) };
    // Whatever was spent before the search began (storing the game's moves, starting workers) counts.
    let budget = budget.saturating_sub(control.received.elapsed());
    let workers = ctx.config_tree.len();
    let depth = tree_engine_depth(
        &ctx.depth_model,
        Phase::of(root),
        budget,
        workers,
        ctx.options.threads,
        ctx.options.config.engine_depth,
    );
    // The game's moves first: the tree then knows the repetitions of this game.
    super::answer::store_game_line(ctx, line);
    ctx.out.send(Info::string(format!(
        "think tree: {:.0} ms on {workers} workers at engine depth {depth}",
        budget.as_secs_f64() * 1e3
    )));
    let params = ctx.options.analysis_params().with_engine_depth(depth).with_time(Some(budget));
    let growth = Growth { params, until_ponderhit: false, reporting: true, searchmoves: searchmoves.to_vec() };
    let grown = grow_tree(ctx, &mut lent.pool, line, control, growth);
    let note = Info::string(format!("think tree: {} searches answered", grown.evaluations));
    match grown_answer(ctx, line, searchmoves, control.received, grown, vec![note.clone()]) {
        Some(outcome) => (outcome, Aftermath::NONE),
        None => {
            ctx.out.send(note);
            ctx.out.send(Info::string("think tree: nothing valued at the deadline; fallback: a depth-1 search"));
            let quick = Go { depth: Some(1), ..Go::default() };
            let (mut outcome, aftermath) =
                direct(ctx, &mut lent.direct, line, &quick, searchmoves, &mut control.quiet());
            outcome.tree_fallback = true;
            (outcome, aftermath)
        }
    }
}

/// Whether the tree knows `line`'s root deep enough for a move in `expected` plies, though its own settled depth says
/// less: the position lies below an analysed root, whose passes evaluated the lines through it. The stored graph is
/// walked from the position as the passes of an analysis of it would walk it ([`SettledInStore`]), at the engine depth
/// of its evaluation, each software depth from 1 to the one needed (engine depth plus software depth at least
/// `expected`); when none of them would plan a search, `answer` claims the depth needed.
///
/// The move distance may be narrowed, each halving counted as one ply less ([`settles_narrowed`], the rule growth that
/// follows play counts by too). With `searchmoves` the tree's answer is the best allowed move, which the walk need
/// not have deepened: no check then.
fn known_deep_enough(
    ctx: &Context,
    line: &Line,
    searchmoves: &[UciMove],
    answer: &mut TreeAnswer,
    expected: f64,
) -> bool {
    let Some(store) = &ctx.store else { return false };
    if !expected.is_finite() || !searchmoves.is_empty() {
        return false;
    }
    let engine_depth = answer.combined_depth - answer.software_depth;
    let Ok(needed) = u8::try_from((expected.ceil() as i64 - i64::from(engine_depth)).max(0)) else { return false };
    if needed == 0 || needed > MAX_CHECKED_DEPTH {
        return false;
    }
    let Ok(view) = store.read() else { return false };
    let started = Instant::now();
    let params = ctx.options.analysis_params().with_engine_depth(u8::try_from(engine_depth).unwrap_or(u8::MAX));
    match settles_narrowed(&SettledInStore::new(&view, line), &params, needed) {
        Ok(Some(narrowing)) => {
            log::debug!(
                "tree known to software depth {} at move distance {} ({:.2} ms)",
                needed + narrowing,
                params.move_distance >> narrowing,
                started.elapsed().as_secs_f64() * 1e3
            );
            answer.software_depth = u32::from(needed);
            answer.combined_depth = engine_depth + u32::from(needed);
            true
        }
        Ok(None) => {
            log::debug!("tree not known to software depth {needed} ({:.2} ms)", started.elapsed().as_secs_f64() * 1e3);
            false
        }
        Err(e) => {
            super::answer::tree_unreadable(ctx, &e);
            false
        }
    }
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
