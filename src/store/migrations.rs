//! What opening a store for writing brings up to date, in one place (docs/design.md §9.4).
//!
//! - The schema upgrades, [`UPGRADES`]: a store of an older schema is upgraded by the first command that writes to
//!   it, every upgrade it needs in one transaction, which needs the store alone. A new store is created at the current
//!   schema; a newer one is refused.
//! - The tidies, [`TIDIES`]: run at every open for writing once the schema is current, each in a transaction of its
//!   own (the merge of one engine listed twice).
//!
//! A command that only reads migrates nothing ([`Store::open_read_only_with`](super::Store::open_read_only_with)).

use std::{fs::File, io, path::Path, sync::Arc, time::Instant};

use heed::{
    Database, DatabaseFlags, Env, RwTxn, WithoutTls,
    types::{Bytes, Str},
};

use super::{
    Hold, LOCK_FILE, META_LINKS, META_SCHEMA, SCHEMA_VERSION, Shared, StoreError,
    checksum::{self, Table},
    engines,
    key::PositionKey,
    links,
    node::Node,
    page_size, share_again, try_alone,
};

/// The store's databases: records (`nodes`), parent links in pages (`link_pages`) and `meta`.
pub(super) type Databases = (Database<Bytes, Bytes>, Database<Bytes, Bytes>, Database<Str, Bytes>);

/// A schema upgrade: what a store of a schema older than `to` needs.
struct Upgrade {
    /// The schema it brings a store to: it runs on every store older than that.
    to: u32,
    /// Runs it in the upgrade's transaction; says what it did, for the log.
    run: fn(&Upgrading<'_>, &mut RwTxn) -> Result<String, StoreError>,
}

/// Every schema upgrade, oldest first; those a store needs run in this order, in one transaction.
const UPGRADES: [Upgrade; 2] = [
    // Schema 4: parent links in pages of many children (from `parents` of schema 2 and earlier, `links` of 3).
    Upgrade { to: 4, run: links_into_pages },
    // Schema 5: every value sealed with a checksum of its key and bytes.
    Upgrade { to: 5, run: seal_values },
];

/// Every tidy an open for writing runs once the schema is current, in this order.
const TIDIES: [fn(&Arc<Shared>, Hold); 1] = [merge_engines_listed_twice];

/// What an upgrade works on: the environment, its databases, and the data file that errors name.
struct Upgrading<'e> {
    env: &'e Env<WithoutTls>,
    nodes: Database<Bytes, Bytes>,
    links: Database<Bytes, Bytes>,
    meta: Database<Str, Bytes>,
    data_file: &'e Path,
}

impl Upgrading<'_> {
    fn lmdb(&self, source: heed::Error) -> StoreError {
        StoreError::lmdb(self.data_file, source)
    }

    fn corrupt(&self, entry: &'static str) -> StoreError {
        StoreError::CorruptMeta { path: self.data_file.to_owned(), entry: entry.into() }
    }
}

/// The store's databases, created where the store is new and upgraded where its schema is older; a newer schema is
/// refused. `lock` is the store's lock file where it is opened with others ([`Hold::Shared`]): an upgrade holds it
/// alone ([`StoreError::UpgradeInUse`] where another process has the store open), and shares it again after.
pub(super) fn set_up(
    env: &Env<WithoutTls>,
    dir: &Path,
    data_file: &Path,
    lock: Option<&File>,
) -> Result<Databases, StoreError> {
    let lmdb = |source| StoreError::lmdb(data_file, source);
    let found = stored_schema(env, data_file)?;
    {
        // A store of any schema has its nodes and its meta, written in one transaction: one without the other is a
        // damaged list of databases (a byte of a name changed), and a new, empty one must not take its place.
        let rtxn = env.read_txn().map_err(lmdb)?;
        let nodes: Option<Database<Bytes, Bytes>> = env.open_database(&rtxn, Some("nodes")).map_err(lmdb)?;
        let missing = match (found.is_some(), nodes.is_some()) {
            (true, false) => Some("nodes"),
            (false, true) => Some("meta"),
            _ => None,
        };
        if let Some(name) = missing {
            return Err(StoreError::Structure {
                path: data_file.to_owned(),
                what: format!("database {name} is missing from the list of databases"),
            });
        }
    }
    if let Some(found) = found
        && found > SCHEMA_VERSION
    {
        return Err(StoreError::NewerSchema { path: data_file.to_owned(), found, supported: SCHEMA_VERSION });
    }
    // A new store (no schema yet) has nothing to upgrade.
    let upgrade = found.filter(|&found| found < SCHEMA_VERSION);
    if let Some(found) = upgrade {
        make_room_alone(env, dir, data_file, lock, found)?;
    }
    let mut wtxn = env.write_txn().map_err(lmdb)?;
    let nodes = env.create_database(&mut wtxn, Some("nodes")).map_err(lmdb)?;
    let links: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("link_pages")).map_err(lmdb)?;
    let meta: Database<Str, Bytes> = env.create_database(&mut wtxn, Some("meta")).map_err(lmdb)?;
    if let Some(found) = upgrade {
        run_upgrades(&Upgrading { env, nodes, links, meta, data_file }, &mut wtxn, found)?;
    }
    if found.is_none() || upgrade.is_some() {
        // An earlier deeptree refuses the store instead of meeting data it cannot read.
        meta.put(&mut wtxn, META_SCHEMA, &SCHEMA_VERSION.to_be_bytes()).map_err(lmdb)?;
    }
    wtxn.commit().map_err(lmdb)?;
    if upgrade.is_some()
        && let Some(lock) = lock
    {
        // Back to sharing the store (a conversion without a gap: nobody else held it).
        match lock.lock_shared() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(e) => return Err(StoreError::Io { path: dir.join(LOCK_FILE), source: Arc::new(e) }),
        }
    }
    Ok((nodes, links, meta))
}

