//! What a GUI sees is true: every PV legal from the root in the notation the GUI set, castling in both notations,
//! no score where nothing was searched, and `bestmove` in `go infinite`/`go ponder` only after `stop`/`ponderhit`.

mod common;

use std::{path::Path, time::Duration};

use common::{PATIENCE, Uci, fake, fake_log, fake_session, field, stockfish};
use shakmaty::{CastlingMode, Chess, Move, Position, fen::Fen, uci::UciMove};

fn position_of(fen: Option<&str>, moves: &[String], chess960: bool) -> Chess {
    let mode = if chess960 { CastlingMode::Chess960 } else { CastlingMode::Standard };
    let mut pos: Chess = match fen {
        Some(fen) => fen.parse::<Fen>().expect("fen").into_position(mode).expect("position"),
        None => Chess::default(),
    };
    for m in moves {
        let m = m.parse::<UciMove>().expect("uci").to_move(&pos).expect("legal");
        pos.play_unchecked(m);
    }
    pos
}

/// Plays `moves` from `pos`, each in the notation the GUI set: castling as king takes rook in Chess960, as the
/// king's move otherwise. Returns the first problem.
fn replay(pos: &Chess, moves: &[&str], chess960: bool) -> Result<(), String> {
    let mut pos = pos.clone();
    for text in moves {
        let uci: UciMove = text.parse().map_err(|_| format!("{text} is not UCI"))?;
        let m = uci.to_move(&pos).map_err(|_| format!("{text} is illegal"))?;
        if let Move::Castle { .. } = m {
            let expected = if chess960 { UciMove::from_chess960(m) } else { UciMove::from_standard(m) };
            if expected != uci {
                return Err(format!("castling {text} is not in the GUI's notation ({expected})"));
            }
        }
        pos.play_unchecked(m);
    }
    Ok(())
}

/// Checks every `pv` of a search's output against its root, and that the last best line (multipv 1, or no multipv)
/// starts with `bestmove`: the lines of MultiPV come after line 1 in each batch.
fn check_output(lines: &[String], root: &Chess, chess960: bool, context: &str) {
    let mut last_pv: Option<Vec<&str>> = None;
    for line in lines {
        if let Some((_, pv)) = line.split_once(" pv ")
            && line.starts_with("info ")
        {
            let moves: Vec<&str> = pv.split_whitespace().collect();
            if let Err(e) = replay(root, &moves, chess960) {
                panic!("{context}: {e} in '{line}'");
            }
            let multipv = field(line, "multipv");
            if multipv.is_none_or(|k| k == "1") {
                last_pv = Some(moves);
            }
        }
    }
    let best = lines.last().and_then(|l| l.split_whitespace().nth(1)).unwrap_or_else(|| panic!("{context}: {lines:?}"));
    if best != "0000" {
        replay(root, &[best], chess960).unwrap_or_else(|e| panic!("{context}: bestmove: {e}"));
        let head = last_pv.as_ref().and_then(|pv| pv.first().copied());
        assert_eq!(head, Some(best), "{context}: the last best pv must start with the move played: {lines:?}");
    }
}

/// With MultiPV above 1, the engine's final batch or the tree's is the last before `bestmove`: the last `info` line
/// with a `pv` carries its multipv (no line without one is added after the batch).
fn ends_with_a_batch(lines: &[String], context: &str) {
    let last = lines.iter().rev().find(|l| l.starts_with("info ") && l.contains(" pv "));
    let last = last.unwrap_or_else(|| panic!("{context}: no pv: {lines:?}"));
    assert!(last.contains(" multipv "), "{context}: the last line before bestmove has no multipv: {lines:?}");
}

/// Random games from `fen`, one position every few plies.
fn sample_lines(fen: Option<&str>, chess960: bool, seed: u64, games: usize) -> Vec<Vec<String>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = Vec::new();
    for _ in 0..games {
        let mut pos = position_of(fen, &[], chess960);
        let mut moves = Vec::new();
        for ply in 0..24 {
            let legal = pos.legal_moves();
            if legal.is_empty() {
                break;
            }
            if ply % 6 == 5 {
                out.push(moves.clone());
            }
            // Castle whenever it is legal, so that the lines are full of it.
            let m = legal.iter().find(|m| m.is_castle()).copied().unwrap_or(legal[rng.usize(..legal.len())]);
            moves.push(
                UciMove::from_move(m, if chess960 { CastlingMode::Chess960 } else { CastlingMode::Standard })
                    .to_string(),
            );
            pos.play_unchecked(m);
        }
    }
    out
}

