//! The deep-analysis search: scripted evaluations for exact checks, the real Stockfish for the repetition example.

mod common;

use common::Recording;
use std::{collections::HashSet, process::Command, time::Duration};

use deeptree::{
    game::Line,
    search::{
        analysis::{Analysis, AnalysisOptions, Params, Report, Trace, move_distance_at},
        evaluator::{Answer, EvalError, Evaluator, Job, ScriptedEvaluator},
        show,
    },
    store::{Store, StoreOptions, key::PositionKey},
};
use serde_json::Value;
use shakmaty::Color;

fn params(max_depth: u8) -> Params {
    Params::new(10, 20).with_max_depth(max_depth)
}

fn run_scripted(store: &Store, workers: usize, seed: u64, max_depth: u8, moves: &str) -> (u64, Vec<Job>) {
    let (report, jobs) = run_scripted_report(store, workers, seed, max_depth, moves);
    (report.evaluations, jobs)
}

fn run_scripted_report(store: &Store, workers: usize, seed: u64, max_depth: u8, moves: &str) -> (Report, Vec<Job>) {
    let evaluator = Recording::new(workers, seed);
    let mut analysis = Analysis::new(store, evaluator, params(max_depth));
    let report = analysis.run(&Line::parse(None, moves).unwrap(), |_| {}).unwrap();
    assert_eq!(report.settled_depth, Some(max_depth));
    assert_eq!(
        report.evaluations + report.abandoned + report.aborted,
        analysis.evaluator().jobs.len() as u64,
        "the report counts every search, answered, abandoned or aborted"
    );
    (report, std::mem::take(&mut analysis.evaluator_mut().jobs))
}

fn tree_json(store: &Store, depth: u8) -> String {
    let view = store.read().unwrap();
    serde_json::to_string(&show::tree(&view, &shakmaty::Chess::default(), &[], depth).unwrap()).unwrap()
}

#[test]
fn move_distance_halves_after_ply_one() {
    let distances: Vec<i32> = (0..8).map(|ply| move_distance_at(20, ply)).collect();
    assert_eq!(distances, vec![20, 20, 10, 5, 2, 1, 0, 0]);
}

#[test]
fn the_settled_tree_does_not_depend_on_workers_or_answer_order() {
    let one = tempfile::tempdir().unwrap();
    let store_one = Store::open(one.path(), &StoreOptions::default()).unwrap();
    let (serial, _) = run_scripted_report(&store_one, 1, 1, 3, "");
    assert!(serial.stored > 20, "a depth-3 tree takes many searches ({})", serial.stored);
    assert_eq!(serial.ahead, 0, "one engine runs nothing ahead of its turn");
    assert_eq!(serial.evaluations, serial.stored);
    let expected = tree_json(&store_one, 6);
    for (workers, seed) in [(4, 99), (32, 7)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let (report, _) = run_scripted_report(&store, workers, seed, 3, "");
        // The engines left free by a pass ran searches ahead of their turn, and passes took some of them.
        assert!(report.ahead > 0 && report.ahead_used > 0, "{workers} workers: {report:?}");
        assert_eq!(
            report.evaluations + report.abandoned + report.aborted,
            report.stored + report.ahead - report.ahead_used,
            "{workers} workers: every search was stored, ran ahead, or both"
        );
        // What is stored, and so every settled best move and value, is the one-engine run's.
        assert_eq!(report.stored, serial.stored, "{workers} workers");
        assert_eq!(tree_json(&store, 6), expected, "{workers} workers");
        let per_depth = |r: &Report| r.iterations.iter().map(|i| (i.software_depth, i.evaluations)).collect::<Vec<_>>();
        assert_eq!(per_depth(&report), per_depth(&serial), "{workers} workers");
    }
}

#[test]
fn nothing_is_searched_twice_and_a_rerun_searches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let (first, jobs) = run_scripted(&store, 2, 5, 2, "");
    assert!(first > 0);
    let distinct: HashSet<(PositionKey, Vec<String>)> = jobs
        .iter()
        .map(|j| (PositionKey::of(&j.position), j.searchmoves.iter().map(|m| m.to_string()).collect()))
        .collect();
    assert_eq!(distinct.len(), jobs.len(), "every search is asked once");

    let (again, _) = run_scripted(&store, 2, 6, 2, "");
    assert_eq!(again, 0, "the same analysis again performs no evaluation");

    // Deeper: only positions without an evaluation are evaluated.
    let evaluated_before: HashSet<PositionKey> = {
        let view = store.read().unwrap();
        view.nodes().unwrap().filter_map(|n| n.ok()).filter(|(_, n)| n.eval.is_some()).map(|(k, _)| k).collect()
    };
    let (deeper, jobs) = run_scripted(&store, 2, 7, 3, "");
    assert!(deeper > 0);
    for job in jobs.iter().filter(|j| j.searchmoves.is_empty()) {
        assert!(!evaluated_before.contains(&PositionKey::of(&job.position)), "evaluated twice");
    }
    let searched_before: HashSet<(PositionKey, Vec<String>)> = distinct;
    for job in &jobs {
        let id = (PositionKey::of(&job.position), job.searchmoves.iter().map(|m| m.to_string()).collect());
        assert!(!searched_before.contains(&id), "a search was repeated");
    }
}

