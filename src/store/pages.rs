//! LMDB's B-tree pages read with plain reads, never mapped: what `deeptree check` and a repair read the records
//! through, so that a damaged page number of LMDB's own (one past the end of the file would kill a process reading the
//! map with SIGBUS) is a problem to report, and every record still reachable is read.
//!
//! The format (LMDB's `mdb.c`, 64-bit builds, data version 1; integers in the machine's byte order): a page starts
//! with a 16-byte header: its page number (u64), a pad (u16), its flags (u16: 0x01 branch, 0x02 leaf, 0x04 overflow,
//! 0x20 fixed-size duplicates), and the lower and upper bounds of its free space (u16 each; an overflow page holds its
//! count of pages there, u32). Then the 2-byte offsets of its nodes, from the page's start. A node is 8 bytes: the
//! low and high u16 of its data size (in a branch: with its flags field, the child's page number), its flags (u16:
//! 0x01 data on overflow pages, whose first page number is its data; 0x02 a named database's record; 0x04
//! duplicates) and its key size (u16); then its key and its data. The main database's leaves name the named
//! databases: key the name, data their 48-byte record, whose last u64 is the root page (all ones: empty).

use std::{
    collections::HashSet,
    fs::File,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use super::StoreError;

const MAGIC: u32 = 0xBEEF_C0DE;
/// The page size of LMDB on the usual machine: where the second meta page is looked for when the first is damaged.
const USUAL_PAGE: u64 = 4096;
const HEADER: usize = 16;
const NODE: usize = 8;
/// Offsets inside a meta page (after its page header): the two database records of 48 bytes (free pages, main),
/// the last page and the transaction id.
const META_MAGIC: usize = HEADER;
const FREE_DB: usize = HEADER + 24;
const MAIN_DB: usize = FREE_DB + DB_RECORD;
const DB_RECORD: usize = 48;
const DB_ROOT: usize = 40;
/// The flags of a database's record (u16, after a u32 pad), its depth (u16) and its count of entries (u64).
const DB_FLAGS: usize = 4;
const DB_DEPTH: usize = 6;
/// Its counts of branch, leaf and overflow pages (u64 each).
const DB_PAGES: usize = 8;
const DB_ENTRIES: usize = 32;
const LAST_PAGE: usize = MAIN_DB + DB_RECORD;
const TXN_ID: usize = LAST_PAGE + 8;
const META_END: usize = TXN_ID + 8;

const P_BRANCH: u16 = 0x01;
const P_LEAF: u16 = 0x02;
const P_OVERFLOW: u16 = 0x04;
const P_LEAF2: u16 = 0x20;
const F_BIGDATA: u16 = 0x01;
/// A node whose data is a named database's record.
pub(super) const F_SUBDATA: u16 = 0x02;
const F_DUPDATA: u16 = 0x04;
/// A database's flags: duplicates sorted (`MDB_DUPSORT`), integer keys (`MDB_INTEGERKEY`, the free-page database's).
const MDB_DUPSORT: u16 = 0x04;
const MDB_INTEGERKEY: u16 = 0x08;
/// LMDB's longest key (`MDB_MAXKEYSIZE` of its default build).
const MAX_KEY: usize = 511;
/// How deep LMDB's cursors reach (`CURSOR_STACK`): a tree deeper than that is damaged.
const CURSOR_STACK: usize = 32;
/// LMDB's "no page": an empty database's root.
pub(super) const NO_PAGE: u64 = u64::MAX;

/// The current meta of a data file.
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta {
    pub page_size: u64,
    pub last_page: u64,
    pub free_root: u64,
    pub main_root: u64,
    /// The main database's flags (none in a store) and depth.
    pub main_flags: u16,
    pub main_depth: u16,
    pub txn_id: u64,
    /// The meta page it was read from (0 or 1).
    pub current: u64,
}

/// Something wrong with LMDB's own pages: the page, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PageProblem {
    pub page: u64,
    pub what: String,
}

/// One leaf entry: its key, its data and its node flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub flags: u16,
    /// Overflow pages its value is held on (none where it is on its leaf).
    pub overflow_pages: u64,
}

