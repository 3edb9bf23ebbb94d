//! The data file's length against what its LMDB meta pages say, checked before LMDB maps the file: LMDB reads its
//! pages through a memory map, and a page past the end of a file cut short (a full disk, an interrupted copy) kills
//! the process with SIGBUS at the first read instead of failing with an error.
//!
//! LMDB's file format (its `MDB_meta`, for 64-bit builds; the data version is 1): pages 0 and 1 are meta pages, each a
//! 16-byte page header and then the meta: magic `0xBEEFC0DE` (u32), version (u32), a fixed-map address (8 bytes),
//! the map size (8), two database records of 48 bytes (the free-page database's, whose first u32 is the page size,
//! and the main database's), the last page used (8) and the transaction id (8), all in the machine's byte order.
//! The meta of the greater transaction id is the current one.
//!
//! The file may legitimately end before the last page: pages that a transaction took and freed again are never
//! written (LMDB's own comment: "the file may be shorter if the freeDB lists the final pages"). So where the file is
//! shorter, the free-page database is read (with plain reads, never mapped) and every missing page must be listed
//! in it. Its pages are B-tree pages: a 16-byte header (page number, pad, flags, lower and upper bounds of the free
//! space, or for an overflow page its page count), then 2-byte offsets of the nodes; a node is 8 bytes (data size or
//! child page number in its first three u16 fields, then its key size) and its key and data; a leaf's data is a list
//! of page numbers (u64: its length, then the pages), or the number of the overflow page that holds it.

use std::{
    collections::BTreeSet,
    fs::File,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use super::StoreError;

const MAGIC: u32 = 0xBEEF_C0DE;
const PAGE_HEADER: usize = 16;
/// Offsets inside a meta page.
const META_MAGIC: usize = PAGE_HEADER;
const FREE_DB: usize = PAGE_HEADER + 24;
const DB_RECORD: usize = 48;
const LAST_PAGE: usize = FREE_DB + 2 * DB_RECORD;
const TXN_ID: usize = LAST_PAGE + 8;
const META_END: usize = TXN_ID + 8;

const P_BRANCH: u16 = 0x01;
const P_LEAF: u16 = 0x02;
const F_BIGDATA: u16 = 0x01;
const NODE_HEADER: usize = 8;
/// LMDB's "no page" (an empty database's root).
const NO_PAGE: u64 = u64::MAX;

/// The current meta of a data file.
#[derive(Debug, Clone, Copy)]
struct Meta {
    page_size: u64,
    last_page: u64,
    free_root: u64,
    txn_id: u64,
}

/// Checks that the data file holds every page its meta says it has, but the free ones: [`StoreError::Truncated`]
/// otherwise. A file that is absent, empty or not an LMDB file is left to LMDB (which creates, refuses or reports
/// it without mapping anything past the end).
pub(super) fn check_length(path: &Path) -> Result<(), StoreError> {
    let io = |e| StoreError::Io { path: path.to_owned(), source: Arc::new(e) };
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    let reader = Reader { file: &file, path };
    // The meta pages first, then the length: a commit of another process in between only makes the file longer.
    let Some(meta) = current_meta(&reader)? else { return Ok(()) };
    let length = file.metadata().map_err(io)?.len();
    let pages = meta.last_page.saturating_add(1);
    let whole = length / meta.page_size;
    if whole >= pages {
        return Ok(());
    }
    let truncated = |page: u64| StoreError::Truncated {
        path: path.to_owned(),
        length,
        needed: pages.saturating_mul(meta.page_size),
        page,
        page_size: meta.page_size,
    };
    // Pages `whole..pages` are missing: each must be free. Pages the free list cannot hold (its own pages cut off,
    // or more missing pages than it lists) mean the file was cut short.
    let free = free_pages(&reader, &meta, length).map_err(|_| truncated(whole))?;
    match (whole..pages).find(|page| !free.contains(page)) {
        None => {
            log::debug!(
                "{}: {} pages past the end of the file are free (never written)",
                path.display(),
                pages - whole
            );
            Ok(())
        }
        Some(page) => Err(truncated(page)),
    }
}

struct Reader<'f> {
    file: &'f File,
    path: &'f Path,
}

/// Why the free list could not be read: the file ends before one of its pages, or a page is not what it should be.
#[derive(Debug)]
struct Unreadable;

impl Reader<'_> {
    /// `len` bytes at `offset`, or `None` where the file ends before them.
    fn read(&self, offset: u64, len: usize) -> Result<Option<Vec<u8>>, StoreError> {
        let mut buffer = vec![0; len];
        match self.file.read_exact_at(&mut buffer, offset) {
            Ok(()) => Ok(Some(buffer)),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(StoreError::Io { path: PathBuf::from(self.path), source: Arc::new(e) }),
        }
    }
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
        free_root: u64_at(page, FREE_DB + 40)?,
        txn_id: u64_at(page, TXN_ID)?,
    })
}

/// The meta of the greater transaction id of the two meta pages; `None` when the file is empty or its first page is
/// not an LMDB meta page (LMDB then sets it up or refuses it).
fn current_meta(reader: &Reader<'_>) -> Result<Option<Meta>, StoreError> {
    let Some(first) = reader.read(0, META_END)?.as_deref().and_then(parse_meta) else { return Ok(None) };
    let second = reader.read(first.page_size, META_END)?.as_deref().and_then(parse_meta);
    Ok(Some(match second {
        Some(second) if second.txn_id > first.txn_id => second,
        _ => first,
    }))
}

