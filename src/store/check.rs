//! `deeptree check`: every record of every database read and verified ([`Store::check`]), and the repair that copies
//! the intact ones into a new store ([`Store::repair`]), never in place and never on its own.
//!
//! ```
//! use deeptree::score::{Bound, Score};
//! use deeptree::store::{Change, Store, StoreOptions, node::{Edge, Node, PackedPosition}};
//! use shakmaty::Chess;
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let start = Chess::default();
//! let mut node = Node::new(PackedPosition::of(&start));
//! node.edges.push(Edge::new("e2e4".parse()?, Score::cp(30), Bound::Exact, 18));
//! store.writer().submit(vec![Change::merge(&start, node)?]).wait()?;
//! let report = store.check()?;
//! assert!(report.is_clean(), "{report:?}");
//! assert_eq!((report.nodes, report.links), (1, 1));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! A node is intact when a lookup of its key finds it (a damaged page of LMDB's own may hide it from lookups), its
//! checksum holds (schema 5), it decodes, its position is a legal position whose key is
//! the record's key, and every edge's move is legal in it. A page of parent links is intact when its checksum holds,
//! its links are in order and each child lies between its page's key and the next page's. The parent links must be
//! exactly those the intact nodes' edges call for: where they are not (a damaged node's links left behind, or a
//! damaged page's lost), the check says how many are missing or stray. Meta entries are checked for their checksum
//! and their meaning (the schema version, the engine's name, the count of links, the list of engines).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use heed::{
    Database, EnvOpenOptions, PutFlags,
    types::{Bytes, Str},
};

use super::{
    META_ENGINE, META_ENGINES, META_LINKS, META_SCHEMA, META_VALUES_OWED, Record, SCHEMA_VERSION, Shared, Store,
    StoreError, checksum, key::PositionKey, links, node::Node, page_size, play_uci, upkeep::Upkeep,
};

/// A damaged record and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Damaged {
    #[serde(flatten)]
    pub record: Record,
    pub problem: String,
}

/// What [`Store::check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    pub path: PathBuf,
    /// The store's schema version (0 where its entry is missing or damaged).
    pub schema: u32,
    /// Its values carry checksums (schema 5), which were verified.
    pub checksums: bool,
    /// Records read in each database.
    pub nodes: u64,
    pub link_pages: u64,
    pub meta_entries: u64,
    /// Parent links held by the intact pages.
    pub links: u64,
    /// Links the intact nodes' edges call for that no intact page holds.
    pub links_missing: u64,
    /// Links of the intact pages that no intact node's edge calls for, but those of damaged nodes.
    pub links_stray: u64,
    /// Links of the intact pages whose parent is a damaged node (they go with it: not counted as problems).
    pub links_of_damaged: u64,
    /// Cached values are owed by an interrupted bulk load of an older build (the next command that writes
    /// recomputes them).
    pub values_owed: bool,
    /// Every damaged record, in database and key order.
    pub damaged: Vec<Damaged>,
}

impl CheckReport {
    /// Nothing damaged, and the parent links are those the nodes call for.
    pub fn is_clean(&self) -> bool {
        self.damaged.is_empty() && self.links_missing == 0 && self.links_stray == 0
    }

    /// Damaged records and wrong links, counted together.
    pub fn problems(&self) -> u64 {
        self.damaged.len() as u64 + self.links_missing + self.links_stray
    }
}

/// What [`Store::repair`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Repair {
    pub path: PathBuf,
    /// Intact nodes copied.
    pub nodes: u64,
    /// Parent links written, rebuilt from the copied nodes' edges.
    pub links: u64,
    /// Meta entries copied (the schema version, the link count and the mark of owed values are written anew).
    pub meta_entries: u64,
    /// Damaged records of the store checked, none of which was copied.
    pub left_out: Vec<Damaged>,
}

/// A parent link: (child, parent).
type Link = (PositionKey, PositionKey);

/// A page of links as read: its links, or what is wrong with it.
type PageRead = Result<Vec<Link>, String>;

/// A node record that passed every check, with the keys of its edges' children.
struct Intact {
    key: PositionKey,
    node: Node,
    children: Vec<PositionKey>,
}

