//! `ThinkMode tree`: a timed `go` that the tree does not already answer grows the tree for the move's time share
//! with all `Threads` as workers, then plays the tree's best move; with the real Stockfish inside.

mod common;

use std::time::{Duration, Instant};

use common::{PATIENCE, Uci, field, stockfish};
use shakmaty::{Chess, Position, fen::Fen, uci::UciMove};

/// A session with Stockfish inside, `Threads` 2, no idle growth, the think mode given.
fn session(db: &std::path::Path, mode: &str) -> Uci {
    let mut uci = Uci::deeptree(db);
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    uci.send(&format!("setoption name InnerEngine value {}", stockfish().display()));
    uci.send("setoption name BackgroundAnalysis value false");
    uci.send("setoption name Threads value 2");
    uci.send("setoption name Hash value 32");
    uci.send(&format!("setoption name ThinkMode value {mode}"));
    uci.ready();
    uci
}

fn legal(fen: Option<&str>, moves: &[&str], best: &str) -> bool {
    let mut pos: Chess = match fen {
        Some(fen) => fen.parse::<Fen>().unwrap().into_position(shakmaty::CastlingMode::Standard).unwrap(),
        None => Chess::default(),
    };
    for m in moves {
        let m = m.parse::<UciMove>().unwrap().to_move(&pos).unwrap();
        pos.play_unchecked(m);
    }
    best.parse::<UciMove>().ok().and_then(|m| m.to_move(&pos).ok()).is_some()
}