/// Every page the free-page database lists, read from the file with plain reads.
fn free_pages(reader: &Reader<'_>, meta: &Meta, length: u64) -> Result<BTreeSet<u64>, Unreadable> {
    let mut free = BTreeSet::new();
    if meta.free_root == NO_PAGE {
        return Ok(free);
    }
    let page_at = |number: u64, pages: u64| -> Result<Vec<u8>, Unreadable> {
        let offset = number.checked_mul(meta.page_size).ok_or(Unreadable)?;
        let len = pages.checked_mul(meta.page_size).ok_or(Unreadable)?;
        if offset.saturating_add(len) > length || number > meta.last_page {
            return Err(Unreadable);
        }
        reader.read(offset, len as usize).ok().flatten().ok_or(Unreadable)
    };
    // Depth first, with a bound on the pages visited against loops in a damaged tree.
    let mut stack = vec![meta.free_root];
    let mut visited = 0u64;
    while let Some(number) = stack.pop() {
        visited += 1;
        if visited > meta.last_page {
            return Err(Unreadable);
        }
        let page = page_at(number, 1)?;
        let flags = u16_at(&page, 10).ok_or(Unreadable)?;
        let lower = usize::from(u16_at(&page, 12).ok_or(Unreadable)?);
        let count = lower.checked_sub(PAGE_HEADER).ok_or(Unreadable)? / 2;
        for i in 0..count {
            let node = usize::from(u16_at(&page, PAGE_HEADER + 2 * i).ok_or(Unreadable)?);
            let lo = u64::from(u16_at(&page, node).ok_or(Unreadable)?);
            let hi = u64::from(u16_at(&page, node + 2).ok_or(Unreadable)?);
            let node_flags = u16_at(&page, node + 4).ok_or(Unreadable)?;
            let key_size = usize::from(u16_at(&page, node + 6).ok_or(Unreadable)?);
            let data = node + NODE_HEADER + key_size;
            if flags & P_BRANCH != 0 {
                stack.push(lo | (hi << 16) | (u64::from(node_flags) << 32));
            } else if flags & P_LEAF != 0 {
                let size = (lo | (hi << 16)) as usize;
                let list = if node_flags & F_BIGDATA != 0 {
                    let overflow = u64_at(&page, data).ok_or(Unreadable)?;
                    let first = page_at(overflow, 1)?;
                    let pages = u64::from(u32_at(&first, 12).ok_or(Unreadable)?);
                    let whole = page_at(overflow, pages.max(1))?;
                    whole.get(PAGE_HEADER..PAGE_HEADER + size).ok_or(Unreadable)?.to_vec()
                } else {
                    page.get(data..data + size).ok_or(Unreadable)?.to_vec()
                };
                let listed = u64_at(&list, 0).ok_or(Unreadable)? as usize;
                for j in 0..listed {
                    free.insert(u64_at(&list, 8 + 8 * j).ok_or(Unreadable)?);
                }
            } else {
                return Err(Unreadable);
            }
        }
    }
    Ok(free)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store LMDB wrote: its meta parses, and its file holds its pages.
    #[test]
    fn the_meta_of_a_real_store_is_read_and_its_length_holds() {
        let dir = tempfile::tempdir().unwrap();
        let env = unsafe { heed::EnvOpenOptions::new().map_size(1 << 24).max_dbs(2).open(dir.path()).unwrap() };
        let mut wtxn = env.write_txn().unwrap();
        let db: heed::Database<heed::types::Bytes, heed::types::Bytes> =
            env.create_database(&mut wtxn, Some("d")).unwrap();
        for i in 0u32..20_000 {
            db.put(&mut wtxn, &i.to_be_bytes(), &[7; 40]).unwrap();
        }
        wtxn.commit().unwrap();
        // Free pages: a second transaction rewrites half of it.
        let mut wtxn = env.write_txn().unwrap();
        for i in (0u32..20_000).step_by(2) {
            db.put(&mut wtxn, &i.to_be_bytes(), &[8; 60]).unwrap();
        }
        wtxn.commit().unwrap();
        let info = env.info();
        drop(env);
        let path = dir.path().join("data.mdb");
        let file = File::open(&path).unwrap();
        let meta = current_meta(&Reader { file: &file, path: &path }).unwrap().unwrap();
        assert_eq!(meta.last_page, info.last_page_number as u64);
        assert!(meta.page_size.is_power_of_two() && meta.page_size >= 512);
        check_length(&path).unwrap();
        let free = free_pages(&Reader { file: &file, path: &path }, &meta, file.metadata().unwrap().len()).unwrap();
        assert!(!free.is_empty(), "the rewrite freed pages");
        assert!(free.iter().all(|&page| page > 1 && page <= meta.last_page));
        // Cut short: refused, naming the file.
        let length = file.metadata().unwrap().len();
        drop(file);
        let cut = File::options().write(true).open(&path).unwrap();
        cut.set_len(length / 2).unwrap();
        match check_length(&path) {
            Err(StoreError::Truncated { path: named, length: now, .. }) => {
                assert_eq!((named, now), (path.clone(), length / 2));
            }
            other => panic!("a file cut in half must be refused: {other:?}"),
        }
    }

    #[test]
    fn absent_empty_and_foreign_files_are_left_to_lmdb() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.mdb");
        check_length(&path).unwrap();
        std::fs::write(&path, b"").unwrap();
        check_length(&path).unwrap();
        std::fs::write(&path, vec![0x55; 10_000]).unwrap();
        check_length(&path).unwrap();
    }
}
