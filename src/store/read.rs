//! Reading the store: a [`ReadView`] (one LMDB read transaction) and what it finds, nodes, parent links and meta
//! entries, each checked against its checksum, a key found absent confirmed absent; the store's counts and its list
//! of engines.

use std::sync::Arc;

use heed::{Database, MdbError, RoTxn, WithoutTls, types::Bytes};
use parking_lot::RwLockReadGuard;

use super::{
    META_ENGINE, META_ENGINES, META_LINKS, META_SCHEMA, Record, Shared, Stats, Store, StoreError,
    checksum::{self, Table},
    key::PositionKey,
    links,
    node::{Damage, Node},
};

impl Store {
    /// True the first time it is asked only: for a reader that tells its user once per opened store that the tree
    /// could not be read (the UCI session, which then searches directly), and only logs it after that.
    pub fn first_trouble(&self) -> bool {
        !self.shared.trouble_told.swap(true, std::sync::atomic::Ordering::Relaxed)
    }

    /// A consistent read-only view (an LMDB read transaction). Keep it short: a map growth waits for open views.
    pub fn read(&self) -> Result<ReadView<'_>, StoreError> {
        self.shared.read()
    }

    /// Counts of what the store holds.
    pub fn stats(&self) -> Result<Stats, StoreError> {
        let view = self.read()?;
        let lmdb = |e| self.shared.lmdb_error(e);
        let positions = self.shared.nodes.len(&view.txn).map_err(lmdb)?;
        let edges = self.shared.link_count(&view.txn)?;
        let info = self.shared.env.info();
        let bytes = std::fs::metadata(&self.shared.data_file)
            .map_err(|e| StoreError::Io { path: self.shared.data_file.clone(), source: Arc::new(e) })?
            .len();
        let mut used_pages = 0u64;
        for stat in [self.shared.nodes.stat(&view.txn).map_err(lmdb)?, self.shared.links.stat(&view.txn).map_err(lmdb)?]
        {
            log::debug!("database pages: {stat:?}");
            used_pages = [stat.branch_pages, stat.leaf_pages, stat.overflow_pages]
                .into_iter()
                .fold(used_pages, |sum, pages| sum.saturating_add(pages as u64));
        }
        let page = self.shared.nodes.stat(&view.txn).map_err(lmdb)?.page_size;
        log::debug!("env: last page {} map {}", info.last_page_number, info.map_size);
        // The databases' records count their pages: more than the file holds is a damaged record.
        if used_pages > (info.last_page_number as u64).saturating_add(1) {
            return Err(StoreError::Structure {
                path: self.shared.data_file.clone(),
                what: format!(
                    "the databases' records count {used_pages} pages, the store has {}",
                    info.last_page_number + 1
                ),
            });
        }
        Ok(Stats { positions, edges, bytes, tree_bytes: used_pages * u64::from(page), map_size: info.map_size as u64 })
    }

    /// The identity of the inner engine that produced the stored evaluations, if recorded.
    pub fn engine_identity(&self) -> Result<Option<String>, StoreError> {
        let view = self.read()?;
        match self.shared.meta_value(&view.txn, META_ENGINE)? {
            None => Ok(None),
            Some(b) => String::from_utf8(b.to_vec()).map(Some).map_err(|_| StoreError::CorruptMeta {
                path: self.shared.data_file.clone(),
                entry: META_ENGINE.into(),
            }),
        }
    }

    /// The store's list of engines: the name of engine number N at place N.
    pub fn engines(&self) -> Result<Vec<String>, StoreError> {
        let view = self.read()?;
        self.shared.engines(&view.txn)
    }
}

/// A page of parent links: its key and its links (without its checksum).
type LinkPage<'t> = (PositionKey, &'t [u8]);

