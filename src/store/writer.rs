//! The one writer of a process: a thread that takes changes from a channel and commits many per transaction.

//!
//! Every transaction ends with the upkeep of cached values ([`Upkeep`]) over the records it changed. A bulk load
//! submits with [`StoreWriter::submit_deferred`] instead: its records are committed without that upkeep, their keys
//! are gathered, and [`StoreWriter::settle`] (or the writer's end) runs it once over all of them, children before
//! parents. A meta entry marks the store while values are owed, in the same transaction as the first deferred
//! write; a store opened with the mark (a process that died in a bulk load) has every value recomputed on open.

use std::{collections::HashMap, sync::Arc, thread::JoinHandle};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use heed::RwTxn;

use super::{
    Change, META_ENGINE, META_LINKS, META_VALUES_OWED, Shared, StoreError,
    key::{KeyMap, KeySet, PositionKey},
    node::{Node, PackedPosition},
    upkeep::{CachedValues, TxnRecords, Upkeep},
};

/// The outcome of each submission of a batch: a submission is refused whole, without holding back the others.
type Verdicts = Vec<Result<(), StoreError>>;

/// How many times more changes a transaction of deferred writes may take than the settings' `max_batch`.
const BULK_BATCH_FACTOR: usize = 8;

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
    /// Those written with deferred values by this process.
    Owed,
    /// Every record of the store (values left owed by a process that stopped without settling).
    All,
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

    /// Queues changes of a bulk load: they are committed like [`submit`](Self::submit)'s, but the cached values of
    /// the records they change are brought up to date at the next [`settle`](Self::settle) (at the latest when the
    /// store closes), in one pass over all of them.
    pub fn submit_deferred(&self, changes: Vec<Change>) -> Receipt {
        self.send(|ack| Message::Write { changes, values: Values::Deferred, ack })
    }

    /// Brings the cached values owed by deferred submissions up to date, in one transaction.
    pub fn settle(&self) -> Receipt {
        self.send(|ack| Message::Settle { which: Settle::Owed, ack })
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
    // Keys written with deferred values and not yet settled.
    let mut owed = KeySet::default();
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
                    let outcome = settle(shared, upkeep, which, &mut owed);
                    if let Err(e) = &outcome {
                        log::error!("bringing cached values up to date failed: {e}");
                    }
                    let _ = ack.send(outcome);
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
            // A bulk load's writes take larger transactions: each copies a page of the tree once for many changes
            // instead of once per transaction, and no reader waits for their values anyway.
            let limit = match batch.first() {
                Some((_, Values::Deferred, _)) => max_batch.saturating_mul(BULK_BATCH_FACTOR),
                _ => max_batch,
            };
            if !stopping && held.is_none() && size < limit && !batch.is_empty() {
                next = rx.try_recv().ok();
            }
        }
        write_batch(shared, upkeep, batch, &mut owed);
        if let Some(message) = held {
            // Put back in front: handled alone at the next turn.
            match message {
                Message::Settle { which, ack } => {
                    let _ = ack.send(settle(shared, upkeep, which, &mut owed));
                }
                Message::Write { changes, values, ack } => {
                    write_batch(shared, upkeep, vec![(changes, values, ack)], &mut owed)
                }
                Message::Stop => stopping = true,
            }
        }
    }
    if !owed.is_empty()
        && let Err(e) = settle(shared, upkeep, Settle::Owed, &mut owed)
    {
        log::error!("cached values of a bulk load not brought up to date ({e}); they are recomputed on next open");
    }
}

/// Commits one batch of writes (all of one kind) and answers each submission.
fn write_batch(shared: &Shared, upkeep: &dyn Upkeep, batch: Vec<(Vec<Change>, Values, Ack)>, owed: &mut KeySet) {
    let Some(values) = batch.first().map(|(_, values, _)| *values) else { return };
    let submissions: Vec<&[Change]> = batch.iter().map(|(changes, _, _)| changes.as_slice()).collect();
    let first_owed = values == Values::Deferred && owed.is_empty();
    let outcome = shared.write(|shared, txn| {
        let (results, merged) = apply_batch(shared, txn, &submissions)?;
        match values {
            Values::Now => write_with_cached_values(shared, upkeep, txn, merged)?,
            Values::Deferred => {
                if first_owed && !merged.is_empty() {
                    shared.meta.put(txn, META_VALUES_OWED, &[1]).map_err(|e| shared.lmdb_error(e))?;
                }
                let keys: Vec<PositionKey> = merged.keys().copied().collect();
                write_records(shared, txn, merged, &KeyMap::default())?;
                return Ok((results, keys));
            }
        }
        Ok((results, Vec::new()))
    });
    match outcome {
        Ok((results, deferred)) => {
            owed.extend(deferred);
            for ((_, _, ack), result) in batch.into_iter().zip(results) {
                let _ = ack.send(result);
            }
        }
        Err(e) => {
            log::error!("store write failed, {} submissions not committed: {e}", batch.len());
            for (_, _, ack) in batch {
                let _ = ack.send(Err(e.clone()));
            }
        }
    }
}

