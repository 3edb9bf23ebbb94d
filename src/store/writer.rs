//! The one writer of a process: a thread that takes changes from a channel and commits many per transaction.

use std::{sync::Arc, thread::JoinHandle};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use heed::{MdbError, PutFlags, RwTxn};

use super::{Change, META_ENGINE, Shared, StoreError, key::PositionKey, node::Node};

enum Message {
    Write { changes: Vec<Change>, ack: Sender<Result<(), StoreError>> },
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
        self.rx
            .recv()
            .unwrap_or_else(|_| Err(StoreError::WriterStopped { path: self.shared.data_file.clone() }))
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
        let mut encode_buffer = Vec::with_capacity(256);
        let outcome = shared.write(|shared, txn| {
            let mut results = Vec::with_capacity(batch.len());
            for (changes, _) in &batch {
                results.push(apply_atomically(shared, txn, changes, &mut encode_buffer)?);
            }
            Ok(results)
        });
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

/// Applies one submission in a nested transaction: all of it or, if one change is refused, none of it.
/// The outer `Err` aborts the whole batch (an LMDB failure); the inner one refuses only this submission.
fn apply_atomically(
    shared: &Shared,
    txn: &mut RwTxn,
    changes: &[Change],
    buffer: &mut Vec<u8>,
) -> Result<Result<(), StoreError>, StoreError> {
    if changes.is_empty() {
        return Ok(Ok(()));
    }
    let mut nested = shared.env.nested_write_txn(txn).map_err(|e| shared.lmdb_error(e))?;
    for change in changes {
        match apply(shared, &mut nested, change, buffer) {
            Ok(()) => {}
            Err(e @ StoreError::Lmdb { .. }) => return Err(e),
            Err(refused) => {
                nested.abort();
                return Ok(Err(refused));
            }
        }
    }
    nested.commit().map_err(|e| shared.lmdb_error(e))?;
    Ok(Ok(()))
}

fn apply(shared: &Shared, txn: &mut RwTxn, change: &Change, buffer: &mut Vec<u8>) -> Result<(), StoreError> {
    let lmdb = |e| shared.lmdb_error(e);
    match change {
        Change::SetEngine(identity) => shared.meta.put(txn, META_ENGINE, identity.as_bytes()).map_err(lmdb),
        Change::Merge { key, node, children } => {
            let key_bytes = key.to_bytes();
            buffer.clear();
            match shared.nodes.get(txn, &key_bytes).map_err(lmdb)? {
                None => node.encode_into(buffer),
                Some(bytes) => {
                    let mut stored = Node::decode(bytes).map_err(|source| StoreError::Corrupt {
                        path: shared.data_file.clone(),
                        key: *key,
                        source,
                    })?;
                    if stored.position != node.position {
                        return Err(StoreError::Collision {
                            path: shared.data_file.clone(),
                            key: *key,
                            stored_fen: stored.position.fen(),
                            new_fen: node.position.fen(),
                        });
                    }
                    stored.merge(node);
                    stored.encode_into(buffer);
                    if buffer.as_slice() == bytes {
                        buffer.clear();
                    }
                }
            }
            if !buffer.is_empty() {
                shared.nodes.put(txn, &key_bytes, buffer).map_err(lmdb)?;
            }
            for child in children {
                link(shared, txn, *child, *key)?;
            }
            Ok(())
        }
    }
}

fn link(shared: &Shared, txn: &mut RwTxn, child: PositionKey, parent: PositionKey) -> Result<(), StoreError> {
    match shared.parents.put_with_flags(txn, PutFlags::NO_DUP_DATA, &child.to_bytes(), &parent.to_bytes()) {
        Ok(()) | Err(heed::Error::Mdb(MdbError::KeyExist)) => Ok(()),
        Err(e) => Err(shared.lmdb_error(e)),
    }
}
