//! Claims: which process is running which inner-engine search on a store, and the answers of those searches, so that
//! processes sharing a tree (two `analyze` runs, a GUI session and an `analyze`) do not ask the same search twice
//! (docs/design.md §5.3).
//!
//! ```
//! use deeptree::score::{Bound, Score};
//! use deeptree::store::{Store, StoreOptions, answer::Answer, claims::Claim};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let (mine, theirs) = (store.claims()?, store.claims()?);
//! let search = b"position, moves and depth";
//! assert!(matches!(mine.claim(search)?, Claim::Granted));
//! // Another owner finds the search running and does not start it.
//! assert!(matches!(theirs.claim(search)?, Claim::Held { .. }));
//! let answer = Answer { best: "e2e4".parse()?, score: Score::cp(25), bound: Bound::Exact, depth: 12,
//!                              nodes: 1000, engine: Some("Stockfish".into()) };
//! mine.answer(search, &answer)?;
//! // Now it takes the answer instead.
//! assert!(matches!(theirs.claim(search)?, Claim::Answered(a) if a == answer));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! A claim names its owner (one per analysis, random), the owner's process id and an expiry. A claim is held while
//! it has not expired and, where the system shows its processes (`/proc`), its process lives; the owner renews its
//! claims while their searches run. An answered claim keeps the answer for [`ANSWER_KEPT`], for a process whose pass
//! asks for it later.
//!
//! Claims live in their own LMDB environment, the `claims` directory beside the store's data file, opened without
//! syncing to disk: they describe running processes, so a crash loses nothing that matters (a claim of a dead
//! process is not held), and a claim costs no disk flush. The tree itself is never written here. After a crash of
//! the system (not of a process) the directory may be damaged: deleting it while no deeptree runs is always safe,
//! and an analysis that cannot open it runs on without sharing its searches.
//!
//! Keys are the caller's bytes (the search module's description of a search: position key, engine depth and moves,
//! big-endian). Value format 2, all integers big-endian:
//!
//! ```text
//! u8   format version (2)
//! u8   state: 0 running, 1 answered
//! u64  owner
//! u32  process id
//! u64  expiry, milliseconds since the Unix epoch
//! answered only:
//! u16  best move (packed UCI)   i16 score   u8 bound   u8 depth   u64 nodes
//! u8   length of the engine's name (0: unknown), then the name in UTF-8
//! u32  checksum of the search's key and the bytes above (see [`checksum`])
//! ```
//!
//! Format 1 was the same without the checksum. Stability: a record of another format, or one whose checksum fails
//! or that does not decode, is treated as absent (and overwritten by the next claim), so that a damaged answer never
//! reaches the tree; claims are never migrated.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use heed::{Database, Env, EnvFlags, EnvOpenOptions, MdbError, RwTxn, WithoutTls, types::Bytes};
use shakmaty::packed::PackedUciMove;

use super::{
    StoreError,
    answer::Answer,
    checksum::{self, Table},
};
use crate::score::{Bound, Score};

/// How long a claim holds without being renewed.
pub const LEASE: Duration = Duration::from_secs(30);
/// How long an answer is kept for other processes.
pub const ANSWER_KEPT: Duration = Duration::from_secs(600);

const FORMAT: u8 = 2;
const RUNNING: u8 = 0;
const ANSWERED: u8 = 1;
/// Size of the claims map: virtual, the file grows only with what is written; expired claims are swept.
const MAP_SIZE: usize = 1 << 30;
/// Claims written between two sweeps of expired ones.
const SWEEP_EVERY: u32 = 4096;

/// What [`Claims::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The search is this owner's to run now.
    Granted,
    /// Another owner runs it: wait for its answer.
    Held { pid: u32 },
    /// Another owner answered it.
    Answered(Answer),
}

/// What [`Claims::look`] finds, without claiming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Nobody runs it (never claimed, released, expired, or its process died).
    Free,
    /// Claimed by this owner.
    Mine,
    Held {
        pid: u32,
    },
    Answered(Answer),
}

struct Record {
    answered: Option<Answer>,
    owner: u64,
    pid: u32,
    expires_ms: u64,
}

