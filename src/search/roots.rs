//! Many roots grown together (`analyze --roots`): a book for a match's openings or a correspondence repertoire
//! (docs/design.md §6.1).
//!
//! ```
//! use std::sync::{Arc, atomic::AtomicBool};
//! use deeptree::game::Line;
//! use deeptree::search::{analysis::Params, evaluator::ScriptedEvaluator, roots::{BookRoot, grow}};
//! use deeptree::store::{Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let roots = vec![
//!     BookRoot::new(Line::parse(None, "e2e4 c7c5")?, "Sicilian"),
//!     BookRoot::new(Line::parse(None, "d2d4 d7d5")?, "Queen's pawn"),
//! ];
//! let params = Params::new(8, 20).with_max_depth(1);
//! // Two groups of engines, one scripted engine each: the two roots grow at once.
//! let engines = vec![ScriptedEvaluator::new(1, 7), ScriptedEvaluator::new(1, 7)];
//! let stop = Arc::new(AtomicBool::new(false));
//! let report = grow(&store, engines, &roots, &params, None, &stop, None, |_| {})?;
//! assert!(report.roots.iter().all(|root| root.settled_depth == Some(1)));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # The budget: by need, shallowest first
//!
//! The engines are split into groups (as many as there are roots, at most one per engine). Each group grows one root
//! at a time by one software depth: it takes the root with the shallowest settled depth (a root never analysed
//! first), ties in file order, and settles its next depth. A root is not taken more than one depth ahead of the
//! shallowest root that still has depths to settle, even if that one is being grown by another group: the tree grows
//! evenly. A root's weight (how many games reached it, for growth that follows play) lowers the depth it is ranked
//! by: a root of weight 2^k counts as k depths shallower than it is ([`priority`]), so a `--time` budget is shared by need, the roots that have settled least first, and an interrupted run
//! leaves every root within a depth or two of the others. A step runs the search of [`super::analysis`] for its root
//! with the group's engines (their searches run ahead of their turn as in a single analysis); the groups share the
//! store and its claims, so a position two roots reach is searched once.
//!
//! Every settled depth is marked in the store at its root, so a run that is stopped (`--time`, Ctrl-C) is resumed
//! by running it again: each root starts from what the store has settled.

use crate::game::Line;
use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::{Condvar, Mutex};

use crate::{
    logger::Progress,
    store::{Store, key::PositionKey},
};

use super::{
    analysis::{Analysis, AnalysisError, AnalysisOptions, Params, Report},
    evaluator::Evaluator,
};

/// A root to grow and how to name it in progress lines (`game 3`, `line 7`, an opening's name).
#[derive(Debug, Clone)]
pub struct BookRoot {
    pub line: Line,
    pub label: String,
    /// How much play reaches it (games that left the tree there; 1 for a root of a list): a root of weight 2^k may
    /// settle k depths ahead of a root of weight 1 (see [`priority`]).
    pub weight: u32,
    /// Wall time this run may spend growing it (an analyst's task's budget left); `None`: the run's budget alone.
    pub budget: Option<Duration>,
    /// The deepest software depth to settle there, when shallower than the run's.
    pub max_depth: Option<u8>,
    /// The engine depth of its searches, when not the run's: a position evaluated at another engine depth is
    /// deepened at its own (at the run's, every stored search shallower than it would be run again).
    pub engine_depth: Option<u8>,
}

impl BookRoot {
    /// A root of a list: weight 1, no budget or depth of its own.
    pub fn new(line: Line, label: impl Into<String>) -> BookRoot {
        BookRoot { line, label: label.into(), weight: 1, budget: None, max_depth: None, engine_depth: None }
    }

    /// A root of weight `weight`.
    pub fn weighted(line: Line, label: impl Into<String>, weight: u32) -> BookRoot {
        BookRoot { weight, ..BookRoot::new(line, label) }
    }
}

/// The depths a root of `weight` may settle ahead of a root of weight 1: log2 of the weight, rounded down (a root
/// that 4 games reached may run 2 depths ahead of one that a single game reached).
pub fn priority(weight: u32) -> u8 {
    weight.max(1).ilog2() as u8
}

