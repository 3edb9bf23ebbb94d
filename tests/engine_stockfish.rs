//! The engine client and pool against the real Stockfish, at shallow depths.
//!
//! The engine is `stockfish`, resolved as deeptree resolves it (on `PATH`, else /usr/games/stockfish, where Debian
//! installs it); `DEEPTREE_TEST_ENGINE` names another command line. `scripts/install-deps` installs Stockfish.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use deeptree::{
    engine::{
        Engine, EngineConfig, EngineError, EnginePool, EnginePosition, EvalRequest, Evaluation, JobOutcome, Limit,
        ScreenCut, Timeouts,
        protocol::{EngineMessage, OptionKind, parse_line},
    },
    score::{Bound, Score},
};
use shakmaty::{Chess, Position, uci::UciMove};

fn stockfish() -> EngineConfig {
    let command = std::env::var("DEEPTREE_TEST_ENGINE").unwrap_or_else(|_| "stockfish".to_owned());
    EngineConfig::new(command)
        .with_option("Hash", 16)
        .with_timeouts(Timeouts { handshake: Duration::from_secs(10), search_silence: Duration::from_secs(10) })
}

fn fen(fen: &str) -> EnginePosition {
    EnginePosition::from_fen(fen, Vec::new()).unwrap()
}

fn uci(m: &str) -> UciMove {
    m.parse().unwrap()
}

fn assert_legal(position: &EnginePosition, eval: &Evaluation) {
    let mut pos = position.position().clone();
    assert!(eval.best_move.to_move(&pos).is_ok(), "{} illegal in {}", eval.best_move, position.fen());
    for m in &eval.line.pv {
        let legal = m.to_move(&pos).unwrap_or_else(|_| panic!("pv move {m} illegal"));
        pos.play_unchecked(legal);
    }
}

#[test]
fn handshake_names_the_engine_and_lists_typed_options() {
    let engine = Engine::spawn(&stockfish()).unwrap();
    let identity = engine.identity();
    assert!(identity.name.starts_with("Stockfish"), "{}", identity.name);
    assert!(identity.author.is_some());
    assert!(matches!(identity.option("Hash").unwrap().kind, OptionKind::Spin { min: 1, .. }));
    assert!(matches!(identity.option("threads").unwrap().kind, OptionKind::Spin { default: 1, min: 1, .. }));
    assert!(matches!(identity.option("Ponder").unwrap().kind, OptionKind::Check { default: false }));
    assert_eq!(identity.option("Clear Hash").unwrap().kind, OptionKind::Button);
    // Every option can be offered again as the engine declared it.
    for option in &identity.options {
        assert_eq!(parse_line(&option.to_uci()), EngineMessage::Option(option.clone()));
    }
}

#[test]
fn fixed_depth_evaluation_is_legal_and_sane_from_both_sides() {
    let mut engine = Engine::spawn(&stockfish()).unwrap();
    let start = EnginePosition::of(&Chess::default());
    let eval = engine.evaluate(&EvalRequest::new(start.clone(), Limit::Depth(8))).unwrap();
    assert_legal(&start, &eval);
    assert_eq!(eval.bound(), Bound::Exact);
    assert_eq!(eval.depth(), 8);
    assert!(eval.line.seldepth > 0);
    assert!(eval.nodes > 0);
    assert_eq!(eval.line.pv.first(), Some(&eval.best_move));
    assert!((-60..=120).contains(&eval.score().as_cp().unwrap()), "{}", eval.score());
    assert!(!eval.stopped);
    assert_eq!(&*eval.engine, engine.identity().name.as_str());

    // Scores are for the side to move: Black without a queen, with White and then Black to move.
    let white_to_move = fen("rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1");
    let eval = engine.evaluate(&EvalRequest::new(white_to_move.clone(), Limit::Depth(8))).unwrap();
    assert_legal(&white_to_move, &eval);
    assert!(eval.score() > Score::cp(500), "{}", eval.score());
    let black_to_move = fen("rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR b KQkq - 0 1");
    let eval = engine.evaluate(&EvalRequest::new(black_to_move.clone(), Limit::Depth(8))).unwrap();
    assert_legal(&black_to_move, &eval);
    assert!(eval.score() < Score::cp(-500), "{}", eval.score());

    // A position reached by moves; mate scores keep their distance.
    let moves = ["f2f3", "e7e5", "g2g4"].map(uci).to_vec();
    let fools_mate = EnginePosition::new(Chess::default(), moves).unwrap();
    let eval = engine.evaluate(&EvalRequest::new(fools_mate, Limit::Depth(6))).unwrap();
    assert_eq!(eval.best_move, uci("d8h4"));
    assert_eq!(eval.score(), Score::from_uci_mate(1));
    let back_rank = fen("6k1/5ppp/8/8/8/8/5PPP/3R2K1 b - - 0 1");
    let eval = engine.evaluate(&EvalRequest::new(back_rank, Limit::Depth(6))).unwrap();
    assert!(eval.score() < Score::cp(-400), "{}", eval.score());
}

