//! Import, export and merge through the binary, read back with independent tools (python-chess), compared with
//! `deeptree show --json`. Analyses use the scripted evaluator (fast and exact) except one with the real Stockfish.

mod common;

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    process::{Command, Output},
};

use common::interop_check;

use deeptree::{
    game::Line,
    interop::polyglot::{book_key, polyglot_move, read_book},
    score::{Bound, Score},
    search::{
        analysis::{Analysis, AnalysisOptions, Params, Trace, move_distance_at},
        evaluator::ScriptedEvaluator,
        show,
    },
    store::{
        Change, Store, StoreOptions,
        key::PositionKey,
        node::{Edge, Node, PackedPosition},
    },
    values::{
        graph::{Graph, MemGraph},
        idea::recompute_all,
    },
};
use serde_json::Value;
use shakmaty::{CastlingMode, Chess, EnPassantMode, Position, fen::Fen, uci::UciMove};

const GAMES: &str = r#"[Event "Open game"]
[White "A"]
[Black "B"]
[Result "*"]

1. e4 e5 (1... c5 2. Nf3 d6 (2... Nc6 3. d4 cxd4) 3. d4) (1... e6 2. d4 d5)
2. Nf3 {a comment} Nc6 $1 3. Bb5 a6 4. Ba4 Nf6 5. O-O *

[Event "Bad SAN"]

1. d4 d5 2. c4 Qxx9 3. Nc3 *

[Event "Illegal move in a variation"]

1. d4 d5 (1... Nf6 2. Ke3) 2. c4 *

[Event "Bad FEN"]
[SetUp "1"]
[FEN "rnbqkbnr/pppppppp/8/8 w KQkq - 0 1"]

1. e4 *

[Event "Castling from a position"]
[SetUp "1"]
[FEN "r3k2r/pppq1ppp/2np1n2/2b1p1B1/2B1P1b1/2NP1N2/PPPQ1PPP/R3K2R w KQkq - 4 8"]

8. O-O-O (8. O-O) O-O (8... O-O-O) 9. h3 (9. Kb1) *

[Event "An en passant capture that is not legal"]
[SetUp "1"]
[FEN "8/8/8/K2pP2r/8/8/8/7k w - d6 0 1"]

1. Kb4 Kg2 2. e6 *
"#;

const CASTLING_FEN: &str = "r3k2r/pppq1ppp/2np1n2/2b1p1B1/2B1P1b1/2NP1N2/PPPQ1PPP/R3K2R w KQkq - 4 8";
const PINNED_EP_FEN: &str = "8/8/8/K2pP2r/8/8/8/7k w - d6 0 1";