#[test]
fn a_settled_node_has_searched_every_move_that_could_be_within_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    run_scripted(&store, 1, 3, 1, "");
    let view = store.read().unwrap();
    let start = shakmaty::Chess::default();
    let root = view.node(PositionKey::of(&start)).unwrap().unwrap();
    let shown = show::tree(&view, &start, &[], 1).unwrap();
    let best_alpha = shown.moves.iter().map(|m| m.alpha).max().unwrap();
    let all_searched = root.edges.len() == 20;
    let rest = root.rest.expect("the root's unsearched moves are bounded").score;
    assert!(
        all_searched || rest < best_alpha.minus_cp(20),
        "settled, yet unsearched moves bounded by {rest} could be within 20 cp of {best_alpha}"
    );
}

#[test]
fn a_line_already_searched_at_the_engine_depth_is_not_searched_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    run_scripted(&store, 2, 4, 1, "");
    // The line: the start position's best move and the best reply to it, both stored by the walk at depth 10.
    let start = shakmaty::Chess::default();
    let (line, stored) = {
        let view = store.read().unwrap();
        let shown = show::tree(&view, &start, &[], 2).unwrap();
        let first = &shown.moves[0];
        let reply = &first.child.as_ref().expect("the best move's position was evaluated").moves[0];
        let line = Line::parse(None, &format!("{} {}", first.uci, reply.uci)).unwrap();
        let stored: Vec<_> = line
            .positions
            .iter()
            .zip(&line.moves)
            .map(|(pos, uci)| view.node(PositionKey::of(pos)).unwrap().unwrap().edge(uci).cloned().unwrap())
            .collect();
        (line, stored)
    };
    assert!(stored.iter().all(|e| e.depth >= 10 && !e.imported), "{stored:?}");

    let moves: Vec<String> = line.moves.iter().map(|m| m.to_string()).collect();
    let (evaluations, jobs) = run_scripted(&store, 2, 5, 0, &moves.join(" "));
    for (pos, uci) in line.positions.iter().zip(&line.moves) {
        assert!(
            !jobs.iter().any(|j| PositionKey::of(&j.position) == PositionKey::of(pos) && j.searchmoves == [*uci]),
            "line move {uci} searched again"
        );
    }
    assert_eq!(evaluations, jobs.len() as u64, "the report counts every search");
    let view = store.read().unwrap();
    for ((pos, uci), before) in line.positions.iter().zip(&line.moves).zip(&stored) {
        let after = view.node(PositionKey::of(pos)).unwrap().unwrap().edge(uci).cloned().unwrap();
        assert_eq!((after.score, after.depth, after.bound), (before.score, before.depth, before.bound));
        assert!(after.imported, "{uci} is marked as a move of a line");
    }
}

#[test]
fn a_trace_names_every_decision() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let trace_path = dir.path().join("trace.txt");
    let options = AnalysisOptions { trace: Trace::to_file(&trace_path).unwrap(), ..AnalysisOptions::default() };
    let mut analysis = Analysis::with_options(&store, ScriptedEvaluator::new(1, 1), params(2), options);
    analysis.run(&Line::parse(None, "").unwrap(), |_| {}).unwrap();
    drop(analysis);
    let trace = std::fs::read_to_string(&trace_path).unwrap();
    for word in ["evaluate ply=0", "alternatives ply=0", "admit ply=0", "refuse ply=", "settled depth 2"] {
        assert!(trace.contains(word), "trace lacks '{word}'");
    }
}