/// The claims environment of one store, opened once per process (see [`super::Store::claims`]).
pub(crate) struct ClaimsEnv {
    env: Env<WithoutTls>,
    claims: Database<Bytes, Bytes>,
    path: PathBuf,
    writes: std::sync::atomic::AtomicU32,
}

impl ClaimsEnv {
    pub(crate) fn open(store_dir: &Path) -> Result<ClaimsEnv, StoreError> {
        let path = store_dir.join("claims");
        std::fs::create_dir_all(&path).map_err(|e| StoreError::Io { path: path.clone(), source: Arc::new(e) })?;
        // Allocated before LMDB maps it: no SIGBUS on a full disk (see `disk`).
        super::disk::prepare_lock_file(&path).map_err(|(path, e)| StoreError::Io { path, source: Arc::new(e) })?;
        let lmdb = |source| StoreError::Lmdb { path: path.clone(), source: Arc::new(source) };
        // A claims file cut short would kill the process at its first read, as the tree's would.
        super::file::check_length(&path.join("data.mdb"))?;
        // SAFETY: opened once per store and process (the store holds it); NO_SYNC is sound for data that only
        // describes running processes: a crash may lose claims, never the tree.
        let env = unsafe {
            let mut options = EnvOpenOptions::new().read_txn_without_tls();
            options.map_size(MAP_SIZE).max_dbs(1).max_readers(254).flags(EnvFlags::NO_SYNC);
            options.open(&path)
        }
        .map_err(lmdb)?;
        let mut wtxn = env.write_txn().map_err(lmdb)?;
        let claims = env.create_database(&mut wtxn, Some("claims")).map_err(lmdb)?;
        wtxn.commit().map_err(lmdb)?;
        Ok(ClaimsEnv { env, claims, path, writes: Default::default() })
    }

    /// Opens the claims of a store opened read-only, to read them: nothing is created (the claims must be there),
    /// and where LMDB's lock file cannot be written they are read without it. Every write to them fails.
    pub(crate) fn open_read_only(store_dir: &Path) -> Result<ClaimsEnv, StoreError> {
        let path = store_dir.join("claims");
        let lmdb = |source| StoreError::Lmdb { path: path.clone(), source: Arc::new(source) };
        let mut flags = EnvFlags::READ_ONLY;
        if let Err((lock, e)) = super::disk::prepare_lock_file(&path) {
            if !super::disk::cannot_write_here(&e) {
                return Err(StoreError::Io { path: lock, source: Arc::new(e) });
            }
            flags |= EnvFlags::NO_LOCK;
        }
        // SAFETY: opened once per store and process, read-only; without the lock file, nothing can write it.
        let env = unsafe {
            let mut options = EnvOpenOptions::new().read_txn_without_tls();
            options.map_size(MAP_SIZE).max_dbs(1).max_readers(254).flags(flags);
            options.open(&path)
        }
        .map_err(lmdb)?;
        let rtxn = env.read_txn().map_err(lmdb)?;
        let claims = env
            .open_database(&rtxn, Some("claims"))
            .map_err(lmdb)?
            .ok_or_else(|| StoreError::Missing { path: path.clone() })?;
        // Committed, not dropped: LMDB closes the handles of databases opened in a transaction that aborts.
        rtxn.commit().map_err(lmdb)?;
        Ok(ClaimsEnv { env, claims, path, writes: Default::default() })
    }

    fn lmdb_error(&self, source: heed::Error) -> StoreError {
        StoreError::Lmdb { path: self.path.clone(), source: Arc::new(source) }
    }

    fn write<R>(&self, f: impl Fn(&mut RwTxn) -> Result<R, heed::Error>) -> Result<R, StoreError> {
        let attempt = || -> Result<R, heed::Error> {
            let mut txn = self.env.write_txn()?;
            let value = f(&mut txn)?;
            txn.commit()?;
            Ok(value)
        };
        match attempt() {
            Err(heed::Error::Mdb(MdbError::MapFull)) => {
                // Only stale claims can fill the map: sweep them and try once more.
                self.sweep(true)?;
                attempt().map_err(|e| self.lmdb_error(e))
            }
            other => other.map_err(|e| self.lmdb_error(e)),
        }
    }

