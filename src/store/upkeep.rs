//! The interface through which the writer keeps cached values up to date: the layer that owns the values
//! (`values::upkeep`) hands the store an [`Upkeep`], and the writer runs it inside every transaction, after merging,
//! over the records the transaction changed.
//!
//! The store knows the cached fields of a record ([`Node::idea`], [`Node::cyclic`]) only as bytes to keep: what they
//! mean and how they are computed belong to the upkeep.

use std::{borrow::Cow, path::Path};

use heed::RwTxn;

use crate::score::Score;

use super::{
    Shared, StoreError,
    key::{KeyMap, KeySet, PositionKey},
    node::Node,
};

/// The cached values of one record, as the upkeep computed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedValues {
    pub idea: Option<Score>,
    pub cyclic: bool,
}

/// Maintenance of cached values, run by the writer inside its transaction.
pub trait Upkeep: Send + Sync {
    /// Brings the cached values up to date after the records `changed` changed (were merged, or were stored
    /// without their values), carrying every change upward. Returns the new cached values of every record whose
    /// values changed; the writer stores them in the same transaction.
    fn update(&self, records: &TxnRecords<'_, '_>, changed: &[PositionKey]) -> KeyMap<CachedValues>;
}

/// No maintenance: cached values stay as stored (compaction, which changes no record).
pub struct NoUpkeep;

impl Upkeep for NoUpkeep {
    fn update(&self, _: &TxnRecords<'_, '_>, _: &[PositionKey]) -> KeyMap<CachedValues> {
        KeyMap::default()
    }
}

/// The records as the writer's transaction will commit them: this transaction's merged records laid over the
/// stored ones.
///
/// A record or page of links that cannot be read (damaged: its checksum fails, or it does not decode) counts as
/// absent to the upkeep, and the first such error is kept: the writer then fails the transaction
/// rather than commit values computed without it.
pub struct TxnRecords<'t, 'e> {
    shared: &'t Shared,
    txn: &'t RwTxn<'e>,
    merged: &'t KeyMap<Node>,
    damage: parking_lot::Mutex<Option<StoreError>>,
}

impl<'t, 'e> TxnRecords<'t, 'e> {
    pub(super) fn new(shared: &'t Shared, txn: &'t RwTxn<'e>, merged: &'t KeyMap<Node>) -> TxnRecords<'t, 'e> {
        TxnRecords { shared, txn, merged, damage: parking_lot::Mutex::new(None) }
    }

    /// The first record that could not be read, if any.
    pub(super) fn damage(self) -> Result<(), StoreError> {
        self.damage.into_inner().map_or(Ok(()), Err)
    }

    fn keep(&self, e: StoreError) {
        self.damage.lock().get_or_insert(e);
    }

    /// The record at `key` (absent when it cannot be read; see [`TxnRecords`]).
    pub fn record(&self, key: PositionKey) -> Option<Node> {
        if let Some(node) = self.merged.get(&key) {
            return Some(node.clone());
        }
        self.shared.node_at(self.txn, key).unwrap_or_else(|e| {
            self.keep(e);
            None
        })
    }

    /// Keys of the records with a move into `key`, from the parent links.
    pub fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        self.shared.parents(self.txn, key).unwrap_or_else(|e| {
            self.keep(e);
            Vec::new()
        })
    }

    /// How many records the store holds (before this transaction's new ones).
    pub fn stored_len(&self) -> u64 {
        self.shared.nodes.len(self.txn).unwrap_or(0)
    }

    /// Every record, in key order for the stored ones, then this transaction's new ones; records that cannot be read
    /// are left out (see [`TxnRecords`]). One sequential pass: far cheaper than a lookup per record when most are
    /// needed.
    pub fn for_each_record(&self, mut f: impl FnMut(PositionKey, Cow<'t, Node>)) {
        let mut seen_merged = KeySet::default();
        match self.shared.nodes.iter(self.txn) {
            Err(e) => self.keep(self.shared.lmdb_error(e)),
            Ok(iter) => {
                for item in iter {
                    let (key, bytes) = match item {
                        Ok(item) => item,
                        Err(e) => {
                            self.keep(self.shared.lmdb_error(e));
                            continue;
                        }
                    };
                    let Some(key) = PositionKey::from_slice(key) else { continue };
                    if let Some(node) = self.merged.get(&key) {
                        seen_merged.insert(key);
                        f(key, Cow::Borrowed(node));
                        continue;
                    }
                    match self.shared.node_from(key, bytes) {
                        Ok(node) => f(key, Cow::Owned(node)),
                        Err(e) => self.keep(e),
                    }
                }
            }
        }
        for (key, node) in self.merged.iter().filter(|(key, _)| !seen_merged.contains(key)) {
            f(*key, Cow::Borrowed(node));
        }
    }

    /// The store's data file, for messages.
    pub fn file(&self) -> &Path {
        &self.shared.data_file
    }
}
