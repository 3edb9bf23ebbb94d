//! Growth (`analyze`, `search::growth`): the frontier, its one priority, the loop that keeps the engines busy, its
//! sources, and runs that resume. The walk finds where games from the seeds leave the tree, the positions of highest
//! priority first; growing there makes the tree answer further along the lines play is likely to take.

mod common;

use std::{
    collections::HashSet,
    path::Path,
    process::Command,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::{Uci, fake_session, searches};
use deeptree::{
    game::Line,
    search::{
        analysis::{Analysis, Params},
        evaluator::{Answer, EvalError, Evaluator, Job, ScriptedEvaluator},
        growth::{Growth, Kind, Policy, Seed, Skip, Targets, grow, priority::priority, walk},
    },
    store::{Store, StoreOptions, key::PositionKey},
};

const ENGINE_DEPTH: u8 = 8;

/// A store in `dir` holding the open game (1. e4 e5), settled to software depth 1 by the scripted engine at the
/// engine depth; the seed of its games.
fn open_game_settled(dir: &Path) -> (Store, Vec<Seed>) {
    let store = Store::open(dir, &StoreOptions::default()).unwrap();
    let line = Line::parse(None, "e2e4 e7e5").unwrap();
    let mut analysis =
        Analysis::new(&store, ScriptedEvaluator::new(1, 11), Params::new(ENGINE_DEPTH, 20).with_max_depth(1));
    analysis.run(&line, |_| {}).unwrap();
    (store, vec![Seed::games_from(line, "open game", 1.0)])
}

/// A run of `seeds` to `target` with one scripted engine, at most `steps` items.
fn grow_steps(store: &Store, seeds: &[Seed], policy: &Policy, steps: u64) -> deeptree::search::growth::GrowthReport {
    let mut growth = Growth::new(seeds.to_vec(), policy.clone());
    growth.max_steps = Some(steps);
    grow(store, vec![ScriptedEvaluator::new(1, 11)], growth, |_| {}, |_, _| {}).unwrap()
}

/// A root settled to software depth 1: the walk answers the tree's move there and leaves the tree below it, the
/// items of highest priority first, each of priority `reach x 2^lack`: where games leave the tree one ply lacking,
/// where the tree answers (the root) the plies to the aim; growing one item at a time (the loop's first choice)
/// takes it off the frontier, and each exit grown raises the tree moves a game is expected to get.
#[test]
fn the_frontier_is_ranked_by_the_one_priority_and_each_step_adds_tree_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (store, seeds) = open_game_settled(dir.path());
    let target = u32::from(ENGINE_DEPTH);
    let policy = Policy::new(target, Params::new(ENGINE_DEPTH, 20));
    let aim = target + policy.beyond;
    let before = walk(&store.read().unwrap(), &seeds, &policy, &Skip::default()).unwrap();
    // White's half of the games: the tree moves at the root (settled at depth 1). Black's half: the replies at the
    // root were searched, and each reply's position holds its own search at the engine depth: the tree moves there.
    assert!((before.expected_answers - 1.0).abs() < 1e-9, "{}", before.expected_answers);
    assert!(!before.items.is_empty());
    assert!(before.items.windows(2).all(|w| w[0].priority >= w[1].priority), "highest priority first");
    let root = PositionKey::of(seeds[0].line.root());
    for item in &before.items {
        assert!(item.terms.reach > 0.0, "{item:?}");
        assert_eq!(item.priority, priority(item.terms), "the one priority: {item:?}");
        let lack = if item.kind == Kind::Deeper {
            // Answered: known at least to the target, and grown a ply past it.
            assert!(item.terms.known >= target && !item.terms.exit, "{item:?}");
            assert_eq!(u32::from(item.engine_depth) + u32::from(item.settle), item.terms.known + 1, "{item:?}");
            f64::from(aim) - f64::from(item.terms.known)
        } else {
            assert!(item.ply >= 1 && item.terms.exit, "games leave the tree below the root: {item:?}");
            1.0
        };
        assert!((item.priority - item.terms.reach * 2f64.powf(lack)).abs() <= 1e-12 * item.priority);
    }
    let deeper: Vec<_> = before.items.iter().filter(|i| i.kind == Kind::Deeper).collect();
    assert!(deeper.iter().any(|i| i.key == root), "the root, where the tree answers, is deepened: {deeper:?}");
    let total: f64 = before.items.iter().filter(|i| i.terms.exit).map(|i| i.terms.reach).sum();
    assert!(total <= 1.0 + 1e-9, "reach is a share of the games: {total}");
    let mut expected = before.expected_answers;
    // With the aim at the target, positions the tree answers rank below exits of the same reach: exits first.
    let policy = Policy { beyond: 0, ..policy };
    let mut exits_grown = 0;
    for round in 0..4 {
        let found = walk(&store.read().unwrap(), &seeds, &policy, &Skip::default()).unwrap();
        let top = found.items[0].clone();
        let report = grow_steps(&store, &seeds, &policy, 1);
        assert_eq!(report.steps, 1);
        let after = walk(&store.read().unwrap(), &seeds, &policy, &Skip::default()).unwrap();
        assert!(after.items.iter().all(|i| i.id() != top.id()), "round {round}: the grown item is still there");
        if top.terms.exit {
            exits_grown += 1;
            assert!(
                after.expected_answers > expected + 1e-6,
                "round {round}: {} tree moves a game expected, {expected} before",
                after.expected_answers
            );
        }
        expected = after.expected_answers;
    }
    assert!(exits_grown >= 3, "{exits_grown} exits grown in 4 steps");
}

