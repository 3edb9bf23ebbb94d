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

/// Every command meets the damaged root: an error naming the file and the key, never a tree with another value.
/// `check` lists it (exit status 3); its repair is a store that `check` finds clean, that holds every other record,
/// and that shows the rest of the tree as before. Neither changes the store checked.
#[test]
fn a_damaged_node_is_an_error_in_every_command_and_a_repair_keeps_every_other_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_in(dir.path(), "store");
    assert_eq!(run(&db, &["check"]).status.code(), Some(0), "the upgraded copy is clean");
    let e4_before = ok(&db, &["show", "--moves", "e2e4", "--depth", "2"]);
    let stats_before: Value = serde_json::from_str(&ok(&db, &["stats", "--json"])).unwrap();
    let data = db.join("data.mdb");
    assert!(damage_node(&data, START, 20) > 0, "the root's record was found in the file");

    let out = dir.path().join("out.pgn");
    let games = Path::new(FIXTURE).join("games.pgn");
    let commands: [&[&str]; 6] = [
        &["show"],
        &["show", "--json", "--depth", "1"],
        &["stats"],
        &["export", "pgn", out.to_str().unwrap()],
        &["analyze", "--engine", FAKE, "--engine-depth", "2", "--max-depth", "1", "--workers", "1"],
        &["import", "pgn", games.to_str().unwrap()],
    ];
    for args in commands {
        let output = run(&db, args);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "deeptree {args:?} on a damaged root: {message}");
        assert!(
            message.contains(&data.display().to_string()) && message.contains(START) && message.contains("checksum"),
            "deeptree {args:?} names the file and the key: {message}"
        );
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
    // A repair never writes over a store.
    let output = run(&db, &["check", "--repair", "--out", repaired.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("not empty"), "{}", stderr(&output));
}

/// A data file cut short (`truncate -s 50000`) is refused by every command with a message naming the file, before
/// anything is read from it: no command dies of a signal. `check` lists it, and its repair keeps what is there.
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
        assert_eq!(
            output.status.code(),
            Some(1),
            "deeptree {args:?} on a file cut short (a signal has no code): {message}"
        );
        assert!(
            message.contains(&data.display().to_string()) && message.contains("cut short"),
            "deeptree {args:?} says why, naming the file: {message}"
        );
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
