//! Tree growth from the UCI face: `go infinite`, `go ponder` and background analysis when idle.
//!
//! Growth runs the tree's own search with the single-threaded workers of the pool (as many as `Threads`); the
//! direct engine rests meanwhile, so deeptree never uses more threads than the GUI gave it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::{session::Shared, tree};
use crate::{
    engine::EnginePool,
    notation::legal_line,
    score::Score,
    search::{
        analysis::{Analysis, Line},
        evaluator::PoolEvaluator,
    },
    store::Store,
};

/// Sleeps until `stop` (or `until`'s flag) is set.
fn wait_for_end(stop: &AtomicBool, until: Option<&(Arc<AtomicBool>, Instant)>) {
    while !stop.load(Ordering::SeqCst) && until.is_none_or(|(p, _)| !p.load(Ordering::SeqCst)) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Grows the tree rooted at the line's position with the single-threaded workers until `stop` (or `until`
/// turns true), reporting `info` lines as it grows when `reporting`.
pub fn grow_tree(
    shared: &Shared,
    line: &Line,
    stop: &Arc<AtomicBool>,
    until: Option<(Arc<AtomicBool>, Instant)>,
    reporting: bool,
) {
    let Some(store) = shared.store.clone() else {
        // Without a store there is no tree to grow: wait for the end of the search.
        wait_for_end(stop, until.as_ref());
        return;
    };
    let mut pool = shared.pool.lock();
    // Workers started with other options (a new `Threads`, Chess960 on or off) are replaced.
    if pool.as_ref().is_some_and(|(config, _)| config != &shared.config_tree) {
        *pool = None;
    }
    if pool.is_none() {
        match EnginePool::start(shared.config_tree.clone()) {
            Ok(workers) => *pool = Some((shared.config_tree.clone(), PoolEvaluator::new(workers))),
            Err(e) => {
                shared.out.error(&format!("inner engines unavailable: {e}"));
                drop(pool);
                wait_for_end(stop, until.as_ref());
                return;
            }
        }
    }
    let Some((_, evaluator)) = pool.as_mut() else { return };
    let params = shared.options.analysis_params();
    let analysis_stop = Arc::new(AtomicBool::new(false));
    // Reporter: `info` lines from the tree while it grows; it also turns stop/ponderhit into the analysis' stop.
    let reporter = {
        let (stop, analysis_stop, out, store, line) =
            (stop.clone(), analysis_stop.clone(), shared.out.clone(), store.clone(), line.clone());
        let multipv = shared.options.multipv.max(1) as usize;
        let chess960 = shared.chess960;
        let ponderhit = until.as_ref().map(|(p, _)| p.clone());
        let started = until.as_ref().map_or_else(Instant::now, |(_, t)| *t);
        std::thread::spawn(move || {
            let mut next_report = Instant::now() + Duration::from_millis(300);
            loop {
                let ended = stop.load(Ordering::SeqCst) || ponderhit.as_ref().is_some_and(|p| p.load(Ordering::SeqCst));
                if ended || analysis_stop.load(Ordering::SeqCst) {
                    analysis_stop.store(true, Ordering::SeqCst);
                    return;
                }
                // Searches report as the tree grows; background growth stays silent.
                if reporting && Instant::now() >= next_report {
                    for text in tree_info_lines(&store, &line, multipv, started, chess960) {
                        out.send(&text);
                    }
                    next_report = Instant::now() + Duration::from_secs(1);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let mut analysis = Analysis::new(&store, &mut *evaluator, params);
    analysis.look_ahead = shared.options.look_ahead();
    analysis.stop = analysis_stop.clone();
    // The session stores the game's moves itself; the engine time goes to the position.
    analysis.line_edges = false;
    if let Err(e) = analysis.run(line, |_| {}) {
        shared.out.error(&format!("tree search: {e}"));
    }
    drop(analysis);
    // The analysis may end on its own (everything settled): wait for stop/ponderhit all the same.
    analysis_stop.store(stop.load(Ordering::SeqCst) || analysis_stop.load(Ordering::SeqCst), Ordering::SeqCst);
    while !analysis_stop.load(Ordering::SeqCst) && !reporter.is_finished() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = reporter.join();
}

/// `info` lines for the tree's candidate moves (MultiPV), with their idea scores in an `info string`.
fn tree_info_lines(store: &Store, line: &Line, multipv: usize, started: Instant, chess960: bool) -> Vec<String> {
    let Ok(view) = store.read() else { return Vec::new() };
    let Ok(Some(tree)) = tree::view(&view, line.root(), &line.history_keys()) else { return Vec::new() };
    let depth = u32::from(tree.settled_depth.unwrap_or(0)) + u32::from(tree.engine_depth);
    let mut lines = Vec::new();
    let mut ideas = Vec::new();
    // Moves nothing has valued yet (the placeholder score) are not shown: no score without a search.
    let valued = tree.candidates.iter().filter(|c| c.alpha != Score::MATED_NOW);
    for (i, candidate) in valued.take(multipv).enumerate() {
        let pv: Vec<String> =
            legal_line(line.root(), &candidate.pv, chess960).iter().map(ToString::to_string).collect();
        let Some(first) = pv.first().cloned() else { continue };
        lines.push(format!(
            "info depth {depth} multipv {} score {} nodes {} time {} pv {}",
            i + 1,
            candidate.alpha,
            tree.nodes,
            started.elapsed().as_millis(),
            pv.join(" ")
        ));
        ideas.push(format!("{first} {}", candidate.idea));
    }
    if !ideas.is_empty() {
        lines.push(format!("info string idea {}", ideas.join(", ")));
    }
    lines
}