/// One ply more where games arrive twice as often ranks alike: with the target two plies past the engine depth,
/// the root (known one ply short) ranks with the replies known two plies short at half its reach, and each seed
/// deepened itself ranks by its weight and what it lacks.
#[test]
fn depth_lacking_where_games_go_ranks_with_reach() {
    let dir = tempfile::tempdir().unwrap();
    let (store, seeds) = open_game_settled(dir.path());
    let target = u32::from(ENGINE_DEPTH) + 2;
    let policy = Policy::new(target, Params::new(ENGINE_DEPTH, 20));
    let found = walk(&store.read().unwrap(), &seeds, &policy, &Skip::default()).unwrap();
    let root = PositionKey::of(seeds[0].line.root());
    let at_root = found.items.iter().find(|i| i.key == root && i.ours).expect("the root lacks a ply");
    assert_eq!((at_root.kind, at_root.terms.known, at_root.settle), (Kind::TreeMove, target - 1, 2));
    assert!((at_root.terms.reach - 0.5).abs() < 1e-9 && (at_root.priority - 1.0).abs() < 1e-9, "{at_root:?}");
    assert_eq!(found.items[0].key, root, "half the games and one ply lacking rank first: {:?}", found.items[0]);
    // Seeds deepened themselves: a root of weight 4 is taken until it is 2 depths ahead of one of weight 1.
    let heavy = Seed { weight: 4.0, ..Seed::root(Line::parse(None, "d2d4").unwrap(), "heavy") };
    let light = Seed::root(Line::parse(None, "c2c4").unwrap(), "light");
    let seeds = vec![light, heavy];
    let policy = Policy::new(u32::from(ENGINE_DEPTH) + 6, Params::new(ENGINE_DEPTH, 20));
    let mut taken = Vec::new();
    for _ in 0..4 {
        let found = walk(&store.read().unwrap(), &seeds, &policy, &Skip::default()).unwrap();
        let top = found.items[0].clone();
        taken.push((top.seed, top.settle));
        let mut growth = Growth::new(vec![seeds[top.seed].clone()], policy.clone());
        growth.max_steps = Some(1);
        growth.policy.targets = Targets::flat(u32::from(ENGINE_DEPTH) + u32::from(top.settle));
        grow(&store, vec![ScriptedEvaluator::new(1, 11)], growth, |_| {}, |_, _| {}).unwrap();
    }
    // Both unknown first: the heavy one (4 times the reach); then known, the heavy one runs two depths ahead.
    assert_eq!(taken, [(1, 0), (0, 0), (1, 1), (1, 2)], "{taken:?}");
}

/// Runs `analyze --roots EPD --cover` (games followed, target the engine depth) with `engine` at the engine depth for `seconds`, one worker, and more
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
    epd_of_all(dir, &[fen])
}

/// An EPD file of roots in `dir`, one line for each of `fens` (their first four fields).
fn epd_of_all(dir: &Path, fens: &[&str]) -> std::path::PathBuf {
    let epd = dir.join("roots.epd");
    let lines: String =
        fens.iter().map(|fen| format!("{}\n", fen.split_whitespace().take(4).collect::<Vec<_>>().join(" "))).collect();
    std::fs::write(&epd, lines).unwrap();
    epd
}

/// The step lines of a run's stderr.
fn step_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("grow ")).collect()
}

/// `analyze --roots --cover` with the scripted engine: it says each position it grows with its terms, the tree
/// moves a game is expected to get go up, and a session answers from the tree along the likeliest line.
#[test]
fn a_run_reports_each_choice_and_the_tree_answers_where_games_go() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), ROOT);
    let run = || cover_run(&db, &epd, common::fake(), 6, "3", &[]);
    let first = run();
    let (report, stderr) = &first;
    assert!(stderr.contains("--cover: games from the roots are followed"), "{stderr}");
    let steps = step_lines(stderr);
    assert!(steps.iter().any(|l| l.contains("the replies") && l.contains("ply  0 of line 1")), "{stderr}");
    assert!(steps.iter().all(|l| l.contains("priority ") && l.contains(" = reach ") && l.contains(" x 2^")));
    assert!(report["steps"].as_u64().unwrap() >= 2, "{report}");
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
/// searched; both are grown first, and a session playing either side answers from the tree.
#[test]
fn both_sides_of_a_root_are_grown() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), WHITE_ROOT);
    let run = || cover_run(&db, &epd, common::fake(), 6, "3", &[]);
    let first = run();
    let steps = step_lines(&first.1);
    let firsts: Vec<&str> = steps.iter().filter(|l| l.contains("ply  0 of line 1")).copied().collect();
    assert!(firsts.iter().any(|l| l.contains("the tree's move")), "{steps:?}");
    assert!(firsts.iter().any(|l| l.contains("the replies")), "{steps:?}");
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

/// With a target one deeper than the engine depth, a position searched once is not enough: the tree's positions
/// are grown to software depth 1, and a session asked for that depth answers from the tree at the root and at a
/// position of the tree's side grown below it.
#[test]
fn a_target_past_the_engine_depth_is_grown_to() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), ROOT);
    let run = || cover_run(&db, &epd, common::fake(), 6, "3", &["--play-depth", "7"]);
    let first = run();
    let (report, stderr) = &first;
    assert!(stderr.contains("target depth 7, aim 10, engine depth 6"), "{stderr}");
    assert!(!stderr.contains("to software depth 0"), "one search is not enough: {stderr}");
    assert!(report["expected_answers"].as_f64().unwrap() > 0.0, "{report}");
    let grown_below_root = |(_, stderr): &(serde_json::Value, String)| {
        step_lines(stderr)
            .iter()
            .filter(|l| !l.contains("ply  0") && l.contains("the tree's move") && l.contains("to software depth 1"))
            .find_map(|l| l.rsplit(": ").next().map(str::to_owned))
            .ok_or_else(|| "no position of the tree's side grown below the root".to_owned())
    };
    let grown = grow_until(first, run, grown_below_root, 5).unwrap();
    // Both answered by a session asked for the target.
    let mut uci = fake_session(&db, &dir.path().join("fake.log"), &[]);
    uci.send("ucinewgame");
    for fen in [ROOT, grown.as_str()] {
        tree_moved(&mut uci, &format!("fen {fen}"), 7).unwrap();
    }
    uci.ready();
}

