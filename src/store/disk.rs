//! What the store asks of the disk beside LMDB: its lock file allocated before LMDB maps it, and the free space a
//! failed write reports.
//!
//! LMDB reads and writes its lock file (`lock.mdb`, the table of readers) through a shared memory map. It makes the
//! file with `ftruncate`, which allocates nothing: the first write into the map then needs a page of the disk, and
//! where there is none (a full disk, a full tmpfs) the kernel sends SIGBUS and the process dies without a word.
//! [`prepare_lock_file`] allocates the file's pages with `fallocate` before LMDB opens it, so that a full disk is an
//! error LMDB's caller sees (`No space left on device`), never a signal. The data file needs nothing of the kind:
//! deeptree opens LMDB without `MDB_WRITEMAP`, so LMDB writes it with `pwrite` (a full disk is an error there) and
//! only reads it through the map, and the map's growth is address space, not disk.

use std::{
    fs::File,
    io,
    path::{Path, PathBuf},
};

/// LMDB's lock file name.
pub(crate) const LMDB_LOCK_FILE: &str = "lock.mdb";

/// Bytes of the lock file LMDB makes for 254 readers on a 64-bit system: 253 reader slots of 64 bytes (one cache
/// line each) and the 192-byte header. A larger file is taken as it is (LMDB then allows more readers).
pub(crate) const LOCK_FILE_BYTES: u64 = 16 * 1024;

/// Makes `dir`'s LMDB lock file (when absent) and allocates all of its pages (at least [`LOCK_FILE_BYTES`]), leaving
/// what it holds as it is: another process may be using it. The error says which file and why (no space, a
/// read-only file system, no permission).
pub(crate) fn prepare_lock_file(dir: &Path) -> Result<(), (PathBuf, io::Error)> {
    let path = dir.join(LMDB_LOCK_FILE);
    let fail = |e| (path.clone(), e);
    let file = File::options().read(true).write(true).create(true).truncate(false).open(&path).map_err(fail)?;
    let length = file.metadata().map_err(fail)?.len().max(LOCK_FILE_BYTES);
    allocate(&file, length).map_err(fail)
}

/// Allocates the first `length` bytes of `file` (extending it with zeros where it is shorter), without changing a
/// byte it holds.
#[cfg(target_os = "linux")]
fn allocate(file: &File, length: u64) -> io::Result<()> {
    use nix::{errno::Errno, fcntl::FallocateFlags};
    let length = i64::try_from(length).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    match nix::fcntl::fallocate(file, FallocateFlags::empty(), 0, length) {
        Ok(()) => Ok(()),
        // A file system without fallocate: the file keeps its length, and LMDB extends it as it always did.
        Err(Errno::EOPNOTSUPP) => {
            log::debug!("fallocate is not supported here; the lock file is left to LMDB");
            Ok(())
        }
        Err(errno) => Err(io::Error::from(errno)),
    }
}

#[cfg(not(target_os = "linux"))]
fn allocate(_file: &File, _length: u64) -> io::Result<()> {
    Ok(())
}

/// Whether an error opening or allocating a file says that nothing can be written there (a read-only file system,
/// no permission, no space): a command that only reads then reads without the lock file.
pub(crate) fn cannot_write_here(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ReadOnlyFilesystem
            | io::ErrorKind::PermissionDenied
            | io::ErrorKind::StorageFull
            | io::ErrorKind::QuotaExceeded
    )
}

/// Bytes free for an unprivileged user on the file system of `path`, where the system says.
// The counts are u64 here; other systems give them other widths.
#[allow(clippy::useless_conversion)]
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    let stats = nix::sys::statvfs::statvfs(path).ok()?;
    u64::from(stats.blocks_available()).checked_mul(u64::from(stats.fragment_size()))
}
