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
    Shared,
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
pub struct TxnRecords<'t, 'e> {
    pub(super) shared: &'t Shared,
    pub(super) txn: &'t RwTxn<'e>,
    pub(super) merged: &'t KeyMap<Node>,
}

impl<'t> TxnRecords<'t, '_> {
    /// The record at `key`. A record that cannot be read or decoded is logged and counts as absent: the upkeep
    /// leaves it out rather than failing the transaction that carries other changes.
    pub fn record(&self, key: PositionKey) -> Option<Node> {
        if let Some(node) = self.merged.get(&key) {
            return Some(node.clone());
        }
        match self.shared.nodes.get(self.txn, &key.to_bytes()) {
            Ok(Some(bytes)) => match Node::decode(bytes) {
                Ok(node) => Some(node),
                Err(e) => {
                    log::error!("{}: key {key}: {e}; left out of cached values", self.file().display());
                    None
                }
            },
            Ok(None) => None,
            Err(e) => {
                log::error!("{}: key {key}: {e}", self.file().display());
                None
            }
        }
    }

    /// Keys of the records with a move into `key`, from the parent links.
    pub fn parents(&self, key: PositionKey) -> Vec<PositionKey> {
        self.shared.parents(self.txn, key).unwrap_or_else(|e| {
            log::warn!("{}: parent links of {key} unreadable: {e}", self.file().display());
            Vec::new()
        })
    }

    /// How many records the store holds (before this transaction's new ones).
    pub fn stored_len(&self) -> u64 {
        self.shared.nodes.len(self.txn).unwrap_or(0)
    }

    /// Every record, in key order for the stored ones, then this transaction's new ones; records that do not decode
    /// are logged and left out. One sequential pass: far cheaper than a lookup per record when most are needed.
    pub fn for_each_record(&self, mut f: impl FnMut(PositionKey, Cow<'t, Node>)) {
        let mut seen_merged = KeySet::default();
        match self.shared.nodes.iter(self.txn) {
            Err(e) => log::error!("{}: {e}", self.file().display()),
            Ok(iter) => {
                for item in iter {
                    let Ok((key, bytes)) = item else {
                        log::error!("{}: a record could not be read; left out of cached values", self.file().display());
                        continue;
                    };
                    let Some(key) = PositionKey::from_slice(key) else { continue };
                    if let Some(node) = self.merged.get(&key) {
                        seen_merged.insert(key);
                        f(key, Cow::Borrowed(node));
                        continue;
                    }
                    match Node::decode(bytes) {
                        Ok(node) => f(key, Cow::Owned(node)),
                        Err(e) => log::error!("{}: key {key}: {e}; left out of cached values", self.file().display()),
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
