//! Growth: one loop that keeps the engines busy growing the tree where it is worth most (docs/design.md §6).
//!
//! ```
//! use std::sync::{Arc, atomic::AtomicBool};
//! use deeptree::game::Line;
//! use deeptree::search::{analysis::Params, evaluator::ScriptedEvaluator};
//! use deeptree::search::growth::{Growth, Policy, Seed, grow};
//! use deeptree::store::{Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! // A book of two roots games go on from, grown for a clock whose searches reach depth 9 (engine depth 8).
//! let seeds = vec![
//!     Seed::games_from(Line::parse(None, "e2e4 c7c5")?, "Sicilian", 1.0),
//!     Seed::games_from(Line::parse(None, "d2d4 d7d5")?, "Queen's pawn", 1.0),
//! ];
//! let policy = Policy::new(9, Params::new(8, 20));
//! let mut growth = Growth::new(seeds, policy);
//! growth.max_steps = Some(6);
//! // Two groups of engines, one scripted engine each.
//! let engines = vec![ScriptedEvaluator::new(1, 7), ScriptedEvaluator::new(1, 8)];
//! let report = grow(&store, engines, growth, |_| {}, |_, _| {})?;
//! assert_eq!(report.steps, 6);
//! assert!(report.expected_answers > report.expected_answers_before);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # The parts
//!
//! - **Sources** feed growth with [`Seed`]s: a single root (`analyze --fen --moves`), a book's roots (`--roots`),
//!   the exits of recorded games (`crate::interop::played`), the analyst's tasks, the position of a UCI session
//!   (background and ponder growth, `ThinkMode tree`). A seed either stands for games that go on from it
//!   ([`Seed::follow`]) or is a position to deepen itself.
//! - **The frontier** ([`frontier::walk`]): the positions the seeds' games reach where the tree would not answer,
//!   and the seeds to deepen, each with its priority and the depth to grow it to.
//! - **The priority** ([`priority::priority`]): `reach x 2^lack`, the one place where positions are ranked.
//! - **The loop** ([`grow`]): the engines are split into groups (one per engine where games are followed; else as
//!   many as there are seeds, at most one per engine: [`groups`]). A group takes the item of highest priority that
//!   no other group is growing, settles it with the search of [`super::analysis`], and takes the next: no group
//!   waits for another (but that a seed deepened itself is not taken more than a ply ahead of one being grown, at
//!   equal weights: a book of roots grows evenly). When the items of the last walk are all taken, the group that finds none walks the tree
//!   again (one walk at a time; the others go on growing), so that every choice follows what is grown so far. The
//!   run ends on its time or node budget, on `stop`, on [`Growth::max_steps`], or when the frontier is empty. Where
//!   games are followed the positions the tree answers stay on it, to be deepened, so it empties only where every
//!   position games reach down to the walk's floor was grown in this run; the floor is then lowered (by 8, down to
//!   [`MIN_FLOOR`]) and growth widens.
//!
//! Everything an engine answered is stored as it comes, and every choice is made from the store: a run stopped
//! (`--time`, Ctrl-C) is resumed by running it again, and nothing stored is asked again. Two processes growing one
//! store share their searches through claims (docs/design.md §5.3).

pub mod frontier;
pub mod priority;
pub mod sources;

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::{Condvar, Mutex};

use crate::{
    logger::Progress,
    store::{Store, key::PositionKey},
};

use super::{
    analysis::{Analysis, AnalysisError, AnalysisOptions, Iteration, Report, Trace},
    evaluator::Evaluator,
};

pub use frontier::{Frontier, Item, ItemId, Kind, Policy, Seed, Skip, Targets, walk};
pub use priority::{Terms, priority};

/// The walk's floor is lowered no further: a position fewer games reach than this share of a seed's is not grown.
pub const MIN_FLOOR: f64 = 1e-7;

/// Items a walk hands over for each group of engines: enough that walks cost little of the engines' machine (a walk
/// of 40 roots over a tree of 47,000 positions takes about half a second of one core), few enough that the next walk
/// soon follows what these grew.
pub const ITEMS_PER_GROUP: usize = 32;

