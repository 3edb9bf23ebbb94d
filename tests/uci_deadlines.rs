//! A deaf inner engine (it answers `isready`, ignores `stop` and never sends `bestmove`): every `go` is answered all
//! the same, a timed one by its deadline plus the move overhead (50 ms at least) and any after `stop` within a
//! second, with the first move of the engine's last line: the session answers for the search it stopped waiting for.
//! The bounds below add half a second for a loaded machine.

mod common;

use std::time::{Duration, Instant};

use common::{PATIENCE, Uci, fake};

fn deaf_session(db: &std::path::Path) -> Uci {
    let mut uci = Uci::deeptree(db);
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    uci.send(&format!("setoption name InnerEngine value {} --mode deaf", fake()));
    uci.send("setoption name BackgroundAnalysis value false");
    uci.ready();
    uci
}

/// `go`, then the lines to its `bestmove` and how long it took.
fn timed(uci: &mut Uci, go: &str) -> (Vec<String>, Duration) {
    let started = Instant::now();
    uci.send(go);
    let lines = uci.until("bestmove", PATIENCE);
    (lines, started.elapsed())
}

#[test]
fn a_deaf_engine_costs_a_timed_go_no_more_than_its_deadline_and_stop_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let mut uci = deaf_session(&dir.path().join("tree"));
    uci.send("position startpos moves e2e4");
    // The deaf engine's only line plays the first legal move in UCI text order: a7a5 after 1. e4.
    let (lines, took) = timed(&mut uci, "go movetime 300");
    assert_eq!(lines.last().map(String::as_str), Some("bestmove a7a5"), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("passed the move's deadline")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("the session answers for it")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("first move of the search's last line")), "{lines:?}");
    assert!(took < Duration::from_millis(300 + 250 + 50 + 500), "{took:?}");

    // A clock: ten times the move's share, at least a second.
    uci.send("position startpos");
    let (lines, took) = timed(&mut uci, "go wtime 2000 btime 2000 winc 10 binc 10");
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    assert!(took < Duration::from_millis(1000 + 50 + 500), "{took:?}");
    // One move to the control: 85 % of the clock at most, past the 82.5 % a Stockfish may plan for it (half the
    // clock, as before, cut the engine's own plan short).
    uci.send("position startpos");
    let (lines, took) = timed(&mut uci, "go wtime 4000 btime 4000 movestogo 1");
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    assert!(took >= Duration::from_millis(3000) && took < Duration::from_millis(3400 + 50 + 500), "{took:?}");

    // go infinite ends on stop within a second, and the session goes on.
    uci.send("position startpos moves d2d4");
    uci.send("go infinite");
    std::thread::sleep(Duration::from_millis(300));
    let (lines, took) = timed(&mut uci, "stop");
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    assert!(took < Duration::from_millis(1000 + 500), "{took:?}");
    uci.ready();
    // A limit of the GUI's own is left to the engine (no deadline), but stop still ends it.
    uci.send("position startpos");
    uci.send("go depth 5");
    std::thread::sleep(Duration::from_millis(500));
    let (lines, took) = timed(&mut uci, "stop");
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("passed the move's deadline")), "{lines:?}");
    assert!(took < Duration::from_millis(1000 + 500), "{took:?}");
}

#[test]
fn a_tree_think_with_deaf_workers_is_answered_by_its_deadline() {
    // ThinkMode tree: the workers never answer a leaf search, so nothing the tree grows is valued; the session
    // stops the think at its deadline and answers for it within the move overhead.
    let dir = tempfile::tempdir().unwrap();
    let mut uci = deaf_session(&dir.path().join("tree"));
    uci.send("setoption name Threads value 2");
    uci.send("setoption name ThinkMode value tree");
    uci.ready();
    for moves in ["e2e4", "e2e4 e7e5"] {
        uci.send(&format!("position startpos moves {moves}"));
        let (lines, took) = timed(&mut uci, "go wtime 2000 btime 2000 winc 10 binc 10");
        assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
        assert_ne!(lines.last().map(String::as_str), Some("bestmove 0000"), "{lines:?}");
        assert!(took < Duration::from_millis(1000 + 50 + 500), "{took:?}: {lines:?}");
        uci.ready();
    }
}

#[test]
fn after_ponderhit_a_deaf_engine_costs_the_move_no_more_than_its_deadline() {
    // `go ponder` has no deadline while the opponent thinks; `ponderhit` starts the clock, and the same deadline as
    // for the `go` without `ponder` holds from then on.
    let dir = tempfile::tempdir().unwrap();
    let mut uci = deaf_session(&dir.path().join("tree"));
    uci.send("position startpos moves e2e4 e7e5");
    uci.send("go ponder wtime 2000 btime 2000 winc 10 binc 10");
    std::thread::sleep(Duration::from_millis(300));
    let (lines, took) = timed(&mut uci, "ponderhit");
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("passed the move's deadline")), "{lines:?}");
    assert!(took < Duration::from_millis(1000 + 50 + 500), "{took:?}: {lines:?}");
}
