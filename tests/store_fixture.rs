//! The stored format's promise: a store written by an earlier release opens, and shows the same, with every later
//! build. tests/fixtures/store-v1 holds a small store written by deeptree 03e9fbd (evaluations of two engines, settled
//! depths, the edges of a line, a screen bound, imported moves with placeholder scores, EPD evaluations with a mate)
//! and what that build printed for it; tests/fixtures/store-v2 one of schema 5 written by 639f8ae (a split's spine, answers
//! marked by the way they were asked). See their README.md. A fixture is never written: every test opens a copy.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

/// A committed store, the release that wrote it, and the `show` commands whose output was recorded when it was
/// made, each with its file.
struct Fixture {
    dir: &'static str,
    release: &'static str,
    shown: &'static [(&'static [&'static str], &'static str)],
}

impl Fixture {
    fn file(&self, name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(self.dir).join(name)
    }

    fn recorded(&self, name: &str) -> String {
        std::fs::read_to_string(self.file(name))
            .unwrap_or_else(|e| panic!("the recorded {}/{name} cannot be read: {e}", self.dir))
    }

    /// Every file of the committed fixture, by name, with its bytes.
    fn committed_files(&self) -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(self.file(""))
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                (entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path()).unwrap())
            })
            .collect()
    }
}

/// Schema 4, written by 03e9fbd (see tests/fixtures/store-v1/README.md).
const V1: Fixture = Fixture {
    dir: "store-v1",
    release: "03e9fbd",
    shown: &[
        (&["show", "--depth", "3"], "show-depth3.txt"),
        (&["show", "--json", "--depth", "3"], "show-depth3.json"),
        (&["show", "--moves", "e2e4", "--depth", "2"], "show-e2e4-depth2.txt"),
        (&["show", "--moves", "e2e4 c7c5 g1f3", "--depth", "2"], "show-sicilian-depth2.txt"),
        (&["show", "--moves", "e2e4 e7e5 f1c4 b8c6 d1h5 g8f6", "--depth", "1"], "show-mate-depth1.txt"),
    ],
};

/// Schema 5 with checksums, written by the release before the house's part 2 (see tests/fixtures/store-v2/README.md).
const V2: Fixture = Fixture {
    dir: "store-v2",
    release: "639f8ae",
    shown: &[
        (&["show", "--depth", "3"], "show-depth3.txt"),
        (&["show", "--json", "--depth", "3"], "show-depth3.json"),
        (&["show", "--moves", "d2d4", "--depth", "2"], "show-d4-depth2.txt"),
        (&["show", "--moves", "e2e4", "--depth", "1"], "show-e4-depth1.txt"),
        (&["show", "--moves", "e2e4 e7e5 f1c4 b8c6 d1h5 g8f6", "--depth", "1"], "show-mate-depth1.txt"),
    ],
};

/// Fields of `stats --json` that depend on where the copy lies and how its pages are laid out, not on what it holds.
const STATS_VARYING: [&str; 5] = ["bytes", "tree_bytes", "map_size", "path", "claims"];

/// A copy of the fixture's store in a temporary directory, and what the committed fixture held when it was made.
struct StoreCopy {
    fixture: &'static Fixture,
    _dir: tempfile::TempDir,
    db: PathBuf,
    committed: BTreeMap<String, Vec<u8>>,
}

impl StoreCopy {
    fn new(fixture: &'static Fixture) -> StoreCopy {
        let committed = fixture.committed_files();
        assert!(committed.contains_key("data.mdb"), "the fixture has no data.mdb: {:?}", committed.keys());
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store");
        std::fs::create_dir(&db).unwrap();
        std::fs::copy(fixture.file("data.mdb"), db.join("data.mdb")).unwrap();
        StoreCopy { fixture, _dir: dir, db, committed }
    }