/// A data file opened for reading its pages.
pub(super) struct Pages {
    file: File,
    path: PathBuf,
    pub meta: Meta,
    /// The file's length in bytes when opened.
    pub length: u64,
    /// A meta page that does not read as one (LMDB refuses the file then), where the other does.
    pub bad_meta: Option<u64>,
}

/// A key as hexadecimal digits (a position's key reads as deeptree prints it).
fn hex(key: &[u8]) -> String {
    key.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn parse_meta(page: &[u8]) -> Option<Meta> {
    if u32_at(page, META_MAGIC)? != MAGIC {
        return None;
    }
    let page_size = u64::from(u32_at(page, FREE_DB)?);
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        return None;
    }
    Some(Meta {
        page_size,
        last_page: u64_at(page, LAST_PAGE)?,
        free_root: u64_at(page, FREE_DB + DB_ROOT)?,
        main_root: u64_at(page, MAIN_DB + DB_ROOT)?,
        main_flags: u16_at(page, MAIN_DB + DB_FLAGS)?,
        main_depth: u16_at(page, MAIN_DB + DB_DEPTH)?,
        txn_id: u64_at(page, TXN_ID)?,
        current: u64_at(page, 0)?,
    })
}

impl Pages {
    /// Opens `path` and reads its current meta (that of the greater transaction id); `None` when the file is absent,
    /// empty, or its first page is not an LMDB meta page.
    pub(super) fn open(path: &Path) -> Result<Option<Pages>, StoreError> {
        let io = |e| StoreError::Io { path: path.to_owned(), source: Arc::new(e) };
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        let read = |offset: u64| -> Result<Option<Vec<u8>>, StoreError> {
            let mut buffer = vec![0; META_END];
            match file.read_exact_at(&mut buffer, offset) {
                Ok(()) => Ok(Some(buffer)),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
                Err(e) => Err(io(e)),
            }
        };
        // The meta pages first, then the length: a commit of another process in between only makes the file longer.
        // Where the first is damaged, the second is looked for at the usual page size.
        let (meta, bad_meta) = match read(0)?.as_deref().and_then(parse_meta) {
            Some(first) => match read(first.page_size)?.as_deref().and_then(parse_meta) {
                Some(second) if second.txn_id > first.txn_id => (second, None),
                Some(_) => (first, None),
                None => (first, Some(1)),
            },
            None => match read(USUAL_PAGE)?.as_deref().and_then(parse_meta) {
                Some(second) if second.page_size == USUAL_PAGE => (second, Some(0)),
                _ => return Ok(None),
            },
        };
        let length = file.metadata().map_err(io)?.len();
        Ok(Some(Pages { file, path: path.to_owned(), meta, length, bad_meta }))
    }

    /// Pages the file holds whole.
    pub(super) fn whole_pages(&self) -> u64 {
        self.length / self.meta.page_size
    }

    /// `count` pages from page `number`, which must lie in the file and not past the meta's last page.
    fn read(&self, number: u64, count: u64) -> Result<Vec<u8>, PageProblem> {
        let problem = |what: String| PageProblem { page: number, what };
        let end = number.checked_add(count).filter(|&end| end <= self.whole_pages().min(self.meta.last_page + 1));
        if end.is_none() || count == 0 {
            return Err(problem(format!(
                "lies past the end of the file ({} pages) or of the store ({} pages)",
                self.whole_pages(),
                self.meta.last_page + 1
            )));
        }
        let mut buffer = vec![0; (count * self.meta.page_size) as usize];
        self.file
            .read_exact_at(&mut buffer, number * self.meta.page_size)
            .map_err(|e| problem(format!("cannot be read from {}: {e}", self.path.display())))?;
        Ok(buffer)
    }