/// Where one root stands.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RootProgress {
    /// Its place in the list of roots (from 1).
    pub root: usize,
    pub label: String,
    /// The root position.
    pub fen: String,
    /// The moves from the start position to it, in UCI notation.
    pub moves: Vec<String>,
    pub settled_depth: Option<u8>,
    /// Inner-engine searches this run answered for it (others were taken from other roots' searches).
    pub evaluations: u64,
    /// Answers taken from searches another group or process ran.
    pub shared: u64,
    /// Searches that failed (left for a later run).
    pub failed: u64,
    /// Wall time this run spent growing it.
    pub seconds: f64,
    /// A depth could not settle because searches failed: the root is left for a later run.
    pub stuck: bool,
}

impl RootProgress {
    /// A root before this run grew it: `settled_depth` is what the store says.
    fn new(root: usize, label: String, fen: String, moves: Vec<String>, settled_depth: Option<u8>) -> RootProgress {
        RootProgress {
            root,
            label,
            fen,
            moves,
            settled_depth,
            evaluations: 0,
            shared: 0,
            failed: 0,
            seconds: 0.0,
            stuck: false,
        }
    }
}

/// What a run of many roots did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BookReport {
    pub roots: Vec<RootProgress>,
    pub evaluations: u64,
    pub shared: u64,
    pub failed: u64,
    /// Positions in the store at the end.
    pub positions: u64,
    /// Groups of engines that grew roots at once.
    pub groups: usize,
    /// Stopped by the time budget or an interrupt before every root settled its last depth.
    pub stopped: bool,
    pub seconds: f64,
}

/// Which root a group grows next.
struct Schedule {
    progress: Vec<RootProgress>,
    /// Each root's weight ([`BookRoot::weight`]).
    weights: Vec<u32>,
    /// Each root's own budget and deepest depth ([`BookRoot::budget`], [`BookRoot::max_depth`]).
    limits: Vec<(Option<Duration>, Option<u8>)>,
    busy: Vec<bool>,
    stopped: bool,
    error: Option<AnalysisError>,
}

/// Counts a group down when it ends.
struct Countdown<'a>(&'a AtomicUsize);

impl Drop for Countdown<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

enum Next {
    Grow { root: usize, depth: u8 },
    Wait,
    Done,
}

impl Schedule {
    /// Roots as `progress` has them, of `weights`, none busy, with no limits of their own.
    fn new(progress: Vec<RootProgress>, weights: Vec<u32>) -> Schedule {
        let limits = vec![(None, None); progress.len()];
        Schedule { busy: vec![false; progress.len()], progress, weights, limits, stopped: false, error: None }
    }

    /// Whether root `i` may grow further: not stuck, its budget not spent, its next depth not past the run's
    /// `max_depth` nor its own.
    fn is_open(&self, i: usize, max_depth: u8) -> bool {
        let (budget, own_depth) = self.limits[i];
        !self.progress[i].stuck
            && self.level(i) <= own_depth.map_or(max_depth, |own| own.min(max_depth))
            && budget.is_none_or(|b| self.progress[i].seconds < b.as_secs_f64())
    }

    /// What is left of root `i`'s own budget, if it has one.
    fn budget_left(&self, i: usize) -> Option<Duration> {
        self.limits[i].0.map(|b| b.saturating_sub(Duration::from_secs_f64(self.progress[i].seconds)))
    }

    /// The next depth to settle at root `i`.
    fn level(&self, i: usize) -> u8 {
        self.progress[i].settled_depth.map_or(0, |d| d.saturating_add(1))
    }

    /// The depth root `i` is ranked by: its next depth, less what its weight is worth ([`priority`]). Signed: a
    /// heavy root not yet grown ranks below depth 0.
    fn rank(&self, i: usize) -> i16 {
        i16::from(self.level(i)) - i16::from(priority(self.weights[i]))
    }

    /// One line on what is being grown: the roots and the depth each is settling, and the settled depths so far.
    fn status_line(&self, elapsed: Duration) -> String {
        let busy: Vec<usize> = (0..self.progress.len()).filter(|&i| self.busy[i]).collect();
        // A few names keep the line on one terminal row.
        let mut growing: Vec<String> =
            busy.iter().take(3).map(|&i| format!("{} to depth {}", self.progress[i].label, self.level(i))).collect();
        if busy.len() > 3 {
            growing.push(format!("{} more", busy.len() - 3));
        }
        let settled: Vec<u8> = self.progress.iter().filter_map(|p| p.settled_depth).collect();
        let secs = elapsed.as_secs();
        format!(
            "{}:{:02}:{:02} growing {}; settled depth {} to {} over {} roots",
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            if growing.is_empty() { "nothing".to_owned() } else { growing.join(", ") },
            settled.iter().min().map_or("-".to_owned(), ToString::to_string),
            settled.iter().max().map_or("-".to_owned(), ToString::to_string),
            self.progress.len()
        )
    }