impl Shared {
    /// Checks one node record; what is wrong with it otherwise.
    fn inspect_node(&self, key: &[u8], value: &[u8]) -> Result<Intact, Damaged> {
        let Some(key) = PositionKey::from_slice(key) else {
            return Err(Damaged {
                record: Record::Meta(format!("nodes key {key:02x?}")),
                problem: format!("a key of {} bytes in nodes (keys are 8 bytes)", key.len()),
            });
        };
        let damaged = |problem: String| Damaged { record: Record::Node(key), problem };
        let node = match self.node_from(key, value) {
            Ok(node) => node,
            Err(StoreError::Checksum { mismatch, .. }) => return Err(damaged(mismatch.to_string())),
            Err(StoreError::Corrupt { source, .. }) => return Err(damaged(source.to_string())),
            Err(e) => return Err(damaged(e.to_string())),
        };
        let Some(position) = node.position.to_position() else {
            return Err(damaged(format!("its position {} is not a legal position", node.position.fen())));
        };
        if PositionKey::of(&position) != key {
            return Err(damaged(format!(
                "its position {} has key {}",
                node.position.fen(),
                PositionKey::of(&position)
            )));
        }
        let mut children = Vec::with_capacity(node.edges.len());
        for edge in &node.edges {
            match play_uci(&position, &edge.uci) {
                Some(child) => children.push(PositionKey::of(&child)),
                None => return Err(damaged(format!("its move {} is not legal in its position", edge.uci))),
            }
        }
        Ok(Intact { key, node, children })
    }

    /// Walks every node record in key order, calling `intact` with each intact one and `damaged` with each other.
    /// Returns how many records were read. An LMDB error ends the walk as a damaged record.
    fn walk_nodes(
        &self,
        txn: &heed::RoTxn<'_>,
        mut intact: impl FnMut(Intact) -> Result<(), StoreError>,
        mut damaged: impl FnMut(Damaged),
    ) -> Result<u64, StoreError> {
        let mut read = 0u64;
        let mut previous: Option<Vec<u8>> = None;
        for item in self.nodes.iter(txn).map_err(|e| self.lmdb_error(e))? {
            let (key, value) = match item {
                Ok(item) => item,
                Err(e) => {
                    damaged(after(previous.as_deref(), format!("LMDB could not read further: {e}")));
                    break;
                }
            };
            read += 1;
            if previous.as_deref().is_some_and(|previous| previous >= key) {
                damaged(Damaged {
                    record: record_of(key),
                    problem: "out of key order: the database's own pages are damaged".to_owned(),
                });
            }
            previous = Some(key.to_vec());
            // A walk follows the pages in order; a lookup searches them by key. A damaged key of a branch page
            // sends a lookup astray (the record then reads as absent) and only a lookup shows it.
            if self.nodes.get(txn, key).ok().flatten() != Some(value) {
                damaged(Damaged {
                    record: record_of(key),
                    problem: "a lookup of its key does not find it: the database's own pages are damaged".to_owned(),
                });
                continue;
            }
            match self.inspect_node(key, value) {
                Ok(node) => intact(node)?,
                Err(e) => damaged(e),
            }
        }
        Ok(read)
    }
}

/// The node record of a key as it came, for messages.
fn record_of(key: &[u8]) -> Record {
    match PositionKey::from_slice(key) {
        Some(key) => Record::Node(key),
        None => Record::Meta(format!("nodes key {key:02x?}")),
    }
}

/// A damaged record where a walk stopped: after `previous`, or at the first record.
fn after(previous: Option<&[u8]>, problem: String) -> Damaged {
    match previous {
        Some(key) => Damaged { record: record_of(key), problem: format!("after this record: {problem}") },
        None => Damaged { record: Record::Meta("nodes".to_owned()), problem },
    }
}

impl Store {
    /// Reads every record of every database, verifies it (see the [module](self) docs) and lists the damaged
    /// ones. Changes nothing. An error only where the store cannot be read at all.
    pub fn check(&self) -> Result<CheckReport, StoreError> {
        let shared = &self.shared;
        let view = self.read()?;
        let txn = &view.txn;
        let mut report = CheckReport { path: shared.data_file.clone(), checksums: shared.sealed, ..Default::default() };
        // The links the intact nodes' edges call for, (child, parent).
        let mut expected: Vec<(PositionKey, PositionKey)> = Vec::new();
        let mut damaged_nodes = Vec::new();
        report.nodes = shared.walk_nodes(
            txn,
            |intact| {
                expected.extend(intact.children.iter().map(|child| (*child, intact.key)));
                Ok(())
            },
            |damaged| damaged_nodes.push(damaged),
        )?;
        let damaged_keys: std::collections::BTreeSet<PositionKey> = damaged_nodes
            .iter()
            .filter_map(|d: &Damaged| match d.record {
                Record::Node(key) => Some(key),
                _ => None,
            })
            .collect();
        report.damaged.extend(damaged_nodes);
        let held = check_pages(shared, txn, &mut report)?;
        report.links = held.len() as u64;
        let (held, of_damaged): (Vec<_>, Vec<_>) =
            held.into_iter().partition(|(_, parent)| !damaged_keys.contains(parent));
        expected.sort_unstable();
        expected.dedup();
        let (missing, stray) = difference(&expected, &held);
        report.links_missing = missing;
        report.links_stray = stray;
        report.links_of_damaged = of_damaged.len() as u64;
        check_meta(shared, txn, &mut report)?;
        Ok(report)
    }

