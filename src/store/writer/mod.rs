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

mod batch;

use std::{sync::Arc, thread::JoinHandle};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use heed::RwTxn;

use self::batch::{
    apply_batch, check_batch, store_links, write_records, write_values_in_one_pass, write_with_cached_values,
};
use super::{
    Change, META_LINKS, META_VALUES_OWED, Shared, StoreError, clear_stale_readers,
    key::{KeyMap, PositionKey},
    node::Node,
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

/// How often the writer of a store that stays open clears the reader slots of processes that died
/// ([`clear_stale_readers`]).
const STALE_READER_CHECK: std::time::Duration = std::time::Duration::from_secs(60);

fn run(shared: &Shared, upkeep: &dyn Upkeep, rx: &Receiver<Message>, max_batch: usize) {
    let mut pending = Pending::default();
    let pending_limit = max_batch.saturating_mul(BULK_PENDING_FACTOR).max(1);
    let mut stopping = false;
    let mut readers_checked = std::time::Instant::now();
    while !stopping {
        let Ok(first) = rx.recv() else { break };
        if readers_checked.elapsed() >= STALE_READER_CHECK {
            clear_stale_readers(&shared.env, &shared.data_file);
            readers_checked = std::time::Instant::now();
        }
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
