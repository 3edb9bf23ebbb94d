//! The scheduler: how a pass runs its searches on the engines, and what the engines it leaves free do.
//!
//! It submits the searches a pass planned, shares them with other processes through the store's claims, runs
//! searches ahead of their turn on engines a pass leaves free, stops those the tree no longer leads to, and hands
//! each pass its answers. A pass still plans from the store and stores its answers together, so what is stored is a
//! one-engine run's. Engines the pass leaves free run the searches the next passes will likely ask for; a pass takes
//! an answer that is already in, waits for a search already running, and answers a search for alternatives from its
//! moves searched alone. See [`Speculation`].
//!
//! It plans nothing itself (the [`Walker`] does) and writes nothing to the tree (the [`Recorder`] does): both are
//! lent to it, with the trace, the budget and the progress line, as a [`Context`].

mod ahead;
mod shared;

use std::{
    collections::{HashMap, HashSet, VecDeque},
    time::{Duration, Instant},
};

use crate::store::{
    Change, Store,
    claims::{Claim, Claims, LEASE, Seen},
};

use super::{AnalysisError, Budget, Trace, recorder::Recorder, recorder::change_for, walk::Walker};
use crate::logger::Progress;
use crate::search::{
    evaluator::{Answer, EvalError, Evaluator, Job},
    host::{Flights, JobKey, Planned, Purpose},
    overlay::Overlay,
};

/// The answers of a pass's planned searches, in their order: `None` for a search stopped before its answer.
pub(super) type Answers = Vec<Option<Result<Answer, EvalError>>>;

/// What the scheduler works with beside its own state, lent by the analysis: the walk that plans, the recorder that
/// counts, the trace, the run's budget and its progress line.
pub(super) struct Context<'c, 'a> {
    pub(super) walk: &'c Walker<'a>,
    pub(super) recorder: &'c mut Recorder<'a>,
    pub(super) trace: &'c mut Trace,
    pub(super) budget: &'c Budget,
    pub(super) progress: Option<&'c dyn Progress>,
}

/// The searches of a run on its engines: those running, those answered ahead of their turn, the claims shared with
/// other processes.
pub(super) struct Scheduler<'a, E: Evaluator> {
    store: &'a Store,
    evaluator: E,
    /// Software depths past the one being settled in which searches may run ahead of their turn; `None`: none.
    look_ahead: Option<u8>,
    flights: Flights,
    speculation: Speculation,
    /// This run's claims on searches in the store, shared with other processes; `None` when they cannot be used
    /// (the run then shares nothing).
    claims: Option<Claims>,
    /// Searches stopped before their answer.
    abandoned: u64,
    /// Engine time that searches stopped as no longer needed had run, and that stopping them saved.
    aborted_ran: Duration,
    aborted_saved: Duration,
}

/// What ran ahead of its turn in a run, and what was stopped, for its report.
pub(super) struct Scheduled {
    pub(super) started: u64,
    pub(super) used: u64,
    /// Answered here and never asked for by a pass.
    pub(super) unasked: u64,
    pub(super) abandoned: u64,
    pub(super) aborted: u64,
    pub(super) aborted_ran: Duration,
    pub(super) aborted_saved: Duration,
}

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
struct Speculation {
    /// The tree with every answer of this run in it; `None` when nothing is run ahead.
    overlay: Option<Overlay>,
    /// Searches the last look ahead found, most useful first.
    queue: VecDeque<Planned>,
    /// The overlay generation the queue was planned from.
    planned_at: Option<u64>,
    /// Searches started ahead of their turn.
    started: u64,
    /// Of those, searches a pass took.
    used: u64,
    /// Every search the last look ahead reached, running or not: one running ahead that is not among them is
    /// stopped.
    wanted: HashSet<JobKey>,
    /// Searches stopped because no look ahead reached them any more.
    aborted: u64,
    /// Engine time of answered searches and their count, for the time an aborted search would have taken.
    answered_time: Duration,
    answered: u64,
    /// Answers waiting for their turn that another process found (not counted as started or used here).
    from_others: HashSet<JobKey>,
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
    answers: Vec<Option<Result<Answer, EvalError>>>,
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
    /// Planned searches to start, first first.
    to_start: VecDeque<usize>,
}

/// How often a pass looks for the answers of searches another process runs.
const POLL: Duration = Duration::from_millis(20);
/// The longest a pass waits for an answer before it looks at its budget again (a stop among it).
const STOP_CHECK: Duration = Duration::from_millis(10);

impl Pass {
    /// A pass of `total` planned searches, none answered yet.
    fn new(total: usize) -> Pass {
        Pass {
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
            to_start: VecDeque::new(),
        }
    }

