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
//! A fed run ([`grow_fed`], growth for play: `analyze --roots --cover`) is not even: its roots come from a feed
//! while it runs, each with its own depth to reach, and are taken in the order handed over; a group with nothing to
//! take asks the feed for more instead of waiting for the others.
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
    /// Steps this run took at it (each settles, or tries to settle, one software depth): 0 for a root handed over
    /// but never grown (the budget spent first, or its depth already settled).
    pub steps: u32,
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
            steps: 0,
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
    /// The roots, in the order given (a fed run appends what its feed hands over).
    roots: Vec<BookRoot>,
    progress: Vec<RootProgress>,
    busy: Vec<bool>,
    /// Fed: each root has its own target and grows at its own pace, the first handed over first (no root is held
    /// back for the shallowest; see [`grow_fed`]).
    fed: bool,
    /// A group is asking the feed for more roots.
    feeding: bool,
    /// The feed's last answer was nothing, and no step has ended since.
    dry: bool,
    /// Steps ended so far: a feed that answers nothing leaves the run dry only if no step ended while it ran (its
    /// walk may have read the tree before that step's writes).
    steps: u64,
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
    /// `roots`, where `progress` says they stand, none busy.
    fn new(roots: Vec<BookRoot>, progress: Vec<RootProgress>) -> Schedule {
        let mut schedule = Schedule {
            roots: Vec::new(),
            progress: Vec::new(),
            busy: Vec::new(),
            fed: false,
            feeding: false,
            dry: false,
            steps: 0,
            stopped: false,
            error: None,
        };
        schedule.append(roots, progress);
        schedule
    }

    /// Adds `roots`, where `progress` says they stand, after those there are.
    fn append(&mut self, roots: Vec<BookRoot>, progress: Vec<RootProgress>) {
        self.busy.extend(roots.iter().map(|_| false));
        self.roots.extend(roots);
        self.progress.extend(progress);
    }

    /// The roots still open or being grown.
    fn unfinished(&self, max_depth: u8) -> Vec<usize> {
        (0..self.progress.len()).filter(|&i| self.busy[i] || self.is_open(i, max_depth)).collect()
    }

    /// Whether root `i` may grow further: not stuck, its budget not spent, its next depth not past the run's
    /// `max_depth` nor its own.
    fn is_open(&self, i: usize, max_depth: u8) -> bool {
        let root = &self.roots[i];
        !self.progress[i].stuck
            && self.level(i) <= root.max_depth.map_or(max_depth, |own| own.min(max_depth))
            && root.budget.is_none_or(|b| self.progress[i].seconds < b.as_secs_f64())
    }

    /// What is left of root `i`'s own budget, if it has one.
    fn budget_left(&self, i: usize) -> Option<Duration> {
        self.roots[i].budget.map(|b| b.saturating_sub(Duration::from_secs_f64(self.progress[i].seconds)))
    }

    /// The next depth to settle at root `i`.
    fn level(&self, i: usize) -> u8 {
        self.progress[i].settled_depth.map_or(0, |d| d.saturating_add(1))
    }

    /// The depth root `i` is ranked by: its next depth, less what its weight is worth ([`priority`]). Signed: a
    /// heavy root not yet grown ranks below depth 0.
    fn rank(&self, i: usize) -> i16 {
        i16::from(self.level(i)) - i16::from(priority(self.roots[i].weight))
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
        let pick = if self.fed {
            open.iter().copied().find(|&i| !self.busy[i])
        } else {
            open.iter()
                .copied()
                .filter(|&i| !self.busy[i] && self.rank(i) <= shallowest.saturating_add(1))
                .min_by_key(|&i| (self.rank(i), i))
        };
        match pick {
            Some(root) => Next::Grow { root, depth: self.level(root) },
            None if open.iter().any(|&i| self.busy[i]) => Next::Wait,
            None => Next::Done,
        }
    }
}

/// Grows `roots` with the groups of engines in `groups` (each group grows one root at a time), up to
/// `params.max_depth` or until `params.time` is spent or `stop` is set. `on_step` is called after each step with the
/// root's progress. With `status`, a status line names the roots being grown, four times a second. An error while
/// the groups run (the store's) ends the run and sets `stop`, so that every group's searches end at once.
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
    let schedule = Schedule::new(roots.to_vec(), progress_of(store, roots, 0)?);
    let run = Run { store, params, look_ahead, stop, status, started };
    run.grow(groups, schedule, None, on_step)
}

