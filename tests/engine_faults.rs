//! Engine faults, scripted with `deeptree-fake-engine`: each is handled, and none panics or yields a result.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use deeptree::{
    engine::{
        Engine, EngineConfig, EngineError, EnginePool, EnginePosition, EvalRequest, JobOutcome, JobResult, Limit,
        RestartPolicy, Timeouts,
    },
    score::{Bound, Score},
};
use shakmaty::{Chess, uci::UciMove};
use tempfile::TempDir;

const FAKE: &str = env!("CARGO_BIN_EXE_deeptree-fake-engine");
const HANDSHAKE: Duration = Duration::from_secs(1);
const SILENCE: Duration = Duration::from_millis(300);

/// A fake engine in `mode`, with short deadlines and back-off, writing its pids and commands into `dir`.
fn fake(mode: &str, dir: &TempDir) -> EngineConfig {
    let d = dir.path().display();
    EngineConfig::new(format!("'{FAKE}' --mode {mode} --state '{d}/state' --pid-file '{d}/pids' --log '{d}/log'"))
        .with_option("Hash", 32)
        .with_timeouts(Timeouts { handshake: HANDSHAKE, search_silence: SILENCE })
        .with_restart(RestartPolicy {
            first_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(100),
            fresh_attempts: 3,
        })
}

fn start_position() -> EnginePosition {
    EnginePosition::of(&Chess::default())
}

fn depth(d: u32) -> EvalRequest {
    EvalRequest::new(start_position(), Limit::Depth(d))
}

fn pids(dir: &TempDir) -> Vec<u32> {
    std::fs::read_to_string(dir.path().join("pids")).unwrap_or_default().lines().map(|l| l.parse().unwrap()).collect()
}

/// The process is gone and reaped (a zombie would still have a /proc entry).
fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

fn one_result(pool: &EnginePool) -> JobResult {
    pool.results().recv_timeout(Duration::from_secs(20)).expect("a result")
}

/// The first move of the fake's candidates (legal moves in UCI text order).
fn fakes_best() -> UciMove {
    "a2a3".parse().unwrap()
}

#[test]
fn normal_fake_is_evaluated_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::spawn(&fake("normal", &dir)).unwrap();
    assert_eq!(engine.identity().name, "deeptree fake engine");
    assert_eq!(engine.identity().options.len(), 6);
    let eval = engine.evaluate(&depth(4)).unwrap();
    assert_eq!(eval.best_move, fakes_best());
    assert_eq!((eval.score(), eval.bound(), eval.depth(), eval.line.seldepth), (Score::cp(20), Bound::Exact, 4, 6));
    let eval = engine.evaluate(&depth(2).with_multipv(3)).unwrap();
    let scores: Vec<_> = eval.lines().map(|l| l.score).collect();
    assert_eq!(scores, [Score::cp(20), Score::cp(13), Score::cp(6)]);
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(log.contains("setoption name Hash value 32"), "{log}");
    assert!(log.contains("setoption name Threads value 1"), "{log}");
    assert!(log.contains("setoption name MultiPV value 3"), "{log}");
}

#[test]
fn crash_is_retried_on_a_fresh_process_with_options_reapplied() {
    let dir = tempfile::tempdir().unwrap();
    let pool = EnginePool::start(vec![fake("crash-once", &dir)]).unwrap();
    pool.submit(5, depth(3)).unwrap();
    let result = one_result(&pool);
    assert_eq!(result.id, 5);
    let JobOutcome::Done(eval) = result.outcome else { panic!("{:?}", result.outcome) };
    assert_eq!(eval.best_move, fakes_best());
    assert_eq!(result.attempts, 2);
    let pids = pids(&dir);
    assert_eq!(pids.len(), 2, "one restart");
    assert!(gone(pids[0]), "the crashed process was reaped");
    // Both processes got the options after their handshake.
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    for pid in &pids {
        assert!(log.contains(&format!("{pid} setoption name Hash value 32")), "{log}");
    }
    // The fresh process keeps working: no restart for the next job.
    pool.submit(6, depth(2)).unwrap();
    let result = one_result(&pool);
    assert!(matches!(result.outcome, JobOutcome::Done(_)));
    assert_eq!(result.attempts, 1);
}