fn run_positions(uci: &mut Uci, fen: Option<&str>, chess960: bool, seed: u64) {
    for (i, moves) in sample_lines(fen, chess960, seed, 4).into_iter().enumerate() {
        let root = position_of(fen, &moves, chess960);
        let start = fen.map_or_else(|| "startpos".to_owned(), |f| format!("fen {f}"));
        let position = if moves.is_empty() {
            format!("position {start}")
        } else {
            format!("position {start} moves {}", moves.join(" "))
        };
        uci.send(&position);
        let (_, lines) = uci.best("go nodes 4000");
        check_output(&lines, &root, chess960, &position);
        ends_with_a_batch(&lines, &position);
        if i % 3 == 0 {
            // The tree grows and streams its lines; after `stop`, its best move.
            uci.send("go infinite");
            uci.until("info depth", Duration::from_secs(5));
            uci.send("stop");
            let lines = uci.until("bestmove", PATIENCE);
            check_output(&lines, &root, chess960, &format!("{position} (infinite)"));
            ends_with_a_batch(&lines, &format!("{position} (infinite)"));
            // And from the tree, once it knows the position.
            let (_, lines) = uci.best("go depth 1");
            check_output(&lines, &root, chess960, &format!("{position} (tree)"));
        }
    }
}

#[test]
fn every_pv_is_legal_from_the_root_in_the_guis_notation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut uci = Uci::deeptree(dir.path());
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    for setting in [
        format!("InnerEngine value {}", stockfish().display()),
        "BackgroundAnalysis value false".into(),
        "EngineDepth value 4".into(),
        "MoveDistance value 40".into(),
        "MultiPV value 3".into(),
    ] {
        uci.send(&format!("setoption name {setting}"));
    }
    uci.ready();
    run_positions(&mut uci, None, false, 11);
    run_positions(&mut uci, Some("r3k2r/pppq1ppp/2npbn2/4p3/4P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 1"), false, 12);
    uci.send("setoption name UCI_Chess960 value true");
    uci.send("ucinewgame");
    uci.ready();
    for (i, fen) in [
        "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1",
        "nrbqkbrn/pppppppp/8/8/8/8/PPPPPPPP/NRBQKBRN w KQkq - 0 1",
        "rkrnnqbb/pppppppp/8/8/8/8/PPPPPPPP/RKRNNQBB w CAca - 0 1",
    ]
    .into_iter()
    .enumerate()
    {
        run_positions(&mut uci, Some(fen), true, 20 + i as u64);
    }
}

#[test]
fn castling_in_either_notation_reaches_the_engine_in_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["EngineDepth value 2"]);
    let line = "e2e4 e7e5 g1f3 b8c6 f1c4 f8c5";
    for (depth, (gui, chess960, engine)) in
        [("e1h1", false, "e1g1"), ("e1g1", false, "e1g1"), ("e1g1", true, "e1h1")].into_iter().enumerate()
    {
        uci.send(&format!("setoption name UCI_Chess960 value {chess960}"));
        uci.send(&format!("position startpos moves {line} {gui}"));
        // Deeper each time than the result stored before, so that the engine searches rather than the tree answering.
        let (best, lines) = uci.best(&format!("go depth {}", depth + 2));
        assert!(lines.iter().all(|l| !l.contains("error")), "{gui}: {lines:?}");
        let root = position_of(
            None,
            &[line.split_whitespace().map(str::to_owned).collect(), vec![engine.to_owned()]].concat(),
            chess960,
        );
        replay(&root, &[&best], chess960).unwrap_or_else(|e| panic!("{gui}: {e}"));
        let sent = fake_log(&log).into_iter().rfind(|c| c.starts_with("position")).unwrap_or_default();
        assert_eq!(sent, format!("position startpos moves {line} {engine}"), "{gui} with UCI_Chess960 {chess960}");
    }
    // One edge in the tree, whichever notation brought it. The session stores a search's result after its bestmove;
    // quit waits for it (a reader that only reads does not wait for a write in progress).
    drop(uci);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(["--db", dir.path().to_str().expect("utf-8"), "show", "--json", "--moves", line])
        .output()
        .expect("show");
    let shown = String::from_utf8_lossy(&output.stdout);
    assert_eq!(shown.matches("\"uci\":\"e1g1\"").count(), 1, "{shown}");
    assert!(!shown.contains("e1h1"), "{shown}");
}

