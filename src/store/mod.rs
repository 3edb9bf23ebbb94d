//! The persistent tree: one node per position in LMDB, shared by all transpositions.
//!
//! ```
//! use deeptree::score::{Bound, Score};
//! use deeptree::store::{Change, Store, StoreOptions, key::PositionKey, node::{Edge, Node, PackedPosition}};
//! use shakmaty::Chess;
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let start = Chess::default();
//! let mut node = Node::new(PackedPosition::of(&start));
//! node.edges.push(Edge::new("e2e4".parse()?, Score::cp(30), Bound::Exact, 18));
//! store.writer().submit(vec![Change::merge(&start, node)?]).wait()?;
//!
//! let view = store.read()?;
//! let stored = view.node(PositionKey::of(&start))?.expect("just written");
//! assert_eq!(stored.edges.len(), 1);
//! assert_eq!(store.stats()?.edges, 1);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! Layout: database `nodes` maps a [`PositionKey`] (8 bytes, big-endian) to a [`Node`] record; database
//! `link_pages` holds every parent link (child, parent) in pages of many children, sorted ([`links`]), so a change
//! can be carried upward without a scan; database `meta` holds the schema version, the inner engine's identity, the number
//! of parent links and the list of engines whose numbers evaluations record (`engines/0`, `engines/1`, ...), one entry
//! per engine (see `engines`: an older store's duplicates are merged by the first open that writes to it alone).
//!
//! All writes go through one writer thread per process that batches many changes per transaction; LMDB serialises
//! writers across processes, and readers never block a writer. The memory map grows on demand.
//!
//! Beside the tree, the `claims` directory holds which process runs which inner-engine search on the store, and
//! their answers ([`claims`]): processes sharing the tree use it to share the work.
//!
//! # Stability and damage
//!
//! (docs/design.md §9.4 and §9.5 say the same for users.)
//!
//! The persisted format is versioned by [`SCHEMA_VERSION`] (in `meta`) and by each record's own format byte ([`node`],
//! [`links`]). A store of an older schema is upgraded by the first command that writes to it, in one transaction
//! (`migrations`: every upgrade, and the tidies an open for writing runs); commands that only read never write (a
//! schema 4 store is read as it is). A newer schema is refused, naming the file. Schema 5 seals every value of every
//! database with a checksum of its key and bytes ([`checksum`], CRC-32C): a record changed after it was written is an
//! error naming the file and the key ([`StoreError::Checksum`]), never a changed value; [`Store::check`] lists every
//! damaged record and [`Store::repair_with`] copies the intact ones into a new store. A data file shorter than its LMDB
//! meta page says is refused when opened, before anything is read from it ([`StoreError::Truncated`]): LMDB maps the
//! file, and a read past its end would kill the process. What checksums cannot see is LMDB's own page structure: a
//! damaged key or branch page may hide a record (a lookup then finds nothing), and a damaged page number may point past
//! the end of the file; `check` reads the file page by page (`pages`) and reports both.

pub mod answer;
pub mod check;
pub mod checksum;
pub mod claims;
pub mod clock;
mod disk;
mod engines;
pub mod fault;
mod file;
pub mod key;
pub mod links;
pub mod marks;
mod migrations;
pub mod node;
mod pages;
pub mod tasks;
pub mod upkeep;
mod writer;

use std::{
    fs::File,
    io,
    path::{Path, PathBuf},
    sync::Arc,
};

use heed::{
    Database, Env, EnvFlags, EnvOpenOptions, MdbError, PutFlags, RoTxn, RwTxn, WithoutTls,
    types::{Bytes, Str},
};
use parking_lot::{RwLock, RwLockReadGuard};
use shakmaty::Chess;

use self::checksum::{Mismatch, Table};
use self::key::PositionKey;
use self::node::Damage;
use self::node::{DecodeError, Node};
use self::upkeep::Upkeep;
pub use self::writer::{Receipt, StoreWriter};

/// Schema of the whole store (databases and their meanings). Bumped when a migration is needed, or when data an
/// earlier deeptree cannot read may be written. Version 2: records may carry engine numbers (record format 2), and
/// `meta` holds the list of engines. Version 3: parent links are packed, one record per child in `links`, and
/// `meta` counts them. Version 4: parent links are held in pages of many children (`link_pages`), and records may
/// carry a screen bound (record format 3). Version 5: every value of `nodes`, `link_pages` and `meta` (but the schema
/// version itself, which every deeptree reads first) is sealed with a checksum of its key and bytes ([`checksum`]).
///
/// A store of an earlier version is upgraded when a command that writes opens it, in one transaction that needs the
/// store alone: its links (`parents` of version 2 and earlier, `links` of version 3) move into pages, and every value
/// is sealed. A command that only reads upgrades nothing ([`Store::open_read_only_with`]): it reads a version 4 store as
/// it is (without checksums to check), and refuses an older one.
pub const SCHEMA_VERSION: u32 = 5;

/// The oldest schema that a command that only reads opens as it is (it migrates nothing): version 4 holds its parent
/// links where this build reads them, its records bare (without checksums). An older store needs a command that
/// writes to migrate it first.
pub const READABLE_SCHEMA: u32 = 4;

