//! Growth for play (`analyze --roots BOOK --cover`): the walk finds where games from the roots leave the tree, the
//! likeliest first; growing there makes the tree answer further along the lines play is likely to take.

mod common;

use std::{
    collections::HashSet,
    path::Path,
    process::Command,
    sync::{Arc, atomic::AtomicBool},
};

use common::{Uci, fake_session};
use deeptree::{
    game::Line,
    search::{
        analysis::Params,
        cover::{Cover, walk},
        evaluator::ScriptedEvaluator,
        roots::{BookRoot, grow},
    },
    store::{Store, StoreOptions},
};

const ENGINE_DEPTH: u8 = 8;

/// A store in `dir` holding the open game (1. e4 e5), its one root, settled to software depth 1 by the scripted
/// engine at the engine depth.
fn open_game_settled(dir: &Path) -> (Store, Vec<BookRoot>) {
    let store = Store::open(dir, &StoreOptions::default()).unwrap();
    let roots = vec![BookRoot::new(Line::parse(None, "e2e4 e7e5").unwrap(), "open game")];
    let params = Params::new(ENGINE_DEPTH, 20).with_max_depth(1);
    let stop = Arc::new(AtomicBool::new(false));
    grow(&store, vec![ScriptedEvaluator::new(1, 11)], &roots, &params, None, &stop, None, |_| {}).unwrap();
    (store, roots)
}

/// A root settled to software depth 1: the walk answers the book's move there and leaves the tree below it, the
/// likeliest leaves first; growing the likeliest raises the tree moves a game is expected to get, and a grown leaf
/// is a leaf no more.
#[test]
fn the_walk_grows_the_likeliest_leaves_first_and_each_growth_adds_tree_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (store, roots) = open_game_settled(dir.path());
    let stop = Arc::new(AtomicBool::new(false));
    let cover = Cover::new(ENGINE_DEPTH, Params::new(ENGINE_DEPTH, 20));
    let before = walk(&store.read().unwrap(), &roots, &cover, &HashSet::new()).unwrap();
    // White's half of the games: the tree moves at the root (settled at depth 1). Black's half: the replies at the
    // root were searched, and each reply's position holds its own search at the engine depth: the tree moves there.
    assert!((before.expected_answers - 1.0).abs() < 1e-9, "{}", before.expected_answers);
    assert!(!before.leaves.is_empty());
    assert!(before.leaves.windows(2).all(|w| w[0].reach >= w[1].reach), "highest reach first");
    assert!(before.leaves.iter().all(|l| l.ply >= 1 && l.reach > 0.0));
    let total: f64 = before.leaves.iter().map(|l| l.reach).sum();
    assert!(total <= 1.0 + 1e-9, "reach is a share of the games: {total}");
    let mut expected = before.expected_answers;
    let mut grown = HashSet::new();
    for round in 0..3 {
        let found = walk(&store.read().unwrap(), &roots, &cover, &grown).unwrap();
        let top = found.leaves[0].clone();
        let mut root = BookRoot::new(top.line.clone(), "top leaf");
        root.max_depth = Some(cover.grow_depth(&top));
        let params = Params::new(ENGINE_DEPTH, 20).with_max_depth(1);
        grow(&store, vec![ScriptedEvaluator::new(1, 11)], &[root], &params, None, &stop, None, |_| {}).unwrap();
        grown.insert(top.id());
        // Not excluded by `grown`: grown, it is simply no longer where games leave.
        let after = walk(&store.read().unwrap(), &roots, &cover, &HashSet::new()).unwrap();
        assert!(after.leaves.iter().all(|l| l.key != top.key), "round {round}: the grown leaf is still a leaf");
        assert!(
            after.expected_answers > expected + 1e-6,
            "round {round}: {} tree moves a game expected, {expected} before",
            after.expected_answers
        );
        expected = after.expected_answers;
    }
}

/// Runs `analyze --roots EPD --cover` with `engine` at the engine depth for `seconds`, one worker, and more
/// arguments `more`; returns its JSON report and its stderr.
fn cover_run(
    db: &Path,
    epd: &Path,
    engine: &str,
    engine_depth: u8,
    seconds: &str,
    more: &[&str],
) -> (serde_json::Value, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .arg("analyze")
        .arg("--roots")
        .arg(epd)
        .args(["--cover", "--engine", engine, "--engine-depth", &engine_depth.to_string()])
        .args(["--time", seconds, "--workers", "1", "--json"])
        .args(more)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap();
    (report, stderr)
}