impl Shared {
    /// The page of parent links that holds `child`'s, as `txn` sees it: its key and its links (checked).
    pub(super) fn link_page<'t>(
        &self,
        txn: &'t heed::RoTxn<'_>,
        child: PositionKey,
    ) -> Result<Option<LinkPage<'t>>, StoreError> {
        match self.links.get_lower_than_or_equal_to(txn, &child.to_bytes()).map_err(|e| self.lmdb_error(e))? {
            None => Ok(None),
            Some((key, value)) => {
                let key = PositionKey::from_slice(key)
                    .ok_or(StoreError::CorruptMeta { path: self.data_file.clone(), entry: "link page key".into() })?;
                Ok(Some((key, self.page_from(key, value)?)))
            }
        }
    }

    /// Keys of every node with an edge into `child`, in key order, as `txn` sees them.
    pub(super) fn parents(&self, txn: &heed::RoTxn<'_>, child: PositionKey) -> Result<Vec<PositionKey>, StoreError> {
        match self.link_page(txn, child)? {
            None => Ok(Vec::new()),
            Some((key, page)) => links::parents_in(page, child).map_err(|source| StoreError::Corrupt {
                path: self.data_file.clone(),
                key,
                source,
            }),
        }
    }

    /// How many parent links the store holds, as `txn` sees it.
    pub(super) fn link_count(&self, txn: &heed::RoTxn<'_>) -> Result<u64, StoreError> {
        match self.meta_value(txn, META_LINKS)? {
            None => Ok(0),
            Some(bytes) => bytes
                .try_into()
                .map(u64::from_be_bytes)
                .map_err(|_| StoreError::CorruptMeta { path: self.data_file.clone(), entry: META_LINKS.into() }),
        }
    }

    /// The node stored at `key`, from its stored value: its checksum checked (schema 5) and decoded.
    pub(super) fn node_from(&self, key: PositionKey, value: &[u8]) -> Result<Node, StoreError> {
        let read = if self.sealed { Node::read(key, value) } else { Node::decode(value).map_err(Damage::from) };
        read.map_err(|damage| self.damaged(Record::Node(key), damage))
    }

    /// The node of a position as `txn` sees it, if stored.
    pub(super) fn node_at(&self, txn: &heed::RoTxn<'_>, key: PositionKey) -> Result<Option<Node>, StoreError> {
        match self.raw_node_at(txn, key)? {
            None => Ok(None),
            Some(value) => self.node_from(key, value).map(Some),
        }
    }

    /// The stored value of a position as `txn` sees it, if stored: where none is found, the records on either side of
    /// its key are checked first ([`Shared::confirm_absent`]).
    pub(super) fn raw_node_at<'t>(
        &self,
        txn: &'t heed::RoTxn<'_>,
        key: PositionKey,
    ) -> Result<Option<&'t [u8]>, StoreError> {
        match self.nodes.get(txn, &key.to_bytes()).map_err(|e| self.lmdb_error(e))? {
            Some(value) => Ok(Some(value)),
            None => self.confirm_absent(txn, key).map(|()| None),
        }
    }

    /// A position found absent is absent, not a record whose key byte was damaged nor one a damaged page hides
    /// ([`Shared::confirm_absent_in`] in the nodes database).
    pub(super) fn confirm_absent(&self, txn: &heed::RoTxn<'_>, key: PositionKey) -> Result<(), StoreError> {
        self.confirm_absent_in(txn, self.nodes, Table::Nodes, &key.to_bytes())
    }

    /// A key found absent in `database` (its values sealed for `table`) is absent, not a record whose key byte was
    /// damaged nor one a damaged page hides: LMDB keeps a leaf's keys in order and looks a key up by bisection, so a
    /// record whose key changed on disk stays where its key was, beside the place a lookup of its old key ends, and
    /// fails its checksum (which covers the key it was written under) under its new key; a lookup sent astray by a
    /// damaged branch key or node offset ends beside records out of their order. The two records on either side of
    /// the key (from LMDB's own `MDB_SET_RANGE`) are read: each must lie on its side, in order, and hold its
    /// checksum. A few cursor moves, only for a key not found.
    pub(super) fn confirm_absent_in<K: 'static>(
        &self,
        txn: &heed::RoTxn<'_>,
        database: Database<K, Bytes>,
        table: Table,
        key: &[u8],
    ) -> Result<(), StoreError> {
        use std::{cmp::Ordering, ops::Bound};
        if !self.sealed {
            return Ok(());
        }
        let database = database.remap_key_type::<Bytes>();
        let lmdb = |e| self.lmdb_error(e);
        let sought = match (table, PositionKey::from_slice(key)) {
            (Table::Nodes, Some(key)) => format!("node {key}"),
            _ => format!("meta entry '{}'", String::from_utf8_lossy(key)),
        };
        let out_of_order = || StoreError::Structure {
            path: self.data_file.clone(),
            what: format!(
                "a lookup of {sought} finds nothing, and the records beside it are out of their order: a key, a \
                 node's place or a branch page is damaged"
            ),
        };
        let after = database.range(txn, &(Bound::Included(key), Bound::Unbounded)).map_err(lmdb)?.take(2);
        let before = database.rev_range(txn, &(Bound::Unbounded, Bound::Excluded(key))).map_err(lmdb)?.take(2);
        for (side, neighbours) in
            [(Ordering::Greater, after.collect::<Vec<_>>()), (Ordering::Less, before.collect::<Vec<_>>())]
        {
            let mut last: &[u8] = key;
            for neighbour in neighbours {
                let (found, value) = neighbour.map_err(lmdb)?;
                if found.cmp(last) != side {
                    return Err(out_of_order());
                }
                last = found;
                if let Err(mismatch) = checksum::open(table, found, value) {
                    // The schema version alone is stored bare (every deeptree reads it first).
                    if table == Table::Meta && found == META_SCHEMA.as_bytes() && value.len() == 4 {
                        continue;
                    }
                    let record = match (table, PositionKey::from_slice(found)) {
                        (Table::Nodes, Some(found)) => Record::Node(found),
                        (Table::LinkPages, Some(found)) => Record::LinkPage(found),
                        _ => Record::Meta(String::from_utf8_lossy(found).into_owned()),
                    };
                    return Err(StoreError::Checksum { path: self.data_file.clone(), record, mismatch });
                }
            }
        }
        Ok(())
    }

    /// The links of the page stored at `key`, from its stored value: its checksum checked (schema 5), whole and in
    /// order.
    pub(super) fn page_from<'v>(&self, key: PositionKey, value: &'v [u8]) -> Result<&'v [u8], StoreError> {
        let read = if self.sealed {
            links::read_page(key, value)
        } else {
            links::check_page(value).map(|()| value).map_err(Damage::from)
        };
        read.map_err(|damage| self.damaged(Record::LinkPage(key), damage))
    }

    /// The body of meta entry `name` as `txn` sees it, if present: its checksum checked (schema 5).
    pub(super) fn meta_value<'t>(&self, txn: &'t heed::RoTxn<'_>, name: &str) -> Result<Option<&'t [u8]>, StoreError> {
        match self.meta.get(txn, name).map_err(|e| self.lmdb_error(e))? {
            None => self.confirm_absent_in(txn, self.meta, Table::Meta, name.as_bytes()).map(|()| None),
            Some(value) => self.meta_body(name, value).map(Some),
        }
    }

    /// The body of a stored meta entry's value.
    pub(super) fn meta_body<'v>(&self, name: &str, value: &'v [u8]) -> Result<&'v [u8], StoreError> {
        if !self.sealed {
            return Ok(value);
        }
        checksum::open(Table::Meta, name.as_bytes(), value).map_err(|mismatch| StoreError::Checksum {
            path: self.data_file.clone(),
            record: Record::Meta(name.to_owned()),
            mismatch,
        })
    }

    /// The error for a damaged record.
    pub(super) fn damaged(&self, record: Record, damage: Damage) -> StoreError {
        let path = self.data_file.clone();
        match (damage, record) {
            (Damage::Checksum(mismatch), record) => StoreError::Checksum { path, record, mismatch },
            (Damage::Decode(source), Record::Node(key) | Record::LinkPage(key)) => {
                StoreError::Corrupt { path, key, source }
            }
            (Damage::Decode(_), Record::Meta(name)) => StoreError::CorruptMeta { path, entry: name },
            (Damage::Decode(_), Record::Page(_)) => StoreError::CorruptMeta { path, entry: "meta".into() },
        }
    }

    /// The list of engines as `txn` sees it.
    pub(super) fn engines(&self, txn: &heed::RoTxn<'_>) -> Result<Vec<String>, StoreError> {
        let corrupt = || StoreError::CorruptMeta { path: self.data_file.clone(), entry: META_ENGINES.into() };
        let mut numbered = Vec::new();
        for item in self.meta.prefix_iter(txn, META_ENGINES).map_err(|e| self.lmdb_error(e))? {
            let (key, value) = item.map_err(|e| self.lmdb_error(e))?;
            let number: usize = key[META_ENGINES.len()..].parse().map_err(|_| corrupt())?;
            let value = self.meta_body(key, value)?;
            numbered.push((number, String::from_utf8(value.to_vec()).map_err(|_| corrupt())?));
        }
        numbered.sort();
        if numbered.iter().enumerate().any(|(i, (n, _))| i != *n) {
            return Err(corrupt());
        }
        Ok(numbered.into_iter().map(|(_, name)| name).collect())
    }

    pub(super) fn lmdb_error(&self, source: heed::Error) -> StoreError {
        StoreError::lmdb(&self.data_file, source)
    }

    pub(super) fn read(&self) -> Result<ReadView<'_>, StoreError> {
        loop {
            // Recursive: a thread may hold several views; a waiting resize must not deadlock it.
            let guard = self.resize.read_recursive();
            match self.env.read_txn() {
                Ok(txn) => {
                    return Ok(ReadView { shared: self, txn, _guard: guard });
                }
                Err(heed::Error::Mdb(MdbError::MapResized)) => {
                    drop(guard);
                    self.adopt_map_size()?;
                }
                Err(e) => return Err(self.lmdb_error(e)),
            }
        }
    }
}