const META_SCHEMA: &str = "schema_version";
const META_ENGINE: &str = "engine";
/// How many parent links the store holds (u64, big-endian), kept by the writer.
const META_LINKS: &str = "link_count";
/// Present while cached values are owed by a bulk load of an older build, which committed records before their values
/// (see `writer`): a store opened with it has every value recomputed.
const META_VALUES_OWED: &str = "values_owed";
/// Prefix of the list of engines: `engines/N` holds the name of engine number N (N in decimal, from 0).
const META_ENGINES: &str = "engines/";

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Initial memory map size in bytes; the map grows on demand past it.
    pub initial_map_size: usize,
    /// Most changes the writer commits in one transaction.
    pub max_batch: usize,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions { initial_map_size: 1 << 30, max_batch: 50_000 }
    }
}

/// Everything that can go wrong with the store. Every variant names the file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// LMDB refused an operation.
    #[error("{}: {source}", path.display())]
    Lmdb { path: PathBuf, source: Arc<heed::Error> },
    /// The directory or file could not be used.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: Arc<io::Error> },
    /// A record does not decode.
    #[error("{}: key {key}: {source}: the record is damaged (`deeptree check` lists every damaged record)", path.display())]
    Corrupt { path: PathBuf, key: PositionKey, source: DecodeError },
    /// A meta entry does not decode.
    #[error(
        "{}: meta entry '{entry}' is corrupt: the store is damaged (`deeptree check` lists every damaged record)",
        path.display()
    )]
    CorruptMeta { path: PathBuf, entry: &'static str },
    /// LMDB found its own pages damaged (`MDB_CORRUPTED`, `MDB_PAGE_NOTFOUND`, a named database that is none, a meta
    /// page it cannot read): a page number, a page's header or a node's flags were changed on disk.
    #[error(
        "{}: {source}: LMDB's pages of the store are damaged (`deeptree check` lists the damage)",
        path.display()
    )]
    Pages { path: PathBuf, source: Arc<heed::Error> },
    /// The records of LMDB's databases are damaged, as read from the file before LMDB follows them (`file`).
    #[error("{}: {what}: LMDB's pages of the store are damaged (`deeptree check` lists the damage)", path.display())]
    Structure { path: PathBuf, what: String },
    /// The store was written by a newer deeptree.
    #[error(
        "{}: schema version {found} is newer than this deeptree supports ({supported}); upgrade deeptree",
        path.display()
    )]
    NewerSchema { path: PathBuf, found: u32, supported: u32 },
    /// Two different positions share a key: the stored one is kept, the new one refused.
    #[error(
        "{}: key collision at {key}: stored position {stored_fen}, refused position {new_fen}",
        path.display()
    )]
    Collision { path: PathBuf, key: PositionKey, stored_fen: String, new_fen: String },
    /// A move of a change is not legal in its position; nothing of the change was written.
    #[error("illegal move {uci} in position {fen}")]
    IllegalMove { fen: String, uci: String },
    /// Excluding the move would leave its position no move the tree may play (another process excluded the others).
    #[error("{uci} is the last move of {fen} not excluded: a position keeps at least one move")]
    LastMoveExcluded { fen: String, uci: String },
    /// The writer thread has stopped (the store is closing).
    #[error("{}: the store writer has stopped", path.display())]
    WriterStopped { path: PathBuf },
    /// A command that only reads found no store where it was told to look (the path as given).
    #[error("no deeptree store at {}", path.display())]
    Missing { path: PathBuf },
    /// Another process has the store open, and the operation needs it alone (compaction).
    #[error(
        "{}: the store is open in another process (a GUI's session, an analysis, ...); close it and try again",
        path.display()
    )]
    InUse { path: PathBuf },
    /// The data file is there but empty: no store, and a command that only reads must not set one up.
    #[error("{} is empty (0 bytes): not a deeptree store; nothing was changed", path.display())]
    Empty { path: PathBuf },
    /// A write failed for the disk's sake (no space, an I/O error, a store LMDB gave up on): nothing of it was
    /// committed, everything committed before is kept, and this process writes no more to the store (the directory).
    #[error(
        "cannot write the store at {}: {cause}{}; everything committed before is kept",
        path.display(),
        free.map_or(String::new(), |free| format!(" ({} KiB free on its file system)", free / 1024))
    )]
    WriteFailed {
        path: PathBuf,
        /// The failure, naming its file.
        cause: String,
        /// Bytes free on the store's file system when it failed, where the system says.
        free: Option<u64>,
    },
    /// The store was opened read-only (by a command that only reads): it takes no write (the directory).
    #[error("{}: the store is open read-only here; nothing is written", path.display())]
    ReadOnly { path: PathBuf },
    /// A command that only reads found a store of an older schema, which only a command that writes migrates.
    #[error(
        "{}: schema version {found} is older than this deeptree reads without migrating it ({READABLE_SCHEMA}); a \
         command that writes (import, analyze) migrates it",
        path.display()
    )]
    NeedsMigration { path: PathBuf, found: u32 },
    /// A stored value's checksum does not hold for its key and bytes: the record was damaged after it was written.
    #[error(
        "{}: {record}: {mismatch}: the record is damaged (`deeptree check` lists every damaged record)",
        path.display()
    )]
    Checksum {
        path: PathBuf,
        record: Record,
        #[source]
        mismatch: Mismatch,
    },
    /// The data file is shorter than its own LMDB meta page says: pages the tree needs are missing. Found before
    /// anything of it is read (reading a page past the end of a mapped file kills the process).
    #[error(
        "{}: the file is {length} bytes, but its LMDB meta page says its pages reach byte {needed} (page {page} \
         of {page_size} bytes is missing): the file was cut short, by a full disk or an interrupted copy, or its \
         meta page is damaged; nothing was read from it. Restore it from a copy (`deeptree check` lists what is left)",
        path.display()
    )]
    Truncated { path: PathBuf, length: u64, needed: u64, page: u64, page_size: u64 },
    /// The store has an older schema, and its upgrade needs it alone, but another process has it open.
    #[error(
        "{}: schema version {found} must be upgraded to schema {SCHEMA_VERSION} (checksums) before this command \
         writes, which needs the store alone, but another process has it open (a GUI's session, an analysis, ...); \
         close it and try again",
        path.display()
    )]
    UpgradeInUse { path: PathBuf, found: u32 },
}