/// What a fed run asks for more roots with: given the roots handed over so far that are still open or being grown
/// (their places in the order handed over, from 0), the next roots to grow (none: nothing to grow for now).
pub type Feed<'f> = dyn FnMut(&[usize]) -> Result<Vec<BookRoot>, AnalysisError> + Send + 'f;

/// Grows the roots `feed` hands over, each to its own [`BookRoot::max_depth`], with the groups of engines in
/// `groups`, until `params.time` is spent, `stop` is set, or the feed has nothing more and every root is grown.
///
/// A group with no root to take asks the feed (one group at a time; the others go on growing): the run has no
/// rounds that wait for their slowest root, and the engines stay busy while the feed's choices follow what the
/// tree has grown so far. A root handed over earlier is taken first, and no root is held back for the shallowest
/// (each has its own target). After a feed that handed over nothing, it is asked again once a step has ended (or at
/// once, if one ended while it ran); the run ends when it hands over nothing and no root is being grown. An error,
/// the feed's or a step's, ends the run and sets `stop`, as in [`grow`].
pub fn grow_fed<E: Evaluator + Send>(
    store: &Store,
    groups: Vec<E>,
    params: &Params,
    look_ahead: Option<u8>,
    stop: &Arc<AtomicBool>,
    feed: &mut Feed<'_>,
) -> Result<BookReport, AnalysisError> {
    let mut schedule = Schedule::new(Vec::new(), Vec::new());
    schedule.fed = true;
    let run = Run { store, params, look_ahead, stop, status: None, started: Instant::now() };
    run.grow(groups, schedule, Some(Mutex::new(feed)), |_| {})
}

/// What every run shares: the store, the search and how it ends.
struct Run<'g> {
    store: &'g Store,
    params: &'g Params,
    look_ahead: Option<u8>,
    stop: &'g Arc<AtomicBool>,
    status: Option<&'g dyn Progress>,
    /// When the run began: the time budget counts from there.
    started: Instant,
}

