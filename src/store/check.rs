//! `deeptree check`: every record of every database read and verified ([`Store::check_dir`], [`Store::check`]), and
//! the repair that copies the intact ones into a new store ([`Store::repair_with`]), never in place and never on its
//! own.
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
//! The records are read from the data file page by page with plain reads (`store::pages`), never through
//! LMDB's memory map, so that damage to LMDB's own pages (a page number past the end of the file, a file cut short)
//! is reported, and everything still reachable read, where a mapped read would kill the process. An LMDB read
//! transaction is held meanwhile, so that no other process reuses the pages read.
//!
//! A node is intact when a lookup of its key through LMDB finds it (a damaged page may hide it from lookups; looked
//! up only where every page of the database read sound), its checksum holds (schema 5), it decodes, its position is
//! a legal position whose key is the record's key, and every edge's move is legal in it. A page of parent links is
//! intact when it is found by a lookup too, its checksum holds, its links are in order and each child lies between its
//! page's key and the next page's. The parent links must be exactly those the intact nodes' edges call for: where
//! they are not (a damaged node's links left behind, or a damaged page's lost), the check says how many are missing
//! or stray. Meta entries are checked for their checksum and their meaning (the schema version, the engine's name,
//! the count of links, the list of engines).

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
    sync::Arc,
};

use heed::{
    Database, EnvFlags, EnvOpenOptions, PutFlags, RoTxn, WithoutTls,
    types::{Bytes, Str},
};

use super::{
    META_ENGINE, META_ENGINES, META_LINKS, META_SCHEMA, META_VALUES_OWED, READABLE_SCHEMA, Record, SCHEMA_VERSION,
    Store, StoreError,
    checksum::{self, Table},
    file,
    key::PositionKey,
    links, new_environment,
    node::Damage,
    node::Node,
    page_size,
    pages::{DatabaseRecord, Entry, Pages, Tree},
    upkeep::Upkeep,
};
use crate::notation::play_uci;

/// A damaged record and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Damaged {
    #[serde(flatten)]
    pub record: Record,
    pub problem: String,
}

/// What a check found.
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
    /// Every damaged record or page: LMDB's pages first, then by database and key.
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

/// What [`Store::repair_with`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Repair {
    pub path: PathBuf,
    /// Intact nodes copied.
    pub nodes: u64,
    /// Parent links written, rebuilt from the copied nodes' edges.
    pub links: u64,
    /// Meta entries copied (the schema version, the link count and the mark of owed values are written anew).
    pub meta_entries: u64,
    /// What was damaged in the store checked: none of it was copied.
    pub left_out: Vec<Damaged>,
}

/// A parent link: (child, parent).
type Link = (PositionKey, PositionKey);

/// A node record that passed every check, with the keys of its edges' children.
struct Intact {
    key: PositionKey,
    node: Node,
    children: Vec<PositionKey>,
}

/// Lookups of keys through LMDB itself, by database.
struct Lookups<'t> {
    txn: &'t RoTxn<'t, WithoutTls>,
    nodes: Option<Database<Bytes, Bytes>>,
    links: Option<Database<Bytes, Bytes>>,
}

/// The data file as its pages read, with what a first pass over every database found wrong with LMDB's own pages.
struct Source {
    pages: Pages,
    roots: HashMap<String, DatabaseRecord>,
    /// Problems of LMDB's pages (and of the file's length).
    damaged: Vec<Damaged>,
    /// The databases whose every page read sound: only they are looked up through LMDB.
    sound: BTreeSet<String>,
    /// The schema version, and whether its values are sealed.
    schema: u32,
    sealed: bool,
}

fn page_damage(database: &str, problem: super::pages::PageProblem) -> Damaged {
    Damaged { record: Record::Page(problem.page), problem: format!("{database}: this page {}", problem.what) }
}

