//! The one writer of a process: a thread that takes changes from a channel and commits many per transaction.

//!
//! Every transaction ends with the upkeep of cached values ([`Upkeep`]) over the records it changed. A bulk load
//! submits with [`StoreWriter::submit_deferred`] instead: each submission is checked (and refused whole on a key
//! collision) when it arrives, but its records wait in memory. [`StoreWriter::settle`], the writer's end, a write
//! of the other kind, or [`BULK_PENDING_FACTOR`] times `max_batch` waiting records commit them all in one
//! transaction: each record is merged with the record stored at that moment, written once, in key order, with its
//! cached values computed once for all of them, children before parents. Records and values are committed together,
//! so a crash in a bulk load loses only what waited, never a value. A meta entry marked stores written by builds
//! that committed records before their values; a store opened with the mark has every value recomputed on open.

use std::{sync::Arc, thread::JoinHandle};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use heed::{PutFlags, RwTxn};

use super::{
    Change, META_ENGINE, META_LINKS, META_VALUES_OWED, Shared, StoreError,
    key::{KeyMap, PositionKey},
    marks,
    node::{Node, PackedPosition},
    tasks,
    upkeep::{CachedValues, TxnRecords, Upkeep},
};

/// The outcome of each submission of a batch: a submission is refused whole, without holding back the others.
type Verdicts = Vec<Result<(), StoreError>>;

/// How many times more changes one check of deferred writes may take than the settings' `max_batch`.
const BULK_BATCH_FACTOR: usize = 8;

/// How many times the settings' `max_batch` records a bulk load may hold in memory before the writer settles them
/// on its own: 1,000,000 with the default settings, about 300 MB.
pub const BULK_PENDING_FACTOR: usize = 20;

/// Where the outcome of one submission is sent.
type Ack = Sender<Result<(), StoreError>>;

/// When a write's cached values are brought up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Values {
    /// In the write's own transaction.
    Now,
    /// At the next settle (a bulk load).
    Deferred,
}

/// Which records a settle brings up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settle {
    /// The records of deferred submissions waiting in memory.
    Pending,
    /// Those, and every record of the store (values left owed by an older build that stopped in a bulk load).
    All,
}

/// The records of a bulk load, accepted and waiting for their settle.
#[derive(Default)]
struct Pending {
    /// The submitted nodes of each key, merged with each other but not yet with the stored record: that merge runs in
    /// the settle's transaction, so that what another process wrote meanwhile is kept.
    nodes: KeyMap<Node>,
    /// (child, parent) links of the waiting nodes, with repeats.
    links: Vec<([u8; 8], [u8; 8])>,
    /// The failure of a settle the writer ran on its own, told to the next settle.
    failed: Option<StoreError>,
}

enum Message {
    Write { changes: Vec<Change>, values: Values, ack: Ack },
    Settle { which: Settle, ack: Ack },
    Stop,
}

/// A handle to submit changes to the store's writer; cheap to clone and send to other threads.
#[derive(Clone)]
pub struct StoreWriter {
    tx: Sender<Message>,
    shared: Arc<Shared>,
}

/// The outcome of a submission, available once its transaction has committed (or failed).
#[must_use = "a receipt tells whether the changes were committed"]
pub struct Receipt {
    rx: Receiver<Result<(), StoreError>>,
    shared: Arc<Shared>,
}

impl Receipt {
    /// Blocks until the changes are committed. All changes of one submission are committed together or not at all.
    pub fn wait(self) -> Result<(), StoreError> {
        self.rx.recv().unwrap_or_else(|_| Err(StoreError::WriterStopped { path: self.shared.data_file.clone() }))
    }
}

impl StoreWriter {
    /// Queues changes for the next transaction, which also brings the cached values of the records they change up
    /// to date.
    pub fn submit(&self, changes: Vec<Change>) -> Receipt {
        self.send(|ack| Message::Write { changes, values: Values::Now, ack })
    }

