//! The analyst's marks: an excluded move is never searched below, played nor exported, and leaves the other moves'
//! evaluations as they would be without it; an included move is walked whatever the move distance; both undone. And
//! where marks meet the rest of the store: an evaluation of an excluded line, Chess960 marks, marks made while a run
//! goes on, stale copies of edges, merges, exports, the split's spine, bulk writes, the direct relay, and the links of
//! placeholder edges. Exact checks with the scripted evaluator (its scores depend only on the position and the move);
//! the UCI side and the split with the real Stockfish.

mod common;

use common::Recording;

use std::time::Duration;

use deeptree::{
    game::Line,
    interop::{
        polyglot::{book_entries, polyglot_move},
        walk::Scope,
    },
    score::{Bound, Score},
    search::{
        analysis::{Analysis, AnalysisOptions, Params, Trace},
        evaluator::{Job, ScriptedEvaluator},
        overlay::Overlay,
        show, tree,
    },
    store::{
        Change, Store, StoreOptions,
        key::{KeySet, PositionKey},
        marks::{MarkError, MarkKind, MarkSource, searchable_moves},
        node::{Edge, Eval, Node, PackedPosition},
    },
    values::graph::{Graph, StoreGraph},
};
use proptest::prelude::*;
use shakmaty::{Chess, Position, uci::UciMove};

/// Grows the start position's tree to software depth `depth` (engine depth 10, move distance 20, no searches ahead
/// of their turn); the jobs asked.
fn grow(store: &Store, depth: u8) -> Vec<Job> {
    let evaluator = Recording::new(1, 7);
    let options = AnalysisOptions { look_ahead: None, ..AnalysisOptions::default() };
    let params = Params::new(10, 20).with_max_depth(depth);
    let mut analysis = Analysis::with_options(store, evaluator, params, options);
    let report = analysis.run(&Line::start_position(), |_| {}).unwrap();
    assert_eq!(report.settled_depth, Some(depth));
    std::mem::take(&mut analysis.evaluator_mut().jobs)
}

/// The trace of a run from the start position to software depth `depth` (with the jobs' answers).
fn walk_trace(store: &Store, depth: u8) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.txt");
    let options = AnalysisOptions { trace: Trace::to_file(&path).unwrap(), ..AnalysisOptions::default() };
    let params = Params::new(10, 20).with_max_depth(depth);
    let mut analysis = Analysis::with_options(store, ScriptedEvaluator::new(1, 7), params, options);
    analysis.run(&Line::start_position(), |_| {}).unwrap();
    drop(analysis);
    std::fs::read_to_string(&path).unwrap()
}

fn new_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    (dir, store)
}

fn node(store: &Store, pos: &Chess) -> Option<Node> {
    store.read().unwrap().node(PositionKey::of(pos)).unwrap()
}

fn play(pos: &Chess, uci: &UciMove) -> Chess {
    deeptree::game::play_uci(pos, uci).unwrap()
}

/// The positions reachable from `root` through stored moves that are not excluded.
fn reachable_without_excluded(store: &Store, root: &Chess) -> KeySet {
    let mut seen = KeySet::default();
    let mut stack = vec![root.clone()];
    seen.insert(PositionKey::of(root));
    while let Some(pos) = stack.pop() {
        let Some(record) = node(store, &pos) else { continue };
        for edge in record.edges.iter().filter(|e| !e.is_excluded()) {
            let child = play(&pos, &edge.uci);
            if seen.insert(PositionKey::of(&child)) {
                stack.push(child);
            }
        }
    }
    seen
}

/// Every search asked is of a position reachable without an excluded move, and searches no excluded move.
fn assert_no_search_through_excluded(store: &Store, jobs: &[Job]) {
    let reachable = reachable_without_excluded(store, &Chess::default());
    for job in jobs {
        let key = PositionKey::of(&job.position);
        assert!(reachable.contains(&key), "a search of {key}, reachable only through an excluded move");
        let record = node(store, &job.position);
        let excluded: Vec<UciMove> =
            record.iter().flat_map(|n| n.edges.iter().filter(|e| e.is_excluded()).map(|e| e.uci)).collect();
        if !excluded.is_empty() {
            assert!(!job.searchmoves.is_empty(), "a search of all of {key}'s moves, {excluded:?} excluded among them");
            assert!(job.searchmoves.iter().all(|m| !excluded.contains(m)), "an excluded move of {key} searched");
        }
    }
}

/// The tree's answer at `pos` (its best candidate), if it has one.
fn tree_best(store: &Store, pos: &Chess) -> Option<UciMove> {
    let view = store.read().unwrap();
    let found = tree::view(&view, pos, &[]).unwrap()?;
    found.candidates.first().map(|c| c.uci)
}