    /// Removes claims that no longer hold (every claim but live ones when `all`): expired ones, those of dead
    /// processes, and answers kept past their time.
    fn sweep(&self, all: bool) -> Result<(), StoreError> {
        let now = now_ms();
        let mut txn = self.env.write_txn().map_err(|e| self.lmdb_error(e))?;
        let mut stale = Vec::new();
        for item in self.claims.iter(&txn).map_err(|e| self.lmdb_error(e))? {
            let (key, value) = item.map_err(|e| self.lmdb_error(e))?;
            let keep = decode(key, value).is_some_and(|r| r.expires_ms > now && (r.answered.is_some() || alive(r.pid)));
            if !keep || (all && decode(key, value).is_some_and(|r| r.answered.is_some())) {
                stale.push(key.to_vec());
            }
        }
        for key in stale {
            self.claims.delete(&mut txn, &key).map_err(|e| self.lmdb_error(e))?;
        }
        txn.commit().map_err(|e| self.lmdb_error(e))
    }
}

/// One owner's claims on a store: an analysis holds one for its run.
pub struct Claims {
    env: Arc<ClaimsEnv>,
    owner: u64,
    pid: u32,
    /// Whether this owner ever claimed a search (only then is there anything to release).
    claimed: std::sync::atomic::AtomicBool,
}

/// What the claims of a store hold now, as `stats` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClaimsSummary {
    /// Searches running, claimed by live processes.
    pub running: u64,
    /// The processes that run them.
    pub processes: Vec<u32>,
    /// Answers kept for other processes.
    pub answers: u64,
}

/// A search a live process runs now: the search's key (as its owner claimed it) and the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningSearch {
    pub search: Vec<u8>,
    pub pid: u32,
}

impl Claims {
    pub(crate) fn new(env: Arc<ClaimsEnv>) -> Claims {
        Claims { env, owner: fastrand::u64(1..), pid: std::process::id(), claimed: Default::default() }
    }

    /// What the claims hold now: running searches of live processes, and answers kept.
    pub fn summary(&self) -> Result<ClaimsSummary, StoreError> {
        let txn = self.env.env.read_txn().map_err(|e| self.env.lmdb_error(e))?;
        let now = now_ms();
        let mut summary = ClaimsSummary::default();
        for item in self.env.claims.iter(&txn).map_err(|e| self.env.lmdb_error(e))? {
            let (key, value) = item.map_err(|e| self.env.lmdb_error(e))?;
            let Some(record) = decode(key, value).filter(|r| r.expires_ms > now) else { continue };
            if record.answered.is_some() {
                summary.answers += 1;
            } else if alive(record.pid) {
                summary.running += 1;
                if !summary.processes.contains(&record.pid) {
                    summary.processes.push(record.pid);
                }
            }
        }
        summary.processes.sort_unstable();
        Ok(summary)
    }

    /// The searches running now, claimed by live processes, in key order.
    pub fn running(&self) -> Result<Vec<RunningSearch>, StoreError> {
        let txn = self.env.env.read_txn().map_err(|e| self.env.lmdb_error(e))?;
        let now = now_ms();
        let mut running = Vec::new();
        for item in self.env.claims.iter(&txn).map_err(|e| self.env.lmdb_error(e))? {
            let (key, value) = item.map_err(|e| self.env.lmdb_error(e))?;
            let Some(record) = decode(key, value).filter(|r| r.expires_ms > now) else { continue };
            if record.answered.is_none() && alive(record.pid) {
                running.push(RunningSearch { search: key.to_vec(), pid: record.pid });
            }
        }
        Ok(running)
    }