/// The `think tree` line: (the budget in ms, the workers, the engine depth).
fn plan(lines: &[String]) -> (u64, usize, u8) {
    let line = lines.iter().find(|l| l.starts_with("info string think tree: ") && l.contains(" workers at "));
    let line = line.unwrap_or_else(|| panic!("no think line: {lines:?}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    (words[4].parse().unwrap(), words[7].parse().unwrap(), words[words.len() - 1].parse().unwrap())
}

#[test]
fn a_timed_go_grows_the_tree_for_its_share_and_plays_its_best_move() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let mut uci = session(&db, "tree");
    let moves = ["e2e4", "c7c5", "g1f3", "d7d6"];
    uci.send(&format!("position startpos moves {}", moves.join(" ")));
    let started = Instant::now();
    let (best, lines) = uci.best("go movetime 1500");
    let took = started.elapsed();
    assert!(legal(None, &moves, &best), "{best}: {lines:?}");
    let (budget, workers, depth) = plan(&lines);
    assert_eq!(workers, 2, "all Threads grow the tree");
    assert!((1000..=1500).contains(&budget), "the move's share: {budget} ms");
    assert!((4..=18).contains(&depth), "{depth}");
    // It thought with the tree: multipv lines as in `go infinite`, and the searches it answered.
    assert!(lines.iter().any(|l| l.starts_with("info depth") && l.contains(" multipv 1 ")), "{lines:?}");
    let answered =
        lines.iter().find_map(|l| l.strip_prefix("info string think tree: ")?.strip_suffix(" searches answered"));
    assert!(answered.unwrap().parse::<u64>().unwrap() >= 2, "{lines:?}");
    assert!(took < Duration::from_millis(1500 + 1500), "within its time: {took:?}");
    // The lines before bestmove are the tree's final batch, its line 1 the move played.
    final_batch(&lines, &best);

    // What the move grew stays: the next session finds it in the store.
    drop(uci);
    let show = std::process::Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(["--db", db.to_str().unwrap(), "show", "--moves", &moves.join(" "), "--depth", "1", "--json"])
        .output()
        .unwrap();
    let tree: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let valued = tree["moves"].as_array().unwrap().iter().filter(|m| !m["alpha"].is_null()).count();
    assert!(valued >= 2, "{tree}");
}

#[test]
fn a_clock_go_thinks_within_its_share_and_stop_and_isready_answer_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut uci = session(&dir.path().join("tree"), "tree");
    uci.send("position startpos moves d2d4 g8f6 c2c4");
    let (best, lines) = uci.best("go wtime 20000 btime 20000 winc 100 binc 100");
    assert!(legal(None, &["d2d4", "g8f6", "c2c4"], &best), "{best}");
    let (budget, _, _) = plan(&lines);
    assert!(budget > 100 && budget < 20000 / 5 * 2, "a share of Black's clock: {budget} ms");

    // A long movetime, stopped early: the tree's best move comes at once, and isready is answered meanwhile.
    uci.send("position startpos moves d2d4 g8f6 c2c4 e7e6");
    uci.send("go movetime 30000");
    std::thread::sleep(Duration::from_millis(800));
    let asked = Instant::now();
    uci.send("isready");
    let lines = uci.until("readyok", PATIENCE);
    assert!(asked.elapsed() < Duration::from_secs(2), "isready during the think: {lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("bestmove")), "{lines:?}");
    let stopped = Instant::now();
    uci.send("stop");
    let lines = uci.until("bestmove", PATIENCE);
    assert!(stopped.elapsed() < Duration::from_secs(3), "stop answers at once: {:?}", stopped.elapsed());
    let best = lines.last().unwrap().split_whitespace().nth(1).unwrap().to_owned();
    assert!(legal(None, &["d2d4", "g8f6", "c2c4", "e7e6"], &best), "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("bestmove")).count(), 1);
}

#[test]
fn ponderhit_thinks_with_the_tree_and_depth_and_nodes_stay_direct() {
    let dir = tempfile::tempdir().unwrap();
    let mut uci = session(&dir.path().join("tree"), "tree");
    uci.send("position startpos moves e2e4 e7e5");
    uci.send("go ponder wtime 10000 btime 10000 winc 100 binc 100");
    std::thread::sleep(Duration::from_millis(300));
    uci.send("ponderhit");
    let lines = uci.until("bestmove", PATIENCE);
    plan(&lines);
    assert!(lines.last().unwrap().starts_with("bestmove "), "{lines:?}");
    // A fixed depth or node count is the GUI's limit: the engine searches it, as before.
    uci.send("position startpos moves e2e4 e7e5 g1f3");
    let (_, lines) = uci.best("go depth 6");
    assert!(!lines.iter().any(|l| l.contains("think tree")), "{lines:?}");
    let (_, lines) = uci.best("go nodes 20000");
    assert!(!lines.iter().any(|l| l.contains("think tree")), "{lines:?}");
    // A depth with a movetime: the depth is the limit the engine searches to, as for the bare engine.
    let (_, lines) = uci.best("go depth 6 movetime 5000");
    assert!(!lines.iter().any(|l| l.contains("think tree")), "{lines:?}");
}

#[test]
fn auto_is_direct_and_says_so_and_a_deeper_stored_evaluation_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    // A deep evaluation of the position after 1. e4 e5 2. Nf3, from an EPD line.
    let epd = dir.path().join("deep.epd");
    std::fs::write(&epd, "rnbqkbnr/pppp1ppp/8/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - ce -30; acd 40; bm Nc6;\n")
        .unwrap();
    let import = std::process::Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(["--db", db.to_str().unwrap(), "import", "epd", epd.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(import.status.success(), "{import:?}");

    let mut uci = session(&db, "auto");
    uci.send("position startpos moves e2e4 e7e5");
    let (_, lines) = uci.best("go movetime 300");
    assert!(lines.iter().any(|l| l.starts_with("info string think mode auto: direct")), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("think tree")), "{lines:?}");

    uci.send("setoption name ThinkMode value tree");
    uci.send("position startpos moves e2e4 e7e5");
    let (_, lines) = uci.best("go movetime 1500");
    plan(&lines);
    drop(uci);
    let store = deeptree::store::Store::open(&db, &Default::default()).unwrap();
    let view = store.read().unwrap();
    let after_nf3 = deeptree::game::Line::parse(None, "e2e4 e7e5 g1f3").unwrap();
    let key = deeptree::store::key::PositionKey::of(after_nf3.root());
    let node = view.node(key).unwrap().expect("the position is stored");
    assert_eq!(node.eval.map(|e| e.depth), Some(40), "the deep evaluation after 2. Nf3 is kept");
    // The think did search: the root is evaluated now.
    let root = deeptree::game::Line::parse(None, "e2e4 e7e5").unwrap();
    let root = view.node(deeptree::store::key::PositionKey::of(root.root())).unwrap().expect("the root is stored");
    assert!(root.eval.is_some_and(|e| e.depth < 40));
}

#[test]
fn think_mode_tree_starts_its_workers_at_isready_not_inside_the_first_move() {
    // The fake engine appends its process id to a file at start: the direct engine and the two workers of
    // `Threads` 2 must all be running once `readyok` comes, before any `go`.
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let count = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_default().lines().count();
    for (mode, started) in [("tree", 3), ("direct", 1)] {
        let _ = std::fs::remove_file(&pids);
        let mut uci = Uci::deeptree(&dir.path().join(format!("tree-{mode}")));
        uci.send("uci");
        uci.until("uciok", PATIENCE);
        uci.send(&format!("setoption name InnerEngine value {} --pid-file {}", common::fake(), pids.display()));
        uci.send("setoption name BackgroundAnalysis value false");
        uci.send("setoption name Threads value 2");
        uci.send(&format!("setoption name ThinkMode value {mode}"));
        uci.ready();
        assert_eq!(count(&pids), started, "engines running after readyok with ThinkMode {mode}");
        uci.send("quit");
    }
}

/// The `info` lines right before `bestmove` (the last line of `lines`): the tree's final batch, every line with its
/// `multipv`, numbered 1 to k, line 1's PV starting with `best`, one depth, one node count. Returns the batch.
fn final_batch<'a>(lines: &'a [String], best: &str) -> Vec<&'a String> {
    let (last, before) = lines.split_last().unwrap();
    assert!(last.starts_with(&format!("bestmove {best}")), "{lines:?}");
    let info_lines: Vec<&String> = before.iter().filter(|l| l.starts_with("info ")).collect();
    // The batch starts at its line 1 (the notes before it, without multipv, come only when they changed).
    let start = info_lines.iter().rposition(|l| field(l, "multipv") == Some("1")).unwrap_or(info_lines.len());
    let batch = info_lines[start..].to_vec();
    assert!(!batch.is_empty(), "the last info before bestmove carries multipv: {lines:?}");
    assert!(batch.iter().all(|l| l.contains(" multipv ")), "no line without multipv in the last batch: {lines:?}");
    let numbers: Vec<u32> = batch.iter().map(|l| field(l, "multipv").unwrap().parse().unwrap()).collect();
    assert_eq!(numbers, (1..=batch.len() as u32).collect::<Vec<u32>>(), "{batch:?}");
    assert_eq!(field(batch[0], "pv"), Some(best), "line 1 is the bestmove: {lines:?}");
    for key in ["depth", "nodes"] {
        assert!(batch.iter().all(|l| field(l, key) == field(batch[0], key)), "one {key}: {batch:?}");
    }
    batch
}

