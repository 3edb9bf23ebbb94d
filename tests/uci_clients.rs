//! deeptree as clients see it, with the real Stockfish inside: the notes of a growing tree (each only when it
//! changed, at most once a second), node counts that move with the engines, and a `ponder` move in every `bestmove`
//! whose line has one. Win rates are read back by python-chess (tests/python/test_uci.py).

mod common;

use std::time::{Duration, Instant};

use common::{PATIENCE, session, stockfish};

/// A middlegame no tree here knows.
const MIDDLEGAME: &str = "position fen r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9";

/// The count of `key` in an `info` line.
fn number(line: &str, key: &str) -> Option<u64> {
    common::field(line, key)?.parse().ok()
}

#[test]
fn a_growing_tree_writes_each_note_when_it_changed_at_most_once_a_second_and_counts_the_engines_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = stockfish();
    let mut uci =
        session(&dir.path().join("tree"), engine.to_str().unwrap(), &["EngineDepth value 12", "MultiPV value 2"]);
    uci.send(MIDDLEGAME);
    uci.send("go infinite");
    let started = Instant::now();
    let lines = uci.lines_for(Duration::from_millis(4500));
    let stopped_at = started.elapsed();
    uci.send("stop");
    // The lines after `stop`, timed from the same start as the ones before it.
    let closing = uci.timed_until("bestmove", PATIENCE, started);
    let all: Vec<(Duration, String)> = lines.into_iter().chain(closing.iter().cloned()).collect();
    for prefix in ["info string tree main line ", "info string idea "] {
        let notes: Vec<&(Duration, String)> = all.iter().filter(|(_, l)| l.starts_with(prefix)).collect();
        assert!(!notes.is_empty(), "no note {prefix:?}: {all:?}");
        for (i, pair) in notes.windows(2).enumerate() {
            let ((t0, a), (t1, b)) = (pair[0], pair[1]);
            assert_ne!(a, b, "a note written again unchanged: {all:?}");
            // The last note of a kind, in the batch right before `bestmove`, is written whenever it changed, so that
            // the GUI's last note agrees with the move; every other one a second after the one before it or more,
            // read here with the pipe's jitter (a loaded machine may hold one back).
            let is_final = i + 2 == notes.len() && *t1 >= stopped_at;
            assert!(
                is_final || *t1 >= *t0 + Duration::from_millis(500),
                "two notes {prefix:?} {:?} apart: {all:?}",
                *t1 - *t0
            );
        }
    }
    // The tree's batches: each line's nodes are the engines' count so far, never 0 and never lower than before.
    let counts: Vec<u64> = all
        .iter()
        .filter(|(_, l)| l.starts_with("info depth") && l.contains(" multipv 1 "))
        .filter_map(|(_, l)| number(l, "nodes"))
        .collect();
    assert!(counts.len() >= 3, "batches: {all:?}");
    assert!(counts.iter().all(|n| *n > 0), "a batch with no nodes: {counts:?}");
    assert!(counts.windows(2).all(|w| w[1] >= w[0]), "a count went down: {counts:?}");
    assert!(counts.last() > counts.first(), "the count never moved: {counts:?}");
    // A ponder move after the tree's line, Ponder off as it is here.
    let last = closing.last().map(|(_, l)| l.as_str()).unwrap_or_default();
    assert!(last.starts_with("bestmove ") && last.contains(" ponder "), "{closing:?}");

    // ShowTreeInfo off: no notes; a tree move still says it is one.
    uci.send("setoption name ShowTreeInfo value false");
    uci.send("go infinite");
    let lines = uci.lines_for(Duration::from_millis(1500));
    uci.send("stop");
    let closing = uci.until("bestmove", PATIENCE);
    let quiet: Vec<&String> = lines.iter().map(|(_, l)| l).chain(closing.iter()).collect();
    assert!(
        quiet.iter().all(|l| !l.starts_with("info string tree main line") && !l.starts_with("info string idea")),
        "{quiet:?}"
    );
    let (_, lines) = uci.best("go depth 4");
    assert!(lines.iter().any(|l| l.starts_with("info string tree move:")), "{lines:?}");
}