#[test]
fn a_job_that_crashes_three_fresh_processes_is_reported_failed() {
    let dir = tempfile::tempdir().unwrap();
    let pool = EnginePool::start(vec![fake("crash", &dir)]).unwrap();
    pool.submit(9, depth(3)).unwrap();
    let result = one_result(&pool);
    assert_eq!(result.id, 9);
    assert!(matches!(result.outcome, JobOutcome::Failed(EngineError::Eof)), "{:?}", result.outcome);
    assert_eq!(result.attempts, 3);
    let pids = pids(&dir);
    assert_eq!(pids.len(), 3);
    assert!(pids.iter().all(|&pid| gone(pid)), "every crashed process reaped");
    assert!(pool.results().try_recv().is_err(), "one result per job");
}

#[test]
fn a_hung_search_is_killed_after_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::spawn(&fake("hang", &dir)).unwrap();
    let started = Instant::now();
    let err = engine.evaluate(&depth(3)).unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
    assert!(waited >= SILENCE + HANDSHAKE && waited < SILENCE + HANDSHAKE + Duration::from_secs(2), "{waited:?}");
    let pid = engine.pid();
    drop(engine);
    assert!(gone(pid));

    // In the pool: three fresh processes time out, the job fails, every process is killed.
    let dir = tempfile::tempdir().unwrap();
    let pool = EnginePool::start(vec![fake("hang", &dir)]).unwrap();
    pool.submit(1, depth(3)).unwrap();
    let result = one_result(&pool);
    assert!(matches!(result.outcome, JobOutcome::Failed(EngineError::Timeout { .. })), "{:?}", result.outcome);
    assert_eq!(result.attempts, 3);
    assert!(pids(&dir).iter().all(|&pid| gone(pid)));
}

#[test]
fn an_engine_that_never_answers_uci_is_killed_after_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let err = Engine::spawn(&fake("hang-handshake", &dir)).err().expect("no engine");
    assert!(matches!(err, EngineError::Timeout { waiting_for: "uciok", .. }), "{err}");
    assert!(started.elapsed() < HANDSHAKE + Duration::from_secs(2));
    assert!(pids(&dir).iter().all(|&pid| gone(pid)));
    // A pool reports the same error at start.
    assert!(matches!(EnginePool::start(vec![fake("hang-handshake", &dir)]), Err(EngineError::Timeout { .. })));
}

#[test]
fn garbage_lines_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::spawn(&fake("garbage", &dir)).unwrap();
    assert_eq!(engine.identity().name, "deeptree fake engine");
    assert_eq!(engine.identity().options.len(), 6);
    let eval = engine.evaluate(&depth(3)).unwrap();
    assert_eq!(
        (eval.best_move, eval.score(), eval.bound(), eval.depth()),
        (fakes_best(), Score::cp(20), Bound::Exact, 3)
    );
    assert_eq!(eval.nodes, 300);
}

#[test]
fn an_illegal_best_move_is_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::spawn(&fake("illegal", &dir)).unwrap();
    let err = engine.evaluate(&depth(3)).unwrap_err();
    assert!(matches!(&err, EngineError::IllegalMove { mv, .. } if mv == "e2e5"), "{err}");
    assert!(err.is_engine_fault());

    let pool = EnginePool::start(vec![fake("illegal", &dir)]).unwrap();
    pool.submit(3, depth(3)).unwrap();
    let result = one_result(&pool);
    assert!(matches!(result.outcome, JobOutcome::Failed(EngineError::IllegalMove { .. })), "{:?}", result.outcome);
    assert_eq!(result.attempts, 3);
}