#[test]
fn no_score_is_shown_where_nothing_was_searched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["EngineDepth value 2"]);
    uci.send("position fen not-a-fen");
    let (best, lines) = uci.best("go depth 3");
    assert_eq!(best, "0000");
    assert!(lines.iter().any(|l| l.starts_with("info string error:")), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains(" score ")), "{lines:?}");
    // Castling rights standard chess cannot have (the rook left a1) are refused, not taken for Chess960.
    uci.send("position fen 4k3/8/8/8/8/8/8/1R2K2R w KQ - 0 1");
    let (best, lines) = uci.best("go depth 3");
    assert_eq!(best, "0000", "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("info string error:") && l.contains("UCI_Chess960")), "{lines:?}");
    // No inner engine: the game goes on with a legal move, and no score.
    uci.send("setoption name InnerEngine value /nonexistent/engine");
    uci.send("position startpos moves e2e4");
    let (best, lines) = uci.best("go depth 3");
    replay(&position_of(None, &["e2e4".to_owned()], false), &[&best], false).expect("a legal move");
    assert!(!lines.iter().any(|l| l.contains(" score ")), "{lines:?}");
    // ... and among the moves the GUI allowed.
    let (best, _) = uci.best("go depth 3 searchmoves h7h6 a7a5");
    assert!(best == "h7h6" || best == "a7a5", "{best}");
}

/// A `stop` right behind `go` (here while the engine still takes a `ucinewgame`) gets a searched move, not the
/// first legal one.
#[test]
fn a_stop_right_behind_go_still_gets_a_searched_move() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut uci = Uci::deeptree(dir.path());
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    uci.send(&format!("setoption name InnerEngine value {}", stockfish().display()));
    uci.send("setoption name BackgroundAnalysis value false");
    uci.ready();
    for moves in ["", " moves e2e4", " moves d2d4 d7d5"] {
        for command in ["ucinewgame", &format!("position startpos{moves}"), "go movetime 5000", "stop"] {
            uci.send(command);
        }
        let lines = uci.until("bestmove", PATIENCE);
        assert!(!lines.iter().any(|l| l.contains("nothing could be searched")), "{lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("info depth") && l.contains(" score ")), "{lines:?}");
        let root = position_of(None, &moves.split_whitespace().skip(1).map(str::to_owned).collect::<Vec<_>>(), false);
        check_output(&lines, &root, false, moves);
    }
}

/// GUIs (ChessX among them) send `stop` and the next commands back to back, without waiting for `bestmove`.
#[test]
fn commands_right_after_stop_wait_for_the_stopped_search() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["EngineDepth value 2"]);
    uci.send("position startpos");
    uci.send("go infinite");
    uci.until("info depth", Duration::from_secs(5));
    for command in ["stop", "setoption name MultiPV value 1", "position startpos moves e2e4", "go depth 2"] {
        uci.send(command);
    }
    let first = uci.until("bestmove", PATIENCE);
    assert!(first.last().is_some_and(|l| l.starts_with("bestmove")), "{first:?}");
    let best = uci.until("bestmove", PATIENCE);
    assert!(!first.iter().chain(&best).any(|l| l.contains("error")), "{first:?} {best:?}");
    let reply = best.last().and_then(|l| l.split_whitespace().nth(1)).expect("a second bestmove").to_owned();
    replay(&position_of(None, &["e2e4".to_owned()], false), &[&reply], false).expect("a reply to 1. e4");
}