/// Runs a scripted analysis to software depth 5 from the start position of a store seeded with the line
/// 1. Nf3 Nf6 2. e4 Ng8 and its moves, the "no progress" rule on or off; returns the trace.
fn no_progress_trace(no_progress: bool) -> String {
    use deeptree::{
        score::{Bound, Score},
        store::{
            Change,
            node::{Edge, Eval, Node, PackedPosition, RestBound},
        },
    };
    use shakmaty::{Chess, Position, uci::UciMove};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    // Every position of the line has every move that matters at score 0, the rest closed far below: the walk
    // admits them all. After 1. Nf3 Nf6 2. e4 Ng8, 3. Ng1 reaches the position of 1. e4: White lost two tempi.
    let line: [(&str, &[&str]); 5] = [
        ("", &["g1f3", "e2e4"]),
        ("g1f3", &["g8f6"]),
        ("g8f6", &["e2e4"]),
        ("e2e4", &["f6g8"]),
        ("f6g8", &["f3g1", "d2d4"]),
    ];
    let mut pos = Chess::default();
    let mut changes = Vec::new();
    for (played, moves) in line {
        if !played.is_empty() {
            let uci: UciMove = played.parse().unwrap();
            pos.play_unchecked(uci.to_move(&pos).unwrap());
        }
        let mut node = Node::new(PackedPosition::of(&pos));
        for uci in moves {
            node.edges.push(Edge::new(uci.parse().unwrap(), Score::cp(0), Bound::Exact, 10));
        }
        node.eval = Some(Eval {
            score: Score::cp(0),
            bound: Bound::Exact,
            depth: 10,
            best: node.edges.first().map(|e| e.uci),
            nodes: 0,
            engine: None,
        });
        node.rest = Some(RestBound { score: Score::cp(-900), depth: 10 });
        changes.push(Change::merge(&pos, node).unwrap());
    }
    store.writer().submit(changes).wait().unwrap();
    let trace_path = dir.path().join("trace.txt");
    let options = AnalysisOptions { trace: Trace::to_file(&trace_path).unwrap(), ..AnalysisOptions::default() };
    let params = Params { no_progress, ..params(5) };
    let mut analysis = Analysis::with_options(&store, ScriptedEvaluator::new(1, 3), params, options);
    let report = analysis.run(&Line::parse(None, "").unwrap(), |_| {}).unwrap();
    assert_eq!(report.settled_depth, Some(5));
    drop(analysis);
    std::fs::read_to_string(&trace_path).unwrap()
}

#[test]
fn no_progress_refuses_a_move_that_loses_a_tempo_and_says_so_in_the_trace() {
    let on = no_progress_trace(true);
    let refused: Vec<&str> = on.lines().filter(|l| l.starts_with("no-progress")).collect();
    assert!(
        refused.iter().any(|l| l.starts_with("no-progress ply=4") && l.contains(" Ng1: ") && l.contains("at ply 0")),
        "3. Ng1 is refused, naming the start position: {refused:?}"
    );
    assert!(!on.lines().any(|l| l.starts_with("admit ply=4") && l.contains(" Ng1: ")), "3. Ng1 is not walked");
    let off = no_progress_trace(false);
    assert!(!off.contains("no-progress"), "the rule is off by default");
    assert!(off.lines().any(|l| l.starts_with("admit ply=4") && l.contains(" Ng1: ")), "without it 3. Ng1 is walked");
}

/// Stockfish found as deeptree finds it (PATH, then /usr/games).
fn stockfish() -> String {
    deeptree::engine::resolve_program("stockfish").display().to_string()
}

fn deeptree(db: &std::path::Path, args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree")).arg("--db").arg(db).args(args).output().unwrap();
    assert!(output.status.success(), "deeptree {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap()
}

fn find_move<'a>(node: &'a Value, uci: &str) -> &'a Value {
    node["moves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["uci"] == uci)
        .unwrap_or_else(|| panic!("no move {uci} in {node}"))
}

#[test]
fn repetition_example_with_stockfish() {
    let dir = tempfile::tempdir().unwrap();
    let engine = stockfish();
    let analyze = ["analyze", "--moves", "g1f3 g8f6 f3g1 f6g8", "--engine-depth", "8", "--max-depth", "1"];
    let trace = dir.path().join("trace.txt");
    let trace_arg = trace.to_str().unwrap();
    let report = deeptree(
        dir.path(),
        &[&analyze[..], &["--engine", &engine, "--workers", "2", "--json", "--trace", trace_arg]].concat(),
    );
    let trace = std::fs::read_to_string(&trace).unwrap();
    assert!(trace.contains("line move Nf3"), "the line is stored as edges");
    assert!(trace.contains("closed ply=0"), "the root's search for alternatives closed at the window");
    assert!(report["evaluations"].as_u64().unwrap() > 0);
    assert_eq!(report["settled_depth"], 1);

    let tree = deeptree(dir.path(), &["show", "--json", "--depth", "4"]);
    let ng8 =
        find_move(&find_move(&find_move(&find_move(&tree, "g1f3")["child"], "g8f6")["child"], "f3g1")["child"], "f6g8");
    assert_eq!(ng8["san"], "Ng8");
    assert_eq!(ng8["alpha"], serde_json::json!({"cp": 0}), "2...Ng8 repeats the start position: a draw");
    assert_eq!(ng8["idea"], ng8["engine"], "its idea score is its engine score");
    assert!(ng8["idea"]["cp"].as_i64().is_some_and(|cp| (-150..=50).contains(&cp)), "{}", ng8["idea"]);
    assert!(ng8["child"].is_null());

    // Seen from the root after 2. Ng1, with its history, 2...Ng8 is a draw too.
    let after_ng1 = deeptree(dir.path(), &["show", "--json", "--moves", "g1f3 g8f6 f3g1", "--depth", "1"]);
    assert_eq!(find_move(&after_ng1, "f6g8")["alpha"], serde_json::json!({"cp": 0}));

    // The same command again performs no evaluation.
    let again = deeptree(dir.path(), &[&analyze[..], &["--engine", &engine, "--workers", "2", "--json"]].concat());
    assert_eq!(again["evaluations"], 0);
}