/// A run of growth: its seeds, its policy (the target, the search's parameters with the run's time and node
/// budgets), and how it runs.
pub struct Growth {
    pub seeds: Vec<Seed>,
    pub policy: Policy,
    /// Software depths past the one being settled in which free engines may run searches ahead of their turn.
    pub look_ahead: Option<u8>,
    /// Set to stop cleanly (Ctrl-C, a GUI's `stop`).
    pub stop: Arc<AtomicBool>,
    /// One line per choice, with its terms, and the decisions of each step's search.
    pub trace: Trace,
    /// A status line; with one group, the search's own.
    pub progress: Option<Arc<dyn Progress>>,
    /// Store the way from a seed to the position grown as engine-scored edges first (off where the caller stored
    /// it: a UCI session stores its game).
    pub line_edges: bool,
    /// Nodes the engines reported for the answered searches, counted as they come.
    pub nodes: Arc<AtomicU64>,
    /// Items to grow at most (`None`: no limit).
    pub max_steps: Option<u64>,
}

impl Growth {
    /// A run of `seeds` by `policy`, with the default look ahead, no trace, no status line and a stop flag of its own.
    pub fn new(seeds: Vec<Seed>, policy: Policy) -> Growth {
        let options = AnalysisOptions::default();
        Growth {
            seeds,
            policy,
            look_ahead: options.look_ahead,
            stop: options.stop,
            trace: options.trace,
            progress: None,
            line_edges: true,
            nodes: Arc::new(AtomicU64::new(0)),
            max_steps: None,
        }
    }
}

/// The groups of engines a run of `seeds` has with `engines` engines: one per engine where games are followed
/// (many positions to grow at once), else one per seed (at most one per engine): a seed is grown by one group at a
/// time, whose engines all serve it.
pub fn groups(seeds: &[Seed], engines: usize) -> usize {
    let most = if seeds.iter().any(|s| s.follow) { engines } else { seeds.len() };
    most.min(engines).max(1)
}

/// Where one seed stands after the run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SeedProgress {
    /// Its place in the list (from 1).
    pub root: usize,
    pub label: String,
    pub fen: String,
    /// The moves from the start position to it, in UCI notation.
    pub moves: Vec<String>,
    /// The software depth settled at its own position.
    pub settled_depth: Option<u8>,
    /// Searches this run answered for the items grown from it.
    pub evaluations: u64,
    /// Answers taken from searches another group or process ran.
    pub shared: u64,
    /// Searches that failed (left for a later run).
    pub failed: u64,
    /// Wall time this run spent growing items from it.
    pub seconds: f64,
    /// Items grown from it.
    pub steps: u32,
    /// An item of it could not be grown (searches failed): left for a later run.
    pub stuck: bool,
}

/// One item grown: what was chosen and what its search did.
#[derive(Debug, Clone)]
pub struct Step<'r> {
    /// The count of items taken so far in the run (from 1), the item, and its seed.
    pub number: u64,
    pub item: &'r Item,
    pub seed: &'r SeedProgress,
    pub report: &'r Report,
    pub seconds: f64,
}

/// What a run of growth did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GrowthReport {
    /// The seeds, in the order given.
    pub roots: Vec<SeedProgress>,
    /// Items grown (steps whose search ran).
    pub steps: u64,
    pub evaluations: u64,
    pub stored: u64,
    pub shared: u64,
    pub failed: u64,
    pub engine_nodes: u64,
    /// Positions in the store at the end.
    pub positions: u64,
    /// Groups of engines that grew at once.
    pub groups: usize,
    /// Stopped (time, nodes, `stop`, steps) with items still on the frontier.
    pub stopped: bool,
    pub seconds: f64,
    /// Tree moves a game from the seeds games go on from is expected to get, before and after the run (0 without
    /// such seeds).
    pub expected_answers_before: f64,
    pub expected_answers: f64,
    /// The share of the positions of the tree's side the seeds' games reach (down to the walk's floor) that the tree
    /// answers at the target, after the run.
    pub answered_share: f64,
    /// The report of the run's last search: with one seed deepened alone, the whole run's.
    #[serde(skip)]
    pub last: Option<Report>,
}

