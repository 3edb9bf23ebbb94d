//! Growth that follows play: the games a UCI session plays are recorded (not analysis, not what a takeback undid),
//! and refutations found in play are searched again (growth from the games' exits: tests/growth.rs).

mod common;

use std::process::Command;

use common::{PATIENCE, Uci, fake_session};

/// Sends `go` (one that answers only after `stop`), and `stop` 100 ms later; waits for the `bestmove`.
fn stopped_after_a_moment(uci: &mut Uci, go: &str) {
    uci.send(go);
    std::thread::sleep(std::time::Duration::from_millis(100));
    uci.send("stop");
    uci.until("bestmove", PATIENCE);
}

/// A UCI session records the game it played, with the moves as the GUI last sent them (after a takeback), and not
/// a game the GUI analysed, nor any game with `LearnFromGames` off.
#[test]
fn a_session_records_the_games_it_played_and_not_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fake.log");
    let db = dir.path().join("tree");
    {
        let mut uci = fake_session(&db, &log, &[]);
        uci.send("ucinewgame");
        uci.send("position startpos");
        uci.best("go movetime 30");
        uci.send("position startpos moves e2e4 d7d5");
        uci.best("go movetime 30");
        // A takeback: the game goes on from 1. e4 e5 instead.
        uci.send("position startpos moves e2e4 e7e5");
        uci.best("go wtime 1000 btime 1000");
        // The next game ends it; this one is analysed.
        uci.send("ucinewgame");
        uci.send("position startpos moves d2d4");
        uci.best("go movetime 30");
        stopped_after_a_moment(&mut uci, "go infinite");
        // Learning off: not recorded either.
        uci.send("ucinewgame");
        uci.send("setoption name LearnFromGames value false");
        uci.send("position startpos moves c2c4");
        uci.best("go movetime 30");
        uci.ready();
    }
    let games = std::fs::read_to_string(db.join("games.pgn")).expect("games.pgn");
    assert_eq!(games.matches("[Event ").count(), 1, "{games}");
    assert!(games.contains("[White \"deeptree\"]\n[Black \"?\"]"), "{games}");
    assert!(games.contains("\n1. e4 e5 *\n"), "{games}");
    // `analyze --from-games` reads it back: the one game left the empty tree at its start.
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&db)
        .args(["analyze", "--from-games"])
        .arg(db.join("games.pgn"))
        .args(["--player", "deeptree", "--engine", common::fake(), "--engine-depth", "4", "--play-depth", "6"])
        // Aimed at the play depth itself: without a budget the run ends once the games' positions are known to it.
        .args(["--beyond", "0", "--workers", "1", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("--from-games: read as --games"), "the former name says what it means now: {stderr}");
    assert!(stderr.contains("1 games: 1 left the tree at 1 positions"), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or("null")).unwrap();
    assert_eq!(report["roots"][0]["label"], "game 1 ply 0", "{report}");
    assert_eq!(report["roots"][0]["settled_depth"], 2, "grown to the play depth: {report}");
}

/// A tree of the start position (engine depth 30, software depth 1: every first move valued -20 by the fake
/// engine, which scores the first move of every position +20), a session whose fake engine scores the positions of
/// `script`, and one game: the tree plays its move at once, the game's next search scores -100 there (a drop of 80
/// centipawns two plies later), and the game ends. Returns the tree's first move in each of two games, the
/// searches the engine was asked for and the tasks the store holds after (`task list --json`).
fn refuted_then_replayed(refute: bool, settings: &[&str]) -> (String, String, Vec<String>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let grown = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&db)
        .args(["analyze", "--engine", common::fake(), "--engine-depth", "30", "--max-depth", "1"])
        .args(["--move-distance", "5", "--workers", "1", "--json"])
        .output()
        .unwrap();
    assert!(grown.status.success(), "{}", String::from_utf8_lossy(&grown.stderr));
    let start = shakmaty::Chess::default();
    let fen4 = |position: &shakmaty::Chess| {
        let fen = shakmaty::fen::Fen::from_position(position, shakmaty::EnPassantMode::Legal).to_string();
        fen.split_whitespace().take(4).collect::<Vec<_>>().join(" ")
    };
    let play = |position: &shakmaty::Chess, uci: &str| {
        let m = uci.parse::<shakmaty::uci::UciMove>().unwrap().to_move(position).unwrap();
        let mut next = position.clone();
        shakmaty::Position::play_unchecked(&mut next, m);
        next
    };
    // The tree's move at the start, as `show` ranks it (the session's tree answer ranks moves so too), to script the
    // engine's scores before it starts.
    let shown = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&db)
        .args(["show", "--depth", "1", "--json"])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let tree_move = shown["moves"][0]["uci"].as_str().unwrap().to_owned();
    let child = play(&start, &tree_move);
    let later = play(&child, "a7a6");
    let script = dir.path().join("script");
    let mut text = String::new();
    if refute {
        // The deeper searches agree: after the tree move Black's reply is +150, and the game's reply leaves White
        // at -100.
        text.push_str(&format!("{} 150\n{} -100\n", fen4(&child), fen4(&later)));
    } else {
        // Only a search of depth 20 or less sees White at -100 after the game's reply.
        text.push_str(&format!("{} -100 20\n", fen4(&later)));
    }
    std::fs::write(&script, text).unwrap();
    let log = dir.path().join("fake.log");
    let inner = format!("InnerEngine value {} --script {} --log {}", common::fake(), script.display(), log.display());
    let mut uci = fake_session(&db, &dir.path().join("unused.log"), &[&[inner.as_str()][..], settings].concat());
    uci.send("ucinewgame");
    uci.send("position startpos");
    let (first, lines) = uci.best("go depth 20");
    assert!(lines.iter().any(|l| l.starts_with("info string tree move")), "the tree answers: {lines:?}");
    assert_eq!(first, tree_move, "the tree answers with show's best move");
    uci.send(&format!("position startpos moves {first} a7a6"));
    let (_, lines) = uci.best("go depth 20");
    assert!(lines.iter().any(|l| l.starts_with("info depth 20 ") && l.contains("score cp -100")), "{lines:?}");
    // The game ends: the refuted move is searched again, deeper, before the next game.
    uci.send("ucinewgame");
    uci.ready();
    uci.send("position startpos");
    let (again, lines) = uci.best("go depth 20");
    assert!(lines.iter().any(|l| l.starts_with("info string tree move")), "the tree answers again: {lines:?}");
    drop(uci);
    let searches = common::fake_log(&log).into_iter().filter(|c| c.starts_with("go")).collect();
    let listed = common::deeptree(&["--db", db.to_str().unwrap(), "task", "list", "--json"]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let tasks = serde_json::from_slice(&listed.stdout).unwrap();
    (first, again, searches, tasks)
}