#[test]
fn a_time_limit_stops_cleanly_keeping_what_was_stored() {
    let dir = tempfile::tempdir().unwrap();
    let engine = stockfish();
    let report = deeptree(
        dir.path(),
        &["analyze", "--engine", &engine, "--engine-depth", "10", "--time", "2", "--workers", "2", "--json"],
    );
    assert_eq!(report["stopped"], true);
    let positions = report["positions"].as_u64().unwrap();
    assert!(positions > 0);
    let stats = deeptree(dir.path(), &["stats", "--json"]);
    assert_eq!(stats["positions"].as_u64().unwrap(), positions);
}

#[test]
fn stored_idea_values_equal_a_from_scratch_recomputation() {
    use deeptree::values::{
        graph::{Graph, MemGraph},
        idea::{idea_brute, recompute_all},
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    // The knight shuffle makes a cycle through the start position.
    run_scripted(&store, 3, 11, 3, "g1f3 g8f6 f3g1 f6g8");
    let (graph, keys) = MemGraph::of_view(&store.read().unwrap()).unwrap();
    assert!(keys.len() > 10, "{} positions", keys.len());
    let mut scratch = graph.clone();
    recompute_all(&mut scratch, &keys);
    for key in &keys {
        let stored = graph.node(*key).unwrap();
        assert_eq!(stored.idea, scratch.node(*key).unwrap().idea, "idea of {key}");
        assert_eq!(stored.cyclic, scratch.node(*key).unwrap().cyclic, "cyclic flag of {key}");
    }
    let start = PositionKey::of(&shakmaty::Chess::default());
    assert!(graph.node(start).unwrap().cyclic, "the shuffle line is a cycle");
    assert_eq!(graph.node(start).unwrap().idea, idea_brute(&graph, start));
}

/// Ctrl-C, and the signals a `kill`, a closed terminal or a service stop send, stop an analysis cleanly: what was
/// answered is stored, and the run reports it.
#[test]
fn ctrl_c_or_a_termination_signal_stops_an_analysis_cleanly() {
    for signal in ["-INT", "-TERM", "-HUP"] {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(dir.path())
            .args(["analyze", "--engine", &stockfish(), "--engine-depth", "10", "--max-depth", "60", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait for the first settled depth (a row on stderr with --json): the analysis is under way.
        let stderr = child.stderr.take().unwrap();
        let mut rows = std::io::BufRead::lines(std::io::BufReader::new(stderr));
        assert!(rows.any(|row| row.is_ok_and(|r| r.trim_start().starts_with('1'))), "depth 1 settles");
        std::thread::spawn(move || rows.for_each(drop));
        std::thread::sleep(Duration::from_millis(300));
        let killed = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{signal}: exits normally");
        let stdout = String::from_utf8(output.stdout).unwrap();
        let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(report["stopped"], true, "{signal}");
        let stats = deeptree(dir.path(), &["stats", "--json"]);
        assert_eq!(stats["positions"], report["positions"], "{signal}: everything answered was stored");
    }
}

/// An evaluator whose every search fails, as a crashed engine's would.
struct Failing;

impl Evaluator for Failing {
    fn workers(&self) -> usize {
        1
    }
    fn submit(&mut self, id: u64, _job: Job) -> Result<(), EvalError> {
        FAILED.with(|f| f.borrow_mut().push(id));
        Ok(())
    }
    fn next(&mut self, _timeout: Duration) -> Option<(u64, Result<Answer, EvalError>)> {
        FAILED.with(|f| f.borrow_mut().pop()).map(|id| (id, Err(EvalError::Engine("engine crashed".to_owned()))))
    }
    fn cancel_all(&mut self) {}
    fn identity(&self) -> String {
        "failing".to_owned()
    }
}

thread_local! {
    static FAILED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An evaluator whose every search is cancelled before its answer (no engine at fault).
struct Cancelling(Vec<u64>);

impl Evaluator for Cancelling {
    fn workers(&self) -> usize {
        1
    }
    fn submit(&mut self, id: u64, _job: Job) -> Result<(), EvalError> {
        self.0.push(id);
        Ok(())
    }
    fn next(&mut self, _timeout: Duration) -> Option<(u64, Result<Answer, EvalError>)> {
        self.0.pop().map(|id| (id, Err(EvalError::Cancelled)))
    }
    fn cancel_all(&mut self) {}
    fn identity(&self) -> String {
        "cancelling".to_owned()
    }
}

/// The kind of a search's failure reaches the search: a cancelled search settles nothing, as a failed one, but is no
/// engine failure.
#[test]
fn a_cancelled_search_is_no_failure() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let mut analysis = Analysis::new(&store, Cancelling(Vec::new()), params(5));
    let report = analysis.run(&Line::parse(None, "").unwrap(), |_| {}).unwrap();
    assert_eq!((report.settled_depth, report.failed), (None, 0), "{report:?}");
    let mut analysis = Analysis::new(&store, Failing, params(5));
    let report = analysis.run(&Line::parse(None, "").unwrap(), |_| {}).unwrap();
    assert_eq!(report.settled_depth, None);
    assert!(report.failed > 0, "{report:?}");
}

#[test]
fn failed_searches_never_pass_for_a_settled_depth() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let mut analysis = Analysis::new(&store, Failing, params(5));
    let report = analysis.run(&Line::parse(None, "").unwrap(), |_| {}).unwrap();
    assert_eq!(report.settled_depth, None);
    assert!(report.stopped && report.failed > 0);
    let view = store.read().unwrap();
    let root = view.node(PositionKey::of(&shakmaty::Chess::default())).unwrap();
    assert!(root.is_none_or(|n| n.settled_depth.is_none()), "no settled mark is stored");
}

/// A scripted evaluator that can deliver an old answer again, under its old id, before anything else: the answer of
/// a search stopped at the end of one analysis, arriving during the next (the UCI face runs one after another on the
/// same engines).
struct LateAnswers {
    inner: ScriptedEvaluator,
    last: Option<(u64, Result<Answer, EvalError>)>,
    replay: Vec<(u64, Result<Answer, EvalError>)>,
    /// The highest id submitted: the old answer comes once a search of the same id or a later one is running, so
    /// that it lands on a live search if ids repeat.
    highest: u64,
}

impl Evaluator for LateAnswers {
    fn workers(&self) -> usize {
        self.inner.workers()
    }
    fn submit(&mut self, id: u64, job: Job) -> Result<(), EvalError> {
        self.highest = self.highest.max(id);
        self.inner.submit(id, job)
    }
    fn next(&mut self, timeout: Duration) -> Option<(u64, Result<Answer, EvalError>)> {
        if self.replay.last().is_some_and(|late| late.0 <= self.highest) {
            return self.replay.pop();
        }
        let answer = self.inner.next(timeout)?;
        self.last = Some(answer.clone());
        Some(answer)
    }
    fn cancel_all(&mut self) {
        self.inner.cancel_all()
    }
    fn identity(&self) -> String {
        self.inner.identity()
    }
}

#[test]
fn an_answer_arriving_after_its_analysis_ended_is_not_taken_by_the_next() {
    let mut evaluator = LateAnswers { inner: ScriptedEvaluator::new(1, 3), last: None, replay: Vec::new(), highest: 0 };
    let first = tempfile::tempdir().unwrap();
    let store = Store::open(first.path(), &StoreOptions::default()).unwrap();
    Analysis::new(&store, &mut evaluator, params(1)).run(&Line::start_position(), |_| {}).unwrap();
    // The last answer of the first analysis (of another position) comes again, first thing in the second.
    let late = evaluator.last.clone().expect("the first analysis asked for searches");
    evaluator.replay = vec![late];
    evaluator.highest = 0;

    let second = tempfile::tempdir().unwrap();
    let store = Store::open(second.path(), &StoreOptions::default()).unwrap();
    let moves = "e2e4 e7e5";
    let report =
        Analysis::new(&store, &mut evaluator, params(2)).run(&Line::parse(None, moves).unwrap(), |_| {}).unwrap();
    assert!(evaluator.replay.is_empty(), "the late answer was delivered");
    assert_eq!(report.settled_depth, Some(2));
    assert_eq!(report.failed, 0, "no search of the second analysis failed");

    let clean = tempfile::tempdir().unwrap();
    let clean_store = Store::open(clean.path(), &StoreOptions::default()).unwrap();
    run_scripted(&clean_store, 1, 3, 2, moves);
    assert_eq!(tree_json(&store, 6), tree_json(&clean_store, 6), "the late answer was ignored");
}

/// A scripted evaluator whose answers come one at a time, oldest first, so that many searches are running while
/// each answer lands, as with real engines.
struct Paced {
    inner: ScriptedEvaluator,
    queue: std::collections::VecDeque<(u64, Result<Answer, EvalError>)>,
    jobs: u64,
    /// An answer just came: the next call that would only take what is already in gets nothing.
    just_answered: bool,
}

impl Evaluator for Paced {
    fn workers(&self) -> usize {
        self.inner.workers()
    }
    fn submit(&mut self, id: u64, job: Job) -> Result<(), EvalError> {
        self.jobs += 1;
        self.inner.submit(id, job)?;
        // The inner evaluator answers in a random order; take its answer now and keep the order of submission.
        while let Some(answer) = self.inner.next(Duration::ZERO) {
            self.queue.push_back(answer);
        }
        Ok(())
    }
    fn next(&mut self, timeout: Duration) -> Option<(u64, Result<Answer, EvalError>)> {
        if timeout.is_zero() && self.just_answered {
            self.just_answered = false;
            return None;
        }
        self.just_answered = true;
        self.queue.pop_front()
    }
    fn cancel(&mut self, id: u64) -> bool {
        let before = self.queue.len();
        self.queue.retain(|(queued, _)| *queued != id);
        self.queue.len() < before
    }
    fn cancel_all(&mut self) {
        self.queue.clear();
    }
    fn identity(&self) -> String {
        self.inner.identity()
    }
}

#[test]
fn searches_ahead_that_the_tree_no_longer_leads_to_are_stopped_and_change_nothing() {
    let serial_dir = tempfile::tempdir().unwrap();
    let serial_store = Store::open(serial_dir.path(), &StoreOptions::default()).unwrap();
    let (serial, _) = run_scripted_report(&serial_store, 1, 1, 3, "");

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let paced =
        Paced { inner: ScriptedEvaluator::new(32, 5), queue: Default::default(), jobs: 0, just_answered: false };
    let mut analysis = Analysis::new(&store, paced, params(3));
    let report = analysis.run(&Line::start_position(), |_| {}).unwrap();
    assert_eq!(report.settled_depth, Some(3));
    assert!(report.aborted > 0, "some searches ahead were stopped: {report:?}");
    assert_eq!(report.evaluations + report.abandoned + report.aborted, analysis.evaluator().jobs, "{report:?}");
    assert_eq!(report.stored, serial.stored);
    assert_eq!(tree_json(&store, 6), tree_json(&serial_store, 6), "stopping searches changed the tree");
}

/// Every evaluation an analysis stores records the engine that gave it, by its number in the store's list; `merge`
/// renumbers another store's engines to this store's numbers for the same engines; `stats` counts per engine.
#[test]
fn evaluations_record_their_engine_and_merge_renumbers_engines() {
    let first = tempfile::tempdir().unwrap();
    let store = Store::open(first.path(), &StoreOptions::default()).unwrap();
    run_scripted(&store, 2, 1, 2, "");
    assert_eq!(store.engines().unwrap(), vec!["scripted".to_owned()]);
    let view = store.read().unwrap();
    let mut recorded = 0;
    for item in view.nodes().unwrap() {
        let (_, node) = item.unwrap();
        if let Some(eval) = &node.eval
            && eval.nodes > 0
        {
            assert_eq!(eval.engine, Some(0), "{node:?}");
            recorded += 1;
        }
        for edge in &node.edges {
            assert_eq!(edge.engine, Some(0), "{node:?}");
        }
    }
    assert!(recorded > 10, "{recorded} evaluations");
    drop(view);

    // A second store knows another engine first: "scripted" is its engine 1.
    let second = tempfile::tempdir().unwrap();
    let other = Store::open(second.path(), &StoreOptions::default()).unwrap();
    assert_eq!(other.engine_numbers(&["other".to_owned(), "scripted".to_owned()]).unwrap(), vec![Some(0), Some(1)]);
    drop(other);
    drop(store);
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(second.path())
        .args(["merge"])
        .arg(first.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stats = deeptree(second.path(), &["stats", "--json"]);
    let engines = stats["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2, "{stats}");
    assert_eq!((engines[0]["name"].as_str(), engines[0]["evaluations"].as_u64()), (Some("other"), Some(0)));
    assert_eq!(engines[1]["name"], "scripted");
    assert!(engines[1]["evaluations"].as_u64().is_some_and(|n| n > 10), "{stats}");
    assert_eq!(stats["evaluations_without_engine"], 0, "{stats}");
}

/// One ranking of moves: the tree's answer and its `info` lines (`search::tree`) list a position's moves in the order
/// `show` (and every export) does: valued before unvalued, then alpha, then idea. Checked at two positions of a
/// scripted tree, each with a move nothing has valued among its moves (an imported edge to a position never
/// evaluated, as a game stores it).
#[test]
fn the_tree_view_ranks_moves_as_show_does() {
    use deeptree::{
        search::tree,
        store::{
            Change,
            node::{Edge, Node, PackedPosition},
        },
    };
    use shakmaty::Position;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    run_scripted(&store, 1, 11, 2, "");
    let lines = [Line::parse(None, "e2e4").unwrap(), Line::parse(None, "d2d4").unwrap()];
    let mut unvalued = Vec::new();
    for line in &lines {
        let view = store.read().unwrap();
        let root = line.root();
        // A move into a position the tree has never evaluated.
        let m = root
            .legal_moves()
            .iter()
            .map(|m| deeptree::notation::canonical(*m))
            .find(|m| {
                let child = m.to_move(root).map(|m| root.clone().play(m).unwrap()).unwrap();
                view.node(PositionKey::of(&child)).unwrap().is_none_or(|n| n.eval.is_none())
            })
            .expect("a move the scripted tree never followed");
        drop(view);
        let mut node = Node::new(PackedPosition::of(root));
        node.edges.push(Edge::placeholder(m));
        store.writer().submit(vec![Change::merge(root, node).unwrap()]).wait().unwrap();
        unvalued.push(m.to_string());
    }
    let view = store.read().unwrap();
    for (line, unvalued) in lines.iter().zip(unvalued) {
        let history = line.history_keys();
        let shown: Vec<String> =
            show::tree(&view, line.root(), &history, 1).unwrap().moves.iter().map(|m| m.uci.clone()).collect();
        let ranked: Vec<String> = tree::view(&view, line.root(), &history)
            .unwrap()
            .expect("the root is evaluated")
            .candidates
            .iter()
            .map(|c| c.uci.to_string())
            .collect();
        assert!(shown.len() > 2, "{shown:?}");
        assert_eq!(ranked, shown, "after {:?}", line.moves);
        assert_eq!(shown.last(), Some(&unvalued), "the unvalued move comes last: {shown:?}");
    }
}

/// `analyze --nodes N` stops once the engines' reported nodes reach N: the searches answered before the last one
/// reported less than the budget, and `--json` says by how much the run went past it.
#[test]
fn a_node_budget_stops_the_run_and_reports_its_overshoot() {
    let dir = tempfile::tempdir().unwrap();
    let engine = stockfish();
    let budget = 300_000u64;
    let args = ["analyze", "--engine", &engine, "--engine-depth", "8", "--workers", "1", "--json"];
    let report = deeptree(dir.path(), &[&args[..], &["--nodes", &budget.to_string()]].concat());
    assert_eq!(report["stopped"], true, "{report}");
    assert_eq!(report["node_budget"], budget);
    let nodes = report["engine_nodes"].as_u64().unwrap();
    let over = report["node_overshoot"].as_u64().unwrap();
    assert!(nodes >= budget && nodes - over == budget, "{report}");
    let evaluations = report["evaluations"].as_u64().unwrap();
    assert!(evaluations > 3, "{report}");
    // One engine: only the last answer can go past the budget, and it is one search at depth 8 among many.
    assert!(over < nodes / 2, "{report}");
    // Without a budget the same run settles deeper (to the default depth 4).
    let open = deeptree(tempfile::tempdir().unwrap().path(), &[&args[..], &["--max-depth", "4"]].concat());
    assert!(open["engine_nodes"].as_u64().unwrap() > nodes, "{open}");
    assert_eq!(open["node_budget"], serde_json::Value::Null);
    // A budget of nothing is refused before anything starts.
    let refused = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(dir.path())
        .args(["analyze", "--nodes", "0"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--nodes 0"), "{refused:?}");
}

#[test]
fn a_time_budget_ends_a_tree_where_no_depth_needs_a_search() {
    // Fool's mate: White is mated, so no depth plans a search and each settles at once. The budget is checked
    // between depths all the same: a think in a lost position ends on time, not at the last depth.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let line = Line::parse(None, "f2f3 e7e5 g2g4 d8h4").unwrap();
    let budgeted = Params { time: Some(Duration::ZERO), ..params(250) };
    // The game's moves are not searched (as in a think inside a game, where the session stores them).
    let options = || AnalysisOptions { line_edges: false, ..AnalysisOptions::default() };
    let mut analysis = Analysis::with_options(&store, ScriptedEvaluator::new(1, 1), budgeted, options());
    let report = analysis.run(&line, |_| {}).unwrap();
    assert!(report.stopped, "{report:?}");
    assert_eq!(report.settled_depth, Some(0), "{report:?}");
    assert_eq!(report.evaluations, 0);
    // Without a budget the same root settles every depth, still without a search.
    let mut analysis = Analysis::with_options(&store, ScriptedEvaluator::new(1, 1), params(250), options());
    let report = analysis.run(&line, |_| {}).unwrap();
    assert!(!report.stopped, "{report:?}");
    assert_eq!(report.settled_depth, Some(250), "{report:?}");
    assert_eq!(report.evaluations, 0);
}

/// `analyze --split S`: the share S of the node budget goes to one direct search first, whose principal variation
/// the tree keeps at that search's depth; the rest grows the tree, which tests the moves the direct search rejected
/// at the engine depth; the direct search's nodes count in the run's.
#[test]
fn a_split_spends_its_share_on_a_direct_search_then_tests_the_rejected_moves() {
    let dir = tempfile::tempdir().unwrap();
    let engine = stockfish();
    let fen = "4rbk1/ppp2ppp/2qprn2/8/3QP3/1PN1R3/PBP2PPP/4R1K1 w - - 0 1";
    let budget = 600_000u64;
    let args = ["analyze", "--fen", fen, "--engine", &engine, "--engine-depth", "8", "--workers", "1", "--json"];
    let report = deeptree(dir.path(), &[&args[..], &["--nodes", &budget.to_string(), "--split", "0.5"]].concat());
    let split = &report["split"];
    let direct_nodes = split["nodes"].as_u64().unwrap();
    // Stockfish stops a `go nodes` search within a few thousand nodes of its limit.
    assert!((budget / 2..budget / 2 + 50_000).contains(&direct_nodes), "{report}");
    let direct_depth = split["depth"].as_u64().unwrap();
    assert!(direct_depth > 8, "{report}");
    assert!(split["stored"].as_u64().unwrap() >= 1, "{report}");
    // The run's nodes are the direct search's and the tree's, against the whole budget.
    assert_eq!(report["node_budget"], budget);
    let nodes = report["engine_nodes"].as_u64().unwrap();
    assert!(nodes > direct_nodes && nodes >= budget, "{report}");
    assert_eq!(nodes - report["node_overshoot"].as_u64().unwrap(), budget, "{report}");
    assert!(report["evaluations"].as_u64().unwrap() > 1, "{report}");
    // At the root: the direct search's move at its own depth, and the moves it rejected searched at the engine depth.
    let shown = deeptree(dir.path(), &["show", "--fen", fen, "--depth", "1", "--json"]);
    let best = find_move(&shown, split["best"].as_str().unwrap());
    assert_eq!(best["depth"], direct_depth, "{shown}");
    let tested = shown["moves"].as_array().unwrap().iter().filter(|m| m["depth"] == 8).count();
    assert!(tested >= 1, "no rejected move tested: {shown}");
    // A share outside (0, 1), or one without a budget to share, is refused before anything starts.
    for bad in [&["--split", "1.5", "--nodes", "1000"][..], &["--split", "0.5"][..]] {
        let refused =
            Command::new(env!("CARGO_BIN_EXE_deeptree")).arg("--db").arg(dir.path()).args(args).args(bad).output();
        let refused = refused.unwrap();
        assert!(!refused.status.success(), "{bad:?}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("--split"), "{refused:?}");
    }
}

/// Each side its own move distance: every window the walk opens or closes at White's positions is White's (here 0
/// cp: the best move alone), every one at Black's is Black's (200 cp at ply 1, halved below), as the trace says.
#[test]
fn each_side_searches_its_own_window() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
    let trace_path = dir.path().join("trace.txt");
    let options = AnalysisOptions { trace: Trace::to_file(&trace_path).unwrap(), ..AnalysisOptions::default() };
    let params = params(3).with_side_distances([Some(0), Some(200)]);
    let mut analysis = Analysis::with_options(&store, ScriptedEvaluator::new(1, 9), params, options);
    analysis.run(&Line::parse(None, "").unwrap(), |_| {}).unwrap();
    drop(analysis);
    let trace = std::fs::read_to_string(&trace_path).unwrap();
    let (mut white, mut black) = (0, 0);
    for line in trace.lines().filter(|l| l.starts_with("alternatives ") || l.starts_with("closed ")) {
        let ply: u8 = line.split("ply=").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().parse().unwrap();
        let distance: i32 =
            line.rsplit(" - ").next().and_then(|r| r.split_whitespace().next()).unwrap().parse().unwrap();
        // From the start position White moves at even plies, Black at odd ones.
        if ply.is_multiple_of(2) {
            assert_eq!(distance, 0, "White's window: {line}");
            white += 1;
        } else {
            assert_eq!(distance, move_distance_at(200, ply), "Black's window: {line}");
            black += 1;
        }
    }
    assert!(white > 0 && black > 0, "windows of both sides were traced:\n{trace}");
    // The other side's distance is the move distance where it is not set.
    let params = Params::new(10, 20).with_side_distances([None, Some(5)]);
    assert_eq!((params.move_distance_of(Color::White), params.move_distance_of(Color::Black)), (20, 5));
}