    /// Queues changes of a bulk load. Its receipt tells whether they were accepted (checked against the store and
    /// the bulk load's earlier changes, refused whole on a key collision); they are committed, with their records'
    /// cached values, by the next [`settle`](Self::settle), at the latest when the store closes or when many records
    /// wait (see the [module](self) docs).
    pub fn submit_deferred(&self, changes: Vec<Change>) -> Receipt {
        // The analyst's marks and tasks are never deferred: a mark's edge and its entry are written together.
        if changes.iter().any(|c| matches!(c, Change::Mark(_) | Change::Task(_) | Change::Clock(_))) {
            return self.submit(changes);
        }
        self.send(|ack| Message::Write { changes, values: Values::Deferred, ack })
    }

    /// Commits every accepted deferred change with its records' cached values, in one transaction. Its receipt
    /// answers once they are committed, or with the failure of any settle since the last one.
    pub fn settle(&self) -> Receipt {
        self.send(|ack| Message::Settle { which: Settle::Pending, ack })
    }

    pub(super) fn settle_all(&self) -> Receipt {
        self.send(|ack| Message::Settle { which: Settle::All, ack })
    }

    fn send(&self, message: impl FnOnce(Ack) -> Message) -> Receipt {
        let (ack, rx) = bounded(1);
        if let Err(crossbeam_channel::SendError(Message::Write { ack, .. } | Message::Settle { ack, .. })) =
            self.tx.send(message(ack))
        {
            let _ = ack.send(Err(StoreError::WriterStopped { path: self.shared.data_file.clone() }));
        }
        Receipt { rx, shared: self.shared.clone() }
    }
}

pub(super) struct WriterThread {
    tx: Sender<Message>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl WriterThread {
    pub(super) fn spawn(shared: Arc<Shared>, max_batch: usize, upkeep: Arc<dyn Upkeep>) -> WriterThread {
        let (tx, rx) = unbounded();
        let loop_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || run(&loop_shared, upkeep.as_ref(), &rx, max_batch))
            .ok();
        if thread.is_none() {
            log::error!("could not start the store writer thread for {}", shared.data_file.display());
        }
        WriterThread { tx, shared, thread }
    }

    pub(super) fn handle(&self) -> StoreWriter {
        StoreWriter { tx: self.tx.clone(), shared: self.shared.clone() }
    }
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared, upkeep: &dyn Upkeep, rx: &Receiver<Message>, max_batch: usize) {
    let mut pending = Pending::default();
    let pending_limit = max_batch.saturating_mul(BULK_PENDING_FACTOR).max(1);
    let mut stopping = false;
    while !stopping {
        let Ok(first) = rx.recv() else { break };
        let mut batch = Vec::new();
        let mut size = 0;
        let mut next = Some(first);
        // A batch holds writes of one kind; a settle runs alone, after the writes queued before it.
        let mut held = None;
        while let Some(message) = next.take() {
            match message {
                Message::Stop => stopping = true,
                Message::Settle { which, ack } if batch.is_empty() => {
                    let _ = ack.send(settle(shared, upkeep, which, &mut pending));
                }
                message @ Message::Settle { .. } => held = Some(message),
                Message::Write { changes, values, ack } => match batch.first() {
                    Some((_, kind, _)) if *kind != values => {
                        held = Some(Message::Write { changes, values, ack });
                    }
                    _ => {
                        size += changes.len().max(1);
                        batch.push((changes, values, ack));
                    }
                },
            }
            // A bulk load's checks take larger transactions: no reader waits for them.
            let limit = match batch.first() {
                Some((_, Values::Deferred, _)) => max_batch.saturating_mul(BULK_BATCH_FACTOR),
                _ => max_batch,
            };
            if !stopping && held.is_none() && size < limit && !batch.is_empty() {
                next = rx.try_recv().ok();
            }
        }
        write_batch(shared, upkeep, batch, &mut pending, pending_limit);
        if let Some(message) = held {
            // Put back in front: handled alone at the next turn.
            match message {
                Message::Settle { which, ack } => {
                    let _ = ack.send(settle(shared, upkeep, which, &mut pending));
                }
                Message::Write { changes, values, ack } => {
                    write_batch(shared, upkeep, vec![(changes, values, ack)], &mut pending, pending_limit)
                }
                Message::Stop => stopping = true,
            }
        }
    }
    if let Err(e) = settle(shared, upkeep, Settle::Pending, &mut pending) {
        log::error!("the waiting records of a bulk load were not committed: {e}");
    }
}

