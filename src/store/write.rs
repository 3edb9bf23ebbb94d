//! The writer's side of the store: the handle that submits changes, every write transaction (the map grown or
//! adopted and the transaction tried again), meta entries written sealed, and the stop of all writes after the disk
//! failed.

use std::path::Path;

use heed::{MdbError, RwTxn};

use super::{
    Change, META_ENGINES, Shared, Store, StoreError, StoreWriter,
    checksum::{self, Table},
    disk,
    open::page_size,
};

impl Store {
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

    /// A handle to submit changes from any thread.
    pub fn writer(&self) -> StoreWriter {
        self.writer.handle()
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

impl Shared {
    /// Writes meta entry `name`, sealed.
    pub(super) fn put_meta(&self, txn: &mut heed::RwTxn<'_>, name: &str, body: &[u8]) -> Result<(), StoreError> {
        let value = checksum::sealed(Table::Meta, name.as_bytes(), body);
        self.meta.put(txn, name, &value).map_err(|e| self.lmdb_error(e))
    }

    /// Adds the names not yet in the list of engines, numbered after the last, each as
    /// [`canonical_label`](crate::engine::canonical_label) makes it.
    pub(super) fn add_engines(&self, txn: &mut heed::RwTxn<'_>, names: &[String]) -> Result<(), StoreError> {
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

    /// Another process grew the map: adopt its size.
    pub(super) fn adopt_map_size(&self) -> Result<(), StoreError> {
        let _exclusive = self.resize.write();
        // SAFETY: the exclusive lock guarantees that this process has no open transaction.
        let resized = unsafe { self.env.resize(0) }.map_err(|e| self.lmdb_error(e));
        self.map_moved();
        resized
    }

    /// The map may have moved: the fault handler watches where it is now.
    pub(super) fn map_moved(&self) {
        self.fault.moved();
    }

    /// The map is full: grow it.
    pub(super) fn grow_map(&self) -> Result<(), StoreError> {
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
    pub(super) fn write<R>(
        &self,
        mut f: impl FnMut(&Self, &mut RwTxn) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
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
    pub(super) fn stop_writes(&self, cause: StoreError) -> StoreError {
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