#[test]
fn node_limited_evaluation() {
    let mut engine = Engine::spawn(&stockfish()).unwrap();
    let position = fen("r1bqkbnr/pppp1ppp/2n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3");
    let eval = engine.evaluate(&EvalRequest::new(position.clone(), Limit::Nodes(20_000))).unwrap();
    assert_legal(&position, &eval);
    assert!(eval.nodes >= 10_000 && eval.nodes <= 40_000, "{}", eval.nodes);
    assert!(eval.depth() >= 3, "{}", eval.depth());
}

#[test]
fn invalid_requests_are_refused_before_anything_is_sent() {
    let mut engine = Engine::spawn(&stockfish()).unwrap();
    let mated = EnginePosition::new(Chess::default(), ["f2f3", "e7e5", "g2g4", "d8h4"].map(uci).to_vec()).unwrap();
    let err = engine.evaluate(&EvalRequest::new(mated, Limit::Depth(4))).unwrap_err();
    assert!(matches!(err, EngineError::InvalidRequest(_)), "{err}");
    let start = EnginePosition::of(&Chess::default());
    let err = EvalRequest::new(start.clone(), Limit::Depth(4)).with_searchmoves(vec![uci("e2e5")]).unwrap_err();
    assert!(matches!(err, EngineError::InvalidRequest(_)), "{err}");
    assert!(matches!(engine.set_option("No Such Option", "1"), Err(EngineError::InvalidRequest(_))));
    // The engine is still fine.
    assert_legal(&start, &engine.evaluate(&EvalRequest::new(start.clone(), Limit::Depth(2))).unwrap());
}

#[test]
fn searchmoves_restrict_the_move() {
    let mut engine = Engine::spawn(&stockfish()).unwrap();
    let start = EnginePosition::of(&Chess::default());
    let allowed = vec![uci("a2a3"), uci("h2h3")];
    let request = EvalRequest::new(start.clone(), Limit::Depth(8)).with_searchmoves(allowed.clone()).unwrap();
    let eval = engine.evaluate(&request).unwrap();
    assert!(allowed.contains(&eval.best_move), "{}", eval.best_move);
    assert_eq!(eval.line.pv.first(), Some(&eval.best_move));
    assert_legal(&start, &eval);
    // A bad move searched alone gets its own (bad) value for the side to move.
    let blunder = fen("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3");
    let request = EvalRequest::new(blunder, Limit::Depth(8)).with_searchmoves(vec![uci("f3g5")]).unwrap();
    let eval = engine.evaluate(&request).unwrap();
    assert_eq!(eval.best_move, uci("f3g5"));
    assert!(eval.score() < Score::cp(0), "{}", eval.score());
}

#[test]
fn multipv_3_returns_three_distinct_lines() {
    let mut engine = Engine::spawn(&stockfish()).unwrap();
    let start = EnginePosition::of(&Chess::default());
    let eval = engine.evaluate(&EvalRequest::new(start.clone(), Limit::Depth(8)).with_multipv(3)).unwrap();
    let lines: Vec<_> = eval.lines().collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines.iter().map(|l| l.multipv).collect::<Vec<_>>(), [1, 2, 3]);
    let firsts: HashSet<_> = lines.iter().map(|l| l.pv[0]).collect();
    assert_eq!(firsts.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| l.bound == Bound::Exact && l.depth == 8));
    assert!(lines[0].score >= lines[1].score && lines[1].score >= lines[2].score, "{lines:?}");
    assert_eq!(lines[0].pv[0], eval.best_move);
    // MultiPV goes back to 1 for the next request.
    let eval = engine.evaluate(&EvalRequest::new(start, Limit::Depth(4))).unwrap();
    assert!(eval.other_lines.is_empty());
}

