//! The disk under a store fails (issue 32, "weeks unattended"): a write that fails (no space, a file too large, an I/O
//! error) ends `analyze` once, with one line that names the store and the cause, a non-zero exit, its engines
//! stopped and everything committed before kept; in a UCI session it pauses the tree's growth with one `info string`
//! while the games go on; a full disk is never a SIGBUS; and the commands that only read work where nothing can be
//! written (a read-only mount, a lock file that cannot be opened for writing) and create nothing.
//!
//! Two kinds of fault. For any user: a file size limit (`ulimit -f`, with SIGXFSZ ignored), under which a write past
//! the limit fails with EFBIG as a write to a full disk fails with ENOSPC, and file modes that forbid writing. As
//! root (CI runs as root): a real full tmpfs and a read-only bind mount. A test that needs root and cannot mount
//! says on stderr that it was skipped, and why.

mod common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::{
        fs::{MetadataExt, PermissionsExt},
        process::{CommandExt, ExitStatusExt},
    },
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use common::{PATIENCE, Uci};
use deeptree::{
    score::{Bound, Score},
    store::{
        Change, Store, StoreError, StoreOptions,
        key::PositionKey,
        node::{Edge, Node, PackedPosition},
    },
};
use serde_json::Value;
use shakmaty::Chess;

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
fn fake_uci(command: &Command, log: &Path) -> Uci {
    let program = PathBuf::from(command.get_program());
    let args: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut uci = Uci::start(&program, &args);
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    uci.send(&format!("setoption name InnerEngine value {FAKE} --mode smooth --log {}", log.display()));
    uci.send("setoption name EngineDepth value 4");
    uci.ready();
    uci
}

/// In a session whose store cannot be written, growth pauses with one `info string` and every `go` of a game is
/// answered: `go infinite` finds the paused growth and goes on as the direct engine's `go infinite` (the fake
/// engines' `log` shows it), a timed `go` with `ThinkMode tree` finds it paused too, `go movetime` searches directly.
/// Returns every line the session wrote.
fn games_go_on_with_growth_paused(mut uci: Uci, log: &Path) -> Vec<String> {
    let mut seen = Vec::new();
    uci.send("position startpos moves d2d4");
    uci.send("go infinite");
    let lines = uci.until("info string error: tree growth paused", PATIENCE);
    assert!(lines.last().is_some_and(|l| !l.is_empty()), "growth did not pause: {lines:?}");
    seen.extend(lines);
    // Growth sends only searches with a limit: a `go infinite` is the direct engine's, relayed until `stop`.
    let relayed = || {
        let log = std::fs::read_to_string(log).unwrap_or_default();
        log.lines().any(|l| l.split_once(' ').is_some_and(|(_, command)| command == "go infinite"))
    };
    let asked = Instant::now();
    while !relayed() && asked.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(relayed(), "the paused growth left `go infinite` silent: the direct engine was never asked");
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
    let log = dir.path().join("fake.log");
    let uci = fake_uci(&under_size_limit(&deeptree(&db, &[]), kib), &log);
    let lines = games_go_on_with_growth_paused(uci, &log);
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

    /// `src` seen read-only at `dir`.
    fn read_only(src: &Path, dir: &Path) -> Result<Mounted, String> {
        let mounted = Mounted::new(dir, &["--bind", src.to_str().expect("utf-8")])?;
        Mounted::new(dir, &["-o", "remount,ro,bind"]).map(std::mem::forget)?;
        Ok(mounted)
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
    let log = dir.path().join("fake.log");
    let lines = games_go_on_with_growth_paused(fake_uci(&deeptree(&db, &[]), &log), &log);
    assert_paused_once(&lines, &db, NO_SPACE);

    // Space again: everything committed before is there, and the store grows.
    std::fs::remove_file(disk.join("fill")).unwrap();
    assert!(positions(&db) >= before);
    ok(&mut analyze(&db, "d2d4", 2, &dir.path().join("after.pids")));
    ok(&mut analyze(&bare, "d2d4", 1, &dir.path().join("bare-after.pids")));
    drop(mounted);
}

/// Every file and directory under `dir` with its size, mode and modification time: what a command changed there.
fn listing(dir: &Path) -> Vec<(PathBuf, u64, u32, i64, i64)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        all.push((path.clone(), meta.len(), meta.mode(), meta.mtime(), meta.mtime_nsec()));
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    all.sort();
    all
}