fn deeptree(db: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree")).arg("--db").arg(db).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "deeptree {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn deeptree_json(db: &Path, args: &[&str]) -> Value {
    let output = deeptree(db, args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap()
}

fn position(fen: &str) -> Chess {
    fen.parse::<Fen>().unwrap().into_position(CastlingMode::Standard).unwrap()
}

fn fen_of(pos: &Chess) -> String {
    Fen::from_position(pos, EnPassantMode::Legal).to_string()
}

fn params(max_depth: u8) -> Params {
    Params::new(10, 20).with_max_depth(max_depth)
}

fn analyse(store: &Store, fen: Option<&str>, moves: &str, max_depth: u8) {
    let mut analysis = Analysis::new(store, ScriptedEvaluator::new(2, 7), params(max_depth));
    let report = analysis.run(&Line::parse(fen, moves).unwrap(), |_| {}).unwrap();
    assert_eq!(report.settled_depth, Some(max_depth));
}

/// A store with the test games imported (through the binary) and analysed with the scripted evaluator.
fn analysed_store(dir: &Path) -> Store {
    let pgn = dir.join("games.pgn");
    std::fs::write(&pgn, GAMES).unwrap();
    let db = dir.join("db");
    deeptree(&db, &["import", "pgn", pgn.to_str().unwrap()]);
    let store = Store::open(&db, &StoreOptions::default()).unwrap();
    analyse(&store, None, "", 3);
    analyse(&store, Some(CASTLING_FEN), "", 2);
    analyse(&store, Some(PINNED_EP_FEN), "", 1);
    store
}

/// A score from `show --json`: `null` (a move nothing has valued) as the placeholder.
fn json_score(value: &Value) -> Score {
    if value.is_null() {
        Score::NOT_VALUED
    } else if let Some(cp) = value["cp"].as_i64() {
        Score::cp(cp as i32)
    } else {
        Score::from_uci_mate(value["mate"].as_i64().expect("cp or mate") as i32)
    }
}

/// A score as a move comment writes it: pawns, `#n`, or `?` for a move nothing has valued.
fn comment_score(text: &str) -> Score {
    if text == "?" {
        Score::NOT_VALUED
    } else if let Some(mate) = text.strip_prefix('#') {
        Score::from_uci_mate(mate.parse().unwrap())
    } else {
        Score::cp((text.parse::<f64>().unwrap() * 100.0).round() as i32)
    }
}

/// Compares python-chess's reading of an exported game with `show --json`, move by move: same moves, same order
/// (the main line first, then the variations best first), and the comment's scores and depth. python-chess holds
/// the alternatives of a move as the variations of the node before it, which is the shape of the shown tree.
fn compare_game(read: &[Value], shown: &Value, engine_depth: u8, checked: &mut usize) {
    let moves = shown["moves"].as_array().unwrap();
    let read_ucis: Vec<&str> = read.iter().map(|m| m["uci"].as_str().unwrap()).collect();
    let shown_ucis: Vec<&str> = moves.iter().map(|m| m["uci"].as_str().unwrap()).collect();
    assert_eq!(read_ucis, shown_ucis, "moves in best-first order");
    for (r, s) in read.iter().zip(moves) {
        *checked += 1;
        // The export writes check marks, as the export format wants; show leaves them out.
        assert_eq!(r["san"].as_str().unwrap().trim_end_matches(['+', '#']), s["san"]);
        let words: Vec<&str> = r["comment"].as_str().unwrap().split_whitespace().collect();
        if s["idea"].is_null() && s["alpha"].is_null() {
            // Nothing has valued the move: no comment, and no score or depth in show either.
            assert!(words.is_empty(), "no comment for the unvalued {}: {:?}", s["uci"], r["comment"]);
            assert!(s["engine"].is_null() && s["depth"].is_null(), "{s}");
        } else {
            assert_eq!(words.len(), 5, "comment {:?}", r["comment"]);
            assert_eq!((words[0], words[2]), ("idea", "alpha"));
            assert_eq!(comment_score(words[1]), json_score(&s["idea"]), "idea of {}", s["uci"]);
            assert_eq!(comment_score(words[3]), json_score(&s["alpha"]), "alpha of {}", s["uci"]);
            // An imported move that no engine scored itself is valued through its child, at the engine depth.
            if s["engine"].is_null() {
                assert_eq!(s["depth"].as_u64(), Some(u64::from(engine_depth)), "depth of {}", s["uci"]);
            }
            assert_eq!(words[4], format!("d{}", s["depth"]), "depth of {}", s["uci"]);
        }
        let children = r["children"].as_array().unwrap();
        match s["child"].as_object() {
            Some(_) => compare_game(children, &s["child"], engine_depth, checked),
            None => assert!(children.is_empty(), "{} has no analysis below", s["uci"]),
        }
    }
}

#[test]
fn a_placeholder_never_outranks_an_engine_score_and_gives_way_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let start = Chess::default();
    let e4: UciMove = "e2e4".parse().unwrap();
    let d4: UciMove = "d2d4".parse().unwrap();
    let node = |edges: Vec<Edge>| {
        let mut n = Node::new(PackedPosition::of(&start));
        n.edges = edges;
        Change::merge(&start, n).unwrap()
    };
    let placeholder = Edge::placeholder(e4);
    assert!(placeholder.imported && placeholder.depth == 0 && placeholder.bound == Bound::Upper);
    // The worst engine score of a move is being mated after it; the placeholder is lower still.
    assert!(Score::NOT_VALUED < Score::mated_in_plies(1));
    store.writer().submit(vec![node(vec![placeholder.clone()])]).wait().unwrap();
    store.writer().submit(vec![node(vec![Edge::new(e4, Score::cp(-700), Bound::Exact, 10)])]).wait().unwrap();
    let view = store.read().unwrap();
    let stored = view.node(PositionKey::of(&start)).unwrap().unwrap();
    let edge = stored.edge(&e4).unwrap();
    assert_eq!((edge.score, edge.depth, edge.imported), (Score::cp(-700), 10, true), "engine score, still imported");
    drop(view);
    // Importing again after the engine scored the move changes nothing but keeps the flag.
    store.writer().submit(vec![node(vec![placeholder, Edge::placeholder(d4)])]).wait().unwrap();
    let view = store.read().unwrap();
    let stored = view.node(PositionKey::of(&start)).unwrap().unwrap();
    assert_eq!(stored.edge(&e4).map(|e| (e.score, e.imported)), Some((Score::cp(-700), true)));
    let shown = show::tree(&view, &start, &[], 1).unwrap();
    assert_eq!(shown.moves[0].uci, "e2e4", "the placeholder of d4 ranks below even a losing engine score");
    assert_eq!(shown.moves[1].alpha, Score::NOT_VALUED);
}

#[test]
fn pgn_import_reports_malformed_games_and_imports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let pgn = dir.path().join("games.pgn");
    std::fs::write(&pgn, GAMES).unwrap();
    let db = dir.path().join("db");
    let output = deeptree(&db, &["import", "pgn", pgn.to_str().unwrap(), "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    for (game, why) in [("game 2 ", "'Qxx9' is not SAN"), ("game 3 ", "'Ke3' is illegal"), ("game 4 ", "bad FEN")] {
        assert!(stderr.lines().any(|l| l.contains(game) && l.contains(why)), "{game}{why} not reported: {stderr}");
    }
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    // Game 1: 9 main-line moves, 4 + 3 in the 1... c5 variation and the one nested in it, 3 in 1... e6;
    // game 5: 6 (two castlings for White, two for Black, h3, Kb1); game 6: 3.
    assert_eq!(summary["games"], 6);
    assert_eq!(summary["skipped"], 3);
    assert_eq!(summary["edges"], 9 + 4 + 3 + 3 + 6 + 3);
    assert_eq!(summary["new_edges"], summary["edges"]);

    let store = Store::open(&db, &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    let mut edges = 0;
    for item in view.nodes().unwrap() {
        let (_, node) = item.unwrap();
        assert!(node.eval.is_none(), "nothing is evaluated by an import");
        for edge in &node.edges {
            edges += 1;
            assert!(edge.imported);
            assert_eq!((edge.score, edge.depth, edge.bound), (Score::NOT_VALUED, 0, Bound::Upper));
        }
    }
    assert_eq!(edges, summary["edges"].as_u64().unwrap());
    // The variation 1... c5 2. Nf3 branches from the position after 1. e4.
    let after_e4 = Line::parse(None, "e2e4").unwrap();
    let node = view.node(PositionKey::of(after_e4.root())).unwrap().unwrap();
    let replies: HashSet<String> = node.edges.iter().map(|e| e.uci.to_string()).collect();
    assert_eq!(replies, HashSet::from(["e7e5".into(), "c7c5".into(), "e7e6".into()]));
    drop(view);
    drop(store);

    // Importing the same file again adds nothing.
    let again = deeptree_json(&db, &["import", "pgn", pgn.to_str().unwrap(), "--json"]);
    assert_eq!((again["new_edges"].as_u64(), again["new_nodes"].as_u64()), (Some(0), Some(0)));

    // --max-ply keeps the first plies of every line.
    let short = dir.path().join("short");
    let limited = deeptree_json(&short, &["import", "pgn", pgn.to_str().unwrap(), "--max-ply", "1", "--json"]);
    assert_eq!(limited["edges"], 4, "1. e4, 8. O-O-O, 8. O-O and 1. Kb4: the first ply of each imported game");
}

/// A token that is not a move (pgn-reader passes over it without a word) makes its game malformed: here the moves
/// around it would still be legal, so without the check the game would import with a move missing.
#[test]
fn pgn_import_reports_a_game_with_an_unreadable_token_by_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db"), &StoreOptions::default()).unwrap();
    let pgn = "[Event \"a\"]\n\n1. d4 d5 *\n\n\
               [Event \"b\"]\n\n1. e4 e5 2. xyz Nf3 Nc6 *\n\n\
               [Event \"c\"]\n\n1. c4 Nf9 2. Nc3 e5 *\n\n\
               [Event \"d\"]\n\n1. e4 c5 2. Nf3 *\n";
    let mut skipped = Vec::new();
    let summary = deeptree::interop::pgn_import::import_pgn(&store, pgn.as_bytes(), &Default::default(), |s| {
        skipped.push((s.game, s.line, s.reason.clone()))
    })
    .unwrap();
    assert_eq!(skipped, [(2, 5, "move 3 'xyz' is not SAN".to_owned()), (3, 9, "move 2 'Nf9' is not SAN".to_owned())]);
    assert_eq!((summary.games, summary.skipped, summary.edges), (4, 2, 2 + 3));
    let view = store.read().unwrap();
    let after_e4_e5 = Line::parse(None, "e2e4 e7e5").unwrap();
    assert!(view.node(PositionKey::of(after_e4_e5.root())).unwrap().is_none(), "nothing of game 2 is imported");
}

/// Imported moves below `node` (at `ply`) that lie outside the move distance of their node's best move: each must
/// have been walked (its position evaluated, so it has a value). Checked at plies 0 and 1, where the search makes no
/// beta cut-off (deeper, a cut-off may end a node's walk before its imported moves, as before any other move).
fn imported_outside_the_window(node: &show::ShownNode, ply: u8, found: &mut usize) {
    let Some(best) = node.moves.first().map(|m| m.alpha) else { return };
    for m in &node.moves {
        if m.imported && m.alpha < best.minus_cp(move_distance_at(20, ply)) && ply < 2 {
            *found += 1;
            assert_ne!(m.alpha, Score::NOT_VALUED, "{} at ply {ply} was walked and valued", m.san);
        }
        if let Some(child) = &m.child {
            imported_outside_the_window(child, ply + 1, found);
        }
    }
}

#[test]
fn imported_lines_are_analysed_even_outside_the_move_distance() {
    let dir = tempfile::tempdir().unwrap();
    let store = analysed_store(dir.path());
    let view = store.read().unwrap();
    let start = Chess::default();
    let shown = show::tree(&view, &start, &[], 3).unwrap();
    let e4 = shown.moves.iter().find(|m| m.uci == "e2e4").expect("the imported 1. e4 is in the tree");
    assert!(e4.imported);
    let replies = &e4.child.as_ref().expect("1. e4 was walked and its position evaluated").moves;
    for uci in ["e7e5", "c7c5", "e7e6"] {
        let reply = replies.iter().find(|m| m.uci == uci).unwrap_or_else(|| panic!("{uci} kept"));
        assert!(reply.imported);
        assert_ne!(reply.alpha, Score::NOT_VALUED, "1... {uci} leads to an evaluated position");
    }
    drop(view);

    // A game of the worst moves the scripted engine knows, at plies 0 and 1: far outside the move distance.
    let worst = |pos: &Chess| {
        pos.legal_moves()
            .iter()
            .map(|m| UciMove::from_standard(*m))
            .min_by_key(|u| ScriptedEvaluator::move_score(pos, u).unwrap())
            .unwrap()
    };
    let first = worst(&start);
    let after = deeptree::game::play_uci(&start, &first).unwrap();
    let reply = worst(&after);
    let san = |pos: &Chess, uci: &UciMove| shakmaty::san::San::from_move(pos, uci.to_move(pos).unwrap()).to_string();
    let pgn = format!("1. {} {} *\n", san(&start, &first), san(&after, &reply));
    let fresh = dir.path().join("fresh");
    let store = Store::open(&fresh, &StoreOptions::default()).unwrap();
    let summary =
        deeptree::interop::pgn_import::import_pgn(&store, pgn.as_bytes(), &Default::default(), |_| {}).unwrap();
    assert_eq!(summary.edges, 2);
    let trace = dir.path().join("trace.txt");
    let options = AnalysisOptions { trace: Trace::to_file(&trace).unwrap(), ..AnalysisOptions::default() };
    let mut analysis = Analysis::with_options(&store, ScriptedEvaluator::new(2, 7), params(3), options);
    analysis.run(&Line::parse(None, "").unwrap(), |_| {}).unwrap();
    drop(analysis);
    let trace = std::fs::read_to_string(&trace).unwrap();
    // Not yet evaluated, both moves are estimated at the placeholder, far below any window, and admitted.
    for (ply, move_san) in [(0, san(&start, &first)), (1, san(&after, &reply))] {
        assert!(
            trace.lines().any(|l| l.starts_with(&format!("admit ply={ply} "))
                && l.contains(&format!(" {move_san}: "))
                && l.ends_with("(imported)")),
            "{pgn}: {move_san} admitted outside the window at ply {ply}"
        );
    }
    let view = store.read().unwrap();
    let after_reply = deeptree::game::play_uci(&after, &reply).unwrap();
    for pos in [&after, &after_reply] {
        assert!(view.node(PositionKey::of(pos)).unwrap().and_then(|n| n.eval).is_some(), "{pgn}: evaluated");
    }
    let shown = show::tree(&view, &start, &[], 3).unwrap();
    let mut outside = 0;
    imported_outside_the_window(&shown, 0, &mut outside);
    assert!(shown.moves.iter().any(|m| m.uci == first.to_string() && m.imported));
}

#[test]
fn exported_pgn_reads_back_in_python_chess_as_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let store = analysed_store(dir.path());
    drop(store);
    let db = dir.path().join("db");
    let file = dir.path().join("tree.pgn");
    deeptree(&db, &["export", "pgn", file.to_str().unwrap(), "--depth", "4"]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().all(|l| l.len() <= 80), "export format keeps lines within 80 columns");
    assert!(text.contains("{idea "), "{text}");
    let read = interop_check("pgn", &file, "");
    assert_eq!(read["errors"], serde_json::json!([]), "python-chess reads it without errors");
    assert_eq!(read["more_games"], false, "one game");
    assert_eq!(read["headers"]["Result"], "*");
    assert!(read["headers"].get("FEN").is_none(), "the start position needs no FEN tag");
    let shown = deeptree_json(&db, &["show", "--json", "--depth", "4"]);
    let mut checked = 0;
    compare_game(read["moves"].as_array().unwrap(), &shown, 10, &mut checked);
    assert!(checked > 50, "{checked} moves compared");

    // A root after moves from a FEN: SetUp and FEN tags name the root.
    let file = dir.path().join("castling.pgn");
    deeptree(&db, &["export", "pgn", file.to_str().unwrap(), "--fen", CASTLING_FEN, "--moves", "e1c1", "--depth", "3"]);
    let read = interop_check("pgn", &file, "");
    let root = Line::parse(Some(CASTLING_FEN), "e1c1").unwrap();
    assert_eq!(read["headers"]["SetUp"], "1");
    assert_eq!(read["headers"]["FEN"], fen_of(root.root()));
    assert_eq!(read["fen"], fen_of(root.root()));
    let shown = deeptree_json(&db, &["show", "--json", "--fen", CASTLING_FEN, "--moves", "e1c1", "--depth", "3"]);
    let mut checked = 0;
    compare_game(read["moves"].as_array().unwrap(), &shown, 10, &mut checked);
    assert!(checked >= 2, "{checked}");
    let replies: Vec<&str> = read["moves"].as_array().unwrap().iter().map(|m| m["uci"].as_str().unwrap()).collect();
    assert!(replies.contains(&"e8g8") && replies.contains(&"e8c8"), "both imported castlings: {replies:?}");
}

#[test]
fn the_polyglot_book_puts_the_tree_best_move_heaviest_for_python_chess() {
    let dir = tempfile::tempdir().unwrap();
    let store = analysed_store(dir.path());
    let db = dir.path().join("db");
    // Every evaluated position, with its ranked moves as the library's show has them.
    let mut expected: Vec<(String, Vec<String>)> = Vec::new();
    {
        let view = store.read().unwrap();
        for item in view.nodes().unwrap() {
            let (_, node) = item.unwrap();
            if node.eval.is_none() || node.edges.is_empty() {
                continue;
            }
            let pos = node.position.to_position().unwrap();
            let shown = show::tree(&view, &pos, &[], 1).unwrap();
            expected.push((fen_of(&pos), shown.moves.iter().map(|m| m.uci.clone()).collect()));
        }
    }
    drop(store);
    assert!(expected.len() > 40, "{} positions", expected.len());
    let file = dir.path().join("book.bin");
    let summary = deeptree_json(&db, &["export", "polyglot", file.to_str().unwrap(), "--json"]);
    assert_eq!(summary["positions"].as_u64().unwrap(), expected.len() as u64);

    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes.len() % 16, 0);
    let entries = read_book(&bytes);
    assert_eq!(entries.len() as u64, summary["entries"].as_u64().unwrap());
    for pair in entries.windows(2) {
        assert!(
            pair[0].key < pair[1].key || (pair[0].key == pair[1].key && pair[0].weight >= pair[1].weight),
            "sorted by key, then weight descending"
        );
    }

    let mut fens: Vec<&str> = expected.iter().map(|(fen, _)| fen.as_str()).collect();
    fens.push(PINNED_EP_FEN);
    let read = interop_check("book", &file, &serde_json::to_string(&fens).unwrap());
    assert_eq!(read["entries"].as_u64().unwrap(), entries.len() as u64);
    for ((fen, ranked), found) in expected.iter().zip(read["positions"].as_array().unwrap()) {
        assert_eq!(&found["fen"], fen);
        assert_eq!(found["best"].as_str(), Some(ranked[0].as_str()), "heaviest entry in {fen}");
        let python_moves: HashSet<&str> =
            found["entries"].as_array().unwrap().iter().map(|e| e[0].as_str().unwrap()).collect();
        let tree_moves: HashSet<&str> = ranked.iter().map(String::as_str).collect();
        assert_eq!(python_moves, tree_moves, "every move of {fen}");
        assert_eq!(found["key"].as_u64(), Some(book_key(&position(fen))));
    }
    // `deeptree show --json --fen` names the same best move (a few positions through the binary).
    for (fen, ranked) in expected.iter().step_by(expected.len() / 8) {
        let shown = deeptree_json(&db, &["show", "--json", "--fen", fen, "--depth", "1"]);
        assert_eq!(shown["moves"][0]["uci"].as_str(), Some(ranked[0].as_str()));
    }

    // Castling is written king-takes-rook; python-chess reads it back as the standard move.
    let castling = position(CASTLING_FEN);
    let ours: Vec<u16> = entries.iter().filter(|e| e.key == book_key(&castling)).map(|e| e.mv).collect();
    let long = polyglot_move(&castling, &"e1c1".parse().unwrap()).unwrap();
    assert_eq!(long & 0x3f, 0, "O-O-O goes to a1 in the book");
    assert!(ours.contains(&long));
    let by_key = |pos: &Chess| {
        read["positions"].as_array().unwrap().iter().find(|p| p["key"].as_u64() == Some(book_key(pos))).unwrap()
    };
    let found = &by_key(&castling)["entries"];
    assert!(found.to_string().contains("e1c1") && found.to_string().contains("e1g1"), "{found}");

    // Where an en passant capture is possible but illegal, deeptree's key leaves the en passant file out and
    // Polyglot's puts it in: python-chess finds the position with its en passant square as well.
    let pinned = position(PINNED_EP_FEN);
    assert_ne!(book_key(&pinned), PositionKey::of(&pinned).0);
    let found = read["positions"].as_array().unwrap().last().unwrap();
    assert_eq!(found["fen"], PINNED_EP_FEN);
    assert_eq!(found["key"].as_u64(), Some(book_key(&pinned)));
    let stored = expected.iter().find(|(fen, _)| position(fen) == position("8/8/8/K2pP2r/8/8/8/7k w - - 0 1"));
    assert_eq!(found["best"].as_str(), stored.map(|(_, ranked)| ranked[0].as_str()), "the same best move");
}