/// The same with a real Stockfish at engine depth 8: a few seconds of growth, and the session answers its first
/// three moves from the tree along the likeliest line.
#[test]
fn with_stockfish_a_short_run_answers_the_likeliest_line() {
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
/// counts the position answered nor puts it on the frontier. The same position without that history is answered.
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
    let policy = Policy::new(16, Params::new(16, 20));
    let key = PositionKey::of(&pos);

    let with_history = vec![Seed::games_from(line.clone(), "the game", 1.0)];
    let found = walk(&store.read().unwrap(), &with_history, &policy, &Skip::default()).unwrap();
    assert_eq!(found.expected_answers, 0.0, "the game searches here: no tree move");
    assert!(!found.items.iter().any(|i| i.key == key && i.ours), "not on the frontier either: {:?}", found.items);

    let fen = shakmaty::fen::Fen::from_position(&pos, shakmaty::EnPassantMode::Legal).to_string();
    let alone = vec![Seed::games_from(Line::parse(Some(&fen), "").unwrap(), "the position alone", 1.0)];
    let found = walk(&store.read().unwrap(), &alone, &policy, &Skip::default()).unwrap();
    assert!((found.expected_answers - 0.5).abs() < 1e-9, "Black's half of the games gets Nf6-g8 from the tree");
}

/// Every search asked: its position, its depth, the moves allowed.
type Asked = Arc<Mutex<Vec<(PositionKey, u8, Vec<String>)>>>;

/// The scripted engine, recording every search asked of it (position, depth, moves allowed); the first search of
/// `held` that any of the engines sharing it is asked waits until `release` is set (for at most 20 s).
struct Recording {
    inner: ScriptedEvaluator,
    asked: Asked,
    held: Arc<Mutex<Option<PositionKey>>>,
    release: Arc<std::sync::atomic::AtomicBool>,
}

impl Recording {
    fn new(seed: u64, asked: &Asked) -> Recording {
        Recording {
            inner: ScriptedEvaluator::new(1, seed),
            asked: asked.clone(),
            held: Arc::default(),
            release: Arc::default(),
        }
    }
}

impl Evaluator for Recording {
    fn workers(&self) -> usize {
        self.inner.workers()
    }

    fn submit(&mut self, id: u64, job: Job) -> Result<(), EvalError> {
        let key = PositionKey::of(&job.position);
        let hold = {
            let mut held = self.held.lock().unwrap();
            let hold = *held == Some(key);
            if hold {
                *held = None;
            }
            hold
        };
        if hold {
            let since = std::time::Instant::now();
            while !self.release.load(std::sync::atomic::Ordering::SeqCst)
                && since.elapsed() < std::time::Duration::from_secs(20)
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        let moves = job.searchmoves.iter().map(ToString::to_string).collect();
        self.asked.lock().unwrap().push((key, job.depth, moves));
        self.inner.submit(id, job)
    }

    fn next(&mut self, timeout: std::time::Duration) -> Option<(u64, Result<Answer, EvalError>)> {
        self.inner.next(timeout)
    }

    fn cancel_all(&mut self) {
        self.inner.cancel_all();
    }

    fn identity(&self) -> String {
        self.inner.identity()
    }
}

/// A run stopped after a few items is resumed by running it again: the second run goes on from the store (its first
/// choice is not the first run's) and asks no search the first one asked.
#[test]
fn a_stopped_run_resumes_with_nothing_asked_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let seeds = vec![
        Seed::games_from(Line::parse(None, "e2e4 e7e5").unwrap(), "open game", 1.0),
        Seed::games_from(Line::parse(None, "d2d4 d7d5").unwrap(), "closed game", 1.0),
    ];
    let run = |asked: &Arc<Mutex<Vec<_>>>| {
        let chosen = Mutex::new(Vec::new());
        let mut growth =
            Growth::new(seeds.clone(), Policy::new(u32::from(ENGINE_DEPTH) + 1, Params::new(ENGINE_DEPTH, 20)));
        growth.max_steps = Some(5);
        let engines = vec![Recording::new(3, asked), Recording::new(4, asked)];
        let report =
            grow(&store, engines, growth, |step| chosen.lock().unwrap().push(step.item.id()), |_, _| {}).unwrap();
        assert_eq!(report.steps, 5);
        assert!(report.stopped, "stopped by its steps with items left");
        chosen.into_inner().unwrap()
    };
    let (first, second) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let first_items = run(&first);
    let second_items = run(&second);
    for items in [&first_items, &second_items] {
        let unique: HashSet<_> = items.iter().collect();
        assert_eq!(unique.len(), items.len(), "an item taken twice in one run: {items:?}");
    }
    assert!(second_items.iter().all(|id| !first_items.contains(id)), "{first_items:?} {second_items:?}");
    let first: HashSet<_> = first.lock().unwrap().iter().cloned().collect();
    let second = second.lock().unwrap();
    assert!(!second.is_empty());
    let again: Vec<_> = second.iter().filter(|job| first.contains(*job)).collect();
    assert!(again.is_empty(), "asked again: {again:?}");
}

/// The loop keeps every engine busy: while one group's search of its item is held, the other group goes on taking
/// items (walking the tree again for more when the first walk's are taken), and the held one is released only once
/// the other has grown three.
#[test]
fn a_slow_item_holds_no_other_engine_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let line = Line::parse(None, "e2e4 e7e5").unwrap();
    let other = Line::parse(None, "d2d4 d7d5").unwrap();
    let seeds = vec![Seed::games_from(line.clone(), "open game", 1.0), Seed::games_from(other, "closed game", 1.0)];
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (slow, mut fast) = (Recording::new(5, &asked), Recording::new(6, &asked));
    let root = PositionKey::of(line.root());
    *slow.held.lock().unwrap() = Some(root);
    fast.held = slow.held.clone();
    fast.release = slow.release.clone();
    let release = slow.release.clone();
    let mut growth = Growth::new(seeds, Policy::new(u32::from(ENGINE_DEPTH), Params::new(ENGINE_DEPTH, 20)));
    growth.max_steps = Some(12);
    let done = Mutex::new(Vec::new());
    let report = grow(
        &store,
        vec![slow, fast],
        growth,
        |step| {
            let mut done = done.lock().unwrap();
            done.push(step.item.key);
            if done.len() >= 3 {
                release.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        },
        |_, _| {},
    )
    .unwrap();
    let done = done.into_inner().unwrap();
    let at = done.iter().position(|k| *k == root).expect("the held item was grown");
    assert!(at >= 3, "three items grew while the held one waited: {at} in {done:?}");
    assert!(report.steps >= 4, "{report:?}");
}

