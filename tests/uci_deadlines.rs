//! A deaf inner engine (it answers `isready`, ignores `stop` and never sends `bestmove`): every `go` is answered all
//! the same, a timed one soon after its deadline and any after `stop` within a second or two, with the first move of
//! the engine's last line.

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
    assert!(lines.iter().any(|l| l.contains("first move of the engine's last line")), "{lines:?}");
    assert!(took < Duration::from_millis(300 + 250 + 1000 + 1000), "{took:?}");

    // A clock: half of the side's own time at most.
    uci.send("position startpos");
    let (lines, took) = timed(&mut uci, "go wtime 2000 btime 2000 winc 10 binc 10");
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    assert!(took < Duration::from_millis(1000 + 1000 + 1000), "{took:?}");

    // go infinite ends on stop within a second or two, and the session goes on.
    uci.send("position startpos moves d2d4");
    uci.send("go infinite");
    std::thread::sleep(Duration::from_millis(300));
    let (lines, took) = timed(&mut uci, "stop");
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    uci.ready();
    // A limit of the GUI's own is left to the engine (no deadline), but stop still ends it.
    uci.send("position startpos");
    uci.send("go depth 5");
    std::thread::sleep(Duration::from_millis(500));
    let (lines, took) = timed(&mut uci, "stop");
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("passed the move's deadline")), "{lines:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
}
