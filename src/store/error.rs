//! What can go wrong with the store ([`StoreError`], every variant naming the file) and the stored record an error
//! or `deeptree check` names ([`Record`]).

use std::{
    io,
    path::{Path, PathBuf},
    sync::Arc,
};

use heed::MdbError;

use super::{READABLE_SCHEMA, SCHEMA_VERSION, checksum::Mismatch, key::PositionKey, node::DecodeError};

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
    CorruptMeta { path: PathBuf, entry: String },
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

    /// Whether this store takes no more writes in this process: a write failed on the disk, the store was opened
    /// read-only, or its writer thread has ended (the store closed, or a write panicked). Every later write fails the
    /// same way at once, so a caller stops instead of trying again, and spending engine time on answers that cannot be
    /// stored (a refusal of one submission, such as a key collision, is not one of these).
    pub fn stops_writes(&self) -> bool {
        matches!(self, StoreError::WriteFailed { .. } | StoreError::ReadOnly { .. } | StoreError::WriterStopped { .. })
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