/// Games as a source: the exits of recorded games are seeds of their games' weight, the learner's side followed;
/// the heavier exit is grown first, and once grown no game leaves the tree there.
#[test]
fn game_exits_feed_the_frontier_the_heavier_first() {
    use deeptree::interop::played::{exits, seeds};
    use shakmaty::Position;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let params = Params::new(10, 20).with_max_depth(1);
    Analysis::new(&store, ScriptedEvaluator::new(1, 3), params.clone()).run(&Line::start_position(), |_| {}).unwrap();
    let pgn = "\
[White \"deeptree\"]\n[Black \"a\"]\n\n1. e4 c5 2. Nf3 *\n\n\
[White \"deeptree\"]\n[Black \"b\"]\n\n1. e4 c5 2. Nc3 *\n\n\
[White \"c\"]\n[Black \"deeptree\"]\n\n1. d4 Nf6 *\n\n\
[White \"deeptree\"]\n[Black \"a\"]\n\n1. e4 c5 2. d4 *\n";
    let found = exits(&store.read().unwrap(), pgn.as_bytes(), &params, &Targets::flat(11), Some("deeptree")).unwrap();
    let seeds = seeds(&found);
    assert_eq!(seeds.iter().map(|s| s.weight).collect::<Vec<_>>(), [3.0, 1.0]);
    assert!(seeds.iter().all(|s| s.follow && s.side == Some(s.line.root().turn())), "the learner's side, followed");
    let policy = Policy::new(11, Params::new(10, 20));
    let frontier = walk(&store.read().unwrap(), &seeds, &policy, &Skip::default()).unwrap();
    assert_eq!(frontier.items[0].key, PositionKey::of(seeds[0].line.root()), "{:?}", frontier.items[0]);
    assert!((frontier.items[0].terms.reach - 0.75).abs() < 1e-9);
    let mut growth = Growth::new(seeds, policy);
    growth.max_steps = Some(2);
    grow(&store, vec![ScriptedEvaluator::new(1, 5)], growth, |_| {}, |_, _| {}).unwrap();
    let again = exits(&store.read().unwrap(), pgn.as_bytes(), &params, &Targets::flat(11), Some("deeptree")).unwrap();
    assert_eq!((again.exits.len(), again.stayed), (0, 4), "{again:?}");
}

/// A single root as a source: without a clock it is deepened itself, to the run's deepest software depth in one
/// step (the rows of each depth said); with one, its games are followed.
#[test]
fn a_single_root_is_deepened_alone_or_its_games_followed() {
    let dir = tempfile::tempdir().unwrap();
    let analyze = |more: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(dir.path())
            .args([
                "analyze",
                "--moves",
                "e2e4 e7e5",
                "--engine",
                common::fake(),
                "--engine-depth",
                "6",
                "--workers",
                "2",
            ])
            .args(more)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let deepened = analyze(&["--max-depth", "2"]);
    assert!(deepened.contains("settled depth 2"), "{deepened}");
    let rows = deepened.lines().filter(|l| l.starts_with("     ") && l.contains('-')).count();
    assert_eq!(rows, 3, "a row for each depth: {deepened}");
    // Each run resumes the last: on a loaded machine a timed run grows less.
    let below_root = |said: &String| said.lines().any(|l| l.starts_with("grow ") && !l.contains("ply  0"));
    let mut followed = analyze(&["--play-depth", "7", "--time", "2"]);
    for _ in 0..5 {
        if below_root(&followed) {
            break;
        }
        followed = analyze(&["--play-depth", "7", "--time", "2"]);
    }
    assert!(followed.contains("1 with games followed"), "{followed}");
    assert!(below_root(&followed), "{followed}");
}