impl StoreError {
    /// The error of LMDB refusing an operation on the data file `path`: [`StoreError::Pages`] where LMDB says its own
    /// pages are damaged, [`StoreError::Lmdb`] otherwise.
    pub(crate) fn lmdb(path: &Path, source: heed::Error) -> StoreError {
        let damaged = matches!(
            source,
            heed::Error::Mdb(
                MdbError::Corrupted
                    | MdbError::PageNotFound
                    | MdbError::Incompatible
                    | MdbError::Invalid
                    // A meta page's version field: every deeptree writes its stores with the same LMDB.
                    | MdbError::VersionMismatch
                    // A read transaction goes bad only where an earlier read met damaged pages.
                    | MdbError::BadTxn
            ) | heed::Error::Decoding(_) // a key or value this store wrote that its codec cannot read back
        );
        let (path, source) = (path.to_owned(), Arc::new(source));
        if damaged { StoreError::Pages { path, source } } else { StoreError::Lmdb { path, source } }
    }

    /// Whether this says the store is damaged: a record that fails its checksum or does not decode, or LMDB's own
    /// pages. A command that meets one stops with its line and exit status 3, as `deeptree check` does on damage.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            StoreError::Checksum { .. }
                | StoreError::Corrupt { .. }
                | StoreError::CorruptMeta { .. }
                | StoreError::Pages { .. }
                | StoreError::Structure { .. }
                | StoreError::Truncated { .. }
        )
    }

    /// Whether this store takes no more writes in this process: a write failed on the disk, or the store was
    /// opened read-only. Every later write fails the same way at once, so a caller stops instead of trying again
    /// (a refusal of one submission, such as a key collision, is not one of these).
    pub fn stops_writes(&self) -> bool {
        matches!(self, StoreError::WriteFailed { .. } | StoreError::ReadOnly { .. })
    }

    /// Whether this failure of a whole write transaction comes from the disk or LMDB's state (I/O, no space, a
    /// corrupt or panicked environment, a map that could not grow) rather than from what was written.
    pub(crate) fn is_disk_failure(&self) -> bool {
        use heed::Error as H;
        match self {
            StoreError::Io { .. } | StoreError::Pages { .. } | StoreError::Structure { .. } => true,
            StoreError::Lmdb { source, .. } => match source.as_ref() {
                H::Io(_) => true,
                H::Mdb(e) => matches!(
                    e,
                    MdbError::Panic
                        | MdbError::Corrupted
                        | MdbError::PageNotFound
                        | MdbError::MapFull
                        | MdbError::Invalid
                        | MdbError::VersionMismatch
                        | MdbError::Incompatible
                        | MdbError::Problem
                ),
                _ => false,
            },
            _ => false,
        }
    }
}

/// A stored record, as errors and `deeptree check` name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A position's node in `nodes`.
    Node(PositionKey),
    /// A page of parent links in `link_pages`, by its key.
    LinkPage(PositionKey),
    /// An entry of `meta`.
    Meta(String),
    /// A page of LMDB's own (a B-tree page of any database, by its number): `deeptree check` names it where the
    /// database's structure, not a record, is damaged.
    Page(u64),
}

impl Record {
    /// The database that holds it.
    pub fn database(&self) -> &'static str {
        match self {
            Record::Node(_) => "nodes",
            Record::LinkPage(_) => "link_pages",
            Record::Meta(_) => "meta",
            Record::Page(_) => "lmdb",
        }
    }

    /// Its key: a position or page key in hexadecimal, a meta entry's name, or an LMDB page's number.
    pub fn key(&self) -> String {
        match self {
            Record::Node(key) | Record::LinkPage(key) => key.to_string(),
            Record::Meta(name) => name.clone(),
            Record::Page(number) => number.to_string(),
        }
    }
}

impl serde::Serialize for Record {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("Record", 2)?;
        out.serialize_field("database", self.database())?;
        out.serialize_field("key", &self.key())?;
        out.end()
    }
}

/// The characters of a meta entry's name a message shows.
const MAX_NAME_SHOWN: usize = 64;

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Record::Node(key) => write!(f, "node {key}"),
            Record::LinkPage(key) => write!(f, "link page {key}"),
            Record::Meta(name) => {
                // A damaged key may be any length LMDB allows (up to 511 bytes, or anything a damaged size says):
                // its first characters name it, so that a message stays one short line.
                let shown: String = name.escape_debug().take(MAX_NAME_SHOWN).collect();
                if name.escape_debug().nth(MAX_NAME_SHOWN).is_some() {
                    write!(f, "meta entry '{shown}...' ({} bytes)", name.len())
                } else {
                    write!(f, "meta entry '{shown}'")
                }
            }
            Record::Page(number) => write!(f, "LMDB page {number}"),
        }
    }
}