    /// Writes a new store in `out` (a directory that does not exist or is empty) with every intact record of the
    /// store in `dir` (see [`Store::check`]): the intact nodes as they are, the parent links rebuilt from their
    /// edges, the intact meta entries (an engine's damaged name is replaced by a placeholder, so that the engine
    /// numbers of evaluations keep their meaning); the cached values are then recomputed by opening the new store
    /// with `upkeep`. The store in `dir` is only read. Returns what was written and what was left out.
    pub fn repair_with(dir: &Path, out: &Path, upkeep: Arc<dyn Upkeep>) -> Result<Repair, StoreError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |e| StoreError::Io { path, source: Arc::new(e) }
        };
        if out.exists() && std::fs::read_dir(out).map_err(io(out))?.next().is_some() {
            let e = std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "not empty: a repair writes a new store into an empty or new directory, never over another",
            );
            return Err(io(out)(e));
        }
        let source =
            Store::open_read_only_with(dir, &super::StoreOptions::default(), Arc::new(super::upkeep::NoUpkeep))?;
        std::fs::create_dir_all(out).map_err(io(out))?;
        let shared = &source.shared;
        let target = out.join("data.mdb");
        let lmdb = |source| StoreError::Lmdb { path: target.clone(), source: Arc::new(source) };
        let bytes = std::fs::metadata(&shared.data_file).map_err(io(&shared.data_file))?.len();
        let page = page_size();
        let map_size = (bytes as usize).saturating_mul(2).saturating_add(64 << 20).div_ceil(page) * page;
        let mut repair = Repair { path: out.to_owned(), ..Default::default() };
        {
            // SAFETY: a new environment in a directory of its own, opened once and closed before it is used.
            let env = unsafe { EnvOpenOptions::new().read_txn_without_tls().map_size(map_size).max_dbs(6).open(out) }
                .map_err(lmdb)?;
            let mut wtxn = env.write_txn().map_err(lmdb)?;
            let nodes: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("nodes")).map_err(lmdb)?;
            let pages: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("link_pages")).map_err(lmdb)?;
            let meta: Database<Str, Bytes> = env.create_database(&mut wtxn, Some("meta")).map_err(lmdb)?;
            let view = source.read()?;
            let txn = &view.txn;
            let mut links: Vec<(PositionKey, PositionKey)> = Vec::new();
            let mut buffer = Vec::with_capacity(256);
            let mut written = 0usize;
            shared.walk_nodes(
                txn,
                |intact| {
                    intact.node.write(intact.key, &mut buffer);
                    nodes.put_with_flags(&mut wtxn, PutFlags::APPEND, &intact.key.to_bytes(), &buffer).map_err(lmdb)?;
                    links.extend(intact.children.iter().map(|child| (*child, intact.key)));
                    written += 1;
                    if written.is_multiple_of(100_000) {
                        // Commits along the way keep the transaction's dirty pages bounded.
                        let full = std::mem::replace(&mut wtxn, env.write_txn().map_err(lmdb)?);
                        full.commit().map_err(lmdb)?;
                    }
                    Ok(())
                },
                |damaged| repair.left_out.push(damaged),
            )?;
            repair.nodes = written as u64;
            let mut report = CheckReport::default();
            report.links = check_pages(shared, txn, &mut report)?.len() as u64;
            check_meta(shared, txn, &mut report)?;
            repair.left_out.extend(report.damaged);
            let all = links::encode_page(&links);
            repair.links = (all.len() / links::ENTRY) as u64;
            for (key, piece) in links::split(&all).into_iter().filter(|(_, piece)| !piece.is_empty()) {
                let key = key.unwrap_or(PositionKey::from_bytes([0; 8]));
                pages
                    .put_with_flags(&mut wtxn, PutFlags::APPEND, &key.to_bytes(), &links::write_page(key, piece))
                    .map_err(lmdb)?;
            }
            let put = |wtxn: &mut heed::RwTxn<'_>, name: &str, body: &[u8]| {
                meta.put(wtxn, name, &checksum::sealed(checksum::Table::Meta, name.as_bytes(), body)).map_err(lmdb)
            };
            meta.put(&mut wtxn, META_SCHEMA, &SCHEMA_VERSION.to_be_bytes()).map_err(lmdb)?;
            put(&mut wtxn, META_LINKS, &repair.links.to_be_bytes())?;
            // The cached values of the nodes kept may count on nodes left out: every one is recomputed on open.
            put(&mut wtxn, META_VALUES_OWED, &[])?;
            if let Ok(Some(engine)) = shared.meta_value(txn, META_ENGINE)
                && std::str::from_utf8(engine).is_ok()
            {
                put(&mut wtxn, META_ENGINE, engine)?;
                repair.meta_entries += 1;
            }
            for (number, name) in engine_names(shared, txn).into_iter().enumerate() {
                let name = name.unwrap_or_else(|| format!("(engine {number}: its name was lost in a repair)"));
                put(&mut wtxn, &format!("{META_ENGINES}{number}"), name.as_bytes())?;
                repair.meta_entries += 1;
            }
            drop(view);
            wtxn.commit().map_err(lmdb)?;
            env.force_sync().map_err(lmdb)?;
            env.prepare_for_closing().wait();
        }
        drop(source);
        // Opening it recomputes the values owed, then closes it.
        drop(Store::open_with(out, &super::StoreOptions::default(), upkeep)?);
        Ok(repair)
    }
}