#[test]
fn an_excluded_move_is_never_searched_below_played_nor_exported_and_the_others_score_as_without_it() {
    let (_plain_dir, plain) = new_store();
    grow(&plain, 3);
    let start = Chess::default();
    let best = tree_best(&plain, &start).expect("a best move");

    let (_dir, store) = new_store();
    grow(&store, 1);
    let mark = store.set_mark(&start, best, MarkKind::Exclude, MarkSource::Cli).unwrap();
    assert_eq!((mark.uci, mark.kind, mark.source), (best, MarkKind::Exclude, MarkSource::Cli));
    let before_child = node(&store, &play(&start, &best));
    let jobs = grow(&store, 3);
    assert!(!jobs.is_empty());
    assert_no_search_through_excluded(&store, &jobs);
    // The walk never weighs it: no trace line names it at the root.
    let root_san = deeptree::search::show::san_of(&start, &best);
    let marked_trace = walk_trace(&store, 3);
    for weighed in ["admit", "refuse"] {
        let line = format!("{weighed} ply=0 {} {root_san}:", PositionKey::of(&start));
        assert!(!marked_trace.lines().any(|l| l.starts_with(&line)), "{marked_trace}");
    }
    assert!(marked_trace.contains(&format!("ply=0 {} ", PositionKey::of(&start))), "the trace names root moves");
    let said = format!("excluded ply=0 {} {root_san}: the analyst's mark; not walked", PositionKey::of(&start));
    assert!(marked_trace.lines().any(|l| l == said), "{marked_trace}");
    // Nothing below the excluded move was searched after the mark.
    assert_eq!(node(&store, &play(&start, &best)), before_child, "the excluded move's position was searched");

    // The other moves are valued as a run without the mark values them (a score depends on the position alone).
    let marked = node(&store, &start).unwrap();
    let unmarked = node(&plain, &start).unwrap();
    let mut compared = 0;
    for edge in marked.edges.iter().filter(|e| !e.is_excluded()) {
        if let Some(theirs) = unmarked.edge(&edge.uci) {
            assert_eq!((edge.score, edge.depth), (theirs.score, theirs.depth), "{}", edge.uci);
            compared += 1;
        }
    }
    assert!(compared > 0);

    // Never the tree's answer, never in `show`'s moves (but among its marks), never a book move.
    assert_ne!(tree_best(&store, &start), Some(best));
    let view = store.read().unwrap();
    let shown = show::tree(&view, &start, &[], 1).unwrap();
    assert!(shown.moves.iter().all(|m| m.uci != best.to_string()));
    assert_eq!(shown.marks.len(), 1);
    assert_eq!(shown.marks[0].uci, best.to_string());
    let json = serde_json::to_value(&shown).unwrap();
    assert_eq!(json["marks"][0]["kind"], "exclude");
    let (entries, _) = book_entries(&view, &Scope::All).unwrap();
    let excluded_move = polyglot_move(&start, &best).unwrap();
    let start_key = deeptree::interop::polyglot::book_key(&start);
    assert!(entries.iter().any(|e| e.key == start_key), "the start position is in the book");
    assert!(!entries.iter().any(|e| e.key == start_key && e.mv == excluded_move), "the excluded move is in the book");
    drop(view);

    // Undone: the move is back among the moves, its position searched by the next run.
    assert_eq!(store.undo_mark().unwrap().map(|m| m.uci), Some(best));
    assert!(store.read().unwrap().marks().unwrap().is_empty());
    let view = store.read().unwrap();
    let shown = show::tree(&view, &start, &[], 1).unwrap();
    assert!(shown.moves.iter().any(|m| m.uci == best.to_string()) && shown.marks.is_empty());
    let candidates = tree::view(&view, &start, &[]).unwrap().unwrap().candidates;
    assert!(candidates.iter().any(|c| c.uci == best), "a candidate of the tree's answer again");
    drop(view);
    // The walk weighs it again: the trace names it at the root.
    let trace = walk_trace(&store, 3);
    let san = shown.moves.iter().find(|m| m.uci == best.to_string()).unwrap().san.clone();
    let weighed = |l: &str| {
        ["admit", "refuse"].iter().any(|w| l.starts_with(&format!("{w} ply=0 {} {san}:", PositionKey::of(&start))))
    };
    assert!(trace.lines().any(weighed), "{san} is not weighed at the root");
    assert!(!trace.contains("excluded ply=0"), "{trace}");
}

#[test]
fn a_move_marked_before_any_search_is_left_out_of_the_first_evaluation_and_its_placeholder_goes_with_the_mark() {
    let (_dir, store) = new_store();
    let start = Chess::default();
    let e4: UciMove = "e2e4".parse().unwrap();
    store.set_mark(&start, e4, MarkKind::Exclude, MarkSource::Cli).unwrap();
    let jobs = grow(&store, 2);
    let first = jobs.iter().find(|j| PositionKey::of(&j.position) == PositionKey::of(&start)).unwrap();
    assert_eq!(first.searchmoves.len(), 19, "the evaluation searches every move but the excluded one");
    assert_no_search_through_excluded(&store, &jobs);
    let placeholder = node(&store, &start).unwrap().edge(&e4).cloned().unwrap();
    assert!(placeholder.is_excluded() && !placeholder.is_valued());
    store.lift_mark(&start, e4).unwrap();
    assert!(node(&store, &start).unwrap().edge(&e4).is_none(), "the mark's placeholder is gone with it");
}