/// Brings owed cached values up to date in one transaction, and clears the store's mark.
fn settle(shared: &Shared, upkeep: &dyn Upkeep, which: Settle, owed: &mut KeySet) -> Result<(), StoreError> {
    if which == Settle::Owed && owed.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    shared.write(|shared, txn| {
        let mut keys: Vec<PositionKey> = match which {
            Settle::Owed => owed.iter().copied().collect(),
            Settle::All => {
                let mut keys = Vec::new();
                for item in shared.nodes.iter(txn).map_err(|e| shared.lmdb_error(e))? {
                    let (key, _) = item.map_err(|e| shared.lmdb_error(e))?;
                    keys.extend(PositionKey::from_slice(key));
                }
                keys
            }
        };
        keys.sort_unstable();
        let updated = upkeep.update(&TxnRecords { shared, txn, merged: &KeyMap::default() }, &keys);
        let stored = shared.nodes.len(txn).map_err(|e| shared.lmdb_error(e))?;
        if updated.len() as u64 * 4 >= stored {
            write_values_in_one_pass(shared, txn, &updated)?;
        } else {
            write_records(shared, txn, KeyMap::default(), &updated)?;
        }
        shared.meta.delete(txn, META_VALUES_OWED).map_err(|e| shared.lmdb_error(e))?;
        Ok(())
    })?;
    log::info!(
        "{}: cached values of {} records brought up to date in {:.2} s",
        shared.data_file.display(),
        if which == Settle::Owed { owed.len().to_string() } else { "all".to_string() },
        started.elapsed().as_secs_f64()
    );
    owed.clear();
    Ok(())
}

/// Applies a batch of submissions in one transaction. A submission is refused whole (a key collision, a corrupt
/// record in its way) without holding back the others; the outer `Err` (an LMDB failure) aborts the whole batch.
///
/// Submissions are checked first; the accepted changes are then applied in key order, and the parent links in
/// (child, parent) order, so that consecutive writes land on the same pages.
fn apply_batch(shared: &Shared, txn: &mut RwTxn, batch: &[&[Change]]) -> Result<(Verdicts, KeyMap<Node>), StoreError> {
    let mut accepted_positions: HashMap<PositionKey, &PackedPosition> = HashMap::new();
    let mut results = Vec::with_capacity(batch.len());
    let mut merges: Vec<(PositionKey, &Node)> = Vec::new();
    let mut links: Vec<([u8; 8], [u8; 8])> = Vec::new();
    // Records read while checking, kept for the merge: each is read and decoded once.
    let mut stored: KeyMap<Option<Node>> = KeyMap::default();
    for changes in batch {
        let verdict = check(shared, txn, changes, &accepted_positions, &mut stored)?;
        if verdict.is_ok() {
            for change in *changes {
                match change {
                    Change::Merge { key, node, children } => {
                        accepted_positions.insert(*key, &node.position);
                        merges.push((*key, node));
                        links.extend(children.iter().map(|child| (child.to_bytes(), key.to_bytes())));
                    }
                    Change::SetEngine(identity) => {
                        shared.meta.put(txn, META_ENGINE, identity.as_bytes()).map_err(|e| shared.lmdb_error(e))?
                    }
                    Change::AddEngines(names) => shared.add_engines(txn, names)?,
                }
            }
        }
        results.push(verdict);
    }
    // Stable: several changes of one key keep their order.
    merges.sort_by_key(|(key, _)| *key);
    let mut merged: KeyMap<Node> = KeyMap::default();
    for (key, node) in merges {
        merge(shared, txn, key, node, &mut merged, &mut stored)?;
    }
    links.sort_unstable();
    links.dedup();
    let added = store_links(shared, txn, &links)?;
    if added > 0 {
        let count = shared.link_count(txn)?;
        shared.meta.put(txn, META_LINKS, &(count + added).to_be_bytes()).map_err(|e| shared.lmdb_error(e))?;
    }
    Ok((results, merged))
}

/// Would this submission be accepted? Checks every merge against the stored record and the positions accepted
/// earlier in the batch. The inner `Err` refuses the submission.
fn check(
    shared: &Shared,
    txn: &RwTxn,
    changes: &[Change],
    accepted: &HashMap<PositionKey, &PackedPosition>,
    stored: &mut KeyMap<Option<Node>>,
) -> Result<Result<(), StoreError>, StoreError> {
    for change in changes {
        let Change::Merge { key, node, .. } = change else {
            continue;
        };
        let stored_position = match accepted.get(key) {
            Some(position) => Some((*position).clone()),
            None => {
                if !stored.contains_key(key) {
                    let record = match shared.nodes.get(txn, &key.to_bytes()).map_err(|e| shared.lmdb_error(e))? {
                        None => None,
                        Some(bytes) => match Node::decode(bytes) {
                            Ok(record) => Some(record),
                            Err(source) => {
                                return Ok(Err(StoreError::Corrupt {
                                    path: shared.data_file.clone(),
                                    key: *key,
                                    source,
                                }));
                            }
                        },
                    };
                    stored.insert(*key, record);
                }
                stored.get(key).and_then(|record| record.as_ref().map(|r| r.position.clone()))
            }
        };
        if let Some(stored) = stored_position.filter(|stored| *stored != node.position) {
            return Ok(Err(StoreError::Collision {
                path: shared.data_file.clone(),
                key: *key,
                stored_fen: stored.fen(),
                new_fen: node.position.fen(),
            }));
        }
    }
    Ok(Ok(()))
}

