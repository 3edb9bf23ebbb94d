//! A damaged store is found, never shown: copies of a real store, damaged as a disk or an interrupted copy damages
//! a file (bytes changed in place, the file cut short), and the deeptree binary run on them.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::Value;

mod common;
use common::{PATIENCE, Uci};

const FAKE: &str = env!("CARGO_BIN_EXE_deeptree-fake-engine");
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/store-v1");
/// The start position's key: the root of the fixture's tree.
const START: &str = "463b96181691fc9c";
/// An ending no line of the fixture's tree reaches: growth there writes no record of the tree's.
const ENDING: &str = "8/8/4k3/8/8/4K3/4P3/8 w - - 0 1";

fn run(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .arg("--config")
        .arg(Path::new(FIXTURE).join("deeptree.toml"))
        .args(args)
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn ok(db: &Path, args: &[&str]) -> String {
    let output = run(db, args);
    assert!(output.status.success(), "deeptree {args:?}: {}", stderr(&output));
    stdout(&output)
}

/// A copy of the fixture's store in `dir/name`, upgraded to the current schema by a command that writes (importing
/// its own games again, which adds nothing).
fn store_in(dir: &Path, name: &str) -> PathBuf {
    let db = dir.join(name);
    std::fs::create_dir(&db).unwrap();
    std::fs::copy(Path::new(FIXTURE).join("data.mdb"), db.join("data.mdb")).unwrap();
    ok(&db, &["import", "pgn", Path::new(FIXTURE).join("games.pgn").to_str().unwrap()]);
    db
}

/// Changes one byte, `offset` bytes into the value of every leaf entry of `key` (8 bytes) in the data file that
/// holds a node record (stale copies in free pages included); returns how many were changed.
fn damage_node(data: &Path, key: &str, offset: usize) -> usize {
    let key: Vec<u8> = (0..8).map(|i| u8::from_str_radix(&key[2 * i..2 * i + 2], 16).unwrap()).collect();
    let mut bytes = std::fs::read(data).unwrap();
    let mut changed = 0;
    let mut at = 0;
    while let Some(found) = bytes[at..].windows(8).position(|w| w == key.as_slice()) {
        let i = at + found;
        at = i + 1;
        // An LMDB leaf node: data size (u16 low, u16 high), flags 0, key size 8, then the key and the value, whose
        // first byte is a node record's format (1 to 3).
        if i < 8 || bytes[i - 4..i] != [0, 0, 8, 0] {
            continue;
        }
        let size = usize::from(bytes[i - 8]) | usize::from(bytes[i - 7]) << 8;
        let value = i + 8;
        if (1..=3).contains(&bytes[value]) && offset < size {
            bytes[value + offset] ^= 0x04;
            changed += 1;
        }
    }
    std::fs::write(data, bytes).unwrap();
    changed
}

/// Every command meets the damaged root: one line naming the file and the key and saying to run `deeptree check`,
/// exit status 3 (as `check`'s on damage), never a tree with another value. `check` lists it (exit status 3); its repair is a store that `check` finds clean, that holds every other record,
/// and that shows the rest of the tree as before. Neither changes the store checked.
#[test]
fn a_damaged_node_is_an_error_in_every_command_and_a_repair_keeps_every_other_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_in(dir.path(), "store");
    assert_eq!(run(&db, &["check"]).status.code(), Some(0), "the upgraded copy is clean");
    // The analyst's task and mark, and the clock's depth fit, are meta entries a repair keeps.
    ok(&db, &["task", "add", "--moves", "d2d4", "--label", "Queen's pawn", "--time", "60"]);
    ok(&db, &["mark", "exclude", "e3d3", "--fen", ENDING]);
    let timed = ok(
        &db,
        &["analyze", "--fen", ENDING, "--for", "2+0.02", "--engine", FAKE, "--engine-depth", "2", "--time", "2"],
    );
    assert!(timed.contains("searches timed on 1 thread"), "{timed}");
    let (tasks_before, marks_before) = (ok(&db, &["task", "list"]), ok(&db, &["mark", "list"]));
    assert!(tasks_before.contains("Queen's pawn") && marks_before.contains("e3d3"), "{tasks_before} {marks_before}");
    let e4_before = ok(&db, &["show", "--moves", "e2e4", "--depth", "2"]);
    let stats_before: Value = serde_json::from_str(&ok(&db, &["stats", "--json"])).unwrap();
    let data = db.join("data.mdb");
    assert!(damage_node(&data, START, 20) > 0, "the root's record was found in the file");

    let out = dir.path().join("out.pgn");
    let games = Path::new(FIXTURE).join("games.pgn");
    // compact among them: a copy would make the damage permanent, with a clean structure and new checksums.
    let commands: [&[&str]; 7] = [
        &["show"],
        &["show", "--json", "--depth", "1"],
        &["stats"],
        &["export", "pgn", out.to_str().unwrap()],
        &["analyze", "--engine", FAKE, "--engine-depth", "2", "--max-depth", "1", "--workers", "1"],
        &["import", "pgn", games.to_str().unwrap()],
        &["compact"],
    ];
    for args in commands {
        let output = run(&db, args);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(3), "deeptree {args:?} on a damaged root: {message}");
        assert!(
            message.contains(&data.display().to_string())
                && message.contains(START)
                && message.contains("checksum")
                && message.contains("deeptree check"),
            "deeptree {args:?} names the file and the key: {message}"
        );
        assert_eq!(message.lines().count(), 1, "deeptree {args:?}: one line: {message}");
        if args[0] == "show" {
            assert_eq!(stdout(&output), "", "nothing of the tree is shown");
        }
    }

    let damaged = std::fs::read(&data).unwrap();
    let output = run(&db, &["check", "--json"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["clean"], false);
    assert_eq!(report["damaged"].as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(
        (report["damaged"][0]["database"].as_str(), report["damaged"][0]["key"].as_str()),
        (Some("nodes"), Some(START))
    );
    assert!(report["damaged"][0]["problem"].as_str().unwrap_or("").contains("checksum"), "{report}");
    let text = run(&db, &["check"]);
    assert!(stdout(&text).contains(&format!("damaged    nodes {START}: checksum mismatch")), "{}", stdout(&text));

    let repaired = dir.path().join("repaired");
    let output = run(&db, &["check", "--repair", "--out", repaired.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(3), "the store checked is still damaged: {}", stderr(&output));
    assert!(stdout(&output).contains("1 damaged records left out"), "{}", stdout(&output));
    assert!(std::fs::read(&data).unwrap() == damaged, "neither the check nor the repair wrote to the store checked");
    let output = run(&repaired, &["check", "--json"]);
    assert_eq!(output.status.code(), Some(0), "the repaired store is clean: {}", stdout(&output));
    let stats: Value = serde_json::from_str(&ok(&repaired, &["stats", "--json"])).unwrap();
    assert_eq!(stats["positions"].as_u64(), stats_before["positions"].as_u64().map(|n| n - 1));
    let names = |stats: &Value| -> Vec<Value> {
        stats["engines"].as_array().into_iter().flatten().map(|engine| engine["name"].clone()).collect()
    };
    // (The analyze above added its engine to the list before it met the damage.)
    let (kept, before) = (names(&stats), names(&stats_before));
    assert!(kept.starts_with(&before), "the list of engines is kept, numbers and all: {kept:?} {before:?}");
    assert_eq!(
        ok(&repaired, &["show", "--moves", "e2e4", "--depth", "2"]),
        e4_before,
        "the rest of the tree shows as before"
    );
    assert_eq!(ok(&repaired, &["task", "list"]), tasks_before, "the tasks are kept");
    assert_eq!(ok(&repaired, &["mark", "list"]), marks_before, "the marks are kept");
    let again = ok(
        &repaired,
        &["analyze", "--fen", ENDING, "--for", "2+0.02", "--engine", FAKE, "--engine-depth", "2", "--time", "2"],
    );
    assert!(again.contains("the store's depth model"), "the depth fit is kept: {again}");
    // A repair never writes over a store.
    let output = run(&db, &["check", "--repair", "--out", repaired.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("not empty"), "{}", stderr(&output));
}

/// A data file cut short (`truncate -s 50000`) is refused by every command with the one line of a damaged store
/// (exit status 3), naming the file, before anything is read from it: no command dies of a signal. `check` lists it, and its repair keeps what is there.
#[test]
fn a_data_file_cut_short_fails_every_command_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_in(dir.path(), "store");
    let data = db.join("data.mdb");
    assert!(std::fs::metadata(&data).unwrap().len() > 50_000);
    std::fs::File::options().write(true).open(&data).unwrap().set_len(50_000).unwrap();
    let out = dir.path().join("out.pgn");
    let games = Path::new(FIXTURE).join("games.pgn");
    let commands: [&[&str]; 8] = [
        &["show"],
        &["show", "--moves", "e2e4"],
        &["stats"],
        &["export", "pgn", out.to_str().unwrap()],
        &["analyze", "--engine", FAKE, "--engine-depth", "2", "--max-depth", "1", "--workers", "1"],
        &["import", "pgn", games.to_str().unwrap()],
        &["merge", db.to_str().unwrap()],
        &["compact"],
    ];
    for args in commands {
        let output = run(&db, args);
        let message = stderr(&output);
        assert_damage_line(&format!("deeptree {args:?} on a file cut short"), &data, output.status.code(), &message);
        assert!(message.contains("cut short"), "deeptree {args:?} says why: {message}");
    }
    // check reads it page by page, never mapped: it lists the file as cut short (exit status 3), and its repair
    // keeps the records it can still reach (here none: the pages of the tree's roots, written last, are cut off).
    let output = run(&db, &["check"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(stdout(&output).contains("cut short"), "{}", stdout(&output));
    let repaired = dir.path().join("repaired");
    let output = run(&db, &["check", "--repair", "--out", repaired.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_eq!(std::fs::metadata(&data).unwrap().len(), 50_000, "nothing was written to it");
    assert_eq!(run(&repaired, &["check"]).status.code(), Some(0), "the repair is clean");
    let stats: Value = serde_json::from_str(&ok(&repaired, &["stats", "--json"])).unwrap();
    assert!(stats["positions"].as_u64().is_some_and(|kept| kept < 131), "{stats}");
}

/// In a GUI the tree's answer meets the damaged root: the engine searches directly instead, and an `info string`
/// says so once in the session, naming the file and the key; every `go` still gets its move.
#[test]
fn a_uci_session_on_a_damaged_tree_searches_directly_and_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_in(dir.path(), "store");
    assert!(damage_node(&db.join("data.mdb"), START, 20) > 0);
    let mut uci = Uci::deeptree(&db);
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    uci.send(&format!("setoption name InnerEngine value {FAKE}"));
    uci.send("setoption name BackgroundAnalysis value false");
    uci.ready();
    let mut said = Vec::new();
    for go in ["go depth 3", "go movetime 200", "go depth 2"] {
        uci.send("position startpos");
        let (best, lines) = uci.best(go);
        assert!(!best.is_empty() && best != "0000", "{go}: {lines:?}");
        said.extend(lines.into_iter().filter(|line| line.contains("tree unreadable")));
    }
    assert_eq!(said.len(), 1, "said once in the session: {said:?}");
    assert!(said[0].starts_with("info string ") && said[0].contains(START) && said[0].contains("data.mdb"), "{said:?}");
}

/// Applies `change` to the LMDB leaf node of `key` (8 bytes) in the data file wherever it holds a node record
/// (stale copies in free pages included): `change(bytes, i)` with `i` the key's first byte, its node header the 8
/// bytes before. Returns how many were changed.
fn change_node(data: &Path, key: &str, change: impl Fn(&mut [u8], usize)) -> usize {
    let key: Vec<u8> = (0..8).map(|i| u8::from_str_radix(&key[2 * i..2 * i + 2], 16).unwrap()).collect();
    let mut bytes = std::fs::read(data).unwrap();
    let mut changed = 0;
    let mut at = 0;
    while let Some(found) = bytes[at..].windows(8).position(|w| w == key.as_slice()) {
        let i = at + found;
        at = i + 1;
        // Flags 0, key size 8, and a node record's format byte (1 to 4) first in the value.
        if i < 8 || bytes[i - 4..i] != [0, 0, 8, 0] || !(1..=4).contains(&bytes[i + 8]) {
            continue;
        }
        change(&mut bytes, i);
        changed += 1;
    }
    std::fs::write(data, bytes).unwrap();
    changed
}

/// LMDB's layout (64-bit, data version 1; see src/store/pages.rs): the page size and the root page of the named
/// database `name`, from the current meta page and the main database's root (a leaf in a store this small).
fn database_root(bytes: &[u8], name: &str) -> (usize, usize) {
    let (page_size, root, _) = database_record(bytes, name);
    (page_size, root)
}

/// As [`database_root`], with the offset in the file of the root's page number in the database's record.
fn database_record(bytes: &[u8], name: &str) -> (usize, usize, usize) {
    let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let page_size = u32::from_ne_bytes(bytes[40..44].try_into().unwrap()) as usize;
    // The meta of the greater transaction id: its main database's root at 128, the id at 144.
    let meta = if u64_at(page_size + 144) > u64_at(144) { page_size } else { 0 };
    let main = u64_at(meta + 128) * page_size;
    assert_eq!(bytes[main + 10] & 0x02, 0x02, "the main database's root is a leaf");
    let count = (usize::from(u16::from_ne_bytes([bytes[main + 12], bytes[main + 13]])) - 16) / 2;
    for i in 0..count {
        let node = main + usize::from(u16::from_ne_bytes([bytes[main + 16 + 2 * i], bytes[main + 17 + 2 * i]]));
        let key_size = usize::from(u16::from_ne_bytes([bytes[node + 6], bytes[node + 7]]));
        if &bytes[node + 8..node + 8 + key_size] == name.as_bytes() {
            // Its 48-byte record follows the key; the root page is its last u64.
            let at = node + 8 + key_size + 40;
            return (page_size, u64_at(at), at);
        }
    }
    panic!("no database {name}");
}

/// What a reader did on a damaged copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Met {
    /// Exactly what it did on the undamaged store.
    Same,
    /// Stopped with the one line of a damaged store, exit status 3.
    Line,
    /// A UCI session: answered every `go`, with an `info string` that says the tree is damaged.
    Told,
}

impl Met {
    /// The damage was said, one way or the other.
    fn said(self) -> bool {
        self != Met::Same
    }
}

/// The one line of a damaged store: on stderr, alone, naming the data file and saying to run `deeptree check`.
fn assert_damage_line(what: &str, data: &Path, code: Option<i32>, stderr: &str) {
    assert_eq!(code, Some(3), "{what}: exit status 3 on a damaged store (a signal has no code): {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{what}: one line: {stderr}");
    assert!(
        stderr.starts_with("deeptree: error: ")
            && stderr.contains(&data.display().to_string())
            && stderr.contains("`deeptree check`"),
        "{what}: the line names the store and says to run `deeptree check`: {stderr}"
    );
}

/// `deeptree ARGS` on the undamaged store and on the damaged one (`DB` in an argument stands for each one's
/// directory): the damaged one prints exactly what the undamaged one prints, or stops with the one line.
fn reader(clean: &Path, damaged: &Path, args: &[&str]) -> Met {
    let on = |db: &Path| {
        let db_text = db.display().to_string();
        let args: Vec<String> = args.iter().map(|arg| arg.replace("DB", &db_text)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run(db, &args);
        // What it wrote: stdout (the directory said as DB) and the file it exported, if any.
        let written = args.iter().find(|arg| arg.starts_with(&db_text) && arg.ends_with(".out"));
        let file = written.and_then(|path| std::fs::read(path).ok());
        (output.status.code(), stdout(&output).replace(&db_text, "DB"), file, stderr(&output))
    };
    let (code, printed, file, _) = on(clean);
    assert_eq!(code, Some(0), "deeptree {args:?} on the undamaged store");
    let after = on(damaged);
    if after.0 == Some(0) {
        assert!(after.1 == printed && after.2 == file, "deeptree {args:?} printed something else with exit 0");
        return Met::Same;
    }
    assert_damage_line(&format!("deeptree {args:?}"), &damaged.join("data.mdb"), after.0, &after.3);
    Met::Line
}

/// `deeptree serve` on the undamaged store and on the damaged one: the damaged one answers the root's position as
/// the undamaged one does, or stops with the one line.
fn serve_reader(clean: &Path, damaged: &Path) -> Met {
    use std::io::{BufRead, BufReader, Read, Write};
    let on = |db: &Path| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(db)
            .args(["serve", "--port", "0"])
            .env_remove("DEEPTREE_DB")
            .env_remove("DEEPTREE_CONFIG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut url = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut url).unwrap();
        let answer = url.trim().strip_prefix("http://127.0.0.1:").and_then(|rest| {
            let port: u16 = rest.split_once('/')?.0.parse().ok()?;
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            stream.set_read_timeout(Some(PATIENCE)).ok()?;
            let request = format!("GET /api/position HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).ok()?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer).ok()?;
            Some(answer)
        });
        // Its sampler of the live view reads the store too, within its first second.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let exited = child.try_wait().unwrap();
        if exited.is_none() {
            child.kill().unwrap();
        }
        let output = child.wait_with_output().unwrap();
        let body = answer.and_then(|answer| answer.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()));
        (exited.and_then(|status| status.code()), body, stderr(&output))
    };
    let (code, body, _) = on(clean);
    assert_eq!(code, None, "serve runs on the undamaged store");
    assert!(body.as_deref().is_some_and(|body| body.contains("\"fen\"")), "{body:?}");
    let (code, after, message) = on(damaged);
    if code.is_none() {
        assert_eq!(after, body, "serve answers the root as on the undamaged store");
        return Met::Same;
    }
    // Started, then stopped: its line follows the one that says it serves.
    let message: String = message.lines().filter(|line| !line.contains("serving the tree")).collect();
    assert_damage_line("serve", &damaged.join("data.mdb"), code, &message);
    Met::Line
}

/// A GUI's session with Stockfish, two `go`s: the `info string`s, the `bestmove`s, and how the process ended.
fn uci_session(db: &Path) -> (Vec<String>, Vec<String>, Output) {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let engine = common::stockfish();
    let (mut said, mut best) = (Vec::new(), Vec::new());
    for moves in ["", " moves e2e4"] {
        let commands = format!(
            "uci\nsetoption name InnerEngine value {}\nsetoption name BackgroundAnalysis value false\nisready\n\
             position startpos{moves}\ngo depth 3\n",
            engine.display()
        );
        if stdin.write_all(commands.as_bytes()).and_then(|()| stdin.flush()).is_err() {
            break;
        }
        for line in lines.by_ref() {
            if line.starts_with("info string") {
                said.push(line.clone());
            }
            if line.starts_with("bestmove") {
                best.push(line);
                break;
            }
        }
    }
    let _ = stdin.write_all(b"quit\n");
    drop(stdin);
    (said, best, child.wait_with_output().unwrap())
}

/// A GUI's session on the damaged store, with Stockfish: two `go`s. Each is answered as on the undamaged store, or
/// with an `info string` that says the tree is damaged and names the store (the session goes on), or the session
/// says so in an `info string` and stops with the one line (a fault in LMDB's map, where it cannot go on).
fn uci_reader(clean: &Path, damaged: &Path) -> Met {
    let (_, best_before, _) = uci_session(clean);
    assert_eq!(best_before.len(), 2, "{best_before:?}");
    let (said, best, output) = uci_session(damaged);
    let data = damaged.join("data.mdb").display().to_string();
    let damage: Vec<&String> = said.iter().filter(|line| line.contains("damaged") && line.contains(&data)).collect();
    if best.len() == 2 {
        assert_eq!(output.status.code(), Some(0), "{said:?}");
        if damage.is_empty() {
            assert_eq!(best, best_before, "answered as on the undamaged store: {said:?}");
            return Met::Same;
        }
        assert_eq!(damage.len(), 1, "said once: {said:?}");
        return Met::Told;
    }
    assert_eq!(damage.len(), 1, "the GUI is told why the engine stopped: {said:?}");
    assert!(damage[0].contains("`deeptree check`"), "{said:?}");
    assert_damage_line("a UCI session", &damaged.join("data.mdb"), output.status.code(), &stderr(&output));
    Met::Line
}

/// Every reader on a damaged copy, against the undamaged store: what each did.
fn readers(clean: &Path, damaged: &Path) -> Vec<(&'static str, Met)> {
    vec![
        ("show", reader(clean, damaged, &["show"])),
        ("show e2e4", reader(clean, damaged, &["show", "--moves", "e2e4", "--depth", "2"])),
        ("show json", reader(clean, damaged, &["show", "--json", "--depth", "3"])),
        ("stats", reader(clean, damaged, &["stats"])),
        ("export pgn", reader(clean, damaged, &["export", "pgn", "DB.pgn.out"])),
        ("export epd", reader(clean, damaged, &["export", "epd", "DB.epd.out"])),
        ("serve", serve_reader(clean, damaged)),
        ("uci", uci_reader(clean, damaged)),
    ]
}

/// One node's LMDB flags say it holds duplicates (`F_DUPDATA`), in the nodes database, made without them: LMDB
/// follows a cursor that is not there (this killed `check` itself, and every reader, with SIGSEGV). `check` finds it
/// by its page walk, before any LMDB call on the database, and exits 3; its repair copies every other record; every
/// reader stops with the one line.
#[test]
fn a_node_flagged_as_duplicates_is_found_by_check_and_stops_every_reader_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let clean = store_in(dir.path(), "clean");
    let damaged = store_in(dir.path(), "damaged");
    let positions = |db: &Path| -> u64 {
        let stats: Value = serde_json::from_str(&ok(db, &["stats", "--json"])).unwrap();
        stats["positions"].as_u64().unwrap()
    };
    let before = positions(&clean);
    assert!(change_node(&damaged.join("data.mdb"), START, |bytes, key| bytes[key - 4] |= 0x04) > 0);

    let output = run(&damaged, &["check", "--json"]);
    assert_eq!(output.status.code(), Some(3), "check names the damage (a signal has no code): {}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let problems: Vec<&str> =
        report["damaged"].as_array().unwrap().iter().filter_map(|d| d["problem"].as_str()).collect();
    assert!(problems.iter().any(|problem| problem.contains("F_DUPDATA") && problem.contains(START)), "{problems:?}");
    let repaired = dir.path().join("repaired");
    let output = run(&damaged, &["check", "--repair", "--out", repaired.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_eq!(run(&repaired, &["check"]).status.code(), Some(0), "the repair is clean");
    assert_eq!(positions(&repaired), before - 1, "every other position is kept");

    let met = readers(&clean, &damaged);
    assert!(met.iter().all(|(_, met)| met.said()), "every reader meets the root: {met:?}");
}

/// A key byte of a record changed on disk: the record lies under another key, and a lookup of its own key finds
/// nothing. Its place in its leaf tells: the records beside a key found absent are checked, and the moved one fails
/// its checksum under its new key. Before, `show` printed the tree without the position's subtree, exit 0.
#[test]
fn a_record_under_a_damaged_key_is_damage_not_a_position_never_analysed() {
    let dir = tempfile::tempdir().unwrap();
    let clean = store_in(dir.path(), "clean");
    // The position after 1. e4: its record, with every byte of its key changed in turn in a copy of its own.
    let e4 = "823c9b50fd114196";
    for (byte, mask) in [(0, 0x80u8), (3, 0x10), (7, 0x01)] {
        let damaged = store_in(dir.path(), &format!("key-{byte}"));
        assert!(change_node(&damaged.join("data.mdb"), e4, |bytes, key| bytes[key + byte] ^= mask) > 0);
        let output = run(&damaged, &["check"]);
        assert_eq!(output.status.code(), Some(3), "{}", stdout(&output));
        let met = readers(&clean, &damaged);
        for (what, met) in &met {
            if what.starts_with("show") || what.starts_with("export") {
                assert_eq!(*met, Met::Line, "{what} walks through 1. e4: {met:?}");
            }
        }
    }
}

/// The nodes database's root page (a branch in the fixture) and the file offset of its `index`th child's node.
fn nodes_root_child(bytes: &[u8], index: usize) -> (usize, usize) {
    let (page_size, root) = database_root(bytes, "nodes");
    let page = root * page_size;
    assert_eq!(bytes[page + 10] & 0x01, 0x01, "the nodes database's root is a branch page");
    let at = page + 16 + 2 * index;
    (root, page + usize::from(u16::from_ne_bytes([bytes[at], bytes[at + 1]])))
}

/// A page number of a branch page of the nodes database damaged past the end of the store: LMDB says
/// `MDB_PAGE_NOTFOUND` (a read there would fault), every reader stops with the one line (or prints what it printed,
/// where it never goes there), `check` names the page and its repair keeps the pages it can reach.
#[test]
fn a_page_number_past_the_end_stops_readers_with_one_line_and_check_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let clean = store_in(dir.path(), "clean");
    let damaged = store_in(dir.path(), "damaged");
    let data = damaged.join("data.mdb");
    let mut bytes = std::fs::read(&data).unwrap();
    // Its second child's page number (the node's first three u16) set far past the end.
    let (_, node) = nodes_root_child(&bytes, 1);
    bytes[node..node + 6].copy_from_slice(&[0xff, 0xff, 0x0f, 0, 0, 0]);
    std::fs::write(&data, &bytes).unwrap();

    let output = run(&damaged, &["check"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(stdout(&output).contains("past the end"), "{}", stdout(&output));
    let repaired = dir.path().join("repaired");
    assert_eq!(run(&damaged, &["check", "--repair", "--out", repaired.to_str().unwrap()]).status.code(), Some(3));
    assert_eq!(run(&repaired, &["check"]).status.code(), Some(0), "the repair is clean");

    let met = readers(&clean, &damaged);
    assert!(met.iter().any(|(_, met)| met.said()), "the damage is met: {met:?}");
}

/// A child page number of the nodes database's root damaged into the number of another page of the file (the root
/// itself, or a branch of another database): LMDB's cursors met a branch where a leaf belongs and aborted the process
/// on their own assertions (SIGABRT, LMDB's message and no word of deeptree's). The open reads each child of a root
/// branch: every reader stops with the one line at open, and `check` names the damage.
#[test]
fn a_root_child_damaged_into_another_page_stops_every_reader_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let clean = store_in(dir.path(), "clean");
    let damaged = store_in(dir.path(), "damaged");
    let data = damaged.join("data.mdb");
    let mut bytes = std::fs::read(&data).unwrap();
    // Its first child's page number (the node's first three u16) set to the root's own.
    let (root, node) = nodes_root_child(&bytes, 0);
    let number = root.to_ne_bytes();
    bytes[node..node + 4].copy_from_slice(&number[..4]);
    bytes[node + 4..node + 6].copy_from_slice(&[number[4], number[5]]);
    std::fs::write(&data, &bytes).unwrap();

    let output = run(&damaged, &["check"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let met = readers(&clean, &damaged);
    for (what, met) in &met {
        if *what != "uci" {
            assert_eq!(*met, Met::Line, "{what} stops at open: {met:?}");
        }
    }
    assert_eq!(met.last().map(|(_, met)| *met), Some(Met::Told), "a UCI session searches directly and says why");
}

/// The nodes database's record in the list of databases damaged: its root page number changed into one of its own
/// leaves (a page that reads as a whole tree of fewer records). Found by the reads every open makes of the databases'
/// records and roots, before LMDB follows them: every reader stops with the one line, and `check` names it. Before,
/// the readers showed the tree of that leaf's records, exit 0.
#[test]
fn a_database_record_damaged_into_another_root_stops_every_reader_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let clean = store_in(dir.path(), "clean");
    let damaged = store_in(dir.path(), "damaged");
    let data = damaged.join("data.mdb");
    let mut bytes = std::fs::read(&data).unwrap();
    let (page_size, root, at) = database_record(&bytes, "nodes");
    let page = root * page_size;
    assert_eq!(bytes[page + 10] & 0x01, 0x01, "the nodes database's root is a branch page");
    let node = page + usize::from(u16::from_ne_bytes([bytes[page + 16], bytes[page + 17]]));
    let leaf = u64::from(u16::from_ne_bytes([bytes[node], bytes[node + 1]]));
    bytes[at..at + 8].copy_from_slice(&leaf.to_ne_bytes());
    std::fs::write(&data, &bytes).unwrap();

    let output = run(&damaged, &["check"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(stdout(&output).contains("database nodes: its root page"), "{}", stdout(&output));
    let met = readers(&clean, &damaged);
    assert!(met.iter().all(|(_, met)| met.said()), "every reader opens the store: {met:?}");
}
