//! Parity: with an empty tree deeptree is its inner engine (the real Stockfish plays the same moves through it), and
//! the tree answers a `go` only when it knows more than a search would find (the fake engine shows who answered).

mod common;

use std::{path::Path, process::Command};

use common::{PATIENCE, Uci, fake, fake_log, fake_session, stockfish};

/// Two games of 44 plies, a `ucinewgame` before each, every move at 20,000 nodes: deeptree with an empty tree
/// plays the bare engine's move in every position. The second game also checks that `ucinewgame` reaches the inner
/// engine (with the first game's hash and history left in it, its searches would differ).
#[test]
fn an_empty_tree_plays_the_bare_engines_moves_at_fixed_nodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stockfish = stockfish();
    let mut bare = Uci::start(&stockfish, &[]);
    let mut relayed = Uci::deeptree(dir.path());
    for uci in [&mut bare, &mut relayed] {
        uci.send("uci");
        assert!(uci.until("uciok", PATIENCE).last().is_some_and(|l| l == "uciok"));
    }
    relayed.send(&format!("setoption name InnerEngine value {}", stockfish.display()));
    relayed.send("setoption name BackgroundAnalysis value false");
    for uci in [&mut bare, &mut relayed] {
        uci.send("setoption name Threads value 1");
        uci.send("setoption name Hash value 16");
        uci.ready();
    }
    let mut compared = 0;
    for opening in ["", "d2d4 g8f6 c2c4 e7e6"] {
        for uci in [&mut bare, &mut relayed] {
            uci.send("ucinewgame");
            uci.ready();
        }
        let mut moves: Vec<String> = opening.split_whitespace().map(str::to_owned).collect();
        for _ in 0..44 {
            let position = if moves.is_empty() {
                "position startpos".to_owned()
            } else {
                format!("position startpos moves {}", moves.join(" "))
            };
            bare.send(&position);
            relayed.send(&position);
            let (expected, _) = bare.best("go nodes 20000");
            let (played, lines) = relayed.best("go nodes 20000");
            assert_eq!(
                played, expected,
                "after '{position}' deeptree played {played}, the bare engine {expected}:\n{lines:?}"
            );
            let last_info = lines.iter().rev().find(|l| l.starts_with("info") && l.contains(" pv "));
            let pv_head = last_info.and_then(|l| l.split(" pv ").nth(1)).and_then(|pv| pv.split_whitespace().next());
            assert_eq!(pv_head, Some(played.as_str()), "the last pv before bestmove starts with its move: {lines:?}");
            if expected == "(none)" || expected == "0000" {
                break;
            }
            moves.push(expected);
            compared += 1;
        }
    }
    assert!(compared >= 80, "only {compared} positions compared");
}

/// Grows a tree from the start position with the fake engine: software depth `depth` settled at engine depth
/// `engine_depth`.
fn grow(db: &Path, engine_depth: u32, depth: u32) {
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(["--db", db.to_str().expect("utf-8 path"), "analyze", "--engine", fake(), "--json"])
        .args(["--engine-depth", &engine_depth.to_string(), "--max-depth", &depth.to_string()])
        .args(["--move-distance", "5", "--workers", "1"])
        .output()
        .expect("analyze runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains(&format!("\"settled_depth\":{depth}")), "{report}");
}

/// Searches that reached the engine.
fn gos(log: &Path) -> Vec<String> {
    fake_log(log).into_iter().filter(|c| c.starts_with("go")).collect()
}