#[test]
fn a_relayed_search_gives_its_ponder_move_with_ponder_off() {
    let dir = tempfile::tempdir().unwrap();
    let engine = stockfish();
    let mut uci = session(&dir.path().join("tree"), engine.to_str().unwrap(), &["Ponder value false"]);
    uci.send(MIDDLEGAME);
    let (_, lines) = uci.best("go depth 10");
    let last = lines.last().unwrap();
    let pv = lines.iter().rev().find(|l| l.contains(" pv ")).expect("a line");
    if pv.split(" pv ").nth(1).is_some_and(|moves| moves.split_whitespace().count() >= 2) {
        assert!(last.contains(" ponder "), "{lines:?}");
    }
}

/// `Ponder` as the GUI sets it reaches the engine that plays the moves: Stockfish plans a quarter more time a move
/// when it ponders, and a relay that left it off would think shorter than the bare engine against a pondering one.
/// The inner engine here is Stockfish behind `tee`, which keeps every command it was sent.
#[test]
fn ponder_as_the_gui_sets_it_reaches_the_inner_engine() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let sent = dir.path().join("sent.log");
    let inner = dir.path().join("stockfish-tee");
    let script = format!("#!/bin/sh\ntee -a '{}' | exec '{}'\n", sent.display(), stockfish().display());
    std::fs::write(&inner, script).unwrap();
    std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The `setoption name Ponder` lines Stockfish was sent, once the last is `wanted` (tee writes its file just
    // after passing the line on: a moment is allowed), or as they are after 5 s.
    let ponder_lines = |wanted: &str| -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&sent).unwrap_or_default();
            let lines: Vec<String> =
                text.lines().filter(|l| l.starts_with("setoption name Ponder")).map(str::to_owned).collect();
            if lines.last().is_some_and(|l| l == wanted) || Instant::now() > until {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut uci = session(&dir.path().join("tree"), inner.to_str().unwrap(), &["Ponder value true"]);
    uci.send(MIDDLEGAME);
    uci.best("go depth 6");
    let lines = ponder_lines("setoption name Ponder value true");
    assert_eq!(lines.last().map(String::as_str), Some("setoption name Ponder value true"), "{lines:?}");
    // Off again: the engine has it by `readyok` (the same search again could be answered from the tree, which
    // stored it, and ask the engine nothing).
    uci.send("setoption name Ponder value false");
    uci.ready();
    let lines = ponder_lines("setoption name Ponder value false");
    assert_eq!(lines.last().map(String::as_str), Some("setoption name Ponder value false"), "{lines:?}");
}