#[test]
fn bestmove_waits_for_stop_or_ponderhit_whatever_else_arrives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["EngineDepth value 2"]);
    for (go, release) in [("go infinite", "stop"), ("go ponder", "ponderhit"), ("go ponder", "stop")] {
        uci.send("position startpos moves d2d4");
        uci.send(go);
        for command in ["ucinewgame", "position startpos moves e2e4", "setoption name MultiPV value 2", "go depth 2"] {
            uci.send(command);
        }
        uci.send("isready");
        let lines = uci.until("readyok", PATIENCE);
        assert!(!lines.iter().any(|l| l.starts_with("bestmove")), "{go}: {lines:?}");
        let early = uci.until("bestmove", Duration::from_millis(500));
        assert!(!early.iter().any(|l| l.starts_with("bestmove")), "{go}: bestmove before {release}: {early:?}");
        uci.send(release);
        let lines = uci.until("bestmove", PATIENCE);
        assert!(lines.last().is_some_and(|l| l.starts_with("bestmove")), "{go}: {lines:?}");
        // The running search kept its own position (after 1. d4); the next search has the one sent meanwhile.
        let after_d4 = position_of(None, &["d2d4".to_owned()], false);
        check_output(&lines, &after_d4, false, go);
        let (best, _) = uci.best("go depth 2");
        replay(&position_of(None, &["e2e4".to_owned()], false), &[&best], false).expect("a reply to 1. e4");
    }
    // The `ucinewgame` sent during the search reached the engine once the search was over.
    let commands = fake_log(&log);
    let newgame = commands.iter().rposition(|c| c == "ucinewgame").expect("ucinewgame reached the engine");
    assert!(commands[..newgame].iter().any(|c| c == "stop" || c.starts_with("go depth")), "{commands:?}");
}

#[test]
fn a_games_go_ponder_off_the_tree_is_the_engines_own_ponder_and_ponderhit_or_stop_reaches_it() {
    // An empty tree knows no position: with a clock, `go ponder` goes to the inner engine as `go ponder` (the bare
    // engine would ponder there), and the GUI's `ponderhit` or `stop` is passed on to it.
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["Ponder value true"]);
    let gos_pondering = |log: &Path| fake_log(log).into_iter().filter(|c| c.starts_with("go ponder")).count();
    for (round, release) in [(1, "ponderhit"), (2, "stop")] {
        let moves = if round == 1 { "e2e4 e7e5" } else { "e2e4 e7e5 g1f3 b8c6" };
        uci.send(&format!("position startpos moves {moves}"));
        uci.send("go ponder wtime 60000 btime 60000 winc 100 binc 100");
        let asked = std::time::Instant::now();
        while gos_pondering(&log) < round && asked.elapsed() < PATIENCE {
            std::thread::sleep(Duration::from_millis(20));
        }
        let early = uci.until("bestmove", Duration::from_millis(300));
        assert!(!early.iter().any(|l| l.starts_with("bestmove")), "bestmove before {release}: {early:?}");
        uci.send(release);
        let lines = uci.until("bestmove", PATIENCE);
        assert!(lines.last().is_some_and(|l| l.starts_with("bestmove")), "{release}: {lines:?}");
        let played: Vec<String> = moves.split_whitespace().map(str::to_owned).collect();
        check_output(&lines, &position_of(None, &played, false), false, release);
        let commands = fake_log(&log);
        let go = commands.iter().rposition(|c| c.starts_with("go ponder")).expect("go ponder reached the engine");
        assert_eq!(commands[go], "go ponder wtime 60000 btime 60000 winc 100 binc 100", "{commands:?}");
        assert_eq!(commands[go + 1..].iter().filter(|c| *c == release).count(), 1, "{release}: {commands:?}");
        let other = if release == "stop" { "ponderhit" } else { "stop" };
        assert!(!commands[go + 1..].iter().any(|c| c == other), "{release}: {commands:?}");
        uci.ready();
    }
    // Without a clock (analysis on the opponent's time), `go ponder` grows the tree and the engine never ponders.
    uci.send("position startpos moves d2d4");
    uci.send("go ponder");
    std::thread::sleep(Duration::from_millis(300));
    uci.send("ponderhit");
    let lines = uci.until("bestmove", PATIENCE);
    assert!(lines.last().is_some_and(|l| l.starts_with("bestmove")), "{lines:?}");
    // `go ponder infinite` too: after `ponderhit` the move is decided as a move to play now (the tree, which grew
    // the position while pondering, answers it), not grown again until a `stop` that never comes.
    uci.send("position startpos moves d2d4 d7d5");
    uci.send("go ponder infinite");
    std::thread::sleep(Duration::from_millis(300));
    uci.send("ponderhit");
    let lines = uci.until("bestmove", PATIENCE);
    assert!(lines.last().is_some_and(|l| l.starts_with("bestmove")), "go ponder infinite, ponderhit: {lines:?}");
    assert_eq!(gos_pondering(&log), 2, "{:?}", fake_log(&log));
}

