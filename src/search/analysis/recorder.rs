//! The recorder: turns the answers of a run into store changes, writes them, and counts what the run did (searches
//! answered and the nodes they reported, answers stored, taken from other processes, failed).
//!
//! Every write of an analysis goes through it: the engines' identity and numbers at the start, the terminal positions
//! and line moves the walk marks, a pass's answers together, the settled depth of the root.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use crate::store::{
    Change, Store,
    answer::Searched,
    key::{KeySet, PositionKey},
    node::{Node, PackedPosition},
};

use super::{AnalysisError, Trace};
use crate::search::{
    evaluator::{Answer, EvalError},
    host::{Planned, Purpose},
};

/// What a run recorded, and the positions whose searches failed in it.
pub(super) struct Recorder<'a> {
    store: &'a Store,
    /// Numbers of the engines in the store's list, by the names answers give.
    engine_numbers: HashMap<String, u16>,
    /// Positions whose engine search failed in this run: the walk plans them no more.
    failed: KeySet,
    /// Engine searches answered this run, ahead of their turn or not.
    evaluations: u64,
    /// Nodes the inner engines reported for the answered searches.
    engine_nodes: u64,
    /// The same, readable while the run goes on (added to: it may count other runs' answers too).
    nodes_so_far: Arc<AtomicU64>,
    /// Answers the passes stored: what a run with one engine asks.
    stored: u64,
    /// Answers taken from other processes' searches.
    shared: u64,
    /// Searches that failed, and answers that could not be stored.
    failures: u64,
}

impl<'a> Recorder<'a> {
    /// A recorder of `store`; `nodes_so_far` is added to as answers come (a counter several runs may share).
    pub(super) fn new(store: &'a Store, nodes_so_far: Arc<AtomicU64>) -> Self {
        Recorder {
            store,
            engine_numbers: HashMap::new(),
            failed: KeySet::default(),
            evaluations: 0,
            engine_nodes: 0,
            nodes_so_far,
            stored: 0,
            shared: 0,
            failures: 0,
        }
    }

    /// Records the evaluator's identity in the store, and the numbers of its engines in the store's list.
    pub(super) fn begin(&mut self, identity: String, names: Vec<String>) -> Result<(), AnalysisError> {
        // Written only where it changes: growth begins an analysis for every position it grows, and a write is a
        // commit to disk.
        if self.store.engine_identity()?.as_deref() != Some(identity.as_str()) {
            self.write(vec![Change::SetEngine(identity)])?;
        }
        let numbers = self.store.engine_numbers(&names)?;
        self.engine_numbers =
            names.into_iter().zip(numbers).filter_map(|(name, number)| Some((name, number?))).collect();
        Ok(())
    }

    /// Writes `changes` now (nothing for none).
    pub(super) fn write(&self, changes: Vec<Change>) -> Result<(), AnalysisError> {
        if changes.is_empty() {
            return Ok(());
        }
        Ok(self.store.writer().submit(changes).wait()?)
    }

    /// Marks `depth` settled at the root.
    pub(super) fn settled(&self, root: &shakmaty::Chess, key: PositionKey, depth: u8) -> Result<(), AnalysisError> {
        let mut mark = Node::new(PackedPosition::of(root));
        mark.settled_depth = Some(depth);
        self.write(vec![Change::Merge { key, node: mark, children: vec![] }])
    }

    /// An engine answered a search of this run (whoever asked for it).
    pub(super) fn answered(&mut self, answer: &Answer) {
        self.evaluations += 1;
        self.engine_nodes += answer.nodes;
        self.nodes_so_far.fetch_add(answer.nodes, Ordering::Relaxed);
    }

    /// An answer was taken from a search another process ran.
    pub(super) fn took_shared(&mut self) {
        self.shared += 1;
    }