    /// Claims `search` unless another owner holds it or answered it.
    pub fn claim(&self, search: &[u8]) -> Result<Claim, StoreError> {
        // A read first: most searches another owner holds or answered are found without taking the write lock.
        match self.look_one(search)? {
            Seen::Held { pid } => return Ok(Claim::Held { pid }),
            Seen::Answered(answer) => return Ok(Claim::Answered(answer)),
            Seen::Free | Seen::Mine => {}
        }
        let (owner, pid) = (self.owner, self.pid);
        let claim = self.env.write(|txn| {
            if let Some(value) = self.env.claims.get(txn, search)? {
                match self.seen(decode(search, value)) {
                    Seen::Held { pid } => return Ok(Claim::Held { pid }),
                    Seen::Answered(answer) => return Ok(Claim::Answered(answer)),
                    Seen::Free | Seen::Mine => {}
                }
            }
            let record = Record { answered: None, owner, pid, expires_ms: now_ms() + LEASE.as_millis() as u64 };
            self.env.claims.put(txn, search, &encode(search, &record))?;
            Ok(Claim::Granted)
        })?;
        if claim == Claim::Granted {
            self.claimed.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.count_write()?;
        Ok(claim)
    }

    /// Records the answer of a search this owner ran, for other owners to take.
    pub fn answer(&self, search: &[u8], answer: &Answer) -> Result<(), StoreError> {
        let record = Record {
            answered: Some(answer.clone()),
            owner: self.owner,
            pid: self.pid,
            expires_ms: now_ms() + ANSWER_KEPT.as_millis() as u64,
        };
        let bytes = encode(search, &record);
        self.env.write(|txn| self.env.claims.put(txn, search, &bytes))
    }

    /// Gives up this owner's running claims on `searches` (stopped or failed searches); answers stay.
    pub fn release<'k>(&self, searches: impl IntoIterator<Item = &'k [u8]>) -> Result<(), StoreError> {
        let searches: Vec<&[u8]> = searches.into_iter().collect();
        if searches.is_empty() {
            return Ok(());
        }
        self.env.write(|txn| {
            for search in &searches {
                let mine = self
                    .env
                    .claims
                    .get(txn, search)?
                    .and_then(|value| decode(search, value))
                    .is_some_and(|r| r.owner == self.owner && r.answered.is_none());
                if mine {
                    self.env.claims.delete(txn, search)?;
                }
            }
            Ok(())
        })
    }

    /// Extends this owner's running claims on `searches` by a lease from now.
    pub fn renew<'k>(&self, searches: impl IntoIterator<Item = &'k [u8]>) -> Result<(), StoreError> {
        let searches: Vec<&[u8]> = searches.into_iter().collect();
        if searches.is_empty() {
            return Ok(());
        }
        let expires_ms = now_ms() + LEASE.as_millis() as u64;
        self.env.write(|txn| {
            for search in &searches {
                let Some(mut record) = self.env.claims.get(txn, search)?.and_then(|value| decode(search, value)) else {
                    continue;
                };
                if record.owner == self.owner && record.answered.is_none() {
                    record.expires_ms = expires_ms;
                    self.env.claims.put(txn, search, &encode(search, &record))?;
                }
            }
            Ok(())
        })
    }

    /// What the claims say of each of `searches`, in one read.
    pub fn look<'k>(&self, searches: impl IntoIterator<Item = &'k [u8]>) -> Result<Vec<Seen>, StoreError> {
        let txn = self.env.env.read_txn().map_err(|e| self.env.lmdb_error(e))?;
        searches
            .into_iter()
            .map(|search| {
                let value = self.env.claims.get(&txn, search).map_err(|e| self.env.lmdb_error(e))?;
                Ok(value.map_or(Seen::Free, |v| self.seen(decode(search, v))))
            })
            .collect()
    }

    fn look_one(&self, search: &[u8]) -> Result<Seen, StoreError> {
        Ok(self.look([search])?.pop().unwrap_or(Seen::Free))
    }

    fn seen(&self, record: Option<Record>) -> Seen {
        let Some(record) = record else { return Seen::Free };
        if record.expires_ms <= now_ms() {
            return Seen::Free;
        }
        match record.answered {
            Some(answer) => Seen::Answered(answer),
            None if record.owner == self.owner => Seen::Mine,
            None if alive(record.pid) => Seen::Held { pid: record.pid },
            None => Seen::Free,
        }
    }

    fn count_write(&self) -> Result<(), StoreError> {
        let writes = self.env.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if writes.is_multiple_of(SWEEP_EVERY) { self.env.sweep(false) } else { Ok(()) }
    }
}

