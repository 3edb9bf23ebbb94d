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
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_str(String::from_utf8_lossy(&output.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(report["settled_depth"], 2, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    // The moves outside searchmoves are no engine fault (no restart), and Toga II's missing Threads is not warned of.
    assert!(!stderr.contains("engine fault"), "{stderr}");
    assert!(stderr.contains("Toga II 3.0 does not keep to searchmoves"), "the each-move method ran: {stderr}");
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
}