#[test]
fn epd_export_reads_back_and_imports_into_a_fresh_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = analysed_store(dir.path());
    drop(store);
    let db = dir.path().join("db");
    let file = dir.path().join("tree.epd");
    let summary = deeptree_json(&db, &["export", "epd", file.to_str().unwrap(), "--json"]);
    let read = interop_check("epd", &file, "");
    let lines = read.as_array().unwrap();
    assert_eq!(lines.len() as u64, summary["positions"].as_u64().unwrap());
    assert!(lines.len() > 40);
    for line in lines.iter().take(25) {
        let fen = line["fen"].as_str().unwrap();
        let ops = &line["ops"];
        let shown = deeptree_json(&db, &["show", "--json", "--fen", fen, "--depth", "1"]);
        let best = &shown["moves"][0];
        assert_eq!(ops["bm"], serde_json::json!([best["uci"]]), "{fen}");
        assert_eq!(ops["acd"], 10, "the engine depth behind the best move's value");
        let alpha = json_score(&best["alpha"]);
        assert_eq!(ops["ce"].as_i64(), Some(i64::from(alpha.value())), "{fen}");
        assert_eq!(ops["pv"][0], best["uci"], "the pv starts with the best move");
    }

    // Imported into an empty store, every position gets that evaluation and its best move.
    let fresh = dir.path().join("fresh");
    let imported = deeptree_json(&fresh, &["import", "epd", file.to_str().unwrap(), "--json"]);
    assert_eq!(imported["lines"].as_u64(), Some(lines.len() as u64));
    assert_eq!(imported["evaluations"].as_u64(), Some(lines.len() as u64));
    assert_eq!(imported["skipped"], 0);
    let store = Store::open(&fresh, &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    for line in lines {
        let pos = position(line["fen"].as_str().unwrap());
        let node = view.node(PositionKey::of(&pos)).unwrap().expect("imported");
        let eval = node.eval.as_ref().unwrap();
        assert_eq!(i64::from(eval.score.value()), line["ops"]["ce"].as_i64().unwrap());
        assert_eq!(i64::from(eval.depth), line["ops"]["acd"].as_i64().unwrap());
        assert_eq!(eval.best.map(|m| m.to_string()), line["ops"]["bm"][0].as_str().map(str::to_owned));
        assert_eq!(node.edges.len(), 1);
    }
}