/// Runs every tidy of [`TIDIES`] on a store just opened for writing.
pub(super) fn tidy(shared: &Arc<Shared>, hold: Hold) {
    for tidy in TIDIES {
        tidy(shared, hold);
    }
}

/// The schema the store's `meta` names; `None` for a new store.
fn stored_schema(env: &Env<WithoutTls>, data_file: &Path) -> Result<Option<u32>, StoreError> {
    let lmdb = |source| StoreError::lmdb(data_file, source);
    let rtxn = env.read_txn().map_err(lmdb)?;
    let meta: Option<Database<Str, Bytes>> = env.open_database(&rtxn, Some("meta")).map_err(lmdb)?;
    let corrupt = || StoreError::CorruptMeta { path: data_file.to_owned(), entry: META_SCHEMA.into() };
    match meta.map(|meta| meta.get(&rtxn, META_SCHEMA)).transpose().map_err(lmdb)?.flatten() {
        // deeptree writes its databases and the schema in one transaction: a `meta` without it is damaged.
        None if meta.is_some() => Err(corrupt()),
        None => Ok(None),
        Some(bytes) => Ok(Some(u32::from_be_bytes(bytes.try_into().map_err(|_| corrupt())?))),
    }
}

/// Before an upgrade from schema `found`: the store held alone, and the map made large enough for a copy of every
/// page beside the old ones.
fn make_room_alone(
    env: &Env<WithoutTls>,
    dir: &Path,
    data_file: &Path,
    lock: Option<&File>,
    found: u32,
) -> Result<(), StoreError> {
    // Another process (of an older build, say) may be writing bare records meanwhile: the upgrade waits for no one
    // and runs only where no other process has the store open.
    if let Some(lock) = lock {
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::UpgradeInUse { path: data_file.to_owned(), found });
            }
            Err(std::fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(StoreError::Io { path: dir.join(LOCK_FILE), source: Arc::new(e) });
            }
        }
    }
    // Room for a copy of every page beside the old ones until they are freed at the commit.
    let page = page_size();
    let bytes = std::fs::metadata(data_file).map(|m| m.len() as usize).unwrap_or(0);
    let needed = (env.info().map_size.max(bytes.saturating_mul(2)) + (64 << 20)).div_ceil(page) * page;
    // SAFETY: no transaction of this environment is open here.
    unsafe { env.resize(needed) }.map_err(|source| StoreError::lmdb(data_file, source))
}

