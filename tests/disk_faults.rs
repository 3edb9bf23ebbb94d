//! The disk under a store fails (issue 32, "weeks unattended"): a write that fails (no space, a file too large, an I/O
//! error) ends `analyze` once, with one line that names the store and the cause, a non-zero exit, its engines
//! stopped and everything committed before kept; in a UCI session it pauses the tree's growth with one `info string`
//! while the games go on; and a full disk is never a SIGBUS.
//!
//! Two kinds of fault. For any user: a file size limit (`ulimit -f`, with SIGXFSZ ignored), under which a write past
//! the limit fails with EFBIG as a write to a full disk fails with ENOSPC. As root (CI runs as root): a real full
//! tmpfs. A test that needs root and cannot mount says on stderr that it was skipped, and why.

mod common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::{fs::MetadataExt, process::ExitStatusExt},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use common::{PATIENCE, Uci};
use deeptree::store::{Store, StoreOptions};
use serde_json::Value;

const DEEPTREE: &str = env!("CARGO_BIN_EXE_deeptree");
const FAKE: &str = env!("CARGO_BIN_EXE_deeptree-fake-engine");

/// Long enough for any run here to end on its own; one that loops is killed at it.
const LIMIT: Duration = Duration::from_secs(90);

/// deeptree on `db`, with nothing from the environment.
fn deeptree(db: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(DEEPTREE);
    command.arg("--db").arg(db).args(args).env_remove("DEEPTREE_DB").env_remove("DEEPTREE_CONFIG");
    command
}

/// The same command under a file size limit of `kib` KiB with SIGXFSZ ignored: a write past the limit fails with
/// EFBIG ("File too large"), to deeptree and to its engines.
fn under_size_limit(command: &Command, kib: u64) -> Command {
    let mut limited = Command::new("bash");
    limited.arg("-c").arg(format!("trap '' XFSZ; ulimit -f {kib}; exec \"$0\" \"$@\"")).arg(command.get_program());
    limited.args(command.get_args()).env_remove("DEEPTREE_DB").env_remove("DEEPTREE_CONFIG");
    limited
}

/// What a finished run printed and how it ended: stdout, every line of stderr (at most the first 1000 are kept, with
/// the count of all), and its exit status.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: Vec<String>,
    stderr_lines: usize,
    took: Duration,
}

impl Ran {
    fn stderr(&self) -> String {
        self.stderr.join("\n")
    }

    /// It ended with an error of its own: a non-zero exit, not a signal (SIGBUS was 135).
    fn assert_failed_without_a_signal(&self, what: &str) {
        assert_eq!(self.status.signal(), None, "{what}: killed by a signal ({:?}): {}", self.status, self.stderr());
        assert!(!self.status.success(), "{what}: succeeded where a write had to fail: {}", self.stdout);
    }
}

/// Runs `command` to its end, killing it (and failing) past [`LIMIT`]: a run that loops is a failure.
fn run(command: &mut Command) -> Ran {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("starts");
    let mut stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let (mut kept, mut count) = (Vec::new(), 0usize);
        for line in BufReader::new(stderr).split(b'\n').map_while(Result::ok) {
            count += 1;
            if kept.len() < 1000 {
                kept.push(String::from_utf8_lossy(&line).into_owned());
            }
        }
        (kept, count)
    });
    let status = wait_or_kill(&mut child, LIMIT);
    let stdout = out.join().expect("stdout read");
    let (stderr, stderr_lines) = err.join().expect("stderr read");
    Ran { status, stdout, stderr, stderr_lines, took: started.elapsed() }
}

fn wait_or_kill(child: &mut Child, limit: Duration) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}: it loops instead of ending");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ok(command: &mut Command) -> Ran {
    let ran = run(command);
    assert!(ran.status.success(), "{command:?}: {}", ran.stderr());
    ran
}

fn positions(db: &Path) -> u64 {
    let ran = ok(&mut deeptree(db, &["stats", "--json"]));
    let stats: Value = serde_json::from_str(ran.stdout.trim()).expect("stats --json prints JSON");
    stats["positions"].as_u64().expect("positions")
}

