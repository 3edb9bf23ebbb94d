//! The host's benchmark: the fake engine's `keyed` and `smooth` modes close the move distance window as a real engine
//! does, and `deeptree bench host` settles the same depth with 1 and N workers and reports its figures.

mod common;

use std::process::Command;

use serde_json::Value;

fn deeptree(args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree")).args(args).output().expect("deeptree runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("null")).expect("one JSON object")
}

/// The keyed and smooth fakes answer as the scripted evaluator does: the best of their candidate moves by the score
/// of the position each leads to, whatever the depth, so that a run is the same whatever its timing.
#[test]
fn the_keyed_and_smooth_fakes_score_moves_by_the_position_they_lead_to() {
    use deeptree::{
        engine::{Engine, EngineConfig, EnginePosition, EvalRequest, Limit},
        score::Score,
        search::evaluator::ScriptedEvaluator,
    };
    use shakmaty::{Chess, Position, uci::UciMove};

    type MoveScore = fn(&Chess, &UciMove) -> Option<Score>;
    let modes: [(&str, MoveScore); 2] =
        [("keyed", ScriptedEvaluator::move_score), ("smooth", ScriptedEvaluator::smooth_move_score)];
    for (mode, move_score) in modes {
        let config = EngineConfig::new(format!("{} --mode {mode} --latency-ms 2", common::fake()));
        let mut engine = Engine::spawn(&config).expect("fake");
        let start = Chess::default();
        let moves: Vec<UciMove> = start.legal_moves().iter().map(|m| UciMove::from_standard(*m)).collect();
        let best_of = |candidates: &[UciMove]| {
            candidates
                .iter()
                .map(|m| (move_score(&start, m).expect("legal"), *m))
                .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.to_string().cmp(&a.1.to_string())))
                .expect("a move")
        };
        // All moves, then the rest after each best: the scores fall, so a move distance window closes.
        let mut rest = moves.clone();
        let mut scores = Vec::new();
        for _ in 0..4 {
            let request = EvalRequest::new(EnginePosition::of(&start), Limit::Depth(12))
                .with_searchmoves(if rest.len() == moves.len() { Vec::new() } else { rest.clone() })
                .expect("request");
            let eval = engine.evaluate(&request).expect("answer");
            let (score, best) = best_of(&rest);
            assert_eq!((eval.score(), eval.best_move), (score, best), "{mode}");
            scores.push(score);
            rest.retain(|m| *m != best);
        }
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{mode}: {scores:?}");
        assert!(scores.first() > scores.last(), "{mode}: the scores spread: {scores:?}");
    }
}

/// Smooth scores behave like a real engine's from one ply to the next: the value a position gets when it is searched
/// (its best reply) stays within 40 cp of the negated score of the move that led to it. Keyed scores do not.
#[test]
fn smooth_scores_change_little_from_one_ply_to_the_next() {
    use deeptree::{game::play_uci, score::Score, search::evaluator::ScriptedEvaluator};
    use shakmaty::{Chess, Position, uci::UciMove};

    let start = Chess::default();
    let largest_change = |move_score: fn(&Chess, &UciMove) -> Option<Score>| {
        let mut largest = 0;
        for m in start.legal_moves() {
            let uci = UciMove::from_standard(m);
            let child = play_uci(&start, &uci).expect("legal");
            let best_reply = child
                .legal_moves()
                .iter()
                .filter_map(|r| move_score(&child, &UciMove::from_standard(*r)))
                .max()
                .expect("a reply");
            // Sign flip: the reply's score is the child's side to move's; the move's score is the mover's.
            let searched = -best_reply.as_cp().expect("no mate");
            largest = largest.max((searched - move_score(&start, &uci).expect("legal").as_cp().expect("cp")).abs());
        }
        largest
    };
    let smooth = largest_change(ScriptedEvaluator::smooth_move_score);
    let keyed = largest_change(ScriptedEvaluator::move_score);
    assert!(smooth <= 40, "smooth: a searched value moved by {smooth} cp");
    assert!(keyed > 40, "keyed: a searched value moved by at most {keyed} cp");
}

#[test]
fn bench_host_settles_the_same_depth_with_one_and_many_workers() {
    let fake = common::fake();
    let result = deeptree(&[
        "bench",
        "host",
        "--workers",
        "3",
        "--latency-ms",
        "1",
        "--depth",
        "2",
        "--fake-engine",
        fake,
        "--json",
    ]);
    assert_eq!(result["workers"], 3, "{result}");
    assert_eq!(result["latency_ms"], 1, "{result}");
    assert_eq!(result["depth"], 2, "{result}");
    for key in ["speedup", "utilization", "host_us_per_search"] {
        assert!(result[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {result}");
    }
    assert!(result["utilization"].as_f64().is_some_and(|u| u <= 1.0), "{result}");
}

/// `analyze --look-ahead off` runs nothing ahead of its turn, and stores the same tree as the default.
#[test]
fn analyze_look_ahead_off_runs_nothing_ahead_and_stores_the_same_tree() {
    let engine = format!("{} --mode smooth --latency-ms 1", common::fake());
    let run = |db: &std::path::Path, extra: &[&str]| {
        let db = db.display().to_string();
        let mut args =
            vec!["--db", &db, "analyze", "--engine", &engine, "--workers", "4", "--max-depth", "2", "--json"];
        args.extend_from_slice(extra);
        deeptree(&args)
    };
    let off = tempfile::tempdir().expect("a directory");
    let on = tempfile::tempdir().expect("a directory");
    let report_off = run(off.path(), &["--look-ahead", "off"]);
    let report_on = run(on.path(), &[]);
    assert_eq!(report_off["ahead"], 0, "{report_off}");
    assert_eq!(report_off["evaluations"], report_off["stored"], "{report_off}");
    assert!(report_on["ahead"].as_u64().is_some_and(|n| n > 0), "{report_on}");
    assert_eq!(report_on["stored"], report_off["stored"]);
    let show = |db: &std::path::Path| {
        let db = db.display().to_string();
        deeptree(&["--db", &db, "show", "--depth", "4", "--json"])
    };
    assert_eq!(show(off.path()), show(on.path()));
    let refused = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(["--db", &off.path().display().to_string(), "analyze", "--look-ahead", "lots"])
        .output()
        .expect("deeptree runs");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("look_ahead takes a number -1..255 or off, not 'lots'"), "{said}");
}