#[test]
fn bound_only_scores_keep_their_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::spawn(&fake("bound-only", &dir)).unwrap();
    let eval = engine.evaluate(&depth(4)).unwrap();
    assert_eq!((eval.score(), eval.bound(), eval.depth()), (Score::cp(20), Bound::Lower, 4));
    assert_ne!(eval.bound(), Bound::Exact);
}

#[test]
fn queued_and_running_jobs_can_be_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let pool = EnginePool::start(vec![fake("normal", &dir)]).unwrap();
    pool.submit(1, EvalRequest::new(start_position(), Limit::Infinite)).unwrap();
    pool.submit(2, depth(3)).unwrap();
    assert!(pool.submit(2, depth(3)).is_err(), "ids in flight are unique");
    assert!(pool.cancel(2));
    let result = one_result(&pool);
    assert_eq!((result.id, result.worker, result.attempts), (2, None, 0));
    assert!(matches!(result.outcome, JobOutcome::Cancelled));

    // Let the worker take job 1, then stop it.
    while pool.in_flight() != 1 {
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    assert!(pool.cancel(1));
    let result = one_result(&pool);
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!((result.id, result.worker), (1, Some(0)));
    assert!(matches!(result.outcome, JobOutcome::Cancelled), "{:?}", result.outcome);
    assert!(!pool.cancel(1), "no longer in flight");

    // The worker is free again, on the same process.
    pool.submit(3, depth(2)).unwrap();
    let result = one_result(&pool);
    assert!(matches!(result.outcome, JobOutcome::Done(_)));
    assert_eq!(pids(&dir).len(), 1);
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(log.contains("go infinite") && log.contains("stop"), "{log}");
}

#[test]
fn bad_commands_and_requests_are_errors_not_retries() {
    assert!(matches!(EnginePool::start(vec![EngineConfig::new("/no/such/engine")]), Err(EngineError::Spawn { .. })));
    assert!(matches!(Engine::spawn(&EngineConfig::new("'unbalanced")), Err(EngineError::BadCommand { .. })));
    assert!(EnginePool::start(Vec::new()).is_err());
    let dir = tempfile::tempdir().unwrap();
    let pool = EnginePool::start(vec![fake("normal", &dir)]).unwrap();
    let checkmated =
        EnginePosition::new(Chess::default(), ["f2f3", "e7e5", "g2g4", "d8h4"].map(|m| m.parse().unwrap()).to_vec())
            .unwrap();
    assert!(matches!(
        pool.submit(1, EvalRequest::new(checkmated, Limit::Depth(1))),
        Err(EngineError::InvalidRequest(_))
    ));
    assert_eq!(pool.in_flight(), 0);
}

#[test]
fn an_engine_killed_while_idle_is_replaced_at_the_next_job() {
    let dir = tempfile::tempdir().unwrap();
    let pool = EnginePool::start(vec![fake("normal", &dir)]).unwrap();
    pool.submit(1, depth(2)).unwrap();
    assert!(matches!(one_result(&pool).outcome, JobOutcome::Done(_)));
    let first = pids(&dir)[0];
    let killed = std::process::Command::new("kill").args(["-9", &first.to_string()]).status().unwrap();
    assert!(killed.success());
    // The next job meets a dead engine (broken pipe or end of output), which did not fail on a fresh start, so the
    // job runs again on a fresh process.
    pool.submit(2, depth(2)).unwrap();
    let result = one_result(&pool);
    assert!(matches!(result.outcome, JobOutcome::Done(_)), "{:?}", result.outcome);
    assert_eq!(result.attempts, 2);
    let pids = pids(&dir);
    assert_eq!(pids.len(), 2);
    assert!(gone(first), "the dead engine was reaped");
}