/// Two processes growing one store from one book at once share the work through claims: what one asks, the other
/// takes rather than asks again (almost: a search stopped when one run ends may be asked by the other), and at
/// least one answer crosses from one to the other.
#[test]
fn two_processes_growing_one_store_share_their_searches() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = dir.path().join("book.epd");
    std::fs::write(&epd, "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\nrnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n").unwrap();
    let run = |log: &Path| {
        Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(&db)
            .args(["analyze", "--roots"])
            .arg(&epd)
            .args(["--engine", &format!("{} --mode smooth --latency-ms 4 --log {}", common::fake(), log.display())])
            .args(["--engine-depth", "6", "--play-depth", "7", "--workers", "2", "--time", "4", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (log_a, log_b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    let (a, b) = (run(&log_a), run(&log_b));
    let report = |child: std::process::Child| -> serde_json::Value {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_str(String::from_utf8_lossy(&output.stdout).lines().last().unwrap()).unwrap()
    };
    let (a, b) = (report(a), report(b));
    let (asked_a, asked_b) = (searches(&log_a), searches(&log_b));
    let in_a: HashSet<&(String, String)> = asked_a.iter().collect();
    let both = asked_b.iter().filter(|s| in_a.contains(s)).count();
    let asked = asked_a.len() + asked_b.len();
    assert!(asked > 100, "{asked} searches asked");
    assert!(both * 20 <= asked, "{both} of {asked} searches were asked by both processes (more than 5 %)");
    let shared = a["shared"].as_u64().unwrap_or(0) + b["shared"].as_u64().unwrap_or(0);
    assert!(shared > 0, "neither process took an answer from the other: {a} {b}");
}

/// A UCI session's position is a source too: `go infinite` and `go ponder` grow it on the loop, and `stop` ends the
/// growth where it stands: with every search of the engine taking 3 s, the answer comes long
/// before the search under way would have ended (a growth that waited for it, or for the depth it settles, would
/// answer after 3 s or more). The tree grown so far answers.
#[test]
fn a_sessions_growth_stops_where_it_stands() {
    use std::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let log = dir.path().join("fake.log");
    // Fast searches first: the start position is known when the slow growth begins.
    let mut uci = fake_session(&db, &log, &[]);
    uci.send("position startpos");
    uci.best("go depth 5");
    drop(uci);
    let slow = format!("{} --latency-ms 3000 --log {}", common::fake(), log.display());
    let mut uci = common::session(&db, &slow, &["Threads value 2"]);
    // `go ponder` without a clock grows the tree as `go infinite` does (with one, it is the direct engine's ponder).
    for (go, end) in [("go infinite", "stop"), ("go ponder", "stop")] {
        uci.send("position startpos moves e2e4");
        uci.send(go);
        std::thread::sleep(Duration::from_millis(700));
        let asked = Instant::now();
        uci.send(end);
        let lines = uci.until("bestmove", common::PATIENCE);
        let took = asked.elapsed();
        assert!(lines.last().is_some_and(|l| l.starts_with("bestmove")), "{go}: {lines:?}");
        assert!(took < Duration::from_millis(2500), "{go}, {end}: answered {took:?} after it, {lines:?}");
    }
    uci.ready();
}

/// `deeptree --db DB ARGS`, which must succeed: its standard output.
fn deeptree_ok(db: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree")).arg("--db").arg(db).args(args).output().unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A book deepened evenly on a budget with no target (neither `--for` nor `--play-depth`) says so on each step line,
/// and shows its priority as `reach x 2^-known`: the order it ranks in, not a number of some 80 digits.
#[test]
fn a_run_with_no_target_shows_each_step_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let epd = epd_of_all(dir.path(), &[ROOT, WHITE_ROOT]);
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(dir.path().join("tree"))
        .args(["analyze", "--roots", epd.to_str().unwrap(), "--engine", common::fake(), "--engine-depth", "8"])
        .args(["--workers", "1", "--nodes", "6000"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let steps = step_lines(&stdout);
    assert!(steps.len() >= 3, "{stdout}");
    for line in &steps {
        assert!(line.contains("no target)") && !line.contains("aim"), "{line}");
        let known: i32 = line.split("(known").nth(1).and_then(|k| k.split(',').next()).unwrap().trim().parse().unwrap();
        assert!(line.contains(&format!(" x 2^{} ", -known)), "{line}");
        let priority = line.split("priority ").nth(1).and_then(|p| p.split(' ').next()).unwrap();
        assert!(priority.len() <= 10 && priority.parse::<f64>().unwrap() > 0.0, "{line}");
    }
}

/// Growth for a clock: on a store with no depth model, `--for` times searches at that clock first, stores the fit
/// and says the targets; the next run reads the store's model; `stats` says the clock the tree was grown for and
/// what its last run left, and `show` the depth a game needs at a position.
#[test]
fn growth_for_a_clock_reads_its_target_from_the_depth_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), ROOT);
    let deeptree = |args: &[&str]| deeptree_ok(&db, args);
    let grow_on = |threads: &str| {
        deeptree(&[
            "analyze",
            "--roots",
            epd.to_str().unwrap(),
            "--for",
            "2+0.02",
            "--threads",
            threads,
            "--engine",
            common::fake(),
            "--engine-depth",
            "4",
            "--workers",
            "2",
            "--time",
            "3",
        ])
    };
    let grow = || grow_on("1");
    let first = grow();
    assert!(first.contains("--for 2+0.02: searches timed on 1 thread: depth "), "{first}");
    let target: Vec<u32> = first
        .lines()
        .find_map(|l| l.strip_prefix("--for 2+0.02: target depth "))
        .map(|rest| rest.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).take(1).collect())
        .unwrap_or_default();
    assert_eq!(target.len(), 1, "{first}");
    assert!(first.contains("1 with games followed"), "{first}");
    let second = grow();
    assert!(second.contains("--for 2+0.02: the store's depth model, fitted to 1 searches"), "{second}");
    // Another thread count times its own searches, and keeps the 1-thread fit: each count has its fit.
    let two = grow_on("2");
    assert!(two.contains("--for 2+0.02: searches timed on 2 threads: depth "), "{two}");
    let two_again = grow_on("2");
    assert!(two_again.contains("--for 2+0.02: the store's depth model"), "{two_again}");
    let third = grow();
    assert!(third.contains("--for 2+0.02: the store's depth model, fitted to 1 searches"), "{third}");
    let stats = deeptree(&["stats"]);
    assert!(stats.contains("grown for  2+0.02 on 1 thread: target depth "), "{stats}");
    assert!(stats.contains("are answered (") && stats.contains("after its last run)"), "{stats}");
    let json: serde_json::Value = serde_json::from_str(&deeptree(&["stats", "--json"])).unwrap();
    assert_eq!(json["grown_for"]["clock"], "2+0.02", "{json}");
    let shown = deeptree(&["show", "--fen", ROOT]);
    assert!(shown.contains(&format!("a game needs depth {} at this position", target[0])), "{shown}");
    let shown: serde_json::Value = serde_json::from_str(&deeptree(&["show", "--fen", ROOT, "--json"])).unwrap();
    assert_eq!(shown["grown_for"]["clock"], "2+0.02", "{shown}");
    assert_eq!(shown["grown_for"]["target_here"], target[0], "{shown}");
    assert!(shown["grown_for"]["answered_share"].is_number(), "{shown}");
    // A clock that cannot be read is refused before anything starts.
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(dir.path().join("none"))
        .args(["analyze", "--for", "fast"])
        .output()
        .unwrap();
    assert!(!output.status.success() && String::from_utf8_lossy(&output.stderr).contains("give a clock"));
    assert!(!dir.path().join("none").exists());
}

/// `stats` walks the games from the seeds the tree was grown for again, on the tree as it stands: just after a
/// `--for` run it finds what the run left; after growth that is not for the clock (here a run to a play depth), the
/// games get more tree moves than the last `--for` run left, which `stats` still reports beside them. A run for the
/// same clock that fails before its end changes nothing it says.
#[test]
fn stats_walks_the_seeds_games_again_on_the_tree_as_it_stands() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let epd = epd_of(dir.path(), ROOT);
    let deeptree = |args: &[&str]| deeptree_ok(&db, args);
    // An engine depth at the clock's target (12 from the fake engine's timed search): each search of the tree's
    // side answers there. Budgets in the fake engine's nodes (1,000 a search): a loaded machine grows as much as an
    // idle one.
    let grow = |more: &[&str], nodes: &str| {
        let mut args = vec!["analyze", "--roots", epd.to_str().unwrap(), "--engine", common::fake()];
        args.extend(["--engine-depth", "12", "--workers", "1", "--nodes", nodes]);
        args.extend(more);
        deeptree(&args)
    };
    let stats = || -> serde_json::Value { serde_json::from_str(&deeptree(&["stats", "--json"])).unwrap() };
    grow(&["--for", "2+0.02"], "20000");
    let after_for = stats();
    let grown = &after_for["grown_for"];
    let left = grown["expected_answers"].as_f64().unwrap();
    assert!(left > 0.0, "{after_for}");
    assert!(grown.get("followed").is_none(), "the seeds themselves are not printed: {grown}");
    assert_eq!(grown["now"]["seeds"], 1, "{grown}");
    assert!((grown["now"]["expected_answers"].as_f64().unwrap() - left).abs() < 1e-9, "{grown}");
    assert_eq!(grown["now"]["answered_share"], grown["answered_share"], "{grown}");
    // A run for the same clock that fails before its end (its engine does not start) leaves the figures as they were.
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&db)
        .args(["analyze", "--roots", epd.to_str().unwrap(), "--for", "2+0.02", "--engine-depth", "12"])
        .args(["--engine", "/nonexistent/engine", "--time", "1"])
        .output()
        .unwrap();
    assert!(!output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(stats()["grown_for"], after_for["grown_for"], "a failed run changes nothing said");
    // Nor one that fails later, its targets said and its engines started (its trace cannot be written), for another
    // engine depth, which would replace the entry.
    let trace = dir.path().join("no such folder").join("trace.txt");
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&db)
        .args(["analyze", "--roots", epd.to_str().unwrap(), "--for", "2+0.02", "--engine-depth", "13"])
        .args(["--engine", common::fake(), "--nodes", "1000", "--trace", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(stats()["grown_for"], after_for["grown_for"], "a run failed at its trace changes nothing said");
    // A run for the same clock that follows no games (a task alone) leaves the seeds and figures of the last one.
    deeptree(&["task", "add", "--moves", "d2d4", "--label", "Queen's pawn", "--time", "60"]);
    let mut tasks = vec!["analyze", "--tasks", "--for", "2+0.02", "--engine", common::fake(), "--engine-depth", "12"];
    tasks.extend(["--workers", "1", "--time", "2"]);
    deeptree(&tasks);
    assert_eq!(stats()["grown_for"]["now"]["seeds"], 1, "the book's seed stays: {}", stats());
    assert_eq!(stats()["grown_for"]["expected_answers"], after_for["grown_for"]["expected_answers"]);
    grow(&["--play-depth", "12", "--beyond", "0"], "300000");
    let after_more = stats();
    let grown = &after_more["grown_for"];
    assert_eq!(grown["expected_answers"].as_f64(), Some(left), "the last --for run's figure stays: {grown}");
    let now = grown["now"]["expected_answers"].as_f64().unwrap();
    assert!(now > left, "growth since counts: {now} against {left}: {grown}");
    let line = deeptree(&["stats"]);
    assert!(line.contains(&format!("{now:.2} tree moves a game expected; ")), "{line}");
    assert!(line.contains("after its last run"), "{line}");
    // `show` gives the last run's figures (a walk of the whole tree for each position shown would be too slow).
    let shown: serde_json::Value = serde_json::from_str(&deeptree(&["show", "--fen", ROOT, "--json"])).unwrap();
    assert_eq!(shown["grown_for"]["expected_answers"].as_f64(), Some(left), "{shown}");
    assert!(shown["grown_for"].get("followed").is_none() && shown["grown_for"].get("now").is_none(), "{shown}");
}

/// `--for` where no position has a move to time (a checkmate) goes on with the default depth model, says so, and
/// stores no fit: the next run on a position with moves times its searches instead of trusting a fit of none.
#[test]
fn growth_for_a_clock_with_nothing_to_time_stores_no_fit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let mated = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3";
    let grow = |fen: &str| {
        let mut args = vec!["analyze", "--fen", fen, "--for", "2+0.02", "--engine", common::fake()];
        args.extend(["--engine-depth", "3", "--workers", "1", "--nodes", "2000"]);
        deeptree_ok(&db, &args)
    };
    let first = grow(mated);
    assert!(
        first.contains("--for 2+0.02: no search timed on 1 thread (no position with a move to time): the default"),
        "{first}"
    );
    {
        let store = Store::open_read_only(&db, &StoreOptions::default()).unwrap();
        assert_eq!(store.read().unwrap().depth_fit_for(1).unwrap(), None, "no fit of no search is stored");
    }
    let second = grow(ROOT);
    assert!(second.contains("--for 2+0.02: searches timed on 1 thread: depth "), "{second}");
}