/// Grows the tree of `store` by `growth` with the engines of `groups` (each group grows one item at a time), until
/// its budget is spent, `stop` is set, its steps are taken or the frontier is empty. `on_step` is called after each
/// item grown; `on_iteration` after each software depth a step settles, with its item. An error (the store's, a walk's)
/// ends the run and sets `stop`, so that every group's searches end at once; what they stored stays.
pub fn grow<E: Evaluator + Send>(
    store: &Store,
    groups: Vec<E>,
    growth: Growth,
    on_step: impl Fn(&Step<'_>) + Sync,
    on_iteration: impl Fn(&Item, &Iteration) + Sync,
) -> Result<GrowthReport, AnalysisError> {
    let started = Instant::now();
    let group_count = groups.len();
    let seeds = growth.seeds.len();
    let follows = growth.seeds.iter().any(|s| s.follow);
    let state = State {
        queue: Vec::new(),
        in_flight: HashSet::new(),
        seeds_in_flight: Vec::new(),
        grown: HashSet::new(),
        closed: vec![false; seeds],
        progress: seed_progress(store, &growth.seeds)?,
        floor: growth.policy.floor,
        walking: false,
        walked_at: 0,
        dry: false,
        steps: 0,
        taken: 0,
        stopped: false,
        error: None,
        expected_before: None,
        expected: 0.0,
        totals: Report::default(),
        last: None,
    };
    let loop_ = Loop {
        store,
        growth: &growth,
        started,
        state: Mutex::new(state),
        changed: Condvar::new(),
        running: AtomicUsize::new(group_count),
        batch: group_count * ITEMS_PER_GROUP,
        groups: group_count,
        on_step,
        on_iteration,
        alone: group_count == 1,
    };
    std::thread::scope(|scope| {
        let loop_ = &loop_;
        if group_count > 1
            && let Some(progress) = growth.progress.as_deref()
        {
            scope.spawn(move || loop_.show_status(progress));
        }
        // Where games are followed, walks are not cheap: one runs ahead, while the engines search.
        if follows {
            scope.spawn(move || loop_.walk_ahead());
        }
        for evaluator in groups {
            scope.spawn(move || loop_.run_group(evaluator));
        }
    });
    let mut state = loop_.state.into_inner();
    if let Some(e) = state.error {
        return Err(e);
    }
    // Where the seeds stand now, and (games followed) what a game gets now.
    let after = if follows {
        let view = store.read()?;
        let policy = Policy { floor: state.floor, ..growth.policy.clone() };
        Some(walk(&view, &growth.seeds, &policy, &Skip::default())?)
    } else {
        None
    };
    let settled = seed_progress(store, &growth.seeds)?;
    for (entry, now) in state.progress.iter_mut().zip(settled) {
        entry.settled_depth = now.settled_depth;
    }
    let left = after.as_ref().is_some_and(|f| !f.items.is_empty()) || !state.queue.is_empty();
    let totals = &state.totals;
    Ok(GrowthReport {
        steps: state.steps,
        evaluations: totals.evaluations,
        stored: totals.stored,
        shared: totals.shared,
        failed: totals.failed,
        engine_nodes: totals.engine_nodes,
        positions: store.stats()?.positions,
        groups: group_count,
        stopped: state.stopped && (left || !follows),
        seconds: started.elapsed().as_secs_f64(),
        expected_answers_before: state.expected_before.unwrap_or(0.0),
        expected_answers: after.as_ref().map_or(state.expected, |f| f.expected_answers),
        answered_share: after.map_or(0.0, |f| f.answered_share),
        last: state.last,
        roots: state.progress,
    })
}

/// Where each seed stands before the run: its settled depth as the store says.
fn seed_progress(store: &Store, seeds: &[Seed]) -> Result<Vec<SeedProgress>, AnalysisError> {
    let view = store.read()?;
    let mut progress = Vec::with_capacity(seeds.len());
    for (i, seed) in seeds.iter().enumerate() {
        let position = seed.line.root();
        let settled_depth = view.node(PositionKey::of(position))?.and_then(|node| node.settled_depth);
        progress.push(SeedProgress {
            root: i + 1,
            label: seed.label.clone(),
            fen: shakmaty::fen::Fen::from_position(position, shakmaty::EnPassantMode::Legal).to_string(),
            moves: seed.line.moves.iter().map(ToString::to_string).collect(),
            settled_depth,
            evaluations: 0,
            shared: 0,
            failed: 0,
            seconds: 0.0,
            steps: 0,
            stuck: false,
        });
    }
    Ok(progress)
}

/// What the groups share, under one lock.
struct State {
    /// The last walk's items not taken yet, highest priority first.
    queue: Vec<Item>,
    /// Positions being grown.
    in_flight: HashSet<PositionKey>,
    /// The priorities of the seeds deepened themselves being grown.
    seeds_in_flight: Vec<f64>,
    /// Items grown in this run: not taken again (a game's end, searches that failed).
    grown: HashSet<ItemId>,
    /// Seeds whose budget is spent.
    closed: Vec<bool>,
    progress: Vec<SeedProgress>,
    /// The walk's floor now.
    floor: f64,
    /// A group is walking the tree.
    walking: bool,
    /// The steps ended when the last walk began.
    walked_at: u64,
    /// The last walk found nothing, and no step has ended since.
    dry: bool,
    /// Steps ended, and items taken.
    steps: u64,
    taken: u64,
    stopped: bool,
    error: Option<AnalysisError>,
    expected_before: Option<f64>,
    expected: f64,
    /// The steps' reports summed.
    totals: Report,
    last: Option<Report>,
}

/// The loop of the module docs.
struct Loop<'g, S, I> {
    store: &'g Store,
    growth: &'g Growth,
    started: Instant,
    state: Mutex<State>,
    /// Signalled when an item is taken or let go, or a walk ends.
    changed: Condvar,
    /// Groups still growing.
    running: AtomicUsize,
    /// Items a walk hands over.
    batch: usize,
    /// Groups of engines.
    groups: usize,
    on_step: S,
    on_iteration: I,
    /// One group: its search shows its own status line.
    alone: bool,
}