/// Merges a checked node into its stored record (or into its earlier merge in this batch), keeping the result in
/// `merged` when the record changes.
/// Adds `links` (child, parent), sorted and without repeats, to the pages that hold them (see
/// [`links`](super::links)): each page is read, changed and written once, and split when it grows past its size.
/// Returns how many links were new.
fn store_links(shared: &Shared, txn: &mut RwTxn<'_>, links: &[([u8; 8], [u8; 8])]) -> Result<u64, StoreError> {
    use super::links::{check_page, insert_checked, split};
    let lmdb = |e| shared.lmdb_error(e);
    let mut added = 0u64;
    let mut i = 0;
    while let Some(&(child, _)) = links.get(i) {
        let child_key = PositionKey::from_bytes(child);
        // The page that holds `child`: the last one whose key is not above it (the first page's key is 0).
        let (page_key, mut page) = match shared.link_page(txn, child_key)? {
            Some((key, page)) => {
                let key = PositionKey::from_slice(key)
                    .ok_or(StoreError::CorruptMeta { path: shared.data_file.clone(), entry: "link page key" })?;
                (key, page.to_vec())
            }
            None => (PositionKey::from_bytes([0; 8]), Vec::new()),
        };
        check_page(&page).map_err(|source| StoreError::Corrupt {
            path: shared.data_file.clone(),
            key: page_key,
            source,
        })?;
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
                shared.links.put(txn, &key.unwrap_or(page_key).to_bytes(), piece).map_err(lmdb)?;
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
        None => match shared.nodes.get(txn, &key.to_bytes()).map_err(|e| shared.lmdb_error(e))? {
            None => None,
            Some(bytes) => Some(Node::decode(bytes).map_err(|source| StoreError::Corrupt {
                path: shared.data_file.clone(),
                key,
                source,
            })?),
        },
    };
    match record {
        None => {
            merged.insert(key, node.clone());
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

/// Brings cached values up to date from the merged records upward, then writes every merged or updated record once,
/// in key order.
fn write_with_cached_values(
    shared: &Shared,
    upkeep: &dyn Upkeep,
    txn: &mut RwTxn,
    merged: KeyMap<Node>,
) -> Result<(), StoreError> {
    if merged.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let changed: Vec<PositionKey> = merged.keys().copied().collect();
    let updated = upkeep.update(&TxnRecords { shared, txn, merged: &merged }, &changed);
    shared.last_update_nanos.store(started.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    write_records(shared, txn, merged, &updated)
}

/// Writes new cached values into their records in one pass of a cursor over every record: cheaper than a lookup
/// per record when many of them changed.
fn write_values_in_one_pass(
    shared: &Shared,
    txn: &mut RwTxn,
    updated: &KeyMap<CachedValues>,
) -> Result<(), StoreError> {
    let lmdb = |e| shared.lmdb_error(e);
    let mut buffer = Vec::with_capacity(256);
    let mut cursor = shared.nodes.iter_mut(txn).map_err(lmdb)?;
    while let Some(item) = cursor.next() {
        let (key, bytes) = item.map_err(lmdb)?;
        let Some(key) = PositionKey::from_slice(key) else { continue };
        let Some(values) = updated.get(&key) else { continue };
        // A record that does not decode is left as it is: the upkeep left it out too.
        let Ok(mut node) = Node::decode(bytes) else { continue };
        node.idea = values.idea;
        node.cyclic = values.cyclic;
        buffer.clear();
        node.encode_into(&mut buffer);
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
    mut merged: KeyMap<Node>,
    updated: &KeyMap<CachedValues>,
) -> Result<(), StoreError> {
    let mut keys: Vec<PositionKey> = merged.keys().chain(updated.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let mut buffer = Vec::with_capacity(256);
    for key in keys {
        let key_bytes = key.to_bytes();
        let mut node = match merged.remove(&key) {
            Some(node) => node,
            None => {
                let Some(bytes) = shared.nodes.get(txn, &key_bytes).map_err(|e| shared.lmdb_error(e))? else {
                    continue;
                };
                let Ok(node) = Node::decode(bytes) else { continue };
                node
            }
        };
        if let Some(values) = updated.get(&key) {
            node.idea = values.idea;
            node.cyclic = values.cyclic;
        }
        buffer.clear();
        node.encode_into(&mut buffer);
        shared.nodes.put(txn, &key_bytes, &buffer).map_err(|e| shared.lmdb_error(e))?;
    }
    Ok(())
}