/// `--for` stops timing its searches at Ctrl-C (here SIGTERM) and at the end of its budget, however long the clock
/// lets the engine think: Stockfish's first move at 600+5 takes many seconds.
#[test]
fn timing_searches_for_a_long_clock_ends_with_the_budget_and_at_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let stockfish = deeptree::engine::resolve_program("stockfish");
    let stockfish = stockfish.to_str().unwrap();
    let analyze = |db: &str, budget: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(dir.path().join(db))
            .args(["analyze", "--fen", ROOT, "--for", "600+5", "--engine", stockfish, "--engine-depth", "3"])
            .args(["--workers", "1"])
            .args(budget)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The budget: 1 s, timing included. Timed to its end, the search would be said with its depth.
    let output = analyze("budget", &["--time", "1"]).wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout} {}", String::from_utf8_lossy(&output.stderr));
    let said = "--for 600+5: no search timed on 1 thread (out of time): the default depth model";
    assert!(stdout.contains(said), "{stdout}");
    // A termination signal while the first search is timed: sent once the engine runs (the handler is set by then).
    let child = analyze("signal", &[]);
    // (Each thread lists the children it started: the engine's is a worker thread's.)
    let tasks = format!("/proc/{}/task", child.id());
    let engine_runs = || {
        std::fs::read_dir(&tasks).into_iter().flatten().flatten().any(|task| {
            std::fs::read_to_string(task.path().join("children")).is_ok_and(|children| !children.trim().is_empty())
        })
    };
    let waited = std::time::Instant::now();
    while !engine_runs() && waited.elapsed() < common::PATIENCE {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout} {}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("no search timed on 1 thread (stopped)"), "{stdout}");
}