#[test]
fn epd_import_reads_opcodes_and_reports_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.epd");
    std::fs::write(
        &file,
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - bm e4; ce 31; acd 22; id \"start; one\";\n\
         rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1 bm c5;\n\
         rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq - ce -20;\n\
         rnbqkbnr/pppppppp/8/8 w KQkq - ce 3;\n\
         rnbqkbnr/pppppppp/8/8/2P5/8/PP1PPPPP/RNBQKBNR b KQkq - bm Qh4; ce 10;\n\
         6k1/5ppp/8/8/8/8/8/R5K1 w - - dm 1; bm Ra8#;\n",
    )
    .unwrap();
    let db = dir.path().join("db");
    let output = deeptree(&db, &["import", "epd", file.to_str().unwrap(), "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 4 skipped: bad position"), "{stderr}");
    assert!(stderr.contains("line 5 skipped: bm: 'Qh4' is illegal"), "{stderr}");
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((summary["lines"].as_u64(), summary["skipped"].as_u64()), (Some(6), Some(2)));
    assert_eq!((summary["evaluations"].as_u64(), summary["scores_without_move"].as_u64()), (Some(2), Some(1)));

    let store = Store::open(&db, &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    let start = view.node(PositionKey::of(&Chess::default())).unwrap().unwrap();
    let eval = start.eval.unwrap();
    assert_eq!((eval.score, eval.depth, eval.best.map(|m| m.to_string())), (Score::cp(31), 22, Some("e2e4".into())));
    assert_eq!(start.edges[0].score, Score::cp(31));
    let after_e4 = view.node(PositionKey::of(Line::parse(None, "e2e4").unwrap().root())).unwrap().unwrap();
    assert!(after_e4.eval.is_none() && after_e4.edges[0].imported, "a bm without a score is an imported move");
    let after_d4 = view.node(PositionKey::of(Line::parse(None, "d2d4").unwrap().root())).unwrap().unwrap();
    assert!(after_d4.eval.is_none() && after_d4.edges.is_empty(), "a score without a move is not stored");
    let mate = view.node(PositionKey::of(&position("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"))).unwrap().unwrap();
    assert_eq!(mate.eval.unwrap().score, Score::from_uci_mate(1));
}