    /// Every leaf entry of the tree of `database`, in key order: a damaged page's entries are left out, with its
    /// problem in their place, and a damaged node's entry is its problem.
    pub(super) fn entries(&self, database: &DatabaseRecord) -> Entries<'_> {
        let root = database.root;
        Entries {
            pages: self,
            tree: database.tree,
            stack: if root == NO_PAGE {
                Vec::new()
            } else {
                vec![Pending { page: root, level: 0, low: None, high: None }]
            },
            ready: Vec::new(),
            visited: HashSet::new(),
            counts: Counts::default(),
        }
    }

    /// The main database (the list of named databases), as the meta says.
    pub(super) fn main(&self) -> DatabaseRecord {
        DatabaseRecord {
            name: String::new(),
            root: self.meta.main_root,
            flags: self.meta.main_flags,
            depth: self.meta.main_depth,
            entries: None,
            pages: None,
            tree: Tree::Main,
        }
    }

    /// The free-page database, as the meta says.
    fn free(&self) -> DatabaseRecord {
        DatabaseRecord {
            name: String::new(),
            root: self.meta.free_root,
            flags: MDB_INTEGERKEY,
            depth: 0,
            entries: None,
            pages: None,
            tree: Tree::Free,
        }
    }

    /// Reads one page of `tree` (its number `number`, `level` pages below the root, its keys in `low..high` as its
    /// parent says): its children (a branch) or its entries (a leaf), every node held against the page, the file and
    /// the database's flags.
    fn tree_page(&self, tree: Tree, at: &Pending) -> Result<TreePage, PageProblem> {
        let number = at.page;
        let problem = |what: &str| PageProblem { page: number, what: what.to_owned() };
        if number < 2 {
            return Err(problem("is a meta page, not a page of a database: a page number is damaged"));
        }
        if at.level >= CURSOR_STACK {
            return Err(problem("lies deeper than LMDB's cursors reach: a page number is damaged"));
        }
        let page = self.read(number, 1)?;
        let size = page.len();
        let bad = || problem("its header is damaged");
        if u64_at(&page, 0) != Some(number) {
            return Err(problem("holds another page number: it is not the page its parent points to"));
        }
        let flags = u16_at(&page, 10).ok_or_else(bad)?;
        let lower = usize::from(u16_at(&page, 12).ok_or_else(bad)?);
        let upper = usize::from(u16_at(&page, 14).ok_or_else(bad)?);
        if lower < HEADER || lower > upper || upper > size || !(lower - HEADER).is_multiple_of(2) {
            return Err(bad());
        }
        if flags & P_LEAF2 != 0 {
            return Err(problem("says it holds fixed-size duplicates, which no database of the store has"));
        }
        let kind = flags & (P_BRANCH | P_LEAF);
        if kind != P_BRANCH && kind != P_LEAF {
            return Err(problem("is neither a branch nor a leaf page"));
        }
        let count = (lower - HEADER) / 2;
        // A node's place, its three u16 fields and its key, all inside the page.
        let node_at = |i: usize| -> Result<(usize, u16, u16, u16, &[u8]), PageProblem> {
            let at = usize::from(u16_at(&page, HEADER + 2 * i).ok_or_else(bad)?);
            if at < upper || at + NODE > size {
                return Err(problem("a node lies outside the page"));
            }
            let (lo, hi) = (u16_at(&page, at).ok_or_else(bad)?, u16_at(&page, at + 2).ok_or_else(bad)?);
            let node_flags = u16_at(&page, at + 4).ok_or_else(bad)?;
            let key_size = usize::from(u16_at(&page, at + 6).ok_or_else(bad)?);
            if key_size > MAX_KEY {
                return Err(problem("a key is longer than LMDB's keys can be"));
            }
            let key = page
                .get(at + NODE..at + NODE + key_size)
                .ok_or_else(|| problem("a key runs past the end of its page"))?;
            Ok((at, lo, hi, node_flags, key))
        };
        // Keys in order and inside the range the parent gives: a lookup finds every entry where the walk finds it.
        let ordered = tree != Tree::Free;
        let in_range = |key: &[u8]| {
            !ordered
                || (at.low.as_deref().is_none_or(|low| key >= low) && at.high.as_deref().is_none_or(|high| key < high))
        };
        if kind == P_BRANCH {
            if count == 0 {
                return Err(problem("is a branch page without children"));
            }
            let mut children = Vec::with_capacity(count);
            let mut keys: Vec<Option<Vec<u8>>> = Vec::with_capacity(count + 1);
            for i in 0..count {
                let (_, lo, hi, node_flags, key) = node_at(i)?;
                let child = u64::from(lo) | (u64::from(hi) << 16) | (u64::from(node_flags) << 32);
                // The first child's key is the parent's lower bound (LMDB stores it empty).
                let key = if i == 0 { at.low.clone() } else { Some(key.to_vec()) };
                if ordered && i > 0 {
                    let key = key.as_deref().unwrap_or_default();
                    let previous = keys.last().cloned().flatten();
                    if !in_range(key) || previous.as_deref().is_some_and(|previous| previous >= key) {
                        return Err(problem("its keys are out of order: a lookup would go astray"));
                    }
                }
                keys.push(key);
                children.push(child);
            }
            keys.push(at.high.clone());
            let pending = children
                .into_iter()
                .enumerate()
                .map(|(i, page)| Pending { page, level: at.level + 1, low: keys[i].clone(), high: keys[i + 1].clone() })
                .collect();
            return Ok(TreePage::Branch(pending));
        }
        let mut entries = Vec::with_capacity(count);
        let mut previous: Option<Vec<u8>> = None;
        for i in 0..count {
            let (at_node, lo, hi, node_flags, key) = node_at(i)?;
            let entry = (|| {
                let node_problem =
                    |what: &str| PageProblem { page: number, what: format!("the node of key {} {what}", hex(key)) };
                if node_flags & !(F_BIGDATA | F_SUBDATA | F_DUPDATA) != 0 {
                    return Err(node_problem(&format!("has flags {node_flags:#06x}, which LMDB never writes")));
                }
                if node_flags & F_DUPDATA != 0 {
                    // LMDB would take its data for duplicates of a database made without them (no MDB_DUPSORT),
                    // and follow a cursor that is not there.
                    return Err(node_problem(
                        "says it holds duplicates (F_DUPDATA), but its database has none (no MDB_DUPSORT)",
                    ));
                }
                if node_flags & F_SUBDATA != 0 && tree != Tree::Main {
                    return Err(node_problem(
                        "says it holds a named database (F_SUBDATA), which only the main database does",
                    ));
                }
                if !in_range(key) || (ordered && previous.as_deref().is_some_and(|previous| previous >= key)) {
                    return Err(node_problem("lies out of key order: a lookup of its key does not find it"));
                }
                let data = at_node + NODE + key.len();
                let len = usize::from(lo) | (usize::from(hi) << 16);
                let mut overflow_pages = 0;
                let value = if node_flags & F_BIGDATA != 0 {
                    if node_flags & F_SUBDATA != 0 {
                        return Err(node_problem("says its named database's record is on overflow pages"));
                    }
                    let first =
                        u64_at(&page, data).ok_or_else(|| node_problem("has an overflow page number past its page"))?;
                    let (value, pages) =
                        self.overflow(first, len).map_err(|e| PageProblem { page: number, what: e.what })?;
                    overflow_pages = pages;
                    value
                } else {
                    page.get(data..data + len)
                        .ok_or_else(|| node_problem("has a value past the end of its page"))?
                        .to_vec()
                };
                if node_flags & F_SUBDATA != 0 && value.len() != DB_RECORD {
                    return Err(node_problem("holds a named database's record of the wrong size"));
                }
                Ok(Entry { key: key.to_vec(), value, flags: node_flags & (F_SUBDATA | F_DUPDATA), overflow_pages })
            })();
            if entry.is_ok() {
                previous = Some(key.to_vec());
            }
            entries.push(entry);
        }
        Ok(TreePage::Leaf(entries))
    }

    /// A value of `len` bytes held on overflow pages from page `first`, and how many pages hold it.
    fn overflow(&self, first: u64, len: usize) -> Result<(Vec<u8>, u64), PageProblem> {
        let problem = |what: String| PageProblem { page: first, what: format!("overflow page {first} {what}") };
        if first < 2 || len == 0 {
            return Err(problem("is no overflow page: the node's data is damaged".to_owned()));
        }
        let head = self.read(first, 1).map_err(|e| problem(e.what))?;
        let flags = u16_at(&head, 10).unwrap_or(0);
        let count = u64::from(u32_at(&head, 12).unwrap_or(0));
        if flags & P_OVERFLOW == 0 || u64_at(&head, 0) != Some(first) {
            return Err(problem("is not one".to_owned()));
        }
        if (HEADER + len) as u64 > count.saturating_mul(self.meta.page_size) {
            return Err(problem("is shorter than its value".to_owned()));
        }
        let pages = self.read(first, count).map_err(|e| problem(e.what))?;
        let value = pages.get(HEADER..HEADER + len).ok_or_else(|| problem("is shorter than its value".to_owned()))?;
        Ok((value.to_vec(), count))
    }

    /// The named databases, from the main database's leaves, with the problems met reading them.
    pub(super) fn databases(&self) -> (Vec<DatabaseRecord>, Vec<PageProblem>) {
        let (mut named, mut problems) = (Vec::new(), Vec::new());
        for entry in self.entries(&self.main()) {
            match entry {
                Ok(entry) if entry.flags & F_SUBDATA != 0 => {
                    let record = |at| u16_at(&entry.value, at);
                    match (record(DB_FLAGS), record(DB_DEPTH), u64_at(&entry.value, DB_ROOT)) {
                        (Some(flags), Some(depth), Some(root)) => named.push(DatabaseRecord {
                            name: String::from_utf8_lossy(&entry.key).into_owned(),
                            root,
                            flags,
                            depth,
                            entries: u64_at(&entry.value, DB_ENTRIES),
                            pages: (|| {
                                let count = |i: usize| u64_at(&entry.value, DB_PAGES + 8 * i);
                                Some([count(0)?, count(1)?, count(2)?])
                            })(),
                            tree: Tree::Named,
                        }),
                        _ => problems.push(PageProblem {
                            page: self.meta.main_root,
                            what: "a named database's record is too short".to_owned(),
                        }),
                    }
                }
                Ok(_) => {}
                Err(problem) => problems.push(problem),
            }
        }
        (named, problems)
    }

    /// What is wrong with the root page of `database` as its record gives it, read alone (a handful of reads, made
    /// at every open): a root past the store, a free page (a stale tree of an older transaction: a page number
    /// damaged into another that still reads), a page of another kind than the tree's depth says, a damaged header
    /// or node, a leaf root whose count of entries is not the record's. `free` is the free pages' list.
    pub(super) fn root_problem(&self, database: &DatabaseRecord, free: &HashSet<u64>) -> Option<String> {
        let root = database.root;
        if root == NO_PAGE {
            return (database.depth != 0 || database.entries.is_some_and(|entries| entries != 0))
                .then(|| "its record says it is empty, and has entries or levels".to_owned());
        }
        if free.contains(&root) {
            return Some(format!("its root page {root} is a free page: its record's page number is damaged"));
        }
        let depth = usize::from(database.depth);
        if depth == 0 || depth > CURSOR_STACK {
            return Some(format!("its record says its tree has {depth} levels"));
        }
        match self.tree_page(database.tree, &Pending { page: root, level: 0, low: None, high: None }) {
            Err(problem) => Some(format!("its root page {root} {}", problem.what)),
            Ok(TreePage::Branch(_)) if depth == 1 => {
                Some(format!("its root page {root} is a branch, but its record says its tree has one level"))
            }
            Ok(TreePage::Leaf(_)) if depth > 1 => {
                Some(format!("its root page {root} is a leaf, but its record says its tree has {depth} levels"))
            }
            Ok(TreePage::Leaf(entries)) => {
                let count = entries.len() as u64;
                if let Some(Err(problem)) = entries.into_iter().find(Result::is_err) {
                    Some(format!("its root page {root}: {}", problem.what))
                } else {
                    database
                        .entries
                        .filter(|&entries| entries != count)
                        .map(|entries| format!("its root page {root} holds {count} entries, its record says {entries}"))
                }
            }
            Ok(TreePage::Branch(children)) => {
                if let Some(child) = children
                    .iter()
                    .find(|child| child.page < 2 || child.page > self.meta.last_page || free.contains(&child.page))
                {
                    return Some(format!(
                        "its root page {root} points to page {}, which is none of its pages",
                        child.page
                    ));
                }
                let distinct: HashSet<u64> = children.iter().map(|child| child.page).collect();
                if distinct.len() != children.len() {
                    return Some(format!("its root page {root} points to one page twice"));
                }
                // Each child is a page of the kind its level holds (leaves under a two-level root, branches above):
                // a child page number damaged into another page of the file (a page of another database, a branch
                // where a leaf belongs) makes LMDB's cursors fail their own assertions and abort the process. One
                // read a child: the root's children are a few hundred at most.
                for child in &children {
                    let wrong = match self.tree_page(database.tree, child) {
                        Err(problem) => Some(problem.what),
                        Ok(TreePage::Branch(_)) if depth == 2 => Some("a branch where a leaf belongs".to_owned()),
                        Ok(TreePage::Leaf(_)) if depth > 2 => Some("a leaf where a branch belongs".to_owned()),
                        Ok(_) => None,
                    };
                    if let Some(what) = wrong {
                        return Some(format!(
                            "its root page {root} points to page {}, which is damaged: {what}",
                            child.page
                        ));
                    }
                }
                // Two levels: the root's children are the leaves, as many as the record counts.
                match database.pages {
                    Some([branch, leaf, _]) if depth == 2 && (branch != 1 || leaf != children.len() as u64) => {
                        Some(format!(
                            "its root page {root} has {} children, its record counts {branch} branch and {leaf} leaf \
                             pages",
                            children.len()
                        ))
                    }
                    _ => None,
                }
            }
        }
    }

    /// Every page the free-page database lists (its entries are lists of page numbers: their length, then the
    /// pages), or the first problem met reading them.
    pub(super) fn free_pages(&self) -> Result<HashSet<u64>, PageProblem> {
        let mut free = HashSet::new();
        for entry in self.entries(&self.free()) {
            let entry = entry?;
            let count = u64_at(&entry.value, 0).unwrap_or(0) as usize;
            for i in 0..count {
                let page = u64_at(&entry.value, 8 + 8 * i).ok_or_else(|| PageProblem {
                    page: self.meta.free_root,
                    what: "a free list is cut short".to_owned(),
                })?;
                free.insert(page);
            }
        }
        Ok(free)
    }
}