#[test]
fn an_engine_that_ignores_searchmoves_is_asked_each_move_on_its_own() {
    // The fake engine in `no-searchmoves` plays a2a3 whatever `searchmoves` say. The first violation is no fault (no
    // restart): from then on each allowed move is searched as the position after it, one ply shallower, and the
    // best of them, backed up, answers at the depth asked.
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::spawn(&fake("no-searchmoves", &dir)).unwrap();
    let allowed: Vec<UciMove> = vec!["e2e4".parse().unwrap(), "d2d4".parse().unwrap()];
    for _ in 0..2 {
        let request = depth(4).with_searchmoves(allowed.clone()).unwrap();
        let evaluation = engine.evaluate(&request).unwrap();
        assert!(allowed.contains(&evaluation.best_move), "{}", evaluation.best_move);
        assert_eq!(evaluation.line.depth, 4);
        assert_eq!(evaluation.line.pv.first(), Some(&evaluation.best_move));
        // The fake's replies score +20 for the side to move after the move: -20 backed up.
        assert_eq!(evaluation.line.score, Score::cp(-20));
    }
    assert_eq!(pids(&dir).len(), 1, "no restart");
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let gos: Vec<&str> =
        log.lines().filter_map(|l| l.split_once(' ').map(|(_, c)| c)).filter(|c| c.starts_with("go")).collect();
    // One search with searchmoves (the violation), then one per move and request at depth 3, without them.
    assert_eq!(gos.len(), 1 + 2 * 2, "{gos:?}");
    assert_eq!(gos[0], "go depth 4 searchmoves e2e4 d2d4");
    assert!(gos[1..].iter().all(|g| *g == "go depth 3"), "{gos:?}");
    // Ordinary searches are untouched.
    assert_eq!(engine.evaluate(&depth(2)).unwrap().best_move, fakes_best());
}

/// The `go` commands the fake engine in `dir` was sent, in order.
fn go_commands(dir: &TempDir) -> Vec<String> {
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    log.lines().filter_map(|l| l.split_once(' ').map(|(_, c)| c.to_owned())).filter(|c| c.starts_with("go")).collect()
}

#[test]
fn each_move_of_an_engine_that_ignores_searchmoves_gets_its_share_of_every_limit() {
    // A GUI's `go wtime .. depth 6 nodes 1000`: the clock is the limit, the depth and nodes go beside it (caps).
    // Asked each allowed move alone, every reply keeps a share of each: a ply less, half the nodes, a share of the
    // clock as a movetime. A reply sent without its caps would search past the GUI's depth and nodes.
    let dir = tempfile::tempdir().unwrap();
    let mut engine = Engine::spawn(&fake("no-searchmoves", &dir)).unwrap();
    let allowed: Vec<UciMove> = vec!["e2e4".parse().unwrap(), "d2d4".parse().unwrap()];
    let clock = Limit::Clock { wtime: 60_000, btime: 60_000, winc: 0, binc: 0, movestogo: None };
    let asked = |limit: Limit, caps: Vec<Limit>| {
        EvalRequest { caps, ..EvalRequest::new(start_position(), limit) }.with_searchmoves(allowed.clone()).unwrap()
    };
    let evaluation = engine.evaluate(&asked(clock, vec![Limit::Depth(6), Limit::Nodes(1000)])).unwrap();
    assert!(allowed.contains(&evaluation.best_move), "{}", evaluation.best_move);
    let gos = go_commands(&dir);
    assert_eq!(gos.len(), 1 + 2, "{gos:?}");
    assert_eq!(gos[0], "go wtime 60000 btime 60000 winc 0 binc 0 depth 6 nodes 1000 searchmoves e2e4 d2d4");
    // A thirtieth of 60 s, less what the first search took, halved between the two moves: at most 1000 ms.
    for go in &gos[1..] {
        let words: Vec<&str> = go.split_whitespace().collect();
        assert_eq!(words[..2], ["go", "movetime"], "{go}");
        let movetime: u64 = words[2].parse().unwrap();
        assert!((500..=1000).contains(&movetime), "{go}");
        assert_eq!(words[3..], ["depth", "5", "nodes", "500"], "{go}");
    }

    // Learnt: the next searches are asked each move alone at once.
    // A `mate` beside a depth has no share (a reply's mate would be the opponent's): each reply is the depth's alone,
    // and the answer is at the depth asked.
    let evaluation = engine.evaluate(&asked(Limit::Depth(4), vec![Limit::Mate(5)])).unwrap();
    assert_eq!(evaluation.line.depth, 4);
    let gos = go_commands(&dir);
    assert_eq!(gos[3..], ["go depth 3", "go depth 3"], "{gos:?}");

    // A clock's share (1000 ms a move) and a GUI's `movetime` (200 ms a move) are one kind: each reply is sent one
    // movetime, the shorter.
    engine.evaluate(&asked(clock, vec![Limit::MoveTime(Duration::from_millis(400))])).unwrap();
    let gos = go_commands(&dir);
    assert_eq!(gos[5..], ["go movetime 200", "go movetime 200"], "{gos:?}");
}

