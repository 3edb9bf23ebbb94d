//! Tree growth from the UCI face: `go infinite`, `go ponder`, `ThinkMode tree`'s growth for one move ([`grow_for_move`])
//! and background analysis when idle.
//!
//! Growth runs the one growth loop of `search::growth` on the session's position (a seed deepened itself), with the
//! single-threaded workers of the pool (as many as `Threads`) as its one group; the
//! direct engine rests meanwhile, so deeptree never uses more threads than the GUI gave it. The session lends the
//! pool to one growth at a time and gets it back with the search's answer (or when background growth ends).

use crate::game::Line;
use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use crossbeam_channel::bounded;
use shakmaty::{Position, uci::UciMove};

use super::{
    answer::{Outcome, answer_of},
    command::Go,
    control::{Context, Control, Woke},
    depth::{DepthModel, Phase},
    message::{Info, Note},
    time::share,
};
use crate::{
    engine::{EngineConfig, EngineError, EnginePool},
    notation::{canonical, in_notation, legal_line},
    score::{Bound, Score},
    search::{
        analysis::{AnalysisError, Params},
        evaluator::PoolEvaluator,
        growth::{self, Policy, Seed, grow},
        tree::{self, TreeView},
    },
    store::{ReadView, Store, key::PositionKey},
};

/// The tree's workers, with the configurations they were started with (replaced when those change).
pub struct TreePool {
    configs: Vec<EngineConfig>,
    evaluator: PoolEvaluator,
}

impl TreePool {
    /// Starts the workers where there are none, or replaces those started with other options (a new `Threads`,
    /// Chess960 on or off); leaves running ones alone.
    pub fn ensure(pool: &mut Option<TreePool>, configs: &[EngineConfig]) -> Result<(), EngineError> {
        if pool.as_ref().is_some_and(|p| p.configs != configs) {
            *pool = None;
        }
        if pool.is_none() {
            let workers = EnginePool::start(configs.to_vec())?;
            *pool = Some(TreePool { configs: configs.to_vec(), evaluator: PoolEvaluator::new(workers) });
        }
        Ok(())
    }
}

/// How long after the `go` the first report comes, and how often the next ones.
const FIRST_REPORT: Duration = Duration::from_millis(300);
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// How a growth runs: its search's parameters (a time budget among them, for a timed `go`), what ends it besides
/// `stop`, and whether it reports.
pub struct Growth {
    pub params: Params,
    /// `ponderhit` ends it too (`go ponder`).
    pub until_ponderhit: bool,
    /// `info` lines as the tree grows (a search the GUI sees; background growth stays silent).
    pub reporting: bool,
    /// The moves the GUI allowed (`go ... searchmoves`; all when empty): the only ones the lines show.
    pub searchmoves: Vec<UciMove>,
}

/// What a growth did: the searches answered and the nodes the engines searched for them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grown {
    pub evaluations: u64,
    pub nodes: u64,
    /// The growth ended before the GUI ended it (everything settled, its time budget spent, nothing to grow): its
    /// last state has not been reported (see [`report`]).
    pub ended_alone: bool,
    /// The tree cannot grow: no store, growth paused after a failed write (before this growth, or by a write of it
    /// before the GUI ended it), or no engines.
    pub unable: bool,
}