#[test]
fn stop_ends_an_infinite_search_quickly_and_the_engine_is_free_again() {
    let mut engine = Engine::spawn(&stockfish()).unwrap();
    let start = EnginePosition::of(&Chess::default());
    let stop = engine.stop_handle();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stop.stop();
        Instant::now()
    });
    let mut infos = 0;
    let eval = engine.search(&EvalRequest::new(start.clone(), Limit::Infinite), &mut |_| infos += 1).unwrap();
    let stopped_at = stopper.join().unwrap();
    assert!(stopped_at.elapsed() < Duration::from_millis(500), "bestmove {:?} after stop", stopped_at.elapsed());
    assert!(eval.stopped);
    assert!(infos > 0);
    assert_legal(&start, &eval);
    // A handle taken now stops the next search before it starts; the one after runs.
    engine.stop_handle().stop();
    let err = engine.evaluate(&EvalRequest::new(start.clone(), Limit::Infinite)).unwrap_err();
    assert!(matches!(err, EngineError::Stopped), "{err}");
    // A stop that meets a refused request ends with it, and does not reach the next search.
    engine.stop_handle().stop();
    let mut refused = EvalRequest::new(start.clone(), Limit::Infinite);
    refused.searchmoves = vec![uci("e2e5")];
    assert!(matches!(engine.evaluate(&refused), Err(EngineError::InvalidRequest(_))));
    let eval = engine.evaluate(&EvalRequest::new(start.clone(), Limit::Depth(3))).unwrap();
    assert!(!eval.stopped);
    assert_eq!(eval.depth(), 3);
}

#[test]
fn pool_of_two_returns_every_result_tagged_with_its_id() {
    let pool = EnginePool::uniform(&stockfish(), 2).unwrap();
    assert_eq!(pool.workers(), 2);
    let names: Vec<_> = pool.identities().iter().map(|i| i.name.clone()).collect();
    assert_eq!(names.len(), 2);
    assert!(names.iter().all(|n| n.starts_with("Stockfish")));
    let positions = [
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
        "r1bqkbnr/pppp1ppp/2n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3",
        "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
        "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
        "2r3k1/pppR1pp1/4p3/4P1P1/5P2/1P4K1/P1P5/8 w - - 0 1",
        "rnbq1rk1/ppp1ppbp/3p1np1/8/2PPP3/2N2N2/PP3PPP/R1BQKB1R w KQ - 0 6",
        "8/pp3k2/2p5/3p4/3P4/2P3K1/PP6/8 w - - 0 1",
        "1k1r4/pp1b1R2/3q2pp/4p3/2B5/4Q3/PPP2B2/2K5 b - - 0 1",
    ];
    let mut expected = HashSet::new();
    for (i, f) in positions.iter().enumerate() {
        let id = 1000 + 7 * i as u64;
        pool.submit(id, EvalRequest::new(fen(f), Limit::Depth(8))).unwrap();
        expected.insert(id);
    }
    let mut workers = HashSet::new();
    for _ in positions {
        let result = pool.results().recv_timeout(Duration::from_secs(30)).unwrap();
        assert!(expected.remove(&result.id), "unexpected or repeated id {}", result.id);
        let f = positions[((result.id - 1000) / 7) as usize];
        let JobOutcome::Done(eval) = result.outcome else { panic!("{:?}", result.outcome) };
        assert_legal(&fen(f), &eval);
        assert_eq!(eval.depth(), 8);
        assert_eq!(result.attempts, 1);
        workers.insert(result.worker.unwrap());
    }
    assert!(expected.is_empty());
    assert_eq!(workers.len(), 2, "both workers took jobs");
    assert_eq!(pool.in_flight(), 0);
}

#[test]
fn workers_may_run_different_commands() {
    let fake = format!("'{}' --mode normal", env!("CARGO_BIN_EXE_deeptree-fake-engine"));
    let pool = EnginePool::start(vec![stockfish(), EngineConfig::new(fake)]).unwrap();
    assert!(pool.identity(0).unwrap().name.starts_with("Stockfish"));
    assert_eq!(pool.identity(1).unwrap().name, "deeptree fake engine");
    for id in 0..6 {
        pool.submit(id, EvalRequest::new(EnginePosition::of(&Chess::default()), Limit::Depth(6))).unwrap();
    }
    for _ in 0..6 {
        let result = pool.results().recv_timeout(Duration::from_secs(30)).unwrap();
        let JobOutcome::Done(eval) = result.outcome else { panic!("{:?}", result.outcome) };
        let worker = result.worker.unwrap();
        assert_eq!(*eval.engine, pool.identity(worker).unwrap().name);
    }
}