#[test]
fn after_stop_the_last_lines_before_bestmove_are_the_final_batch_for_ponder_and_go_infinite() {
    // go ponder then stop, and go infinite with MultiPV 3 then stop, each from its own position: the tree's answer
    // comes after its final batch, with multipv, and line 1 is the bestmove. The ponder has no clock: a game's
    // `go ponder` on a position the tree does not know is the inner engine's own (tests/uci_conformance.rs).
    let dir = tempfile::tempdir().unwrap();
    let mut uci = session(&dir.path().join("tree"), "direct");
    uci.send("setoption name EngineDepth value 8");
    uci.ready();
    uci.send("position startpos moves d2d4 d7d5");
    uci.send("go ponder");
    std::thread::sleep(Duration::from_millis(1500));
    let (best, lines) = uci.best("stop");
    assert_eq!(final_batch(&lines, &best).len(), 1, "MultiPV 1: {lines:?}");
    uci.send("setoption name MultiPV value 3");
    uci.send("position startpos moves e2e4 e7e5");
    uci.send("go infinite");
    std::thread::sleep(Duration::from_millis(1500));
    let (best, lines) = uci.best("stop");
    assert_eq!(final_batch(&lines, &best).len(), 3, "MultiPV 3: {lines:?}");
}

#[test]
fn growing_the_tree_reports_moving_node_counts_and_its_last_batch_names_the_move_played() {
    // `go infinite` grows the tree: every batch counts the nodes the engines searched so far (a GUI shows them and
    // their rate), and after `stop` the last batch's line 1 is the move played.
    let dir = tempfile::tempdir().unwrap();
    let mut uci = session(&dir.path().join("tree"), "direct");
    // More lines than the tree values: a GUI waits for min(MultiPV, legal moves) lines at each depth.
    uci.send("setoption name MultiPV value 30");
    // Shallow leaf searches: many are answered between two batches.
    uci.send("setoption name EngineDepth value 8");
    uci.ready();
    uci.send("position startpos moves e2e4");
    uci.send("go infinite");
    std::thread::sleep(Duration::from_millis(2600));
    let (best, lines) = uci.best("stop");
    let firsts: Vec<&String> = lines.iter().filter(|l| l.starts_with("info ") && l.contains(" multipv 1 ")).collect();
    assert!(firsts.len() >= 3, "batches at 0.3 s, 1.3 s, 2.3 s and the last: {lines:?}");
    let nodes: Vec<u64> = firsts.iter().map(|l| field(l, "nodes").unwrap().parse().unwrap()).collect();
    assert!(nodes.windows(2).all(|w| w[0] <= w[1]), "{nodes:?}");
    assert!(nodes.last() > nodes.first(), "the count moves as searches are answered: {nodes:?}");
    assert!(firsts.iter().all(|l| field(l, "nps").is_some()), "{firsts:?}");
    // The lines right before bestmove are the final batch, every one with its multipv, line 1 the move played; no
    // line without multipv comes between (it named another move than the last batch's line 1 before).
    let batch = final_batch(&lines, &best);
    // Every batch has the 20 lines of Black's 20 moves after 1. e4, numbered 1 to 20; those the tree has not valued
    // carry an upper bound.
    assert_eq!(batch.len(), 20, "{batch:?}");
    let bounded = batch.iter().filter(|l| l.contains(" upperbound ")).count();
    assert!(bounded > 0 && bounded < 20, "{batch:?}");
    assert!(batch.iter().rev().take(bounded).all(|l| l.contains(" upperbound ")), "bounds come last: {batch:?}");
    // A batch names the tree's main line in SAN, from Black's move, and its settled depth, where it changed (at most
    // once a second: tests/uci_clients.rs, but in the last batch whenever it changed); the last one's line starts
    // with the move played.
    let main_lines: Vec<&String> = lines.iter().filter(|l| l.starts_with("info string tree main line 1... ")).collect();
    assert!(!main_lines.is_empty(), "{lines:?}");
    assert!(main_lines.windows(2).all(|w| w[0] != w[1]), "a note twice alike: {main_lines:?}");
    let last = main_lines.last().unwrap();
    let pos = Chess::default().play("e2e4".parse::<UciMove>().unwrap().to_move(&Chess::default()).unwrap()).unwrap();
    let played = shakmaty::san::San::from_move(&pos, best.parse::<UciMove>().unwrap().to_move(&pos).unwrap());
    assert!(last.starts_with(&format!("info string tree main line 1... {played}")), "{last} {best}");
    let settled = last.split("settled depth ").nth(1).and_then(|t| t.split(',').next()).unwrap();
    assert!(settled.parse::<u8>().is_ok(), "{last}");
    assert!(last.ends_with("engine depth 8)"), "{last}");
}

#[test]
fn growth_lines_show_only_the_moves_searchmoves_allow() {
    let dir = tempfile::tempdir().unwrap();
    let mut uci = session(&dir.path().join("tree"), "direct");
    uci.send("setoption name MultiPV value 5");
    uci.send("setoption name EngineDepth value 8");
    uci.ready();
    uci.send("position startpos moves e2e4");
    uci.send("go infinite searchmoves e7e5 c7c5");
    std::thread::sleep(Duration::from_millis(1500));
    let (best, lines) = uci.best("stop");
    assert!(["e7e5", "c7c5"].contains(&best.as_str()), "{best}: {lines:?}");
    let shown: Vec<&String> = lines.iter().filter(|l| l.contains(" multipv ")).collect();
    assert!(!shown.is_empty(), "{lines:?}");
    for line in &shown {
        let first = field(line, "pv").unwrap();
        assert!(["e7e5", "c7c5"].contains(&first), "{line}");
        assert!(field(line, "multipv").unwrap().parse::<u32>().unwrap() <= 2, "{line}");
    }
}