/// Commits one batch of writes (all of one kind) and answers each submission; deferred writes are checked and left
/// waiting in `pending`.
fn write_batch(
    shared: &Shared,
    upkeep: &dyn Upkeep,
    batch: Vec<(Vec<Change>, Values, Ack)>,
    pending: &mut Pending,
    pending_limit: usize,
) {
    let Some(values) = batch.first().map(|(_, values, _)| *values) else { return };
    if values == Values::Deferred {
        return accept_deferred(shared, upkeep, batch, pending, pending_limit);
    }
    // A write of cached values now must see the bulk load's records: they are committed first.
    if !pending.nodes.is_empty()
        && let Err(e) = settle(shared, upkeep, Settle::Pending, pending)
    {
        log::error!("the waiting records of a bulk load were not committed: {e}");
        pending.failed = Some(e);
    }
    let submissions: Vec<&[Change]> = batch.iter().map(|(changes, _, _)| changes.as_slice()).collect();
    let outcome = shared.write(|shared, txn| {
        let (results, merged) = apply_batch(shared, txn, &submissions)?;
        write_with_cached_values(shared, upkeep, txn, merged)?;
        Ok(results)
    });
    answer(batch.into_iter().map(|(_, _, ack)| ack).collect(), outcome);
}

/// Sends each submission its verdict, or every one the failure that aborted their transaction.
fn answer(acks: Vec<Ack>, outcome: Result<Verdicts, StoreError>) {
    match outcome {
        Ok(results) => {
            for (ack, result) in acks.into_iter().zip(results) {
                let _ = ack.send(result);
            }
        }
        Err(e) => {
            // A store that takes no more writes is reported by whoever submitted (once), not here for every batch.
            if !e.stops_writes() {
                log::error!("store write failed, {} submissions not committed: {e}", acks.len());
            }
            for ack in acks {
                let _ = ack.send(Err(e.clone()));
            }
        }
    }
}

/// Checks deferred submissions against the store and the waiting records, commits the meta changes among them,
/// and leaves their merges waiting in `pending`; settles when `pending_limit` records wait.
fn accept_deferred(
    shared: &Shared,
    upkeep: &dyn Upkeep,
    batch: Vec<(Vec<Change>, Values, Ack)>,
    pending: &mut Pending,
    pending_limit: usize,
) {
    let (submissions, acks): (Vec<Vec<Change>>, Vec<Ack>) =
        batch.into_iter().map(|(changes, _, ack)| (changes, ack)).unzip();
    let outcome = shared.write(|shared, txn| {
        let slices: Vec<&[Change]> = submissions.iter().map(Vec::as_slice).collect();
        check_batch(shared, txn, &slices, &pending.nodes).map(|(results, _)| results)
    });
    let outcome = outcome.inspect(|results| {
        for (changes, _) in submissions.into_iter().zip(results).filter(|(_, verdict)| verdict.is_ok()) {
            for change in changes {
                if let Change::Merge { key, node, children } = change {
                    pending.links.extend(children.iter().map(|child| (child.to_bytes(), key.to_bytes())));
                    match pending.nodes.get_mut(&key) {
                        Some(waiting) => waiting.merge(&node),
                        None => {
                            pending.nodes.insert(key, node.without_steering());
                        }
                    }
                }
            }
        }
    });
    let outcome = match outcome {
        Ok(results) if pending.nodes.len() >= pending_limit => {
            settle(shared, upkeep, Settle::Pending, pending).map(|()| results)
        }
        outcome => outcome,
    };
    if let Err(e) = &outcome {
        pending.failed.get_or_insert(e.clone());
    }
    answer(acks, outcome);
}