/// One change sent to the writer.
#[derive(Debug, Clone)]
pub enum Change {
    /// Merge a node into the stored record of its position (creating it when absent) and link every edge's child
    /// back to it. `children[i]` is the key of the position after `node.edges[i]`.
    Merge { key: PositionKey, node: Node, children: Vec<PositionKey> },
    /// Record the inner engine that produced the evaluations.
    SetEngine(String),
    /// Add engines to the store's list of engines (those already in it keep their number).
    AddEngines(Vec<String>),
    /// Set or lift the analyst's mark on a move ([`marks`]): its edge and its meta entry at once. Submitted with
    /// [`StoreWriter::submit`], never deferred.
    Mark(marks::MarkChange),
    /// Write or remove one of the analyst's tasks ([`tasks`]).
    Task(tasks::TaskChange),
    /// Write the depth model's fit or the clock the tree is grown for ([`clock`]).
    Clock(clock::ClockChange),
}

impl Change {
    /// A merge of `node` (which must describe `pos`); every edge's move is checked legal in `pos`.
    pub fn merge(pos: &Chess, node: Node) -> Result<Change, StoreError> {
        let mut children = Vec::with_capacity(node.edges.len());
        for edge in &node.edges {
            let child = crate::notation::play_uci(pos, &edge.uci)
                .ok_or_else(|| StoreError::IllegalMove { fen: node.position.fen(), uci: edge.uci.to_string() })?;
            children.push(PositionKey::of(&child));
        }
        Ok(Change::Merge { key: PositionKey::of(pos), node, children })
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Compaction {
    /// Size of the data file before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub positions: u64,
}

/// What the store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Stored positions.
    pub positions: u64,
    /// Stored edges (each has one parent link).
    pub edges: u64,
    /// Size of the data file.
    pub bytes: u64,
    /// Bytes of the pages that hold nodes and parent links (the file less free pages and bookkeeping).
    pub tree_bytes: u64,
    /// Current memory map size.
    pub map_size: u64,
}

pub(crate) struct Shared {
    env: Env<WithoutTls>,
    nodes: Database<Bytes, Bytes>,
    /// Parent links in pages ([`links`]).
    links: Database<Bytes, Bytes>,
    meta: Database<Str, Bytes>,
    /// The values carry checksums (schema 5). False only for a schema 4 store opened by a command that only reads:
    /// its values are read bare, and nothing is written to it.
    sealed: bool,
    dir: PathBuf,
    data_file: PathBuf,
    /// Nanoseconds the writer spent bringing cached idea values up to date in its last transaction.
    last_update_nanos: std::sync::atomic::AtomicU64,
    /// Held shared by every transaction of this process; held exclusively to resize the map, which LMDB allows
    /// only while the process has no transaction.
    resize: RwLock<()>,
    /// The claims environment, opened on first use.
    claims: parking_lot::Mutex<Option<Arc<claims::ClaimsEnv>>>,
    /// Why this process writes no more to the store ([`StoreError::WriteFailed`], [`StoreError::ReadOnly`]): set
    /// once, by the first write that failed on the disk (or when opened read-only), and given to every later write.
    stopped: std::sync::OnceLock<StoreError>,
    /// Whether [`Store::write_failure_notice`] has given the failure out.
    stop_told: std::sync::atomic::AtomicBool,
    /// A reader has told its user that the store could not be read ([`Store::first_trouble`]).
    trouble_told: std::sync::atomic::AtomicBool,
    /// `deeptree.lock`, locked shared while the store is open (exclusive for compaction): tells whether another
    /// process has the store open. A store opened read-only holds it only where it exists and can be opened.
    _lock: Option<File>,
    /// The map watched for faults while the store is open ([`fault`]).
    fault: fault::Watch,
}

/// How a process holds the store's lock file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// With other processes: every ordinary use.
    Shared,
    /// Alone, or not at all: compaction.
    Alone,
    /// With other processes, and writing nothing: commands that only read. `deeptree.lock` is locked where it is
    /// there and can be opened, and never created.
    ReadOnly,
}

const LOCK_FILE: &str = "deeptree.lock";