    /// Runs deeptree on the copy with the fixture's settings (nothing from the environment) and returns its stdout.
    fn deeptree(&self, args: &[&str]) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(&self.db)
            .arg("--config")
            .arg(self.fixture.file("deeptree.toml"))
            .args(args)
            .env_remove("DEEPTREE_DB")
            .env_remove("DEEPTREE_CONFIG")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "deeptree {args:?} fails on a copy of the store written by {} (tests/fixtures/{}): {}",
            self.fixture.release,
            self.fixture.dir,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap_or_else(|e| panic!("deeptree {args:?} printed no UTF-8: {e}"))
    }

    /// Every recorded `show` prints what the build that wrote the store printed.
    fn assert_shows_as_recorded(&self, after: &str) {
        for &(args, file) in self.fixture.shown {
            let shown = self.deeptree(args);
            if file.ends_with(".json") {
                let shown: Value = serde_json::from_str(&shown)
                    .unwrap_or_else(|e| panic!("deeptree {args:?} {after} prints no JSON: {e}\n{shown}"));
                let expected: Value = serde_json::from_str(&self.fixture.recorded(file)).unwrap();
                if let Some(difference) = json_difference("", &expected, &shown) {
                    panic!("deeptree {args:?} {after} shows the fixture store otherwise than {file}: {difference}");
                }
            } else if let Some(difference) = text_difference(&self.fixture.recorded(file), &shown) {
                panic!("deeptree {args:?} {after} shows the fixture store otherwise than {file}: {difference}");
            }
        }
    }

    /// `stats --json` counts what the build that wrote the store counted.
    fn assert_stats_as_recorded(&self, after: &str) {
        let shown: Value = serde_json::from_str(&self.deeptree(&["stats", "--json"])).unwrap();
        let expected: Value = serde_json::from_str(&self.fixture.recorded("stats.json")).unwrap();
        let (shown, expected) = (stable_stats(shown), stable_stats(expected));
        if let Some(difference) = json_difference("", &expected, &shown) {
            panic!("deeptree stats --json {after} counts the fixture store otherwise than stats.json: {difference}");
        }
    }

    /// The committed fixture is as it was when the test began: only the copy was opened.
    fn assert_fixture_untouched(&self) {
        let now = self.fixture.committed_files();
        assert_eq!(
            now.keys().collect::<Vec<_>>(),
            self.committed.keys().collect::<Vec<_>>(),
            "files appeared in or vanished from tests/fixtures/{}: the committed store was opened, not a copy",
            self.fixture.dir
        );
        for (name, bytes) in &now {
            assert!(
                bytes == &self.committed[name],
                "tests/fixtures/{}/{name} was written by the test",
                self.fixture.dir
            );
        }
    }
}

/// `stats --json` without the fields that vary with the copy, and without the fields added since the fixture was
/// made: each engine's `by_method` (added deliberately with the marking of answers by the way they were asked),
/// which must count every one of the engine's evaluations, and `engine_work` (added with the count of the nodes the
/// position evaluations hold), which counts at most one evaluation a position.
fn stable_stats(mut stats: Value) -> Value {
    let object = stats.as_object_mut().expect("stats --json prints an object");
    for field in STATS_VARYING {
        object.remove(field);
    }
    if let Some(work) = object.remove("engine_work") {
        let evaluated = work["position_evaluations"].as_u64().expect("engine_work counts position evaluations");
        assert!(work["nodes"].as_u64().is_some(), "engine_work counts nodes: {work}");
        assert!(Some(evaluated) <= object["positions"].as_u64(), "one evaluation a position at most: {work}");
    }
    for engine in object.get_mut("engines").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(methods) = engine.as_object_mut().and_then(|e| e.remove("by_method")) {
            let counted: u64 =
                methods.as_object().expect("by_method is an object").values().filter_map(Value::as_u64).sum();
            assert_eq!(Some(counted), engine["evaluations"].as_u64(), "by_method counts every evaluation: {engine}");
        }
    }
    stats
}

/// The first line where `shown` differs from `expected`, or `None` where they are the same.
fn text_difference(expected: &str, shown: &str) -> Option<String> {
    if expected == shown {
        return None;
    }
    let (mut expected_lines, mut shown_lines) = (expected.lines(), shown.lines());
    for number in 1.. {
        match (expected_lines.next(), shown_lines.next()) {
            (Some(e), Some(s)) if e == s => continue,
            (None, None) => break,
            (e, s) => {
                return Some(format!(
                    "line {number} was {:?}, is now {:?}",
                    e.unwrap_or("(the end)"),
                    s.unwrap_or("(the end)")
                ));
            }
        }
    }
    Some("the same lines, with other line ends".to_owned())
}

/// The first place (a JSON path) where `shown` differs from `expected`, or `None` where they are equal.
fn json_difference(path: &str, expected: &Value, shown: &Value) -> Option<String> {
    match (expected, shown) {
        (Value::Object(e), Value::Object(s)) => {
            for (key, value) in e {
                match s.get(key) {
                    None => return Some(format!("{path}.{key} is gone (was {value})")),
                    Some(now) => {
                        if let Some(difference) = json_difference(&format!("{path}.{key}"), value, now) {
                            return Some(difference);
                        }
                    }
                }
            }
            s.iter().find(|(key, _)| !e.contains_key(*key)).map(|(key, now)| format!("{path}.{key} is new ({now})"))
        }
        (Value::Array(e), Value::Array(s)) => {
            for (i, (value, now)) in e.iter().zip(s).enumerate() {
                if let Some(difference) = json_difference(&format!("{path}[{i}]"), value, now) {
                    return Some(difference);
                }
            }
            (e.len() != s.len()).then(|| format!("{path} had {} items, has {}", e.len(), s.len()))
        }
        _ => (expected != shown)
            .then(|| format!("{} was {expected}, is now {shown}", if path.is_empty() { "." } else { path })),
    }
}