impl Drop for Claims {
    /// Releases every running claim this owner still holds: its searches will not be answered.
    fn drop(&mut self) {
        if !self.claimed.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let owner = self.owner;
        let released = self.env.write(|txn| {
            let mut mine = Vec::new();
            for item in self.env.claims.iter(txn)? {
                let (key, value) = item?;
                if decode(key, value).is_some_and(|r| r.owner == owner && r.answered.is_none()) {
                    mine.push(key.to_vec());
                }
            }
            for key in mine {
                self.env.claims.delete(txn, &key)?;
            }
            Ok(())
        });
        if let Err(e) = released {
            log::log!(level_of(&e), "claims not released (they expire in {} s): {e}", LEASE.as_secs());
        }
    }
}

/// The level at which a failure to use the claims is logged: a warning, but where the disk failed (no space, an I/O
/// error), which the store's own writes report, once, where they fail: the claims only share work, and expire.
pub(crate) fn level_of(e: &StoreError) -> log::Level {
    if e.is_disk_failure() { log::Level::Info } else { log::Level::Warn }
}

/// Whether process `pid` lives, where the system shows its processes; assumed alive elsewhere (its claims then
/// hold until they expire).
fn alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The value of a claim on `search`, sealed with its checksum.
fn encode(search: &[u8], record: &Record) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    out.push(FORMAT);
    out.push(if record.answered.is_some() { ANSWERED } else { RUNNING });
    out.extend_from_slice(&record.owner.to_be_bytes());
    out.extend_from_slice(&record.pid.to_be_bytes());
    out.extend_from_slice(&record.expires_ms.to_be_bytes());
    if let Some(answer) = &record.answered {
        out.extend_from_slice(&PackedUciMove::pack(answer.best).to_bytes());
        out.extend_from_slice(&answer.score.to_bits().to_be_bytes());
        out.push(answer.bound.to_bits());
        out.push(answer.depth);
        out.extend_from_slice(&answer.nodes.to_be_bytes());
        let name = answer.engine.as_deref().unwrap_or("");
        // Names are short; one longer than 255 bytes is cut at a character boundary.
        let mut end = name.len().min(255);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        out.push(end as u8);
        out.extend_from_slice(&name.as_bytes()[..end]);
    }
    checksum::seal(Table::Claims, search, &mut out);
    out
}

