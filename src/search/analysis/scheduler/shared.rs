//! Searches shared with other processes through the store's claims: a search is claimed before it starts, its claim
//! renewed while it runs and given up when it will not be answered here, and the answers other processes find for
//! this run's searches are taken in.

use std::time::Instant;

use super::super::AnalysisError;
use super::{Context, Pass, Scheduler};
use crate::{
    search::{
        evaluator::{Answer, Evaluator},
        host::{JobKey, Planned},
    },
    store::{
        Change,
        claims::{Claim, Seen},
    },
};

impl<'a, E: Evaluator> Scheduler<'a, E> {
    /// The answer another process found for a planned search, handed to whoever waits for it in this pass.
    /// Returns the change that lays it over the tree.
    pub(super) fn take_from_other(
        &mut self,
        ctx: &mut Context<'_, 'a>,
        plan: &Planned,
        answer: Answer,
        pass: &mut Pass,
    ) -> Option<Change> {
        trace!(ctx.trace, "shared {} {:?}: answered by another process", plan.key, plan.purpose);
        ctx.recorder.took_shared();
        self.deliver(JobKey::of(plan), plan, Ok(answer), pass)
    }

    /// What other processes sharing the store say of `job`, without claiming it.
    pub(super) fn seen_elsewhere(&self, job: &JobKey) -> Seen {
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
    pub(super) fn claim(&self, job: &JobKey) -> Claim {
        let Some(claims) = &self.claims else { return Claim::Granted };
        claims.claim(&job.bytes()).unwrap_or_else(|e| {
            log::debug!("search not claimed, started all the same: {e}");
            Claim::Granted
        })
    }

    /// Gives up the claim on a search that will not be answered here.
    pub(super) fn release(&self, job: &JobKey) {
        if let Some(claims) = &self.claims
            && let Err(e) = claims.release([job.bytes().as_slice()])
        {
            log::debug!("claim not released (it expires): {e}");
        }
    }

    /// Renews the claims of every running search.
    pub(super) fn renew_claims(&self) {
        let Some(claims) = &self.claims else { return };
        let jobs: Vec<Vec<u8>> = self.flights.jobs().map(JobKey::bytes).collect();
        if let Err(e) = claims.renew(jobs.iter().map(Vec::as_slice)) {
            log::log!(crate::store::claims::level_of(&e), "claims not renewed: {e}");
        }
    }

    /// Looks for the answers of the pass's searches that other processes run. A search whose claim no longer
    /// holds (stopped, or its process died) is this run's to start.
    pub(super) fn poll_others(
        &mut self,
        ctx: &mut Context<'_, 'a>,
        planned: &[Planned],
        pass: &mut Pass,
    ) -> Result<(), AnalysisError> {
        pass.last_poll = Instant::now();
        let Some(claims) = &self.claims else {
            pass.to_start.extend(pass.foreign.drain(..));
            return Ok(());
        };
        let jobs: Vec<Vec<u8>> = pass.foreign.iter().map(|&i| JobKey::of(&planned[i]).bytes()).collect();
        let seen = claims.look(jobs.iter().map(Vec::as_slice))?;
        let mut changes = Vec::new();
        for (i, seen) in std::mem::take(&mut pass.foreign).into_iter().zip(seen) {
            match seen {
                Seen::Held { .. } => pass.foreign.push(i),
                Seen::Answered(answer) => changes.extend(self.take_from_other(ctx, &planned[i], answer, pass)),
                Seen::Free | Seen::Mine => pass.to_start.push_front(i),
            }
        }
        self.lay_over(&changes)
    }
}
