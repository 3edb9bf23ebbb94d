//! Opening a store: its lock file, the LMDB environment (for writing, to read only, or new for a copy), its databases
//! set up or upgraded (`migrations`), the writer started; and compaction, which rewrites the data file in key order.

use std::{
    fs::File,
    io,
    path::{Path, PathBuf},
    sync::Arc,
};

use heed::{
    Database, Env, EnvFlags, EnvOpenOptions, PutFlags, WithoutTls,
    types::{Bytes, Str},
};
use parking_lot::RwLock;

use super::{
    Compaction, META_SCHEMA, META_VALUES_OWED, READABLE_SCHEMA, SCHEMA_VERSION, Shared, Store, StoreError,
    StoreOptions,
    checksum::{self, Table},
    clear_stale_readers, disk,
    error::Record,
    fault, file,
    key::PositionKey,
    migrations,
    upkeep::{self, Upkeep},
    writer,
};

/// How a process holds the store's lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hold {
    /// With other processes: every ordinary use.
    Shared,
    /// Alone, or not at all: compaction.
    Alone,
    /// With other processes, and writing nothing: commands that only read. `deeptree.lock` is locked where it is
    /// there and can be opened, and never created.
    ReadOnly,
}

pub(super) const LOCK_FILE: &str = "deeptree.lock";

/// A new LMDB environment in the empty directory `dir`, for a store written once (a compaction, a repair), its map
/// at least `bytes`: LMDB's lock file is allocated before LMDB maps it, so that a full disk is an error, not SIGBUS
/// (see `disk`).
pub(super) fn new_environment(dir: &Path, bytes: usize) -> Result<Env<WithoutTls>, StoreError> {
    disk::prepare_lock_file(dir).map_err(|(path, e)| StoreError::Io { path, source: Arc::new(e) })?;
    let page = page_size();
    let map_size = bytes.div_ceil(page) * page;
    // SAFETY: a new environment in a directory of its own, opened once and closed before it is used.
    unsafe { EnvOpenOptions::new().read_txn_without_tls().map_size(map_size).max_dbs(6).open(dir) }
        .map_err(|source| StoreError::Lmdb { path: dir.join("data.mdb"), source: Arc::new(source) })
}

/// The data file of the store in `dir`, where one is there: [`StoreError::Missing`] without one, and
/// [`StoreError::Empty`] for a zero-byte file, which LMDB would set up as a new store (a command that only reads must
/// not).
pub(super) fn existing_data_file(dir: &Path) -> Result<PathBuf, StoreError> {
    let data = dir.join("data.mdb");
    if !data.is_file() {
        return Err(StoreError::Missing { path: dir.to_owned() });
    }
    if data.metadata().is_ok_and(|m| m.len() == 0) {
        return Err(StoreError::Empty { path: data });
    }
    Ok(data)
}

/// Locks the store's lock file, shared (waiting for a compaction to finish) or exclusive (failing at once with
/// [`StoreError::InUse`] when another process has the store open). Read-only, an existing lock file is locked
/// shared, and none where it is missing or cannot be opened (a read-only file system): `None`.
pub(super) fn lock_store(dir: &Path, hold: Hold) -> Result<Option<File>, StoreError> {
    let path = dir.join(LOCK_FILE);
    let io = |e| StoreError::Io { path: path.clone(), source: Arc::new(e) };
    let file = if hold == Hold::ReadOnly {
        match File::open(&path) {
            Ok(file) => file,
            Err(e) => {
                log::debug!("{}: not locked: {e}", path.display());
                return Ok(None);
            }
        }
    } else {
        File::options().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?
    };
    match hold {
        Hold::Shared | Hold::ReadOnly => match file.lock_shared() {
            Ok(()) => {}
            // A file system without locks: the store is used all the same; only `compact` needs the lock.
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                log::warn!("{}: file locks are not supported here: {e}", path.display())
            }
            Err(e) => return Err(io(e)),
        },
        Hold::Alone => match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(StoreError::InUse { path: dir.to_owned() }),
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        },
    }
    Ok(Some(file))
}