#[test]
fn a_shallow_tree_defers_to_the_search_and_a_deep_one_answers() {
    let clock = "go wtime 1000 btime 1000 winc 10 binc 10";

    // Combined depth 3 + 2 = 5 at the root.
    let shallow = tempfile::tempdir().expect("tempdir");
    grow(shallow.path(), 3, 2);
    let log = shallow.path().join("fake.log");
    let mut uci = fake_session(shallow.path(), &log, &[]);
    uci.send("position startpos");
    // Asked for depth 5: the tree knows as much, and answers at once.
    let (_, lines) = uci.best("go depth 5");
    assert!(gos(&log).is_empty(), "no search for depth 5: {lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("info string tree move: combined depth 5")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("info depth 5 ")), "{lines:?}");
    // Asked for depth 6: more than the tree knows, so the engine searches.
    let (_, lines) = uci.best("go depth 6");
    assert_eq!(gos(&log), ["go depth 6"], "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("tree move")), "{lines:?}");
    // A game clock of one second: a search would reach deeper than 5, so the engine searches with the clock.
    let (_, lines) = uci.best(clock);
    assert_eq!(gos(&log), ["go depth 6", clock], "{lines:?}");
    drop(uci);

    // Combined depth 30 + 1 = 31: deeper than a search in this budget.
    let deep = tempfile::tempdir().expect("tempdir");
    grow(deep.path(), 30, 1);
    let log = deep.path().join("fake.log");
    let mut uci = fake_session(deep.path(), &log, &[]);
    uci.send("position startpos");
    let (_, lines) = uci.best(clock);
    assert!(gos(&log).is_empty(), "the tree answered without a search: {:?}", gos(&log));
    assert!(lines.iter().any(|l| l.starts_with("info string tree move: combined depth 31")), "{lines:?}");
    // In a position the tree does not know, the engine searches.
    uci.send("position startpos moves a2a3 a7a6 a3a4");
    uci.best(clock);
    assert_eq!(gos(&log), [clock]);
}

/// `show --json` of the position after `moves` (from the start position).
fn shown(db: &Path, moves: &str) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(["--db", db.to_str().expect("utf-8 path"), "show", "--moves", moves, "--depth", "1", "--json"])
        .env("DEEPTREE_CONFIG", db.join("none.toml"))
        .output()
        .expect("show runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("show prints JSON")
}

/// The tree's best move in a shown position (moves come sorted, best first).
fn best_move(shown: &serde_json::Value) -> String {
    shown["moves"][0]["uci"].as_str().expect("a best move").to_owned()
}

#[test]
fn a_position_below_an_analysed_root_answers_to_the_depth_the_roots_passes_settled_there() {
    // Combined depth 3 + 4 = 7 at the start position, settled with move distance 5 (too narrow to halve: the UCI
    // check then uses the full distance, as `show` does).
    let dir = tempfile::tempdir().expect("tempdir");
    grow(dir.path(), 3, 4);
    std::fs::write(dir.path().join("none.toml"), "move_distance = 5\n").expect("settings");
    let root = shown(dir.path(), "");
    assert_eq!(root["settled_depth"], 4, "{root}");
    assert!(root.get("known_depth").is_none_or(|d| d == 4), "the root is known as deep as it settled: {root}");

    // One and two plies below the root, on the tree's best line: no settled depth is stored there, but the root's
    // passes settled some. The UCI session answers exactly to the depth `show` finds, and searches one ply deeper.
    let first = best_move(&root);
    let below = shown(dir.path(), &first);
    let second = format!("{first} {}", best_move(&below));
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["MoveDistance value 5"]);
    let mut searches = 0;
    let mut answered_below_root = 0;
    for moves in [first.as_str(), second.as_str()] {
        let shown = shown(dir.path(), moves);
        assert!(shown["settled_depth"].is_null(), "{shown}");
        let known = shown["known_depth"].as_u64().unwrap_or(0);
        assert!(known < 4, "below the root, less than the root's depth: {shown}");
        uci.send(&format!("position startpos moves {moves}"));
        if known > 0 {
            let depth = 3 + known;
            let (_, lines) = uci.best(&format!("go depth {depth}"));
            assert_eq!(gos(&log).len(), searches, "no search for depth {depth} after {moves}: {lines:?}");
            let claim = format!("info string tree move: combined depth {depth} (engine 3 + software {known})");
            assert!(lines.iter().any(|l| l.starts_with(&claim)), "{lines:?}");
            assert!(lines.iter().any(|l| l.starts_with(&format!("info depth {depth} "))), "{lines:?}");
            answered_below_root += 1;
        }
        let deeper = format!("go depth {}", 3 + known + 1);
        let (_, lines) = uci.best(&deeper);
        searches += 1;
        assert_eq!(gos(&log).last(), Some(&deeper), "one ply deeper than known after {moves}: {lines:?}");
        assert_eq!(gos(&log).len(), searches, "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("tree move")), "{lines:?}");
    }
    assert!(answered_below_root > 0, "the tree answered below its root at least once");
}

#[test]
fn the_direct_engine_is_ready_before_go_and_hears_the_guis_game_and_clocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &[]);
    // Started and configured before the first `go`: the overhead is the engine's default plus the relay's.
    let before_go = fake_log(&log);
    assert!(before_go.first().is_some_and(|c| c == "uci"), "{before_go:?}");
    assert!(before_go.iter().any(|c| c == "isready"), "{before_go:?}");
    let overhead = before_go.iter().find_map(|c| c.strip_prefix("setoption name Move Overhead value "));
    let overhead: u32 = overhead.and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{before_go:?}"));
    assert_eq!(overhead, 10, "the fake engine's default, plus the relay's latency: none measured yet");
    // The GUI's own value takes the place of the default (the relay's measured latency is added at `ucinewgame`).
    uci.send("setoption name Move Overhead value 100");
    uci.ready();
    assert!(
        fake_log(&log)
            .iter()
            .filter_map(|c| c.strip_prefix("setoption name Move Overhead value "))
            .any(|v| v.parse::<u32>().is_ok_and(|v| (100..105).contains(&v))),
        "{:?}",
        fake_log(&log)
    );

    uci.send("ucinewgame");
    uci.ready();
    uci.send("position startpos moves e2e4");
    uci.best("go wtime 5000 btime 4000 winc 50 binc 60");
    let commands = fake_log(&log);
    let newgame = commands.iter().position(|c| c == "ucinewgame").expect("ucinewgame reached the engine");
    let go = commands.iter().position(|c| c.starts_with("go")).expect("go");
    assert!(newgame < go, "{commands:?}");
    assert!(commands[newgame..go].iter().any(|c| c == "isready"), "readyok awaited after ucinewgame: {commands:?}");
    assert_eq!(commands[go], "go wtime 5000 btime 4000 winc 50 binc 60", "the GUI's clocks, unchanged");
    assert_eq!(commands[go - 1], "position startpos moves e2e4");

    // While a search runs, isready is answered at once (before any bestmove).
    uci.send("go infinite");
    uci.send("isready");
    let lines = uci.until("readyok", PATIENCE);
    assert!(!lines.iter().any(|l| l.starts_with("bestmove")), "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("readyok"), "{lines:?}");
    uci.send("stop");
    assert!(uci.until("bestmove", PATIENCE).last().is_some_and(|l| l.starts_with("bestmove")));
}

/// A game's direct search is stored as its position's evaluation, so the position is answered from the tree when it
/// comes again (here in the next session); with `StoreSearches` off the tree is left as it was and the position is
/// searched again.
#[test]
fn a_games_search_is_stored_unless_store_searches_is_off() {
    for store in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("fake.log");
        let setting = format!("StoreSearches value {store}");
        let mut first = fake_session(dir.path(), &log, &[&setting]);
        first.send("position startpos moves e2e4");
        let (played, lines) = first.best("go depth 6");
        assert_eq!(gos(&log), ["go depth 6"], "an empty tree searches: {lines:?}");
        drop(first); // `quit`: what was submitted is written before the process ends

        let log_again = dir.path().join("fake-again.log");
        let mut again = fake_session(dir.path(), &log_again, &[&setting]);
        again.send("position startpos moves e2e4");
        let (replayed, lines) = again.best("go depth 6");
        let from_tree = lines.iter().any(|l| l.starts_with("info string tree move: combined depth 6"));
        if store {
            assert!(gos(&log_again).is_empty(), "the stored search answers: {:?} {lines:?}", gos(&log_again));
            assert!(from_tree, "{lines:?}");
            assert_eq!(replayed, played, "the stored move");
        } else {
            assert_eq!(gos(&log_again), ["go depth 6"], "nothing stored, searched again: {lines:?}");
            assert!(!from_tree, "{lines:?}");
        }
    }
}