/// Commits the waiting records of a bulk load (and with [`Settle::All`] every record's values) in one
/// transaction: each waiting node merged into the record stored now, its parent links, and the cached values of
/// everything that changed. Clears the store's mark of owed values.
fn settle(shared: &Shared, upkeep: &dyn Upkeep, which: Settle, pending: &mut Pending) -> Result<(), StoreError> {
    let failed = pending.failed.take();
    if which == Settle::Pending && pending.nodes.is_empty() {
        return failed.map_or(Ok(()), Err);
    }
    let started = std::time::Instant::now();
    let mut waiting = std::mem::take(&mut pending.nodes);
    let count = waiting.len();
    let mut links = std::mem::take(&mut pending.links);
    links.sort_unstable();
    links.dedup();
    let mut order: Vec<PositionKey> = waiting.keys().copied().collect();
    order.sort_unstable();
    let lmdb = |e| shared.lmdb_error(e);
    shared.write(|shared, txn| {
        // In place: a retried transaction merges the same stored records again, which changes nothing.
        merge_waiting(shared, txn, &mut waiting, &order)?;
        let merged = &mut waiting;
        let added = store_links(shared, txn, &links)?;
        if added > 0 {
            let count = shared.link_count(txn)?;
            shared.put_meta(txn, META_LINKS, &(count + added).to_be_bytes())?;
        }
        let mut keys: Vec<PositionKey> = match which {
            Settle::Pending => merged.keys().copied().collect(),
            Settle::All => {
                let mut keys: Vec<PositionKey> = merged.keys().copied().collect();
                for item in shared.nodes.iter(txn).map_err(lmdb)? {
                    let (key, _) = item.map_err(lmdb)?;
                    keys.extend(PositionKey::from_slice(key).filter(|key| !merged.contains_key(key)));
                }
                keys
            }
        };
        keys.sort_unstable();
        let records = TxnRecords::new(shared, txn, merged);
        let updated = upkeep.update(&records, &keys);
        records.damage()?;
        let stored = shared.nodes.len(txn).map_err(lmdb)?;
        if updated.len() as u64 * 4 >= stored {
            write_values_in_one_pass(shared, txn, &updated, merged)?;
            let updated_waiting: KeyMap<CachedValues> =
                updated.iter().filter(|(key, _)| merged.contains_key(key)).map(|(k, v)| (*k, *v)).collect();
            write_records(shared, txn, merged, &updated_waiting)?;
        } else {
            write_records(shared, txn, merged, &updated)?;
        }
        shared.meta.delete(txn, META_VALUES_OWED).map_err(lmdb)?;
        Ok(())
    })?;
    log::info!(
        "{}: {} waiting records committed{}, with their cached values, in {:.2} s",
        shared.data_file.display(),
        count,
        if which == Settle::All { " and every value recomputed" } else { "" },
        started.elapsed().as_secs_f64()
    );
    failed.map_or(Ok(()), Err)
}

/// Merges the waiting nodes into the records stored now, read in key order, in place; a node whose record would
/// not change is dropped. A waiting node whose stored record holds another position (written by another process
/// since the check) or does not decode is dropped too, with an error in the log.
fn merge_waiting(
    shared: &Shared,
    txn: &RwTxn,
    waiting: &mut KeyMap<Node>,
    order: &[PositionKey],
) -> Result<(), StoreError> {
    for &key in order {
        let Some(bytes) = shared.nodes.get(txn, &key.to_bytes()).map_err(|e| shared.lmdb_error(e))? else {
            continue;
        };
        let Some(node) = waiting.get_mut(&key) else { continue };
        match shared.node_from(key, bytes) {
            Ok(stored) if stored.position != node.position => {
                log::error!(
                    "{}: key {key} holds {} since it was checked; {} left out",
                    shared.data_file.display(),
                    stored.position.fen(),
                    node.position.fen()
                );
                waiting.remove(&key);
            }
            Ok(stored) => {
                let mut updated = stored.clone();
                updated.merge(node);
                if updated == stored {
                    waiting.remove(&key);
                } else {
                    *node = updated;
                }
            }
            Err(e) => {
                log::error!("{e}; its waiting changes left out");
                waiting.remove(&key);
            }
        }
    }
    Ok(())
}