/// A new LMDB environment in the empty directory `dir`, for a store written once (a compaction, a repair), its map
/// at least `bytes`: LMDB's lock file is allocated before LMDB maps it, so that a full disk is an error, not SIGBUS
/// (see `disk`).
fn new_environment(dir: &Path, bytes: usize) -> Result<Env<WithoutTls>, StoreError> {
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
fn existing_data_file(dir: &Path) -> Result<PathBuf, StoreError> {
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
fn lock_store(dir: &Path, hold: Hold) -> Result<Option<File>, StoreError> {
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
fn open_environment(dir: &Path, options: &StoreOptions) -> Result<(Env<WithoutTls>, PathBuf), StoreError> {
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
    // The databases' records and roots, read while a read transaction keeps their pages from reuse.
    let pin = env.read_txn().map_err(|source| StoreError::lmdb(&data_file, source))?;
    file::check_structure(&data_file)?;
    drop(pin);
    Ok((env, data_file))
}

/// The LMDB environment of the store in `dir` (its data file `data`), opened to read only. LMDB's lock file is
/// allocated first, and made where it is missing; where it cannot be, the store is read without it (`MDB_NOLOCK`).
fn open_read_only_environment(dir: &Path, data: &Path, options: &StoreOptions) -> Result<Env<WithoutTls>, StoreError> {
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
    unsafe {
        let mut open = EnvOpenOptions::new().read_txn_without_tls();
        open.map_size(map_size).max_dbs(6).max_readers(254).flags(flags);
        open.open(dir)
    }
    .map_err(|source| StoreError::lmdb(data, source))
}

/// The databases of a store opened to read only, its schema and whether a bulk load owes cached values. Nothing is
/// created: a store deeptree never set up is [`StoreError::Missing`], a newer schema is refused, and one older than
/// [`READABLE_SCHEMA`] is [`StoreError::NeedsMigration`].
fn read_only_databases(
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
    let corrupt = || StoreError::CorruptMeta { path: data.to_owned(), entry: META_SCHEMA };
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
fn try_alone(lock: &File) -> bool {
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
fn share_again(lock: &File) {
    if let Err(e) = lock.lock_shared()
        && e.kind() != io::ErrorKind::Unsupported
    {
        log::warn!("the store's lock could not be shared again: {e}");
    }
}

/// An open tree store. Dropping it lets the writer finish every submitted change, then closes it.
pub struct Store {
    shared: Arc<Shared>,
    writer: writer::WriterThread,
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

    /// The directory of the store.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// A new owner's claims on searches of this store (see [`claims`]): the claims environment is opened, and
    /// created, on first use.
    pub fn claims(&self) -> Result<claims::Claims, StoreError> {
        let mut env = self.shared.claims.lock();
        if env.is_none() {
            let read_only = matches!(self.shared.stopped.get(), Some(StoreError::ReadOnly { .. }));
            let opened = if read_only {
                claims::ClaimsEnv::open_read_only(&self.shared.dir)
            } else {
                claims::ClaimsEnv::open(&self.shared.dir)
            };
            *env = Some(Arc::new(opened?));
        }
        let env = env.clone().ok_or_else(|| StoreError::Missing { path: self.shared.dir.join("claims") })?;
        Ok(claims::Claims::new(env))
    }

    /// What the claims of processes sharing this store hold now; `None` when no process ever claimed a search here
    /// (nothing is created to find out).
    pub fn claims_summary(&self) -> Result<Option<claims::ClaimsSummary>, StoreError> {
        if self.shared.claims.lock().is_none() && !self.shared.dir.join("claims").join("data.mdb").is_file() {
            return Ok(None);
        }
        self.claims()?.summary().map(Some)
    }

    /// The searches that processes sharing this store run now (see [`claims::Claims::running`]); none when no process
    /// ever claimed a search here (nothing is created to find out).
    pub fn running_searches(&self) -> Result<Vec<claims::RunningSearch>, StoreError> {
        if self.shared.claims.lock().is_none() && !self.shared.dir.join("claims").join("data.mdb").is_file() {
            return Ok(Vec::new());
        }
        self.claims()?.running()
    }

    /// Why this process writes no more to the store, if it does not: a write failed on the disk
    /// ([`StoreError::WriteFailed`]), or the store was opened read-only ([`StoreError::ReadOnly`]).
    pub fn write_failure(&self) -> Option<StoreError> {
        self.shared.stopped.get().cloned()
    }

    /// The failure of [`write_failure`](Self::write_failure) the first time it is asked for, `None` before there is one
    /// and ever after: for a caller that must say it once (a UCI session, in an `info string`).
    pub fn write_failure_notice(&self) -> Option<StoreError> {
        let failure = self.shared.stopped.get()?;
        let told = self.shared.stop_told.swap(true, std::sync::atomic::Ordering::SeqCst);
        (!told).then(|| failure.clone())
    }

    /// True the first time it is asked only: for a reader that tells its user once per opened store that the tree
    /// could not be read (the UCI session, which then searches directly), and only logs it after that.
    pub fn first_trouble(&self) -> bool {
        !self.shared.trouble_told.swap(true, std::sync::atomic::Ordering::Relaxed)
    }

    /// A handle to submit changes from any thread.
    pub fn writer(&self) -> StoreWriter {
        self.writer.handle()
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
            Some(b) => String::from_utf8(b.to_vec())
                .map(Some)
                .map_err(|_| StoreError::CorruptMeta { path: self.shared.data_file.clone(), entry: META_ENGINE }),
        }
    }

    /// The store's list of engines: the name of engine number N at place N.
    pub fn engines(&self) -> Result<Vec<String>, StoreError> {
        let view = self.read()?;
        self.shared.engines(&view.txn)
    }

    /// The numbers of `names` in the store's list of engines, adding those not in it. Evaluations record their
    /// engine by this number. A name is listed as [`canonical_label`](crate::engine::canonical_label) makes it: one
    /// program started by name or by path is one engine.
    pub fn engine_numbers(&self, names: &[String]) -> Result<Vec<Option<u16>>, StoreError> {
        let names: Vec<String> = names.iter().map(|name| crate::engine::canonical_label(name)).collect();
        let names = names.as_slice();
        let mut known = self.engines()?;
        if names.iter().any(|n| !known.contains(n)) {
            self.writer().submit(vec![Change::AddEngines(names.to_vec())]).wait()?;
            known = self.engines()?;
        }
        Ok(names.iter().map(|n| known.iter().position(|k| k == n).and_then(|i| u16::try_from(i).ok())).collect())
    }

    /// Time the writer spent bringing idea values up to date in its last transaction (a benchmark figure).
    pub fn last_update_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.shared.last_update_nanos.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Waits until every change submitted so far has been committed.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.writer().submit(Vec::new()).wait()
    }
}

/// A page of parent links: its key and its links (without its checksum).
type LinkPage<'t> = (PositionKey, &'t [u8]);

impl Shared {
    /// A store's shared state over its environment and databases: sealed, and writing.
    fn new(
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

    /// The page of parent links that holds `child`'s, as `txn` sees it: its key and its links (checked).
    fn link_page<'t>(&self, txn: &'t heed::RoTxn<'_>, child: PositionKey) -> Result<Option<LinkPage<'t>>, StoreError> {
        match self.links.get_lower_than_or_equal_to(txn, &child.to_bytes()).map_err(|e| self.lmdb_error(e))? {
            None => Ok(None),
            Some((key, value)) => {
                let key = PositionKey::from_slice(key)
                    .ok_or(StoreError::CorruptMeta { path: self.data_file.clone(), entry: "link page key" })?;
                Ok(Some((key, self.page_from(key, value)?)))
            }
        }
    }

    /// Keys of every node with an edge into `child`, in key order, as `txn` sees them.
    fn parents(&self, txn: &heed::RoTxn<'_>, child: PositionKey) -> Result<Vec<PositionKey>, StoreError> {
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
    fn link_count(&self, txn: &heed::RoTxn<'_>) -> Result<u64, StoreError> {
        match self.meta_value(txn, META_LINKS)? {
            None => Ok(0),
            Some(bytes) => bytes
                .try_into()
                .map(u64::from_be_bytes)
                .map_err(|_| StoreError::CorruptMeta { path: self.data_file.clone(), entry: META_LINKS }),
        }
    }

    /// The node stored at `key`, from its stored value: its checksum checked (schema 5) and decoded.
    fn node_from(&self, key: PositionKey, value: &[u8]) -> Result<Node, StoreError> {
        let read = if self.sealed { Node::read(key, value) } else { Node::decode(value).map_err(Damage::from) };
        read.map_err(|damage| self.damaged(Record::Node(key), damage))
    }

    /// The node of a position as `txn` sees it, if stored.
    fn node_at(&self, txn: &heed::RoTxn<'_>, key: PositionKey) -> Result<Option<Node>, StoreError> {
        match self.raw_node_at(txn, key)? {
            None => Ok(None),
            Some(value) => self.node_from(key, value).map(Some),
        }
    }

    /// The stored value of a position as `txn` sees it, if stored: where none is found, the records on either side of
    /// its key are checked first ([`Shared::confirm_absent`]).
    fn raw_node_at<'t>(&self, txn: &'t heed::RoTxn<'_>, key: PositionKey) -> Result<Option<&'t [u8]>, StoreError> {
        match self.nodes.get(txn, &key.to_bytes()).map_err(|e| self.lmdb_error(e))? {
            Some(value) => Ok(Some(value)),
            None => self.confirm_absent(txn, key).map(|()| None),
        }
    }

    /// A position found absent is absent, not a record whose key byte was damaged nor one a damaged page hides
    /// ([`Shared::confirm_absent_in`] in the nodes database).
    fn confirm_absent(&self, txn: &heed::RoTxn<'_>, key: PositionKey) -> Result<(), StoreError> {
        self.confirm_absent_in(txn, self.nodes, Table::Nodes, &key.to_bytes())
    }

    /// A key found absent in `database` (its values sealed for `table`) is absent, not a record whose key byte was
    /// damaged nor one a damaged page hides: LMDB keeps a leaf's keys in order and looks a key up by bisection, so a
    /// record whose key changed on disk stays where its key was, beside the place a lookup of its old key ends, and
    /// fails its checksum (which covers the key it was written under) under its new key; a lookup sent astray by a
    /// damaged branch key or node offset ends beside records out of their order. The two records on either side of
    /// the key (from LMDB's own `MDB_SET_RANGE`) are read: each must lie on its side, in order, and hold its
    /// checksum. A few cursor moves, only for a key not found.
    fn confirm_absent_in<K: 'static>(
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
    fn page_from<'v>(&self, key: PositionKey, value: &'v [u8]) -> Result<&'v [u8], StoreError> {
        let read = if self.sealed {
            links::read_page(key, value)
        } else {
            links::check_page(value).map(|()| value).map_err(Damage::from)
        };
        read.map_err(|damage| self.damaged(Record::LinkPage(key), damage))
    }

    /// The body of meta entry `name` as `txn` sees it, if present: its checksum checked (schema 5).
    fn meta_value<'t>(&self, txn: &'t heed::RoTxn<'_>, name: &str) -> Result<Option<&'t [u8]>, StoreError> {
        match self.meta.get(txn, name).map_err(|e| self.lmdb_error(e))? {
            None => self.confirm_absent_in(txn, self.meta, Table::Meta, name.as_bytes()).map(|()| None),
            Some(value) => self.meta_body(name, value).map(Some),
        }
    }

    /// The body of a stored meta entry's value.
    fn meta_body<'v>(&self, name: &str, value: &'v [u8]) -> Result<&'v [u8], StoreError> {
        if !self.sealed {
            return Ok(value);
        }
        checksum::open(Table::Meta, name.as_bytes(), value).map_err(|mismatch| StoreError::Checksum {
            path: self.data_file.clone(),
            record: Record::Meta(name.to_owned()),
            mismatch,
        })
    }

    /// Writes meta entry `name`, sealed.
    fn put_meta(&self, txn: &mut heed::RwTxn<'_>, name: &str, body: &[u8]) -> Result<(), StoreError> {
        let value = checksum::sealed(Table::Meta, name.as_bytes(), body);
        self.meta.put(txn, name, &value).map_err(|e| self.lmdb_error(e))
    }

    /// The error for a damaged record.
    fn damaged(&self, record: Record, damage: Damage) -> StoreError {
        let path = self.data_file.clone();
        match (damage, record) {
            (Damage::Checksum(mismatch), record) => StoreError::Checksum { path, record, mismatch },
            (Damage::Decode(source), Record::Node(key) | Record::LinkPage(key)) => {
                StoreError::Corrupt { path, key, source }
            }
            (Damage::Decode(_), Record::Meta(_) | Record::Page(_)) => StoreError::CorruptMeta { path, entry: "meta" },
        }
    }

    /// Writes every record into a new environment in `work`, in key order with LMDB's append mode (pages are filled
    /// to the brim instead of split in half), and syncs it to disk.
    fn rewrite_into(&self, work: &Path, bytes: u64) -> Result<(), StoreError> {
        let lmdb = |source| StoreError::Lmdb { path: work.join("data.mdb"), source: Arc::new(source) };
        let env = new_environment(work, (bytes as usize).saturating_add(64 << 20))?;
        let mut wtxn = env.write_txn().map_err(lmdb)?;
        let nodes: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("nodes")).map_err(lmdb)?;
        let links: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("link_pages")).map_err(lmdb)?;
        let meta: Database<Str, Bytes> = env.create_database(&mut wtxn, Some("meta")).map_err(lmdb)?;
        const PER_TXN: usize = 100_000;
        let rtxn = self.env.read_txn().map_err(|e| self.lmdb_error(e))?;
        for item in self.meta.iter(&rtxn).map_err(|e| self.lmdb_error(e))? {
            let (key, value) = item.map_err(|e| self.lmdb_error(e))?;
            meta.put(&mut wtxn, key, value).map_err(lmdb)?;
        }
        let mut written = 0usize;
        for (from, to) in [(&self.nodes, &nodes), (&self.links, &links)] {
            for item in from.iter(&rtxn).map_err(|e| self.lmdb_error(e))? {
                let (key, value) = item.map_err(|e| self.lmdb_error(e))?;
                to.put_with_flags(&mut wtxn, PutFlags::APPEND, key, value).map_err(lmdb)?;
                written += 1;
                if written.is_multiple_of(PER_TXN) {
                    wtxn.commit().map_err(lmdb)?;
                    wtxn = env.write_txn().map_err(lmdb)?;
                }
            }
        }
        wtxn.commit().map_err(lmdb)?;
        drop(rtxn);
        env.force_sync().map_err(lmdb)?;
        env.prepare_for_closing().wait();
        Ok(())
    }

    /// The list of engines as `txn` sees it.
    fn engines(&self, txn: &heed::RoTxn<'_>) -> Result<Vec<String>, StoreError> {
        let corrupt = || StoreError::CorruptMeta { path: self.data_file.clone(), entry: META_ENGINES };
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

    /// Adds the names not yet in the list of engines, numbered after the last, each as
    /// [`canonical_label`](crate::engine::canonical_label) makes it.
    fn add_engines(&self, txn: &mut heed::RwTxn<'_>, names: &[String]) -> Result<(), StoreError> {
        let mut known = self.engines(txn)?;
        for name in names.iter().map(|name| crate::engine::canonical_label(name)) {
            if known.contains(&name) || known.len() > usize::from(u16::MAX) {
                continue;
            }
            let key = format!("{META_ENGINES}{}", known.len());
            self.put_meta(txn, &key, name.as_bytes())?;
            known.push(name);
        }
        Ok(())
    }

    fn lmdb_error(&self, source: heed::Error) -> StoreError {
        StoreError::lmdb(&self.data_file, source)
    }

    fn read(&self) -> Result<ReadView<'_>, StoreError> {
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

    /// Another process grew the map: adopt its size.
    fn adopt_map_size(&self) -> Result<(), StoreError> {
        let _exclusive = self.resize.write();
        // SAFETY: the exclusive lock guarantees that this process has no open transaction.
        let resized = unsafe { self.env.resize(0) }.map_err(|e| self.lmdb_error(e));
        self.map_moved();
        resized
    }

    /// The map may have moved: the fault handler watches where it is now.
    fn map_moved(&self) {
        self.fault.moved();
    }

    /// The map is full: grow it.
    fn grow_map(&self) -> Result<(), StoreError> {
        let _exclusive = self.resize.write();
        let current = self.env.info().map_size;
        let step = current.clamp(1 << 20, 8 << 30);
        let page = page_size();
        let new_size = (current + step).div_ceil(page) * page;
        log::info!(
            "growing the map of {} from {} MiB to {} MiB",
            self.data_file.display(),
            current >> 20,
            new_size >> 20
        );
        // SAFETY: the exclusive lock guarantees that this process has no open transaction.
        let resized = unsafe { self.env.resize(new_size) }.map_err(|e| self.lmdb_error(e));
        self.map_moved();
        resized
    }

    /// Runs `f` in a write transaction and commits, growing or adopting the map and retrying as needed. A failure
    /// of the disk (see [`StoreError::is_disk_failure`]) stops every write of this process to the store: it and every
    /// later write fail with [`StoreError::WriteFailed`], at once, without trying again.
    fn write<R>(&self, mut f: impl FnMut(&Self, &mut RwTxn) -> Result<R, StoreError>) -> Result<R, StoreError> {
        if let Some(stopped) = self.stopped.get() {
            return Err(stopped.clone());
        }
        loop {
            let outcome = {
                let _guard = self.resize.read_recursive();
                match self.env.write_txn() {
                    Err(e) => Err(e.into()),
                    Ok(mut txn) => match f(self, &mut txn) {
                        Ok(value) => txn.commit().map(|()| value).map_err(Retry::from),
                        Err(e) => Err(Retry::from_store(e)),
                    },
                }
            };
            let failed = match outcome {
                Ok(value) => return Ok(value),
                Err(Retry::MapFull) => self.grow_map(),
                Err(Retry::MapResized) => self.adopt_map_size(),
                Err(Retry::Fail(e)) => Err(e.into_store(self)),
            };
            match failed {
                Ok(()) => {}
                Err(e) if e.is_disk_failure() => return Err(self.stop_writes(e)),
                Err(e) => return Err(e),
            }
        }
    }

    /// Stops this process's writes to the store for the failure `cause`: the [`StoreError::WriteFailed`] that every
    /// later write gets.
    fn stop_writes(&self, cause: StoreError) -> StoreError {
        let cause = match &cause {
            StoreError::Lmdb { path, source } => format!("{}: {source}", file_name(path)),
            StoreError::Io { path, source } => format!("{}: {source}", file_name(path)),
            other => other.to_string(),
        };
        let stopped = self.stopped.get_or_init(|| {
            let error = StoreError::WriteFailed { path: self.dir.clone(), cause, free: disk::free_bytes(&self.dir) };
            // Whoever wrote reports it (analyze ends with it, a UCI session says it once): the log only at info.
            log::info!("{error}; no more writes to it from this process");
            error
        });
        stopped.clone()
    }
}