/// A search whose score the game's history can shape is not stored (§3.7): a position since the last capture or pawn
/// move seen twice (a third occurrence would be a draw within the search), or a halfmove clock near the fifty-move
/// rule. The same position reached without that history is searched again, not answered from a score that was the
/// game's; searched there, it is stored and answered from the tree the next time.
#[test]
fn a_search_the_games_history_shapes_is_not_stored() {
    for (shaped, plain) in [
        ("position startpos moves g1f3 g8f6 f3g1 f6g8 g1f3 g8f6", "position startpos moves g1f3 g8f6"),
        ("position fen 4k3/8/8/8/8/8/4P3/4K3 w - - 70 90", "position fen 4k3/8/8/8/8/8/4P3/4K3 w - - 0 90"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let session = |name: &str| {
            let log = dir.path().join(name);
            (fake_session(dir.path(), &log, &[]), log)
        };
        let (mut first, log) = session("fake.log");
        first.send(shaped);
        let (_, lines) = first.best("go depth 6");
        assert_eq!(gos(&log), ["go depth 6"], "an empty tree searches: {lines:?}");
        drop(first);
        let (mut again, log) = session("fake-again.log");
        again.send(plain);
        let (_, lines) = again.best("go depth 6");
        assert_eq!(gos(&log), ["go depth 6"], "{shaped}: nothing stored, searched again: {lines:?}");
        drop(again);
        let (mut third, log) = session("fake-third.log");
        third.send(plain);
        let (_, lines) = third.best("go depth 6");
        assert!(gos(&log).is_empty(), "{plain}: the stored search answers: {lines:?}");
    }
}

/// `TreeDepthMargin` lets the tree answer where it knows that many plies less than a timed search would reach; a
/// depth the GUI asks for is never lowered by it.
#[test]
fn the_depth_margin_answers_a_timed_go_from_a_shallower_tree() {
    let clock = "go wtime 1000 btime 1000 winc 10 binc 10";
    // Combined depth 3 + 2 = 5 at the root: without a margin a one-second clock is searched (see above).
    let dir = tempfile::tempdir().expect("tempdir");
    grow(dir.path(), 3, 2);
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["TreeDepthMargin value 20"]);
    uci.send("position startpos");
    let (_, lines) = uci.best(clock);
    assert!(gos(&log).is_empty(), "answered within the margin: {:?} {lines:?}", gos(&log));
    assert!(lines.iter().any(|l| l.starts_with("info string tree move: combined depth 5")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("margin 20")), "{lines:?}");
    let (_, lines) = uci.best("go depth 6");
    assert_eq!(gos(&log), ["go depth 6"], "a depth asked for is searched: {lines:?}");
    let (_, lines) = uci.best("go nodes 1000000");
    assert_eq!(gos(&log), ["go depth 6", "go nodes 1000000"], "nodes asked for are searched: {lines:?}");
    uci.send("setoption name TreeDepthMargin value 0");
    let (_, lines) = uci.best(clock);
    assert_eq!(gos(&log), ["go depth 6", "go nodes 1000000", clock], "no margin: searched: {lines:?}");
}

