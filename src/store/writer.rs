//! The one writer of a process: a thread that takes changes from a channel and commits many per transaction.

use std::{collections::HashMap, sync::Arc, thread::JoinHandle};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use heed::{MdbError, PutFlags, RwTxn};

use super::{
    Change, META_ENGINE, Shared, StoreError,
    key::PositionKey,
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
        self.rx.recv().unwrap_or_else(|_| {
            Err(StoreError::WriterStopped {
                path: self.shared.data_file.clone(),
            })
        })
    }
}

impl StoreWriter {
    /// Queues changes for the next transaction.
    pub fn submit(&self, changes: Vec<Change>) -> Receipt {
        let (ack, rx) = bounded(1);
        if let Err(crossbeam_channel::SendError(Message::Write { ack, .. })) =
            self.tx.send(Message::Write { changes, ack })
        {
            let _ = ack.send(Err(StoreError::WriterStopped {
                path: self.shared.data_file.clone(),
            }));
        }
        Receipt {
            rx,
            shared: self.shared.clone(),
        }
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
            log::error!(
                "could not start the store writer thread for {}",
                shared.data_file.display()
            );
        }
        WriterThread { tx, shared, thread }
    }

    pub(super) fn handle(&self) -> StoreWriter {
        StoreWriter {
            tx: self.tx.clone(),
            shared: self.shared.clone(),
        }
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
                log::error!(
                    "store write failed, {} submissions not committed: {e}",
                    batch.len()
                );
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
    for (changes, _) in batch {
        let verdict = check(shared, txn, changes, &accepted_positions)?;
        if verdict.is_ok() {
            for change in changes {
                match change {
                    Change::Merge {
                        key,
                        node,
                        children,
                    } => {
                        accepted_positions.insert(*key, &node.position);
                        merges.push((*key, node));
                        links.extend(
                            children
                                .iter()
                                .map(|child| (child.to_bytes(), key.to_bytes())),
                        );
                    }
                    Change::SetEngine(identity) => shared
                        .meta
                        .put(txn, META_ENGINE, identity.as_bytes())
                        .map_err(|e| shared.lmdb_error(e))?,
                }
            }
        }
        results.push(verdict);
    }
    // Stable: several changes of one key keep their order.
    merges.sort_by_key(|(key, _)| *key);
    let mut buffer = Vec::with_capacity(256);
    for (key, node) in merges {
        merge(shared, txn, key, node, &mut buffer)?;
    }
    links.sort_unstable();
    links.dedup();
    for (child, parent) in links {
        match shared
            .parents
            .put_with_flags(txn, PutFlags::NO_DUP_DATA, &child, &parent)
        {
            Ok(()) | Err(heed::Error::Mdb(MdbError::KeyExist)) => {}
            Err(e) => return Err(shared.lmdb_error(e)),
        }
    }
    Ok(results)
}

/// Would this submission be accepted? Checks every merge against the stored record and the positions accepted
/// earlier in the batch. The inner `Err` refuses the submission.
fn check(
    shared: &Shared,
    txn: &RwTxn,
    changes: &[Change],
    accepted: &HashMap<PositionKey, &PackedPosition>,
) -> Result<Result<(), StoreError>, StoreError> {
    for change in changes {
        let Change::Merge { key, node, .. } = change else {
            continue;
        };
        let stored_position = match accepted.get(key) {
            Some(position) => Some((*position).clone()),
            None => match shared
                .nodes
                .get(txn, &key.to_bytes())
                .map_err(|e| shared.lmdb_error(e))?
            {
                None => None,
                Some(bytes) => match Node::decode(bytes) {
                    Ok(stored) => Some(stored.position),
                    Err(source) => {
                        return Ok(Err(StoreError::Corrupt {
                            path: shared.data_file.clone(),
                            key: *key,
                            source,
                        }));
                    }
                },
            },
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

/// Merges a checked node into its stored record; writes nothing when the record would not change.
fn merge(
    shared: &Shared,
    txn: &mut RwTxn,
    key: PositionKey,
    node: &Node,
    buffer: &mut Vec<u8>,
) -> Result<(), StoreError> {
    let lmdb = |e| shared.lmdb_error(e);
    let key_bytes = key.to_bytes();
    buffer.clear();
    match shared.nodes.get(txn, &key_bytes).map_err(lmdb)? {
        None => node.encode_into(buffer),
        Some(bytes) => {
            let mut stored = Node::decode(bytes).map_err(|source| StoreError::Corrupt {
                path: shared.data_file.clone(),
                key,
                source,
            })?;
            stored.merge(node);
            stored.encode_into(buffer);
            if buffer.as_slice() == bytes {
                return Ok(());
            }
        }
    }
    shared.nodes.put(txn, &key_bytes, buffer).map_err(lmdb)
}
