//! A fault in LMDB's map ends the process with one line, never a bare "Segmentation fault".
//!
//! LMDB reads its pages through a memory map and checks none of them: a page number, a node's flags or a size
//! damaged on disk can make a read fault. Reads past the end of the file fault with SIGBUS inside the map; a value's
//! length damaged (a u32 of its node) runs a read past the map, a SIGSEGV where nothing is mapped; a node that says it
//! holds duplicates (`F_DUPDATA`) in a database made without them makes LMDB follow a cursor that is not there, a
//! SIGSEGV at an address near zero. `deeptree check` reads the file with plain reads and never faults (see
//! `pages`); every other command reads through the map, and this handler turns such a fault into the line
//!
//! ```text
//! deeptree: error: STORE/data.mdb: the store is damaged (a read of its LMDB pages faulted); run `deeptree check` to list the damage
//! ```
//!
//! on stderr and exit status 3, as `check` exits on damage. The handler is async-signal-safe: the line is formatted
//! when the store opens, and the handler only compares the fault's address with the maps of the open stores, calls
//! `write(2)` and `_exit(2)`. A fault elsewhere (a stack overflow, whose guard page lies outside every map) goes to the
//! handler that was there before (the Rust runtime's), unchanged. A SIGSEGV near address zero is taken for the
//! store's only while a store is open: safe Rust never reads there, LMDB does on a damaged node.

use super::StoreError;
use std::{
    path::Path,
    ptr,
    sync::{
        Once, OnceLock,
        atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering},
    },
};

/// The exit status of a process that met a damaged store (as `deeptree check`'s on damage).
pub const DAMAGE_EXIT_STATUS: i32 = 3;

/// Stores open at once in one process (a merge opens two); a store past these is read without the line.
const SLOTS: usize = 8;
/// Faults below this address are dereferences of a null pointer (LMDB's, on a damaged node); the kernel reports a
/// non-canonical address (a wild pointer) as 0 too.
const NEAR_NULL: usize = 1 << 16;
/// The kinds (`si_code`) of SIGSEGV: an address where nothing is mapped, one mapped without access (a guard page);
/// of SIGBUS: an address past the end of a mapped file (Linux's `<asm-generic/siginfo.h>`).
const SEGV_MAPERR: libc::c_int = 1;
#[cfg(test)]
const SEGV_ACCERR: libc::c_int = 2;
#[cfg(test)]
const BUS_ADRERR: libc::c_int = 2;
/// How far past a map a read of a damaged value can reach: a value's length is a u32.
const PAST_THE_MAP: usize = 1 << 32;

/// One open store: its map (start, end: none where it was not found) and its line.
struct Slot {
    taken: AtomicBool,
    start: AtomicUsize,
    end: AtomicUsize,
    line: AtomicPtr<u8>,
    len: AtomicUsize,
    /// The `info string` said on standard output where the process speaks UCI.
    info: AtomicPtr<u8>,
    info_len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    taken: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    line: AtomicPtr::new(ptr::null_mut()),
    len: AtomicUsize::new(0),
    info: AtomicPtr::new(ptr::null_mut()),
    info_len: AtomicUsize::new(0),
};
static SLOTS_IN_USE: [Slot; SLOTS] = [FREE; SLOTS];
/// The slot registered last: the store a fault near zero is put down to.
static LATEST: AtomicUsize = AtomicUsize::new(usize::MAX);
/// What SIGSEGV and SIGBUS did before the handler was installed.
static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();
static INSTALL: Once = Once::new();

/// A process that meets a damaged store ([`StoreError::is_damage`]) where it cannot go on without showing it (a
/// page `serve` would answer with an error, a sample of its live view): its one line, and exit status 3. Anything
/// else returns.
pub fn stop_if_damaged(e: &StoreError) {
    if e.is_damage() {
        // Several threads may meet the damage at once (`serve`'s answers and its sampler): the first says it and
        // ends the process; the others wait for that end, so that the line is said once.
        if STOPPING.swap(true, Ordering::AcqRel) {
            loop {
                std::thread::park();
            }
        }
        eprintln!("deeptree: error: {e}");
        std::process::exit(DAMAGE_EXIT_STATUS);
    }
}

/// Set by the first thread that ends the process for a damaged store (by [`stop_if_damaged`] or a fault).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Whether `value` starts inside an open store's map and runs past its end: a value whose length LMDB read from a
/// damaged node. Reading it would fault past the map, where another mapping of the process (a thread's stack, an
/// allocator's reserve) may lie and the fault would not be the store's; it is refused before any byte of it is read.
/// A value outside every known map (a page a write transaction copied to the heap) is not judged.
pub fn runs_past_map(value: &[u8]) -> bool {
    let start = value.as_ptr() as usize;
    let Some(end) = start.checked_add(value.len()) else { return true };
    SLOTS_IN_USE.iter().any(|slot| {
        let (map_start, map_end) = (slot.start.load(Ordering::Acquire), slot.end.load(Ordering::Acquire));
        slot.taken.load(Ordering::Acquire)
            && map_start < map_end
            && (map_start..map_end).contains(&start)
            && end > map_end
    })
}

