//! The one writer of a process: a thread that takes changes from a channel and commits many per transaction.

use std::{cell::RefCell, collections::HashMap, sync::Arc, thread::JoinHandle};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use heed::RwTxn;

use crate::{
    score::Score,
    search::{
        graph::{Graph, GraphMut, GraphNode},
        minimax::propagate,
    },
};

use super::{
    Change, META_ENGINE, META_LINKS, Shared, StoreError,
    key::{KeyMap, PositionKey},
    node::{Node, PackedPosition},
};

/// Where the outcome of one submission is sent.
type Ack = Sender<Result<(), StoreError>>;

enum Message {
    Write { changes: Vec<Change>, ack: Ack },
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
    /// Queues changes for the next transaction.
    pub fn submit(&self, changes: Vec<Change>) -> Receipt {
        let (ack, rx) = bounded(1);
        if let Err(crossbeam_channel::SendError(Message::Write { ack, .. })) =
            self.tx.send(Message::Write { changes, ack })
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
    pub(super) fn spawn(shared: Arc<Shared>, max_batch: usize) -> WriterThread {
        let (tx, rx) = unbounded();
        let loop_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || run(&loop_shared, &rx, max_batch))
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

fn run(shared: &Shared, rx: &Receiver<Message>, max_batch: usize) {
    let mut stopping = false;
    while !stopping {
        let Ok(first) = rx.recv() else { return };
        let mut batch = Vec::new();
        let mut size = 0;
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Stop => stopping = true,
                Message::Write { changes, ack } => {
                    size += changes.len().max(1);
                    batch.push((changes, ack));
                }
            }
            if !stopping && size < max_batch {
                next = rx.try_recv().ok();
            }
        }
        if batch.is_empty() {
            continue;
        }
        let outcome = shared.write(|shared, txn| apply_batch(shared, txn, &batch));
        match outcome {
            Ok(results) => {
                for ((_, ack), result) in batch.into_iter().zip(results) {
                    let _ = ack.send(result);
                }
            }
            Err(e) => {
                log::error!("store write failed, {} submissions not committed: {e}", batch.len());
                for (_, ack) in batch {
                    let _ = ack.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Applies a batch of submissions in one transaction. A submission is refused whole (a key collision, a corrupt
/// record in its way) without holding back the others; the outer `Err` (an LMDB failure) aborts the whole batch.
///
/// Submissions are checked first; the accepted changes are then applied in key order, and the parent links in
/// (child, parent) order, so that consecutive writes land on the same pages.
fn apply_batch(
    shared: &Shared,
    txn: &mut RwTxn,
    batch: &[(Vec<Change>, Ack)],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let mut accepted_positions: HashMap<PositionKey, &PackedPosition> = HashMap::new();
    let mut results = Vec::with_capacity(batch.len());
    let mut merges: Vec<(PositionKey, &Node)> = Vec::new();
    let mut links: Vec<([u8; 8], [u8; 8])> = Vec::new();
    // Records read while checking, kept for the merge: each is read and decoded once.
    let mut stored: KeyMap<Option<Node>> = KeyMap::default();
    for (changes, _) in batch {
        let verdict = check(shared, txn, changes, &accepted_positions, &mut stored)?;
        if verdict.is_ok() {
            for change in changes {
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
    let mut added = 0u64;
    for group in links.chunk_by(|a, b| a.0 == b.0) {
        let child = group[0].0;
        let mut record =
            shared.links.get(txn, &child).map_err(|e| shared.lmdb_error(e))?.map(<[u8]>::to_vec).unwrap_or_default();
        let before = added;
        for (_, parent) in group {
            let inserted = super::links::insert(&mut record, PositionKey::from_bytes(*parent)).map_err(|source| {
                StoreError::Corrupt { path: shared.data_file.clone(), key: PositionKey::from_bytes(child), source }
            })?;
            added += u64::from(inserted);
        }
        if added > before {
            shared.links.put(txn, &child, &record).map_err(|e| shared.lmdb_error(e))?;
        }
    }
    if added > 0 {
        let count = shared.link_count(txn)?;
        shared.meta.put(txn, META_LINKS, &(count + added).to_be_bytes()).map_err(|e| shared.lmdb_error(e))?;
    }
    write_with_cached_values(shared, txn, merged)?;
    Ok(results)
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

/// The graph as the writer's transaction sees it, with this batch's merged records laid over the stored ones, for
/// bringing cached idea values up to date inside the same transaction as the change that caused them.
struct TxnGraph<'t, 'e> {
    shared: &'t Shared,
    txn: &'t RwTxn<'e>,
    merged: &'t KeyMap<Node>,
    cache: RefCell<KeyMap<Option<Arc<GraphNode>>>>,
    updated: KeyMap<(Option<Score>, bool)>,
}

impl Graph for TxnGraph<'_, '_> {
    fn node(&self, key: PositionKey) -> Option<Arc<GraphNode>> {
        if let Some(hit) = self.cache.borrow().get(&key) {
            return hit.clone();
        }
        let loaded = match self.merged.get(&key) {
            Some(node) => Some(Arc::new(GraphNode::from_node(key, node))),
            None => match self.shared.nodes.get(self.txn, &key.to_bytes()) {
                Ok(Some(bytes)) => match Node::decode(bytes) {
                    Ok(node) => Some(Arc::new(GraphNode::from_node(key, &node))),
                    Err(e) => {
                        log::error!("{}: key {key}: {e}; left out of idea values", self.shared.data_file.display());
                        None
                    }
                },
                Ok(None) => None,
                Err(e) => {
                    log::error!("{}: key {key}: {e}", self.shared.data_file.display());
                    None
                }
            },
        };
        self.cache.borrow_mut().insert(key, loaded.clone());
        loaded
    }

    fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        match self.shared.links.get(self.txn, &key.to_bytes()) {
            Ok(Some(record)) => super::links::decode(record).unwrap_or_else(|e| {
                log::warn!("{}: parent links of {key} unreadable: {e}", self.shared.data_file.display());
                Vec::new()
            }),
            _ => Vec::new(),
        }
    }
}

impl GraphMut for TxnGraph<'_, '_> {
    fn set_cached(&mut self, key: PositionKey, idea: Option<Score>, cyclic: bool) {
        if let Some(Some(node)) = self.cache.get_mut().get_mut(&key) {
            let node = Arc::make_mut(node);
            node.idea = idea;
            node.cyclic = cyclic;
        }
        self.updated.insert(key, (idea, cyclic));
    }
}

/// Brings cached values up to date from the merged records upward, then writes every merged or updated record once,
/// in key order.
fn write_with_cached_values(shared: &Shared, txn: &mut RwTxn, mut merged: KeyMap<Node>) -> Result<(), StoreError> {
    if merged.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let updated = {
        let mut graph =
            TxnGraph { shared, txn, merged: &merged, cache: RefCell::default(), updated: KeyMap::default() };
        propagate(&mut graph, merged.keys().copied().collect::<Vec<_>>());
        graph.updated
    };
    shared.last_update_nanos.store(started.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
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
        if let Some((idea, cyclic)) = updated.get(&key) {
            node.idea = *idea;
            node.cyclic = *cyclic;
        }
        buffer.clear();
        node.encode_into(&mut buffer);
        shared.nodes.put(txn, &key_bytes, &buffer).map_err(|e| shared.lmdb_error(e))?;
    }
    Ok(())
}
