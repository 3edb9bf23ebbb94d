//! The engine benchmark runs end to end (tiny sizes; the figures themselves are measured at release).

use deeptree::engine::bench::{EngineBenchSizes, engine_bench};

#[test]
fn engine_bench_reports_every_figure() {
    let command = std::env::var("DEEPTREE_TEST_ENGINE").unwrap_or_else(|_| "stockfish".to_owned());
    let sizes = EngineBenchSizes {
        shallow_evaluations: 40,
        shallow_rounds: 2,
        deep_depth: 4,
        deep_evaluations: 4,
        deep_rounds: 1,
    };
    let bench = engine_bench(&command, &sizes).unwrap();
    assert!(bench.engine.starts_with("Stockfish"), "{}", bench.engine);
    assert_eq!((bench.shallow_evaluations, bench.deep_evaluations, bench.deep_depth), (40, 4, 4));
    for figure in
        [bench.bare_evals_per_sec, bench.pool_evals_per_sec, bench.pool_to_bare_ratio, bench.two_worker_speedup]
    {
        assert!(figure.is_finite() && figure > 0.0, "{bench:?}");
    }
    let json = serde_json::to_value(&bench).unwrap();
    assert!(json["pool_to_bare_ratio"].is_number() && json["two_worker_speedup"].is_number());
}

/// The full benchmark: `scripts/engine-bench` runs it at release and prints the figures as JSON.
#[test]
#[ignore = "takes a while; run with scripts/engine-bench"]
fn engine_bench_full() {
    let command = std::env::var("DEEPTREE_TEST_ENGINE").unwrap_or_else(|_| "stockfish".to_owned());
    let bench = engine_bench(&command, &EngineBenchSizes::default()).unwrap();
    println!("{}", serde_json::to_string_pretty(&bench).unwrap());
}
