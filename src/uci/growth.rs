//! Tree growth from the UCI face: `go infinite`, `go ponder` and background analysis when idle.
//!
//! Growth runs the tree's own search with the single-threaded workers of the pool (as many as `Threads`); the
//! direct engine rests meanwhile, so deeptree never uses more threads than the GUI gave it. The session lends the
//! pool to one growth at a time and gets it back with the search's answer (or when background growth ends).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crossbeam_channel::bounded;
use shakmaty::{Position, uci::UciMove};

use super::{
    control::{Context, Control, Woke},
    message::Info,
};
use crate::{
    engine::{EngineConfig, EngineError, EnginePool},
    notation::{canonical, in_notation, legal_line},
    score::{Bound, Score},
    search::{
        analysis::{Analysis, AnalysisError, Line, Params},
        evaluator::PoolEvaluator,
        tree,
    },
    store::Store,
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
}

/// Grows the tree rooted at the line's position with the single-threaded workers until `stop` (or, with
/// `until_ponderhit`, `ponderhit`, or the time budget of its parameters), reporting `info` lines as it grows when
/// `reporting`. Returns what it did; at once where there is nothing to grow (no store, no engines): the caller
/// waits for the GUI where it must.
pub fn grow_tree(
    ctx: &Context,
    pool: &mut Option<TreePool>,
    line: &Line,
    control: &mut Control,
    growth: Growth,
) -> Grown {
    let Growth { params, until_ponderhit, reporting, searchmoves } = growth;
    let Some(store) = ctx.store.clone() else { return Grown::default() };
    if growth_paused(ctx, &store) {
        return Grown::default();
    }
    if let Err(e) = TreePool::ensure(pool, &ctx.config_tree) {
        ctx.out.error(format!("inner engines unavailable: {e}"));
        return Grown::default();
    }
    let Some(TreePool { evaluator, .. }) = pool.as_mut() else { return Grown::default() };
    let ended = |control: &mut Control| if until_ponderhit { control.released() } else { control.stopped() };
    if ended(control) {
        return Grown::default();
    }
    let analysis_stop = Arc::new(AtomicBool::new(false));
    let nodes = Arc::new(AtomicU64::new(0));
    let (done, finished) = bounded::<()>(0);
    let started = control.received;
    std::thread::scope(|scope| {
        // The listener: turns stop (or ponderhit) into the analysis' stop, and reports the tree while it grows.
        let listener_stop = analysis_stop.clone();
        let store = &store;
        let listener_nodes = nodes.clone();
        scope.spawn(move || {
            let mut next_report = Instant::now() + FIRST_REPORT;
            let report = || {
                if reporting {
                    let nodes = listener_nodes.load(Ordering::Relaxed);
                    for info in tree_infos(store, line, ctx, &searchmoves, started, nodes) {
                        ctx.out.send(info);
                    }
                }
            };
            loop {
                match control.wait(&finished, next_report) {
                    // The last batch shows the tree as the search leaves it: the move it answers with is line 1.
                    Woke::Done => return report(),
                    Woke::Signal if ended(control) => {
                        listener_stop.store(true, Ordering::SeqCst);
                        // The analysis ends its searches; the last batch comes once it has ended.
                        let _ = finished.recv();
                        return report();
                    }
                    Woke::Signal => {}
                    Woke::Deadline => {
                        // Searches report as the tree grows; background growth stays silent.
                        report();
                        next_report = Instant::now() + REPORT_EVERY;
                    }
                }
            }
        });
        let mut analysis = Analysis::new(store, &mut *evaluator, params);
        analysis.look_ahead = ctx.options.look_ahead();
        analysis.stop = analysis_stop.clone();
        analysis.nodes_so_far = nodes.clone();
        // The session stores the game's moves itself; the engine time goes to the position.
        analysis.line_edges = false;
        let evaluations = match analysis.run(line, |_| {}) {
            Ok(report) => report.evaluations,
            // The store's disk failed in this growth: said once, as growth pauses.
            Err(AnalysisError::Store(e)) if e.stops_writes() => {
                growth_paused(ctx, store);
                0
            }
            // A damaged tree is told once per session; the search's answer comes from a direct search.
            Err(AnalysisError::Store(e)) => {
                super::answer::tree_unreadable(ctx, &e);
                0
            }
            Err(e) => {
                ctx.out.error(format!("tree search: {e}"));
                0
            }
        };
        drop(analysis);
        // The analysis ended (stopped, out of time, or everything settled): the listener ends too.
        drop(done);
        Grown { evaluations, nodes: nodes.load(Ordering::Relaxed) }
    })
}

/// Whether the tree cannot grow because the store takes no more writes: a write failed on its disk (no space, an I/O
/// error). Growth (background analysis, `go infinite`, `ThinkMode tree`) then pauses for the rest of the session,
/// and games go on with direct searches. The first caller to find it says it, once per store, in an
/// `info string error: tree growth paused: ...` (and the log).
pub fn growth_paused(ctx: &Context, store: &Store) -> bool {
    if store.write_failure().is_none() {
        return false;
    }
    if let Some(failure) = store.write_failure_notice() {
        log::error!("tree growth paused: {failure}");
        ctx.out.error(format!("tree growth paused: {failure}"));
    }
    true
}

/// `info` lines for the tree's candidate moves (MultiPV), with their idea scores in an `info string`; `nodes` are
/// those the engines searched for this growth so far.
fn tree_infos(
    store: &Store,
    line: &Line,
    ctx: &Context,
    searchmoves: &[UciMove],
    started: Instant,
    nodes: u64,
) -> Vec<Info> {
    let Ok(view) = store.read() else { return Vec::new() };
    let Ok(Some(tree)) = tree::view(&view, line.root(), &line.history_keys()) else { return Vec::new() };
    let depth = u32::from(tree.settled_depth.unwrap_or(0)) + u32::from(tree.engine_depth);
    let mut infos = Vec::new();
    let mut ideas = Vec::new();
    let wanted = ctx.options.multipv.max(1) as usize;
    // Moves nothing has valued yet (the placeholder score) are not shown with a score of their own.
    let allowed = |uci: &UciMove| searchmoves.is_empty() || searchmoves.contains(uci);
    let valued: Vec<_> = tree.candidates.iter().filter(|c| c.alpha != Score::MATED_NOW && allowed(&c.uci)).collect();
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
    let root_eval = view.node(crate::store::key::PositionKey::of(line.root())).ok().flatten().and_then(|n| n.eval);
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
    if !ideas.is_empty() {
        infos.push(Info::string(format!("idea {}", ideas.join(", "))));
    }
    infos
}