/// The LMDB environment of the store in `dir`, opened for writing, and its data file. LMDB's lock file is allocated
/// first and the data file's length checked, before LMDB maps either.
pub(super) fn open_environment(dir: &Path, options: &StoreOptions) -> Result<(Env<WithoutTls>, PathBuf), StoreError> {
    // Allocated before LMDB maps it: a full disk is then an error here, not a SIGBUS in LMDB (see `disk`).
    disk::prepare_lock_file(dir).map_err(|(path, e)| StoreError::Io { path, source: Arc::new(e) })?;
    let data_file = dir.join("data.mdb");
    // Before LMDB maps the file: a page past its end would kill the process at the first read.
    file::check_length(&data_file)?;
    let page = page_size();
    let map_size = options.initial_map_size.max(page).div_ceil(page) * page;
    // SAFETY: the environment is opened once per store; deeptree never opens its data file otherwise.
    let env = unsafe {
        EnvOpenOptions::new().read_txn_without_tls().map_size(map_size).max_dbs(6).max_readers(254).open(dir)
    }
    .map_err(|source| StoreError::lmdb(&data_file, source))?;
    clear_stale_readers(&env, &data_file);
    // The databases' records and roots, read while a read transaction keeps their pages from reuse.
    let pin = env.read_txn().map_err(|source| StoreError::lmdb(&data_file, source))?;
    file::check_structure(&data_file)?;
    drop(pin);
    Ok((env, data_file))
}

/// The LMDB environment of the store in `dir` (its data file `data`), opened to read only. LMDB's lock file is
/// allocated first, and made where it is missing; where it cannot be, the store is read without it (`MDB_NOLOCK`).
pub(super) fn open_read_only_environment(
    dir: &Path,
    data: &Path,
    options: &StoreOptions,
) -> Result<Env<WithoutTls>, StoreError> {
    let mut flags = EnvFlags::READ_ONLY;
    // LMDB's lock file, allocated first (see `disk`), made where it is missing; without it where it cannot be.
    if let Err((path, e)) = disk::prepare_lock_file(dir) {
        if !disk::cannot_write_here(&e) {
            return Err(StoreError::Io { path, source: Arc::new(e) });
        }
        log::info!("{}: {e}; reading the store without LMDB's lock file", path.display());
        flags |= EnvFlags::NO_LOCK;
    }
    let page = page_size();
    let map_size = options.initial_map_size.max(page).div_ceil(page) * page;
    // SAFETY: the environment is opened once per store; deeptree never opens its data file otherwise. Without the
    // lock file, nothing can write the store while it is read (see above).
    let env = unsafe {
        let mut open = EnvOpenOptions::new().read_txn_without_tls();
        open.map_size(map_size).max_dbs(6).max_readers(254).flags(flags);
        open.open(dir)
    }
    .map_err(|source| StoreError::lmdb(data, source))?;
    if !flags.contains(EnvFlags::NO_LOCK) {
        clear_stale_readers(&env, data);
    }
    Ok(env)
}

