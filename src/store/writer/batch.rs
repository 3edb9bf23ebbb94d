//! A batch in one transaction: each submission checked (and refused whole on a collision), the merges in key order,
//! the analyst's marks, the parent links added and removed, and the records written with their cached values.

use heed::{PutFlags, RwTxn};

use super::super::{
    Change, META_ENGINE, META_LINKS, Shared, StoreError,
    key::{KeyMap, PositionKey},
    marks,
    node::{Node, PackedPosition},
    tasks,
    upkeep::{CachedValues, TxnRecords, Upkeep},
};
use super::Verdicts;

/// Applies a batch of submissions in one transaction. A submission is refused whole (a key collision, a corrupt
/// record in its way) without holding back the others; the outer `Err` (an LMDB failure) aborts the whole batch.
///
/// Submissions are checked first; the accepted changes are then applied in key order, and the parent links in
/// (child, parent) order, so that consecutive writes land on the same pages.
pub(super) fn apply_batch(
    shared: &Shared,
    txn: &mut RwTxn,
    batch: &[&[Change]],
) -> Result<(Verdicts, KeyMap<Node>), StoreError> {
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
pub(super) fn check_batch(
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
                    Change::Clock(change) => change.write(shared, txn)?,
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
        *uci == mark.uci || record.and_then(|r| r.edge(uci)).is_some_and(super::super::node::Edge::is_excluded)
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
/// [`links`](super::super::links)): each page is read, changed and written once, and split when it grows past its size.
/// Returns how many links were new.
pub(super) fn store_links(
    shared: &Shared,
    txn: &mut RwTxn<'_>,
    links: &[([u8; 8], [u8; 8])],
) -> Result<u64, StoreError> {
    use super::super::links::{insert_checked, split, write_page};
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
        if super::super::links::remove_checked(&mut page, child, parent) {
            removed += 1;
            let value = super::super::links::write_page(page_key, &page);
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
pub(super) fn write_with_cached_values(
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
pub(super) fn write_values_in_one_pass(
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
pub(super) fn write_records(
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