    /// Planned search `i` waits for the search `job`.
    fn wait_for(&mut self, job: JobKey, i: usize) {
        self.waiting.entry(job).or_default().push(Waiter::Plan(i));
        self.outstanding += 1;
    }

    /// The answer of planned search `i`.
    fn answer(&mut self, i: usize, answer: Result<Answer, EvalError>) {
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
    failure: Option<EvalError>,
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

impl<'a, E: Evaluator> Scheduler<'a, E> {
    pub(super) fn new(store: &'a Store, evaluator: E, look_ahead: Option<u8>) -> Self {
        Scheduler {
            store,
            evaluator,
            look_ahead,
            flights: Flights::default(),
            speculation: Speculation::default(),
            claims: None,
            abandoned: 0,
            aborted_ran: Duration::ZERO,
            aborted_saved: Duration::ZERO,
        }
    }

    pub(super) fn evaluator(&self) -> &E {
        &self.evaluator
    }

    pub(super) fn evaluator_mut(&mut self) -> &mut E {
        &mut self.evaluator
    }

    /// Sets up a run: its claims in the store (a run that cannot use them shares nothing), and the overlay of its
    /// answers where searches run ahead of their turn (several engines and a look ahead).
    pub(super) fn begin(&mut self) {
        self.claims = match self.store.claims() {
            Ok(claims) => Some(claims),
            Err(e) => {
                log::log!(crate::store::claims::level_of(&e), "searches are not shared with other processes: {e}");
                None
            }
        };
        self.speculation = Speculation::default();
        if self.look_ahead.is_some() && self.evaluator.workers() > 1 {
            self.speculation.overlay = Some(Overlay::default());
        }
    }

    /// Ends a run: every search still running is stopped (it ran ahead of its turn, and no pass will ask for it now)
    /// and the claims are released (answers stay for other processes). Returns what ran ahead, and traces it.
    pub(super) fn end(&mut self, trace: &mut Trace) -> Scheduled {
        self.abandon();
        self.claims = None;
        let speculation = &self.speculation;
        let unused = speculation.started.saturating_sub(speculation.used);
        // Answered here and never taken: the answers of other processes kept beside them are theirs.
        let unasked = self.flights.waiting().filter(|job| !speculation.from_others.contains(*job)).count() as u64;
        if speculation.started > 0 {
            trace!(
                trace,
                "searches run ahead of their turn: {} started, {} taken by a pass, {unused} not needed; {} stopped when \
                 the tree no longer led to them ({:.1} engine seconds saved)",
                speculation.started,
                speculation.used,
                speculation.aborted,
                self.aborted_saved.as_secs_f64()
            );
        }
        Scheduled {
            started: speculation.started,
            used: speculation.used,
            unasked,
            abandoned: self.abandoned,
            aborted: speculation.aborted,
            aborted_ran: self.aborted_ran,
            aborted_saved: self.aborted_saved,
        }
    }

    /// Runs a pass's planned searches and returns their answers, and whether the run must end (its searches still
    /// running are then abandoned); engines the pass leaves free run searches ahead of their turn.
    ///
    /// A planned search that already ran ahead is not asked again: its answer is taken, or awaited while it runs. A
    /// search for alternatives whose every move was searched alone ahead of its turn is answered by the best of them.
    pub(super) fn answer_pass(
        &mut self,
        ctx: &mut Context<'_, 'a>,
        planned: &[Planned],
        depth: u8,
        pass_number: u32,
    ) -> Result<(Answers, bool), AnalysisError> {
        let mut pass = Pass::new(planned.len());
        let mut from_others = Vec::new();
        for (i, plan) in planned.iter().enumerate() {
            let job = JobKey::of(plan);
            if !self.adopt(ctx.trace, i, plan, &job, &mut pass) {
                from_others.extend(self.wait_or_queue(ctx, i, plan, job, &mut pass));
            }
        }
        self.lay_over(&from_others)?;
        // Engines this pass leaves free look ahead, even when it has everything it needs.
        self.start_searches(ctx, planned, &mut pass, depth)?;
        let stopped = self.wait_for_pass(ctx, planned, &mut pass, depth, pass_number)?;
        Ok((pass.answers, stopped))
    }

    /// Takes planned search `i` from searches run ahead of its turn: its own answer, or the moves of a search for
    /// alternatives each searched alone (composed once all are in). Returns false where neither ran ahead.
    fn adopt(&mut self, trace: &mut Trace, i: usize, plan: &Planned, job: &JobKey, pass: &mut Pass) -> bool {
        if let Some(answer) = self.flights.take(job) {
            trace!(trace, "adopt {} {:?}: answered ahead of its turn", plan.key, plan.purpose);
            if !self.speculation.from_others.remove(job) {
                self.speculation.used += 1;
            }
            pass.answer(i, Ok(answer));
            return true;
        }
        let Some(parts) = self.composable(plan) else { return false };
        trace!(trace, "compose {} {:?}: every move searched alone ahead of its turn", plan.key, plan.purpose);
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
        true
    }

    /// Planned search `i`, which did not run ahead: awaited where it runs (ahead of its turn here, or in another
    /// process), taken where another process answered it, else queued to start. Returns the change that lays an
    /// answer of another process over the tree.
    fn wait_or_queue(
        &mut self,
        ctx: &mut Context<'_, 'a>,
        i: usize,
        plan: &Planned,
        job: JobKey,
        pass: &mut Pass,
    ) -> Option<Change> {
        match self.flights.claim(&job) {
            Some(true) => {
                trace!(ctx.trace, "adopt {} {:?}: running ahead of its turn", plan.key, plan.purpose);
                self.speculation.used += 1;
            }
            Some(false) => {}
            None => match self.seen_elsewhere(&job) {
                Seen::Answered(answer) => {
                    pass.wait_for(job, i);
                    return self.take_from_other(ctx, plan, answer, pass);
                }
                Seen::Held { pid } => {
                    trace!(ctx.trace, "wait {} {:?}: process {pid} runs it", plan.key, plan.purpose);
                    pass.foreign.push(i);
                }
                Seen::Free | Seen::Mine => pass.to_start.push_back(i),
            },
        }
        pass.wait_for(job, i);
        None
    }

    /// Waits for a pass's answers, engines kept busy, until every planned search is answered or the run must end.
    /// Returns true when it must end: the searches still running are abandoned.
    fn wait_for_pass(
        &mut self,
        ctx: &mut Context<'_, 'a>,
        planned: &[Planned],
        pass: &mut Pass,
        depth: u8,
        pass_number: u32,
    ) -> Result<bool, AnalysisError> {
        let total = planned.len();
        let mut renewed = Instant::now();
        while pass.outstanding > 0 {
            if ctx.budget.spent(ctx.recorder.engine_nodes()) {
                self.abandon();
                return Ok(true);
            }
            if !pass.foreign.is_empty() && pass.last_poll.elapsed() >= POLL {
                self.poll_others(ctx, planned, pass)?;
            }
            if renewed.elapsed() >= LEASE / 3 {
                self.renew_claims();
                renewed = Instant::now();
            }
            self.start_searches(ctx, planned, pass, depth)?;
            show_progress(ctx, depth, pass_number, total - pass.outstanding, total);
            // A short wait: a stop (a GUI's `stop` or `ponderhit`, the budget) is seen within it, and a move after
            // `ponderhit` waits for no more.
            let Some(first) = self.evaluator.next(STOP_CHECK) else { continue };
            // Every answer that is in now, before the next look ahead.
            let mut overlay_changes = Vec::new();
            let mut next = Some(first);
            while let Some((id, result)) = next.take() {
                overlay_changes.extend(self.land(ctx.recorder, id, result, pass));
                next = self.evaluator.next(Duration::ZERO);
            }
            self.lay_over(&overlay_changes)?;
            self.stop_unwanted(ctx, depth, pass)?;
        }
        Ok(false)
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
    fn compose(&mut self, parts: &[JobKey]) -> Result<Answer, EvalError> {
        let best = parts
            .iter()
            .filter_map(|part| Some((part, self.flights.peek(part)?)))
            .max_by(|a, b| a.1.score.cmp(&b.1.score).then_with(|| b.1.best.to_string().cmp(&a.1.best.to_string())))
            .map(|(part, _)| part.clone())
            .ok_or(EvalError::Incomplete("no move was answered"))?;
        let nodes = parts.iter().filter_map(|part| self.flights.peek(part)).map(|a| a.nodes).sum();
        if !self.speculation.from_others.remove(&best) {
            self.speculation.used += 1;
        }
        let mut answer = self.flights.take(&best).ok_or(EvalError::Incomplete("the best move's answer is gone"))?;
        answer.nodes = nodes;
        Ok(answer)
    }

    /// Fills free engines: first with the pass's own searches, then with searches ahead of their turn.
    fn start_searches(
        &mut self,
        ctx: &mut Context<'_, 'a>,
        planned: &[Planned],
        pass: &mut Pass,
        depth: u8,
    ) -> Result<(), AnalysisError> {
        let workers = self.evaluator.workers();
        while self.flights.running() < workers {
            if let Some(i) = pass.to_start.pop_front() {
                self.start_planned(ctx, planned, i, pass)?;
                continue;
            }
            let Some(plan) = self.next_ahead(ctx, depth, planned, pass)? else { break };
            if !self.start_ahead(ctx.trace, plan) {
                break;
            }
        }
        Ok(())
    }

    /// Starts planned search `i`, once claimed for this run: where another process runs it, the pass waits for its
    /// answer; where another process answered it, the answer is taken.
    fn start_planned(
        &mut self,
        ctx: &mut Context<'_, 'a>,
        planned: &[Planned],
        i: usize,
        pass: &mut Pass,
    ) -> Result<(), AnalysisError> {
        let plan = planned[i].clone();
        let job = JobKey::of(&plan);
        match self.claim(&job) {
            Claim::Granted => {}
            Claim::Held { pid } => {
                trace!(ctx.trace, "wait {} {:?}: process {pid} runs it", plan.key, plan.purpose);
                pass.foreign.push(i);
                return Ok(());
            }
            Claim::Answered(answer) => {
                let change = self.take_from_other(ctx, &plan, answer, pass);
                return self.lay_over(&Vec::from_iter(change));
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
        Ok(())
    }

    /// Takes in the answer of search `id`: a pass's answer goes to the pass, one that ran ahead waits for its turn.
    /// Returns the change that lays the answer over the tree for the next look ahead.
    fn land(
        &mut self,
        recorder: &mut Recorder<'a>,
        id: u64,
        result: Result<Answer, EvalError>,
        pass: &mut Pass,
    ) -> Option<Change> {
        let flight = self.flights.land(id)?;
        if let Some(claims) = &self.claims {
            let job = flight.job.bytes();
            let shared = match &result {
                Ok(answer) => claims.answer(&job, answer),
                Err(_) => claims.release([job.as_slice()]),
            };
            if let Err(e) = shared {
                log::debug!("answer not shared with other processes: {e}");
            }
        }
        if let Ok(answer) = &result {
            recorder.answered(answer);
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
        result: Result<Answer, EvalError>,
        pass: &mut Pass,
    ) -> Option<Change> {
        let waiters = pass.waiting.remove(&job).unwrap_or_default();
        let (taken, complete) = hand_to(&waiters, &result, pass);
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
    fn stop_unwanted(&mut self, ctx: &mut Context<'_, 'a>, depth: u8, pass: &Pass) -> Result<(), AnalysisError> {
        let Some(generation) = self.speculation.overlay.as_ref().map(Overlay::generation) else { return Ok(()) };
        if self.flights.speculative().next().is_none() {
            return Ok(());
        }
        if self.speculation.planned_at != Some(generation) {
            self.look_ahead_walk(ctx, depth)?;
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
                ctx.trace,
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
    fn abandon(&mut self) {
        if self.flights.running() > 0 {
            // The engines first (a `stop` waits for them), then the claims (a write).
            self.evaluator.cancel_all();
            if let Some(claims) = &self.claims {
                let jobs: Vec<Vec<u8>> = self.flights.jobs().map(JobKey::bytes).collect();
                if let Err(e) = claims.release(jobs.iter().map(Vec::as_slice)) {
                    log::debug!("claims not released (they expire): {e}");
                }
            }
            self.abandoned += self.flights.running() as u64;
            self.flights.abandon_all();
        }
    }
}

/// Hands `result` to the `waiters` of its search in `pass`: a planned search takes it, a composite counts its part
/// in. Returns whether a planned search took it, and the composites it completed.
fn hand_to(waiters: &[Waiter], result: &Result<Answer, EvalError>, pass: &mut Pass) -> (bool, Vec<usize>) {
    let mut taken = false;
    let mut complete = Vec::new();
    for waiter in waiters {
        match waiter {
            Waiter::Plan(i) => {
                pass.answer(*i, result.clone());
                pass.outstanding -= 1;
                taken = true;
            }
            Waiter::Part(c) => {
                let composite = &mut pass.composites[*c];
                if let Err(e) = result {
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
    (taken, complete)
}

/// The progress line of a pass: its searches answered, the run's evaluations and time.
fn show_progress(ctx: &Context<'_, '_>, depth: u8, pass: u32, done: usize, total: usize) {
    if let Some(progress) = ctx.progress {
        let secs = ctx.budget.elapsed().as_secs();
        progress.show(&format!(
            "depth {depth} pass {pass}: {done}/{total} searches, {} evaluations, {}:{:02}:{:02}",
            ctx.recorder.evaluations(),
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        ));
    }
}