#[test]
fn show_prints_the_fixture_stores_as_the_releases_that_wrote_them() {
    for fixture in [&V1, &V2] {
        let copy = StoreCopy::new(fixture);
        copy.assert_shows_as_recorded(&format!("on the store as {} wrote it", fixture.release));
        copy.assert_fixture_untouched();
    }
}

#[test]
fn stats_counts_the_fixture_stores_as_the_releases_that_wrote_them() {
    for fixture in [&V1, &V2] {
        let copy = StoreCopy::new(fixture);
        copy.assert_stats_as_recorded(&format!("on the store as {} wrote it", fixture.release));
        copy.assert_fixture_untouched();
    }
}

/// Commands that open the store for writing (and would migrate an older schema) take it as it is: importing its own
/// games again adds nothing, and a compacted copy shows and counts the same.
#[test]
fn the_fixture_store_opens_for_writing_and_keeps_its_tree() {
    for fixture in [&V1, &V2] {
        opens_for_writing_and_keeps_its_tree(fixture);
    }
}

fn opens_for_writing_and_keeps_its_tree(fixture: &'static Fixture) {
    let copy = StoreCopy::new(fixture);
    // A reader first (it leaves a lock file behind), then writers.
    copy.deeptree(&["show", "--depth", "1"]);
    let games = copy.fixture.file("games.pgn");
    let import: Value =
        serde_json::from_str(&copy.deeptree(&["import", "pgn", games.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(
        (import["new_edges"].as_u64(), import["new_nodes"].as_u64()),
        (Some(0), Some(0)),
        "the games imported into the fixture store are not found in it again: {import}"
    );
    copy.assert_shows_as_recorded("after importing the fixture's games again");
    copy.deeptree(&["compact"]);
    copy.assert_shows_as_recorded("after compact");
    copy.assert_stats_as_recorded("after compact");
    copy.assert_fixture_untouched();
}

/// A command that writes upgrades the store to schema 5 in passing: every value of every database is then sealed
/// with its checksum (checked here with the store's own codec, record by record, and by `deeptree check`), and the
/// store shows as before. A command that only reads changes nothing of the file.
#[test]
fn a_command_that_writes_upgrades_the_fixture_to_schema_5_and_every_record_verifies() {
    use deeptree::store::checksum::{self, Table};
    use heed::types::{Bytes, Str};

    let copy = StoreCopy::new(&V1);
    let data = copy.db.join("data.mdb");
    copy.deeptree(&["stats"]);
    copy.deeptree(&["check"]);
    assert!(
        std::fs::read(&data).unwrap() == copy.committed["data.mdb"],
        "a command that only reads wrote to the store"
    );
    let games = copy.fixture.file("games.pgn");
    copy.deeptree(&["import", "pgn", games.to_str().unwrap()]);
    let report: Value = serde_json::from_str(&copy.deeptree(&["check", "--json"])).unwrap();
    assert_eq!(
        (&report["schema"], &report["checksums"], &report["clean"], &report["nodes"], &report["links"]),
        (&Value::from(5), &Value::from(true), &Value::from(true), &Value::from(131), &Value::from(250)),
        "{report}"
    );
    // SAFETY: the copy is closed; this test alone opens it.
    let env = unsafe { heed::EnvOpenOptions::new().map_size(1 << 30).max_dbs(6).open(&copy.db).unwrap() };
    let rtxn = env.read_txn().unwrap();
    let mut sealed = 0;
    for (name, table) in [("nodes", Table::Nodes), ("link_pages", Table::LinkPages)] {
        let database: heed::Database<Bytes, Bytes> = env.open_database(&rtxn, Some(name)).unwrap().unwrap();
        for item in database.iter(&rtxn).unwrap() {
            let (key, value) = item.unwrap();
            checksum::open(table, key, value).unwrap_or_else(|e| panic!("{name} {key:02x?}: {e}"));
            sealed += 1;
        }
    }
    let meta: heed::Database<Str, Bytes> = env.open_database(&rtxn, Some("meta")).unwrap().unwrap();
    for item in meta.iter(&rtxn).unwrap() {
        let (name, value) = item.unwrap();
        if name == "schema_version" {
            assert_eq!(value, 5u32.to_be_bytes(), "the schema version stays bare, for every deeptree to read");
        } else {
            checksum::open(Table::Meta, name.as_bytes(), value).unwrap_or_else(|e| panic!("meta {name}: {e}"));
            sealed += 1;
        }
    }
    assert!(sealed > 131, "{sealed} values");
    drop(rtxn);
    env.prepare_for_closing().wait();
    copy.assert_shows_as_recorded("after the upgrade to schema 5");
    copy.assert_stats_as_recorded("after the upgrade to schema 5");
    copy.assert_fixture_untouched();
}
