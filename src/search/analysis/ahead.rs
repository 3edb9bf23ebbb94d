//! Searches ahead of their turn: how a pass runs its searches on the engines, and what the engines it leaves free do.
//!
//! A pass still plans from the store and stores its answers together, so what is stored is a one-engine run's.
//! Engines the pass leaves free run the searches the next passes will likely ask for; a pass takes an answer that is
//! already in, waits for a search already running, and answers a search for alternatives from its moves searched
//! alone. See [`Speculation`].

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use crate::store::{
    Change,
    claims::{Claim, ClaimedAnswer, LEASE, Seen},
};

use super::{Analysis, AnalysisError, Trace, change_for, claimed, from_claim, walk::walk_tree};
use crate::search::{
    evaluator::{Answer, Evaluator, Job},
    host::{JobKey, Planned, Purpose},
    overlay::Overlay,
};
use crate::values::graph::StoreGraph;

/// Searches run ahead of their turn, so that no engine waits while a pass waits for its slowest search
/// (docs/design.md §5.2).
///
/// When an engine is free and the pass has nothing more to start, the host starts, in this order:
/// - what the next pass will likely ask for, as far as this pass's answers already tell (the store with them laid
///   over it);
/// - what a walk of the tree as it will be once every answer received so far is stored (the [`Overlay`]) plans, at
///   the depth being settled and then deeper: the next alternative of a node, the child of a move just found, the
///   next depth's leaves;
/// - where engines are still left free, each move of a search for alternatives alone.
///
/// An answer waits in [`Flights`](crate::search::host::Flights) until a pass asks for that very search, and only
/// then is it stored. So the store, and every decision the search settles, are those of a run with one engine. A
/// running search that the tree no longer leads to is stopped; a search no pass asked for is dropped at the end of
/// the run. Both are counted.
#[derive(Default)]
pub(super) struct Speculation {
    /// The tree with every answer of this run in it; `None` when nothing is run ahead.
    pub(super) overlay: Option<Overlay>,
    /// Searches the last look ahead found, most useful first.
    pub(super) queue: VecDeque<Planned>,
    /// The overlay generation the queue was planned from.
    pub(super) planned_at: Option<u64>,
    /// Searches started ahead of their turn.
    pub(super) started: u64,
    /// Of those, searches a pass took.
    pub(super) used: u64,
    /// Every search the last look ahead reached, running or not: one running ahead that is not among them is
    /// stopped.
    pub(super) wanted: HashSet<JobKey>,
    /// Searches stopped because no look ahead reached them any more.
    pub(super) aborted: u64,
    /// Engine time of answered searches and their count, for the time an aborted search would have taken.
    pub(super) answered_time: Duration,
    pub(super) answered: u64,
    /// Answers waiting for their turn that another process found (not counted as started or used here).
    pub(super) from_others: HashSet<JobKey>,
}

impl Speculation {
    /// The engine time stopping a search after `ran` saves: what a search takes on average, less what it ran.
    fn saved_by_stopping(&self, ran: Duration) -> Duration {
        let mean = self.answered_time.checked_div(self.answered.max(1) as u32).unwrap_or_default();
        mean.saturating_sub(ran)
    }
}

/// What a pass waits for.
struct Pass {
    answers: Vec<Option<Result<Answer, String>>>,
    /// Who waits for each running search.
    waiting: HashMap<JobKey, Vec<Waiter>>,
    composites: Vec<Composite>,
    /// Planned searches still without an answer.
    outstanding: usize,
    /// Answers in so far, and how many there were when the next pass was last predicted from them.
    known: usize,
    predicted_at: Option<usize>,
    /// Searches the next pass will likely ask for, as far as this pass's answers tell: those to start, and all of
    /// them (a search started for the next pass is not stopped).
    next: VecDeque<Planned>,
    predicted: HashSet<JobKey>,
    /// Planned searches another process runs (its claim holds): their answers are read from the claims.
    foreign: Vec<usize>,
    last_poll: Instant,
}

/// How often a pass looks for the answers of searches another process runs.
const POLL: Duration = Duration::from_millis(20);

impl Pass {
    /// The answer of planned search `i`.
    fn answer(&mut self, i: usize, answer: Result<Answer, String>) {
        self.answers[i] = Some(answer);
        self.known += 1;
    }
}