/// Which kind of tree a database is: what its nodes may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tree {
    /// The main database: its leaves name the named databases.
    Main,
    /// The free-page database: integer keys (in the machine's order, not compared here).
    Free,
    /// A named database of the store: plain keys and values, no duplicates.
    Named,
}

/// A database as its record says: its name (empty for the main and free databases), root page and flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DatabaseRecord {
    pub name: String,
    pub root: u64,
    /// Its persistent flags (`MDB_DUPSORT`, `MDB_INTEGERKEY`, ...): none for every database deeptree makes.
    pub flags: u16,
    /// The levels of its tree (0 when empty) and its count of entries (where its record gives one).
    pub depth: u16,
    pub entries: Option<u64>,
    /// Its counts of branch, leaf and overflow pages, where its record gives them.
    pub pages: Option<[u64; 3]>,
    pub tree: Tree,
}

impl DatabaseRecord {
    /// What is wrong with the record of a database that deeptree made (it makes every one without flags).
    pub(super) fn flags_problem(&self) -> Option<String> {
        (self.flags != 0).then(|| {
            format!(
                "its record's flags are {:#06x}{}, but deeptree makes its databases without flags: the record is damaged",
                self.flags,
                if self.flags & MDB_DUPSORT != 0 { " (MDB_DUPSORT)" } else { "" }
            )
        })
    }
}