/// A session that changes `Threads` keeps the depth model of its timed searches as the fit of the threads they ran
/// on, and starts the new count from the store's fit of that count, not from the other's.
#[test]
fn a_session_keeps_each_thread_counts_depth_fit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let log = dir.path().join("engine.log");
    let mut uci = common::fake_session(&db, &log, &[]);
    for moves in ["e2e4", "d2d4", "c2c4"] {
        uci.send(&format!("position startpos moves {moves}"));
        let (best, lines) = uci.best("go wtime 3000 btime 3000 winc 30 binc 30");
        assert!(!best.is_empty(), "{lines:?}");
    }
    uci.send("setoption name Threads value 2");
    uci.send("ucinewgame");
    uci.ready();
    drop(uci);
    let store = Store::open_read_only(&db, &StoreOptions::default()).unwrap();
    let view = store.read().unwrap();
    let one = view.depth_fit_for(1).unwrap();
    assert!(one.as_ref().is_some_and(|fit| fit.samples >= 3), "the 1-thread searches' fit: {one:?}");
    assert_eq!(view.depth_fit_for(2).unwrap(), None, "no search ran on 2 threads");
}

/// `analyze --games` of the PGN `pgn` alone, `--for 2+0.02` on the fake engine with its log, 2 s, in `dir`: the
/// run's standard output (the run must succeed) and the engine's log file.
fn grow_for_games_alone(dir: &std::path::Path, pgn: &str) -> (String, std::path::PathBuf) {
    let log = dir.join("engine.log");
    let games = dir.join("games.pgn");
    std::fs::write(&games, pgn).unwrap();
    let engine = format!("{} --log {}", common::fake(), log.display());
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(dir.join("tree"))
        .args(["analyze", "--games", games.to_str().unwrap(), "--for", "2+0.02", "--engine", &engine])
        .args(["--engine-depth", "3", "--workers", "1", "--time", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{stdout} {}", String::from_utf8_lossy(&output.stderr));
    (stdout, log)
}

/// `--for` with games alone times its searches on the positions of the games' first game that plays, every 6 plies
/// from its start (here a game from a FEN, where the start position never occurs), not on the start position.
#[test]
fn growth_for_a_clock_from_games_alone_times_the_games_positions() {
    use shakmaty::{EnPassantMode, Position, fen::Fen};
    let dir = tempfile::tempdir().unwrap();
    let fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3";
    let game = "1. Bb5 a6 2. Ba4 Nf6 3. O-O Be7 4. Re1 b5 5. Bb3 d6 6. c3 O-O 7. h3 *";
    let (stdout, log) = grow_for_games_alone(
        dir.path(),
        &format!("[Event \"x\"]\n[White \"a\"]\n[Black \"b\"]\n[FEN \"{fen}\"]\n[SetUp \"1\"]\n\n{game}\n"),
    );
    // 13 plies from the FEN: positions at plies 0, 6 and 12 are timed, three searches.
    let timed = stdout.lines().find(|l| l.starts_with("--for 2+0.02: searches timed on 1 thread: ")).unwrap_or("");
    assert_eq!(timed.matches("depth ").count(), 3, "{stdout}");
    // The game's positions as FENs, the first one the game's start.
    let mut position: shakmaty::Chess =
        fen.parse::<Fen>().unwrap().into_position(shakmaty::CastlingMode::Standard).unwrap();
    let mut positions = vec![Fen::from_position(&position, EnPassantMode::Legal).to_string()];
    for san in ["Bb5", "a6", "Ba4", "Nf6", "O-O", "Be7", "Re1", "b5", "Bb3", "d6", "c3", "O-O", "h3"] {
        let m = san.parse::<shakmaty::san::San>().unwrap().to_move(&position).unwrap();
        position.play_unchecked(m);
        positions.push(Fen::from_position(&position, EnPassantMode::Legal).to_string());
    }
    let sent = common::fake_log(&log);
    // Growth sends its positions as a root and moves; a timed search sends the position alone.
    for ply in [6, 12] {
        let wanted = format!("position fen {}", positions[ply]);
        assert!(sent.iter().any(|c| c == &wanted), "ply {ply}: {wanted} not sent: {sent:?}");
    }
    assert!(!sent.iter().any(|c| c == "position startpos"), "the start position was timed: {sent:?}");
}

/// `--for` with a Chess960 game alone times its searches on an engine set up for Chess960 (castling as king takes
/// rook), as the growth's engines are.
#[test]
fn growth_for_a_clock_from_a_chess960_game_times_on_a_chess960_engine() {
    let dir = tempfile::tempdir().unwrap();
    let fen = "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1";
    let (stdout, log) = grow_for_games_alone(
        dir.path(),
        &format!("[Variant \"Chess960\"]\n[FEN \"{fen}\"]\n[SetUp \"1\"]\n\n1. e4 e5 2. Nd3 Nd6 3. O-O O-O *\n"),
    );
    assert!(stdout.contains("--for 2+0.02: searches timed on 1 thread: depth "), "{stdout}");
    // The log's lines are `PID COMMAND`: the first engine started is the one that times the searches.
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text.lines().next().and_then(|l| l.split_once(' ')).map(|(pid, _)| pid.to_owned()).unwrap();
    let timing: Vec<&str> =
        text.lines().filter_map(|l| l.split_once(' ')).filter(|(pid, _)| *pid == first).map(|(_, c)| c).collect();
    let set = timing.iter().position(|c| *c == "setoption name UCI_Chess960 value true");
    let timed = timing.iter().position(|c| c.starts_with("position fen "));
    assert!(set.is_some() && set < timed, "Chess960 set before the first timed search: {timing:?}");
}

/// An opponent's position the other side's growth searched (its own evaluation as deep as the target) still lacks
/// the ply of its replies: it stays on the frontier for the games of the side that meets it as the opponent's.
#[test]
fn an_opponents_position_searched_for_the_other_side_still_wants_its_replies() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let line = Line::parse(None, "e2e4 e7e5").unwrap();
    // One search of the position (White to move) at the engine depth: what White's half of the games grows there.
    Analysis::new(&store, ScriptedEvaluator::new(1, 11), Params::new(ENGINE_DEPTH, 20).with_max_depth(0))
        .run(&line, |_| {})
        .unwrap();
    let for_black = Seed { side: Some(shakmaty::Color::Black), ..Seed::games_from(line.clone(), "black's games", 1.0) };
    let policy = Policy::new(u32::from(ENGINE_DEPTH), Params::new(ENGINE_DEPTH, 20));
    let found = walk(&store.read().unwrap(), &[for_black], &policy, &Skip::default()).unwrap();
    let root = PositionKey::of(line.root());
    let replies = found.items.iter().find(|i| i.key == root).expect("White's replies are wanted at the root");
    assert_eq!(replies.kind, Kind::Replies);
    assert_eq!((replies.terms.known, replies.terms.lack()), (u32::from(ENGINE_DEPTH) - 1, 1), "{replies:?}");
    assert!((replies.priority - 2.0).abs() < 1e-9, "{replies:?}");
}

/// The loop keeps a book of roots deepened themselves even: with two groups and three roots, no root is taken more
/// than a ply ahead of one being grown, so the settled depths end within a ply or two of each other.
#[test]
fn a_book_of_roots_deepened_grows_evenly_on_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let seeds: Vec<Seed> = ["e2e4 c7c5", "d2d4 g8f6 c2c4 e7e6", "e2e4 e7e5 g1f3 b8c6 f1b5"]
        .iter()
        .map(|moves| Seed::root(Line::parse(None, moves).unwrap(), *moves))
        .collect();
    let mut growth = Growth::new(seeds, Policy::new(u32::from(ENGINE_DEPTH) + 8, Params::new(ENGINE_DEPTH, 20)));
    growth.max_steps = Some(9);
    let settled = Mutex::new(Vec::new());
    let engines = vec![ScriptedEvaluator::new(1, 21), ScriptedEvaluator::new(1, 22)];
    let report = grow(
        &store,
        engines,
        growth,
        |step| settled.lock().unwrap().push((step.item.seed, step.item.settle)),
        |_, _| {},
    )
    .unwrap();
    let depths: Vec<u8> = report.roots.iter().map(|r| r.settled_depth.expect("each root grown")).collect();
    let (low, high) = (depths.iter().min().unwrap(), depths.iter().max().unwrap());
    assert!(high - low <= 2, "settled depths {depths:?}, steps {:?}", settled.into_inner().unwrap());
    assert_eq!(report.steps, 9);
}