/// Imports an EPD text into a new tree.
fn import_epd(db: &Path, epd: &str) {
    let file = db.join("tree.epd");
    std::fs::write(&file, epd).expect("EPD written");
    std::fs::write(db.join("none.toml"), "").expect("default settings for `shown`");
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(["--db", db.to_str().expect("utf-8 path"), "import", "epd", file.to_str().expect("utf-8 path")])
        .output()
        .expect("import runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// The knight shuffle 1. Nf3 Nf6 2. Ng1 Ng8, every position evaluated at depth 30; `start_moves` are the start
/// position's moves (all scored +25), `second_moves` White's moves after 1. Nf3 Nf6 (all scored +10).
fn knight_shuffle(start_moves: &str, second_moves: &str) -> String {
    format!(
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - bm {start_moves}; ce 25; acd 30;\n\
         rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - bm Nf6; ce -20; acd 30;\n\
         rnbqkb1r/pppppppp/5n2/8/8/5N2/PPPPPPPP/RNBQKB1R w KQkq - bm {second_moves}; ce 10; acd 30;\n\
         rnbqkb1r/pppppppp/5n2/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - bm Ng8; ce -30; acd 30;\n"
    )
}

/// A repetition inside the tree (the knight shuffle comes back to the root) makes the tree's alpha score differ from
/// its idea score, but the game's history plays no part: the tree answers. Where the game's history changes the
/// verdict (a move into a position of the game), the engine, which sees the game, searches.
#[test]
fn a_repetition_in_the_tree_answers_and_one_of_the_game_is_searched() {
    let clock = "go wtime 1000 btime 1000 winc 10 binc 10";
    let dir = tempfile::tempdir().expect("tempdir");
    import_epd(dir.path(), &knight_shuffle("Nf3", "Ng1"));
    let shown = shown(dir.path(), "");
    let nf3 = &shown["moves"][0];
    assert_eq!(nf3["uci"], "g1f3", "{shown}");
    assert_ne!(nf3["alpha"], nf3["idea"], "the shuffle back to the root is a draw in alpha only: {shown}");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["StoreSearches value false"]);
    uci.send("position startpos");
    let (played, lines) = uci.best(clock);
    assert!(gos(&log).is_empty(), "the tree answered: {:?} {lines:?}", gos(&log));
    assert_eq!(played, "g1f3", "{lines:?}");
    drop(uci);

    // 1. e4 is the start position's way out of the shuffle: after 1. Nf3 Nf6 in the game, 2. Ng1 Ng8 comes back to the
    // game's first position (a draw), where from the root alone White would play 1. e4 (2. Ng1 worth +25). Searched
    // where 2. Ng1 is the tree's only move, and where 2. e4 (+10 either way) is the tree's best with the game's
    // history: the history changes which move is best.
    for second_moves in ["Ng1", "Ng1 e4"] {
        let dir = tempfile::tempdir().expect("tempdir");
        import_epd(dir.path(), &knight_shuffle("Nf3 e4", second_moves));
        let log = dir.path().join("fake.log");
        let mut uci = fake_session(dir.path(), &log, &["StoreSearches value false"]);
        uci.send("position startpos moves g1f3 g8f6");
        let (_, lines) = uci.best(clock);
        assert_eq!(gos(&log).len(), 1, "the game's repetition is searched ({second_moves}): {lines:?}");
        assert!(!lines.iter().any(|l| l.contains("tree move")), "{lines:?}");
        // The start position itself, no history: the tree answers 1. e4 (+25; 1. Nf3 only shuffles back, a draw).
        uci.send("ucinewgame");
        uci.send("position startpos");
        let (played, lines) = uci.best(clock);
        assert_eq!(gos(&log).len(), 1, "the tree answered: {lines:?}");
        assert_eq!(played, "e2e4", "{lines:?}");
    }
}