/// A page still to read, with what its parent says of it: its level below the root and the range of its keys.
struct Pending {
    page: u64,
    level: usize,
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
}

enum TreePage {
    Branch(Vec<Pending>),
    Leaf(Vec<Result<Entry, PageProblem>>),
}

/// The leaf entries of one tree, depth first in key order.
pub(super) struct Entries<'p> {
    pages: &'p Pages,
    tree: Tree,
    /// Pages still to read, the next on top.
    stack: Vec<Pending>,
    /// Entries (or the problems of their nodes) of the last leaf read, the next on top.
    ready: Vec<Result<Entry, PageProblem>>,
    visited: HashSet<u64>,
    /// What the walk met so far: branch, leaf and overflow pages, entries, levels.
    pub counts: Counts,
}

/// What a walk of a tree met: as its database's record counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub branch_pages: u64,
    pub leaf_pages: u64,
    pub overflow_pages: u64,
    pub entries: u64,
    pub depth: u16,
}

impl Counts {
    /// Where the record of `database` counts otherwise than the walk of its every page found (a damaged count, which
    /// `stats` reports): what differs.
    pub(super) fn problem(&self, database: &DatabaseRecord) -> Option<String> {
        let [branch, leaf, overflow] = database.pages?;
        let recorded = (branch, leaf, overflow, database.entries?, database.depth);
        let walked = (self.branch_pages, self.leaf_pages, self.overflow_pages, self.entries, self.depth);
        (recorded != walked).then(|| {
            format!(
                "its record counts {branch} branch, {leaf} leaf and {overflow} overflow pages, {} entries and {} \
                 levels; its pages hold {}, {}, {}, {} and {}",
                recorded.3, recorded.4, walked.0, walked.1, walked.2, walked.3, walked.4
            )
        })
    }
}