/// A consistent read-only view of the store.
pub struct ReadView<'s> {
    pub(super) shared: &'s Shared,
    pub(super) txn: RoTxn<'s, WithoutTls>,
    _guard: RwLockReadGuard<'s, ()>,
}

impl ReadView<'_> {
    /// The node of a position, if stored. A record that does not decode is an error naming file and key.
    pub fn node(&self, key: PositionKey) -> Result<Option<Node>, StoreError> {
        self.shared.node_at(&self.txn, key)
    }

    /// The stored value of a position (its record and, from schema 5, its checksum), if stored.
    pub fn raw_node(&self, key: PositionKey) -> Result<Option<&[u8]>, StoreError> {
        self.shared.raw_node_at(&self.txn, key)
    }

    pub fn contains(&self, key: PositionKey) -> Result<bool, StoreError> {
        Ok(self.raw_node(key)?.is_some())
    }

    /// Keys of every node with an edge into `child`, in key order.
    pub fn parents(&self, child: PositionKey) -> Result<Vec<PositionKey>, StoreError> {
        self.shared.parents(&self.txn, child)
    }

    /// Every stored node in key order (errors for damaged records: the iteration may go on past them).
    pub fn nodes(&self) -> Result<impl Iterator<Item = Result<(PositionKey, Node), StoreError>> + '_, StoreError> {
        let iter = self.shared.nodes.iter(&self.txn).map_err(|e| self.shared.lmdb_error(e))?;
        // Keys come in strictly rising order: a key again, or a lower one, is a node's place damaged in its page
        // (LMDB reads another node there) or a damaged page.
        let mut previous: Option<Vec<u8>> = None;
        Ok(iter.map(move |item| {
            let (key, bytes) = item.map_err(|e| self.shared.lmdb_error(e))?;
            if previous.as_deref().is_some_and(|previous| previous >= key) {
                return Err(StoreError::Structure {
                    path: self.shared.data_file.clone(),
                    what: "the nodes database's records are out of their order: a node's place or a page is damaged"
                        .to_owned(),
                });
            }
            previous = Some(key.to_vec());
            let key = PositionKey::from_slice(key).ok_or_else(|| StoreError::CorruptMeta {
                path: self.shared.data_file.clone(),
                entry: "nodes key".into(),
            })?;
            Ok((key, self.shared.node_from(key, bytes)?))
        }))
    }
}