/// Applies a batch of submissions in one transaction. A submission is refused whole (a key collision, a corrupt
/// record in its way) without holding back the others; the outer `Err` (an LMDB failure) aborts the whole batch.
///
/// Submissions are checked first; the accepted changes are then applied in key order, and the parent links in
/// (child, parent) order, so that consecutive writes land on the same pages.
fn apply_batch(shared: &Shared, txn: &mut RwTxn, batch: &[&[Change]]) -> Result<(Verdicts, KeyMap<Node>), StoreError> {
    let (results, mut stored) = check_batch(shared, txn, batch, &KeyMap::default())?;
    let mut merges: Vec<(PositionKey, &Node)> = Vec::new();
    let mut links: Vec<([u8; 8], [u8; 8])> = Vec::new();
    for (changes, _) in batch.iter().zip(&results).filter(|(_, verdict)| verdict.is_ok()) {
        for change in *changes {
            if let Change::Merge { key, node, children } = change {
                merges.push((*key, node));
                links.extend(children.iter().map(|child| (child.to_bytes(), key.to_bytes())));
            }
        }
    }
    // Stable: several changes of one key keep their order.
    merges.sort_by_key(|(key, _)| *key);
    let mut merged: KeyMap<Node> = KeyMap::default();
    for (key, node) in merges {
        merge(shared, txn, key, node, &mut merged, &mut stored)?;
    }
    // The analyst's marks, after the engines' answers of the same batch, in the order they came.
    let mut unlinked = Vec::new();
    for (changes, _) in batch.iter().zip(&results).filter(|(_, verdict)| verdict.is_ok()) {
        for change in *changes {
            if let Change::Mark(mark) = change {
                match apply_mark(shared, txn, mark, &mut merged, &mut stored)? {
                    EdgeMade::Made => links.push((mark.child.to_bytes(), mark.key.to_bytes())),
                    EdgeMade::Removed => unlinked.push((mark.child, mark.key)),
                    EdgeMade::Same => {}
                }
            }
        }
    }
    links.sort_unstable();
    links.dedup();
    let added = store_links(shared, txn, &links)?;
    let removed = remove_links(shared, txn, &unlinked)?;
    if added > 0 || removed > 0 {
        let count = shared.link_count(txn)?;
        shared.put_meta(txn, META_LINKS, &(count + added).saturating_sub(removed).to_be_bytes())?;
    }
    Ok((results, merged))
}