/// Grows the tree rooted at the line's position with the single-threaded workers until `stop` (or, with
/// `until_ponderhit`, `ponderhit`, or the time budget of its parameters), reporting `info` lines as it grows when
/// `reporting`. Returns what it did; at once where there is nothing to grow (no store, no engines): the caller
/// waits for the GUI where it must. The tree as the growth leaves it is not reported here: the answer that follows
/// writes it as its final batch ([`grown_answer`]), and a caller that waits for the GUI first may [`report`] it.
pub fn grow_tree(
    ctx: &Context,
    pool: &mut Option<TreePool>,
    line: &Line,
    control: &mut Control,
    growth: Growth,
) -> Grown {
    let Growth { params, until_ponderhit, reporting, searchmoves } = growth;
    let nothing = Grown { ended_alone: true, unable: true, ..Grown::default() };
    let Some(store) = ctx.store.clone() else { return nothing };
    if ctx.growth_paused() {
        return nothing;
    }
    if let Err(e) = TreePool::ensure(pool, &ctx.config_tree) {
        ctx.out.error(format!("inner engines unavailable: {e}"));
        return nothing;
    }
    let Some(TreePool { evaluator, .. }) = pool.as_mut() else { return nothing };
    // `stop` reaches the searches at once, not at the scheduler's next look at its budget.
    let waker = evaluator.waker();
    // The engines' own count as they report it: the batches' `nodes` move as the engines search, not only when a
    // search ends.
    let searched = evaluator.searched_nodes();
    let searched_before = searched.load(Ordering::Relaxed);
    let searched_now = move || searched.load(Ordering::Relaxed).saturating_sub(searched_before);
    let ended = |control: &mut Control| if until_ponderhit { control.released() } else { control.stopped() };
    if ended(control) {
        return Grown::default();
    }
    let analysis_stop = Arc::new(AtomicBool::new(false));
    let (done, finished) = bounded::<()>(0);
    let started = control.received;
    // The session's position is a seed of growth, deepened itself to the growth's deepest software depth: the one
    // loop of `search::growth`, with the session's workers as its one group.
    let target = u32::from(params.engine_depth) + u32::from(params.max_depth);
    let mut run =
        growth::Growth::new(vec![Seed::root(line.clone(), "the session's position")], Policy::new(target, params));
    run.look_ahead = ctx.options.look_ahead();
    run.stop = analysis_stop.clone();
    // The session stores the game's moves itself; the engine time goes to the position.
    run.line_edges = false;
    std::thread::scope(|scope| {
        let store = &store;
        // The listener: turns stop (or ponderhit) into the growth's stop, and reports the tree while it grows.
        let listener_stop = analysis_stop.clone();
        let listener_nodes = searched_now.clone();
        let listener = scope.spawn(move || {
            let mut next_report = Instant::now() + FIRST_REPORT;
            loop {
                match control.wait(&finished, next_report) {
                    // The tree as the search leaves it is the answer's final batch, written with its `bestmove`.
                    Woke::Done => return true,
                    Woke::Signal if ended(control) => {
                        listener_stop.store(true, Ordering::SeqCst);
                        waker.wake();
                        // The growth ends its searches; the answer's batch comes once it has ended.
                        let _ = finished.recv();
                        return false;
                    }
                    Woke::Signal => {}
                    Woke::Deadline => {
                        // Searches report as the tree grows; background growth stays silent.
                        if reporting {
                            report(ctx, store, line, &searchmoves, started, listener_nodes());
                        }
                        next_report = Instant::now() + REPORT_EVERY;
                    }
                }
            }
        });
        let (evaluations, paused) = match grow(store, vec![&mut *evaluator], run, |_| {}, |_, _| {}) {
            Ok(report) => (report.evaluations, false),
            // The store's disk failed in this growth: said once, as growth pauses.
            Err(AnalysisError::Store(e)) if e.stops_writes() => {
                ctx.growth_paused();
                (0, true)
            }
            // A damaged tree is told once per session; the search's answer comes from a direct search.
            Err(AnalysisError::Store(e)) => {
                super::answer::tree_unreadable(ctx, &e);
                (0, false)
            }
            Err(e) => {
                ctx.out.error(format!("tree search: {e}"));
                (0, false)
            }
        };
        // The growth ended (stopped, out of time, or everything settled): the listener ends too.
        drop(done);
        // A listener that panicked heard no signal: the growth is taken to have ended alone.
        let ended_alone = listener.join().unwrap_or(true);
        // A growth that paused before the GUI ended it cannot go on: the caller treats the tree as one that cannot
        // grow (`go infinite` goes to the direct engine, whose lines the GUI then sees until its `stop`).
        Grown { evaluations, nodes: searched_now(), ended_alone, unable: paused && ended_alone }
    })
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

/// What `ThinkMode tree`'s growth for one move came to ([`grow_for_move`]).
pub enum MoveGrowth {
    /// Nothing grown: the store takes no more writes, or the `go` gives the move no time share.
    NotGrown,
    /// The tree's move after the growth (`None` where nothing was valued at the deadline), and the note of the
    /// searches answered, which the move's batch of `info` lines carries.
    Grown { answer: Option<Box<Outcome>>, note: Info },
}

/// `ThinkMode tree`: the tree is grown from the game's position for the move's time share (what the direct engine
/// would spend, by the depth model), with all the tree's workers, reporting as `go infinite` does; its best move by
/// alpha, with the game's history, is the answer. What one move grew stays in the store for the next; the search's
/// evaluations merge into the stored ones as every analysis' do (a deeper evaluation is never replaced by a
/// shallower one). Where nothing is valued at the deadline, the answer is `None` (the policy then has a depth-1 search
/// of the direct engine answer, and says so).
pub fn grow_for_move(
    ctx: &Context,
    pool: &mut Option<TreePool>,
    line: &Line,
    go: &Go,
    searchmoves: &[UciMove],
    control: &mut Control,
) -> MoveGrowth {
    let root = line.root();
    // A store whose disk failed cannot grow (said once): the move is the direct engine's, with its whole share.
    let paused = ctx.growth_paused();
    let Some(share) = share(go, root.turn().is_white()).filter(|_| !paused) else { return MoveGrowth::NotGrown };
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
    let grown = grow_tree(ctx, pool, line, control, growth);
    let note = Info::string(format!("think tree: {} searches answered", grown.evaluations));
    let answer = grown_answer(ctx, line, searchmoves, control.received, grown, vec![note.clone()]).map(Box::new);
    MoveGrowth::Grown { answer, note }
}

/// Writes the tree's batch of `info` lines for the growth's root now: its candidate moves (MultiPV) with the nodes
/// the growth searched.
pub fn report(ctx: &Context, store: &Store, line: &Line, searchmoves: &[UciMove], started: Instant, nodes: u64) {
    let Ok(view) = store.read() else { return };
    let Ok(Some(tree)) = tree::view(&view, line.root(), &line.history_keys()) else { return };
    for info in tree_infos(&view, &tree, line, ctx, searchmoves, Batch { started, nodes, last: false }) {
        ctx.out.send(info);
    }
}

/// The answer after a growth: the tree's move, written after the final batch of `info` lines (`notes` first), the
/// tree as the growth left it, read from the same view as the move, so that its line 1 is the `bestmove` (issue
/// 29: the GUI's last lines before `bestmove` carry `multipv`, as every batch did). `None` where the tree has no
/// move for the root (nothing valued, no store); a tree that cannot be read is said once, as [`tree_answer`] does.
///
/// [`tree_answer`]: super::answer::tree_answer
pub fn grown_answer(
    ctx: &Context,
    line: &Line,
    searchmoves: &[UciMove],
    started: Instant,
    grown: Grown,
    notes: Vec<Info>,
) -> Option<Outcome> {
    let store = ctx.store.as_ref()?;
    let read = || -> Result<Option<Outcome>, crate::store::StoreError> {
        let view = store.read()?;
        if view.node(PositionKey::of(line.root()))?.and_then(|node| node.eval).is_none() {
            return Ok(None);
        }
        let Some(tree) = tree::view(&view, line.root(), &line.history_keys())? else { return Ok(None) };
        let Some(answer) = answer_of(&tree, searchmoves) else { return Ok(None) };
        // The count of the growth's batches; the stored evaluation's where nothing grew.
        let nodes = if grown.nodes == 0 { tree.nodes } else { grown.nodes };
        let mut infos = notes;
        infos.extend(tree_infos(&view, &tree, line, ctx, searchmoves, Batch { started, nodes, last: true }));
        Ok(Some(answer.with_searched_nodes(nodes).outcome_after(ctx, line, infos)))
    };
    read().unwrap_or_else(|e| {
        super::answer::tree_unreadable(ctx, &e);
        None
    })
}

/// A batch of the tree's `info` lines: since when the search runs, the nodes the engines searched for this growth so
/// far, and whether it is the last, right before `bestmove`.
struct Batch {
    started: Instant,
    nodes: u64,
    last: bool,
}

/// `info` lines for the tree's candidate moves (MultiPV), after their idea scores in an `info string`; `nodes` are
/// those the engines searched for this growth so far (see [`Batch`]).
fn tree_infos(
    view: &ReadView<'_>,
    tree: &TreeView,
    line: &Line,
    ctx: &Context,
    searchmoves: &[UciMove],
    batch: Batch,
) -> Vec<Info> {
    let Batch { started, nodes, last } = batch;
    let depth = u32::from(tree.settled_depth.unwrap_or(0)) + u32::from(tree.engine_depth);
    let mut infos = Vec::new();
    let mut ideas = Vec::new();
    let wanted = ctx.options.multipv.max(1) as usize;
    // Moves nothing has valued yet (the placeholder score) are not shown with a score of their own.
    let allowed = |uci: &UciMove| searchmoves.is_empty() || searchmoves.contains(uci);
    let valued: Vec<_> = tree.candidates.iter().filter(|c| c.alpha.is_valued() && allowed(&c.uci)).collect();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let line_info = |k: usize, score: (Score, Bound), pv: Vec<UciMove>| Info {
        depth: Some(depth),
        multipv: Some(k as u32 + 1),
        score: Some(score),
        nodes: Some(nodes),
        nps: (elapsed_ms > 0).then(|| nodes.saturating_mul(1000) / elapsed_ms),
        time_ms: Some(elapsed_ms),
        pv,
        ..Info::default()
    };
    for candidate in valued.iter().take(wanted) {
        let pv = legal_line(line.root(), &candidate.pv, ctx.chess960);
        let Some(first) = pv.first().copied() else { continue };
        infos.push(line_info(infos.len(), (candidate.alpha, Bound::Exact), pv));
        ideas.push(format!("{first} {}", candidate.idea));
    }
    // A GUI waits for lines 1 to min(MultiPV, legal moves) at one depth: the moves the tree has not valued fill the
    // rest, each with the root's own evaluation as an upper bound (the engine's search of the position found no
    // move better than its best: a bound that holds at that search's depth, where the valued moves' deeper or
    // transposed scores need not).
    let root_eval = view.node(PositionKey::of(line.root())).ok().flatten().and_then(|n| n.eval);
    if let Some(bound) = root_eval.map(|e| e.score).filter(|_| !valued.is_empty()) {
        let shown: Vec<UciMove> = valued.iter().map(|c| c.uci).collect();
        for m in line.root().legal_moves() {
            if infos.len() >= wanted {
                break;
            }
            let uci = canonical(m);
            if shown.contains(&uci) || !allowed(&uci) {
                continue;
            }
            infos.push(line_info(infos.len(), (bound, Bound::Upper), vec![in_notation(m, ctx.chess960)]));
        }
    }
    if !ctx.options.show_tree_info {
        return infos;
    }
    // The idea scores come first: the batch's numbered lines are the last before a `bestmove` that follows it. Each
    // note only where its text changed, at most once a second (`InfoOut::note`); in the `last` batch, before
    // `bestmove`, whenever it changed, so that the GUI's last note agrees with the move.
    let note = |kind, text| if last { ctx.out.final_note(kind, text) } else { ctx.out.note(kind, text) };
    if !ideas.is_empty()
        && let Some(note) = note(Note::Ideas, format!("idea {}", ideas.join(", ")))
    {
        infos.insert(0, note);
    }
    // Before them, the tree's main line and how deep it is settled, in words a person reads in the GUI's output.
    if let Some(best) = valued.first() {
        let text = format!(
            "tree main line {} (settled depth {}, engine depth {})",
            crate::game::san_line(line.root(), &best.pv),
            tree.settled_depth.map_or("-".to_owned(), |d| d.to_string()),
            tree.engine_depth
        );
        if let Some(note) = note(Note::MainLine, text) {
            infos.insert(0, note);
        }
    }
    infos
}