/// A root given more than once is of the weight of its count, and a root of weight 2^k runs k depths ahead: the
/// Sicilian given four times in a PGN of roots is settled two depths deeper than the French, given once (and first,
/// so that it wins every tie), where equal weights would keep them level.
#[test]
fn a_root_given_four_times_runs_two_depths_ahead() {
    let pgn = "1. e4 e6 *\n\n1. e4 c5 *\n\n1. e4 c5 *\n\n1. e4 c5 *\n\n1. e4 c5 *\n";
    let (roots, skipped) = deeptree::interop::roots::parse_pgn_roots(pgn.as_bytes(), false).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    let book = roots.into_iter().map(|r| (r.line, r.source.to_string(), f64::from(r.weight))).collect();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let mut growth = Growth::new(
        deeptree::search::growth::sources::book(book, false),
        Policy::new(u32::from(ENGINE_DEPTH) + 8, Params::new(ENGINE_DEPTH, 20)),
    );
    growth.max_steps = Some(4);
    let grown = Mutex::new(Vec::new());
    let report = grow(
        &store,
        vec![ScriptedEvaluator::new(1, 21)],
        growth,
        |step| grown.lock().unwrap().push((step.item.seed, step.item.settle)),
        |_, _| {},
    )
    .unwrap();
    // Seed 0 is the French (a fifth of the weight), seed 1 the Sicilian (four fifths). Each first evaluated (software
    // depth 0, the engine depth known), the heavier first; then the Sicilian twice, as four times the reach is worth
    // two plies: the next step would be the French's, at a tie.
    assert_eq!(grown.into_inner().unwrap(), [(1, 0), (0, 0), (1, 1), (1, 2)]);
    let depths: Vec<Option<u8>> = report.roots.iter().map(|r| r.settled_depth).collect();
    assert_eq!(depths, [Some(0), Some(2)]);
}