#[test]
fn an_included_move_is_walked_whatever_the_move_distance_until_its_mark_is_lifted() {
    let (_dir, store) = new_store();
    grow(&store, 1);
    // A reply to the root's best move that no search has valued (the position is a leaf at software depth 1).
    let start = Chess::default();
    let at = play(&start, &tree_best(&store, &start).unwrap());
    let record = node(&store, &at).unwrap();
    let outside = at
        .legal_moves()
        .iter()
        .map(|m| deeptree::notation::canonical(*m))
        .find(|uci| record.edge(uci).is_none() && node(&store, &play(&at, uci)).is_none())
        .expect("a reply no search has valued");
    let san = show::san_of(&at, &outside);
    let child = PositionKey::of(&play(&at, &outside));
    store.set_mark(&at, outside, MarkKind::Include, MarkSource::Serve).unwrap();
    let trace = walk_trace(&store, 2);
    // Admitted whatever its estimate (it has none: the lowest), and its position evaluated.
    let admitted = format!("admit ply=1 {} {san}:", PositionKey::of(&at));
    assert!(trace.lines().any(|l| l.starts_with(&admitted) && l.ends_with("(included)")), "{trace}");
    assert!(node(&store, &play(&at, &outside)).is_some_and(|n| n.eval.is_some()), "{child} not evaluated");
    let view = store.read().unwrap();
    let shown = show::tree(&view, &at, &[], 1).unwrap();
    assert!(shown.moves.iter().any(|m| m.uci == outside.to_string() && m.included));
    drop(view);
    let lifted = store.lift_mark(&at, outside).unwrap();
    assert_eq!((lifted.kind, lifted.source), (MarkKind::Include, MarkSource::Serve));
    let edge = node(&store, &at).unwrap().edge(&outside).cloned().expect("the edge carries its position's value");
    assert_eq!(edge.steering, None);
}

#[test]
fn excluding_the_last_move_is_refused_and_an_illegal_move_is_an_error() {
    let (_dir, store) = new_store();
    // White's king on a1 in check from the rook on h1: two moves, Ka2 and Kb2.
    let line = Line::parse(Some("7k/8/8/8/8/8/8/K6r w - - 0 1"), "").unwrap();
    let pos = line.root();
    let moves: Vec<UciMove> = pos.legal_moves().iter().map(|m| deeptree::notation::canonical(*m)).collect();
    assert!(moves.len() >= 2, "{moves:?}");
    for uci in &moves[..moves.len() - 1] {
        store.set_mark(pos, *uci, MarkKind::Exclude, MarkSource::Cli).unwrap();
    }
    let last = moves[moves.len() - 1];
    let refused = store.set_mark(pos, last, MarkKind::Exclude, MarkSource::Cli).unwrap_err();
    assert!(matches!(refused, MarkError::LastMove { .. }), "{refused}");
    assert!(refused.to_string().contains("last move"), "{refused}");
    assert_eq!(store.read().unwrap().marks().unwrap().len(), moves.len() - 1, "nothing changed");
    // Including it is no exclusion: allowed.
    store.set_mark(pos, last, MarkKind::Include, MarkSource::Cli).unwrap();
    let illegal = store.set_mark(pos, "e2e4".parse().unwrap(), MarkKind::Exclude, MarkSource::Cli).unwrap_err();
    assert!(matches!(illegal, MarkError::IllegalMove { .. }), "{illegal}");
    let unmarked = store.lift_mark(&Chess::default(), "e2e4".parse().unwrap()).unwrap_err();
    assert!(matches!(unmarked, MarkError::NotMarked { .. }), "{unmarked}");
}

#[test]
fn marks_survive_compaction_and_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let start = Chess::default();
    let f3: UciMove = "f2f3".parse().unwrap();
    {
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        grow(&store, 1);
        store.set_mark(&start, f3, MarkKind::Exclude, MarkSource::Uci).unwrap();
    }
    Store::compact(dir.path()).unwrap();
    let store = Store::open_read_only(dir.path(), &StoreOptions::default()).unwrap();
    let marks = store.read().unwrap().marks().unwrap();
    assert_eq!(marks.len(), 1);
    assert_eq!((marks[0].uci, marks[0].source), (f3, MarkSource::Uci));
    assert!(node(&store, &start).unwrap().edge(&f3).is_some_and(Edge::is_excluded));
    let report = store.check().unwrap();
    assert!(report.damaged.is_empty(), "{:?}", report.damaged);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Random marks on a grown tree, then more growth: no search goes through an excluded move, the tree's answer at
    /// every marked position is never an excluded move, and no book move is excluded.
    #[test]
    fn random_marks_hold_everywhere(choices in prop::collection::vec((any::<u16>(), any::<u16>(), any::<bool>()), 1..6)) {
        let (_dir, store) = new_store();
        grow(&store, 2);
        // Positions of the tree: the root and its evaluated children.
        let start = Chess::default();
        let mut positions = vec![start.clone()];
        for edge in node(&store, &start).unwrap().edges {
            let child = play(&start, &edge.uci);
            if node(&store, &child).is_some_and(|n| n.eval.is_some()) {
                positions.push(child);
            }
        }
        let mut marked = Vec::new();
        for (which, mv, exclude) in choices {
            let pos = &positions[usize::from(which) % positions.len()];
            let moves = pos.legal_moves();
            let uci = deeptree::notation::canonical(moves[usize::from(mv) % moves.len()]);
            let kind = if exclude { MarkKind::Exclude } else { MarkKind::Include };
            if store.set_mark(pos, uci, kind, MarkSource::Cli).is_ok() {
                marked.push(pos.clone());
            }
        }
        let jobs = grow(&store, 3);
        assert_no_search_through_excluded(&store, &jobs);
        let view = store.read().unwrap();
        let (entries, _) = book_entries(&view, &Scope::All).unwrap();
        drop(view);
        for pos in &marked {
            let record = node(&store, pos).unwrap();
            let excluded: Vec<UciMove> = record.edges.iter().filter(|e| e.is_excluded()).map(|e| e.uci).collect();
            if let Some(best) = tree_best(&store, pos) {
                prop_assert!(!excluded.contains(&best), "the tree answers an excluded move {best}");
            }
            let key = deeptree::interop::polyglot::book_key(pos);
            for uci in &excluded {
                let mv = polyglot_move(pos, uci).unwrap();
                prop_assert!(!entries.iter().any(|e| e.key == key && e.mv == mv), "excluded {uci} is a book move");
            }
        }
    }
}