/// A tree move refuted in play, whose deeper search confirms the refutation, is not played again at the same
/// budget.
#[test]
fn a_refuted_tree_move_is_searched_again_deeper_and_not_played_again() {
    let (first, again, searches, tasks) = refuted_then_replayed(true, &[]);
    // The tree's depth there is 31 (30 + 1), the move's child 30; the refuting search 20: again at 30 + 2, and the
    // position after the game's reply one ply shallower.
    assert_eq!(searches, ["go depth 20", "go depth 32", "go depth 31"], "{searches:?}");
    assert_ne!(again, first, "the refuted move {first} was played again");
    // The refutation is a source of growth: one task, at the position where the tree played the move (the start), to
    // a ply past the search again there (33, at the session's engine depth 18, which it keeps: software depth 15), of
    // the analyst's default priority.
    let tasks = tasks.as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    let task = &tasks[0];
    assert_eq!((task["fen"].clone(), task["moves"].clone()), (serde_json::Value::Null, serde_json::json!([])));
    let depths = (task["priority"].as_u64(), task["max_depth"].as_u64(), task["engine_depth"].as_u64());
    assert_eq!(depths, (Some(0), Some(15), Some(18)), "{task}");
    let label = task["label"].as_str().unwrap();
    assert!(label.starts_with("refuted in play: ") && label.contains("at depth 31"), "{label}");
}

/// A tree move refuted in play, whose deeper search does not confirm the refutation, is still played.
#[test]
fn a_tree_move_the_deeper_search_confirms_is_still_played() {
    let (first, again, searches, _) = refuted_then_replayed(false, &[]);
    assert_eq!(searches, ["go depth 20", "go depth 32", "go depth 31"], "{searches:?}");
    assert_eq!(again, first);
}

/// A `go ponder` stopped without its `ponderhit` (the game ended while deeptree pondered: the opponent resigned, or
/// played another move) leaves the move it guessed out of the recorded game.
#[test]
fn a_guessed_move_the_opponent_never_played_is_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fake.log");
    let db = dir.path().join("tree");
    {
        let mut uci = fake_session(&db, &log, &["Ponder value true"]);
        uci.send("ucinewgame");
        uci.send("position startpos");
        let (first, _) = uci.best("go wtime 9000 btime 9000");
        assert_eq!(first, "a2a3", "the fake engine's move");
        // deeptree ponders on 1... e5; the game ends before the opponent moves.
        uci.send("position startpos moves a2a3 e7e5");
        stopped_after_a_moment(&mut uci, "go ponder wtime 9000 btime 9000");
        // The next game: the one before is written.
        uci.send("ucinewgame");
        uci.ready();
    }
    let games = std::fs::read_to_string(db.join("games.pgn")).expect("games.pgn");
    assert_eq!(games.matches("[Event ").count(), 1, "{games}");
    assert!(games.contains("\n1. a3 *\n"), "the guess 1... e5 is not the game's: {games}");
}

/// With `StoreSearches` off a grown book stays as it was grown: a refuted move is not searched again (that would
/// write to the tree).
#[test]
fn with_store_searches_off_a_refuted_move_is_not_searched_again() {
    let (_, _, searches, tasks) = refuted_then_replayed(true, &["StoreSearches value false"]);
    assert_eq!(searches, ["go depth 20"], "{searches:?}");
    assert_eq!(tasks, serde_json::json!([]), "nor made a task");
}