/// Runs the upgrades a store of schema `found` needs, in `wtxn`, and logs what they did.
fn run_upgrades(upgrading: &Upgrading<'_>, wtxn: &mut RwTxn, found: u32) -> Result<(), StoreError> {
    let started = Instant::now();
    let mut done = Vec::new();
    for upgrade in UPGRADES.iter().filter(|upgrade| found < upgrade.to) {
        done.push((upgrade.run)(upgrading, wtxn)?);
    }
    log::info!(
        "{}: upgraded from schema {found} to {SCHEMA_VERSION}: {} in {:.2} s",
        upgrading.data_file.display(),
        done.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Schema 3 and earlier: the parent links move into pages (bare, as schema 4 held them), in the upgrade's
/// transaction. Schema 2 and earlier held one entry per link in `parents` (sorted duplicates); schema 3 one record per
/// child in `links`.
fn links_into_pages(upgrading: &Upgrading<'_>, wtxn: &mut RwTxn) -> Result<String, StoreError> {
    let Upgrading { env, links, meta, .. } = *upgrading;
    let lmdb = |source| upgrading.lmdb(source);
    let mut all: Vec<(PositionKey, PositionKey)> = Vec::new();
    let parents = env
        .database_options()
        .types::<Bytes, Bytes>()
        .name("parents")
        .flags(DatabaseFlags::DUP_SORT | DatabaseFlags::DUP_FIXED)
        .open(wtxn)
        .map_err(lmdb)?;
    if let Some(parents) = parents {
        for item in parents.iter(wtxn).map_err(lmdb)? {
            let (child, parent) = item.map_err(lmdb)?;
            let child = PositionKey::from_slice(child).ok_or_else(|| upgrading.corrupt("parents"))?;
            let parent = PositionKey::from_slice(parent).ok_or_else(|| upgrading.corrupt("parents"))?;
            all.push((child, parent));
        }
        parents.clear(wtxn).map_err(lmdb)?;
    }
    let per_child: Option<Database<Bytes, Bytes>> = env.open_database(wtxn, Some("links")).map_err(lmdb)?;
    if let Some(per_child) = per_child {
        for item in per_child.iter(wtxn).map_err(lmdb)? {
            let (child, record) = item.map_err(lmdb)?;
            let child = PositionKey::from_slice(child).ok_or_else(|| upgrading.corrupt("links"))?;
            let parents = links::decode_list(record).map_err(|_| upgrading.corrupt("links"))?;
            all.extend(parents.into_iter().map(|parent| (child, parent)));
        }
        per_child.clear(wtxn).map_err(lmdb)?;
    }
    // Pages already there (none in a store written before them) are kept.
    for item in links.iter(wtxn).map_err(lmdb)? {
        let (_, page) = item.map_err(lmdb)?;
        all.extend(links::decode_page(page).map_err(|_| upgrading.corrupt("link_pages"))?);
    }
    links.clear(wtxn).map_err(lmdb)?;
    let page = links::encode_page(&all);
    let count = (page.len() / links::ENTRY) as u64;
    for (key, piece) in links::split(&page).into_iter().filter(|(_, piece)| !piece.is_empty()) {
        let key = key.unwrap_or(PositionKey::from_bytes([0; 8]));
        links.put(wtxn, &key.to_bytes(), piece).map_err(lmdb)?;
    }
    meta.put(wtxn, META_LINKS, &count.to_be_bytes()).map_err(lmdb)?;
    Ok(format!("{count} parent links moved into pages"))
}

/// Schema 4 and earlier: every value of `nodes`, `link_pages` and `meta` (but the schema version) is sealed with its
/// checksum, in the upgrade's transaction, byte for byte as it was otherwise (a record that does not decode stays
/// one, and is reported as such when read).
fn seal_values(upgrading: &Upgrading<'_>, wtxn: &mut RwTxn) -> Result<String, StoreError> {
    let Upgrading { nodes, links, meta, .. } = *upgrading;
    let lmdb = |source| upgrading.lmdb(source);
    // A store whose schema entry says older but whose records are sealed has a damaged schema entry: sealing them
    // again would hide that. A bare record always decodes bare; a sealed one (with its 4 more bytes) never does.
    if let Some((key, value)) = nodes.first(wtxn).map_err(lmdb)?
        && let Some(key) = PositionKey::from_slice(key)
        && Node::decode(value).is_err()
        && Node::read(key, value).is_ok()
    {
        return Err(upgrading.corrupt(META_SCHEMA));
    }
    let mut sealed = 0u64;
    let mut buffer = Vec::with_capacity(256);
    for (database, table) in [(nodes, Table::Nodes), (links, Table::LinkPages)] {
        let mut cursor = database.iter_mut(wtxn).map_err(lmdb)?;
        while let Some(item) = cursor.next() {
            let (key, value) = item.map_err(lmdb)?;
            let key = key.to_vec();
            buffer.clear();
            buffer.extend_from_slice(value);
            checksum::seal(table, &key, &mut buffer);
            // SAFETY: the key and the value are owned copies: nothing borrowed from the database is alive while the
            // cursor writes.
            unsafe { cursor.put_current(&key, &buffer) }.map_err(lmdb)?;
            sealed += 1;
        }
    }
    let entries: Vec<(String, Vec<u8>)> = meta
        .iter(wtxn)
        .map_err(lmdb)?
        .map(|item| item.map(|(name, value)| (name.to_owned(), value.to_vec())))
        .collect::<Result<_, _>>()
        .map_err(lmdb)?;
    for (name, value) in entries.into_iter().filter(|(name, _)| name != META_SCHEMA) {
        meta.put(wtxn, &name, &checksum::sealed(Table::Meta, name.as_bytes(), &value)).map_err(lmdb)?;
        sealed += 1;
    }
    Ok(format!("{sealed} values sealed with checksums"))
}

/// One engine listed twice (a store written before programs were resolved) is merged into one entry ([`engines`]).
/// Renumbering needs the store alone: its lock is taken alone where no other process holds it, and shared again after.
fn merge_engines_listed_twice(shared: &Arc<Shared>, hold: Hold) {
    let alone = || match (&shared._lock, hold) {
        (_, Hold::Alone) | (None, _) => true,
        (Some(lock), _) => try_alone(lock),
    };
    engines::tidy_at_open(shared, alone);
    if hold == Hold::Shared
        && let Some(lock) = &shared._lock
    {
        share_again(lock);
    }
}
