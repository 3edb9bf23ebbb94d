//! An inner engine other than Stockfish, from Debian's packages: Toga II 3.0 (`scripts/install-deps` installs it),
//! which answers `go ... searchmoves` with moves outside them. Beside Stockfish, it grows a tree as Stockfish does.

use std::{path::Path, process::Command};

use serde_json::Value;

const TOGA: &str = "/usr/games/toga2";

fn deeptree(db: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn toga_ii_beside_stockfish_grows_a_tree_to_software_depth_2() {
    assert!(Path::new(TOGA).exists(), "{TOGA} is missing: run scripts/install-deps");
    let stockfish = deeptree::engine::resolve_program("stockfish");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let engines = format!("{TOGA} ; {}", stockfish.display());
    let output =
        deeptree(&db, &["analyze", "--engines", &engines, "--engine-depth", "6", "--max-depth", "2", "--json"]);
    let mut stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_str(String::from_utf8_lossy(&output.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(report["settled_depth"], 2, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    // Deepened a ply: in a tree this small, which engine gets the searches with searchmoves, and whether a cut
    // cancels them, depends on timing (on a loaded machine, 1 run in 12 left Toga II none answered, 1 in 25 none
    // asked); the checks below need some.
    let deeper =
        deeptree(&db, &["analyze", "--engines", &engines, "--engine-depth", "6", "--max-depth", "3", "--json"]);
    stderr.push_str(&String::from_utf8_lossy(&deeper.stderr));
    assert!(deeper.status.success(), "{stderr}");
    // The moves outside searchmoves are no engine fault (no restart), and Toga II's missing Threads is not warned of.
    assert!(!stderr.contains("engine fault"), "{stderr}");
    // Toga II has MultiPV (up to 10 lines): the moves allowed are asked through it where it reaches.
    assert!(
        stderr.contains("Toga II 3.0 does not keep to searchmoves: the moves allowed are asked through MultiPV"),
        "the MultiPV method ran: {stderr}"
    );
    assert!(!stderr.contains("option not set"), "{stderr}");
    // Both engines answered searches, each listed once.
    let stats = deeptree(&db, &["stats", "--json"]);
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let engines = stats["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2, "{stats}");
    for name in ["Toga II", "Stockfish"] {
        let listed: Vec<&Value> = engines.iter().filter(|e| e["name"].as_str().unwrap().contains(name)).collect();
        assert_eq!(listed.len(), 1, "{stats}");
        assert!(listed[0]["evaluations"].as_u64().unwrap() > 0, "{stats}");
    }
    // Answers are kept marked by the way they were asked: Toga II's alternatives through MultiPV, Stockfish's all as
    // asked (it keeps to searchmoves).
    let methods =
        |name: &str| engines.iter().find(|e| e["name"].as_str().unwrap().contains(name)).unwrap()["by_method"].clone();
    assert!(methods("Toga II")["MultiPV"].as_u64().is_some_and(|n| n > 0), "{stats}");
    assert_eq!(
        methods("Stockfish").as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["as asked".to_owned()]),
        "{stats}"
    );
}

/// The evaluations `stats --json` counts, all engines together, and the engines it lists.
fn stats(db: &Path) -> (u64, Vec<String>) {
    let output = deeptree(db, &["stats", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stats: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["evaluations_without_engine"], 0, "{stats}");
    let engines = stats["engines"].as_array().unwrap();
    let total = engines.iter().map(|e| e["evaluations"].as_u64().unwrap()).sum();
    (total, engines.iter().map(|e| e["name"].as_str().unwrap().to_owned()).collect())
}

#[test]
fn an_analyze_raises_stats_by_the_answers_it_stored_and_one_program_by_name_and_path_is_one_engine() {
    // Stockfish by name and by path beside Toga II: three kinds of worker, two engines. Searches run ahead of their
    // turn on the free engines, and those no pass asked for are counted apart (`unasked`): they are not stored.
    assert!(Path::new(TOGA).exists(), "{TOGA} is missing: run scripts/install-deps");
    let stockfish = deeptree::engine::resolve_program("stockfish");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let engines = format!("stockfish ; {} ; {TOGA}", stockfish.display());
    let first = deeptree(&db, &["analyze", "--engines", &engines, "--engine-depth", "6", "--max-depth", "1"]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let text = String::from_utf8_lossy(&first.stdout);
    let summary =
        text.lines().find(|l| l.contains(" evaluations at engine depth 6 (")).unwrap_or_else(|| panic!("{text}"));
    let stored: u64 = summary.split(" (").nth(1).and_then(|s| s.split_whitespace().next()).unwrap().parse().unwrap();
    assert!(summary.contains(" stored in the tree, as stats counts them"), "{summary}");
    let (before, listed) = stats(&db);
    assert_eq!(before, stored, "a new store counts what the first run stored: {summary}");
    assert_eq!(listed.len(), 2, "stockfish by name and by path is one engine: {listed:?}");

    let args =
        ["analyze", "--engines", &engines, "--moves", "e2e4", "--engine-depth", "6", "--max-depth", "2", "--json"];
    let output = deeptree(&db, &args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(String::from_utf8_lossy(&output.stdout).lines().last().unwrap()).unwrap();
    let count = |key: &str| report[key].as_u64().unwrap_or_else(|| panic!("{key}: {report}"));
    assert_eq!(report["settled_depth"], 2, "{report}");
    let (after, listed) = stats(&db);
    assert_eq!(after - before, count("stored"), "stats rises by the answers stored: {report}");
    assert_eq!(
        count("evaluations"),
        count("stored") - count("shared") + count("unasked"),
        "every search answered is stored or unasked: {report}"
    );
    assert_eq!(listed.len(), 2, "{listed:?}");
}