impl<'g> Run<'g> {
    fn grow<E: Evaluator + Send>(
        self,
        groups: Vec<E>,
        schedule: Schedule,
        feed: Option<Mutex<&'g mut Feed<'_>>>,
        on_step: impl Fn(&RootProgress) + Sync,
    ) -> Result<BookReport, AnalysisError> {
        let Run { store, params, look_ahead, stop, status, started } = self;
        let group_count = groups.len();
        let grower = Grower {
            store,
            params,
            look_ahead,
            stop,
            started,
            schedule: Mutex::new(schedule),
            changed: Condvar::new(),
            running: AtomicUsize::new(group_count),
            on_step,
            status,
            feed,
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
        let unfinished = !schedule.unfinished(params.max_depth).is_empty();
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
}

/// Where each root stands before this run: its settled depth as the store says. The first is numbered `before + 1`.
fn progress_of(store: &Store, roots: &[BookRoot], before: usize) -> Result<Vec<RootProgress>, AnalysisError> {
    let view = store.read()?;
    let mut progress = Vec::with_capacity(roots.len());
    for (i, root) in roots.iter().enumerate() {
        let position = root.line.root();
        let settled_depth = view.node(PositionKey::of(position))?.and_then(|node| node.settled_depth);
        progress.push(RootProgress::new(
            before + i + 1,
            root.label.clone(),
            shakmaty::fen::Fen::from_position(position, shakmaty::EnPassantMode::Legal).to_string(),
            root.line.moves.iter().map(ToString::to_string).collect(),
            settled_depth,
        ));
    }
    Ok(progress)
}

/// What the groups of a run share: the budget, the schedule (with the roots) and how to report.
struct Grower<'g, 'f, F> {
    store: &'g Store,
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
    /// Where a fed run gets more roots ([`grow_fed`]).
    feed: Option<Mutex<&'g mut Feed<'f>>>,
}

/// A root a group has taken: the depth to settle there and how.
struct Taken {
    root: usize,
    depth: u8,
    /// What is left of the root's own budget, if it has one.
    budget_left: Option<Duration>,
    line: Line,
    engine_depth: Option<u8>,
}

impl<F: Fn(&RootProgress) + Sync> Grower<'_, '_, F> {
    /// The run must end: stopped, or its time spent.
    fn out_of_time(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.params.time.is_some_and(|t| self.started.elapsed() >= t)
    }

    /// One group: takes a root and settles its next depth, until there is none to take.
    fn run_group<E: Evaluator>(&self, mut evaluator: E) {
        // Counted down however the group ends, so that the status line stops.
        let _done = Countdown(&self.running);
        while let Some(taken) = self.take() {
            let step_started = Instant::now();
            let result = self.step(&mut evaluator, &taken);
            self.record(taken.root, taken.depth, result, step_started);
        }
    }

    /// The next root to grow and the depth to settle there, marked busy; waits while the roots open are all busy.
    /// In a fed run, a group with nothing to take asks the feed first. `None` when the run is over (every root
    /// done and nothing more fed, or out of time).
    fn take(&self) -> Option<Taken> {
        let mut guard = self.schedule.lock();
        loop {
            if self.out_of_time() {
                guard.stopped = true;
            }
            let next = guard.next(self.params.max_depth);
            let may_feed = self.feed.is_some() && !guard.stopped && !guard.dry;
            match next {
                Next::Grow { root, depth } => {
                    guard.busy[root] = true;
                    return Some(Taken {
                        root,
                        depth,
                        budget_left: guard.budget_left(root),
                        line: guard.roots[root].line.clone(),
                        engine_depth: guard.roots[root].engine_depth,
                    });
                }
                // Another group is asking the feed: what it brings may be for this one too.
                _ if may_feed && guard.feeding => {
                    self.changed.wait_for(&mut guard, Duration::from_millis(100));
                }
                _ if may_feed => {
                    guard.feeding = true;
                    let unfinished = guard.unfinished(self.params.max_depth);
                    let (before, steps) = (guard.progress.len(), guard.steps);
                    // The feed reads the store while the other groups go on recording their steps. A feed that
                    // panics ends the run (`stop` is set and no group waits for it), then the panic goes on.
                    let fed = parking_lot::MutexGuard::unlocked(&mut guard, || {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.ask_feed(&unfinished, before)))
                    });
                    guard.feeding = false;
                    let fed = match fed {
                        Ok(fed) => fed,
                        Err(panic) => {
                            guard.stopped = true;
                            self.stop.store(true, Ordering::Relaxed);
                            self.changed.notify_all();
                            drop(guard);
                            std::panic::resume_unwind(panic);
                        }
                    };
                    match fed {
                        // Nothing to grow for now; but a step that ended meanwhile may have grown what the feed's
                        // walk did not see: then it is asked again.
                        Ok((roots, _)) if roots.is_empty() => guard.dry = guard.steps == steps,
                        Ok((roots, progress)) => guard.append(roots, progress),
                        Err(e) => self.fail(&mut guard, e),
                    }
                    self.changed.notify_all();
                }
                Next::Wait => {
                    self.changed.wait_for(&mut guard, Duration::from_millis(100));
                }
                // A feed under way may still bring roots.
                Next::Done if guard.feeding => {
                    self.changed.wait_for(&mut guard, Duration::from_millis(100));
                }
                Next::Done => {
                    self.changed.notify_all();
                    return None;
                }
            }
        }
    }

    /// The feed's next roots, and where each stands (numbered after the `before` roots there are).
    fn ask_feed(
        &self,
        unfinished: &[usize],
        before: usize,
    ) -> Result<(Vec<BookRoot>, Vec<RootProgress>), AnalysisError> {
        let Some(feed) = &self.feed else { return Ok((Vec::new(), Vec::new())) };
        let roots = (feed.lock())(unfinished)?;
        let progress = progress_of(self.store, &roots, before)?;
        Ok((roots, progress))
    }

    /// Settles the depth `taken` says at its root with `evaluator`'s engines, within what is left of the run's
    /// budget and of the root's own.
    fn step<E: Evaluator>(&self, evaluator: &mut E, taken: &Taken) -> Result<Report, AnalysisError> {
        let time = self.params.time.map(|t| t.saturating_sub(self.started.elapsed()));
        let time = match (time, taken.budget_left) {
            (Some(run), Some(own)) => Some(run.min(own)),
            (run, own) => run.or(own),
        };
        let engine_depth = taken.engine_depth.unwrap_or(self.params.engine_depth);
        let step = self.params.clone().with_engine_depth(engine_depth).with_max_depth(taken.depth).with_time(time);
        let options =
            AnalysisOptions { look_ahead: self.look_ahead, stop: self.stop.clone(), ..AnalysisOptions::default() };
        Analysis::with_options(self.store, evaluator, step, options).run(&taken.line, |_| {})
    }