/// The tree's best reply for the opponent at `moves` from `fen`, as `show` ranks the moves; an error where the tree
/// holds none.
fn likeliest_reply(db: &Path, fen: &str, moves: &str) -> Result<String, String> {
    let shown = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .args(["show", "--fen", fen, "--moves", moves, "--depth", "1", "--json"])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    shown["moves"][0]["uci"].as_str().map(str::to_owned).ok_or_else(|| format!("no reply stored at {moves}: {shown}"))
}

/// The tree's move in the position of `position` (a UCI `position` command's arguments) for a search of `depth`;
/// what the session did instead where it searched.
fn tree_moved(uci: &mut Uci, position: &str, depth: u8) -> Result<String, String> {
    uci.send(&format!("position {position}"));
    let (best, lines) = uci.best(&format!("go depth {depth}"));
    match lines.iter().any(|l| l.starts_with("info string tree move")) {
        true => Ok(best),
        false => Err(format!("{position}: the tree does not answer: {lines:?}")),
    }
}

/// Along the likeliest line from the root (the tree's move, the opponent's best reply, the tree's move...), a session
/// asked for a search at `depth` answers from the tree for `moves` of its own moves; else what it did instead.
fn tree_answers_along_the_likeliest_line(
    uci: &mut Uci,
    db: &Path,
    fen: &str,
    depth: u8,
    moves: usize,
) -> Result<(), String> {
    let mut line: Vec<String> = Vec::new();
    for answer in 0..moves {
        let best = tree_moved(uci, &format!("fen {fen} moves {}", line.join(" ")), depth)?;
        line.push(best);
        if answer + 1 < moves {
            let reply = likeliest_reply(db, fen, &line.join(" "))?;
            line.push(reply);
        }
    }
    Ok(())
}

/// Grows on from the run that gave `first` with more runs of `run` (each resumes the last; on a loaded machine a
/// timed run grows less) until `done` holds for the tree and the last run's report and stderr, at most `runs` runs
/// in all; returns what `done` last said.
fn grow_until<T>(
    first: (serde_json::Value, String),
    run: impl Fn() -> (serde_json::Value, String),
    done: impl Fn(&(serde_json::Value, String)) -> Result<T, String>,
    runs: usize,
) -> Result<T, String> {
    let mut last = first;
    for _ in 1..runs {
        if let Ok(value) = done(&last) {
            return Ok(value);
        }
        last = run();
    }
    done(&last)
}

/// After 1. e4: Black to move.
const ROOT: &str = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1";
/// After 1. e4 e5: White to move.
const WHITE_ROOT: &str = "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2";

/// An EPD file of one root (the FEN's first four fields).
fn epd_of(dir: &Path, fen: &str) -> std::path::PathBuf {
    let epd = dir.join("roots.epd");
    std::fs::write(&epd, format!("{}\n", fen.split_whitespace().take(4).collect::<Vec<_>>().join(" "))).unwrap();
    epd
}

/// `analyze --cover` with the scripted engine: it says its rounds and what it grew, the tree moves a game is expected
/// to get go up, and a session answers from the tree along the likeliest line.
#[test]
fn a_cover_run_reports_its_rounds_and_the_tree_answers_where_games_go() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), ROOT);
    let run = || cover_run(&db, &epd, common::fake(), 6, "3", &[]);
    let first = run();
    let (report, stderr) = &first;
    assert!(stderr.contains("round 1: "), "{stderr}");
    assert!(stderr.contains("the replies root   1 to depth 1: "), "{stderr}");
    assert!(report["rounds"].as_u64().unwrap() >= 2, "{report}");
    assert!(report["grown"].as_u64().unwrap() >= 2, "{report}");
    let (before, after) = (report["expected_answers_before"].as_f64(), report["expected_answers"].as_f64());
    assert!(after.unwrap() > before.unwrap(), "{report}");
    let answers = |_: &(serde_json::Value, String)| {
        let mut uci = fake_session(&db, &dir.path().join("fake.log"), &[]);
        uci.send("ucinewgame");
        tree_answers_along_the_likeliest_line(&mut uci, &db, ROOT, 6, 2)
    };
    grow_until(first, run, answers, 6).unwrap();
}

