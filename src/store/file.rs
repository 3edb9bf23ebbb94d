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
//! shorter, the free-page database is read with plain reads ([`pages`](super::pages), never mapped) and every
//! missing page must be listed in it.

use std::path::Path;

use super::{StoreError, pages::Pages};

/// Checks that the data file holds every page its meta says it has, but the free ones: [`StoreError::Truncated`]
/// otherwise. A file that is absent, empty or not an LMDB file is left to LMDB (which creates, refuses or reports
/// it without mapping anything past the end).
pub(super) fn check_length(path: &Path) -> Result<(), StoreError> {
    let Some(file) = Pages::open(path)? else { return Ok(()) };
    let meta = file.meta;
    let pages = meta.last_page.saturating_add(1);
    let whole = file.whole_pages();
    if whole >= pages {
        return Ok(());
    }
    let truncated = |page: u64| StoreError::Truncated {
        path: path.to_owned(),
        length: file.length,
        needed: pages.saturating_mul(meta.page_size),
        page,
        page_size: meta.page_size,
    };
    // Pages `whole..pages` are missing: each must be free. Pages the free list cannot hold (its own pages cut off,
    // or more missing pages than it lists) mean the file was cut short.
    let free = file.free_pages().map_err(|_| truncated(whole))?;
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

/// Checks, with plain reads, what every lookup goes through first: the main database's root (the list of named
/// databases) and each named database's record and root page (see [`Pages::root_problem`]), the free pages' list
/// read to tell a live root from a stale one. A handful of page reads, at every open: a damaged record of a
/// database (its flags, its root's page number, its depth) is [`StoreError::Structure`] before LMDB follows it.
/// The caller holds an LMDB read transaction of the store meanwhile, so that no writer of another process reuses the
/// pages read. A file that is absent, empty or not an LMDB file is left to LMDB, as in [`check_length`].
pub(super) fn check_structure(path: &Path) -> Result<(), StoreError> {
    let Some(file) = Pages::open(path)? else { return Ok(()) };
    let damaged = |what: String| StoreError::Structure { path: path.to_owned(), what };
    let free = file
        .free_pages()
        .map_err(|problem| damaged(format!("the free pages' list: page {} {}", problem.page, problem.what)))?;
    let main = file.main();
    if let Some(problem) = main.flags_problem().or_else(|| file.root_problem(&main, &free)) {
        return Err(damaged(format!("the list of databases: {problem}")));
    }
    let (named, problems) = file.databases();
    if let Some(problem) = problems.first() {
        return Err(damaged(format!("the list of databases: page {} {}", problem.page, problem.what)));
    }
    // The databases of the current schema (an older one's, such as schema 2's `parents` with duplicates, are read
    // only by the upgrade that removes them).
    for database in named.iter().filter(|database| ["nodes", "link_pages", "meta"].contains(&database.name.as_str())) {
        if let Some(problem) = database.flags_problem().or_else(|| file.root_problem(database, &free)) {
            return Err(damaged(format!("database {}: {problem}", database.name)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use super::*;

    /// A store LMDB wrote, with free pages: its meta is read and its length holds; cut in half, it is refused.
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
        let pages = Pages::open(&path).unwrap().unwrap();
        assert_eq!(pages.meta.last_page, info.last_page_number as u64);
        assert!(pages.meta.page_size.is_power_of_two() && pages.meta.page_size >= 512);
        check_length(&path).unwrap();
        let free = pages.free_pages().unwrap();
        assert!(!free.is_empty(), "the rewrite freed pages");
        assert!(free.iter().all(|&page| page > 1 && page <= pages.meta.last_page));
        // Cut short: refused, naming the file.
        let length = pages.length;
        File::options().write(true).open(&path).unwrap().set_len(length / 2).unwrap();
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