/// Checks every page of parent links, adding the damaged ones to the report; returns the links of the intact
/// pages, (child, parent), in order.
fn check_pages(
    shared: &Shared,
    txn: &heed::RoTxn<'_>,
    report: &mut CheckReport,
) -> Result<Vec<(PositionKey, PositionKey)>, StoreError> {
    let mut held = Vec::new();
    // Each page's key, and its links or what is wrong with it.
    let mut pages: Vec<(Vec<u8>, PageRead)> = Vec::new();
    for item in shared.links.iter(txn).map_err(|e| shared.lmdb_error(e))? {
        let (key, value) = match item {
            Ok(item) => item,
            Err(e) => {
                let at = pages.last().and_then(|(key, _)| PositionKey::from_slice(key));
                report.damaged.push(Damaged {
                    record: at.map_or(Record::Meta("link_pages".to_owned()), Record::LinkPage),
                    problem: format!("LMDB could not read further: {e}"),
                });
                break;
            }
        };
        report.link_pages += 1;
        if shared.links.get(txn, key).ok().flatten() != Some(value) {
            let problem = "a lookup of its key does not find it: the database's own pages are damaged".to_owned();
            pages.push((key.to_vec(), Err(problem)));
            continue;
        }
        let read = match PositionKey::from_slice(key) {
            None => Err(format!("a key of {} bytes (keys are 8 bytes)", key.len())),
            Some(page_key) => match shared.page_from(page_key, value) {
                Ok(page) => links::decode_page(page).map_err(|e| e.to_string()),
                Err(StoreError::Checksum { mismatch, .. }) => Err(mismatch.to_string()),
                Err(StoreError::Corrupt { source, .. }) => Err(source.to_string()),
                Err(e) => Err(e.to_string()),
            },
        };
        pages.push((key.to_vec(), read));
    }
    for (i, (key, read)) in pages.iter().enumerate() {
        let next = pages.get(i + 1).map(|(next, _)| next.as_slice());
        let record =
            PositionKey::from_slice(key).map_or(Record::Meta(format!("link_pages key {key:02x?}")), Record::LinkPage);
        let entries = match read {
            Ok(entries) => entries,
            Err(problem) => {
                report.damaged.push(Damaged { record, problem: problem.clone() });
                continue;
            }
        };
        let outside = entries.iter().find(|(child, _)| {
            child.to_bytes().as_slice() < key.as_slice() || next.is_some_and(|next| child.to_bytes().as_slice() >= next)
        });
        if let Some((child, _)) = outside {
            report.damaged.push(Damaged { record, problem: format!("holds child {child}, outside its page's keys") });
            continue;
        }
        held.extend_from_slice(entries);
    }
    held.sort_unstable();
    held.dedup();
    Ok(held)
}

