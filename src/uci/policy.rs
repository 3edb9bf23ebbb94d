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
    growth::{Growth, MoveGrowth, TreePool, grow_for_move, grow_tree, grown_answer, report},
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
    let root = line.root().clone();
    if root.legal_moves().is_empty() {
        // Mated, or stalemated: from the side to move's point of view, a loss now or a draw.
        let score = if root.is_check() { Score::MATED_NOW } else { Score::cp(0) };
        ctx.out.send(Info { depth: Some(0), score: Some((score, Bound::Exact)), ..Info::default() });
        if go.infinite || go.ponder {
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
    let decision = decide(ctx, line, go, &searchmoves, control.received);
    carry_out(ctx, lent, line, go, &searchmoves, control, decision)
}

/// What a `go` does. It is decided here alone ([`decide`], [`decide_move`]); [`carry_out`] hands it to the executors
/// below this module, which decide nothing of it: `answer` (the tree's move), `direct` (the direct engine), `growth`
/// (the tree grown, for the GUI or for one move).
enum Decision {
    /// The tree's move, played at once: it knows the position at least as deep as this move's search would see.
    TreeMove(Box<(Outcome, Aftermath)>),
    /// The direct engine searches (or ponders on a clock), exactly as the bare engine would; the `info string` to
    /// send first, where there is one.
    Relay(Option<&'static str>),
    /// `go infinite`, or `go ponder` where the tree would answer after `ponderhit`: the tree grows until the GUI
    /// ends it.
    Grow,
    /// `ThinkMode tree` on a clock: the tree's own search for the move's time share.
    ThinkTree,
}

/// The `go` decision: grow where the GUI releases the engine only by `stop` or `ponderhit` (unless a direct ponder
/// serves the move better); else a move to play now ([`decide_move`]).
fn decide(ctx: &Context, line: &Line, go: &Go, searchmoves: &[UciMove], received: Instant) -> Decision {
    if go.infinite || go.ponder {
        // A position the tree would not answer: the direct engine ponders on it, as the bare engine would, and
        // `ponderhit` (or `stop`) reaches it through the control. Growing the tree here instead would cost the move
        // the engine's pondering.
        return if relays_ponder(ctx, line, go, searchmoves) { Decision::Relay(None) } else { Decision::Grow };
    }
    decide_move(ctx, line, go, searchmoves, received)
}

/// The decision for a move to play now (a `go` with a clock or limits, or a ponder that `ponderhit` turned into
/// one): the tree's move where it knows more than the search would find; else the direct engine, or the tree's own
/// search where `ThinkMode tree` asks for it.
fn decide_move(ctx: &Context, line: &Line, go: &Go, searchmoves: &[UciMove], received: Instant) -> Decision {
    let expected = expected_here(ctx, line, go);
    if let Some((outcome, aftermath)) = tree_move(ctx, line, expected, searchmoves, received) {
        return Decision::TreeMove(Box::new((outcome, aftermath)));
    }
    let (_, timed) = expected;
    match ctx.options.config.think_mode {
        ThinkMode::Tree if timed => Decision::ThinkTree,
        ThinkMode::Auto if timed => Decision::Relay(Some(
            "think mode auto: direct (docs/duel.md names no budget at which the tree's own search wins)",
        )),
        _ => Decision::Relay(None),
    }
}

/// Carries out the decision with the engines the search borrowed: its one outcome, and what is stored after.
fn carry_out(
    ctx: &Context,
    lent: &mut Lent,
    line: &Line,
    go: &Go,
    searchmoves: &[UciMove],
    control: &mut Control,
    decision: Decision,
) -> (Outcome, Aftermath) {
    match decision {
        Decision::TreeMove(answer) => *answer,
        Decision::Relay(note) => {
            if let Some(note) = note {
                ctx.out.send(Info::string(note));
            }
            direct(ctx, &mut lent.direct, line, go, searchmoves, control)
        }
        Decision::Grow => grow_until_told(ctx, lent, line, go, searchmoves, control),
        Decision::ThinkTree => match grow_for_move(ctx, &mut lent.pool, line, go, searchmoves, control) {
            // No growth (the store takes no writes, or no time share): the direct engine's move, with its whole share.
            MoveGrowth::NotGrown => direct(ctx, &mut lent.direct, line, go, searchmoves, control),
            MoveGrowth::Grown { answer: Some(outcome), .. } => (*outcome, Aftermath::NONE),
            MoveGrowth::Grown { answer: None, note } => {
                ctx.out.send(note);
                ctx.out.send(Info::string("think tree: nothing valued at the deadline; fallback: a depth-1 search"));
                let (mut outcome, aftermath) = quick_direct(ctx, lent, line, searchmoves, control);
                outcome.tree_fallback = true;
                (outcome, aftermath)
            }
        },
    }
}

/// `go infinite` or `go ponder` where the tree grows: it grows around the position, reporting as it grows, until
/// `stop` (or `ponderhit`); then the tree's move, or after `ponderhit` the move decided as any timed `go`'s.
fn grow_until_told(
    ctx: &Context,
    lent: &mut Lent,
    line: &Line,
    go: &Go,
    searchmoves: &[UciMove],
    control: &mut Control,
) -> (Outcome, Aftermath) {
    let started = control.received;
    // No clock runs yet: the game's moves are stored first, so the tree knows its repetitions.
    super::answer::store_game_line(ctx, line);
    // Grow the tree around the position, reporting as it grows, until stop (or ponderhit); then wait for the GUI
    // where growth ended on its own (everything settled, or nothing to grow).
    let growth = Growth {
        params: ctx.options.analysis_params(),
        until_ponderhit: go.ponder,
        reporting: true,
        searchmoves: searchmoves.to_vec(),
    };
    let grown = grow_tree(ctx, &mut lent.pool, line, control, growth);
    // The tree cannot grow here (no store, growth paused after a failed write, no engines): `go infinite` is the
    // direct engine's, as the bare engine would run it, so that the GUI still sees lines until its `stop`.
    // (Not with `searchmoves`: an engine that ignores them cannot share an endless search out among the moves.)
    if grown.unable && go.infinite && !go.ponder && searchmoves.is_empty() {
        return direct(ctx, &mut lent.direct, line, go, searchmoves, control);
    }
    // Growth ended before the GUI ended it (everything settled): the GUI sees the tree as it stays while it waits.
    if grown.ended_alone
        && let Some(store) = &ctx.store
    {
        report(ctx, store, line, searchmoves, started, grown.nodes);
    }
    control.wait_until_told(go.ponder);
    if go.ponder && control.ponderhit() {
        // The opponent played the expected move: the clock runs now, and the move is decided as any timed `go`'s.
        // The GUI's node count goes on from the growth's.
        // (`infinite` too: a `go ponder infinite` with a clock is a timed `go` once its ponder is hit.)
        let timed = Go { ponder: false, infinite: false, ..go.clone() };
        control.received = Instant::now();
        ctx.out.count_from(grown.nodes);
        let decision = decide_move(ctx, line, &timed, searchmoves, control.received);
        return carry_out(ctx, lent, line, &timed, searchmoves, control, decision);
    }
    // After stop: answer with the tree's best move after the final batch (or, if it has none, a quick direct search).
    if let Some(outcome) = grown_answer(ctx, line, searchmoves, started, grown, Vec::new()) {
        return (outcome, Aftermath::NONE);
    }
    quick_direct(ctx, lent, line, searchmoves, control)
}

/// The direct engine's depth-1 search: the move where the time is spent and the tree has none. The GUI's signals are
/// spent too (its `stop` came, or its deadline passed): the quick search hears none.
fn quick_direct(
    ctx: &Context,
    lent: &mut Lent,
    line: &Line,
    searchmoves: &[UciMove],
    control: &mut Control,
) -> (Outcome, Aftermath) {
    let quick = Go { depth: Some(1), ..Go::default() };
    direct(ctx, &mut lent.direct, line, &quick, searchmoves, &mut control.quiet())
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

/// Whether a `go ponder` of a game (a clock, with or without a depth or node limit of the GUI's beside it, no
/// analysis) goes to the direct engine as `go ponder`: where, after `ponderhit`, the move would come from a direct
/// search (ThinkMode direct or auto, and the tree does not know the position deeply enough to answer). Elsewhere the
/// ponder time grows the tree.
fn relays_ponder(ctx: &Context, line: &Line, go: &Go, searchmoves: &[UciMove]) -> bool {
    // The direct engine would be asked to ponder on a clock (its depth or nodes, if any, beside it).
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
    let phase = Phase::of(position);
    // The GUI's own limits: the shallower of a depth and the model's depth for a node count.
    let own = [go.depth.map(|depth| depth as f64), go.nodes.map(|nodes| model.depth_for_nodes(phase, nodes))]
        .into_iter()
        .flatten()
        .reduce(f64::min);
    let clock = match share(go, position.turn().is_white()) {
        Some(share) if go.movetime.is_some() => Some(model.depth_for_time(phase, share)),
        Some(share) => Some(model.depth_for_time(phase, model.expected_time(share))),
        None => None,
    };
    match (own, clock) {
        // Both: the engine ends at whichever comes first; the clock's estimate is the budget where it is the shallower.
        (Some(own), Some(clock)) if clock < own => (clock, true),
        (Some(own), _) => (own, false),
        // A mate search is the engine's job.
        (None, _) if go.mate.is_some() => (f64::INFINITY, false),
        (None, Some(clock)) => (clock, true),
        (None, None) => (f64::from(engine_depth), false),
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
        assert!(!timed(Go { depth: Some(9), ..fast.clone() }) && !timed(Go { nodes: Some(10_000), ..fast.clone() }));
        assert!(!timed(Go::default()) && !timed(Go { mate: Some(3), ..Go::default() }));
        // A clock beside a limit of the GUI's: the shallower is the budget (the engine ends at whichever comes first).
        let deep = Go { depth: Some(40), ..fast.clone() };
        assert_eq!(depth(deep.clone()), depth(fast.clone()));
        assert!(timed(deep));
        assert_eq!(depth(Go { depth: Some(3), ..fast.clone() }), 3.0);
    }
}