/// The claim on `search` its stored value holds; `None` where the value is not one (damaged: its checksum fails,
/// or of another format).
fn decode(search: &[u8], value: &[u8]) -> Option<Record> {
    let bytes = checksum::open(Table::Claims, search, value).ok()?;
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let slice = bytes.get(at..at + n)?;
        at += n;
        Some(slice)
    };
    if take(1)?[0] != FORMAT {
        return None;
    }
    let state = take(1)?[0];
    let owner = u64::from_be_bytes(take(8)?.try_into().ok()?);
    let pid = u32::from_be_bytes(take(4)?.try_into().ok()?);
    let expires_ms = u64::from_be_bytes(take(8)?.try_into().ok()?);
    let answered = match state {
        RUNNING => None,
        ANSWERED => {
            let best = PackedUciMove::from_bytes(take(2)?.try_into().ok()?).unpack();
            let score = Score::from_bits(i16::from_be_bytes(take(2)?.try_into().ok()?))?;
            let bound = Bound::from_bits(take(1)?[0])?;
            let depth = take(1)?[0];
            let nodes = u64::from_be_bytes(take(8)?.try_into().ok()?);
            let len = usize::from(take(1)?[0]);
            let name = std::str::from_utf8(take(len)?).ok()?;
            Some(Answer { best, score, bound, depth, nodes, engine: (!name.is_empty()).then(|| name.to_owned()) })
        }
        _ => return None,
    };
    (at == bytes.len()).then_some(Record { answered, owner, pid, expires_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Answer {
        Answer {
            best: "g1f3".parse().expect("a move"),
            score: Score::cp(-31),
            bound: Bound::Upper,
            depth: 16,
            nodes: 123_456,
            engine: Some("Stockfish 15.1 (/usr/games/stockfish)".into()),
        }
    }

    #[test]
    fn records_round_trip_and_damaged_ones_read_as_absent() {
        for answered in [None, Some(answer()), Some(Answer { engine: None, ..answer() })] {
            let record = Record { answered: answered.clone(), owner: 7, pid: 42, expires_ms: 1_000 };
            let bytes = encode(b"search", &record);
            let back = decode(b"search", &bytes).expect("decodes");
            assert_eq!((back.answered, back.owner, back.pid, back.expires_ms), (answered, 7, 42, 1_000));
            for cut in 0..bytes.len() {
                assert!(decode(b"search", &bytes[..cut]).is_none(), "a record cut at {cut} bytes must not decode");
            }
            for at in 0..bytes.len() {
                let mut flipped = bytes.clone();
                flipped[at] ^= 0x40;
                assert!(decode(b"search", &flipped).is_none(), "a record with byte {at} changed must not decode");
            }
            assert!(decode(b"other", &bytes).is_none(), "a record under another search's key must not decode");
            let mut newer = bytes[..bytes.len() - checksum::SIZE].to_vec();
            newer[0] = FORMAT + 1;
            checksum::seal(Table::Claims, b"search", &mut newer);
            assert!(decode(b"search", &newer).is_none());
        }
    }

    #[test]
    fn a_claim_of_a_dead_process_or_past_its_lease_is_free() {
        let dir = tempfile::tempdir().expect("temp dir");
        let env = Arc::new(ClaimsEnv::open(dir.path()).expect("opens"));
        let mine = Claims::new(env.clone());
        let search: &[u8] = b"search";
        // A process id that no process has: the largest pid Linux can give is below 2^22.
        let dead = Record { answered: None, owner: 1, pid: u32::MAX - 1, expires_ms: now_ms() + 60_000 };
        env.write(|txn| env.claims.put(txn, search, &encode(search, &dead))).expect("written");
        if alive(u32::MAX - 1) {
            assert_eq!(mine.look([search]).expect("read"), vec![Seen::Held { pid: u32::MAX - 1 }]);
        } else {
            assert_eq!(mine.look([search]).expect("read"), vec![Seen::Free]);
        }
        let expired = Record { answered: None, owner: 1, pid: std::process::id(), expires_ms: now_ms() - 1 };
        env.write(|txn| env.claims.put(txn, search, &encode(search, &expired))).expect("written");
        assert_eq!(mine.claim(search).expect("claims"), Claim::Granted);
        assert_eq!(mine.look([search]).expect("read"), vec![Seen::Mine]);
    }

    #[test]
    fn released_and_dropped_claims_free_their_searches_but_answers_stay() {
        let dir = tempfile::tempdir().expect("temp dir");
        let env = Arc::new(ClaimsEnv::open(dir.path()).expect("opens"));
        let (first, other) = (Claims::new(env.clone()), Claims::new(env.clone()));
        let (a, b, c): (&[u8], &[u8], &[u8]) = (b"a", b"b", b"c");
        for search in [a, b, c] {
            assert_eq!(first.claim(search).expect("claims"), Claim::Granted);
        }
        let pid = std::process::id();
        assert_eq!(other.look([a, b, c]).expect("read"), vec![Seen::Held { pid }; 3]);
        first.release([a]).expect("released");
        first.answer(b, &answer()).expect("answered");
        first.renew([c]).expect("renewed");
        assert_eq!(
            other.look([a, b, c]).expect("read"),
            vec![Seen::Free, Seen::Answered(answer()), Seen::Held { pid }]
        );
        // Another owner cannot release what it does not own.
        other.release([c]).expect("no error");
        assert_eq!(other.look([c]).expect("read"), vec![Seen::Held { pid }]);
        drop(first);
        assert_eq!(other.look([a, b, c]).expect("read"), vec![Seen::Free, Seen::Answered(answer()), Seen::Free]);
        assert_eq!(other.claim(c).expect("claims"), Claim::Granted);
    }
}