/// A GUI marks a move with `setoption name MarkExclude`: the real Stockfish's answer is another move from then on.
#[test]
fn a_gui_excludes_the_engines_move_and_gets_another() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let mut uci = common::session(&db, &common::stockfish().display().to_string(), &[]);
    uci.send("position startpos moves e2e4");
    let (first, _) = uci.best("go depth 6");
    uci.send(&format!("setoption name MarkExclude value {first}"));
    let said = uci.until("info string", Duration::from_secs(10));
    assert!(said.last().is_some_and(|l| l.contains(&format!("excluded {first}"))), "{said:?}");
    uci.send("position startpos moves e2e4");
    let (second, _) = uci.best("go depth 6");
    assert_ne!(first, second, "the excluded move was played");
    uci.send(&format!("setoption name MarkLift value {first}"));
    let said = uci.until("info string", Duration::from_secs(10));
    assert!(said.last().is_some_and(|l| l.contains("lifted")), "{said:?}");
    uci.send("quit");
    let store = Store::open_read_only(&db, &StoreOptions::default()).unwrap();
    assert!(store.read().unwrap().marks().unwrap().is_empty());
}

/// Deep Blue's split with the real Stockfish: the direct search of the root leaves the excluded moves out, so its
/// spine never starts with one and none of them is valued.
#[test]
fn the_splits_direct_search_keeps_to_the_marks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let deeptree = env!("CARGO_BIN_EXE_deeptree");
    let excluded = ["e2e4", "d2d4", "g1f3", "c2c4"];
    for uci in excluded {
        let out = std::process::Command::new(deeptree)
            .args(["mark", "exclude", uci, "--db", db.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let stockfish = common::stockfish();
    let out = std::process::Command::new(deeptree)
        .args(["analyze", "--db", db.to_str().unwrap(), "--engine", stockfish.to_str().unwrap()])
        .args(["--engine-depth", "6", "--nodes", "300000", "--split", "0.5", "--workers", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let store = Store::open_read_only(&db, &StoreOptions::default()).unwrap();
    let start = Chess::default();
    let record = node(&store, &start).unwrap();
    assert!(record.edges.iter().any(|e| e.is_valued()), "the root was searched");
    for uci in excluded {
        let edge = record.edge(&uci.parse().unwrap()).cloned().unwrap();
        assert!(edge.is_excluded() && !edge.is_valued(), "{uci} was searched: {edge:?}");
    }
    let best = tree_best(&store, &start).unwrap();
    assert!(!excluded.contains(&best.to_string().as_str()), "{best}");
}

/// Growth that follows play does not follow a game through an excluded move: the game's exit below it is not grown.
#[test]
fn games_through_an_excluded_move_leave_no_exit_below_it() {
    let (_dir, store) = new_store();
    grow(&store, 1);
    let pgn = "[White \"deeptree\"]\n[Black \"a\"]\n\n1. e4 c5 2. Nf3 *\n\n[White \"deeptree\"]\n[Black \"b\"]\n\n1. d4 d5 *\n";
    let params = Params::new(10, 20).with_max_depth(1);
    let exits = |store: &Store| {
        deeptree::interop::played::exits(
            &store.read().unwrap(),
            pgn.as_bytes(),
            &params,
            &deeptree::search::growth::Targets::flat(11),
            Some("deeptree"),
        )
        .unwrap()
    };
    let before = exits(&store);
    assert_eq!(before.exits.len(), 2, "{before:?}");
    store.set_mark(&Chess::default(), "e2e4".parse().unwrap(), MarkKind::Exclude, MarkSource::Cli).unwrap();
    let after = exits(&store);
    assert_eq!(after.exits.len(), 1, "{after:?}");
    assert_eq!(after.exits[0].line.moves[0].to_string(), "d2d4");
    assert_eq!(after.through_excluded, 1);
}

/// A tree grown elsewhere brings its marks with it: on the moves' edges and with who made them.
#[test]
fn a_merge_brings_the_other_trees_marks() {
    let (_other_dir, other) = new_store();
    grow(&other, 1);
    let start = Chess::default();
    let f3: UciMove = "f2f3".parse().unwrap();
    let made = other.set_mark(&start, f3, MarkKind::Exclude, MarkSource::Serve).unwrap();
    let other_dir = other.dir().to_owned();
    drop(other);
    let (_dir, store) = new_store();
    let summary =
        deeptree::interop::merge::merge_store(&store, &other_dir, &StoreOptions::default(), |_, _| {}).unwrap();
    assert_eq!(summary.marks, 1);
    assert_eq!(store.read().unwrap().marks().unwrap(), std::slice::from_ref(&made));
    assert!(node(&store, &start).unwrap().edge(&f3).is_some_and(Edge::is_excluded));
    let view = store.read().unwrap();
    let shown = show::tree(&view, &start, &[], 1).unwrap();
    assert_eq!(shown.marks.len(), 1);
    assert_eq!(
        (shown.marks[0].source, shown.marks[0].user.as_deref()),
        (Some(MarkSource::Serve), Some(made.user.as_str()))
    );
}

// The marks where they meet the rest of the store: an evaluation of an excluded line, Chess960 marks, marks made
// while a run goes on, stale copies of edges, merges, exports, the split's spine, bulk writes, the direct relay, and
// the links of placeholder edges.

/// A position whose stored evaluation's best move is excluded is evaluated again without it, even where the walk
/// reaches it as a leaf: the excluded move no longer sets its value.
#[test]
fn excluding_the_evaluated_best_move_of_a_leaf_evaluates_it_again() {
    let (_dir, store) = new_store();
    grow(&store, 1);
    let start = Chess::default();
    let best = tree_best(&store, &start).unwrap();
    let child = play(&start, &best);
    let record = node(&store, &child).unwrap();
    let reply = record.eval.as_ref().unwrap().best.unwrap();
    let reply_score = record.edge(&reply).unwrap().score;
    println!("root best {best}; child's best reply {reply} scored {reply_score}; child idea {:?}", record.idea);
    store.set_mark(&child, reply, MarkKind::Exclude, MarkSource::Cli).unwrap();
    let after = node(&store, &child).unwrap();
    println!("after excluding {reply}: child idea {:?}, edges {:?}", after.idea, after.edges);
    let jobs = grow(&store, 1);
    let at_child: Vec<_> = jobs.iter().filter(|j| PositionKey::of(&j.position) == PositionKey::of(&child)).collect();
    println!("jobs after the mark: {} ({} at the child)", jobs.len(), at_child.len());
    let after = node(&store, &child).unwrap();
    assert_ne!(
        after.idea,
        Some(reply_score),
        "the child is still worth exactly its excluded move's score, and {} searches were planned for it",
        at_child.len()
    );
}

/// A mark made in a Chess960 position is undone (its FEN, in X-FEN, read as Chess960).
#[test]
fn a_chess960_mark_is_undone() {
    let (_dir, store) = new_store();
    let line = Line::parse_in(Some("bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"), "", true).unwrap();
    let pos = line.root();
    let uci: UciMove = "e2e4".parse().unwrap();
    let mark = store.set_mark(pos, uci, MarkKind::Exclude, MarkSource::Cli).unwrap();
    println!("stored FEN: {}", mark.fen);
    let undone = store.undo_mark();
    println!("undo: {undone:?}");
    assert!(undone.is_ok(), "undo failed: {undone:?}");
}

/// A merged tree's Chess960 mark comes with who made it, and can be lifted.
#[test]
fn a_merged_chess960_mark_can_be_lifted() {
    let (other_dir, other) = new_store();
    let line = Line::parse_in(Some("bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"), "", true).unwrap();
    let pos = line.root().clone();
    let uci: UciMove = "e2e4".parse().unwrap();
    other.set_mark(&pos, uci, MarkKind::Exclude, MarkSource::Cli).unwrap();
    drop(other);
    let (_dir, store) = new_store();
    let summary =
        deeptree::interop::merge::merge_store(&store, other_dir.path(), &StoreOptions::default(), |_, _| {}).unwrap();
    println!("merge summary: {summary:?}");
    let edge = node(&store, &pos).and_then(|n| n.edge(&uci).cloned());
    println!("edge here: {edge:?}; marks here: {:?}", store.read().unwrap().marks().unwrap());
    let lifted = store.lift_mark(&pos, uci);
    println!("lift: {lifted:?}");
    assert!(lifted.is_ok(), "the merged excluded edge cannot be lifted: {lifted:?}");
}

/// The look-ahead's overlay keeps the records it read first: a mark made afterwards (another process: `deeptree
/// mark`) is read again before the look-ahead walks (`Overlay::refresh_marks`), so the excluded move is not in its
/// graph.
#[test]
fn the_look_aheads_overlay_sees_a_mark_made_during_the_run() {
    let (_dir, store) = new_store();
    let start = Chess::default();
    let e4: UciMove = "e2e4".parse().unwrap();
    let d4: UciMove = "d2d4".parse().unwrap();
    let mut root = Node::new(PackedPosition::of(&start));
    root.eval =
        Some(Eval { score: Score::cp(30), bound: Bound::Exact, depth: 10, best: Some(e4), nodes: 0, engine: None });
    root.edges.push(Edge::new(e4, Score::cp(30), Bound::Exact, 10));
    store.writer().submit(vec![Change::merge(&start, root).unwrap()]).wait().unwrap();
    // An answer of the run laid over the tree (an alternative d4).
    let mut answer = Node::new(PackedPosition::of(&start));
    answer.edges.push(Edge::new(d4, Score::cp(20), Bound::Exact, 10));
    let mut overlay = Overlay::default();
    overlay.apply(&store.read().unwrap(), &[Change::merge(&start, answer).unwrap()]).unwrap();
    // Meanwhile the analyst excludes e4.
    store.set_mark(&start, e4, MarkKind::Exclude, MarkSource::Cli).unwrap();
    let view = store.read().unwrap();
    let graph = StoreGraph::new(&view);
    assert!(graph.node(PositionKey::of(&start)).unwrap().edges.iter().all(|e| e.uci != Some(e4)), "store graph ok");
    // As the scheduler does before each look-ahead walk.
    overlay.refresh_marks(&view).unwrap();
    let tree = overlay.over(&graph);
    let seen: Vec<_> = tree.node(PositionKey::of(&start)).unwrap().edges.iter().map(|e| e.uci).collect();
    println!("the look-ahead's graph at the root: {seen:?}");
    assert!(!seen.contains(&Some(e4)), "the excluded move is back in the look-ahead's graph");
}

/// A write that carries a copy of a stored edge read before a lift does not put the mark back: only a mark's own
/// change sets one.
#[test]
fn a_stale_copy_of_an_edge_does_not_bring_a_lifted_mark_back() {
    let (_dir, store) = new_store();
    grow(&store, 1);
    let start = Chess::default();
    let f3: UciMove = "f2f3".parse().unwrap();
    store.set_mark(&start, f3, MarkKind::Include, MarkSource::Cli).unwrap();
    // A writer (Walker::line, for one) copies the stored edge into a new record ...
    let stale = node(&store, &start).unwrap().edge(&f3).cloned().unwrap();
    // ... while another process lifts the mark ...
    store.lift_mark(&start, f3).unwrap();
    // ... and then writes its copy.
    let mut copy = Node::new(PackedPosition::of(&start));
    let mut edge = stale;
    edge.imported = true;
    copy.edges.push(edge);
    store.writer().submit(vec![Change::merge(&start, copy).unwrap()]).wait().unwrap();
    let edge = node(&store, &start).unwrap().edge(&f3).cloned().unwrap();
    println!("edge after the stale write: {edge:?}; marks: {:?}", store.read().unwrap().marks().unwrap());
    let lifted = store.lift_mark(&start, f3);
    println!("lift: {lifted:?}");
    assert_eq!(edge.steering, None, "the lifted mark is back on the edge; lift says {lifted:?}");
}

/// Two trees that each excluded one of a position's two moves merge into a position that keeps one move: the
/// store refuses the exclusion of the last one in the write's transaction.
#[test]
fn a_merge_never_excludes_every_move() {
    let line = Line::parse(Some("7k/8/8/8/8/8/8/K6r w - - 0 1"), "").unwrap();
    let pos = line.root().clone();
    let moves: Vec<UciMove> = pos.legal_moves().iter().map(|m| deeptree::notation::canonical(*m)).collect();
    assert_eq!(moves.len(), 2);
    let (a_dir, a) = new_store();
    a.set_mark(&pos, moves[0], MarkKind::Exclude, MarkSource::Cli).unwrap();
    drop(a);
    let (_b_dir, b) = new_store();
    b.set_mark(&pos, moves[1], MarkKind::Exclude, MarkSource::Cli).unwrap();
    deeptree::interop::merge::merge_store(&b, a_dir.path(), &StoreOptions::default(), |_, _| {}).unwrap();
    let record = node(&b, &pos).unwrap();
    let excluded = record.edges.iter().filter(|e| e.is_excluded()).count();
    let searchable = searchable_moves(&pos, Some(&record));
    println!("excluded {excluded} of 2; searchable_moves = {searchable:?}");
    assert!(excluded < 2, "every move of the position is excluded; searchmoves for it: {searchable:?} (= all)");
    assert_eq!(searchable, [moves[0]], "the move this tree excluded stays excluded; the other is kept");
}

/// The EPD export never names an excluded move as a position's `bm`.
#[test]
fn the_epd_export_never_names_an_excluded_move() {
    let (_dir, store) = new_store();
    grow(&store, 1);
    let start = Chess::default();
    let best = tree_best(&store, &start).unwrap();
    let child = play(&start, &best);
    let reply = node(&store, &child).unwrap().eval.unwrap().best.unwrap();
    store.set_mark(&child, reply, MarkKind::Exclude, MarkSource::Cli).unwrap();
    let san = deeptree::search::show::san_of(&child, &reply);
    let mut out = Vec::new();
    let view = store.read().unwrap();
    deeptree::interop::epd::export_epd(&view, &deeptree::interop::walk::Scope::All, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let epd = shakmaty::fen::Epd::from_position(&child, shakmaty::EnPassantMode::Legal).to_string();
    // The position has no evaluation but the excluded line's: it is left out, or written without that move.
    if let Some(line) = text.lines().find(|l| l.starts_with(&epd)) {
        assert!(!line.contains(&format!(" bm {san};")), "the excluded {san} is exported as the best move: {line}");
    }
    assert!(!text.is_empty());
}

/// After a mark the cached idea values of the marked position and its ancestors agree with a fresh computation.
#[test]
fn cached_values_follow_a_mark() {
    let (_dir, store) = new_store();
    grow(&store, 3);
    let start = Chess::default();
    let best = tree_best(&store, &start).unwrap();
    let child = play(&start, &best);
    let view = store.read().unwrap();
    let reply = tree::view(&view, &child, &[]).unwrap().unwrap().candidates[0].uci;
    drop(view);
    let before = node(&store, &start).unwrap().idea;
    store.set_mark(&child, reply, MarkKind::Exclude, MarkSource::Cli).unwrap();
    let view = store.read().unwrap();
    let graph = StoreGraph::new(&view);
    for pos in [&child, &start] {
        let key = PositionKey::of(pos);
        let cached = view.node(key).unwrap().unwrap().idea;
        let fresh = deeptree::values::idea::idea_brute(&graph, key);
        println!("{key}: cached {cached:?} fresh {fresh:?}");
        assert_eq!(cached, fresh);
    }
    println!("root idea before {before:?}");
}

/// The real Stockfish: the split's spine stops before a move the analyst excluded below the root: nothing after it
/// is stored, and the marked position keeps no evaluation of the excluded line.
#[test]
fn the_spine_stops_before_a_move_excluded_below_the_root() {
    use deeptree::engine::{EngineConfig, EnginePool, Limit};
    let stop = std::sync::atomic::AtomicBool::new(false);
    let spine = |store: &Store| {
        let pool = EnginePool::start(vec![EngineConfig::new(common::stockfish().to_str().unwrap())]).unwrap();
        deeptree::search::split::direct_first(&pool, store, &Line::start_position(), Limit::Depth(14), 6, &stop)
            .unwrap()
    };
    let start = Chess::default();
    let (_plain_dir, plain) = new_store();
    let first = spine(&plain);
    let best: UciMove = first.best.parse().unwrap();
    let child = play(&start, &best);
    let reply = node(&plain, &child).unwrap().eval.unwrap().best.unwrap();
    println!("spine: {first:?}; reply {reply}");

    let (_dir, store) = new_store();
    store.set_mark(&child, reply, MarkKind::Exclude, MarkSource::Cli).unwrap();
    let second = spine(&store);
    println!("spine with {reply} excluded after {best}: {second:?}");
    let below = node(&store, &play(&child, &reply));
    let at_child = node(&store, &child).unwrap();
    println!("child's eval after the split: {:?}", at_child.eval);
    println!("position after the excluded move stored: {:?}", below.as_ref().map(|n| n.eval.clone()));
    assert!(below.is_none(), "the spine stored the position after the excluded move {reply}");
}

/// A mark submitted as a deferred (bulk) write is written whole, its edge with its entry.
#[test]
fn a_deferred_mark_is_written_whole() {
    use deeptree::store::marks::MarkChange;
    let (_dir, store) = new_store();
    grow(&store, 1);
    let start = Chess::default();
    let f3: UciMove = "f2f3".parse().unwrap();
    // A mark as merge_marks builds it, but sent as a bulk write (as BatchWriter sends everything).
    let other = {
        let (_d, s) = new_store();
        s.set_mark(&start, f3, MarkKind::Exclude, MarkSource::Cli).unwrap();
        s.read().unwrap().marks().unwrap().remove(0)
    };
    let change = Change::Mark(MarkChange {
        key: PositionKey::of(&start),
        position: PackedPosition::of(&start),
        uci: f3,
        child: PositionKey::of(&play(&start, &f3)),
        mark: Some(other),
    });
    store.writer().submit_deferred(vec![change]).wait().unwrap();
    store.writer().settle().wait().unwrap();
    let marks = store.read().unwrap().marks().unwrap();
    let edge = node(&store, &start).unwrap().edge(&f3).cloned();
    println!("marks: {}; edge: {edge:?}", marks.len());
    assert!(edge.is_some_and(|e| e.is_excluded()), "the meta entry says excluded, the edge does not");
}

/// The real Stockfish: the direct relay's search of a position with an excluded move (every other move) is stored
/// as the position's evaluation, as a search of a position without marks is.
#[test]
fn the_relay_stores_its_search_of_a_marked_position() {
    let run = |exclude: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("tree");
        let mut uci = common::session(&db, &common::stockfish().display().to_string(), &[]);
        uci.send("position startpos");
        if let Some(m) = exclude {
            uci.send(&format!("setoption name MarkExclude value {m}"));
            uci.until("info string", Duration::from_secs(10));
            uci.send("position startpos");
        }
        let (best, _) = uci.best("go depth 10");
        uci.send("quit");
        std::thread::sleep(Duration::from_millis(500));
        let store = Store::open_read_only(&db, &StoreOptions::default()).unwrap();
        let eval = node(&store, &Chess::default()).and_then(|n| n.eval);
        (best, eval.map(|e| e.depth))
    };
    let plain = run(None);
    let marked = run(Some("h2h4"));
    println!("without a mark: {plain:?}; with h2h4 excluded: {marked:?}");
    assert_eq!(marked.1, plain.1, "the relayed search was stored without the mark, not with it");
}

/// Lifting a mark that made a placeholder edge removes the edge and its parent link: `check` finds nothing, and
/// `stats` counts no edge.
#[test]
fn lifting_a_placeholder_mark_removes_its_parent_link() {
    let (_dir, store) = new_store();
    let start = Chess::default();
    let e4: UciMove = "e2e4".parse().unwrap();
    store.set_mark(&start, e4, MarkKind::Exclude, MarkSource::Cli).unwrap();
    store.lift_mark(&start, e4).unwrap();
    println!("record: {:?}", node(&store, &start).map(|n| n.edges));
    println!("stats: {:?}", store.stats().unwrap());
    let report = store.check().unwrap();
    println!(
        "check: links {} stray {} missing {} damaged {:?}",
        report.links, report.links_stray, report.links_missing, report.damaged
    );
    assert!(report.is_clean(), "check finds the store damaged after a mark and its lift");
}

/// A move excluded before its position was searched gets a placeholder edge; the position's searches then bound
/// the other moves without it. Lifting the mark removes the placeholder, and the move is searched again.
#[test]
fn a_lifted_placeholder_marks_move_is_searched_again() {
    let start = Chess::default();
    let (_plain_dir, plain) = new_store();
    grow(&plain, 2);
    let best = tree_best(&plain, &start).unwrap();

    let (_dir, store) = new_store();
    store.set_mark(&start, best, MarkKind::Exclude, MarkSource::Cli).unwrap();
    grow(&store, 2);
    store.lift_mark(&start, best).unwrap();
    let record = node(&store, &start).unwrap();
    println!("after the lift: edge {:?}, rest {:?}", record.edge(&best), record.rest);
    let jobs = grow(&store, 4);
    let asked = jobs.iter().any(|j| {
        PositionKey::of(&j.position) == PositionKey::of(&start)
            && (j.searchmoves.is_empty() || j.searchmoves.contains(&best))
    });
    let record = node(&store, &start).unwrap();
    let view = store.read().unwrap();
    let answer = tree::view(&view, &start, &[]).unwrap().unwrap().candidates[0].uci;
    println!(
        "plain tree's best {best}; asked again: {asked}; edge now {:?}; the tree's answer now {answer}",
        record.edge(&best)
    );
    assert!(record.edge(&best).is_some_and(|e| e.is_valued()), "{best} was never searched after its mark was lifted");
}

fn grow_with(store: &Store, depth: u8, distance: i32) -> Vec<Job> {
    let evaluator = Recording::new(1, 7);
    let options = AnalysisOptions { look_ahead: None, ..AnalysisOptions::default() };
    let params = Params::new(10, distance).with_max_depth(depth);
    let mut analysis = Analysis::with_options(store, evaluator, params, options);
    analysis.run(&Line::start_position(), |_| {}).unwrap();
    std::mem::take(&mut analysis.evaluator_mut().jobs)
}

/// The same, the move being the engine's best at the root (its evaluation's best move), move distance 5.
#[test]
fn a_lifted_placeholder_marks_best_move_is_searched_again() {
    let start = Chess::default();
    let (_plain_dir, plain) = new_store();
    grow_with(&plain, 1, 5);
    let best = node(&plain, &start).unwrap().eval.unwrap().best.unwrap();
    let best_score = node(&plain, &start).unwrap().edge(&best).unwrap().score;

    let (_dir, store) = new_store();
    store.set_mark(&start, best, MarkKind::Exclude, MarkSource::Cli).unwrap();
    grow_with(&store, 3, 5);
    store.lift_mark(&start, best).unwrap();
    let record = node(&store, &start).unwrap();
    println!(
        "engine's best {best} ({best_score}); after the lift: edge {:?}, rest {:?}, eval {:?}",
        record.edge(&best),
        record.rest,
        record.eval
    );
    let jobs = grow_with(&store, 5, 5);
    let asked = jobs.iter().any(|j| {
        PositionKey::of(&j.position) == PositionKey::of(&start)
            && (j.searchmoves.is_empty() || j.searchmoves.contains(&best))
    });
    let record = node(&store, &start).unwrap();
    println!("asked again: {asked} ({} jobs); edge now {:?}; eval {:?}", jobs.len(), record.edge(&best), record.eval);
    assert!(record.edge(&best).is_some_and(|e| e.is_valued()), "{best} was never searched after its mark was lifted");
}