impl Iterator for Entries<'_> {
    type Item = Result<Entry, PageProblem>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entry) = self.ready.pop() {
                if let Ok(entry) = &entry {
                    self.counts.entries += 1;
                    self.counts.overflow_pages += entry.overflow_pages;
                }
                return Some(entry);
            }
            let pending = self.stack.pop()?;
            if !self.visited.insert(pending.page) {
                return Some(Err(PageProblem {
                    page: pending.page,
                    what: "is reached twice: a page number is damaged".to_owned(),
                }));
            }
            let level = u16::try_from(pending.level + 1).unwrap_or(u16::MAX);
            match self.pages.tree_page(self.tree, &pending) {
                Ok(TreePage::Branch(children)) => {
                    self.counts.branch_pages += 1;
                    self.stack.extend(children.into_iter().rev())
                }
                Ok(TreePage::Leaf(entries)) => {
                    self.counts.leaf_pages += 1;
                    self.counts.depth = self.counts.depth.max(level);
                    self.ready.extend(entries.into_iter().rev())
                }
                Err(problem) => return Some(Err(problem)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use heed::types::Bytes;

    use super::*;

    /// The entries read page by page are exactly LMDB's own, for every named database, large values included.
    #[test]
    fn entries_read_page_by_page_are_lmdbs() {
        let dir = tempfile::tempdir().unwrap();
        let env = unsafe { heed::EnvOpenOptions::new().map_size(1 << 26).max_dbs(3).open(dir.path()).unwrap() };
        let mut wtxn = env.write_txn().unwrap();
        let small: heed::Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("small")).unwrap();
        let large: heed::Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("large")).unwrap();
        let _empty: heed::Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("empty")).unwrap();
        let mut rng = fastrand::Rng::with_seed(5);
        for i in 0u32..30_000 {
            let len = rng.usize(0..60);
            small.put(&mut wtxn, &rng.u64(..).to_be_bytes(), &vec![i as u8; len]).unwrap();
        }
        for i in 0u32..200 {
            let len = rng.usize(100..9_000);
            large.put(&mut wtxn, &i.to_be_bytes(), &vec![(i % 251) as u8; len]).unwrap();
        }
        wtxn.commit().unwrap();
        // Pages freed and the free list filled: half of it rewritten.
        let mut wtxn = env.write_txn().unwrap();
        for i in (0u32..200).step_by(2) {
            large.put(&mut wtxn, &i.to_be_bytes(), &[1, 2, 3]).unwrap();
        }
        wtxn.commit().unwrap();
        let rtxn = env.read_txn().unwrap();
        let pages = Pages::open(&dir.path().join("data.mdb")).unwrap().unwrap();
        let (named, problems) = pages.databases();
        assert!(problems.is_empty(), "{problems:?}");
        let mut names: Vec<&str> = named.iter().map(|database| database.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["empty", "large", "small"]);
        for named in &named {
            assert_eq!((named.flags, named.flags_problem()), (0, None));
            let name = &named.name;
            let database: heed::Database<Bytes, Bytes> = env.open_database(&rtxn, Some(name)).unwrap().unwrap();
            let lmdb: Vec<(Vec<u8>, Vec<u8>)> = database
                .iter(&rtxn)
                .unwrap()
                .map(|item| item.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                .collect();
            let read: Vec<(Vec<u8>, Vec<u8>)> =
                pages.entries(named).map(|entry| entry.map(|e| (e.key, e.value)).unwrap()).collect();
            assert!(lmdb == read, "{name}: {} entries by LMDB, {} read page by page", lmdb.len(), read.len());
        }
        assert!(!pages.free_pages().unwrap().is_empty());
    }

    /// A page number damaged past the end of the file is a problem reported for its page; the rest is read.
    #[test]
    fn a_page_number_past_the_end_is_a_problem_not_a_read() {
        let dir = tempfile::tempdir().unwrap();
        let env = unsafe { heed::EnvOpenOptions::new().map_size(1 << 26).max_dbs(1).open(dir.path()).unwrap() };
        let mut wtxn = env.write_txn().unwrap();
        let db: heed::Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("d")).unwrap();
        for i in 0u32..20_000 {
            db.put(&mut wtxn, &i.to_be_bytes(), &[7; 30]).unwrap();
        }
        wtxn.commit().unwrap();
        drop(env);
        let path = dir.path().join("data.mdb");
        let pages = Pages::open(&path).unwrap().unwrap();
        let database = pages.databases().0.remove(0);
        let root = database.root;
        let at = Pending { page: root, level: 0, low: None, high: None };
        let Ok(TreePage::Branch(children)) = pages.tree_page(Tree::Named, &at) else { panic!("the root is a branch") };
        let all = pages.entries(&database).count();
        // The root's first child pointer (a branch node's first three u16) set far past the end.
        let mut bytes = std::fs::read(&path).unwrap();
        let page = (root * pages.meta.page_size) as usize;
        let node = page + usize::from(u16_at(&bytes[page..], HEADER).unwrap());
        bytes[node + 4..node + 6].copy_from_slice(&0x00ffu16.to_ne_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let pages = Pages::open(&path).unwrap().unwrap();
        let read: Vec<_> = pages.entries(&database).collect();
        let problems: Vec<_> = read.iter().filter_map(|entry| entry.as_ref().err()).collect();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].what.contains("past the end"), "{problems:?}");
        assert!(read.len() > all / 2 && read.len() < all + 1, "{} of {all}", read.len());
        assert!(children.len() > 1);
    }

    /// A leaf node that says it holds duplicates (`F_DUPDATA`) in a database made without them is a problem of that
    /// entry alone, found by the walk (LMDB would follow a cursor that is not there): the page's other entries read.
    #[test]
    fn a_node_flagged_as_duplicates_is_a_problem_of_its_entry() {
        let dir = tempfile::tempdir().unwrap();
        let env = unsafe { heed::EnvOpenOptions::new().map_size(1 << 24).max_dbs(1).open(dir.path()).unwrap() };
        let mut wtxn = env.write_txn().unwrap();
        let db: heed::Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("d")).unwrap();
        for i in 0u32..20 {
            db.put(&mut wtxn, &i.to_be_bytes(), &[9; 12]).unwrap();
        }
        wtxn.commit().unwrap();
        drop(env);
        let path = dir.path().join("data.mdb");
        let pages = Pages::open(&path).unwrap().unwrap();
        let database = pages.databases().0.remove(0);
        let mut bytes = std::fs::read(&path).unwrap();
        let page = (database.root * pages.meta.page_size) as usize;
        // The fourth node's flags.
        let node = page + usize::from(u16_at(&bytes[page..], HEADER + 6).unwrap());
        assert_eq!(&bytes[node + NODE..node + NODE + 4], &3u32.to_be_bytes());
        bytes[node + 4] |= 0x04;
        std::fs::write(&path, &bytes).unwrap();
        let pages = Pages::open(&path).unwrap().unwrap();
        let read: Vec<_> = pages.entries(&database).collect();
        assert_eq!(read.len(), 20);
        let problems: Vec<_> = read.iter().filter_map(|entry| entry.as_ref().err()).collect();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].what.contains("F_DUPDATA") && problems[0].what.contains("00000003"), "{problems:?}");
    }
}