/// A file's name alone (the store's directory is said beside it).
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |name| name.to_string_lossy().into_owned())
}

enum Retry {
    MapFull,
    MapResized,
    Fail(Failure),
}

enum Failure {
    Lmdb(heed::Error),
    Store(StoreError),
}

impl Failure {
    fn into_store(self, shared: &Shared) -> StoreError {
        match self {
            Failure::Lmdb(e) => shared.lmdb_error(e),
            Failure::Store(e) => e,
        }
    }
}

impl From<heed::Error> for Retry {
    fn from(e: heed::Error) -> Retry {
        match e {
            heed::Error::Mdb(MdbError::MapFull) => Retry::MapFull,
            heed::Error::Mdb(MdbError::MapResized) => Retry::MapResized,
            e => Retry::Fail(Failure::Lmdb(e)),
        }
    }
}

impl Retry {
    fn from_store(e: StoreError) -> Retry {
        if let StoreError::Lmdb { source, .. } = &e {
            match source.as_ref() {
                heed::Error::Mdb(MdbError::MapFull) => return Retry::MapFull,
                heed::Error::Mdb(MdbError::MapResized) => return Retry::MapResized,
                _ => {}
            }
        }
        Retry::Fail(Failure::Store(e))
    }
}

fn page_size() -> usize {
    // LMDB and heed require map sizes in whole OS pages; 64 KiB covers every common page size.
    64 * 1024
}