/// The databases of a store opened to read only, its schema and whether a bulk load owes cached values. Nothing is
/// created: a store deeptree never set up is [`StoreError::Missing`], a newer schema is refused, and one older than
/// [`READABLE_SCHEMA`] is [`StoreError::NeedsMigration`].
pub(super) fn read_only_databases(
    env: &Env<WithoutTls>,
    dir: &Path,
    data: &Path,
) -> Result<(migrations::Databases, u32, bool), StoreError> {
    let lmdb = |source| StoreError::lmdb(data, source);
    let rtxn = env.read_txn().map_err(lmdb)?;
    // The databases' records and roots, read while the transaction keeps their pages from reuse, before LMDB
    // follows them.
    file::check_structure(data)?;
    let meta: Option<Database<Str, Bytes>> = env.open_database(&rtxn, Some("meta")).map_err(lmdb)?;
    let nodes: Option<Database<Bytes, Bytes>> = env.open_database(&rtxn, Some("nodes")).map_err(lmdb)?;
    let links: Option<Database<Bytes, Bytes>> = env.open_database(&rtxn, Some("link_pages")).map_err(lmdb)?;
    let corrupt = || StoreError::CorruptMeta { path: data.to_owned(), entry: META_SCHEMA.into() };
    let found = match meta.map(|meta| meta.get(&rtxn, META_SCHEMA)).transpose().map_err(lmdb)?.flatten() {
        None => None,
        Some(bytes) => Some(u32::from_be_bytes(bytes.try_into().map_err(|_| corrupt())?)),
    };
    let found = match found {
        // deeptree writes its databases and the schema in one transaction: a `meta` without it is damaged, and so is
        // a store's `nodes` without a `meta` (a byte of its name changed).
        None if meta.is_some() => return Err(corrupt()),
        None if nodes.is_some() => {
            return Err(StoreError::Structure {
                path: data.to_owned(),
                what: "database meta is missing from the list of databases".to_owned(),
            });
        }
        // An LMDB file that deeptree never set up.
        None => return Err(StoreError::Missing { path: dir.to_owned() }),
        Some(found) if found > SCHEMA_VERSION => {
            return Err(StoreError::NewerSchema { path: data.to_owned(), found, supported: SCHEMA_VERSION });
        }
        Some(found) if found < READABLE_SCHEMA => {
            return Err(StoreError::NeedsMigration { path: dir.to_owned(), found });
        }
        Some(found) => found,
    };
    // The schema is there: a database missing beside it is a damaged list of databases (a name's byte changed).
    let missing = |name: &str| StoreError::Structure {
        path: data.to_owned(),
        what: format!("database {name} is missing from the list of databases"),
    };
    let (Some(meta), Some(nodes), Some(links)) = (meta, nodes, links) else {
        return Err(missing(if nodes.is_none() { "nodes" } else { "link_pages" }));
    };
    let owed = meta.get(&rtxn, META_VALUES_OWED).map_err(lmdb)?.is_some();
    // Committed, not dropped: LMDB closes the handles of databases opened in a transaction that aborts.
    rtxn.commit().map_err(lmdb)?;
    Ok(((nodes, links, meta), found, owed))
}

/// Makes a shared hold of `lock` exclusive where no other process holds the store; true where it did, or where the
/// file system has no locks (as the schema upgrade takes it). A conversion that failed may have dropped the shared
/// hold (flock drops it before it tries), which is taken again.
pub(super) fn try_alone(lock: &File) -> bool {
    match lock.try_lock() {
        Ok(()) => true,
        Err(std::fs::TryLockError::WouldBlock) => {
            share_again(lock);
            false
        }
        Err(std::fs::TryLockError::Error(e)) => e.kind() == io::ErrorKind::Unsupported,
    }
}

/// Holds `lock` shared (again): after an exclusive hold, or a conversion that failed.
pub(super) fn share_again(lock: &File) {
    if let Err(e) = lock.lock_shared()
        && e.kind() != io::ErrorKind::Unsupported
    {
        log::warn!("the store's lock could not be shared again: {e}");
    }
}

pub(super) fn page_size() -> usize {
    // LMDB and heed require map sizes in whole OS pages; 64 KiB covers every common page size.
    64 * 1024
}

