//! Searches run ahead of their turn: on the engines a pass leaves free, the searches the next passes will likely ask
//! for, found by walking the tree with the answers in so far laid over it, claimed for this run before they start.

use std::collections::{HashSet, VecDeque};

use super::super::{
    AnalysisError, Trace,
    recorder::{Recorder, change_for},
};
use super::{Context, Pass, Scheduler, singles};
use crate::{
    search::{
        evaluator::Evaluator,
        host::{JobKey, Planned},
        overlay::Overlay,
    },
    store::{Change, claims::Claim},
};

impl<'a, E: Evaluator> Scheduler<'a, E> {
    /// Starts `plan` ahead of its turn; false where it could not start (nothing more is started now).
    pub(super) fn start_ahead(&mut self, trace: &mut Trace, plan: Planned) -> bool {
        trace!(trace, "ahead {} {:?}: started ahead of its turn", plan.key, plan.purpose);
        let id = self.flights.book(plan.clone(), true);
        self.speculation.started += 1;
        if let Err(e) = self.evaluator.submit(id, plan.job) {
            log::debug!("search ahead of {} not started: {e}", plan.key);
            if let Some(flight) = self.flights.land(id) {
                self.release(&flight.job);
            }
            self.speculation.started -= 1;
            return false;
        }
        true
    }

    /// The most useful search to run ahead of its turn, if any. First what the next pass will likely ask for, as far
    /// as this pass's answers tell; then the first search the look-ahead walk planned that is neither running nor
    /// answered. Each walk is made again whenever answers came in since the last one.
    pub(super) fn next_ahead(
        &mut self,
        ctx: &mut Context<'_, 'a>,
        depth: u8,
        planned: &[Planned],
        pass: &mut Pass,
    ) -> Result<Option<Planned>, AnalysisError> {
        let Some(generation) = self.speculation.overlay.as_ref().map(Overlay::generation) else { return Ok(None) };
        if pass.predicted_at != Some(pass.known) {
            let predicted = predict_next_pass(ctx, depth, planned, pass)?;
            pass.predicted = predicted.iter().map(JobKey::of).collect();
            pass.next = predicted.into_iter().filter(|plan| self.flights.is_new(&JobKey::of(plan))).collect();
            pass.predicted_at = Some(pass.known);
        }
        while let Some(plan) = pass.next.pop_front() {
            if self.claim_ahead(ctx.recorder, &plan)? {
                return Ok(Some(plan));
            }
        }
        if self.speculation.planned_at != Some(generation) {
            self.look_ahead_walk(ctx, depth)?;
        }
        while let Some(plan) = self.speculation.queue.pop_front() {
            if self.claim_ahead(ctx.recorder, &plan)? {
                return Ok(Some(plan));
            }
        }
        Ok(None)
    }

    /// Whether `plan`, a search to run ahead of its turn, is to start now: neither running nor answered here, and
    /// claimed for this run. An answer another process found waits for its turn like one found here.
    pub(super) fn claim_ahead(&mut self, recorder: &mut Recorder<'a>, plan: &Planned) -> Result<bool, AnalysisError> {
        let job = JobKey::of(plan);
        if !self.flights.is_new(&job) {
            return Ok(false);
        }
        match self.claim(&job) {
            Claim::Granted => Ok(true),
            Claim::Held { .. } => Ok(false),
            Claim::Answered(answer) => {
                recorder.took_shared();

                if let Some(change) = change_for(plan, &answer, None) {
                    self.speculation.from_others.insert(job.clone());
                    self.flights.keep(job, answer);
                    self.lay_over(&[change])?;
                }
                Ok(false)
            }
        }
    }

    /// Walks the overlaid tree at `depth` and at each depth after it up to the look ahead, and queues the new
    /// searches they plan, shallowest depth first. Where engines would still be left free, the searches for
    /// alternatives it planned are split into searches of each move alone, queued last. Every search the walks reach
    /// (new, running or answered), and the moves of every search for alternatives, are the wanted ones.
    pub(super) fn look_ahead_walk(&mut self, ctx: &Context<'_, 'a>, depth: u8) -> Result<(), AnalysisError> {
        let view = self.store.read()?;
        if let Some(overlay) = &mut self.speculation.overlay {
            overlay.refresh_marks(&view)?;
        }
        let Some(overlay) = &self.speculation.overlay else { return Ok(()) };
        let free = self.evaluator.workers().saturating_sub(self.flights.running());
        let walks = ctx.walk.ahead(&view, overlay, ctx.recorder.failed(), depth, self.look_ahead.unwrap_or(0))?;
        let mut queue = VecDeque::new();
        let mut wanted: HashSet<JobKey> = HashSet::new();
        let mut terminal = Vec::new();
        let flights = &self.flights;
        let enqueue = |plan: Planned, queue: &mut VecDeque<Planned>, wanted: &mut HashSet<JobKey>| {
            let job = JobKey::of(&plan);
            if wanted.insert(job.clone()) && flights.is_new(&job) {
                queue.push_back(plan);
            }
        };
        let mut alternatives = Vec::new();
        for result in walks {
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
        self.speculation.queue = queue;
        self.speculation.wanted = wanted;
        if let Some(overlay) = &mut self.speculation.overlay {
            overlay.apply(&view, &terminal)?;
            self.speculation.planned_at = Some(overlay.generation());
        }
        Ok(())
    }
}

/// What the next pass will ask for where it depends only on this pass's answers in so far: the walk of the store
/// with them laid over it.
pub(super) fn predict_next_pass(
    ctx: &Context<'_, '_>,
    depth: u8,
    planned: &[Planned],
    pass: &Pass,
) -> Result<Vec<Planned>, AnalysisError> {
    let changes: Vec<Change> = planned
        .iter()
        .zip(&pass.answers)
        .filter_map(|(plan, answer)| change_for(plan, answer.as_ref()?.as_ref().ok()?, None))
        .collect();
    if changes.is_empty() {
        return Ok(Vec::new());
    }
    ctx.walk.pass_with(&changes, ctx.recorder.failed(), depth)
}