#[test]
fn searchmoves_off_and_multipv_in_an_engine_list_answer_as_stockfish_keeping_to_searchmoves() {
    // The same method forced on Stockfish (`searchmoves=off`): the answer is one of the moves allowed, at the depth
    // asked, and agrees in sign and roughly in size with Stockfish's own restricted search.
    let stockfish = deeptree::engine::resolve_program("stockfish");
    let specs =
        deeptree::engine::spec::EngineSpec::parse_list(&format!("{} | searchmoves=off", stockfish.display())).unwrap();
    let configs = deeptree::engine::spec::EngineSpec::configs(&specs, &EngineConfig::new("stockfish"));
    let mut each = Engine::spawn(&configs[0]).unwrap();
    let mut keeps = Engine::spawn(&EngineConfig::new(stockfish.display().to_string())).unwrap();
    // After 1. e4 e5: 2. Ba6?? (it loses the bishop) against 2. Nf3.
    let position =
        EnginePosition::new(Chess::default(), vec!["e2e4".parse().unwrap(), "e7e5".parse().unwrap()]).unwrap();
    let allowed: Vec<UciMove> = vec!["f1a6".parse().unwrap(), "g1f3".parse().unwrap()];
    let request = EvalRequest::new(position, Limit::Depth(10)).with_searchmoves(allowed).unwrap();
    let by_each = each.evaluate(&request).unwrap();
    let by_engine = keeps.evaluate(&request).unwrap();
    assert_eq!(by_each.best_move, "g1f3".parse::<UciMove>().unwrap());
    assert_eq!(by_engine.best_move, by_each.best_move);
    assert_eq!(by_each.line.depth, 10);
    let (a, b) = (by_each.line.score.value(), by_engine.line.score.value());
    assert!((a - b).abs() < 60, "per move {a} cp, searchmoves {b} cp");
    // Through MultiPV (`searchmoves=multipv`): one search of the position with a line more than the moves left out.
    let specs =
        deeptree::engine::spec::EngineSpec::parse_list(&format!("{} | searchmoves=multipv", stockfish.display()))
            .unwrap();
    let mut multipv =
        Engine::spawn(&deeptree::engine::spec::EngineSpec::configs(&specs, &EngineConfig::new("x"))[0]).unwrap();
    let by_multipv = multipv.evaluate(&request).unwrap();
    assert_eq!(by_multipv.best_move, by_engine.best_move);
    assert_eq!(by_multipv.line.depth, 10);
    let c = by_multipv.line.score.value();
    assert!((c - b).abs() < 60, "MultiPV {c} cp, searchmoves {b} cp");

    // A move that repeats the position a third time is a draw, which the engine would not see in the position
    // after it searched as its own root: Black, a queen down, takes the repetition rather than a lost game.
    let moves = ["g1f3", "g8h8", "f3g1", "h8g8", "g1f3", "g8h8", "f3g1"].map(|m| m.parse::<UciMove>().unwrap());
    let position = EnginePosition::from_fen("6k1/5ppp/8/8/8/8/5PPP/3QK1N1 w - - 0 1", moves.to_vec()).unwrap();
    let allowed: Vec<UciMove> = vec!["h8g8".parse().unwrap(), "g7g6".parse().unwrap()];
    let request = EvalRequest::new(position, Limit::Depth(10)).with_searchmoves(allowed).unwrap();
    let by_each = each.evaluate(&request).unwrap();
    assert_eq!(by_each.best_move, "h8g8".parse::<UciMove>().unwrap());
    assert_eq!(by_each.line.score, Score::cp(0));
    // The MultiPV method searches from the position with its moves: the engine sees the repetition itself.
    let by_multipv = multipv.evaluate(&request).unwrap();
    assert_eq!((by_multipv.best_move, by_multipv.line.score), (by_each.best_move, Score::cp(0)));
    // So is any move with the fifty-move count at 100 after it (that is not mate).
    let position = EnginePosition::from_fen("6k1/5ppp/8/8/8/8/5PPP/3QK1N1 b - - 99 80", vec![]).unwrap();
    let allowed: Vec<UciMove> = vec!["g8h8".parse().unwrap(), "g7g6".parse().unwrap()];
    let request = EvalRequest::new(position, Limit::Depth(10)).with_searchmoves(allowed).unwrap();
    assert_eq!(each.evaluate(&request).unwrap().line.score, Score::cp(0));
}