/// The commands that only read, each with what it printed (stdout) on the store at `db`, and the PGN it exported
/// into `out` (a new directory, writable to all), each command made ready by `prepare`.
fn read_only_outputs(db: &Path, out: &Path, prepare: &dyn Fn(&mut Command)) -> Vec<(String, String)> {
    std::fs::create_dir(out).unwrap();
    std::fs::set_permissions(out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (pgn, html) = (out.join("tree.pgn"), out.join("tree.html"));
    let commands: [&[&str]; 6] = [
        &["stats"],
        &["show", "--depth", "2"],
        &["show", "--json", "--moves", "e2e4"],
        &["export", "epd", "-"],
        &["export", "pgn", pgn.to_str().unwrap()],
        &["export", "html", html.to_str().unwrap()],
    ];
    let mut outputs = Vec::new();
    for args in commands {
        let mut command = deeptree(db, args);
        prepare(&mut command);
        let ran = run(&mut command);
        assert!(ran.status.success(), "{args:?} on {}: {}", db.display(), ran.stderr());
        // `stats` names the path it was given, `export` the file it wrote.
        let printed = ran.stdout.replace(db.to_str().unwrap(), "DB").replace(out.to_str().unwrap(), "OUT");
        outputs.push((args.join(" ").replace(out.to_str().unwrap(), "OUT"), printed));
    }
    outputs.push(("tree.pgn".into(), std::fs::read_to_string(&pgn).unwrap()));
    outputs
}

/// Each command printed the same as where the store is writable.
fn assert_same(read: &[(String, String)], writable: &[(String, String)], what: &str) {
    assert_eq!(read.len(), writable.len());
    for ((command, printed), (_, expected)) in read.iter().zip(writable) {
        assert!(printed == expected, "{what}: {command} printed\n{printed}\ninstead of\n{expected}");
    }
}

/// A store to read: a game imported, and a few analysed positions.
fn store_to_read(db: &Path, scratch: &Path) {
    let pgn = scratch.join("game.pgn");
    std::fs::write(&pgn, "1. e4 e5 2. Nf3 Nc6 *\n").unwrap();
    ok(&mut deeptree(db, &["import", "pgn", pgn.to_str().unwrap()]));
    ok(&mut analyze(db, "e2e4", 1, &scratch.join("read.pids")));
}

/// On a read-only mount (root only), `show`, `stats` and `export` print what they print on the store where it is
/// writable, and change nothing; a zero-byte data file there is an error, as is a directory without a store; a
/// command that writes fails with one line. Before, every one of them failed on the lock file ("deeptree.lock:
/// Read-only file system").
#[test]
fn read_only_commands_work_on_a_read_only_mount_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (src, ro, out) = (dir.path().join("src"), dir.path().join("ro"), dir.path().join("out"));
    for d in [&src, &ro, &out] {
        std::fs::create_dir(d).unwrap();
    }
    let out = |name: &str| out.join(name);
    store_to_read(&src.join("db"), dir.path());
    // A copy of the data files without any lock file (as a store copied from elsewhere), and a zero-byte data file.
    std::fs::create_dir_all(src.join("bare").join("claims")).unwrap();
    for file in ["data.mdb", "claims/data.mdb"] {
        std::fs::copy(src.join("db").join(file), src.join("bare").join(file)).unwrap();
    }
    std::fs::create_dir(src.join("empty")).unwrap();
    std::fs::write(src.join("empty").join("data.mdb"), b"").unwrap();
    let writable = read_only_outputs(&src.join("db"), &out("writable"), &|_| {});
    let before = listing(&src);
    let _mounted = match Mounted::read_only(&src, &ro) {
        Ok(mounted) => mounted,
        Err(why) => {
            eprintln!("skipped (a read-only bind mount is made only as root): {why}");
            return;
        }
    };
    for store in ["db", "bare"] {
        let read = read_only_outputs(&ro.join(store), &out(store), &|_| {});
        assert_same(&read, &writable, &format!("{store} on the read-only mount"));
    }
    let ran = run(&mut deeptree(&ro.join("empty"), &["stats"]));
    ran.assert_failed_without_a_signal("stats of a zero-byte data file");
    assert!(ran.stderr().contains("data.mdb is empty (0 bytes)"), "{}", ran.stderr());
    let ran = run(&mut deeptree(&ro.join("none"), &["show"]));
    ran.assert_failed_without_a_signal("show where there is no store");
    assert!(ran.stderr().contains("no deeptree store at"), "{}", ran.stderr());
    let pgn = dir.path().join("game.pgn");
    let ran = run(&mut deeptree(&ro.join("db"), &["import", "pgn", pgn.to_str().unwrap()]));
    ran.assert_failed_without_a_signal("import on a read-only mount");
    assert_eq!(ran.stderr_lines, 1, "{}", ran.stderr());
    assert!(ran.stderr[0].contains("Read-only file system"), "{}", ran.stderr());
    assert_eq!(listing(&src), before, "nothing was created or changed under the read-only mount");
}