#[test]
fn a_go_with_searchmoves_to_an_engine_that_ignores_them_shows_the_best_so_far_as_each_move_is_searched() {
    // The fake engine in no-searchmoves mode plays a2a3 whatever searchmoves say; the session asks each allowed move
    // alone (the replies score +20 for the side to move after the move: -20 backed up). The GUI sees, after each
    // move, a line for its own position: the best so far, a lower bound while moves are left; and an info string
    // says how the search is done (after the first search, which found it out; before the second).
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    let mut uci = Uci::deeptree(&dir.path().join("tree"));
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    uci.send(&format!("setoption name InnerEngine value {} --mode no-searchmoves --log {}", fake(), log.display()));
    uci.send("setoption name BackgroundAnalysis value false");
    uci.ready();
    let allowed = ["e2e4", "d2d4", "g1f3"];
    uci.send("position startpos");
    for round in 0..2 {
        let (best, lines) = uci.best(&format!("go depth 4 searchmoves {}", allowed.join(" ")));
        assert!(allowed.contains(&best.as_str()), "{best}: {lines:?}");
        let note =
            lines.iter().position(|l| l.starts_with("info string") && l.contains("does not keep to searchmoves"));
        let note = note.unwrap_or_else(|| panic!("the method is said: {lines:?}"));
        let progress: Vec<&String> =
            lines.iter().filter(|l| l.starts_with("info depth") && field(l, "pv").is_some()).collect();
        // One line after each move; the engine's own lines of the first search, which showed a move outside
        // searchmoves (a2a3), are not relayed.
        assert_eq!(progress.len(), 3, "round {round}: {lines:?}");
        let tail = &progress[..];
        for (i, line) in tail.iter().enumerate() {
            assert_eq!(field(line, "depth"), Some("4"), "{line}");
            assert_eq!(field(line, "cp"), Some("-20"), "{line}");
            assert_eq!(line.contains(" lowerbound "), i < 2, "a lower bound while moves are left: {line}");
            assert_eq!(field(line, "pv"), Some(best.as_str()), "the best so far is the move played: {line}");
        }
        let nodes: Vec<u64> = tail.iter().map(|l| field(l, "nodes").unwrap().parse().unwrap()).collect();
        assert!(nodes.windows(2).all(|w| w[0] < w[1]), "the replies' nodes summed: {nodes:?}");
        if round == 1 {
            let first = lines.iter().position(|l| std::ptr::eq(l, tail[0])).unwrap();
            assert!(note < first, "said before the search, once known: {lines:?}");
        }
    }
    let gos: Vec<String> = fake_log(&log).into_iter().filter(|c| c.starts_with("go")).collect();
    assert_eq!(gos.iter().filter(|g| g.contains("searchmoves")).count(), 1, "{gos:?}");
}

