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
mod error;
pub mod fault;
mod file;
pub mod links;
pub mod marks;
mod migrations;
pub mod node;
mod open;
mod pages;
mod read;
pub mod tasks;
pub mod upkeep;
mod write;
mod writer;

use std::{
    fs::File,
    path::{Path, PathBuf},
    sync::Arc,
};

use heed::{
    Database, Env, WithoutTls,
    types::{Bytes, Str},
};
use parking_lot::RwLock;
use shakmaty::Chess;

pub use self::error::{Record, StoreError};
use self::key::PositionKey;
use self::node::Node;
use self::open::{Hold, LOCK_FILE, new_environment, page_size, share_again, try_alone};
pub use self::read::ReadView;
pub use self::writer::{Receipt, StoreWriter};
pub use crate::model::key;

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

/// Clears the reader slots that processes which died with a read transaction open (a GUI killed mid-game, an
/// `analyze` killed with -9) left in LMDB's lock file. While one stays, no page freed since its snapshot is reused and
/// the data file grows with every write of the processes still running; LMDB clears them by itself only when no
/// process has the store open. At every open, and every minute by the writer of a store that stays open.
fn clear_stale_readers(env: &Env<WithoutTls>, data_file: &Path) {
    match env.clear_stale_readers() {
        Ok(0) => {}
        Ok(cleared) => log::info!(
            "{}: cleared {cleared} reader slots left by processes that ended without closing them",
            data_file.display()
        ),
        Err(e) => log::warn!("{}: readers left by ended processes not checked: {e}", data_file.display()),
    }
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

/// An open tree store. Dropping it lets the writer finish every submitted change, then closes it.
pub struct Store {
    shared: Arc<Shared>,
    writer: writer::WriterThread,
}

impl Store {
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
}