/// A root with White to move: White's half of the games wants the tree's move there, Black's half White's replies
/// searched; the first round grows both, and a session playing either side answers from the tree.
#[test]
fn both_sides_of_a_root_are_grown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), WHITE_ROOT);
    let run = || cover_run(&db, &epd, common::fake(), 6, "3", &[]);
    let first = run();
    let stderr = &first.1;
    let first_round: Vec<&str> =
        stderr.lines().skip_while(|l| !l.starts_with("round 1:")).skip(1).take_while(|l| l.starts_with("  ")).collect();
    assert!(first_round.iter().any(|l| l.contains("ply  0 tree's move  root   1")), "{stderr}");
    assert!(first_round.iter().any(|l| l.contains("ply  0 the replies root   1")), "{stderr}");
    let answers = |_: &(serde_json::Value, String)| {
        let mut uci = fake_session(&db, &dir.path().join("fake.log"), &[]);
        uci.send("ucinewgame");
        // White: the root's move, then again after Black's likeliest reply.
        tree_answers_along_the_likeliest_line(&mut uci, &db, WHITE_ROOT, 6, 2)?;
        // Black: after White's likeliest move at the root.
        let white = likeliest_reply(&db, WHITE_ROOT, "")?;
        tree_moved(&mut uci, &format!("fen {WHITE_ROOT} moves {white}"), 6)
    };
    grow_until(first, run, answers, 6).unwrap();
}

/// With a play depth one deeper than the engine depth, a position searched once is not enough: the walk grows the
/// book's positions to software depth 1, and a session asked for that depth answers from the tree at the root and
/// at a position of the book's side grown below it.
#[test]
fn a_play_depth_past_the_engine_depth_is_grown_to() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), ROOT);
    let run = || cover_run(&db, &epd, common::fake(), 6, "3", &["--play-depth", "7"]);
    let first = run();
    let (report, stderr) = &first;
    assert!(stderr.contains("play depth 7, engine depth 6"), "{stderr}");
    assert!(!stderr.contains("to depth 0"), "one search is not enough: {stderr}");
    assert!(report["expected_answers"].as_f64().unwrap() > 0.0, "{report}");
    // A position of the book's side below the root that a round grew to software depth 1 (a round ended: another
    // began after it).
    let grown_below_root = |(_, stderr): &(serde_json::Value, String)| {
        let lines: Vec<&str> = stderr.lines().collect();
        let last_round = lines.iter().rposition(|l| l.starts_with("round ")).unwrap_or(0);
        lines[..last_round]
            .iter()
            .filter(|l| !l.contains("ply  0") && l.contains("tree's move  root   1 to depth 1: "))
            .find_map(|l| l.split(": ").nth(1).map(str::to_owned))
            .ok_or_else(|| "no position of the book's side grown below the root".to_owned())
    };
    let grown = grow_until(first, run, grown_below_root, 5).unwrap();
    // Both answered by a session asked for the play depth.
    let mut uci = fake_session(&db, &dir.path().join("fake.log"), &[]);
    uci.send("ucinewgame");
    for fen in [ROOT, grown.as_str()] {
        tree_moved(&mut uci, &format!("fen {fen}"), 7).unwrap();
    }
    uci.ready();
}

/// The same with a real Stockfish at engine depth 8: a few seconds of cover growth, and the session answers its
/// first three moves from the tree along the likeliest line.
#[test]
fn with_stockfish_a_short_cover_run_answers_the_likeliest_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let stockfish = common::stockfish();
    let epd = epd_of(dir.path(), ROOT);
    let answers = |_: &(serde_json::Value, String)| {
        let mut uci = common::session(&db, &stockfish.display().to_string(), &[]);
        uci.send("ucinewgame");
        tree_answers_along_the_likeliest_line(&mut uci, &db, ROOT, 8, 3)
    };
    let run = || cover_run(&db, &epd, stockfish.to_str().unwrap(), 8, "5", &[]);
    let first = run();
    let (report, _) = &first;
    assert!(report["expected_answers"].as_f64().unwrap() > report["expected_answers_before"].as_f64().unwrap());
    grow_until(first, run, answers, 5).unwrap();
}

