//! The analyst's tasks through the command line: added, grown by `analyze --tasks` within their budgets and
//! priorities, resumed by a later run, listed with their progress; bad tasks refused (a budget beyond a year too); a
//! task removed while a run grows it stays removed; two runs sharing the store both count. The scripted fake engine (its
//! searches take a set time) keeps the runs exact and short.

mod common;

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

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
fn analyze_args(time: &str) -> Vec<String> {
    let engine = format!("{} --mode smooth --latency-ms 2", common::fake());
    ["analyze", "--tasks", "--engine", &engine, "--engine-depth", "10", "--move-distance", "5", "--workers", "1"]
        .iter()
        .map(|s| s.to_string())
        .chain(["--time".to_owned(), time.to_owned()])
        .collect()
}

fn grow_tasks(db: &Path, time: &str) -> String {
    ok(db, &analyze_args(time).iter().map(String::as_str).collect::<Vec<_>>())
}

/// The same run in the background.
fn spawn_analyze(db: &Path, time: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .args(analyze_args(time))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
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
    // A task of depth 0 settles that depth in its first run, and is done.
    let said = grow_tasks(&db, "5");
    assert!(said.contains("task 1") && said.contains("settled depth 0"), "{said}");
    assert!(grow_tasks(&db, "5").contains("every task is done"));
}

/// A budget beyond a year is refused when the task is added, and nothing is added.
#[test]
fn a_budget_beyond_a_year_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let out = deeptree(&db, &["task", "add", "--moves", "e2e4", "--time", "1e20"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("at most 31622400 (a year)"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    if db.join("data.mdb").exists() {
        assert!(tasks(&db).is_empty());
    }
}

/// A task removed while a run grows it stays removed: the run's progress goes to the task as the store holds it.
#[test]
fn a_task_removed_during_a_run_stays_removed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    ok(&db, &["task", "add", "--moves", "e2e4", "--time", "100"]);
    let run = spawn_analyze(&db, "4");
    std::thread::sleep(Duration::from_millis(1500));
    let removed = ok(&db, &["task", "remove", "1"]);
    println!("{removed}");
    assert!(tasks(&db).is_empty(), "removed");
    let out = run.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let left = tasks(&db);
    println!("after the run: {left:?}");
    assert!(left.is_empty(), "the removed task is back: {left:?}");
}

/// Two `analyze --tasks` sharing the store (as §5.3 allows) each add their progress to the task: neither run's is
/// lost. (Each takes the budget left when it starts, so together they may spend up to twice it: docs/design.md §6.4.)
#[test]
fn two_runs_sharing_the_store_both_count() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    ok(&db, &["task", "add", "--moves", "e2e4", "--time", "3"]);
    let started = Instant::now();
    let a = spawn_analyze(&db, "10");
    let b = spawn_analyze(&db, "10");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    println!("both ended after {:.1} s", started.elapsed().as_secs_f64());
    assert!(a.status.success() && b.status.success());
    for out in [&a, &b] {
        println!("--- a run said:\n{}", String::from_utf8_lossy(&out.stdout));
    }
    let task = &tasks(&db)[0];
    println!("task after both runs: {task}");
    let spent = task["spent_seconds"].as_f64().unwrap();
    // Each run grew about 3 s (its budget left at its start): about 6 s of growth in all.
    assert!(spent > 4.5, "6 s of growth recorded as {spent:.2} s (budget 3 s)");
}

/// A reader that goes away (`deeptree analyze --tasks | head -1`) does not stop the run or lose its work: the task
/// grows to the run's time with the real Stockfish, and its spent seconds and evaluations are saved.
#[test]
fn a_closed_stdout_does_not_lose_a_tasks_progress() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    ok(&db, &["task", "add", "--moves", "e2e4", "--time", "60"]);
    let stockfish = common::stockfish();
    let mut child = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&db)
        .args(["analyze", "--tasks", "--engine-depth", "6", "--workers", "1", "--time", "2", "--engine"])
        .arg(&stockfish)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the run writes its first line.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = tasks(&db);
    assert!(listed[0]["spent_seconds"].as_f64().is_some_and(|s| s > 0.5), "{listed:?}");
    assert!(listed[0]["evaluations"].as_u64().is_some_and(|n| n > 0), "{listed:?}");
}