    fn next(&self, max_depth: u8) -> Next {
        if self.stopped {
            return Next::Done;
        }
        let open: Vec<usize> = (0..self.progress.len()).filter(|&i| self.is_open(i, max_depth)).collect();
        let Some(shallowest) = open.iter().map(|&i| self.rank(i)).min() else { return Next::Done };
        let pick = open
            .iter()
            .copied()
            .filter(|&i| !self.busy[i] && self.rank(i) <= shallowest.saturating_add(1))
            .min_by_key(|&i| (self.rank(i), i));
        match pick {
            Some(root) => Next::Grow { root, depth: self.level(root) },
            None if open.iter().any(|&i| self.busy[i]) => Next::Wait,
            None => Next::Done,
        }
    }
}

/// Grows `roots` with the groups of engines in `groups` (each group grows one root at a time), up to
/// `params.max_depth` or until `params.time` is spent or `stop` is set. `on_step` is called after each step with the
/// root's progress. With `status`, a status line names the roots being grown, four times a second.
#[allow(clippy::too_many_arguments)]
pub fn grow<E: Evaluator + Send>(
    store: &Store,
    groups: Vec<E>,
    roots: &[BookRoot],
    params: &Params,
    look_ahead: Option<u8>,
    stop: &Arc<AtomicBool>,
    status: Option<&dyn Progress>,
    on_step: impl Fn(&RootProgress) + Sync,
) -> Result<BookReport, AnalysisError> {
    let started = Instant::now();
    let group_count = groups.len();
    let weights = roots.iter().map(|r| r.weight).collect();
    let mut schedule = Schedule::new(progress_of(store, roots)?, weights);
    schedule.limits = roots.iter().map(|r| (r.budget, r.max_depth)).collect();
    let grower = Grower {
        store,
        roots,
        params,
        look_ahead,
        stop,
        started,
        schedule: Mutex::new(schedule),
        changed: Condvar::new(),
        running: AtomicUsize::new(group_count),
        on_step,
        status,
    };
    std::thread::scope(|scope| {
        let grower = &grower;
        if let Some(status) = status {
            scope.spawn(move || grower.show_status(status));
        }
        for evaluator in groups {
            scope.spawn(move || grower.run_group(evaluator));
        }
    });
    let schedule = grower.schedule.into_inner();
    if let Some(e) = schedule.error {
        return Err(e);
    }
    let unfinished = (0..schedule.progress.len()).any(|i| schedule.is_open(i, params.max_depth));
    let sum = |f: fn(&RootProgress) -> u64| schedule.progress.iter().map(f).sum();
    Ok(BookReport {
        evaluations: sum(|p| p.evaluations),
        shared: sum(|p| p.shared),
        failed: sum(|p| p.failed),
        positions: store.stats()?.positions,
        groups: group_count,
        stopped: schedule.stopped && unfinished,
        seconds: started.elapsed().as_secs_f64(),
        roots: schedule.progress,
    })
}

/// Where each root stands before this run: its settled depth as the store says.
fn progress_of(store: &Store, roots: &[BookRoot]) -> Result<Vec<RootProgress>, AnalysisError> {
    let view = store.read()?;
    let mut progress = Vec::with_capacity(roots.len());
    for (i, root) in roots.iter().enumerate() {
        let position = root.line.root();
        let settled_depth = view.node(PositionKey::of(position))?.and_then(|node| node.settled_depth);
        progress.push(RootProgress::new(
            i + 1,
            root.label.clone(),
            shakmaty::fen::Fen::from_position(position, shakmaty::EnPassantMode::Legal).to_string(),
            root.line.moves.iter().map(ToString::to_string).collect(),
            settled_depth,
        ));
    }
    Ok(progress)
}