/// This process speaks UCI on its standard output: a fault also says so there, in an `info string` a GUI shows,
/// before the process ends (its GUI then sees the engine gone, as after any crash, but knows why).
pub fn speaks_uci() {
    SPEAKS_UCI.store(true, Ordering::Release);
}

static SPEAKS_UCI: AtomicBool = AtomicBool::new(false);

/// The line a fault in the map of the store whose data file is `data` writes.
pub fn line(data: &Path) -> String {
    format!(
        "deeptree: error: {}: the store is damaged (a read of its LMDB pages faulted); run `deeptree check` to list \
         the damage\n",
        data.display()
    )
}

/// An open store's map, watched while this lives.
pub(super) struct Watch {
    slot: Option<usize>,
    data: std::path::PathBuf,
}

impl Watch {
    /// Watches the map of the store whose data file is `data`, just opened by LMDB.
    pub(super) fn new(data: &Path) -> Watch {
        install();
        let text = line(data);
        let info = format!("info string {}", text.trim_start_matches("deeptree: "));
        let line: &'static [u8] = Box::leak(text.into_bytes().into_boxed_slice());
        let info: &'static [u8] = Box::leak(info.into_bytes().into_boxed_slice());
        for (i, slot) in SLOTS_IN_USE.iter().enumerate() {
            if slot.taken.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                slot.line.store(line.as_ptr().cast_mut(), Ordering::Release);
                slot.len.store(line.len(), Ordering::Release);
                slot.info.store(info.as_ptr().cast_mut(), Ordering::Release);
                slot.info_len.store(info.len(), Ordering::Release);
                let watch = Watch { slot: Some(i), data: data.to_owned() };
                watch.moved();
                LATEST.store(i, Ordering::Release);
                return watch;
            }
        }
        log::debug!("{}: more stores open than watched for faults", data.display());
        Watch { slot: None, data: data.to_owned() }
    }

    /// The map was made anew (LMDB maps the file again when the map grows): where it is now, as the system's list of
    /// this process's maps says (LMDB's own `me_mapaddr` is the fixed-map address, not the map).
    pub(super) fn moved(&self) {
        let Some(i) = self.slot else { return };
        let (start, end) = mapped(&self.data).unwrap_or((0, 0));
        let slot = &SLOTS_IN_USE[i];
        slot.start.store(0, Ordering::Release);
        slot.end.store(end, Ordering::Release);
        slot.start.store(start, Ordering::Release);
    }
}

/// Where `file` is mapped from its start in this process (`/proc/self/maps`), if it is.
fn mapped(file: &Path) -> Option<(usize, usize)> {
    let file = std::fs::canonicalize(file).ok()?;
    let file = file.to_str()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|line| {
        // "start-end perms offset dev inode path"
        let mut fields = line.split_whitespace();
        let range = fields.next()?;
        let offset = fields.nth(1)?;
        let path = fields.nth(2)?;
        if path != file || usize::from_str_radix(offset, 16).ok()? != 0 {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        Some((usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?))
    })
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let slot = &SLOTS_IN_USE[i];
            slot.start.store(0, Ordering::Release);
            slot.end.store(0, Ordering::Release);
            let _ = LATEST.compare_exchange(i, usize::MAX, Ordering::AcqRel, Ordering::Acquire);
            // The line stays allocated: a handler running on another thread may still read it.
            slot.taken.store(false, Ordering::Release);
        }
    }
}

/// Installs the handler of SIGSEGV and SIGBUS, once per process, on the alternate signal stack where the thread has
/// one (the Rust runtime gives its threads one).
fn install() {
    INSTALL.call_once(|| {
        let mut previous: [libc::sigaction; 2] = unsafe { std::mem::zeroed() };
        for (signal, previous) in [libc::SIGSEGV, libc::SIGBUS].into_iter().zip(previous.iter_mut()) {
            // SAFETY: a plain sigaction call with a handler that is async-signal-safe (see `on_fault`).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fault as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(signal, &action, previous) != 0 {
                    log::debug!("the handler of signal {signal} could not be installed");
                }
            }
        }
        let _ = PREVIOUS.set(previous);
    });
}