/// How many of `expected` are not in `held`, and of `held` not in `expected` (both sorted, without repeats).
fn difference(expected: &[(PositionKey, PositionKey)], held: &[(PositionKey, PositionKey)]) -> (u64, u64) {
    let (mut missing, mut stray) = (0u64, 0u64);
    let (mut e, mut h) = (expected.iter().peekable(), held.iter().peekable());
    loop {
        match (e.peek(), h.peek()) {
            (None, None) => return (missing, stray),
            (Some(_), None) => {
                missing += 1;
                e.next();
            }
            (None, Some(_)) => {
                stray += 1;
                h.next();
            }
            (Some(a), Some(b)) => match a.cmp(b) {
                std::cmp::Ordering::Less => {
                    missing += 1;
                    e.next();
                }
                std::cmp::Ordering::Greater => {
                    stray += 1;
                    h.next();
                }
                std::cmp::Ordering::Equal => {
                    e.next();
                    h.next();
                }
            },
        }
    }
}

/// The names of the store's list of engines by number, `None` for a damaged one.
fn engine_names(shared: &Shared, txn: &heed::RoTxn<'_>) -> Vec<Option<String>> {
    let mut names: Vec<Option<String>> = Vec::new();
    let Ok(iter) = shared.meta.prefix_iter(txn, META_ENGINES) else { return names };
    for (name, value) in iter.flatten() {
        let Ok(number) = name[META_ENGINES.len()..].parse::<usize>() else { continue };
        if number > usize::from(u16::MAX) {
            continue;
        }
        let body = shared.meta_body(name, value).ok().and_then(|body| String::from_utf8(body.to_vec()).ok());
        if names.len() <= number {
            names.resize(number + 1, None);
        }
        names[number] = body;
    }
    names
}

/// Checks every meta entry, adding the damaged ones to the report (and the schema version and the mark of owed
/// values); the link count is compared with the links the intact pages hold (`report.links`, counted before).
fn check_meta(shared: &Shared, txn: &heed::RoTxn<'_>, report: &mut CheckReport) -> Result<(), StoreError> {
    let mut held_links = None;
    for item in shared.meta.iter(txn).map_err(|e| shared.lmdb_error(e))? {
        let (name, value) = match item {
            Ok(item) => item,
            Err(e) => {
                report.damaged.push(Damaged {
                    record: Record::Meta("meta".to_owned()),
                    problem: format!("LMDB could not read further: {e}"),
                });
                break;
            }
        };
        report.meta_entries += 1;
        let damaged = |problem: String| Damaged { record: Record::Meta(name.to_owned()), problem };
        if name == META_SCHEMA {
            match <[u8; 4]>::try_from(value) {
                Ok(bytes) => report.schema = u32::from_be_bytes(bytes),
                Err(_) => report.damaged.push(damaged(format!("{} bytes, not a version number", value.len()))),
            }
            continue;
        }
        let body = match shared.meta_body(name, value) {
            Ok(body) => body,
            Err(StoreError::Checksum { mismatch, .. }) => {
                report.damaged.push(damaged(mismatch.to_string()));
                continue;
            }
            Err(e) => {
                report.damaged.push(damaged(e.to_string()));
                continue;
            }
        };
        let problem = if name == META_LINKS {
            match <[u8; 8]>::try_from(body) {
                Ok(bytes) => {
                    held_links = Some(u64::from_be_bytes(bytes));
                    None
                }
                Err(_) => Some(format!("{} bytes, not a count", body.len())),
            }
        } else if name == META_VALUES_OWED {
            report.values_owed = true;
            None
        } else if name == META_ENGINE {
            std::str::from_utf8(body).is_err().then(|| "not UTF-8 text".to_owned())
        } else if let Some(number) = name.strip_prefix(META_ENGINES) {
            if number.parse::<u16>().is_err() {
                Some("not a number of the list of engines".to_owned())
            } else {
                std::str::from_utf8(body).is_err().then(|| "not UTF-8 text".to_owned())
            }
        } else {
            None
        };
        if let Some(problem) = problem {
            report.damaged.push(damaged(problem));
        }
    }
    if let Some(count) = held_links
        && count != report.links
        && report.link_pages > 0
    {
        report.damaged.push(Damaged {
            record: Record::Meta(META_LINKS.to_owned()),
            problem: format!("counts {count} links, the pages hold {}", report.links),
        });
    }
    Ok(())
}
