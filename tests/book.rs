//! `analyze --roots FILE`: many roots grown together, a budget shared by need, and runs that resume.

mod common;

use std::{
    path::Path,
    process::{Command, Output},
};

use common::fake;
use deeptree::store::{Store, StoreOptions, key::PositionKey};

const OPENINGS: &str = "\
[Event \"Sicilian\"]\n\n1. e4 c5 2. Nf3 d6 *\n\n\
[Event \"Queen's Indian\"]\n\n1. d4 Nf6 2. c4 e6 3. Nf3 (3. Nc3 Bb4) b6 *\n\n\
[Event \"broken\"]\n\n1. e4 e5 2. Ke3 *\n\n\
[Event \"Ruy Lopez\"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 *\n";

fn analyze(db: &Path, roots: &Path, workers: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .args(["analyze", "--roots"])
        .arg(roots)
        .args(["--engine", &format!("{} --mode smooth --latency-ms 2", fake())])
        .args(["--workers", workers, "--engine-depth", "8", "--json"])
        .args(args)
        .output()
        .expect("deeptree runs")
}

fn report(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "analyze --roots failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}

fn settled(report: &serde_json::Value) -> Vec<Option<u64>> {
    report["roots"].as_array().expect("roots").iter().map(|r| r["settled_depth"].as_u64()).collect()
}

/// Every node's evaluation, edges, rest bound and settled depth, in key order.
fn tree(db: &Path) -> Vec<(PositionKey, String)> {
    let store = Store::open_existing(db, &StoreOptions::default()).expect("opens");
    let view = store.read().expect("read");
    let mut nodes: Vec<_> = view
        .nodes()
        .expect("nodes")
        .map(|item| {
            let (key, node) = item.expect("decodes");
            let eval = node.eval.as_ref().map(|e| (e.score, e.depth, e.best));
            let mut edges: Vec<_> = node.edges.iter().map(|e| (e.uci.to_string(), e.score, e.depth)).collect();
            edges.sort_by(|a, b| a.0.cmp(&b.0));
            (key, format!("{eval:?} {edges:?} {:?} {:?}", node.rest, node.settled_depth))
        })
        .collect();
    nodes.sort();
    nodes
}

#[test]
fn roots_from_pgn_and_epd_are_grown_and_bad_ones_reported_with_their_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let pgn = dir.path().join("openings.pgn");
    std::fs::write(&pgn, OPENINGS).unwrap();
    let output = analyze(&dir.path().join("pgn"), &pgn, "2", &["--max-depth", "1"]);
    let pgn_report = report(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("game 3 skipped") && stderr.contains("'Ke3' is illegal"), "{stderr}");
    assert_eq!(pgn_report["skipped"][0]["source"], serde_json::json!({"game": 3}));
    assert_eq!(settled(&pgn_report), [Some(1); 3]);
    let labels: Vec<&str> =
        pgn_report["roots"].as_array().unwrap().iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["game 1", "game 2", "game 4"]);
    // The main line leads to the root: the variation 3. Nc3 is not followed.
    assert_eq!(pgn_report["roots"][1]["moves"], serde_json::json!(["d2d4", "g8f6", "c2c4", "e7e6", "g1f3", "b7b6"]));
    assert_eq!(pgn_report["groups"], 2);

    let epd = dir.path().join("openings.epd");
    std::fs::write(
        &epd,
        "rnbqkbnr/pp2pppp/3p4/2p5/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3\nnot a position at all\n\n\
         r1bqkbnr/pppp1ppp/2n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3 id \"Ruy Lopez\";\n",
    )
    .unwrap();
    let output = analyze(&dir.path().join("epd"), &epd, "1", &["--max-depth", "1"]);
    let epd_report = report(&output);
    assert!(String::from_utf8_lossy(&output.stderr).contains("line 2 skipped"));
    assert_eq!(epd_report["skipped"][0]["source"], serde_json::json!({"line": 2}));
    assert_eq!(settled(&epd_report), [Some(1); 2]);
    // The same positions as roots 1 and 3 of the PGN file (EPD has no move counters).
    let placement = |r: &serde_json::Value| r["fen"].as_str().unwrap().split(' ').take(4).collect::<Vec<_>>().join(" ");
    for (e, p) in [(0, 0), (1, 2)] {
        assert_eq!(placement(&epd_report["roots"][e]), placement(&pgn_report["roots"][p]));
    }

    let empty = dir.path().join("empty.epd");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let output = analyze(&dir.path().join("empty"), &empty, "1", &[]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no root to grow"));
}