impl Source {
    /// Reads every page of every database once, noting the damaged ones.
    fn read(data_file: &Path) -> Result<Source, StoreError> {
        let Some(pages) = Pages::open(data_file)? else {
            if std::fs::metadata(data_file).is_ok_and(|m| m.len() == 0) {
                return Err(StoreError::Empty { path: data_file.to_owned() });
            }
            let e = std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "its first LMDB meta page is damaged (or it is no LMDB file): LMDB cannot open it, nor can it be read",
            );
            return Err(StoreError::Io { path: data_file.to_owned(), source: Arc::new(e) });
        };
        let mut damaged = Vec::new();
        if let Some(page) = pages.bad_meta {
            damaged.push(Damaged {
                record: Record::Page(page),
                problem: "this meta page is damaged: LMDB refuses the file while it is".to_owned(),
            });
        }
        if let Err(truncated @ StoreError::Truncated { page, .. }) = file::check_length(data_file) {
            damaged.push(Damaged { record: Record::Page(page), problem: truncated.to_string() });
        }
        let (named, problems) = pages.databases();
        let mut main_sound = problems.is_empty();
        damaged.extend(problems.into_iter().map(|problem| page_damage("the list of databases", problem)));
        if pages.meta.main_flags != 0 {
            main_sound = false;
            damaged.push(Damaged {
                record: Record::Page(pages.meta.current),
                problem: format!(
                    "the list of databases: its flags in the meta page are {:#06x}, a store's are none: the meta page \
                     is damaged",
                    pages.meta.main_flags
                ),
            });
        }
        // The free pages, to tell a live root from a stale one. A damaged list is damage too: a writer would take
        // the pages it lists for its own (every open refuses it).
        let free = pages.free_pages().unwrap_or_else(|problem| {
            damaged.push(page_damage("the free pages' list", problem));
            Default::default()
        });
        if let Some(problem) = pages.root_problem(&pages.main(), &free) {
            main_sound = false;
            damaged.push(Damaged {
                record: Record::Page(pages.meta.main_root),
                problem: format!("the list of databases: {problem}"),
            });
        }
        let roots: HashMap<String, DatabaseRecord> =
            named.into_iter().map(|database| (database.name.clone(), database)).collect();
        let mut sound = BTreeSet::new();
        for name in ["nodes", "link_pages", "meta"] {
            let Some(database) = roots.get(name) else {
                // A store has all three from its first transaction on (an older schema's is refused before its
                // report is made): one missing is a damaged list of databases (a byte of its name changed).
                if (roots.contains_key("meta") || roots.contains_key("nodes")) && main_sound {
                    damaged.push(Damaged {
                        record: Record::Meta(format!("database {name}")),
                        problem: "missing from the list of databases".to_owned(),
                    });
                }
                continue;
            };
            let before = damaged.len();
            if let Some(problem) = database.flags_problem().or_else(|| pages.root_problem(database, &free)) {
                damaged.push(Damaged { record: Record::Meta(format!("database {name}")), problem });
            }
            let mut walk = pages.entries(database);
            let problems: Vec<_> = walk.by_ref().filter_map(Result::err).collect();
            // The record's counts, held against a walk that met no damaged page (its counts are off otherwise).
            if problems.is_empty()
                && let Some(problem) = walk.counts.problem(database)
            {
                damaged.push(Damaged { record: Record::Meta(format!("database {name}")), problem });
            }
            damaged.extend(problems.into_iter().map(|problem| page_damage(name, problem)));
            if main_sound && damaged.len() == before {
                sound.insert(name.to_owned());
            }
        }
        let schema = roots
            .get("meta")
            .into_iter()
            .flat_map(|database| pages.entries(database).filter_map(Result::ok))
            .find(|entry| entry.key == META_SCHEMA.as_bytes())
            .and_then(|entry| <[u8; 4]>::try_from(entry.value.as_slice()).ok())
            .map_or(0, u32::from_be_bytes);
        Ok(Source { pages, roots, damaged, sound, schema, sealed: schema >= 5 })
    }

    /// Schema 1 to 3 hold their links otherwise: a command that writes upgrades them first.
    fn readable(&self, data_file: &Path) -> Result<(), StoreError> {
        match self.schema {
            found @ 1..READABLE_SCHEMA => Err(StoreError::NeedsMigration { path: data_file.to_owned(), found }),
            _ => Ok(()),
        }
    }

    /// The entries of a database that read (the damaged pages were reported by [`Source::read`]).
    fn entries(&self, name: &str) -> impl Iterator<Item = Entry> + '_ {
        let none = DatabaseRecord {
            name: String::new(),
            root: super::pages::NO_PAGE,
            flags: 0,
            depth: 0,
            entries: None,
            pages: None,
            tree: Tree::Named,
        };
        let database = self.roots.get(name).cloned().unwrap_or(none);
        self.pages.entries(&database).filter_map(Result::ok)
    }

    /// Checks one node record; what is wrong with it otherwise.
    fn inspect_node(&self, entry: &Entry, lookups: Option<&Lookups<'_>>) -> Result<Intact, Damaged> {
        let Some(key) = PositionKey::from_slice(&entry.key) else {
            return Err(Damaged {
                record: Record::Meta(format!("nodes key {:02x?}", entry.key)),
                problem: format!("a key of {} bytes in nodes (keys are 8 bytes)", entry.key.len()),
            });
        };
        let damaged = |problem: String| Damaged { record: Record::Node(key), problem };
        if let Some(Lookups { txn, nodes: Some(nodes), .. }) = lookups
            && nodes.get(txn, &entry.key).ok().flatten() != Some(entry.value.as_slice())
        {
            return Err(damaged(
                "a lookup of its key does not find it: the database's own pages are damaged".to_owned(),
            ));
        }
        let read =
            if self.sealed { Node::read(key, &entry.value) } else { Node::decode(&entry.value).map_err(Damage::from) };
        let node = read.map_err(|damage| damaged(damage.to_string()))?;
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

    /// Every node record in key order: `intact` gets each intact one, `damaged` each other. Returns how many were
    /// read.
    fn walk_nodes(
        &self,
        lookups: Option<&Lookups<'_>>,
        mut intact: impl FnMut(Intact) -> Result<(), StoreError>,
        mut damaged: impl FnMut(Damaged),
    ) -> Result<u64, StoreError> {
        let mut read = 0u64;
        let mut previous: Option<Vec<u8>> = None;
        for entry in self.entries("nodes") {
            read += 1;
            if previous.as_deref().is_some_and(|previous| previous >= entry.key.as_slice()) {
                damaged(Damaged {
                    record: PositionKey::from_slice(&entry.key).map_or(Record::Meta("nodes".to_owned()), Record::Node),
                    problem: "out of key order: the database's own pages are damaged".to_owned(),
                });
                continue;
            }
            previous = Some(entry.key.clone());
            match self.inspect_node(&entry, lookups) {
                Ok(node) => intact(node)?,
                Err(e) => damaged(e),
            }
        }
        Ok(read)
    }

    /// Checks every page of parent links, adding the damaged ones to `report`; returns the links of the intact
    /// pages, in order.
    fn check_pages(&self, lookups: Option<&Lookups<'_>>, report: &mut CheckReport) -> Vec<Link> {
        let mut held = Vec::new();
        let pages: Vec<Entry> = self.entries("link_pages").collect();
        report.link_pages = pages.len() as u64;
        for (i, entry) in pages.iter().enumerate() {
            let next = pages.get(i + 1).map(|next| next.key.as_slice());
            let Some(key) = PositionKey::from_slice(&entry.key) else {
                report.damaged.push(Damaged {
                    record: Record::Meta(format!("link_pages key {:02x?}", entry.key)),
                    problem: format!("a key of {} bytes (keys are 8 bytes)", entry.key.len()),
                });
                continue;
            };
            let damaged = |problem: String| Damaged { record: Record::LinkPage(key), problem };
            if let Some(Lookups { txn, links: Some(database), .. }) = lookups
                && database.get(txn, &entry.key).ok().flatten() != Some(entry.value.as_slice())
            {
                let problem = "a lookup of its key does not find it: the database's own pages are damaged";
                report.damaged.push(damaged(problem.to_owned()));
                continue;
            }
            let read = if self.sealed {
                links::read_page(key, &entry.value)
            } else {
                links::check_page(&entry.value).map(|()| entry.value.as_slice()).map_err(Damage::from)
            };
            let entries = match read
                .map_err(|e| e.to_string())
                .and_then(|page| links::decode_page(page).map_err(|e| e.to_string()))
            {
                Ok(entries) => entries,
                Err(problem) => {
                    report.damaged.push(damaged(problem));
                    continue;
                }
            };
            let outside = entries.iter().find(|(child, _)| {
                child.to_bytes().as_slice() < entry.key.as_slice()
                    || next.is_some_and(|next| child.to_bytes().as_slice() >= next)
            });
            if let Some((child, _)) = outside {
                report.damaged.push(damaged(format!("holds child {child}, outside its page's keys")));
                continue;
            }
            held.extend(entries);
        }
        held.sort_unstable();
        held.dedup();
        held
    }

    /// The body of a meta entry, its checksum checked where the store's values are sealed.
    fn meta_body<'e>(&self, entry: &'e Entry) -> Result<&'e [u8], String> {
        if !self.sealed || entry.key == META_SCHEMA.as_bytes() {
            return Ok(&entry.value);
        }
        checksum::open(Table::Meta, &entry.key, &entry.value).map_err(|e| e.to_string())
    }

    /// Checks every meta entry, adding the damaged ones to the report (and the mark of owed values); the link count
    /// is compared with the links the intact pages hold (`report.links`, counted before).
    fn check_meta(&self, report: &mut CheckReport) {
        let mut held_links = None;
        for entry in self.entries("meta") {
            report.meta_entries += 1;
            let name = String::from_utf8_lossy(&entry.key).into_owned();
            let body = match self.meta_body(&entry) {
                Ok(body) => body,
                Err(problem) => {
                    report.damaged.push(Damaged { record: Record::Meta(name), problem });
                    continue;
                }
            };
            let text = || std::str::from_utf8(body).is_err().then(|| "not UTF-8 text".to_owned());
            let problem = if name == META_SCHEMA {
                (body.len() != 4).then(|| format!("{} bytes, not a version number", body.len()))
            } else if name == META_LINKS {
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
                text()
            } else if name.starts_with(super::tasks::META_TASKS) {
                super::tasks::decode(body).is_none().then(|| "not a task".to_owned())
            } else if super::clock::is_clock_entry(&name) {
                (!super::clock::readable(&name, body)).then(|| "not a clock entry".to_owned())
            } else if name.starts_with(super::marks::META_MARKS) {
                super::marks::decode(body).is_none().then(|| "not a mark".to_owned())
            } else if let Some(number) = name.strip_prefix(META_ENGINES) {
                if number.parse::<u16>().is_err() {
                    Some("not a number of the list of engines".to_owned())
                } else {
                    text()
                }
            } else {
                None
            };
            if let Some(problem) = problem {
                report.damaged.push(Damaged { record: Record::Meta(name), problem });
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
    }

    /// The whole check, with lookups through LMDB where given.
    fn check(&self, path: &Path, lookups: Option<&Lookups<'_>>) -> Result<CheckReport, StoreError> {
        let mut report = CheckReport {
            path: path.to_owned(),
            schema: self.schema,
            checksums: self.sealed,
            damaged: self.damaged.clone(),
            ..Default::default()
        };
        let mut expected: Vec<Link> = Vec::new();
        let mut damaged_nodes = Vec::new();
        report.nodes = self.walk_nodes(
            lookups,
            |intact| {
                expected.extend(intact.children.iter().map(|child| (*child, intact.key)));
                Ok(())
            },
            |damaged| damaged_nodes.push(damaged),
        )?;
        let damaged_keys: BTreeSet<PositionKey> = damaged_nodes
            .iter()
            .filter_map(|d: &Damaged| match d.record {
                Record::Node(key) => Some(key),
                _ => None,
            })
            .collect();
        report.damaged.extend(damaged_nodes);
        let held = self.check_pages(lookups, &mut report);
        report.links = held.len() as u64;
        let (held, of_damaged): (Vec<Link>, Vec<Link>) =
            held.into_iter().partition(|(_, parent)| !damaged_keys.contains(parent));
        expected.sort_unstable();
        expected.dedup();
        let (missing, stray) = difference(&expected, &held);
        report.links_missing = missing;
        report.links_stray = stray;
        report.links_of_damaged = of_damaged.len() as u64;
        self.check_meta(&mut report);
        if self.schema == 0 {
            report.damaged.push(Damaged {
                record: Record::Meta(META_SCHEMA.to_owned()),
                problem: "missing or unreadable: the schema is not known".to_owned(),
            });
        }
        Ok(report)
    }
}

/// Opens the LMDB environment in `dir` only to hold a read transaction (which maps nothing but the meta pages):
/// no other process reuses a page of it meanwhile.
fn pin(dir: &Path, length: u64) -> Result<heed::Env<WithoutTls>, StoreError> {
    let lmdb = |source| StoreError::lmdb(&dir.join("data.mdb"), source);
    let page = page_size();
    let map_size = (length as usize).saturating_add(64 << 20).div_ceil(page) * page;
    // As a store opened read-only: LMDB's lock file allocated first (see `disk`), without it where it cannot be.
    let mut flags = EnvFlags::READ_ONLY;
    if let Err((path, e)) = super::disk::prepare_lock_file(dir) {
        if !super::disk::cannot_write_here(&e) {
            return Err(StoreError::Io { path, source: Arc::new(e) });
        }
        flags |= EnvFlags::NO_LOCK;
    }
    // SAFETY: opened to read only, once in this process (no store of this process has it open: see the callers).
    unsafe {
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options.map_size(map_size).max_dbs(6).flags(flags);
        options.open(dir)
    }
    .map_err(lmdb)
}

/// Most times a check begins again when a commit lands between its read transaction and its reading of the file.
const SNAPSHOT_TRIES: usize = 20;

/// A read transaction that `begin` starts, and the file's pages read just after it, at the same snapshot: the meta
/// page the walk starts from names the transaction LMDB pinned. So the walk and the lookups through LMDB see one state
/// of the store, and the pages walked are kept from reuse while the transaction is held. A commit in between (another
/// process writing the store) begins both again; after [`SNAPSHOT_TRIES`] the check goes on with a warning.
fn pinned_source<T>(
    data_file: &Path,
    mut begin: impl FnMut() -> Result<T, StoreError>,
    snapshot: impl Fn(&T) -> u64,
) -> Result<(T, Source), StoreError> {
    let mut tries = 0;
    loop {
        let txn = begin()?;
        let source = Source::read(data_file)?;
        tries += 1;
        if source.pages.meta.txn_id == snapshot(&txn) {
            return Ok((txn, source));
        }
        if tries >= SNAPSHOT_TRIES {
            log::warn!(
                "{}: the store was written during the check each of {tries} times it began; a record written meanwhile \
                 may read as damaged: check it again while nothing writes it",
                data_file.display()
            );
            return Ok((txn, source));
        }
    }
}

impl Store {
    /// Reads every record of every database and lists the damaged ones (see the [module](self) docs). Changes
    /// nothing; an error only where the store cannot be read at all.
    pub fn check(&self) -> Result<CheckReport, StoreError> {
        let (view, source) = pinned_source(&self.shared.data_file, || self.read(), |view| view.txn.id() as u64)?;
        let lookups = Lookups {
            txn: &view.txn,
            nodes: source.sound.contains("nodes").then_some(self.shared.nodes),
            links: source.sound.contains("link_pages").then_some(self.shared.links),
        };
        source.check(&self.shared.data_file, Some(&lookups))
    }

    /// [`Store::check`] of the store in `dir`, which no store of this process may have open: nothing is mapped but
    /// LMDB's meta pages unless every page of the list of databases reads sound, so that a file cut short or a page
    /// number past its end is reported, never read.
    pub fn check_dir(dir: &Path) -> Result<CheckReport, StoreError> {
        let data_file = dir.join("data.mdb");
        if !data_file.is_file() {
            return Err(StoreError::Missing { path: dir.to_owned() });
        }
        let source = Source::read(&data_file)?;
        source.readable(&data_file)?;
        let env = match pin(dir, source.pages.length) {
            Ok(env) => env,
            // LMDB refuses the file (a meta page damaged): the walk's report, without lookups, and the refusal.
            Err(e) if e.is_damage() => {
                let mut report = source.check(&data_file, None)?;
                let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
                report.damaged.insert(
                    0,
                    Damaged { record: Record::Page(0), problem: format!("LMDB refuses to open the file: {cause}") },
                );
                return Ok(report);
            }
            Err(e) => return Err(e),
        };
        let lmdb = |source| StoreError::lmdb(&data_file, source);
        let (txn, source) = pinned_source(&data_file, || env.read_txn().map_err(lmdb), |txn| txn.id() as u64)?;
        // Opening a database reads the list of databases through the map: only where it read sound.
        let open = |name: &str| -> Result<Option<Database<Bytes, Bytes>>, StoreError> {
            if !source.sound.contains(name) {
                return Ok(None);
            }
            env.open_database(&txn, Some(name)).map_err(lmdb)
        };
        let lookups = Lookups { txn: &txn, nodes: open("nodes")?, links: open("link_pages")? };
        let report = source.check(&data_file, Some(&lookups))?;
        drop(txn);
        env.prepare_for_closing().wait();
        Ok(report)
    }

    /// Writes a new store in `out` (a directory that does not exist or is empty) with every intact record of the
    /// store in `dir` (see [`Store::check`]), read page by page as the check reads them: the intact nodes as they
    /// are, the parent links rebuilt from their edges, the intact meta entries (the tasks, the marks, the clock's fits
    /// and the engines; an engine's damaged name is replaced by a placeholder, so that the engine numbers of
    /// evaluations keep their meaning); the cached values are then recomputed by opening the new store with `upkeep`. The store in `dir` is only read, and no store of this
    /// process may have it open. Returns what was written and what was left out.
    pub fn repair_with(dir: &Path, out: &Path, upkeep: Arc<dyn Upkeep>) -> Result<Repair, StoreError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |e| StoreError::Io { path, source: Arc::new(e) }
        };
        let data_file = dir.join("data.mdb");
        if !data_file.is_file() {
            return Err(StoreError::Missing { path: dir.to_owned() });
        }
        if out.exists() && std::fs::read_dir(out).map_err(io(out))?.next().is_some() {
            let e = std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "not empty: a repair writes a new store into an empty or new directory, never over another",
            );
            return Err(io(out)(e));
        }
        let source = Source::read(&data_file)?;
        source.readable(&data_file)?;
        // Where LMDB refuses the file (a meta page damaged), no process can write it either: nothing to pin.
        let pinned = match pin(dir, source.pages.length) {
            Ok(env) => Some(env),
            Err(e) if e.is_damage() => None,
            Err(e) => return Err(e),
        };
        let source_lmdb = |e| StoreError::lmdb(&data_file, e);
        // The walk reads the snapshot the transaction holds (see `pinned_source`).
        let (held, source) = match pinned.as_ref() {
            Some(env) => {
                let (txn, source) =
                    pinned_source(&data_file, || env.read_txn().map_err(source_lmdb), |txn| txn.id() as u64)?;
                (Some(txn), source)
            }
            None => (None, source),
        };
        std::fs::create_dir_all(out).map_err(io(out))?;
        let target = out.join("data.mdb");
        let lmdb = |source| StoreError::Lmdb { path: target.clone(), source: Arc::new(source) };
        let mut repair = Repair { path: out.to_owned(), left_out: source.damaged.clone(), ..Default::default() };
        {
            let env = new_environment(out, (source.pages.length as usize).saturating_mul(2).saturating_add(64 << 20))?;
            let mut wtxn = env.write_txn().map_err(lmdb)?;
            let nodes: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("nodes")).map_err(lmdb)?;
            let pages: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("link_pages")).map_err(lmdb)?;
            let meta: Database<Str, Bytes> = env.create_database(&mut wtxn, Some("meta")).map_err(lmdb)?;
            let mut all_links: Vec<Link> = Vec::new();
            let mut buffer = Vec::with_capacity(256);
            let mut written = 0u64;
            let mut left_out = Vec::new();
            // A transaction of 100,000 nodes at most: its dirty pages stay bounded. Committed before the next begins
            // (a second write transaction of one environment would wait for the first for ever).
            let mut open = Some(wtxn);
            source.walk_nodes(
                None,
                |intact| {
                    intact.node.write(intact.key, &mut buffer);
                    let txn = match open.as_mut() {
                        Some(txn) => txn,
                        None => open.insert(env.write_txn().map_err(lmdb)?),
                    };
                    nodes.put_with_flags(txn, PutFlags::APPEND, &intact.key.to_bytes(), &buffer).map_err(lmdb)?;
                    all_links.extend(intact.children.iter().map(|child| (*child, intact.key)));
                    written += 1;
                    if written.is_multiple_of(100_000)
                        && let Some(full) = open.take()
                    {
                        full.commit().map_err(lmdb)?;
                    }
                    Ok(())
                },
                |damaged| left_out.push(damaged),
            )?;
            let mut wtxn = match open.take() {
                Some(txn) => txn,
                None => env.write_txn().map_err(lmdb)?,
            };
            drop(open);
            repair.nodes = written;
            repair.left_out.extend(left_out);
            let mut report = CheckReport::default();
            report.links = source.check_pages(None, &mut report).len() as u64;
            source.check_meta(&mut report);
            let damaged_meta: BTreeSet<String> = report
                .damaged
                .iter()
                .filter_map(|d| match &d.record {
                    Record::Meta(name) => Some(name.clone()),
                    _ => None,
                })
                .collect();
            repair.left_out.extend(report.damaged);
            let all = links::encode_page(&all_links);
            repair.links = (all.len() / links::ENTRY) as u64;
            for (key, piece) in links::split(&all).into_iter().filter(|(_, piece)| !piece.is_empty()) {
                let key = key.unwrap_or(PositionKey::from_bytes([0; 8]));
                let value = links::write_page(key, piece);
                pages.put_with_flags(&mut wtxn, PutFlags::APPEND, &key.to_bytes(), &value).map_err(lmdb)?;
            }
            let put = |wtxn: &mut heed::RwTxn<'_>, name: &str, body: &[u8]| {
                meta.put(wtxn, name, &checksum::sealed(Table::Meta, name.as_bytes(), body)).map_err(lmdb)
            };
            meta.put(&mut wtxn, META_SCHEMA, &SCHEMA_VERSION.to_be_bytes()).map_err(lmdb)?;
            put(&mut wtxn, META_LINKS, &repair.links.to_be_bytes())?;
            // The cached values of the nodes kept may count on nodes left out: every one is recomputed on open.
            put(&mut wtxn, META_VALUES_OWED, &[])?;
            let mut engines: Vec<Option<String>> = Vec::new();
            for entry in source.entries("meta") {
                let Ok(body) = source.meta_body(&entry) else { continue };
                let Ok(name) = std::str::from_utf8(&entry.key) else { continue };
                let text = std::str::from_utf8(body).ok();
                if name == META_ENGINE {
                    if text.is_some() {
                        put(&mut wtxn, META_ENGINE, body)?;
                        repair.meta_entries += 1;
                    }
                } else if let Some(number) = name.strip_prefix(META_ENGINES)
                    && let Ok(number) = number.parse::<u16>()
                {
                    let number = usize::from(number);
                    if engines.len() <= number {
                        engines.resize(number + 1, None);
                    }
                    engines[number] = text.map(str::to_owned);
                } else if ![META_SCHEMA, META_LINKS, META_VALUES_OWED].contains(&name) && !damaged_meta.contains(name) {
                    // Every other intact entry as it was: the tasks, the marks and their version, the clock's fits.
                    put(&mut wtxn, name, body)?;
                    repair.meta_entries += 1;
                }
            }
            for (number, name) in engines.into_iter().enumerate() {
                let name = name.unwrap_or_else(|| format!("(engine {number}: its name was lost in a repair)"));
                put(&mut wtxn, &format!("{META_ENGINES}{number}"), name.as_bytes())?;
                repair.meta_entries += 1;
            }
            wtxn.commit().map_err(lmdb)?;
            env.force_sync().map_err(lmdb)?;
            env.prepare_for_closing().wait();
        }
        drop(held);
        if let Some(pinned) = pinned {
            pinned.prepare_for_closing().wait();
        }
        // Opening it recomputes the values owed, then closes it.
        drop(Store::open_with(out, &super::StoreOptions::default(), upkeep)?);
        Ok(repair)
    }
}

/// How many of `expected` are not in `held`, and of `held` not in `expected` (both sorted, without repeats).
fn difference(expected: &[Link], held: &[Link]) -> (u64, u64) {
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