/// Who waits for a running search.
#[derive(Debug, Clone, Copy)]
enum Waiter {
    /// The pass's planned search `i`.
    Plan(usize),
    /// A move of composite `c`.
    Part(usize),
}

/// A planned search for alternatives answered by searches of each move alone.
struct Composite {
    /// Its place in the pass.
    index: usize,
    parts: Vec<JobKey>,
    /// Parts still running.
    missing: usize,
    failure: Option<String>,
}

/// The searches a look ahead runs for a planned one: a search for the best of several alternatives becomes one
/// search of each move alone, so that they run at once.
fn singles(plan: Planned) -> Vec<Planned> {
    if !plan.splits() {
        return vec![plan];
    }
    plan.job
        .searchmoves
        .iter()
        .map(|m| Planned {
            key: plan.key,
            purpose: Purpose::Single,
            job: Job::new(plan.job.position.clone(), vec![*m], plan.job.depth),
        })
        .collect()
}

impl<E: Evaluator> Analysis<'_, E> {
    /// Runs a pass's planned searches and stores every answer, together; engines the pass leaves free run searches
    /// ahead of their turn. Returns true when stopped.
    ///
    /// A planned search that already ran ahead is not asked again: its answer is taken, or awaited while it runs. A
    /// search for alternatives whose every move was searched alone ahead of its turn is answered by the best of them.
    pub(super) fn run_pass(
        &mut self,
        planned: Vec<Planned>,
        depth: u8,
        pass_number: u32,
    ) -> Result<bool, AnalysisError> {
        let pass_started = Instant::now();
        let total = planned.len();
        let mut pass = Pass {
            answers: vec![None; total],
            waiting: HashMap::with_capacity(total),
            composites: Vec::new(),
            outstanding: 0,
            known: 0,
            predicted_at: None,
            next: VecDeque::new(),
            predicted: HashSet::new(),
            foreign: Vec::new(),
            last_poll: Instant::now(),
        };
        let mut from_others = Vec::new();
        let mut to_start: VecDeque<usize> = VecDeque::new();
        for (i, plan) in planned.iter().enumerate() {
            let job = JobKey::of(plan);
            if let Some(answer) = self.flights.take(&job) {
                trace!(self.trace, "adopt {} {:?}: answered ahead of its turn", plan.key, plan.purpose);
                if !self.speculation.from_others.remove(&job) {
                    self.speculation.used += 1;
                }
                pass.answer(i, Ok(answer));
                continue;
            }
            if let Some(parts) = self.composable(plan) {
                trace!(
                    self.trace,
                    "compose {} {:?}: every move searched alone ahead of its turn", plan.key, plan.purpose
                );
                let composite = pass.composites.len();
                let mut missing = 0;
                for part in &parts {
                    if !self.flights.has_answer(part) {
                        missing += 1;
                        pass.waiting.entry(part.clone()).or_default().push(Waiter::Part(composite));
                    }
                }
                if missing == 0 {
                    pass.answer(i, self.compose(&parts));
                } else {
                    pass.outstanding += 1;
                }
                pass.composites.push(Composite { index: i, parts, missing, failure: None });
                continue;
            }
            match self.flights.claim(&job) {
                Some(true) => {
                    trace!(self.trace, "adopt {} {:?}: running ahead of its turn", plan.key, plan.purpose);
                    self.speculation.used += 1;
                }
                Some(false) => {}
                None => match self.seen_elsewhere(&job) {
                    Seen::Answered(answer) => {
                        pass.waiting.entry(job).or_default().push(Waiter::Plan(i));
                        pass.outstanding += 1;
                        from_others.extend(self.take_from_other(plan, answer, &mut pass));
                        continue;
                    }
                    Seen::Held { pid } => {
                        trace!(self.trace, "wait {} {:?}: process {pid} runs it", plan.key, plan.purpose);
                        pass.foreign.push(i);
                    }
                    Seen::Free | Seen::Mine => to_start.push_back(i),
                },
            }
            pass.waiting.entry(job).or_default().push(Waiter::Plan(i));
            pass.outstanding += 1;
        }
        self.lay_over(&from_others)?;
        // Engines this pass leaves free look ahead, even when it has everything it needs.
        self.start_searches(&planned, &mut to_start, &mut pass, depth)?;
        let mut stopped = false;
        let mut renewed = Instant::now();
        while pass.outstanding > 0 {
            if self.out_of_time() {
                self.abandon();
                stopped = true;
                break;
            }
            if !pass.foreign.is_empty() && pass.last_poll.elapsed() >= POLL {
                self.poll_others(&planned, &mut to_start, &mut pass)?;
            }
            if renewed.elapsed() >= LEASE / 3 {
                self.renew_claims();
                renewed = Instant::now();
            }
            self.start_searches(&planned, &mut to_start, &mut pass, depth)?;
            self.show_progress(depth, pass_number, total - pass.outstanding, total);
            let wait = if pass.foreign.is_empty() { Duration::from_millis(100) } else { POLL };
            let Some(first) = self.evaluator.next(wait) else { continue };
            // Every answer that is in now, before the next look ahead.
            let mut overlay_changes = Vec::new();
            let mut next = Some(first);
            while let Some((id, result)) = next.take() {
                overlay_changes.extend(self.land(id, result, &mut pass));
                next = self.evaluator.next(Duration::ZERO);
            }
            self.lay_over(&overlay_changes)?;
            self.stop_unwanted(depth, &pass)?;
        }
        let answers_done = Instant::now();
        let mut changes = Vec::with_capacity(total);
        for (plan, answer) in planned.iter().zip(pass.answers) {
            match answer {
                None => {} // stopped before it was answered
                Some(Ok(answer)) => {
                    self.stored_answers += 1;
                    trace!(
                        self.trace,
                        "answer {} {:?}: {} {} depth {}",
                        plan.key,
                        plan.purpose,
                        answer.best,
                        answer.score,
                        answer.depth
                    );
                    let engine = self.engine_number(&answer);
                    match change_for(plan, &answer, engine) {
                        Some(change) => changes.push(change),
                        None => {
                            log::warn!("answer for {} does not fit its position; left out", plan.key);
                            self.failed.insert(plan.key);
                            self.failures += 1;
                        }
                    }
                }
                Some(Err(e)) if stopped => {
                    log::debug!("engine search of {} ended with the analysis: {e}", plan.key);
                    self.failed.insert(plan.key);
                }
                Some(Err(e)) => {
                    log::warn!("engine search of {} failed: {e}", plan.key);
                    trace!(self.trace, "failed {} {:?}: {e}", plan.key, plan.purpose);
                    self.failed.insert(plan.key);
                    self.failures += 1;
                }
            }
        }
        self.store_pass(changes)?;
        log::debug!(
            "depth {depth} pass {pass_number}: {total} searches answered after {:.1} ms, stored {:.1} ms later",
            (answers_done - pass_started).as_secs_f64() * 1e3,
            answers_done.elapsed().as_secs_f64() * 1e3
        );
        self.trace.flush();
        Ok(stopped)
    }

    /// The searches of each move alone that answer `plan`, a search for the best of several alternatives, when every
    /// one of them ran (or runs) ahead of its turn.
    fn composable(&self, plan: &Planned) -> Option<Vec<JobKey>> {
        if !plan.splits() {
            return None;
        }
        let parts: Vec<JobKey> =
            plan.job.searchmoves.iter().map(|m| JobKey::single(plan.key, m, plan.job.depth)).collect();
        parts.iter().all(|p| self.flights.has_answer(p) || self.flights.is_running(p)).then_some(parts)
    }

    /// The best of the answers of moves searched alone: the answer a search of all of them would give. Ties go to
    /// the move that comes first in UCI notation, so the answer does not depend on the order they came in. The best
    /// move's answer is taken; the others stay for the next search of the node's alternatives.
    fn compose(&mut self, parts: &[JobKey]) -> Result<Answer, String> {
        let best = parts
            .iter()
            .filter_map(|part| Some((part, self.flights.peek(part)?)))
            .max_by(|a, b| a.1.score.cmp(&b.1.score).then_with(|| b.1.best.to_string().cmp(&a.1.best.to_string())))
            .map(|(part, _)| part.clone())
            .ok_or_else(|| "no move was answered".to_owned())?;
        let nodes = parts.iter().filter_map(|part| self.flights.peek(part)).map(|a| a.nodes).sum();
        if !self.speculation.from_others.remove(&best) {
            self.speculation.used += 1;
        }
        let mut answer = self.flights.take(&best).ok_or_else(|| "the best move's answer is gone".to_owned())?;
        answer.nodes = nodes;
        Ok(answer)
    }

    /// Fills free engines: first with the pass's own searches, then with searches ahead of their turn.
    fn start_searches(
        &mut self,
        planned: &[Planned],
        to_start: &mut VecDeque<usize>,
        pass: &mut Pass,
        depth: u8,
    ) -> Result<(), AnalysisError> {
        let workers = self.evaluator.workers();
        while self.flights.running() < workers {
            if let Some(i) = to_start.pop_front() {
                let plan = planned[i].clone();
                let job = JobKey::of(&plan);
                match self.claim(&job) {
                    Claim::Granted => {}
                    Claim::Held { pid } => {
                        trace!(self.trace, "wait {} {:?}: process {pid} runs it", plan.key, plan.purpose);
                        pass.foreign.push(i);
                        continue;
                    }
                    Claim::Answered(answer) => {
                        let change = self.take_from_other(&plan, answer, pass);
                        self.lay_over(&Vec::from_iter(change))?;
                        continue;
                    }
                }
                let id = self.flights.book(plan.clone(), false);
                if let Err(e) = self.evaluator.submit(id, plan.job) {
                    log::warn!("search of {} not started: {e}", plan.key);
                    if let Some(flight) = self.flights.land(id) {
                        self.release(&flight.job);
                        pass.waiting.remove(&flight.job);
                    }
                    pass.answer(i, Err(e));
                    pass.outstanding -= 1;
                }
                continue;
            }
            let Some(plan) = self.next_ahead(depth, planned, pass)? else { break };
            trace!(self.trace, "ahead {} {:?}: started ahead of its turn", plan.key, plan.purpose);
            let id = self.flights.book(plan.clone(), true);
            self.speculation.started += 1;
            if let Err(e) = self.evaluator.submit(id, plan.job) {
                log::debug!("search ahead of {} not started: {e}", plan.key);
                if let Some(flight) = self.flights.land(id) {
                    self.release(&flight.job);
                }
                self.speculation.started -= 1;
                break;
            }
        }
        Ok(())
    }

    /// The most useful search to run ahead of its turn, if any. First what the next pass will likely ask for, as far
    /// as this pass's answers tell; then the first search the look-ahead walk planned that is neither running nor
    /// answered. Each walk is made again whenever answers came in since the last one.
    fn next_ahead(
        &mut self,
        depth: u8,
        planned: &[Planned],
        pass: &mut Pass,
    ) -> Result<Option<Planned>, AnalysisError> {
        let Some(generation) = self.speculation.overlay.as_ref().map(Overlay::generation) else { return Ok(None) };
        if pass.predicted_at != Some(pass.known) {
            let predicted = self.predict_next_pass(depth, planned, pass)?;
            pass.predicted = predicted.iter().map(JobKey::of).collect();
            pass.next = predicted.into_iter().filter(|plan| self.flights.is_new(&JobKey::of(plan))).collect();
            pass.predicted_at = Some(pass.known);
        }
        while let Some(plan) = pass.next.pop_front() {
            if self.claim_ahead(&plan)? {
                return Ok(Some(plan));
            }
        }
        if self.speculation.planned_at != Some(generation) {
            self.look_ahead_walk(depth)?;
        }
        while let Some(plan) = self.speculation.queue.pop_front() {
            if self.claim_ahead(&plan)? {
                return Ok(Some(plan));
            }
        }
        Ok(None)
    }

    /// Whether `plan`, a search to run ahead of its turn, is to start now: neither running nor answered here, and
    /// claimed for this run. An answer another process found waits for its turn like one found here.
    fn claim_ahead(&mut self, plan: &Planned) -> Result<bool, AnalysisError> {
        let job = JobKey::of(plan);
        if !self.flights.is_new(&job) {
            return Ok(false);
        }
        match self.claim(&job) {
            Claim::Granted => Ok(true),
            Claim::Held { .. } => Ok(false),
            Claim::Answered(answer) => {
                self.shared += 1;
                let answer = from_claim(answer);
                if let Some(change) = change_for(plan, &answer, None) {
                    self.speculation.from_others.insert(job.clone());
                    self.flights.keep(job, answer);
                    self.lay_over(&[change])?;
                }
                Ok(false)
            }
        }
    }

    /// The answer another process found for a planned search, handed to whoever waits for it in this pass.
    /// Returns the change that lays it over the tree.
    fn take_from_other(&mut self, plan: &Planned, answer: ClaimedAnswer, pass: &mut Pass) -> Option<Change> {
        trace!(self.trace, "shared {} {:?}: answered by another process", plan.key, plan.purpose);
        self.shared += 1;
        self.deliver(JobKey::of(plan), plan, Ok(from_claim(answer)), pass)
    }

    /// What other processes sharing the store say of `job`, without claiming it.
    fn seen_elsewhere(&self, job: &JobKey) -> Seen {
        let Some(claims) = &self.claims else { return Seen::Free };
        match claims.look([job.bytes().as_slice()]) {
            Ok(mut seen) => seen.pop().unwrap_or(Seen::Free),
            Err(e) => {
                log::debug!("claims not read: {e}");
                Seen::Free
            }
        }
    }

    /// Claims `job` for this run before it starts. Without usable claims, every search is this run's to start.
    fn claim(&self, job: &JobKey) -> Claim {
        let Some(claims) = &self.claims else { return Claim::Granted };
        claims.claim(&job.bytes()).unwrap_or_else(|e| {
            log::debug!("search not claimed, started all the same: {e}");
            Claim::Granted
        })
    }

    /// Gives up the claim on a search that will not be answered here.
    fn release(&self, job: &JobKey) {
        if let Some(claims) = &self.claims
            && let Err(e) = claims.release([job.bytes().as_slice()])
        {
            log::debug!("claim not released (it expires): {e}");
        }
    }

    /// Renews the claims of every running search.
    fn renew_claims(&self) {
        let Some(claims) = &self.claims else { return };
        let jobs: Vec<Vec<u8>> = self.flights.jobs().map(JobKey::bytes).collect();
        if let Err(e) = claims.renew(jobs.iter().map(Vec::as_slice)) {
            log::log!(crate::store::claims::level_of(&e), "claims not renewed: {e}");
        }
    }

    /// Looks for the answers of the pass's searches that other processes run. A search whose claim no longer
    /// holds (stopped, or its process died) is this run's to start.
    fn poll_others(
        &mut self,
        planned: &[Planned],
        to_start: &mut VecDeque<usize>,
        pass: &mut Pass,
    ) -> Result<(), AnalysisError> {
        pass.last_poll = Instant::now();
        let Some(claims) = &self.claims else {
            to_start.extend(pass.foreign.drain(..));
            return Ok(());
        };
        let jobs: Vec<Vec<u8>> = pass.foreign.iter().map(|&i| JobKey::of(&planned[i]).bytes()).collect();
        let seen = claims.look(jobs.iter().map(Vec::as_slice))?;
        let mut changes = Vec::new();
        for (i, seen) in std::mem::take(&mut pass.foreign).into_iter().zip(seen) {
            match seen {
                Seen::Held { .. } => pass.foreign.push(i),
                Seen::Answered(answer) => changes.extend(self.take_from_other(&planned[i], answer, pass)),
                Seen::Free | Seen::Mine => to_start.push_front(i),
            }
        }
        self.lay_over(&changes)
    }

    /// Stores a pass's answers in one transaction, so that another process sharing the store never plans from half
    /// a pass. Should the store refuse the whole (a change that does not fit), each change is stored alone; a store
    /// that takes no more writes (its disk failed) ends the run with that error.
    fn store_pass(&mut self, changes: Vec<Change>) -> Result<(), AnalysisError> {
        if changes.is_empty() {
            return Ok(());
        }
        match self.store.writer().submit(changes.clone()).wait() {
            Ok(()) => Ok(()),
            // The disk failed (no space, an I/O error): the run ends with it, once; nothing is tried again.
            Err(e) if e.stops_writes() => Err(e.into()),
            Err(e) => {
                log::warn!("a pass's answers were refused together ({e}); storing them one by one");
                let receipts: Vec<_> = changes.into_iter().map(|c| self.store.writer().submit(vec![c])).collect();
                for receipt in receipts {
                    match receipt.wait() {
                        Ok(()) => {}
                        Err(e) if e.stops_writes() => return Err(e.into()),
                        Err(e) => {
                            log::warn!("an answer was not stored: {e}");
                            self.failures += 1;
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// What the next pass will ask for where it depends only on this pass's answers in so far: the walk of the store
    /// with them laid over it.
    fn predict_next_pass(&self, depth: u8, planned: &[Planned], pass: &Pass) -> Result<Vec<Planned>, AnalysisError> {
        let Some(root) = &self.root else { return Ok(Vec::new()) };
        let changes: Vec<Change> = planned
            .iter()
            .zip(&pass.answers)
            .filter_map(|(plan, answer)| change_for(plan, answer.as_ref()?.as_ref().ok()?, None))
            .collect();
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let view = self.store.read()?;
        let mut next = Overlay::default();
        next.apply(&view, &changes)?;
        let graph = StoreGraph::new(&view);
        let mut quiet = Trace::off();
        let result = walk_tree(&next.over(&graph), &self.params, &mut quiet, &self.failed, root, depth)?;
        if let Some(e) = graph.take_error() {
            return Err(e.into());
        }
        Ok(result.planned)
    }

    /// Walks the overlaid tree at `depth` and at each depth after it up to the look ahead, and queues the new
    /// searches they plan, shallowest depth first. Where engines would still be left free, the searches for
    /// alternatives it planned are split into searches of each move alone, queued last. Every search the walks reach
    /// (new, running or answered), and the moves of every search for alternatives, are the wanted ones.
    fn look_ahead_walk(&mut self, depth: u8) -> Result<(), AnalysisError> {
        let (Some(root), Some(overlay)) = (&self.root, &self.speculation.overlay) else { return Ok(()) };
        let free = self.evaluator.workers().saturating_sub(self.flights.running());
        let last = depth.saturating_add(self.look_ahead.unwrap_or(0)).min(self.params.max_depth);
        let view = self.store.read()?;
        let graph = StoreGraph::new(&view);
        let tree = overlay.over(&graph);
        let mut queue = VecDeque::new();
        let mut wanted: HashSet<JobKey> = HashSet::new();
        let mut terminal = Vec::new();
        let mut quiet = Trace::off();
        let flights = &self.flights;
        let enqueue = |plan: Planned, queue: &mut VecDeque<Planned>, wanted: &mut HashSet<JobKey>| {
            let job = JobKey::of(&plan);
            if wanted.insert(job.clone()) && flights.is_new(&job) {
                queue.push_back(plan);
            }
        };
        let mut alternatives = Vec::new();
        for ahead in depth..=last {
            let result = walk_tree(&tree, &self.params, &mut quiet, &self.failed, root, ahead)?;
            terminal.extend(result.terminal);
            for plan in result.planned {
                if plan.splits() {
                    alternatives.push(plan.clone());
                }
                enqueue(plan, &mut queue, &mut wanted);
            }
        }
        for plan in alternatives.into_iter().flat_map(singles) {
            if queue.len() >= free {
                wanted.insert(JobKey::of(&plan));
            } else {
                enqueue(plan, &mut queue, &mut wanted);
            }
        }
        if let Some(e) = graph.take_error() {
            return Err(e.into());
        }
        self.speculation.queue = queue;
        self.speculation.wanted = wanted;
        if let Some(overlay) = &mut self.speculation.overlay {
            overlay.apply(&view, &terminal)?;
            self.speculation.planned_at = Some(overlay.generation());
        }
        Ok(())
    }

    /// Takes in the answer of search `id`: a pass's answer goes to the pass, one that ran ahead waits for its turn.
    /// Returns the change that lays the answer over the tree for the next look ahead.
    fn land(&mut self, id: u64, result: Result<Answer, String>, pass: &mut Pass) -> Option<Change> {
        let flight = self.flights.land(id)?;
        if let Some(claims) = &self.claims {
            let job = flight.job.bytes();
            let shared = match &result {
                Ok(answer) => claims.answer(&job, &claimed(answer)),
                Err(_) => claims.release([job.as_slice()]),
            };
            if let Err(e) = shared {
                log::debug!("answer not shared with other processes: {e}");
            }
        }
        if let Ok(answer) = &result {
            self.evaluations += 1;
            self.engine_nodes += answer.nodes;
            self.nodes_so_far.store(self.engine_nodes, Ordering::Relaxed);
            self.speculation.answered_time += flight.started.elapsed();
            self.speculation.answered += 1;
        }
        self.deliver(flight.job, &flight.plan, result, pass)
    }

    /// Hands an answer to whoever waits for it: the pass's planned searches, or searches for alternatives composed
    /// of moves searched alone; one nobody waits for is kept until a pass asks for it. Returns the change that lays
    /// the answer over the tree for the next look ahead.
    fn deliver(
        &mut self,
        job: JobKey,
        plan: &Planned,
        result: Result<Answer, String>,
        pass: &mut Pass,
    ) -> Option<Change> {
        let waiters = pass.waiting.remove(&job).unwrap_or_default();
        let mut taken = false;
        let mut complete = Vec::new();
        for waiter in &waiters {
            match waiter {
                Waiter::Plan(i) => {
                    pass.answer(*i, result.clone());
                    pass.outstanding -= 1;
                    taken = true;
                }
                Waiter::Part(c) => {
                    let composite = &mut pass.composites[*c];
                    if let Err(e) = &result {
                        composite.failure.get_or_insert_with(|| e.clone());
                    }
                    composite.missing -= 1;
                    if composite.missing == 0 {
                        pass.outstanding -= 1;
                        complete.push(*c);
                    }
                }
            }
        }
        let laid_over = self.speculation.overlay.is_some();
        let change = match result {
            Ok(answer) => {
                // The change is needed to keep the answer (it must fit its position) or to lay it over the tree.
                let change = (laid_over || !taken).then(|| change_for(plan, &answer, None)).flatten();
                if !taken {
                    match change {
                        Some(_) => self.flights.keep(job, answer),
                        None => log::debug!("answer for {} does not fit its position; dropped", plan.key),
                    }
                }
                change.filter(|_| laid_over)
            }
            Err(e) => {
                if waiters.is_empty() {
                    // A pass that needs it will ask again.
                    log::debug!("search ahead of {} failed: {e}", plan.key);
                }
                None
            }
        };
        for c in complete {
            let composite = &pass.composites[c];
            let (index, failure, parts) = (composite.index, composite.failure.clone(), composite.parts.clone());
            let answer = match failure {
                Some(e) => Err(e),
                None => self.compose(&parts),
            };
            pass.answer(index, answer);
        }
        change
    }

    /// Stops the searches running ahead of their turn that the tree, with every answer in so far, no longer leads to
    /// (their node was cut off or left the window), unless this pass waits for them or predicts them for the next.
    fn stop_unwanted(&mut self, depth: u8, pass: &Pass) -> Result<(), AnalysisError> {
        let Some(generation) = self.speculation.overlay.as_ref().map(Overlay::generation) else { return Ok(()) };
        if self.flights.speculative().next().is_none() {
            return Ok(());
        }
        if self.speculation.planned_at != Some(generation) {
            self.look_ahead_walk(depth)?;
        }
        let unwanted: Vec<u64> = self
            .flights
            .speculative()
            .filter(|(_, job)| {
                !self.speculation.wanted.contains(job)
                    && !pass.waiting.contains_key(job)
                    && !pass.predicted.contains(job)
            })
            .map(|(id, _)| id)
            .collect();
        for id in unwanted {
            if !self.evaluator.cancel(id) {
                continue;
            }
            let Some(flight) = self.flights.land(id) else { continue };
            self.release(&flight.job);
            let ran = flight.started.elapsed();
            trace!(
                self.trace,
                "abort {} {:?}: the tree no longer leads to it; ran {:.1} ms",
                flight.plan.key,
                flight.plan.purpose,
                ran.as_secs_f64() * 1e3
            );
            self.speculation.aborted += 1;
            self.aborted_ran += ran;
            self.aborted_saved += self.speculation.saved_by_stopping(ran);
        }
        Ok(())
    }

    /// Lays changes over the tree that the look ahead walks (nothing when nothing runs ahead).
    pub(super) fn lay_over(&mut self, changes: &[Change]) -> Result<(), AnalysisError> {
        if let Some(overlay) = &mut self.speculation.overlay
            && !changes.is_empty()
        {
            let view = self.store.read()?;
            overlay.apply(&view, changes)?;
        }
        Ok(())
    }

    /// Stops every running search; their answers, if they still come, are ignored.
    pub(super) fn abandon(&mut self) {
        if self.flights.running() > 0 {
            if let Some(claims) = &self.claims {
                let jobs: Vec<Vec<u8>> = self.flights.jobs().map(JobKey::bytes).collect();
                if let Err(e) = claims.release(jobs.iter().map(Vec::as_slice)) {
                    log::debug!("claims not released (they expire): {e}");
                }
            }
            self.abandoned += self.flights.running() as u64;
            self.evaluator.cancel_all();
            self.flights.abandon_all();
        }
    }
}