#[test]
fn a_time_budget_is_shared_by_need_shallowest_root_first() {
    let dir = tempfile::tempdir().unwrap();
    let pgn = dir.path().join("openings.pgn");
    std::fs::write(&pgn, OPENINGS).unwrap();
    // One group: the roots take turns, each settling its next depth.
    let one = report(&analyze(&dir.path().join("one"), &pgn, "1", &["--time", "3"]));
    assert_eq!(one["stopped"], true, "{one}");
    let depths: Vec<u64> = settled(&one).into_iter().map(|d| d.expect("every root settled something")).collect();
    let (low, high) = (depths.iter().min().unwrap(), depths.iter().max().unwrap());
    assert!(high - low <= 1, "one group: settled depths {depths:?}");
    assert!(*low >= 1, "{depths:?}");
    // Three groups grow the three roots at once; none runs more than one depth ahead of the one being grown.
    let three = report(&analyze(&dir.path().join("three"), &pgn, "3", &["--time", "3"]));
    assert_eq!(three["groups"], 3);
    let depths: Vec<u64> = settled(&three).into_iter().map(|d| d.expect("every root settled something")).collect();
    let (low, high) = (depths.iter().min().unwrap(), depths.iter().max().unwrap());
    assert!(high - low <= 2, "three groups: settled depths {depths:?}");
}

#[test]
fn a_run_resumes_where_the_last_one_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let pgn = dir.path().join("openings.pgn");
    std::fs::write(&pgn, OPENINGS).unwrap();
    let fresh = dir.path().join("fresh");
    let whole = report(&analyze(&fresh, &pgn, "1", &["--max-depth", "2"]));
    assert_eq!(settled(&whole), [Some(2); 3]);

    // The same run in two: to depth 1, then on to 2. The second run starts from what the first settled, and the
    // two together ask what the whole run asked and build the same tree.
    let parts = dir.path().join("parts");
    let first = report(&analyze(&parts, &pgn, "1", &["--max-depth", "1"]));
    let second = report(&analyze(&parts, &pgn, "1", &["--max-depth", "2"]));
    assert_eq!(settled(&second), [Some(2); 3]);
    let evaluations = |r: &serde_json::Value| r["evaluations"].as_u64().unwrap();
    assert_eq!(evaluations(&first) + evaluations(&second), evaluations(&whole));
    assert_eq!(tree(&parts), tree(&fresh));

    // Stopped by its budget partway, then run again: every root reaches depth 2.
    let stopped = dir.path().join("stopped");
    let cut = report(&analyze(&stopped, &pgn, "1", &["--max-depth", "2", "--time", "0.5"]));
    assert_eq!(cut["stopped"], true, "{cut}");
    let resumed = report(&analyze(&stopped, &pgn, "1", &["--max-depth", "2"]));
    assert_eq!(settled(&resumed), [Some(2); 3]);
    assert_eq!(resumed["stopped"], false);
    assert!(
        evaluations(&resumed) < evaluations(&whole),
        "the resumed run asked {} searches, a whole run {}",
        evaluations(&resumed),
        evaluations(&whole)
    );
    eprintln!(
        "whole {} evaluations; stopped {} + resumed {}; trees equal: {}",
        evaluations(&whole),
        evaluations(&cut),
        evaluations(&resumed),
        tree(&stopped) == tree(&fresh)
    );
}

/// A binary or mixed roots file: every line that is not text is reported by its number and the rest are grown, with
/// or without an extension that names the format.
#[test]
fn lines_that_are_not_text_are_skipped_by_number_and_the_rest_grown() {
    let dir = tempfile::tempdir().unwrap();
    let mut mixed = b"rnbqkbnr/pp2pppp/3p4/2p5/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3\n".to_vec();
    mixed.extend_from_slice(&[0xff, 0xfe, 0x00, 0x9c, b'\n', 0xc3, 0x28, b'\r', b'\n']);
    mixed.extend_from_slice(b"r1bqkbnr/pppp1ppp/2n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3\r\n");
    for name in ["mixed.epd", "mixed"] {
        let path = dir.path().join(name);
        std::fs::write(&path, &mixed).unwrap();
        let output = analyze(&dir.path().join(format!("db-{name}")), &path, "1", &["--max-depth", "0"]);
        let report = report(&output);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("line 2 skipped: not UTF-8 text"), "{stderr}");
        assert!(stderr.contains("line 3 skipped: not UTF-8 text"), "{stderr}");
        assert_eq!(settled(&report), [Some(0); 2], "{report}");
    }
    // All binary: nothing to grow, said in one error, not a crash.
    let binary = dir.path().join("binary.epd");
    std::fs::write(&binary, (0..=255u8).cycle().take(4096).collect::<Vec<u8>>()).unwrap();
    let output = analyze(&dir.path().join("db-binary"), &binary, "1", &[]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no root to grow"), "{output:?}");
}
