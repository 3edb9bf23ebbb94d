//! The host's book of searches: which are running, which ran ahead of their turn and wait for a pass to ask for
//! them.
//!
//! A search is known by what it asks (`JobKey`: position, the moves it may choose from, engine depth), not by who
//! planned it, so that a pass asking for a search that already ran ahead takes its answer instead of asking again.

use std::{
    collections::HashMap,
    sync::atomic::{AtomicU64, Ordering},
    time::Instant,
};

use shakmaty::{packed::PackedUciMove, uci::UciMove};

use crate::store::key::PositionKey;

use super::evaluator::{Answer, Job};

/// What a planned search is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// The position's first evaluation (its best move).
    Evaluate,
    /// The best of the moves not searched yet.
    Alternatives { unsearched: usize },
    /// A move of the root's line (stored as an edge so the tree from the start leads to the root).
    LineMove,
    /// One move of a node's alternatives, searched alone ahead of its turn: several run at once where the search
    /// for alternatives would ask for them one after another, and the best of them answers that search.
    Single,
}

/// A search the walk asked for.
#[derive(Debug, Clone)]
pub(super) struct Planned {
    pub key: PositionKey,
    pub purpose: Purpose,
    pub job: Job,
}

impl Planned {
    /// A search for the best of several alternatives: one that searches of each move alone can answer. A screened
    /// search is not split: its moves searched alone would each run to the full depth, which the screen may spare.
    pub fn splits(&self) -> bool {
        matches!(self.purpose, Purpose::Alternatives { .. })
            && self.job.searchmoves.len() > 1
            && self.job.screen.is_none()
    }
}

/// What a search asks: two searches with equal keys get the same answer from a deterministic engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct JobKey {
    key: PositionKey,
    /// The allowed moves, packed and sorted (empty: every legal move).
    moves: Vec<u16>,
    depth: u8,
    /// The screen of a screened search (the depth it may cut from, the score it cuts below): its answer depends on
    /// both, so a search screened otherwise is another search.
    screened: Option<(u32, i32)>,
}

impl JobKey {
    pub fn of(plan: &Planned) -> JobKey {
        let mut moves: Vec<u16> = plan.job.searchmoves.iter().map(pack).collect();
        moves.sort_unstable();
        moves.dedup();
        JobKey {
            key: plan.key,
            moves,
            depth: plan.job.depth,
            screened: plan.job.screen.map(|c| (c.from_depth, c.below.value())),
        }
    }
}

impl JobKey {
    /// The search as claims name it in the store: the position key, the engine depth and the allowed moves, all
    /// big-endian, and for a screened search `S` and its screen: the depth (u32) and the score it cuts below (i32).
    /// An unscreened search's bytes have an odd length, a screened one's an even length.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + 2 * self.moves.len());
        out.extend_from_slice(&self.key.to_bytes());
        out.push(self.depth);
        for m in &self.moves {
            out.extend_from_slice(&m.to_be_bytes());
        }
        if let Some((d, b)) = self.screened {
            out.push(b'S');
            out.extend_from_slice(&d.to_be_bytes());
            out.extend_from_slice(&b.to_be_bytes());
        }
        out
    }

    /// The search of `uci` alone in `key`'s position at `depth`.
    pub fn single(key: PositionKey, uci: &UciMove, depth: u8) -> JobKey {
        JobKey { key, moves: vec![pack(uci)], depth, screened: None }
    }
}

fn pack(uci: &UciMove) -> u16 {
    u16::from_be_bytes(PackedUciMove::pack(*uci).to_bytes())
}

/// A search running on an engine.
pub(super) struct Flight {
    pub job: JobKey,
    pub plan: Planned,
    /// Started ahead of its turn: no pass has asked for it yet.
    pub speculative: bool,
    pub started: Instant,
}

/// Searches in flight, and answers that ran ahead and wait for their turn.
#[derive(Default)]
pub(super) struct Flights {
    by_id: HashMap<u64, Flight>,
    by_job: HashMap<JobKey, u64>,
    waiting: HashMap<JobKey, Answer>,
}

/// Search ids are unique in the process, not only in one analysis: an evaluator outlives an analysis (the UCI face
/// grows its tree with one analysis after another), and the answer of a search stopped at the end of one must not
/// be taken for a search of the next.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Flights {
    /// Books a search about to be started; returns its id.
    pub fn book(&mut self, plan: Planned, speculative: bool) -> u64 {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let job = JobKey::of(&plan);
        self.by_job.insert(job.clone(), id);
        self.by_id.insert(id, Flight { job, plan, speculative, started: Instant::now() });
        id
    }

    /// The search `id` ended (answered, failed, or not started after all); `None` when it is not known (an answer
    /// of a search abandoned earlier).
    pub fn land(&mut self, id: u64) -> Option<Flight> {
        let flight = self.by_id.remove(&id)?;
        if self.by_job.get(&flight.job) == Some(&id) {
            self.by_job.remove(&flight.job);
        }
        Some(flight)
    }

    /// A pass asks for `job`: if it is running, it is no longer speculative. Returns `None` when it is not running,
    /// else whether it was running ahead of its turn.
    pub fn claim(&mut self, job: &JobKey) -> Option<bool> {
        let id = self.by_job.get(job)?;
        let flight = self.by_id.get_mut(id)?;
        Some(std::mem::replace(&mut flight.speculative, false))
    }

    pub fn is_running(&self, job: &JobKey) -> bool {
        self.by_job.contains_key(job)
    }

    /// Keeps the answer of a search that ran ahead until a pass asks for it.
    pub fn keep(&mut self, job: JobKey, answer: Answer) {
        self.waiting.insert(job, answer);
    }

    /// The answer of a search that ran ahead, taken for the pass that asks for it.
    pub fn take(&mut self, job: &JobKey) -> Option<Answer> {
        self.waiting.remove(job)
    }

    /// The answer of a search that ran ahead, left for later passes.
    pub fn peek(&self, job: &JobKey) -> Option<&Answer> {
        self.waiting.get(job)
    }

    pub fn has_answer(&self, job: &JobKey) -> bool {
        self.waiting.contains_key(job)
    }

    /// Answers that ran ahead and wait still: at the end of a run, those no pass asked for.
    pub fn waiting(&self) -> impl Iterator<Item = &JobKey> {
        self.waiting.keys()
    }

    /// Neither running nor answered: a search worth starting.
    pub fn is_new(&self, job: &JobKey) -> bool {
        !self.is_running(job) && !self.has_answer(job)
    }

    /// Searches running.
    pub fn running(&self) -> usize {
        self.by_id.len()
    }

    /// Every search running.
    pub fn jobs(&self) -> impl Iterator<Item = &JobKey> {
        self.by_id.values().map(|f| &f.job)
    }

    /// Searches running ahead of their turn, that no pass has asked for.
    pub fn speculative(&self) -> impl Iterator<Item = (u64, &JobKey)> {
        self.by_id.iter().filter(|(_, f)| f.speculative).map(|(id, f)| (*id, &f.job))
    }

    /// Forgets every running search (they were abandoned) and returns how many were speculative.
    pub fn abandon_all(&mut self) -> usize {
        let speculative = self.by_id.values().filter(|f| f.speculative).count();
        self.by_id.clear();
        self.by_job.clear();
        speculative
    }
}