/// xboard's polyglot turns every `info` line into a line of thinking: deeptree's notes become lines scored 0 with 0
/// nodes among the real ones. Through polyglot (where Debian's package is installed) a note comes at most once a
/// second per kind and never twice alike in a row, and with `ShowTreeInfo` off not at all.
#[test]
fn through_polyglot_notes_are_rare_and_show_tree_info_off_leaves_only_real_lines() {
    let polyglot = std::path::Path::new("/usr/games/polyglot");
    if !polyglot.exists() {
        eprintln!("skipped: polyglot is not installed (scripts/install-deps installs it)");
        return;
    }
    let engine = stockfish();
    for show in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let ini = dir.path().join("deeptree.ini");
        std::fs::write(
            &ini,
            format!(
                "[PolyGlot]\nEngineCommand = {} --db {}\nEngineDir = {}\nLog = false\n[Engine]\nInnerEngine = {}\n\
                 BackgroundAnalysis = false\nEngineDepth = 10\nShowTreeInfo = {show}\n",
                env!("CARGO_BIN_EXE_deeptree"),
                dir.path().join("tree").display(),
                dir.path().display(),
                engine.display()
            ),
        )
        .unwrap();
        let mut xboard = common::Uci::start(polyglot, &[ini.to_str().unwrap()]);
        xboard.send("xboard");
        xboard.send("protover 2");
        let features = xboard.until("feature done=1", PATIENCE);
        assert!(features.last().is_some_and(|l| l.contains("done=1")), "{features:?}");
        xboard.send("new");
        xboard.send("post");
        xboard.send("usermove e2e4");
        xboard.send("analyze");
        let seconds = 4.5;
        let lines = xboard.lines_for(Duration::from_secs_f64(seconds));
        xboard.send("exit");
        // Thinking lines: depth, score, time, nodes, then the line (a note's words, where the line is a note).
        let thinking: Vec<(Duration, Vec<&str>)> = lines
            .iter()
            .map(|(t, l)| (*t, l.split_whitespace().collect::<Vec<_>>()))
            .filter(|(_, w)| {
                w.len() >= 5 && w[..4].iter().all(|x| x.trim_start_matches(['+', '-']).parse::<i64>().is_ok())
            })
            .collect();
        let real = thinking.iter().filter(|(_, w)| w[3] != "0").count();
        let notes: Vec<&(Duration, Vec<&str>)> = thinking.iter().filter(|(_, w)| w[3] == "0").collect();
        assert!(real >= 2, "show {show}: {lines:?}");
        if !show {
            assert!(notes.is_empty(), "ShowTreeInfo off: {lines:?}");
            continue;
        }
        assert!(!notes.is_empty(), "the notes are on by default: {lines:?}");
        for kind in ["tree", "idea"] {
            let of_kind: Vec<_> = notes.iter().filter(|(_, w)| w[4] == kind).collect();
            assert!(of_kind.len() as f64 <= seconds + 1.0, "{kind}: {} notes in {seconds} s: {lines:?}", of_kind.len());
            for pair in of_kind.windows(2) {
                assert_ne!(pair[0].1, pair[1].1, "a note twice alike: {lines:?}");
            }
        }
    }
}

/// `deeptree bench stops` runs every case with the real engine and reports each (its figures are docs/benchmarks.md's;
/// no time is asserted here).
#[test]
fn the_stop_bench_times_every_case_against_the_bare_engine() {
    let engine = stockfish();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(["bench", "stops", "--trials", "2", "--json", "--engine", engine.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let cases = result["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 5, "{result}");
    for case in cases.iter().chain([&result["bare"]]) {
        assert_eq!(case["trials"], 2, "{case}");
        assert!(case["max_ms"].as_f64().unwrap() >= case["median_ms"].as_f64().unwrap(), "{case}");
    }
}

/// Within one `go ponder`, the count goes on after `ponderhit`: the move's line counts the growth's nodes too.
#[test]
fn after_ponderhit_the_count_goes_on_from_the_growths() {
    let dir = tempfile::tempdir().unwrap();
    let engine = stockfish();
    let settings = ["EngineDepth value 10", "TreeDepthMargin value 20"];
    let mut uci = session(&dir.path().join("tree"), engine.to_str().unwrap(), &settings);
    uci.send("position startpos");
    uci.send("go infinite");
    std::thread::sleep(Duration::from_millis(1500));
    uci.best("stop");
    // The tree answers a clock here (the margin): `go ponder` grows it, and `ponderhit` plays its move.
    uci.send("go ponder wtime 60000 btime 60000 winc 1000 binc 1000");
    let lines = uci.lines_for(Duration::from_millis(1600));
    let (_, closing) = uci.best("ponderhit");
    let counts: Vec<u64> = lines
        .iter()
        .map(|(_, l)| l)
        .chain(closing.iter())
        .filter(|l| l.starts_with("info depth"))
        .filter_map(|l| number(l, "nodes"))
        .collect();
    assert!(counts.len() >= 2, "{lines:?} {closing:?}");
    assert!(counts.windows(2).all(|w| w[1] >= w[0]), "the count went down after ponderhit: {counts:?}");
}