fn all_records(store: &Store) -> HashMap<PositionKey, Vec<u8>> {
    let view = store.read().unwrap();
    let keys: Vec<PositionKey> = view.nodes().unwrap().map(|item| item.unwrap().0).collect();
    keys.into_iter().map(|k| (k, view.raw_node(k).unwrap().unwrap().to_vec())).collect()
}

#[test]
fn merge_unites_trees_keeps_deeper_evaluations_and_a_second_merge_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ours_dir = dir.path().join("ours");
    let theirs_dir = dir.path().join("theirs");
    {
        let ours = Store::open(&ours_dir, &StoreOptions::default()).unwrap();
        analyse(&ours, None, "", 2);
        let theirs = Store::open(&theirs_dir, &StoreOptions::default()).unwrap();
        // Deeper engine searches on the other machine, from another root, with a repetition cycle.
        let mut analysis = Analysis::new(&theirs, ScriptedEvaluator::new(3, 11), Params::new(12, 20).with_max_depth(2));
        analysis.run(&Line::parse(None, "g1f3 g8f6 f3g1 f6g8 e2e4").unwrap(), |_| {}).unwrap();
    }
    let (ours_before, theirs_records) = {
        let ours = Store::open(&ours_dir, &StoreOptions::default()).unwrap();
        let theirs = Store::open(&theirs_dir, &StoreOptions::default()).unwrap();
        (all_records(&ours), all_records(&theirs))
    };
    let shared = theirs_records.keys().filter(|k| ours_before.contains_key(k)).count();
    assert!(shared > 0, "the trees share positions");

    let summary = deeptree_json(&ours_dir, &["merge", theirs_dir.to_str().unwrap(), "--json"]);
    assert!(summary["new_nodes"].as_u64().unwrap() > 0);
    assert_eq!(summary["refused"], 0);

    let ours = Store::open(&ours_dir, &StoreOptions::default()).unwrap();
    let theirs = Store::open(&theirs_dir, &StoreOptions::default()).unwrap();
    let stats_once = ours.stats().unwrap();
    let once = all_records(&ours);
    {
        let view = ours.read().unwrap();
        let their_view = theirs.read().unwrap();
        for item in their_view.nodes().unwrap() {
            let (key, their_node) = item.unwrap();
            let merged = view.node(key).unwrap().expect("every record arrives");
            let their_depth = their_node.eval.as_ref().map(|e| e.depth);
            assert!(merged.eval.as_ref().map(|e| e.depth) >= their_depth, "the deeper evaluation wins");
            for edge in &their_node.edges {
                let ours_edge = merged.edge(&edge.uci).expect("edges are united");
                assert!(ours_edge.depth >= edge.depth);
                assert!(ours_edge.imported || !edge.imported);
            }
            assert!(merged.settled_depth >= their_node.settled_depth);
        }
        for (key, bytes) in &ours_before {
            let before = Node::read(*key, bytes).unwrap();
            let merged = view.node(*key).unwrap().unwrap();
            assert!(before.edges.iter().all(|e| merged.edge(&e.uci).is_some()), "nothing of ours is lost");
        }
        // Cached idea values and cycle flags agree with a recomputation from scratch over the merged graph.
        let (graph, keys) = MemGraph::of_view(&view).unwrap();
        let mut scratch = graph.clone();
        recompute_all(&mut scratch, &keys);
        for key in &keys {
            let (a, b) = (graph.node(*key).unwrap(), scratch.node(*key).unwrap());
            assert_eq!((a.idea, a.cyclic), (b.idea, b.cyclic), "cached values of {key}");
        }
        assert!(keys.iter().any(|k| graph.node(*k).unwrap().cyclic), "the repetition cycle came along");
    }
    drop(ours);
    drop(theirs);

    // Again: nothing changes, byte for byte.
    let again = deeptree_json(&ours_dir, &["merge", theirs_dir.to_str().unwrap(), "--json"]);
    assert_eq!((again["new_nodes"].as_u64(), again["new_edges"].as_u64()), (Some(0), Some(0)));
    let ours = Store::open(&ours_dir, &StoreOptions::default()).unwrap();
    assert_eq!(ours.stats().unwrap().positions, stats_once.positions);
    assert_eq!(ours.stats().unwrap().edges, stats_once.edges);
    assert_eq!(all_records(&ours), once, "every record byte-identical after a second merge");
    drop(ours);

    // Merged into an empty store, a tree arrives byte for byte, cached values included.
    let copy_dir = dir.path().join("copy");
    deeptree(&copy_dir, &["merge", theirs_dir.to_str().unwrap()]);
    let copy = Store::open(&copy_dir, &StoreOptions::default()).unwrap();
    assert_eq!(all_records(&copy), theirs_records);

    // Refusals: not a store, or the store itself.
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&copy_dir)
        .args(["merge", dir.path().join("nothing").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a deeptree store"));
}

/// Stockfish found as deeptree finds it (PATH, then /usr/games).
fn stockfish() -> String {
    deeptree::engine::resolve_program("stockfish").display().to_string()
}

#[test]
fn round_trip_with_stockfish_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let pgn = dir.path().join("games.pgn");
    std::fs::write(&pgn, GAMES).unwrap();
    deeptree(&db, &["import", "pgn", pgn.to_str().unwrap()]);
    let engine = stockfish();
    let report = deeptree_json(
        &db,
        &["analyze", "--engine", &engine, "--engine-depth", "6", "--max-depth", "2", "--workers", "2", "--json"],
    );
    assert_eq!(report["settled_depth"], 2);

    let file = dir.path().join("tree.pgn");
    deeptree(&db, &["export", "pgn", file.to_str().unwrap(), "--depth", "3"]);
    let read = interop_check("pgn", &file, "");
    assert_eq!(read["errors"], serde_json::json!([]));
    let shown = deeptree_json(&db, &["show", "--json", "--depth", "3"]);
    let mut checked = 0;
    compare_game(read["moves"].as_array().unwrap(), &shown, 6, &mut checked);
    assert!(checked > 20, "{checked}");
    assert!(read.to_string().contains(" d6\""), "engine depth 6 in the comments");

    let book = dir.path().join("book.bin");
    deeptree(&db, &["export", "polyglot", book.to_str().unwrap()]);
    // The root and every position one move below it that the tree evaluated.
    let mut fens = vec![shown["fen"].as_str().unwrap().to_owned()];
    for m in shown["moves"].as_array().unwrap() {
        if let Some(child) = m["child"].as_object() {
            fens.push(child["fen"].as_str().unwrap().to_owned());
        }
    }
    let read = interop_check("book", &book, &serde_json::to_string(&fens).unwrap());
    for found in read["positions"].as_array().unwrap() {
        let fen = found["fen"].as_str().unwrap();
        let shown = deeptree_json(&db, &["show", "--json", "--fen", fen, "--depth", "1"]);
        assert_eq!(found["best"], shown["moves"][0]["uci"], "heaviest book move in {fen}");
    }
}