/// A small analysis with the fake engine (every process's id appended to `pids`), the store made if absent.
fn analyze(db: &Path, moves: &str, max_depth: u8, pids: &Path) -> Command {
    let engine = format!("{FAKE} --mode smooth --pid-file {}", pids.display());
    let depth = max_depth.to_string();
    let args = ["analyze", "--engine", &engine, "--engine-depth", "4", "--workers", "2", "--max-depth", &depth];
    let mut command = deeptree(db, &args);
    if !moves.is_empty() {
        command.args(["--moves", moves]);
    }
    command
}

/// Every engine process whose id is in `pids` has ended (none left running after deeptree).
fn assert_engines_ended(pids: &Path) {
    let pids: Vec<u32> =
        std::fs::read_to_string(pids).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert!(!pids.is_empty(), "the engines ran");
    let deadline = Instant::now() + Duration::from_secs(5);
    for pid in pids {
        while running(pid) {
            assert!(Instant::now() < deadline, "engine process {pid} still runs after deeptree ended");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether process `pid` runs (a zombie does not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

/// The causes of a write that fails on a full disk: LMDB says EIO where a write was cut short.
const NO_SPACE: [&str; 2] = ["No space left on device", "Input/output error"];

/// The causes of a write past the file size limit.
const TOO_LARGE: [&str; 2] = ["File too large", "Input/output error"];

/// The one line `analyze` ends with when a write to the store in `db` fails for one of `causes`.
fn assert_one_line_naming_the_store(ran: &Ran, db: &Path, causes: [&str; 2]) {
    assert_eq!(ran.stderr_lines, 1, "one line, no flood: {}", ran.stderr());
    let line = &ran.stderr[0];
    assert!(
        line.starts_with(&format!("deeptree: error: cannot write the store at {}: ", db.display())),
        "the line names the store: {line}"
    );
    assert!(causes.iter().any(|cause| line.contains(&format!("data.mdb: {cause}"))), "the cause ({causes:?}): {line}");
    assert!(line.contains("free on its file system") && line.contains("everything committed before is kept"), "{line}");
}

/// A write past a file size limit fails with EFBIG in the middle of `analyze`, as a full disk fails it: the run
/// ends at once with one line, non-zero, its engines ended, and the store keeps every position committed before
/// and opens for the next run. Before, the same fault looped: 812 lines in 20 s, storing "one by one", never ending.
#[test]
fn a_write_that_fails_ends_analyze_once_and_keeps_everything_committed_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&mut analyze(&db, "", 1, &dir.path().join("first.pids")));
    let before = positions(&db);
    assert!(before > 0);
    // Not a byte more than the data file holds now: the first transaction that needs a new page fails.
    let kib = std::fs::metadata(db.join("data.mdb")).unwrap().len() / 1024;
    let pids = dir.path().join("failing.pids");
    let ran = run(&mut under_size_limit(&analyze(&db, "d2d4", 6, &pids), kib));
    ran.assert_failed_without_a_signal("analyze past the file size limit");
    assert_one_line_naming_the_store(&ran, &db, TOO_LARGE);
    assert!(ran.took < Duration::from_secs(30), "ended at once: {:?}", ran.took);
    assert_engines_ended(&pids);
    // Everything committed before is there, and the store takes the next run (without the limit).
    assert!(positions(&db) >= before, "positions were lost");
    ok(&mut analyze(&db, "d2d4", 2, &dir.path().join("after.pids")));
    assert!(positions(&db) > before);
}

/// A UCI session whose inner engine is the fake one, started by `command` (deeptree, or deeptree under a limit).
fn fake_uci(command: &Command) -> Uci {
    let program = PathBuf::from(command.get_program());
    let args: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut uci = Uci::start(&program, &args);
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    uci.send(&format!("setoption name InnerEngine value {FAKE} --mode smooth"));
    uci.send("setoption name EngineDepth value 4");
    uci.ready();
    uci
}

/// In a session whose store cannot be written, growth pauses with one `info string` and every `go` of a game is
/// answered: `go infinite` and a timed `go` with `ThinkMode tree` find the paused growth, `go movetime` searches
/// directly. Returns every line the session wrote.
fn games_go_on_with_growth_paused(mut uci: Uci) -> Vec<String> {
    let mut seen = Vec::new();
    uci.send("position startpos moves d2d4");
    uci.send("go infinite");
    let lines = uci.until("info string error: tree growth paused", PATIENCE);
    assert!(lines.last().is_some_and(|l| !l.is_empty()), "growth did not pause: {lines:?}");
    seen.extend(lines);
    uci.send("stop");
    let lines = uci.until("bestmove", PATIENCE);
    assert!(lines.last().is_some_and(|l| l.starts_with("bestmove ")), "{lines:?}");
    seen.extend(lines);
    for moves in ["d2d4 d7d5", "d2d4 d7d5 c2c4", "d2d4 d7d5 c2c4 e7e6"] {
        uci.send(&format!("position startpos moves {moves}"));
        let (_, lines) = uci.best("go movetime 100");
        seen.extend(lines);
    }
    uci.send("setoption name ThinkMode value tree");
    uci.send("position startpos moves e2e4");
    let (_, lines) = uci.best("go wtime 10000 btime 10000");
    assert!(
        !lines.iter().any(|l| l.contains("think tree")),
        "ThinkMode tree grew nothing, searched directly: {lines:?}"
    );
    seen.extend(lines);
    uci.ready();
    seen
}

fn assert_paused_once(lines: &[String], db: &Path, causes: [&str; 2]) {
    let paused: Vec<&String> = lines.iter().filter(|l| l.contains("tree growth paused")).collect();
    assert_eq!(paused.len(), 1, "said once: {paused:?}");
    assert!(
        paused[0].starts_with(&format!(
            "info string error: tree growth paused: cannot write the store at {}: ",
            db.display()
        )) && causes.iter().any(|cause| paused[0].contains(cause)),
        "{}",
        paused[0]
    );
    assert_eq!(lines.iter().filter(|l| l.starts_with("bestmove ")).count(), 5, "every go answered: {lines:?}");
}

/// A write that fails in a UCI session's growth (the file size limit) pauses growth with one `info string`, and the
/// games go on with direct searches. Before, the growth stored its answers "one by one" for ever (39,925 log lines in
/// 5 s on a full tmpfs).
#[test]
fn a_write_that_fails_pauses_uci_growth_once_and_the_games_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    ok(&mut analyze(&db, "", 1, &dir.path().join("first.pids")));
    let kib = std::fs::metadata(db.join("data.mdb")).unwrap().len() / 1024;
    let uci = fake_uci(&under_size_limit(&deeptree(&db, &[]), kib));
    let lines = games_go_on_with_growth_paused(uci);
    assert_paused_once(&lines, &db, TOO_LARGE);
}

/// A mount made for a test, unmounted when dropped.
struct Mounted(PathBuf);

impl Mounted {
    /// `mount ARGS... DIR` (root only): `Err` says why not.
    fn new(dir: &Path, args: &[&str]) -> Result<Mounted, String> {
        let output = Command::new("mount").args(args).arg(dir).output().map_err(|e| format!("mount: {e}"))?;
        if !output.status.success() {
            return Err(format!("mount {args:?}: {}", String::from_utf8_lossy(&output.stderr).trim()));
        }
        Ok(Mounted(dir.to_owned()))
    }

    fn tmpfs(dir: &Path, size: &str) -> Result<Mounted, String> {
        Mounted::new(dir, &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the file system of `dir` to the last byte.
fn fill(dir: &Path) {
    let mut file = std::fs::File::create(dir.join("fill")).expect("fill file");
    let block = vec![0u8; 4096];
    while file.write_all(&block).is_ok() {}
    while file.write_all(&block[..1]).is_ok() {}
    let _ = file.sync_all();
}

/// A real full disk (a 3 MiB tmpfs filled with zeros; root only): `analyze` on a store there ends once with one line,
/// never by SIGBUS, whether the store is in use, has lost its lock files (as `compact` leaves it) or is new;
/// `compact` fails with one line; and the store keeps what it held once there is space again. Before, the same runs looped for ever (196,640 lines in
/// 20 s) or died by SIGBUS (exit 135, no message) where LMDB's lock file had to be made (compact's copy too).
#[test]
fn a_full_disk_ends_analyze_once_and_never_by_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let mounted = match Mounted::tmpfs(&disk, "3m") {
        Ok(mounted) => mounted,
        Err(why) => {
            eprintln!("skipped (a tmpfs is mounted only as root): {why}");
            return;
        }
    };
    let db = disk.join("db");
    let bare = disk.join("bare");
    ok(&mut analyze(&db, "", 1, &dir.path().join("first.pids")));
    ok(&mut analyze(&bare, "", 1, &dir.path().join("bare.pids")));
    // As compact leaves a store: no LMDB lock file, no claims.
    std::fs::remove_file(bare.join("lock.mdb")).unwrap();
    std::fs::remove_dir_all(bare.join("claims")).unwrap();
    let before = positions(&db);
    fill(&disk);

    let pids = dir.path().join("full.pids");
    let ran = run(&mut analyze(&db, "d2d4", 6, &pids));
    ran.assert_failed_without_a_signal("analyze on a full disk");
    assert_one_line_naming_the_store(&ran, &db, NO_SPACE);
    assert_engines_ended(&pids);

    let ran = run(&mut analyze(&bare, "d2d4", 6, &dir.path().join("bare-full.pids")));
    ran.assert_failed_without_a_signal("analyze on a full disk, the store without its lock file");
    assert_eq!(ran.stderr_lines, 1, "{}", ran.stderr());
    assert!(ran.stderr[0].contains("lock.mdb: No space left on device"), "{}", ran.stderr());

    let new = disk.join("new");
    let ran = run(&mut analyze(&new, "", 1, &dir.path().join("new.pids")));
    ran.assert_failed_without_a_signal("analyze of a new store on a full disk");
    assert_eq!(ran.stderr_lines, 1, "{}", ran.stderr());
    assert!(NO_SPACE.iter().any(|cause| ran.stderr[0].contains(cause)), "{}", ran.stderr());

    // Compaction writes a copy: it fails, and leaves nothing of it behind.
    let ran = run(&mut deeptree(&db, &["compact"]));
    ran.assert_failed_without_a_signal("compact on a full disk");
    assert_eq!(ran.stderr_lines, 1, "{}", ran.stderr());
    assert!(NO_SPACE.iter().any(|cause| ran.stderr[0].contains(cause)), "{}", ran.stderr());
    assert!(!db.join("compact.tmp").exists());

    // A UCI session there: growth pauses once, the games go on.
    let lines = games_go_on_with_growth_paused(fake_uci(&deeptree(&db, &[])));
    assert_paused_once(&lines, &db, NO_SPACE);

    // Space again: everything committed before is there, and the store grows.
    std::fs::remove_file(disk.join("fill")).unwrap();
    assert!(positions(&db) >= before);
    ok(&mut analyze(&db, "d2d4", 2, &dir.path().join("after.pids")));
    ok(&mut analyze(&bare, "d2d4", 1, &dir.path().join("bare-after.pids")));
    drop(mounted);
}

/// LMDB's lock files (the store's and its claims') are allocated before LMDB maps them: LMDB made them with
/// `ftruncate`, all holes, and its first write into the map on a full disk was a SIGBUS.
#[test]
fn lmdb_lock_files_are_allocated_before_lmdb_maps_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let store = Store::open(&db, &StoreOptions::default()).unwrap();
    store.claims().unwrap();
    for lock in [db.join("lock.mdb"), db.join("claims").join("lock.mdb")] {
        let meta = std::fs::metadata(&lock).unwrap();
        assert!(meta.len() >= 16 * 1024, "{}: {} bytes", lock.display(), meta.len());
        assert!(
            meta.blocks() * 512 >= meta.len(),
            "{}: {} bytes in {} blocks",
            lock.display(),
            meta.len(),
            meta.blocks()
        );
    }
}