/// The walk counts a position as answered exactly where a game's policy answers from the tree: below an analysed
/// root, where no settled depth is stored, both find the depth the root's passes settled, with the move distance
/// narrowed as the policy narrows it (a halving for each ply more). Checked for every position one to three plies
/// below the root (along moves within the move distance of the best) and every depth from one to four plies past
/// the engine depth, up to the first not known, against a session asked `go depth D` (its searches not stored, so
/// each answer sees the grown tree alone).
#[test]
fn the_walk_counts_a_position_known_where_a_game_gets_the_tree_move() {
    use deeptree::{
        config::Config,
        search::analysis::{SettledInStore, known_depth},
        store::key::PositionKey,
    };
    let dir = tempfile::tempdir().unwrap();
    let (engine_depth, move_distance) = (3u8, 20);
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(dir.path())
        .args(["analyze", "--engine", &format!("{} --mode smooth", common::fake())])
        .args(["--engine-depth", "3", "--max-depth", "6"])
        .args(["--move-distance", "20", "--workers", "1", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let params = Params::from(&Config::default()).with_engine_depth(engine_depth).with_move_distance(move_distance);
    // (moves, depth asked, counted by the walk, settled at the full move distance)
    let mut cases = Vec::new();
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let view = store.read().unwrap();
        // Every position up to three plies below the root along the moves within the move distance of the best.
        let mut lines = Vec::new();
        let mut frontier = vec![Line::parse(None, "").unwrap()];
        for _ in 0..3 {
            let mut next = Vec::new();
            for line in &frontier {
                let Some(node) = view.node(PositionKey::of(line.root())).unwrap() else { continue };
                let best = node.edges.iter().filter(|e| e.is_valued()).map(|e| e.score.value()).max();
                for edge in node.edges.iter().filter(|e| e.is_valued()) {
                    if best.is_some_and(|b| b - edge.score.value() <= move_distance) {
                        next.push(line.then(&edge.uci).unwrap());
                    }
                }
            }
            lines.extend(next.iter().cloned());
            frontier = next;
        }
        for line in lines {
            let Some(evaluated) = view.node(PositionKey::of(line.root())).unwrap().and_then(|n| n.eval) else {
                continue;
            };
            let moves: Vec<String> = line.moves.iter().map(ToString::to_string).collect();
            let at_its_depth = params.clone().with_engine_depth(evaluated.depth);
            for needed in 1..=4u8 {
                let depth = engine_depth + needed;
                let counted = known_depth(&view, &line, &params, depth).unwrap().is_some_and(|d| d >= u32::from(depth));
                let full = SettledInStore::new(&view, &line).deepest(&at_its_depth, 1, needed).unwrap() == Some(needed);
                cases.push((moves.join(" "), depth, counted, full));
                // Deeper than the first depth not known, nothing more is.
                if !counted {
                    break;
                }
            }
        }
    }
    let count = |counted: bool, full: bool| cases.iter().filter(|c| c.2 == counted && c.3 == full).count();
    let counts = format!(
        "{} cases: {} counted at the full move distance, {} only narrowed, {} not counted",
        cases.len(),
        count(true, true),
        count(true, false),
        count(false, false)
    );
    assert!(count(true, false) > 0, "some position is known only with a narrowed move distance: {counts}");
    assert!(count(false, false) > 0, "some position is not known deep enough: {counts}");
    assert_eq!(count(false, true), 0, "settled at the full move distance is known: {counts}");
    eprintln!("{counts}");
    let log = dir.path().join("fake.log");
    let mut uci = fake_session(dir.path(), &log, &["MoveDistance value 20", "StoreSearches value false"]);
    for (moves, depth, counted, _) in &cases {
        let answered = tree_moved(&mut uci, &format!("startpos moves {moves}"), *depth);
        assert_eq!(answered.is_ok(), *counted, "{moves} at depth {depth}: {answered:?}");
    }
}

/// Where the game's history changes the tree's verdict (its best move would repeat a position of the game, a draw
/// in alpha), a game searches rather than play the tree's move, and growth would not change that: the walk neither
/// counts the position answered nor makes it a leaf. The same position without that history is answered.
#[test]
fn where_the_games_history_changes_the_verdict_the_walk_stops_without_a_leaf() {
    use deeptree::{
        score::{Bound, Score},
        store::{
            Change,
            key::PositionKey,
            node::{Edge, Eval, Node, PackedPosition, RestBound},
        },
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    // Black to move after 1. Nf3 Nf6 2. Ng1: Nf6-g8 (back to the start position) scores best, e7e5 40 cp less; every
    // other move lies far below. Known 16 deep by its own evaluation.
    let line = Line::parse(None, "g1f3 g8f6 f3g1").unwrap();
    let pos = line.root().clone();
    let mut node = Node::new(PackedPosition::of(&pos));
    node.edges = ["f6g8", "e7e5"]
        .iter()
        .zip([50, 10])
        .map(|(uci, cp)| Edge::new(uci.parse().unwrap(), Score::cp(cp), Bound::Exact, 16))
        .collect();
    node.eval = Some(Eval {
        score: Score::cp(50),
        bound: Bound::Exact,
        depth: 16,
        best: Some("f6g8".parse().unwrap()),
        nodes: 0,
        engine: None,
    });
    node.rest = Some(RestBound { score: Score::cp(-900), depth: 16 });
    let mut changes = vec![Change::merge(&pos, node).unwrap()];
    // The game's moves are stored edges, as a game or a book root's line stores them: the cycle the history closes.
    for (ply, uci) in line.moves.iter().enumerate() {
        let before = &line.positions[ply];
        let mut node = Node::new(PackedPosition::of(before));
        node.edges = vec![Edge::placeholder(*uci)];
        changes.push(Change::merge(before, node).unwrap());
    }
    store.writer().submit(changes).wait().unwrap();
    let cover = Cover::new(16, Params::new(16, 20));
    let key = PositionKey::of(&pos);

    let with_history = vec![BookRoot::new(line.clone(), "the game")];
    let found = walk(&store.read().unwrap(), &with_history, &cover, &HashSet::new()).unwrap();
    assert_eq!(found.expected_answers, 0.0, "the game searches here: no tree move");
    assert!(!found.leaves.iter().any(|l| l.key == key && l.ours), "not a leaf either: {:?}", found.leaves);

    let fen = shakmaty::fen::Fen::from_position(&pos, shakmaty::EnPassantMode::Legal).to_string();
    let alone = vec![BookRoot::new(Line::parse(Some(&fen), "").unwrap(), "the position alone")];
    let found = walk(&store.read().unwrap(), &alone, &cover, &HashSet::new()).unwrap();
    assert!((found.expected_answers - 0.5).abs() < 1e-9, "Black's half of the games gets Nf6-g8 from the tree");
}

/// Depth where games go (`--cover-deepen`): a position the tree answers is a leaf too, to be known one ply deeper at
/// its own evaluation's engine depth, of priority its reach over the factor once for each ply past the play depth;
/// growing it settles one ply more there, at that engine depth, and the next walk asks for the ply after it. A target
/// grown already is not asked for again, nor one whose priority falls below the walk's floor. Without the factor the
/// walk lists no such leaf.
#[test]
fn with_deepen_the_walk_asks_for_depth_where_games_go() {
    let dir = tempfile::tempdir().unwrap();
    let (store, roots) = open_game_settled(dir.path());
    let stop = Arc::new(AtomicBool::new(false));
    let mut cover = Cover::new(ENGINE_DEPTH, Params::new(ENGINE_DEPTH, 20));
    let breadth = walk(&store.read().unwrap(), &roots, &cover, &HashSet::new()).unwrap();
    assert!(breadth.leaves.iter().all(|l| l.deeper.is_none()), "no deepening asked for");
    cover.deepen = Some(2.0);
    let found = walk(&store.read().unwrap(), &roots, &cover, &HashSet::new()).unwrap();
    assert!((found.expected_answers - breadth.expected_answers).abs() < 1e-12, "deepening changes no count");
    let root_key = deeptree::store::key::PositionKey::of(roots[0].line.root());
    // White's half of the games meets the root, known to the engine depth and one ply settled below it: to settle a
    // second ply, at reach 1/2 over 2 for each of the 2 plies past the play depth it would then be known to.
    let at_root = found.leaves.iter().find(|l| l.key == root_key && l.deeper.is_some()).expect("the root to deepen");
    let deeper = at_root.deeper.unwrap();
    assert_eq!((deeper.engine_depth, deeper.settle), (ENGINE_DEPTH, 2));
    assert!(at_root.ours && (at_root.reach - 0.5).abs() < 1e-9, "{at_root:?}");
    assert!((cover.priority(at_root) - 0.125).abs() < 1e-9, "{}", cover.priority(at_root));
    // Black's half: each of White's likely replies is known by its own search; the likeliest asks for one ply.
    let reply = found.leaves.iter().find(|l| l.ply == 1 && l.deeper.is_some()).expect("a reply to deepen");
    assert_eq!(reply.deeper.unwrap().settle, 1);
    assert!((cover.priority(reply) - reply.reach / 2.0).abs() < 1e-12);
    // Highest priority first, deeper leaves among the others by priority, not by reach.
    assert!(found.leaves.windows(2).all(|w| cover.priority(&w[0]) >= cover.priority(&w[1])));
    assert!(found.leaves.iter().any(|l| l.deeper.is_none() && cover.priority(l) > cover.priority(at_root)));

    // Once grown (whatever came of it), not asked for again.
    let asked_again = |cover: &Cover, grown: &HashSet<_>| {
        let found = walk(&store.read().unwrap(), &roots, cover, grown).unwrap();
        found.leaves.iter().any(|l| l.key == root_key && l.deeper.is_some())
    };
    assert!(!asked_again(&cover, &[at_root.id()].into_iter().collect()));
    // Below the floor: reach 1/2 over 4 is 1/8 of a game, under 0.3 of the root's half of the games.
    let high_floor = Cover { floor: 0.3, ..cover.clone() };
    assert!(!asked_again(&high_floor, &HashSet::new()));
    assert!(asked_again(&cover, &HashSet::new()));

    // Grown as a cover round grows it, in a round whose engine depth is deeper than the root's evaluation: the root
    // is deepened at its own engine depth (at the round's, its stored searches would all be run again).
    let mut root = BookRoot::new(at_root.line.clone(), "deeper");
    root.max_depth = Some(cover.grow_depth(at_root));
    root.engine_depth = Some(deeper.engine_depth);
    let round = Params::new(ENGINE_DEPTH + 2, 20).with_max_depth(deeper.settle);
    grow(&store, vec![ScriptedEvaluator::new(1, 11)], &[root], &round, None, &stop, None, |_| {}).unwrap();
    let node = store.read().unwrap().node(root_key).unwrap().unwrap();
    assert_eq!(node.eval.as_ref().map(|e| e.depth), Some(ENGINE_DEPTH), "the root's own search was run again");
    assert_eq!(node.settled_depth, Some(2));
    let mut grown = HashSet::new();
    grown.insert(at_root.id());
    let next = walk(&store.read().unwrap(), &roots, &cover, &grown).unwrap();
    let again: Vec<_> = next.leaves.iter().filter(|l| l.key == root_key && l.deeper.is_some()).collect();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].deeper.unwrap().settle, 3, "the next ply");
    assert!((cover.priority(again[0]) - 0.0625).abs() < 1e-9);
}