/// A screened search stops at the first iteration, at the screen's depth or deeper, whose score is below the
/// screen's bound, and answers with that iteration; through the pool it is an answer, not a cancelled job. A screen
/// whose bound no iteration goes below lets the search run to its depth.
#[test]
fn a_screen_stops_a_search_at_a_shallower_iteration_below_its_bound() {
    // Black must recapture on d5; every other move loses a pawn.
    let position = fen("rnbqkbnr/ppp1pppp/8/3P4/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2");
    let others: Vec<UciMove> = position
        .position()
        .legal_moves()
        .iter()
        .map(|m| deeptree::notation::canonical(*m))
        .filter(|m| m.to_string() != "d8d5")
        .collect();
    let mut engine = Engine::spawn(&stockfish()).unwrap();
    let full = engine
        .evaluate(&EvalRequest::new(position.clone(), Limit::Depth(12)).with_searchmoves(others.clone()).unwrap())
        .unwrap();
    assert_eq!((full.depth(), full.screened.is_none(), full.stopped), (12, true, false));

    // Below a bound every iteration is under: cut at the screen's depth.
    let cut = ScreenCut { from_depth: 8, below: Score::cp(1000) };
    let request = EvalRequest::new(position.clone(), Limit::Depth(12))
        .with_searchmoves(others.clone())
        .unwrap()
        .with_screen(Some(cut));
    let screened = engine.evaluate(&request).unwrap();
    let line = screened.screened.clone().expect("the screen cut the search");
    assert_eq!(line.depth, 8);
    assert!(line.score < Score::cp(1000) && line.bound == Bound::Exact);
    assert!(others.contains(&line.pv[0]), "{:?}", line.pv);
    assert!(screened.nodes < full.nodes, "{} nodes cut, {} in full", screened.nodes, full.nodes);

    // A bound no iteration goes below: the search runs to its depth.
    let never = ScreenCut { from_depth: 8, below: Score::MATED_NOW };
    let request =
        EvalRequest::new(position.clone(), Limit::Depth(12)).with_searchmoves(others).unwrap().with_screen(Some(never));
    let whole = engine.evaluate(&request).unwrap();
    assert_eq!((whole.depth(), whole.screened.is_none(), whole.stopped), (12, true, false));
    // The engine is ready for the next search after a cut.
    assert_eq!(engine.evaluate(&EvalRequest::new(position.clone(), Limit::Depth(6))).unwrap().depth(), 6);

    let pool = EnginePool::uniform(&stockfish(), 1).unwrap();
    pool.submit(1, request_with(&position, cut)).unwrap();
    let result = pool.results().recv_timeout(Duration::from_secs(30)).unwrap();
    match result.outcome {
        JobOutcome::Done(evaluation) => assert_eq!(evaluation.screened.map(|l| l.depth), Some(8)),
        other => panic!("a screened search is an answer: {other:?}"),
    }
}

fn request_with(position: &EnginePosition, cut: ScreenCut) -> EvalRequest {
    EvalRequest::new(position.clone(), Limit::Depth(12)).with_screen(Some(cut))
}

/// An engine set up `fresh` starts every search cleared: the same search asked again after another gives the same
/// answer with the same node count, as it did the first time.
#[test]
fn a_fresh_engine_answers_a_search_the_same_whatever_came_before() {
    let mut config = stockfish();
    config.fresh = true;
    let pool = EnginePool::uniform(&config, 1).unwrap();
    let first = fen("r1bqkbnr/pppp1ppp/2n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3");
    let other = fen("rnbqkbnr/ppp2ppp/4p3/3p4/3PP3/8/PPP2PPP/RNBQKBNR w KQkq - 0 3");
    let mut answers = Vec::new();
    for (id, position) in [(1, &first), (2, &other), (3, &first)] {
        pool.submit(id, EvalRequest::new(position.clone(), Limit::Depth(10))).unwrap();
        match pool.results().recv_timeout(Duration::from_secs(30)).unwrap().outcome {
            JobOutcome::Done(evaluation) => answers.push((evaluation.best_move, evaluation.score(), evaluation.nodes)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(answers[0], answers[2], "{answers:?}");
}