/// What the groups of a run share: the roots, the budget, the schedule and how to report.
struct Grower<'g, F> {
    store: &'g Store,
    roots: &'g [BookRoot],
    params: &'g Params,
    look_ahead: Option<u8>,
    stop: &'g Arc<AtomicBool>,
    /// When the run began: the time budget counts from there.
    started: Instant,
    schedule: Mutex<Schedule>,
    /// Signalled when a root is taken or let go.
    changed: Condvar,
    /// Groups still growing.
    running: AtomicUsize,
    on_step: F,
    status: Option<&'g dyn Progress>,
}

impl<F: Fn(&RootProgress) + Sync> Grower<'_, F> {
    /// The run must end: stopped, or its time spent.
    fn out_of_time(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.params.time.is_some_and(|t| self.started.elapsed() >= t)
    }

    /// One group: takes a root and settles its next depth, until there is none to take.
    fn run_group<E: Evaluator>(&self, mut evaluator: E) {
        // Counted down however the group ends, so that the status line stops.
        let _done = Countdown(&self.running);
        while let Some((root, depth, budget_left)) = self.take() {
            let step_started = Instant::now();
            let result = self.step(&mut evaluator, root, depth, budget_left);
            self.record(root, depth, result, step_started);
        }
    }

    /// The next root to grow and the depth to settle there, marked busy; waits while the roots open are all busy.
    /// `None` when the run is over (every root done, or out of time).
    fn take(&self) -> Option<(usize, u8, Option<Duration>)> {
        let mut guard = self.schedule.lock();
        loop {
            if self.out_of_time() {
                guard.stopped = true;
            }
            match guard.next(self.params.max_depth) {
                Next::Grow { root, depth } => {
                    guard.busy[root] = true;
                    return Some((root, depth, guard.budget_left(root)));
                }
                Next::Wait => {
                    self.changed.wait_for(&mut guard, Duration::from_millis(100));
                }
                Next::Done => {
                    self.changed.notify_all();
                    return None;
                }
            }
        }
    }

    /// Settles software depth `depth` at root `root` with `evaluator`'s engines, within what is left of the run's
    /// budget and of the root's own (`budget_left`).
    fn step<E: Evaluator>(
        &self,
        evaluator: &mut E,
        root: usize,
        depth: u8,
        budget_left: Option<Duration>,
    ) -> Result<Report, AnalysisError> {
        let time = self.params.time.map(|t| t.saturating_sub(self.started.elapsed()));
        let time = match (time, budget_left) {
            (Some(run), Some(own)) => Some(run.min(own)),
            (run, own) => run.or(own),
        };
        let engine_depth = self.roots[root].engine_depth.unwrap_or(self.params.engine_depth);
        let step = self.params.clone().with_engine_depth(engine_depth).with_max_depth(depth).with_time(time);
        let options =
            AnalysisOptions { look_ahead: self.look_ahead, stop: self.stop.clone(), ..AnalysisOptions::default() };
        Analysis::with_options(self.store, evaluator, step, options).run(&self.roots[root].line, |_| {})
    }

    /// Records a step at root `root`: its progress (a depth that did not settle, but for the budget, leaves the root
    /// stuck), said by `on_step`; an error ends the run.
    fn record(&self, root: usize, depth: u8, result: Result<Report, AnalysisError>, step_started: Instant) {
        let mut guard = self.schedule.lock();
        guard.busy[root] = false;
        match result {
            Ok(report) => {
                let step_seconds = step_started.elapsed().as_secs_f64();
                // The run's budget or the root's own is spent: a depth left unsettled is no failure.
                let timed_out = self.out_of_time()
                    || guard.limits[root]
                        .0
                        .is_some_and(|b| guard.progress[root].seconds + step_seconds >= b.as_secs_f64());
                let entry = &mut guard.progress[root];
                entry.settled_depth = entry.settled_depth.max(report.settled_depth);
                entry.evaluations += report.evaluations;
                entry.shared += report.shared;
                entry.failed += report.failed;
                entry.seconds += step_seconds;
                if report.settled_depth.is_none_or(|d| d < depth) && !timed_out {
                    log::warn!(
                        "root {} ({}): depth {depth} did not settle (searches failed); it is left for a later run",
                        entry.root,
                        entry.label
                    );
                    entry.stuck = true;
                }
                if let Some(status) = self.status {
                    status.clear();
                }
                (self.on_step)(entry);
                if self.out_of_time() {
                    guard.stopped = true;
                }
            }
            Err(e) => {
                guard.error.get_or_insert(e);
                guard.stopped = true;
            }
        }
        self.changed.notify_all();
    }

    /// The status line, every quarter of a second while a group still grows; cleared at the end.
    fn show_status(&self, status: &dyn Progress) {
        while self.running.load(Ordering::Relaxed) > 0 {
            std::thread::sleep(Duration::from_millis(250));
            let line = self.schedule.lock().status_line(self.started.elapsed());
            status.show(&line);
        }
        status.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(depths: &[Option<u8>], busy: &[bool]) -> Schedule {
        let progress = depths
            .iter()
            .enumerate()
            .map(|(i, &settled_depth)| {
                RootProgress::new(i + 1, String::new(), String::new(), Vec::new(), settled_depth)
            })
            .collect();
        Schedule {
            weights: vec![1; depths.len()],
            limits: vec![(None, None); depths.len()],
            progress,
            busy: busy.to_vec(),
            stopped: false,
            error: None,
        }
    }

    fn pick(schedule: &Schedule, max_depth: u8) -> Option<(usize, u8)> {
        match schedule.next(max_depth) {
            Next::Grow { root, depth } => Some((root, depth)),
            Next::Wait => None,
            Next::Done => Some((usize::MAX, 0)),
        }
    }

    #[test]
    fn the_shallowest_root_goes_first_ties_in_file_order() {
        let s = schedule(&[Some(1), None, Some(0), None], &[false; 4]);
        assert_eq!(pick(&s, 5), Some((1, 0)));
        let s = schedule(&[Some(1), Some(0), Some(0)], &[false, true, false]);
        assert_eq!(pick(&s, 5), Some((2, 1)), "a busy root is not taken twice");
    }

    #[test]
    fn no_root_runs_more_than_one_depth_ahead_of_the_shallowest() {
        // Root 0 is being grown to depth 1; root 1 may settle depth 1 too, not depth 2.
        let s = schedule(&[Some(0), Some(0)], &[true, false]);
        assert_eq!(pick(&s, 5), Some((1, 1)));
        let s = schedule(&[Some(0), Some(2)], &[true, false]);
        assert_eq!(pick(&s, 5), None, "wait for the shallowest root");
    }

    #[test]
    fn the_status_line_names_a_few_roots_being_grown_and_the_settled_range() {
        let mut s = schedule(&[Some(1), Some(2), None, Some(1), Some(1)], &[true, false, true, true, true]);
        for (i, p) in s.progress.iter_mut().enumerate() {
            p.label = format!("line {}", i + 1);
        }
        let line = s.status_line(Duration::from_secs(3725));
        assert_eq!(
            line,
            "1:02:05 growing line 1 to depth 2, line 3 to depth 0, line 4 to depth 2, 1 more; settled depth 1 to 2 \
             over 5 roots"
        );
    }

    #[test]
    fn a_root_that_more_games_reached_runs_ahead_by_the_log_of_its_weight() {
        // Root 1 was reached by 4 games: it counts 2 depths shallower than it is.
        let mut s = schedule(&[Some(1), Some(1)], &[false, false]);
        s.weights = vec![1, 4];
        assert_eq!(pick(&s, 9), Some((1, 2)));
        s.progress[1].settled_depth = Some(2);
        assert_eq!(pick(&s, 9), Some((1, 3)), "depth 3 ranks as 1 beside the light root's 2");
        s.progress[1].settled_depth = Some(3);
        assert_eq!(pick(&s, 9), Some((0, 2)), "ties go in file order");
        s.progress[1].settled_depth = Some(4);
        assert_eq!(pick(&s, 9), Some((0, 2)), "depth 5 ranks as 3: the light root goes first");
        // Weights of 1 grow evenly, as before.
        assert_eq!(
            [priority(0), priority(1), priority(2), priority(3), priority(4), priority(1000)],
            [0, 0, 1, 1, 2, 9]
        );
    }

    #[test]
    fn roots_at_the_last_depth_or_stuck_are_done() {
        let s = schedule(&[Some(3), Some(3)], &[false, false]);
        assert_eq!(pick(&s, 3), Some((usize::MAX, 0)));
        let mut s = schedule(&[Some(0), Some(3)], &[false, false]);
        s.progress[0].stuck = true;
        assert_eq!(pick(&s, 3), Some((usize::MAX, 0)), "a stuck root holds nothing back");
    }
}