    /// Stores a pass's answers (`answers[i]` for `planned[i]`; `None` for a search stopped before its answer), all
    /// together. A failed search, or an answer that does not fit its position, marks its position failed for the
    /// rest of the run; one that ended because the run was `stopped`, or that was cancelled (no engine at fault), is
    /// not counted as a failure.
    pub(super) fn record_pass(
        &mut self,
        planned: &[Planned],
        answers: Vec<Option<Result<Answer, EvalError>>>,
        stopped: bool,
        trace: &mut Trace,
    ) -> Result<(), AnalysisError> {
        let mut changes = Vec::with_capacity(planned.len());
        for (plan, answer) in planned.iter().zip(answers) {
            match answer {
                None => {} // stopped before it was answered
                Some(Ok(answer)) => changes.extend(self.change_of_answer(plan, &answer, trace)),
                Some(Err(e)) if stopped || e == EvalError::Cancelled => {
                    log::debug!("engine search of {} ended with the analysis: {e}", plan.key);
                    self.failed.insert(plan.key);
                }
                Some(Err(e)) => {
                    log::warn!("engine search of {} failed: {e}", plan.key);
                    trace!(trace, "failed {} {:?}: {e}", plan.key, plan.purpose);
                    self.failed.insert(plan.key);
                    self.failures += 1;
                }
            }
        }
        self.store_pass(changes)
    }

    /// The change that stores a pass's answer, counted as stored; `None` (a failure) where it does not fit.
    fn change_of_answer(&mut self, plan: &Planned, answer: &Answer, trace: &mut Trace) -> Option<Change> {
        self.stored += 1;
        trace!(
            trace,
            "answer {} {:?}: {} {} depth {}", plan.key, plan.purpose, answer.best, answer.score, answer.depth
        );
        let engine = self.engine_number(answer);
        let change = change_for(plan, answer, engine);
        if change.is_none() {
            log::warn!("answer for {} does not fit its position; left out", plan.key);
            self.failed.insert(plan.key);
            self.failures += 1;
        }
        change
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

    /// The number of the engine that gave `answer` in the store's list, adding an engine not seen at the start (one
    /// whose name changed when it was started again).
    fn engine_number(&mut self, answer: &Answer) -> Option<u16> {
        let name = answer.engine.as_ref()?;
        if let Some(number) = self.engine_numbers.get(name) {
            return Some(*number);
        }
        match self.store.engine_numbers(std::slice::from_ref(name)) {
            Ok(numbers) => {
                let number = numbers.first().copied().flatten()?;
                self.engine_numbers.insert(name.clone(), number);
                Some(number)
            }
            Err(e) => {
                log::warn!("engine {name} not added to the store's list: {e}");
                None
            }
        }
    }

    /// Positions whose search failed in this run.
    pub(super) fn failed(&self) -> &KeySet {
        &self.failed
    }

    /// Searches answered this run.
    pub(super) fn evaluations(&self) -> u64 {
        self.evaluations
    }

    /// Nodes the engines reported for them.
    pub(super) fn engine_nodes(&self) -> u64 {
        self.engine_nodes
    }

    /// The nodes reported so far, readable from another thread while the run goes on.
    pub(super) fn nodes_so_far(&self) -> Arc<AtomicU64> {
        self.nodes_so_far.clone()
    }

    /// Answers stored.
    pub(super) fn stored(&self) -> u64 {
        self.stored
    }

    /// Answers taken from other processes.
    pub(super) fn shared(&self) -> u64 {
        self.shared
    }

    /// Searches failed and answers not stored.
    pub(super) fn failures(&self) -> u64 {
        self.failures
    }
}

/// The change that stores an answer; `engine` is the number of the engine that gave it in the store's list.
pub(super) fn change_for(plan: &Planned, answer: &Answer, engine: Option<u16>) -> Option<Change> {
    let pos = &plan.job.position;
    if !plan.job.searchmoves.is_empty() && !plan.job.searchmoves.contains(&answer.best) {
        return None;
    }
    let searched = match plan.purpose {
        Purpose::Evaluate => Searched::Position,
        // Cut by its screen: a shallower bound for every unsearched move, kept apart from depth-D values.
        Purpose::Alternatives { unsearched }
            if plan.job.screen.is_some_and(|cut| u32::from(answer.depth) >= cut.from_depth)
                && answer.depth < plan.job.depth =>
        {
            Searched::Screened { unsearched }
        }
        Purpose::Alternatives { unsearched } => Searched::Alternatives { unsearched },
        Purpose::LineMove => Searched::LineMove,
        Purpose::Single => Searched::Single,
    };
    answer.change(pos, searched, engine).ok()
}