/// `--cover-deepen` says so and grows deeper positions among the others; a factor of 1 or less is refused.
#[test]
fn a_cover_run_with_deepen_grows_answered_positions_deeper() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), ROOT);
    // The first run's first round meets an empty tree (nothing answered to deepen); the second's meets its tree.
    cover_run(&db, &epd, common::fake(), 6, "2", &["--cover-deepen", "2"]);
    let (report, stderr) = cover_run(&db, &epd, common::fake(), 6, "2", &["--cover-deepen", "2"]);
    assert!(stderr.contains("deepen by reach / 2 a ply"), "{stderr}");
    assert!(report["deepened"].as_u64().unwrap() >= 1, "{report}");
    let first_round: Vec<&str> =
        stderr.lines().skip_while(|l| !l.starts_with("round 1:")).skip(1).take_while(|l| l.starts_with("  ")).collect();
    assert!(first_round.iter().any(|l| l.contains(" deeper, priority ")), "{stderr}");
    for factor in ["1", "0.5", "NaN"] {
        let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(&db)
            .args(["analyze", "--roots"])
            .arg(&epd)
            .args(["--cover", "--cover-deepen", factor, "--engine", common::fake(), "--time", "1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains("give a factor above 1"), "{factor}: {stderr}");
    }
}