/// Where LMDB's lock file cannot be opened for writing (another user's store, or one whose files are read-only to
/// their owner), the commands that only read read the store without it and create nothing. As root they run as
/// `nobody`, with the store readable to all; otherwise the store's files and directories lose their write bits.
#[test]
fn read_only_commands_read_a_store_whose_lock_file_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    store_to_read(&db, dir.path());
    let writable = read_only_outputs(&db, &dir.path().join("writable"), &|_| {});
    let root = std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false);
    // Readable to all (the temporary directory is the owner's alone), writable to nobody but root.
    let read_only = if root { (0o755, 0o644) } else { (0o555, 0o444) };
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    set_modes(&db, read_only);
    let before = listing(&db);
    let home = dir.path().to_owned();
    let as_reader = move |command: &mut Command| {
        command.env("HOME", &home);
        if root {
            command.uid(65534).gid(65534);
        }
    };
    let read = read_only_outputs(&db, &dir.path().join("reader"), &as_reader);
    set_modes(&db, (0o755, 0o644));
    assert_same(&read, &writable, "read without the lock file");
    assert_eq!(
        listing(&db).into_iter().map(|(path, size, ..)| (path, size)).collect::<Vec<_>>(),
        before.into_iter().map(|(path, size, ..)| (path, size)).collect::<Vec<_>>(),
        "nothing was created under the store"
    );
}

/// Gives every directory under `dir` (itself included) the mode `dirs` and every file the mode `files`.
fn set_modes(dir: &Path, (dirs, files): (u32, u32)) {
    for (path, ..) in listing(dir) {
        let mode = if path.is_dir() { dirs } else { files };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
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

/// A store opened read-only reads as the store, takes no write (every one fails with `ReadOnly`, at once), and
/// creates nothing but LMDB's lock file where that is missing and can be made (its table of readers keeps a writer in
/// another process off the pages being read); a store of a schema that needs migrating is refused, unchanged.
#[test]
fn a_store_opened_read_only_takes_no_write_and_migrates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let start = Chess::default();
    let mut node = Node::new(PackedPosition::of(&start));
    node.edges.push(Edge::new("e2e4".parse().unwrap(), Score::cp(30), Bound::Exact, 18));
    {
        let store = Store::open(&db, &StoreOptions::default()).unwrap();
        store.writer().submit(vec![Change::merge(&start, node.clone()).unwrap()]).wait().unwrap();
    }
    std::fs::remove_file(db.join("lock.mdb")).unwrap();
    std::fs::remove_file(db.join("deeptree.lock")).unwrap();
    let data = std::fs::read(db.join("data.mdb")).unwrap();
    {
        let store = Store::open_read_only(&db, &StoreOptions::default()).unwrap();
        assert_eq!(store.stats().unwrap().edges, 1);
        assert!(store.read().unwrap().node(PositionKey::of(&start)).unwrap().is_some());
        let refused = store.writer().submit(vec![Change::merge(&start, node).unwrap()]).wait();
        assert!(matches!(&refused, Err(e @ StoreError::ReadOnly { .. }) if e.stops_writes()), "{refused:?}");
        assert!(matches!(store.write_failure(), Some(StoreError::ReadOnly { .. })));
        assert!(store.claims_summary().unwrap().is_none(), "no claims were made");
    }
    let mut left: Vec<String> =
        std::fs::read_dir(&db).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["data.mdb", "lock.mdb"]);
    assert!(std::fs::read(db.join("data.mdb")).unwrap() == data, "the data file was written");

    let old = dir.path().join("schema3");
    std::fs::create_dir(&old).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema3/data.mdb");
    std::fs::copy(&fixture, old.join("data.mdb")).unwrap();
    let refused = Store::open_read_only(&old, &StoreOptions::default()).err();
    assert!(matches!(refused, Some(StoreError::NeedsMigration { found: 3, .. })), "{refused:?}");
    assert!(std::fs::read(old.join("data.mdb")).unwrap() == std::fs::read(&fixture).unwrap(), "nothing migrated");
}

/// `bench store` without `--db` builds its store in a temporary directory, which is removed however the bench ends:
/// here a write fails (past a file size limit) and the bench ends with the error, leaving nothing in TMPDIR.
#[test]
fn a_bench_store_that_fails_removes_its_temporary_store() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut bench = Command::new(DEEPTREE);
    bench.args(["bench", "store", "--positions", "50000", "--reads", "10", "--json"]).env("TMPDIR", &tmp);
    let ran = run(under_size_limit(&bench, 256).env("TMPDIR", &tmp));
    ran.assert_failed_without_a_signal("bench store past the size limit");
    assert!(ran.stderr().contains(&tmp.display().to_string()), "the store was built in TMPDIR: {}", ran.stderr());
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");

    // And where it succeeds.
    let mut bench = Command::new(DEEPTREE);
    bench.args(["bench", "store", "--positions", "200", "--reads", "10", "--json"]).env("TMPDIR", &tmp);
    let ran = run(bench.env_remove("DEEPTREE_DB").env_remove("DEEPTREE_CONFIG"));
    assert!(ran.status.success(), "{}", ran.stderr());
    assert!(std::fs::read_dir(&tmp).unwrap().next().is_none(), "the store of a bench that succeeded is removed");
}