/// The files in `dir`, by name.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// Makes a FIFO, or a character device like /dev/null (`false` where this user may not make one).
fn make_node(path: &Path, fifo: bool) -> bool {
    let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: `name` is a valid C string for the duration of the call.
    let made = unsafe {
        if fifo {
            libc::mkfifo(name.as_ptr(), 0o644)
        } else {
            libc::mknod(name.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3))
        }
    };
    assert!(made == 0 || !fifo, "mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
    made == 0
}

/// `export` writes where it is sent, for every format: a regular file is replaced whole (the permissions kept), a
/// symbolic link's target is written and the link stays, a FIFO and a character device are written straight into,
/// and a path that leads to standard output (here a link to /dev/stdout, never /dev/stdout itself) writes to it;
/// nothing else appears beside any of them. Each time the bytes are those of the export to `-`.
#[test]
fn export_writes_where_it_is_sent_for_every_format() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    drop(analysed_store(dir.path()));
    let db = dir.path().join("db");
    let run = |file: &Path, format: &str| {
        Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(&db)
            .args(["export", format, file.to_str().unwrap(), "--depth", "3"])
            .output()
            .unwrap()
    };
    let here = tempfile::tempdir().unwrap();
    let device = here.path().join("null");
    let devices = make_node(&device, false);
    if !devices {
        eprintln!("skipped: a character device of this test's own (mknod is not allowed here)");
    }
    for format in ["pgn", "polyglot", "epd", "html"] {
        let expected = deeptree(&db, &["export", format, "-", "--depth", "3"]).stdout;
        assert!(expected.len() > 100, "{format}: {} bytes", expected.len());

        // A regular file, replaced whole, its permissions kept.
        let file = here.path().join(format!("tree.{format}"));
        std::fs::write(&file, vec![b'x'; 300_000]).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let output = run(&file, format);
        assert!(output.status.success(), "{format}: {}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(std::fs::read(&file).unwrap(), expected, "{format}: the file holds the export");
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o640, "{format}");

        // A relative link to a file in another directory, and a link to a file not there yet.
        let other = here.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        let target = other.join(format!("target.{format}"));
        std::fs::write(&target, b"old").unwrap();
        let link = here.path().join(format!("link.{format}"));
        std::os::unix::fs::symlink(format!("other/target.{format}"), &link).unwrap();
        let dangling = here.path().join(format!("new.{format}"));
        std::os::unix::fs::symlink(other.join(format!("new-target.{format}")), &dangling).unwrap();
        for (link, target) in [(&link, target.clone()), (&dangling, other.join(format!("new-target.{format}")))] {
            let output = run(link, format);
            assert!(output.status.success(), "{format}: {}", String::from_utf8_lossy(&output.stderr));
            assert!(std::fs::symlink_metadata(link).unwrap().file_type().is_symlink(), "{format}: the link stays");
            assert_eq!(std::fs::read(&target).unwrap(), expected, "{format}: {} holds the export", target.display());
        }

        // A FIFO, read by another thread as the export writes.
        let fifo = here.path().join(format!("fifo.{format}"));
        make_node(&fifo, true);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        let output = run(&fifo, format);
        assert!(output.status.success(), "{format}: {}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(reader.join().unwrap(), expected, "{format}: the FIFO's reader got the export");
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "{format}: still a FIFO");

        // A character device (a null device of the test's own), and standard output through a link to /dev/stdout.
        if devices {
            let output = run(&device, format);
            assert!(output.status.success(), "{format}: {}", String::from_utf8_lossy(&output.stderr));
            assert!(std::fs::symlink_metadata(&device).unwrap().file_type().is_char_device(), "{format}");
        }
        let to_stdout = here.path().join(format!("stdout.{format}"));
        std::os::unix::fs::symlink("/dev/stdout", &to_stdout).unwrap();
        let output = run(&to_stdout, format);
        assert!(output.status.success(), "{format}: {}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.stdout, expected, "{format}: standard output holds the export, nothing else");
        assert!(String::from_utf8_lossy(&output.stderr).contains(&to_stdout.display().to_string()), "the summary");
        assert_eq!(std::fs::read_link(&to_stdout).unwrap(), Path::new("/dev/stdout"), "{format}: the link stays");
    }
    // Nothing but what the test made: no temporary file left anywhere.
    let mut made: Vec<String> = ["pgn", "polyglot", "epd", "html"]
        .iter()
        .flat_map(|f| ["fifo", "link", "new", "stdout", "tree"].map(|n| format!("{n}.{f}")))
        .collect();
    made.extend(["null".to_owned(), "other".to_owned()].into_iter().filter(|n| devices || n != "null"));
    made.sort();
    assert_eq!(names_in(here.path()), made);
    let mut targets: Vec<String> = ["pgn", "polyglot", "epd", "html"]
        .iter()
        .flat_map(|f| ["new-target", "target"].map(|n| format!("{n}.{f}")))
        .collect();
    targets.sort();
    assert_eq!(names_in(&here.path().join("other")), targets);
}