/// UCI limits apply together, as the bare engine keeps them: a clock beside a depth or node limit (CuteChess's
/// `tc=` with `depth=`) still ends the search on the clock, and a `go` with a value it cannot read still gets its
/// `bestmove`, the value said to be unread. With the real Stockfish inside.
#[test]
fn a_clock_beside_a_depth_is_kept_and_a_go_it_cannot_read_wholly_still_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    // What reaches the engine: both limits.
    let mut fake = fake_session(&dir.path().join("fake"), &log, &[]);
    fake.send("position startpos");
    fake.send("go wtime 3000 btime 3000 depth 25");
    assert!(fake.until("bestmove", PATIENCE).last().is_some_and(|l| l.starts_with("bestmove")));
    // A mate search is the engine's own (until it finds the mate), not a depth of twice the moves.
    fake.send("go mate 3");
    assert!(fake.until("bestmove", PATIENCE).last().is_some_and(|l| l.starts_with("bestmove")));
    let sent = fake_log(&log);
    assert!(sent.iter().any(|l| l.ends_with("go wtime 3000 btime 3000 winc 0 binc 0 depth 25")), "{sent:?}");
    assert!(sent.iter().any(|l| l.ends_with("go mate 3")), "{sent:?}");

    let mut uci = common::session(&dir.path().join("tree"), &stockfish().display().to_string(), &[]);
    // A second on the clock and depth 40: Stockfish plans a few tens of milliseconds, far short of depth 40.
    uci.send("position startpos moves e2e4");
    let started = std::time::Instant::now();
    uci.send("go wtime 1000 btime 1000 winc 10 binc 10 depth 40");
    let lines = uci.until("bestmove", PATIENCE);
    let took = started.elapsed();
    assert!(lines.last().is_some_and(|l| l.starts_with("bestmove ")), "{lines:?}");
    assert!(took < Duration::from_millis(2000), "the clock ended the search: {took:?}");
    // Values it cannot read: said, skipped, and the search goes on with the rest.
    uci.send("position startpos moves d2d4");
    uci.send("go wtime abc btime 2000 movestogo depth 6");
    let lines = uci.until("bestmove", PATIENCE);
    assert!(lines.iter().any(|l| l.contains("'wtime' value 'abc' is not a number")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("'movestogo' value 'depth' is not a number")), "{lines:?}");
    let best = lines.last().filter(|l| l.starts_with("bestmove ")).expect("a bestmove");
    assert!(!best.starts_with("bestmove 0000"), "{best}");
}

/// Where the tree cannot grow (here its store cannot be opened: the path is a file), `go infinite` is the inner
/// engine's own, as with the bare engine: the GUI sees its lines until `stop`. With the real Stockfish inside.
#[test]
fn go_infinite_where_the_tree_cannot_grow_shows_the_engines_lines_until_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let not_a_store = dir.path().join("file");
    std::fs::write(&not_a_store, "not a store").unwrap();
    let mut uci = common::session(&not_a_store, &stockfish().display().to_string(), &[]);
    uci.send("position startpos moves e2e4");
    uci.send("go infinite");
    let lines = uci.until("info depth", Duration::from_secs(5));
    assert!(lines.last().is_some_and(|l| l.starts_with("info depth") && l.contains(" pv ")), "{lines:?}");
    uci.send("stop");
    let lines = uci.until("bestmove", PATIENCE);
    let best = lines.last().filter(|l| l.starts_with("bestmove ")).expect("a bestmove after stop");
    assert!(!best.starts_with("bestmove 0000"), "{best}");
}

/// A button (`Clear Hash`) is an act: each press reaches the engine once, a second press too, and none is sent
/// again at later searches or kept as a value.
#[test]
fn each_press_of_a_button_reaches_the_engine_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(&dir.path().join("tree"), &log, &["EngineDepth value 2"]);
    let presses = || fake_log(&log).iter().filter(|l| *l == "setoption name Clear Hash").count();
    // Each search in a position of its own: the direct engine searches every one.
    let mut openings = ["e2e4", "d2d4", "c2c4", "g1f3"].into_iter();
    for (press, searches) in [(true, 1), (true, 2), (false, 1)] {
        if press {
            uci.send("setoption name Clear Hash");
        }
        for _ in 0..searches {
            uci.send(&format!("position startpos moves {}", openings.next().unwrap()));
            uci.send("go depth 2");
            assert!(uci.until("bestmove", PATIENCE).last().is_some_and(|l| l.starts_with("bestmove")));
        }
    }
    assert_eq!(presses(), 2, "{:?}", fake_log(&log));
}