#[test]
fn an_option_the_engine_lacks_is_noted_once_whatever_the_starts_and_restarts() {
    // Two workers and a crash: three starts of an engine without the option asked for; one warning.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let engines = format!(
        "'{FAKE}' --mode crash-once --state '{d}/state' --pid-file '{d}/pids' | workers=2 | option.NoSuchOption=1"
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(dir.path().join("tree"))
        .args(["analyze", "--engines", &engines, "--engine-depth", "2", "--max-depth", "1", "--look-ahead", "off"])
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(pids(&dir).len() >= 3, "two workers and a restart: {:?}\n{stderr}", pids(&dir));
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("option not set")).collect();
    assert_eq!(notes.len(), 1, "{stderr}");
    assert!(notes[0].contains("NoSuchOption"), "{stderr}");
}

#[test]
fn an_engine_restarted_after_a_fault_still_knows_it_ignores_searchmoves() {
    // A pool's worker learns at the first violation that the fake in `no-searchmoves` mode ignores them; the engine
    // is killed and the next job meets a fresh process, which asks each move alone from the start: the log has one
    // `go` with searchmoves in all, from the first process.
    let dir = tempfile::tempdir().unwrap();
    let pool = EnginePool::start(vec![fake("no-searchmoves", &dir)]).unwrap();
    let allowed: Vec<UciMove> = vec!["e2e4".parse().unwrap(), "d2d4".parse().unwrap()];
    let request = || depth(4).with_searchmoves(allowed.clone()).unwrap();
    pool.submit(1, request()).unwrap();
    assert!(matches!(one_result(&pool).outcome, JobOutcome::Done(_)));
    let first = pids(&dir)[0];
    assert!(std::process::Command::new("kill").args(["-9", &first.to_string()]).status().unwrap().success());
    pool.submit(2, request()).unwrap();
    let result = one_result(&pool);
    let JobOutcome::Done(evaluation) = &result.outcome else { panic!("{:?}", result.outcome) };
    assert!(allowed.contains(&evaluation.best_move), "{}", evaluation.best_move);
    assert_eq!(evaluation.line.depth, 4);
    let pids = pids(&dir);
    assert_eq!(pids.len(), 2, "restarted once");
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let gos: Vec<(&str, &str)> =
        log.lines().filter_map(|l| l.split_once(' ')).filter(|(_, c)| c.starts_with("go")).collect();
    let with_searchmoves: Vec<_> = gos.iter().filter(|(_, c)| c.contains("searchmoves")).collect();
    assert_eq!(with_searchmoves.len(), 1, "{gos:?}");
    assert_eq!(with_searchmoves[0].0, first.to_string(), "only the first process was asked with searchmoves: {gos:?}");
    let second: Vec<_> = gos.iter().filter(|(pid, _)| *pid == pids[1].to_string()).map(|(_, c)| *c).collect();
    assert_eq!(second, ["go depth 3", "go depth 3"], "the fresh process searched each move alone: {gos:?}");
}