/// Counts a group (or the walker) down when it ends; one that ends by a panic stops the run, so that the others end
/// too rather than wait for its item (the panic then goes on, out of the run's scope).
struct Countdown<'a, 'g, S, I> {
    running: Option<&'a AtomicUsize>,
    run: &'a Loop<'g, S, I>,
}

impl<S, I> Drop for Countdown<'_, '_, S, I> {
    fn drop(&mut self) {
        if let Some(running) = self.running {
            running.fetch_sub(1, Ordering::Relaxed);
        }
        if std::thread::panicking() {
            let mut state = self.run.state.lock();
            state.stopped = true;
            state.walking = false;
            self.run.growth.stop.store(true, Ordering::Relaxed);
            self.run.changed.notify_all();
        }
    }
}

impl<S: Fn(&Step<'_>) + Sync, I: Fn(&Item, &Iteration) + Sync> Loop<'_, S, I> {
    /// The run must end: stopped, its time or its nodes spent.
    fn out_of_budget(&self) -> bool {
        let params = &self.growth.policy.params;
        self.growth.stop.load(Ordering::Relaxed)
            || params.time.is_some_and(|t| self.started.elapsed() >= t)
            || params.nodes.is_some_and(|n| self.growth.nodes.load(Ordering::Relaxed) >= n)
    }

    /// One group: takes an item and grows it, until there is none to take.
    fn run_group<E: Evaluator>(&self, mut evaluator: E) {
        let _done = Countdown { running: Some(&self.running), run: self };
        let (mut waited, mut grew) = (Duration::ZERO, Duration::ZERO);
        loop {
            let asked = Instant::now();
            let Some((item, number)) = self.take() else { break };
            let step_started = Instant::now();
            waited += step_started - asked;
            let result = self.step(&mut evaluator, &item);
            grew += step_started.elapsed();
            self.record(item, number, result, step_started);
        }
        log::debug!("a group waited {:.2} s for items and grew for {:.2} s", waited.as_secs_f64(), grew.as_secs_f64());
    }

    /// The next item to grow, marked in flight; waits while a walk runs or the items are all taken. A group that
    /// finds nothing to take walks the tree (one at a time). `None` when the run is over.
    fn take(&self) -> Option<(Item, u64)> {
        let mut state = self.state.lock();
        loop {
            if self.out_of_budget() || self.growth.max_steps.is_some_and(|m| state.taken >= m) {
                state.stopped = true;
            }
            if state.stopped {
                self.changed.notify_all();
                return None;
            }
            // A seed deepened itself is not taken more than a ply ahead of another being grown (at equal weights):
            // its priority at least half of theirs. A book of roots grows evenly, as it always did.
            let held_back = |s: &State, item: &Item| {
                item.kind == frontier::Kind::Seed && s.seeds_in_flight.iter().any(|p| item.priority * 2.0 < *p)
            };
            // Grown meanwhile (the walk that found it read the tree before that step ended): not taken again.
            let open = |s: &State, item: &Item| {
                !s.in_flight.contains(&item.key)
                    && !s.grown.contains(&item.id())
                    && !s.closed[item.seed]
                    && !held_back(s, item)
            };
            if let Some(at) = state.queue.iter().position(|item| open(&state, item)) {
                let item = state.queue.remove(at);
                state.in_flight.insert(item.key);
                if item.kind == frontier::Kind::Seed {
                    state.seeds_in_flight.push(item.priority);
                }
                state.taken += 1;
                let number = state.taken;
                self.trace_choice(number, &item);
                return Some((item, number));
            }
            if state.walking || state.queue.iter().any(|item| held_back(&state, item)) {
                // A walk under way may bring items; one held back waits for the seed ahead of it to be grown.
                self.changed.wait_for(&mut state, Duration::from_millis(100));
                continue;
            }
            if !state.dry {
                self.walk(&mut state);
                continue;
            }
            if !state.in_flight.is_empty() {
                self.changed.wait_for(&mut state, Duration::from_millis(100));
                continue;
            }
            // Nothing left down to the floor: widen where games are followed, else the run is done.
            if self.growth.seeds.iter().any(|s| s.follow) && state.floor / 8.0 >= MIN_FLOOR {
                state.floor /= 8.0;
                log::info!(
                    "every position down to the floor is grown: the walk goes down to a reach of {}",
                    state.floor
                );
                state.dry = false;
                continue;
            }
            self.changed.notify_all();
            return None;
        }
    }

    /// Walks ahead of the groups: when fewer items are left than there are groups and a step has ended since the
    /// last walk, walks again while the engines search, so that a group that finishes its item finds the next one
    /// waiting rather than walking itself with its engines idle. Ends with the groups.
    fn walk_ahead(&self) {
        let _done = Countdown { running: None, run: self };
        let mut state = self.state.lock();
        while !state.stopped && self.running.load(Ordering::Relaxed) > 0 {
            if !state.walking && !state.dry && state.queue.len() < self.groups && state.steps > state.walked_at {
                self.walk(&mut state);
                continue;
            }
            self.changed.wait_for(&mut state, Duration::from_millis(50));
        }
    }

    /// Walks the tree for the frontier, the lock let go meanwhile (the other groups go on recording their steps).
    fn walk(&self, state: &mut parking_lot::MutexGuard<'_, State>) {
        state.walking = true;
        let steps = state.steps;
        state.walked_at = steps;
        let (grown, in_flight, closed) = (state.grown.clone(), state.in_flight.clone(), state.closed.clone());
        let policy = Policy { floor: state.floor, ..self.growth.policy.clone() };
        let found = parking_lot::MutexGuard::unlocked(state, || -> Result<Frontier, AnalysisError> {
            let began = Instant::now();
            let view = self.store.read()?;
            let skip = Skip { grown: Some(&grown), in_flight: Some(&in_flight), closed: Some(&closed) };
            let frontier = walk(&view, &self.growth.seeds, &policy, &skip)?;
            log::debug!("walk: {} items in {:.3} s", frontier.items.len(), began.elapsed().as_secs_f64());
            Ok(frontier)
        });
        state.walking = false;
        match found {
            Ok(frontier) => {
                state.expected_before.get_or_insert(frontier.expected_answers);
                state.expected = frontier.expected_answers;
                // Nothing to grow for now; but a step that ended meanwhile may have grown what the walk did not see.
                state.dry = frontier.items.is_empty() && state.steps == steps;
                state.queue = frontier.items.into_iter().take(self.batch).collect();
            }
            Err(e) => self.fail(state, e),
        }
        self.changed.notify_all();
    }

    /// One line in the trace for an item taken: its priority and its terms.
    fn trace_choice(&self, number: u64, item: &Item) {
        let mut trace = self.growth.trace.clone();
        if !trace.enabled() {
            return;
        }
        let seed = &self.growth.seeds[item.seed];
        let kind = item.kind.name();
        let (shown, lack) = item.terms.shown();
        trace.line(format_args!(
            "grow {number}: priority {:.6e} = reach {:.6} x 2^{} (known {}, {}{}); {kind}, ply {} of seed {} ({}): \
             software depth {} at engine depth {}: {}",
            shown,
            item.terms.reach,
            lack,
            item.terms.known,
            item.terms.depths(),
            if item.terms.exit { ", games leave the tree" } else { "" },
            item.ply,
            item.seed + 1,
            seed.label,
            item.settle,
            item.engine_depth,
            shakmaty::fen::Fen::from_position(item.position(), shakmaty::EnPassantMode::Legal)
        ));
    }

    /// Grows `item` with `evaluator`'s engines: settles its software depth at its engine depth, within what is left
    /// of the run's budgets and of its seed's.
    fn step<E: Evaluator>(&self, evaluator: &mut E, item: &Item) -> Result<Report, AnalysisError> {
        let params = &self.growth.policy.params;
        let run_left = params.time.map(|t| t.saturating_sub(self.started.elapsed()));
        let seed_left = self.growth.seeds[item.seed].budget.map(|budget| {
            let spent = self.state.lock().progress[item.seed].seconds;
            budget.saturating_sub(Duration::from_secs_f64(spent))
        });
        let time = match (run_left, seed_left) {
            (Some(run), Some(own)) => Some(run.min(own)),
            (run, own) => run.or(own),
        };
        // The node budget is the run's: each step's search counts the nodes of all of them (the shared count).
        let step = params.clone().with_engine_depth(item.engine_depth).with_max_depth(item.settle).with_time(time);
        let options = AnalysisOptions {
            look_ahead: self.growth.look_ahead,
            trace: self.growth.trace.clone(),
            progress: if self.alone { self.growth.progress.clone() } else { None },
            stop: self.growth.stop.clone(),
            // Below its seed, an item's way there is the tree's own edges, which the walk followed.
            line_edges: self.growth.line_edges && item.ply == 0,
            nodes: Some(self.growth.nodes.clone()),
        };
        Analysis::with_options(self.store, evaluator, step, options)
            .run(&item.line, |iteration| (self.on_iteration)(item, iteration))
    }

    /// Records a step: its seed's progress and the run's totals, said by `on_step`; an error ends the run.
    fn record(&self, item: Item, number: u64, result: Result<Report, AnalysisError>, step_started: Instant) {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        state.in_flight.remove(&item.key);
        if let Some(at) =
            state.seeds_in_flight.iter().position(|p| *p == item.priority).filter(|_| item.kind == frontier::Kind::Seed)
        {
            state.seeds_in_flight.swap_remove(at);
        }
        state.steps += 1;
        // The tree has changed: a walk that found nothing may find something now.
        state.dry = false;
        match result {
            Ok(report) => {
                let seconds = step_started.elapsed().as_secs_f64();
                let seed = &self.growth.seeds[item.seed];
                let entry = &mut state.progress[item.seed];
                entry.evaluations += report.evaluations;
                entry.shared += report.shared;
                entry.failed += report.failed;
                entry.seconds += seconds;
                entry.steps += 1;
                if item.kind == frontier::Kind::Seed {
                    entry.settled_depth = entry.settled_depth.max(report.settled_depth);
                }
                let seed_spent = seed.budget.is_some_and(|b| entry.seconds >= b.as_secs_f64());
                if seed_spent {
                    state.closed[item.seed] = true;
                }
                if report.settled_depth.is_none_or(|d| d < item.settle) && !self.out_of_budget() && !seed_spent {
                    log::warn!(
                        "{} ({}): software depth {} did not settle (searches failed); it is left for a later run",
                        shakmaty::fen::Fen::from_position(item.position(), shakmaty::EnPassantMode::Legal),
                        seed.label,
                        item.settle
                    );
                    entry.stuck = true;
                }
                state.grown.insert(item.id());
                // The seed's next depth, at its rank now: one step halves a seed's priority, so a seed of half the
                // weight of another is taken after the other's second step (a root of weight 2^k runs k depths
                // ahead). A walk's batch held each seed's next step once, and seeds of any weight grew in lockstep.
                if item.kind == frontier::Kind::Seed && !state.closed[item.seed] && !state.progress[item.seed].stuck {
                    self.queue_next_of_seed(state, item.seed);
                }
                add(&mut state.totals, &report);
                if let Some(progress) = self.growth.progress.as_deref()
                    && !self.alone
                {
                    progress.clear();
                }
                (self.on_step)(&Step {
                    number,
                    item: &item,
                    seed: &state.progress[item.seed],
                    report: &report,
                    seconds,
                });
                state.last = Some(report);
            }
            Err(e) => self.fail(state, e),
        }
        self.changed.notify_all();
    }

    /// Puts seed `index`'s next item in the queue at its rank (see [`frontier::next_of_seed`]); a read that fails
    /// leaves it to the next walk.
    fn queue_next_of_seed(&self, state: &mut State, index: usize) {
        let policy = Policy { floor: state.floor, ..self.growth.policy.clone() };
        let next = self.store.read().map_err(AnalysisError::from).and_then(|view| {
            frontier::next_of_seed(&view, &self.growth.seeds, index, &policy).map_err(AnalysisError::from)
        });
        match next {
            Ok(Some(item)) if !state.grown.contains(&item.id()) && !state.queue.iter().any(|q| q.key == item.key) => {
                let at = state.queue.partition_point(|q| frontier::ranked_before(q, &item).is_lt());
                state.queue.insert(at, item);
            }
            Ok(_) => {}
            Err(e) => log::debug!("the next depth of a seed is left to the next walk: {e}"),
        }
    }

    /// Ends the run with `e`: `stop` is set, so that the other groups' searches end now.
    fn fail(&self, state: &mut State, e: AnalysisError) {
        state.error.get_or_insert(e);
        state.stopped = true;
        self.growth.stop.store(true, Ordering::Relaxed);
    }

    /// The status line, every quarter of a second while a group still grows; cleared at the end.
    fn show_status(&self, progress: &dyn Progress) {
        while self.running.load(Ordering::Relaxed) > 0 {
            std::thread::sleep(Duration::from_millis(250));
            let line = {
                let state = self.state.lock();
                let secs = self.started.elapsed().as_secs();
                format!(
                    "{}:{:02}:{:02} {} positions grown, {} growing, {} evaluations; {:.2} tree moves a game expected",
                    secs / 3600,
                    secs / 60 % 60,
                    secs % 60,
                    state.steps,
                    state.in_flight.len(),
                    state.totals.evaluations,
                    state.expected
                )
            };
            progress.show(&line);
        }
        progress.clear();
    }
}

/// Adds a step's counts to the run's.
fn add(totals: &mut Report, report: &Report) {
    totals.evaluations += report.evaluations;
    totals.engine_nodes += report.engine_nodes;
    totals.stored += report.stored;
    totals.unasked += report.unasked;
    totals.ahead += report.ahead;
    totals.ahead_used += report.ahead_used;
    totals.abandoned += report.abandoned;
    totals.aborted += report.aborted;
    totals.failed += report.failed;
    totals.shared += report.shared;
}