/// A consistent read-only view of the store.
pub struct ReadView<'s> {
    shared: &'s Shared,
    txn: RoTxn<'s, WithoutTls>,
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
            let key = PositionKey::from_slice(key)
                .ok_or_else(|| StoreError::CorruptMeta { path: self.shared.data_file.clone(), entry: "nodes key" })?;
            Ok((key, self.shared.node_from(key, bytes)?))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages of an error and of each error below it, through `source()`.
    fn chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
        std::iter::successors(Some(e), |&e| e.source()).map(ToString::to_string).collect()
    }

    /// A damaged meta entry's name is shown escaped and cut short: one short line, whatever its length.
    #[test]
    fn a_meta_entry_is_named_in_one_short_line() {
        assert_eq!(Record::Meta("schema".to_owned()).to_string(), "meta entry 'schema'");
        let damaged = format!("{}\n{}", "x".repeat(40_000), char::from(27));
        let shown = Record::Meta(damaged).to_string();
        assert_eq!(shown, format!("meta entry '{}...' (40002 bytes)", "x".repeat(64)));
        assert_eq!(Record::Meta("a\nb".to_owned()).to_string(), "meta entry 'a\\nb'");
    }

    /// The error each variant wraps is reachable through `source()`, and the message is unchanged by it.
    #[test]
    fn wrapped_errors_are_sources() {
        let path = PathBuf::from("/x/deeptree");
        let io = StoreError::Io { path: path.clone(), source: Arc::new(io::Error::other("disk on fire")) };
        assert_eq!(chain(&io), ["/x/deeptree: disk on fire", "disk on fire"]);

        let lmdb = StoreError::Lmdb { path: path.clone(), source: Arc::new(heed::Error::Mdb(MdbError::MapFull)) };
        let messages = chain(&lmdb);
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[0], format!("/x/deeptree: {}", messages[1]));

        let decode = DecodeError::Corrupt { reason: "bad flags", offset: 3 };
        let corrupt = StoreError::Corrupt { path: path.clone(), key: PositionKey(1), source: decode };
        let messages = chain(&corrupt);
        assert_eq!(messages.last().map(String::as_str), Some("corrupt record: bad flags at byte 3"), "{messages:?}");
        assert_eq!(messages.len(), 2, "{messages:?}");

        let mismatch = Mismatch::Differs { stored: 1, computed: 2 };
        let damaged = StoreError::Checksum { path, record: Record::Node(PositionKey(1)), mismatch };
        let messages = chain(&damaged);
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[1], "checksum mismatch (stored 00000001, computed 00000002)");
        assert!(messages[0].contains(&messages[1]), "{messages:?}");
    }
}