/// Checks each submission of a batch (see [`check`]) against the stored records, a bulk load's `waiting` records
/// and the positions accepted before it, and applies the meta changes of the accepted ones. Returns the verdicts
/// and the stored records read, each read (in key order) and decoded once.
fn check_batch(
    shared: &Shared,
    txn: &mut RwTxn,
    batch: &[&[Change]],
    waiting: &KeyMap<Node>,
) -> Result<(Verdicts, KeyMap<Option<Node>>), StoreError> {
    let lmdb = |e| shared.lmdb_error(e);
    let mut accepted: KeyMap<&PackedPosition> = KeyMap::default();
    let mut keys: Vec<PositionKey> = batch
        .iter()
        .flat_map(|changes| changes.iter())
        .filter_map(|change| match change {
            Change::Merge { key, .. } if !waiting.contains_key(key) => Some(*key),
            Change::Mark(mark) => Some(mark.key),
            _ => None,
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    // Records read while checking, kept for the merge. A record that does not decode is kept as its error.
    let mut stored: KeyMap<Option<Node>> = KeyMap::default();
    let mut corrupt: KeyMap<StoreError> = KeyMap::default();
    stored.reserve(keys.len());
    for key in keys {
        match shared.nodes.get(txn, &key.to_bytes()).map_err(lmdb)? {
            None => {
                stored.insert(key, None);
            }
            Some(bytes) => match shared.node_from(key, bytes) {
                Ok(record) => {
                    stored.insert(key, Some(record));
                }
                Err(e) => {
                    corrupt.insert(key, e);
                }
            },
        }
    }
    let mut results = Vec::with_capacity(batch.len());
    for changes in batch {
        let verdict = check(shared, changes, &accepted, waiting, &stored, &corrupt);
        if verdict.is_ok() {
            for change in *changes {
                match change {
                    Change::Merge { key, node, .. } => {
                        accepted.insert(*key, &node.position);
                    }
                    Change::SetEngine(identity) => shared.put_meta(txn, META_ENGINE, identity.as_bytes())?,
                    Change::AddEngines(names) => shared.add_engines(txn, names)?,
                    Change::Task(change) => {
                        let name = change.meta_name();
                        let stored = shared.meta_value(txn, &name)?.and_then(tasks::decode);
                        match change.applied(stored) {
                            Some(task) => shared.put_meta(txn, &name, &tasks::encode(&task))?,
                            None => {
                                shared.meta.delete(txn, &name).map_err(|e| shared.lmdb_error(e))?;
                            }
                        }
                    }
                    Change::Clock(change) => shared.put_meta(txn, change.meta_name(), &change.body())?,
                    Change::Mark(change) => {
                        match &change.mark {
                            Some(mark) => shared.put_meta(txn, &change.meta_name(), &marks::encode(mark))?,
                            None => {
                                shared.meta.delete(txn, &change.meta_name()).map_err(|e| shared.lmdb_error(e))?;
                            }
                        }
                        let version = shared
                            .meta_value(txn, marks::META_MARKS_VERSION)?
                            .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
                            .map_or(0, u64::from_be_bytes);
                        shared.put_meta(txn, marks::META_MARKS_VERSION, &(version + 1).to_be_bytes())?;
                    }
                }
            }
        }
        results.push(verdict);
    }
    Ok((results, stored))
}

/// Would this submission be accepted? Checks every merge against the positions accepted earlier in the batch, the
/// waiting records of a bulk load and the stored records read for the batch.
fn check(
    shared: &Shared,
    changes: &[Change],
    accepted: &KeyMap<&PackedPosition>,
    waiting: &KeyMap<Node>,
    stored: &KeyMap<Option<Node>>,
    corrupt: &KeyMap<StoreError>,
) -> Result<(), StoreError> {
    for change in changes {
        if let Change::Mark(mark) = change {
            check_mark(mark, corrupt, stored)?;
            continue;
        }
        let Change::Merge { key, node, .. } = change else {
            continue;
        };
        let known = match accepted.get(key).copied().or_else(|| waiting.get(key).map(|node| &node.position)) {
            Some(position) => Some(position),
            None => {
                if let Some(damaged) = corrupt.get(key) {
                    return Err(damaged.clone());
                }
                stored.get(key).and_then(|record| record.as_ref().map(|r| &r.position))
            }
        };
        if let Some(known) = known.filter(|known| **known != node.position) {
            return Err(StoreError::Collision {
                path: shared.data_file.clone(),
                key: *key,
                stored_fen: known.fen(),
                new_fen: node.position.fen(),
            });
        }
    }
    Ok(())
}

/// Would this mark be accepted? Its record must read, and an exclusion must leave its position a move that is not
/// excluded (checked here, in the write's transaction, as well as by [`Store::set_mark`](super::Store::set_mark)
/// before it: another process, or a merge, may have excluded the others since).
fn check_mark(
    mark: &marks::MarkChange,
    corrupt: &KeyMap<StoreError>,
    stored: &KeyMap<Option<Node>>,
) -> Result<(), StoreError> {
    if let Some(damaged) = corrupt.get(&mark.key) {
        return Err(damaged.clone());
    }
    let excludes = mark.mark.as_ref().is_some_and(|m| m.kind == marks::MarkKind::Exclude);
    let Some(pos) = mark.position.to_position().filter(|_| excludes) else { return Ok(()) };
    let record = stored.get(&mark.key).and_then(Option::as_ref);
    let excluded = |uci: &shakmaty::uci::UciMove| {
        *uci == mark.uci || record.and_then(|r| r.edge(uci)).is_some_and(super::node::Edge::is_excluded)
    };
    use shakmaty::Position;
    if pos.legal_moves().iter().map(|m| crate::notation::canonical(*m)).all(|m| excluded(&m)) {
        return Err(StoreError::LastMoveExcluded { fen: mark.position.fen(), uci: mark.uci.to_string() });
    }
    Ok(())
}

/// Merges a checked node into its stored record (or into its earlier merge in this batch), keeping the result in
/// `merged` when the record changes.
/// Adds `links` (child, parent), sorted and without repeats, to the pages that hold them (see
/// [`links`](super::links)): each page is read, changed and written once, and split when it grows past its size.
/// Returns how many links were new.
fn store_links(shared: &Shared, txn: &mut RwTxn<'_>, links: &[([u8; 8], [u8; 8])]) -> Result<u64, StoreError> {
    use super::links::{insert_checked, split, write_page};
    let lmdb = |e| shared.lmdb_error(e);
    let mut added = 0u64;
    let mut i = 0;
    while let Some(&(child, _)) = links.get(i) {
        let child_key = PositionKey::from_bytes(child);
        // The page that holds `child`: the last one whose key is not above it (the first page's key is 0).
        // Read with its checksum and order checked: a damaged page is never written back.
        let (page_key, mut page) = match shared.link_page(txn, child_key)? {
            Some((key, page)) => (key, page.to_vec()),
            None => (PositionKey::from_bytes([0; 8]), Vec::new()),
        };
        let next = shared.links.get_greater_than(txn, &page_key.to_bytes()).map_err(lmdb)?.map(|(key, _)| key.to_vec());
        let before = added;
        while let Some(&(child, parent)) = links.get(i) {
            if next.as_deref().is_some_and(|next| child[..] >= *next) {
                break;
            }
            added +=
                u64::from(insert_checked(&mut page, PositionKey::from_bytes(child), PositionKey::from_bytes(parent)));
            i += 1;
        }
        if added > before {
            for (key, piece) in split(&page) {
                let key = key.unwrap_or(page_key);
                shared.links.put(txn, &key.to_bytes(), &write_page(key, piece)).map_err(lmdb)?;
            }
        }
    }
    Ok(added)
}

fn merge(
    shared: &Shared,
    txn: &RwTxn,
    key: PositionKey,
    node: &Node,
    merged: &mut KeyMap<Node>,
    stored: &mut KeyMap<Option<Node>>,
) -> Result<(), StoreError> {
    if let Some(pending) = merged.get_mut(&key) {
        pending.merge(node);
        return Ok(());
    }
    let record = match stored.remove(&key) {
        Some(record) => record,
        None => shared.node_at(txn, key)?,
    };
    match record {
        None => {
            // Only a mark's own change sets a mark: a record written otherwise comes without any.
            merged.insert(key, node.without_steering());
        }
        Some(stored) => {
            let mut updated = stored.clone();
            updated.merge(node);
            if updated != stored {
                merged.insert(key, updated);
            }
        }
    }
    Ok(())
}

/// What a mark's change did to its move's edge.
enum EdgeMade {
    /// A placeholder edge was made: its parent link is owed.
    Made,
    /// The placeholder the mark made went with it: its parent link goes too.
    Removed,
    Same,
}

/// Removes the parent links (child, parent) of edges a lifted mark took away; returns how many were there.
fn remove_links(shared: &Shared, txn: &mut RwTxn<'_>, links: &[(PositionKey, PositionKey)]) -> Result<u64, StoreError> {
    let mut removed = 0;
    for &(child, parent) in links {
        let Some((page_key, page)) = shared.link_page(txn, child)? else { continue };
        let mut page = page.to_vec();
        if super::links::remove_checked(&mut page, child, parent) {
            removed += 1;
            let value = super::links::write_page(page_key, &page);
            shared.links.put(txn, &page_key.to_bytes(), &value).map_err(|e| shared.lmdb_error(e))?;
        }
    }
    Ok(removed)
}

/// Sets or lifts a mark on its move's edge in the record (as merged so far in this batch, or as stored, or a new
/// one); says whether an edge was made or removed (its parent link is then owed, or goes).
fn apply_mark(
    shared: &Shared,
    txn: &RwTxn,
    change: &marks::MarkChange,
    merged: &mut KeyMap<Node>,
    stored: &mut KeyMap<Option<Node>>,
) -> Result<EdgeMade, StoreError> {
    let record = match merged.remove(&change.key) {
        Some(node) => Some(node),
        None => match stored.remove(&change.key) {
            Some(record) => record,
            None => shared.node_at(txn, change.key)?,
        },
    };
    let mut node = record.unwrap_or_else(|| Node::new(change.position.clone()));
    let child_evaluated = match merged.get(&change.child) {
        Some(child) => child.eval.is_some(),
        None => shared.node_at(txn, change.child)?.is_some_and(|child| child.eval.is_some()),
    };
    let edges = node.edges.len();
    let made = change.apply(&mut node, child_evaluated);
    let removed = node.edges.len() < edges;
    merged.insert(change.key, node);
    Ok(if made {
        EdgeMade::Made
    } else if removed {
        EdgeMade::Removed
    } else {
        EdgeMade::Same
    })
}

/// Brings cached values up to date from the merged records upward, then writes every merged or updated record once,
/// in key order.
fn write_with_cached_values(
    shared: &Shared,
    upkeep: &dyn Upkeep,
    txn: &mut RwTxn,
    mut merged: KeyMap<Node>,
) -> Result<(), StoreError> {
    if merged.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let changed: Vec<PositionKey> = merged.keys().copied().collect();
    let records = TxnRecords::new(shared, txn, &merged);
    let updated = upkeep.update(&records, &changed);
    // A damaged record met on the way up fails the write: its parents' values would be computed without it.
    records.damage()?;
    shared.last_update_nanos.store(started.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    write_records(shared, txn, &mut merged, &updated)
}

/// Writes new cached values into their records (but those in `skip`) in one pass of a cursor over every record:
/// cheaper than a lookup per record when many of them changed.
fn write_values_in_one_pass(
    shared: &Shared,
    txn: &mut RwTxn,
    updated: &KeyMap<CachedValues>,
    skip: &KeyMap<Node>,
) -> Result<(), StoreError> {
    let lmdb = |e| shared.lmdb_error(e);
    let mut buffer = Vec::with_capacity(256);
    let mut cursor = shared.nodes.iter_mut(txn).map_err(lmdb)?;
    while let Some(item) = cursor.next() {
        let (key, bytes) = item.map_err(lmdb)?;
        let Some(key) = PositionKey::from_slice(key) else { continue };
        let Some(values) = updated.get(&key).filter(|_| !skip.contains_key(&key)) else { continue };
        // A damaged record is left as it is: the upkeep left it out too.
        let Ok(mut node) = shared.node_from(key, bytes) else { continue };
        node.idea = values.idea;
        node.cyclic = values.cyclic;
        node.write(key, &mut buffer);
        // SAFETY: the key and the record are owned copies (`key` is a `PositionKey`, `buffer` a fresh encoding):
        // nothing borrowed from the database is alive while the cursor writes.
        unsafe { cursor.put_current(&key.to_bytes(), &buffer) }.map_err(lmdb)?;
    }
    Ok(())
}

/// Writes every merged record and every record whose cached values changed, once each, in key order.
fn write_records(
    shared: &Shared,
    txn: &mut RwTxn,
    merged: &mut KeyMap<Node>,
    updated: &KeyMap<CachedValues>,
) -> Result<(), StoreError> {
    let mut keys: Vec<PositionKey> = merged.keys().chain(updated.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    // Keys past every stored one (a load into an empty store) are appended: no search, and every page filled.
    let lmdb = |e| shared.lmdb_error(e);
    let append = match (keys.first(), shared.nodes.last(txn).map_err(lmdb)?) {
        (Some(first), Some((last, _))) => first.to_bytes().as_slice() > last,
        (_, None) => true,
        (None, _) => false,
    };
    let mut buffer = Vec::with_capacity(256);
    let mut read;
    for key in keys {
        let key_bytes = key.to_bytes();
        let node = match merged.get_mut(&key) {
            Some(node) => node,
            None => {
                let Some(bytes) = shared.nodes.get(txn, &key_bytes).map_err(|e| shared.lmdb_error(e))? else {
                    continue;
                };
                let Ok(node) = shared.node_from(key, bytes) else { continue };
                read = node;
                &mut read
            }
        };
        // Set in place: a retried transaction writes the same.
        if let Some(values) = updated.get(&key) {
            node.idea = values.idea;
            node.cyclic = values.cyclic;
        }
        node.write(key, &mut buffer);
        if append {
            shared.nodes.put_with_flags(txn, PutFlags::APPEND, &key_bytes, &buffer).map_err(lmdb)?;
        } else {
            shared.nodes.put(txn, &key_bytes, &buffer).map_err(lmdb)?;
        }
    }
    Ok(())
}