impl Store {
    /// Opens (creating when absent) the store in directory `dir`, its writer running `upkeep` in every
    /// transaction. `Store::open` (in `values`) opens it with the values layer's upkeep.
    pub fn open_with(dir: &Path, options: &StoreOptions, upkeep: Arc<dyn Upkeep>) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io { path: dir.to_owned(), source: Arc::new(e) })?;
        Store::open_dir(dir, options, Hold::Shared, upkeep)
    }

    /// Opens the store in directory `dir` only if one is there: [`StoreError::Missing`] otherwise, with nothing
    /// created, so that a command that only reads never leaves a directory behind a mistyped path.
    pub fn open_existing_with(
        dir: &Path,
        options: &StoreOptions,
        upkeep: Arc<dyn Upkeep>,
    ) -> Result<Store, StoreError> {
        existing_data_file(dir)?;
        Store::open_dir(dir, options, Hold::Shared, upkeep)
    }

    /// Opens the store in directory `dir` to read it only, for the commands that only read: [`StoreError::Missing`]
    /// or [`StoreError::Empty`] where there is none, and nothing is created, initialised or migrated (an older
    /// schema is [`StoreError::NeedsMigration`]). Only LMDB's lock file is made where it is missing and the
    /// directory is writable: its table of readers keeps a writer in another process from reusing the pages being
    /// read. Where it cannot be opened for writing (a read-only file system, no permission, no space to make it), the
    /// store is read without it (`MDB_NOLOCK`): there no deeptree can write the store either. Every write to it
    /// fails with [`StoreError::ReadOnly`].
    pub fn open_read_only_with(
        dir: &Path,
        options: &StoreOptions,
        upkeep: Arc<dyn Upkeep>,
    ) -> Result<Store, StoreError> {
        let data = existing_data_file(dir)?;
        let lock = lock_store(dir, Hold::ReadOnly)?;
        // Before LMDB maps the file: a page past its end would kill the process at the first read.
        file::check_length(&data)?;
        let env = open_read_only_environment(dir, &data, options)?;
        let (databases, found, owed) = read_only_databases(&env, dir, &data)?;
        // Schema 4: bare records, read as they are.
        let sealed = found == SCHEMA_VERSION;
        if !sealed {
            log::warn!(
                "{}: schema {READABLE_SCHEMA}: its records carry no checksums and are read as they are; the next \
                 command that writes to it (analyze, import, merge, compact) upgrades it to schema {SCHEMA_VERSION}",
                data.display()
            );
        }
        if owed {
            log::warn!(
                "{}: cached values are owed by an interrupted bulk load, and a read-only command does not recompute \
                 them: idea scores may be stale until a command that writes opens the store",
                dir.display()
            );
        }
        let mut shared = Shared::new(env, databases, dir, data, lock);
        shared.sealed = sealed;
        let _ = shared.stopped.set(StoreError::ReadOnly { path: dir.to_owned() });
        let shared = Arc::new(shared);
        let writer = writer::WriterThread::spawn(shared.clone(), options.max_batch.max(1), upkeep);
        Ok(Store { shared, writer })
    }

    /// Rewrites the store in `dir` into a new file, every record appended in key order (so every page is full and
    /// no page is free), then puts it in place of the data file with an atomic rename. Refused with [`StoreError::InUse`] while another process has the store
    /// open; nothing changes when any step fails.
    pub fn compact(dir: &Path) -> Result<Compaction, StoreError> {
        if !dir.join("data.mdb").is_file() {
            return Err(StoreError::Missing { path: dir.to_owned() });
        }
        let store = Store::open_dir(dir, &StoreOptions::default(), Hold::Alone, Arc::new(upkeep::NoUpkeep))?;
        store.flush()?;
        let data_file = store.shared.data_file.clone();
        let io = |path: &Path| {
            let path = path.to_owned();
            move |e| StoreError::Io { path, source: Arc::new(e) }
        };
        let bytes_before = std::fs::metadata(&data_file).map_err(io(&data_file))?.len();
        let positions = store.stats()?.positions;
        // The copy is written in `compact.tmp` beside the data file (the same file system, for the rename), which
        // is removed with whatever is left in it however this ends; one left by a process that died goes first.
        let work_path = dir.join("compact.tmp");
        let _ = std::fs::remove_dir_all(&work_path);
        let work =
            tempfile::Builder::new().prefix("compact.tmp").rand_bytes(0).tempdir_in(dir).map_err(io(&work_path))?;
        store.shared.rewrite_into(work.path(), bytes_before)?;
        let copy = work.path().join("data.mdb");
        let bytes_after = std::fs::metadata(&copy).map_err(io(&copy))?.len();
        // The lock stays held while the environment closes and the copy takes the data file's place.
        let Store { shared, writer } = store;
        drop(writer);
        let shared = Arc::into_inner(shared).ok_or_else(|| StoreError::InUse { path: dir.to_owned() })?;
        let Shared { env, _lock: lock, .. } = shared;
        env.prepare_for_closing().wait();
        if let Ok(metadata) = std::fs::metadata(&data_file) {
            // The new file keeps the old one's permissions (LMDB creates files readable by their owner only).
            let _ = std::fs::set_permissions(&copy, metadata.permissions());
        }
        std::fs::rename(&copy, &data_file).map_err(io(&data_file))?;
        // The reader table of the old file: no process has it open (the lock says so), and LMDB makes a new one.
        let _ = std::fs::remove_file(dir.join("lock.mdb"));
        drop(work);
        if let Ok(directory) = File::open(dir) {
            let _ = directory.sync_all();
        }
        drop(lock);
        Ok(Compaction { bytes_before, bytes_after, positions })
    }

    /// Opens the store in `dir` for writing, held as `hold`: the environment, its databases set up or upgraded
    /// ([`migrations`]), the tidies of an open for writing, then the writer.
    fn open_dir(dir: &Path, options: &StoreOptions, hold: Hold, upkeep: Arc<dyn Upkeep>) -> Result<Store, StoreError> {
        let lock = lock_store(dir, hold)?;
        let (env, data_file) = open_environment(dir, options)?;
        let upgrade_lock = lock.as_ref().filter(|_| hold == Hold::Shared);
        let databases = migrations::set_up(&env, dir, &data_file, upgrade_lock)?;
        // New, current or upgraded: its values carry checksums.
        let shared = Arc::new(Shared::new(env, databases, dir, data_file, lock));
        migrations::tidy(&shared, hold);
        Store::start(shared, options, upkeep, hold)
    }

    /// Starts the writer of a store just opened for writing. Where a bulk load left cached values owed, every value
    /// is recomputed first (only where the store is shared: compaction copies records as they are).
    fn start(
        shared: Arc<Shared>,
        options: &StoreOptions,
        upkeep: Arc<dyn Upkeep>,
        hold: Hold,
    ) -> Result<Store, StoreError> {
        let owed = {
            let view = shared.read()?;
            shared.meta.get(&view.txn, META_VALUES_OWED).map_err(|e| shared.lmdb_error(e))?.is_some()
        };
        let writer = writer::WriterThread::spawn(shared.clone(), options.max_batch.max(1), upkeep);
        let store = Store { shared, writer };
        if owed && hold == Hold::Shared {
            // A process stopped in a bulk load, its values not brought up to date: every value is recomputed.
            log::info!("{}: cached values owed by an interrupted bulk load; recomputing", store.shared.dir.display());
            store.writer().settle_all().wait()?;
        }
        Ok(store)
    }
}