#[test]
fn the_multipv_method_answers_from_the_first_line_of_a_move_allowed() {
    // The fake in no-searchmoves mode, asked through MultiPV (`searchmoves=multipv`): line k of its MultiPV plays
    // the k-th legal move in UCI text order (a2a3, a2a4, b1a3, ...) at 20 - 7(k-1) cp. With a2a3 and a2a4 left out,
    // three lines hold the best allowed move: b1a3 at +6, line 3, in one search at the depth asked.
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { searchmoves: deeptree::engine::Searchmoves::MultiPv, ..fake("no-searchmoves", &dir) };
    let mut engine = Engine::spawn(&config).unwrap();
    let start = Chess::default();
    let left_out = ["a2a3", "a2a4"];
    let allowed: Vec<UciMove> = shakmaty::Position::legal_moves(&start)
        .iter()
        .map(|m| UciMove::from_standard(*m))
        .filter(|m| !left_out.contains(&m.to_string().as_str()))
        .collect();
    let request = depth(4).with_searchmoves(allowed.clone()).unwrap();
    let mut shown = Vec::new();
    let evaluation = engine.search(&request, &mut |info| shown.push(info.clone())).unwrap();
    assert_eq!(evaluation.best_move.to_string(), "b1a3");
    assert_eq!((evaluation.line.score, evaluation.line.depth, evaluation.line.multipv), (Score::cp(6), 4, 1));
    // The lines passed on: one a depth, the best allowed, without its multipv.
    assert_eq!(shown.iter().map(|i| i.depth.unwrap()).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert!(shown.iter().all(|i| i.multipv.is_none() && i.pv.first().unwrap().to_string() == "b1a3"), "{shown:?}");
    // Two moves allowed: 19 lines are past the fake's MultiPV (10), and each move is searched alone.
    let two = depth(4).with_searchmoves(vec!["e2e4".parse().unwrap(), "d2d4".parse().unwrap()]).unwrap();
    let evaluation = engine.search(&two, &mut |_| {}).unwrap();
    assert!(["e2e4", "d2d4"].contains(&evaluation.best_move.to_string().as_str()));
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let sent: Vec<&str> = log.lines().filter_map(|l| l.split_once(' ').map(|(_, c)| c)).collect();
    let gos: Vec<&&str> = sent.iter().filter(|c| c.starts_with("go")).collect();
    assert_eq!(gos, [&"go depth 4", &"go depth 3", &"go depth 3"], "{sent:?}");
    assert!(sent.contains(&"setoption name MultiPV value 3"), "{sent:?}");

    // Learnt: an engine with a MultiPV option found not to keep to searchmoves is asked through MultiPV, the
    // violating search's request included.
    let other = tempfile::tempdir().unwrap();
    let mut learning = Engine::spawn(&fake("no-searchmoves", &other)).unwrap();
    let evaluation = learning.evaluate(&request).unwrap();
    assert_eq!((evaluation.best_move.to_string(), evaluation.line.score), ("b1a3".to_owned(), Score::cp(6)));
    assert_eq!(learning.searchmoves_method(), deeptree::engine::Searchmoves::MultiPv);
    let log = std::fs::read_to_string(other.path().join("log")).unwrap();
    let gos: Vec<&str> =
        log.lines().filter_map(|l| l.split_once(' ').map(|(_, c)| c)).filter(|c| c.starts_with("go")).collect();
    assert_eq!(gos.len(), 2, "the violation, then one search through MultiPV: {gos:?}");
    assert!(gos[0].starts_with("go depth 4 searchmoves ") && gos[1] == "go depth 4", "{gos:?}");
}