    /// Records a step at root `root`: its progress (a depth that did not settle, but for the budget, leaves the root
    /// stuck), said by `on_step`; an error ends the run.
    fn record(&self, root: usize, depth: u8, result: Result<Report, AnalysisError>, step_started: Instant) {
        let mut guard = self.schedule.lock();
        guard.busy[root] = false;
        // The tree has changed: a feed that had nothing may have something now.
        guard.dry = false;
        guard.steps += 1;
        match result {
            Ok(report) => {
                let step_seconds = step_started.elapsed().as_secs_f64();
                // The run's budget or the root's own is spent: a depth left unsettled is no failure.
                let timed_out = self.out_of_time()
                    || guard.roots[root]
                        .budget
                        .is_some_and(|b| guard.progress[root].seconds + step_seconds >= b.as_secs_f64());
                let entry = &mut guard.progress[root];
                entry.settled_depth = entry.settled_depth.max(report.settled_depth);
                entry.evaluations += report.evaluations;
                entry.shared += report.shared;
                entry.failed += report.failed;
                entry.seconds += step_seconds;
                entry.steps += 1;
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
            Err(e) => self.fail(&mut guard, e),
        }
        self.changed.notify_all();
    }

    /// Ends the run with `e`: `stop` is set, so that the other groups' searches end now rather than when their
    /// depths settle; what they stored stays.
    fn fail(&self, guard: &mut Schedule, e: AnalysisError) {
        guard.error.get_or_insert(e);
        guard.stopped = true;
        self.stop.store(true, Ordering::Relaxed);
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
        let roots = depths.iter().map(|_| BookRoot::new(Line::start_position(), "")).collect();
        let mut s = Schedule::new(roots, progress);
        s.busy = busy.to_vec();
        s
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
        s.roots[0].weight = 1;
        s.roots[1].weight = 4;
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

    /// Scripted, but the first search of `held` waits until `release` is set (for at most 20 s; `timed_out` says
    /// whether it gave up).
    struct Held {
        inner: crate::search::evaluator::ScriptedEvaluator,
        held: PositionKey,
        release: Arc<AtomicBool>,
        timed_out: Arc<AtomicBool>,
    }

    /// Two groups of one scripted engine each, whose first search of `held` waits for `release`.
    fn two_held_groups(held: PositionKey, release: &Arc<AtomicBool>, timed_out: &Arc<AtomicBool>) -> Vec<Held> {
        (0..2)
            .map(|seed| Held {
                inner: crate::search::evaluator::ScriptedEvaluator::new(1, seed),
                held,
                release: release.clone(),
                timed_out: timed_out.clone(),
            })
            .collect()
    }

    impl Evaluator for Held {
        fn workers(&self) -> usize {
            self.inner.workers()
        }

        fn submit(
            &mut self,
            id: u64,
            job: crate::search::evaluator::Job,
        ) -> Result<(), crate::search::evaluator::EvalError> {
            if PositionKey::of(&job.position) == self.held {
                let since = Instant::now();
                while !self.release.load(Ordering::SeqCst) {
                    if since.elapsed() > Duration::from_secs(20) {
                        self.timed_out.store(true, Ordering::SeqCst);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                // Only the first search waits.
                self.held = PositionKey(0);
            }
            self.inner.submit(id, job)
        }

        fn next(
            &mut self,
            timeout: Duration,
        ) -> Option<(u64, Result<crate::search::evaluator::Answer, crate::search::evaluator::EvalError>)> {
            self.inner.next(timeout)
        }

        fn cancel_all(&mut self) {
            self.inner.cancel_all();
        }

        fn identity(&self) -> String {
            self.inner.identity()
        }
    }

    #[test]
    fn a_fed_run_asks_for_more_while_a_slow_root_grows_and_holds_no_root_back() {
        use crate::store::StoreOptions;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let line = |moves: &str| Line::parse(None, moves).unwrap();
        let target = |moves: &str, depth: u8| BookRoot { max_depth: Some(depth), ..BookRoot::new(line(moves), moves) };
        let params = Params::new(4, 20);
        let stop = Arc::new(AtomicBool::new(false));
        // B is settled at depth 2 beforehand: to settle its depth 3 is three depths ahead of a root not yet grown.
        let engines = vec![crate::search::evaluator::ScriptedEvaluator::new(1, 7)];
        grow(&store, engines, &[target("d2d4 d7d5", 2)], &params, None, &stop, None, |_| {}).unwrap();
        // A's first search waits until the feed has been asked a third time: the run must go on without it.
        let (release, timed_out) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let held = PositionKey::of(line("e2e4 e7e5").root());
        let groups = two_held_groups(held, &release, &timed_out);
        let mut asked: Vec<Vec<usize>> = Vec::new();
        let mut feed = |unfinished: &[usize]| -> Result<Vec<BookRoot>, AnalysisError> {
            asked.push(unfinished.to_vec());
            Ok(match asked.len() {
                1 => vec![target("e2e4 e7e5", 1), target("d2d4 d7d5", 3)],
                2 => vec![target("c2c4 c7c5", 1)],
                3 => {
                    release.store(true, Ordering::SeqCst);
                    Vec::new()
                }
                _ => Vec::new(),
            })
        };
        let report = grow_fed(&store, groups, &params.clone().with_max_depth(u8::MAX), None, &stop, &mut feed).unwrap();
        assert!(!timed_out.load(Ordering::SeqCst), "the run waited for the held root: {asked:?}");
        // Asked first with nothing handed over; then with only A unfinished (B settled its depth 3 while A's first
        // search waited); then again with A alone (C grown meanwhile); at last, after A, with nothing unfinished.
        assert_eq!(asked[..3], [vec![], vec![0], vec![0]], "{asked:?}");
        assert_eq!(asked.last(), Some(&vec![]), "{asked:?}");
        let settled: Vec<Option<u8>> = report.roots.iter().map(|r| r.settled_depth).collect();
        assert_eq!(settled, [Some(1), Some(3), Some(1)]);
        let steps: Vec<u32> = report.roots.iter().map(|r| r.steps).collect();
        assert_eq!(steps, [2, 1, 2], "A and C settle depths 0 and 1, B only its depth 3");
        assert!(!report.stopped);
    }

    #[test]
    fn a_feed_that_found_nothing_while_a_step_ended_is_asked_again() {
        use crate::store::StoreOptions;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let line = Line::parse(None, "e2e4 e7e5").unwrap();
        let key = PositionKey::of(line.root());
        let params = Params::new(4, 20).with_max_depth(u8::MAX);
        let stop = Arc::new(AtomicBool::new(false));
        let (release, timed_out) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let groups = two_held_groups(key, &release, &timed_out);
        let mut asked: Vec<Vec<usize>> = Vec::new();
        // The second call, made while the held root grows, lets it go and answers nothing only once its step has
        // ended (settled in the store, then a pause for the group to record it): its walk would not have seen what
        // that step grew, so the run must ask again rather than end.
        let mut feed = |unfinished: &[usize]| -> Result<Vec<BookRoot>, AnalysisError> {
            asked.push(unfinished.to_vec());
            if asked.len() == 1 {
                return Ok(vec![BookRoot { max_depth: Some(0), ..BookRoot::new(line.clone(), "held") }]);
            }
            if asked.len() == 2 {
                release.store(true, Ordering::SeqCst);
                let since = Instant::now();
                while store.read()?.node(key)?.and_then(|n| n.settled_depth).is_none()
                    && since.elapsed() < Duration::from_secs(20)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            Ok(Vec::new())
        };
        let report = grow_fed(&store, groups, &params, None, &stop, &mut feed).unwrap();
        assert!(!timed_out.load(Ordering::SeqCst));
        assert_eq!(report.roots[0].settled_depth, Some(0));
        assert_eq!(asked, [vec![], vec![0], vec![]], "asked again after the step that ended during the second call");
    }

    #[test]
    fn a_feed_error_ends_the_run_at_once_and_stops_the_other_groups() {
        use crate::store::StoreOptions;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let line = Line::parse(None, "e2e4 e7e5").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let timed_out = Arc::new(AtomicBool::new(false));
        // The held root's search waits until `stop` is set: only the error can let it go.
        let groups = two_held_groups(PositionKey::of(line.root()), &stop, &timed_out);
        let mut calls = 0;
        let mut feed = |_: &[usize]| -> Result<Vec<BookRoot>, AnalysisError> {
            calls += 1;
            match calls {
                1 => Ok(vec![BookRoot { max_depth: Some(3), ..BookRoot::new(line.clone(), "held") }]),
                _ => Err(AnalysisError::Trace(std::io::Error::other("the feed's walk failed"))),
            }
        };
        let params = Params::new(4, 20).with_max_depth(u8::MAX);
        let error = grow_fed(&store, groups, &params, None, &stop, &mut feed).unwrap_err();
        assert!(error.to_string().contains("the feed's walk failed"), "{error}");
        assert!(!timed_out.load(Ordering::SeqCst), "the held group went on until its wait ran out");
        assert!(stop.load(Ordering::SeqCst));
    }
}
