//! The analyst's tasks through the command line: added, grown by `analyze --tasks` within their budgets and
//! priorities, resumed by a later run, listed with their progress; bad tasks refused. The scripted fake engine (its
//! searches take a set time) keeps the runs exact and short.

mod common;

use std::{path::Path, process::Command};

use serde_json::Value;

fn deeptree(db: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_deeptree")).arg("--db").arg(db).args(args).output().unwrap()
}

fn ok(db: &Path, args: &[&str]) -> String {
    let out = deeptree(db, args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn tasks(db: &Path) -> Vec<Value> {
    serde_json::from_str::<Value>(&ok(db, &["task", "list", "--json"])).unwrap().as_array().unwrap().clone()
}

/// `analyze --tasks` with the fake engine, each search 2 ms, one worker, a narrow move distance, at most `time`
/// seconds.
fn grow_tasks(db: &Path, time: &str) -> String {
    let engine = format!("{} --mode smooth --latency-ms 2", common::fake());
    let args = ["--engine-depth", "10", "--move-distance", "5", "--workers", "1", "--time", time];
    ok(db, &[&["analyze", "--tasks", "--engine", &engine][..], &args].concat())
}

#[test]
fn tasks_grow_within_their_budgets_by_priority_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    ok(&db, &["task", "add", "--moves", "e2e4 c7c5", "--label", "Sicilian", "--priority", "2", "--time", "60"]);
    ok(&db, &["task", "add", "--moves", "d2d4", "--time", "60", "--max-depth", "3"]);
    // The most urgent, and the smallest: grown first, its budget spent within the first run.
    ok(&db, &["task", "add", "--moves", "c2c4", "--time", "0.5", "--priority", "3"]);
    let listed = ok(&db, &["task", "list"]);
    assert!(listed.contains("Sicilian") && listed.contains("priority  2"), "{listed}");

    // A run cut short by its own budget: every open task has progress, none is done but the small one.
    grow_tasks(&db, "4");
    let first = tasks(&db);
    assert_eq!(first.len(), 3);
    let depth = |t: &Value| t["settled_depth"].as_u64();
    let spent = |t: &Value| t["spent_seconds"].as_f64().unwrap();
    assert!(spent(&first[0]) > 0.0 && first[0]["evaluations"].as_u64() > Some(0));
    // Priority 2 settles up to 2 depths ahead of priority 0: never behind while it is open.
    assert!(depth(&first[0]) >= depth(&first[1]), "{first:?}");
    // The small task's budget bounds it (with the length of one step's last search over it).
    assert!(spent(&first[2]) >= 0.5 && spent(&first[2]) < 1.5, "{first:?}");
    let small_evaluations = first[2]["evaluations"].as_u64();

    // Resumed: the open tasks go on from where they were, and the spent one is not grown again.
    grow_tasks(&db, "2");
    let second = tasks(&db);
    assert!(spent(&second[0]) > spent(&first[0]), "{second:?}");
    assert!(depth(&second[0]) >= depth(&first[0]));
    assert_eq!(second[2]["evaluations"].as_u64(), small_evaluations, "a spent task grew again");
    // A task's depth bounds it: the d4 task stops at 3.
    assert!(depth(&second[1]).is_none_or(|d| d <= 3), "{second:?}");

    let removed = ok(&db, &["task", "remove", "3"]);
    assert!(removed.contains("task 3 removed"), "{removed}");
    assert_eq!(tasks(&db).len(), 2);
    // The tree the task grew stays.
    let shown = ok(&db, &["show", "--moves", "c2c4", "--depth", "1", "--json"]);
    assert!(serde_json::from_str::<Value>(&shown).unwrap()["moves"].as_array().is_some_and(|m| !m.is_empty()));
}

#[test]
fn bad_tasks_are_refused_and_nothing_is_added() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    for (args, says) in [
        (vec!["task", "add", "--moves", "e2e5", "--time", "10"], "illegal"),
        (vec!["task", "add", "--time", "0"], "above 0"),
        (vec!["task", "add", "--time", "10", "--priority", "17"], "17"),
        (vec!["task", "add", "--fen", "not a fen", "--time", "10"], "not a fen"),
    ] {
        let out = deeptree(&db, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{args:?}: {stderr}");
    }
    let out = deeptree(&db, &["task", "remove", "7"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no task 7"));
    if db.exists() {
        assert!(tasks(&db).is_empty());
    }
    // With no task, a run says so and grows nothing.
    ok(&db, &["task", "add", "--time", "1", "--max-depth", "0"]);
    let said = grow_tasks(&db, "5");
    assert!(said.contains("root"), "{said}");
    assert!(grow_tasks(&db, "5").contains("every task is done"));
}