impl Shared {
    /// A store's shared state over its environment and databases: sealed, and writing.
    pub(super) fn new(
        env: Env<WithoutTls>,
        (nodes, links, meta): migrations::Databases,
        dir: &Path,
        data_file: PathBuf,
        lock: Option<File>,
    ) -> Shared {
        let fault = fault::Watch::new(&data_file);
        Shared {
            fault,
            env,
            nodes,
            links,
            meta,
            sealed: true,
            dir: dir.to_owned(),
            data_file,
            last_update_nanos: Default::default(),
            resize: RwLock::new(()),
            claims: parking_lot::Mutex::new(None),
            stopped: std::sync::OnceLock::new(),
            stop_told: Default::default(),
            trouble_told: Default::default(),
            _lock: lock,
        }
    }

    /// Writes every record into a new environment in `work`, in key order with LMDB's append mode (pages are filled
    /// to the brim instead of split in half), and syncs it to disk. Every node and link page must open by its
    /// checksum, and each database must yield as many records as LMDB counts in it: a copy would otherwise make
    /// hidden damage permanent (a branch page that leads to stale leaves copies cleanly, and the original is gone).
    pub(super) fn rewrite_into(&self, work: &Path, bytes: u64) -> Result<(), StoreError> {
        let lmdb = |source| StoreError::Lmdb { path: work.join("data.mdb"), source: Arc::new(source) };
        let env = new_environment(work, (bytes as usize).saturating_add(64 << 20))?;
        let mut wtxn = env.write_txn().map_err(lmdb)?;
        let nodes: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("nodes")).map_err(lmdb)?;
        let links: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("link_pages")).map_err(lmdb)?;
        let meta: Database<Str, Bytes> = env.create_database(&mut wtxn, Some("meta")).map_err(lmdb)?;
        const PER_TXN: usize = 100_000;
        let rtxn = self.env.read_txn().map_err(|e| self.lmdb_error(e))?;
        let mut entries = 0u64;
        for item in self.meta.iter(&rtxn).map_err(|e| self.lmdb_error(e))? {
            let (key, value) = item.map_err(|e| self.lmdb_error(e))?;
            // The schema version alone is stored bare (every deeptree reads it first); every other entry is sealed.
            let bare = key == META_SCHEMA && value.len() == 4;
            if self.sealed
                && !bare
                && let Err(mismatch) = checksum::open(Table::Meta, key.as_bytes(), value)
            {
                let record = Record::Meta(key.to_owned());
                return Err(StoreError::Checksum { path: self.data_file.clone(), record, mismatch });
            }
            meta.put(&mut wtxn, key, value).map_err(lmdb)?;
            entries += 1;
        }
        let counted = self.meta.len(&rtxn).map_err(|e| self.lmdb_error(e))?;
        if entries != counted {
            return Err(StoreError::Structure {
                path: self.data_file.clone(),
                what: format!(
                    "compaction read {entries} records of meta where LMDB counts {counted}; nothing was changed"
                ),
            });
        }
        let mut written = 0usize;
        for (from, to, table) in [(&self.nodes, &nodes, Table::Nodes), (&self.links, &links, Table::LinkPages)] {
            let mut copied = 0u64;
            for item in from.iter(&rtxn).map_err(|e| self.lmdb_error(e))? {
                let (key, value) = item.map_err(|e| self.lmdb_error(e))?;
                if self.sealed
                    && let Err(mismatch) = checksum::open(table, key, value)
                {
                    let found = PositionKey::from_slice(key).unwrap_or(PositionKey(0));
                    let record = if table == Table::Nodes { Record::Node(found) } else { Record::LinkPage(found) };
                    return Err(StoreError::Checksum { path: self.data_file.clone(), record, mismatch });
                }
                to.put_with_flags(&mut wtxn, PutFlags::APPEND, key, value).map_err(lmdb)?;
                copied += 1;
                written += 1;
                if written.is_multiple_of(PER_TXN) {
                    wtxn.commit().map_err(lmdb)?;
                    wtxn = env.write_txn().map_err(lmdb)?;
                }
            }
            let counted = from.len(&rtxn).map_err(|e| self.lmdb_error(e))?;
            if copied != counted {
                // Nothing is renamed: the store stays as it was.
                return Err(StoreError::Structure {
                    path: self.data_file.clone(),
                    what: format!(
                        "compaction read {copied} records of {} where LMDB counts {counted}; nothing was changed",
                        if table == Table::Nodes { "nodes" } else { "link_pages" }
                    ),
                });
            }
        }
        wtxn.commit().map_err(lmdb)?;
        drop(rtxn);
        env.force_sync().map_err(lmdb)?;
        env.prepare_for_closing().wait();
        Ok(())
    }
}