/// The store a fault at `address` by `signal` (of kind `code`) belongs to: the one whose map holds the address, or
/// whose map ends less than 4 GiB before it where nothing is mapped there (`SEGV_MAPERR`: a value's length, a u32 read
/// from a damaged node, runs past the map; a thread's guard page is mapped, and faults as `SEGV_ACCERR`); else (a
/// fault near zero, or SIGBUS, which only a mapped file raises) the one opened last.
fn store_of(signal: libc::c_int, code: libc::c_int, address: usize) -> Option<usize> {
    let live = |i: usize| SLOTS_IN_USE[i].taken.load(Ordering::Acquire);
    let unmapped = signal == libc::SIGSEGV && code == SEGV_MAPERR;
    let within = |i: usize, past: usize| {
        let slot = &SLOTS_IN_USE[i];
        let (start, end) = (slot.start.load(Ordering::Acquire), slot.end.load(Ordering::Acquire));
        live(i) && start != 0 && address >= start && address < end.saturating_add(past)
    };
    // A map that holds the address comes first: another store's map may end less than 4 GiB before this one.
    let mapped = (0..SLOTS)
        .find(|&i| within(i, 0))
        .or_else(|| if unmapped { (0..SLOTS).find(|&i| within(i, PAST_THE_MAP)) } else { None });
    if mapped.is_some() || !(signal == libc::SIGBUS || address < NEAR_NULL) {
        return mapped;
    }
    let latest = LATEST.load(Ordering::Acquire);
    if latest < SLOTS && live(latest) {
        return Some(latest);
    }
    (0..SLOTS).find(|&i| live(i))
}

extern "C" fn on_fault(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a handler installed with SA_SIGINFO.
    let (address, code) =
        if info.is_null() { (0, 0) } else { unsafe { ((*info).si_addr() as usize, (*info).si_code) } };
    if let Some(i) = store_of(signal, code, address) {
        let slot = &SLOTS_IN_USE[i];
        let (line, len) = (slot.line.load(Ordering::Acquire), slot.len.load(Ordering::Acquire));
        let (info, info_len) = (slot.info.load(Ordering::Acquire), slot.info_len.load(Ordering::Acquire));
        // SAFETY: write(2), pause(2) and _exit(2) are async-signal-safe; the lines were leaked when the store opened.
        unsafe {
            // Another thread is already saying the line and ending the process: wait for that end.
            if STOPPING.swap(true, Ordering::AcqRel) {
                loop {
                    libc::pause();
                }
            }
            if SPEAKS_UCI.load(Ordering::Acquire) && !info.is_null() {
                libc::write(libc::STDOUT_FILENO, info.cast(), info_len);
            }
            if !line.is_null() {
                libc::write(libc::STDERR_FILENO, line.cast(), len);
            }
            libc::_exit(DAMAGE_EXIT_STATUS);
        }
    }
    // Not a store's fault: what was there before handles it.
    let index = usize::from(signal == libc::SIGBUS);
    let Some(previous) = PREVIOUS.get().map(|previous| previous[index]) else {
        // SAFETY: restores the default action; returning runs the faulting instruction again, which ends the process.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
        return;
    };
    if previous.sa_flags & libc::SA_SIGINFO != 0 && previous.sa_sigaction > libc::SIG_IGN {
        // SAFETY: the previous handler, called as the kernel would have called it.
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(previous.sa_sigaction) };
        handler(signal, info, context);
    } else if previous.sa_sigaction > libc::SIG_IGN {
        // SAFETY: as above, a handler without siginfo.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous.sa_sigaction) };
        handler(signal);
    } else {
        // SAFETY: as above: the default action (never "ignore", which would fault for ever), then the fault again.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store's map is found where the system says this process maps its data file, and a fault there, near zero
    /// or by SIGBUS is put down to it while it is watched; a fault elsewhere (a stack's guard page) is not.
    #[test]
    fn a_fault_is_put_down_to_the_store_whose_map_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let env = unsafe { heed::EnvOpenOptions::new().map_size(1 << 24).open(dir.path()).unwrap() };
        let data = dir.path().join("data.mdb");
        let watch = Watch::new(&data);
        let slot = watch.slot.expect("a free slot");
        let (start, end) = mapped(&data).expect("the data file is mapped");
        assert_eq!(end - start, 1 << 24, "the whole map");
        let (segv, unmapped, guard) = (libc::SIGSEGV, SEGV_MAPERR, SEGV_ACCERR);
        assert_eq!(store_of(segv, unmapped, start + 4096), Some(slot));
        // (Another test's store may be mapped there: the fault is some store's either way.)
        assert!(store_of(segv, unmapped, end + (1 << 31)).is_some(), "a value's length past the map");
        assert_ne!(store_of(segv, guard, end + 4096), Some(slot), "a guard page after the map");
        assert!(store_of(segv, unmapped, 0x44).is_some());
        assert!(store_of(libc::SIGBUS, BUS_ADRERR, 1 << 40).is_some());
        let stack = &watch as *const Watch as usize;
        assert_eq!(store_of(segv, guard, stack), None, "a fault on a stack is not a store's");
        drop(watch);
        assert_ne!(store_of(segv, unmapped, start + 4096), Some(slot), "no longer watched");
        drop(env);
    }
}
