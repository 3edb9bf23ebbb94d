//! `deeptree bench`: measurements of deeptree's parts, each against a baseline in the same run.

use crate::game::Line;
use std::{io::Write, path::Path};

use crate::{
    bench,
    config::Config,
    engine::{EngineConfig, EnginePool},
    search::{
        analysis::{Analysis, Params},
        evaluator::PoolEvaluator,
    },
    store::{Store, StoreOptions},
};

use super::{CommandResult, open_store};

#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// The inner-engine pool against a bare loop over pipes (depth 1), and two workers against one (depth 10).
    Engine {
        /// Engine command line (default: the settings' engine).
        #[arg(long)]
        engine: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The host: settle the start position to a software depth with 1 worker, then N fake engines of a fixed
    /// latency; speed-up, utilization and the host's own time per search.
    Host {
        #[arg(long, default_value_t = 32)]
        workers: usize,
        #[arg(long, default_value_t = 20)]
        latency_ms: u64,
        /// Software depth (default: the smallest whose 1-worker run asks 5,000 searches or more).
        #[arg(long)]
        depth: Option<u8>,
        /// The fake engine's scores: `keyed` (a hash of each position a move leads to) or `smooth` (material and
        /// placement, so that values change little from one ply to the next, as a real engine's do).
        #[arg(long, default_value = "keyed", value_parser = ["keyed", "smooth"])]
        scores: String,
        /// Run nothing ahead of its turn in the N-worker run (every pass waits for its slowest search): the
        /// baseline of the host's look ahead.
        #[arg(long)]
        no_look_ahead: bool,
        /// The fake engine (default: deeptree-fake-engine beside this executable).
        #[arg(long)]
        fake_engine: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The UCI relay: latency of `go` and `bestmove` through deeptree against a bare pipe, with the fake engine.
    Relay {
        #[arg(long, default_value_t = 1000)]
        searches: usize,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// The fake engine (default: deeptree-fake-engine beside this executable).
        #[arg(long)]
        fake_engine: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// `stop` and `ponderhit` through deeptree, with the real inner engine, on a tree position (growth under way, or
    /// the tree answering) and on relayed ones: milliseconds from the GUI's command to `bestmove`, against the bare
    /// engine's `stop` in the same run.
    Stops {
        /// Trials of each case.
        #[arg(long, default_value_t = 30)]
        trials: usize,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Engine command line (default: the settings' engine).
        #[arg(long)]
        engine: Option<String>,
        /// The deeptree binary measured (default: this one), for a comparison with another build.
        #[arg(long)]
        deeptree: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// On a generated store: time the alpha scores of a root and the idea update after one new evaluation.
    Search {
        #[arg(long, default_value_t = 1_000_000)]
        positions: usize,
        #[arg(long, default_value_t = 101)]
        samples: usize,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[arg(long)]
        json: bool,
    },
    /// Settle a software depth from the start position with one worker, then two: the speed-up.
    Settle {
        #[arg(long, default_value_t = 10)]
        engine_depth: u8,
        #[arg(long, default_value_t = 20)]
        move_distance: u32,
        #[arg(long, default_value_t = 3)]
        depth: u8,
        #[arg(long)]
        engine: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Build a generated store (three edges a position) and measure inserts, point reads and size on disk.
    Store {
        #[arg(long, default_value_t = 1_000_000)]
        positions: usize,
        #[arg(long, default_value_t = 1_000_000)]
        reads: usize,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one bench; `db` names the store the store bench builds (a temporary one when absent).
pub fn run(db: Option<&Path>, config: &Config, what: BenchCommand) -> CommandResult {
    match what {
        BenchCommand::Host { workers, latency_ms, depth, scores, no_look_ahead, fake_engine, json } => {
            host(workers, latency_ms, depth, scores, no_look_ahead, fake_engine, json)
        }
        BenchCommand::Store { positions, reads, seed, json } => store(db, config, positions, reads, seed, json),
        BenchCommand::Engine { engine: command, json } => engine(config, command, json),
        BenchCommand::Relay { searches, seed, fake_engine, json } => relay(searches, seed, fake_engine, json),
        BenchCommand::Search { positions, samples, seed, json } => search(config, positions, samples, seed, json),
        BenchCommand::Stops { trials, seed, engine, deeptree, json } => {
            stops(config, trials, seed, engine, deeptree, json)
        }
        BenchCommand::Settle { engine_depth, move_distance, depth, engine, json } => {
            settle(config, engine_depth, move_distance, depth, engine, json)
        }
    }
}

/// `bench host`: the host settling the start position with 1 worker, then N fake engines.
fn host(
    workers: usize,
    latency_ms: u64,
    depth: Option<u8>,
    scores: String,
    no_look_ahead: bool,
    fake_engine: Option<std::path::PathBuf>,
    json: bool,
) -> CommandResult {
    let fake = fake_engine_path(fake_engine)?;
    let result = crate::search::host_bench::host_bench(&fake, &scores, workers, latency_ms, depth, !no_look_ahead)?;
    if json {
        let value = serde_json::json!({
            "workers": result.workers, "latency_ms": result.latency_ms, "depth": result.depth,
            "scores": scores, "look_ahead": !no_look_ahead,
            "speedup": result.speedup, "utilization": result.utilization,
            "host_us_per_search": result.host_us_per_search,
        });
        println!("{value}");
    } else {
        println!(
            "settling depth {} with searches of {} ms: {} searches, 1 worker {:.2} s, {} workers {:.2} s",
            result.depth,
            result.latency_ms,
            result.one.searches,
            result.one.seconds,
            result.workers,
            result.many.seconds
        );
        println!("speed-up             {:.2}", result.speedup);
        println!(
            "utilization          {:.2} ({} searches with {} workers)",
            result.utilization, result.many.searches, result.workers
        );
        println!("host time a search   {:.0} us", result.host_us_per_search);
    }

    Ok(())
}

/// `bench store`: inserts, point reads and size on disk of a generated store.
fn store(db: Option<&Path>, config: &Config, positions: usize, reads: usize, seed: u64, json: bool) -> CommandResult {
    // A temporary store is removed however the bench ends (its directory is dropped after the store).
    let (dir, _scratch) = match db {
        Some(dir) => (dir.to_path_buf(), None),
        None => {
            let scratch = scratch_dir("deeptree-bench-")?;
            (scratch.path().to_path_buf(), Some(scratch))
        }
    };
    let store = Store::open(&dir, &StoreOptions::from(config))?;
    eprintln!("building a store of {positions} positions in {} ...", dir.display());
    let result = bench::store_bench(&store, positions, reads, seed)?;
    drop(store);
    if json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!("positions             {}", result.positions);
        println!("edges (parent links)  {}", result.edges);
        println!("generation            {:.1} s (not timed below)", result.generate_seconds);
        println!("batched inserts       {:.0} positions/s", result.inserts_per_second);
        println!("point reads, decoded  {:.0} /s (one thread, warm)", result.reads_per_second);
        println!(
            "point reads, raw      {:.0} /s (baseline; decoding costs x{:.2})",
            result.raw_reads_per_second, result.decode_cost_ratio
        );
        println!(
            "point reads, unchecked {:.0} /s (baseline: decoded, checksums not checked; checking costs x{:.3})",
            result.unchecked_reads_per_second, result.checksum_cost_ratio
        );
        println!("parent lookups        {:.0} /s", result.parent_lookups_per_second);
        println!("bytes on disk         {} ({:.1} per position)", result.bytes, result.bytes_per_position);
        println!("bytes in tree pages   {:.1} per position", result.tree_bytes_per_position);
    }

    Ok(())
}

/// `bench engine`: the inner-engine pool against a bare loop over pipes, and two workers against one.
fn engine(config: &Config, engine: Option<String>, json: bool) -> CommandResult {
    let command = engine.unwrap_or_else(|| config.engine.clone());
    let result = crate::engine::bench::engine_bench(&command, &Default::default())?;
    if json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!("engine                {} ({} cores)", result.engine, result.cores);
        println!(
            "depth 1, pool vs bare  {:.0} vs {:.0} evaluations/s, ratio {:.2}",
            result.pool_evals_per_sec, result.bare_evals_per_sec, result.pool_to_bare_ratio
        );
        println!(
            "depth {}, {} searches  one worker {:.3} s, two workers {:.3} s, speed-up {:.2}",
            result.deep_depth,
            result.deep_evaluations,
            result.one_worker_secs,
            result.two_workers_secs,
            result.two_worker_speedup
        );
    }

    Ok(())
}

/// `bench relay`: the UCI relay's latency against a bare pipe.
fn relay(searches: usize, seed: u64, fake_engine: Option<std::path::PathBuf>, json: bool) -> CommandResult {
    let deeptree = std::env::current_exe()?;
    let fake = fake_engine_path(fake_engine)?;
    let result = crate::uci::bench::relay_bench(&deeptree, &fake, searches.max(1), seed)?;
    if json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!("searches                {}", result.searches);
        println!("hop                     median      p99   (ms)");
        for (name, hop) in [
            ("go, through deeptree", result.relay_go),
            ("go, bare pipe", result.bare_go),
            ("go, added by deeptree", result.added_go),
            ("bestmove, through deeptree", result.relay_bestmove),
            ("bestmove, bare pipe", result.bare_bestmove),
            ("bestmove, added by deeptree", result.added_bestmove),
        ] {
            println!("{name:<28} {:>7.3} {:>8.3}", hop.median_ms, hop.p99_ms);
        }
    }

    Ok(())
}

/// `bench stops`: `stop` and `ponderhit` through deeptree against the bare engine's `stop`.
fn stops(
    config: &Config,
    trials: usize,
    seed: u64,
    engine: Option<String>,
    deeptree: Option<std::path::PathBuf>,
    json: bool,
) -> CommandResult {
    let deeptree = match deeptree {
        Some(path) => path,
        None => std::env::current_exe()?,
    };
    let engine = engine.unwrap_or_else(|| config.engine.clone());
    let result = crate::uci::stop_bench::stop_bench(&deeptree, &engine, trials.max(1), seed)?;
    if json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!("inner engine {}, {} trials a case", result.engine, result.bare.trials);
        println!("{:<46} {:>8} {:>8} {:>8}   (ms to bestmove)", "case", "median", "p99", "max");
        for case in std::iter::once(&result.bare).chain(&result.cases) {
            println!("{:<46} {:>8.1} {:>8.1} {:>8.1}", case.name, case.median_ms, case.p99_ms, case.max_ms);
        }
    }
    Ok(())
}

/// `bench search`: alpha scores of a root and the idea update on a generated store.
fn search(config: &Config, positions: usize, samples: usize, seed: u64, json: bool) -> CommandResult {
    let scratch = scratch_dir("deeptree-bench-search-")?;
    let dir = scratch.path();
    let store = Store::open(dir, &StoreOptions::from(config))?;
    eprintln!("building a store of {positions} positions in {} ...", dir.display());
    let result = bench::search_bench(&store, positions, samples.max(1), seed)?;
    drop(store);
    if json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!("positions                     {}", result.positions);
        println!(
            "alpha scores of a root        median {:.3} ms, max {:.3} ms",
            result.alpha_median_ms, result.alpha_max_ms
        );
        println!("idea update, one evaluation   median {:.3} ms (in the writer)", result.idea_update_median_ms);
        println!("submit to commit              median {:.3} ms (includes the sync to disk)", result.commit_median_ms);
    }

    Ok(())
}

/// `bench settle`: one worker against two settling a software depth.
fn settle(
    config: &Config,
    engine_depth: u8,
    move_distance: u32,
    depth: u8,
    engine: Option<String>,
    json: bool,
) -> CommandResult {
    let mut engine_config = EngineConfig::from(config);
    if let Some(engine) = engine {
        engine_config.command = engine;
    }
    let mut seconds = Vec::new();
    let mut evaluations = Vec::new();
    for workers in [1usize, 2] {
        let scratch = scratch_dir(&format!("deeptree-bench-settle-{workers}-"))?;
        let store = Store::open(scratch.path(), &StoreOptions::from(config))?;
        let pool = EnginePool::uniform(&engine_config, workers)?;
        let params = Params::new(engine_depth, move_distance as i32).with_max_depth(depth);
        let mut analysis = Analysis::new(&store, PoolEvaluator::new(pool), params);
        let started = std::time::Instant::now();
        let report = analysis.run(&Line::parse(None, "")?, |_| {})?;
        seconds.push(started.elapsed().as_secs_f64());
        evaluations.push(report.evaluations);
        drop(analysis);
        drop(store);
        drop(scratch);
        eprintln!("{workers} worker(s): {:.2} s, {} evaluations", seconds[seconds.len() - 1], report.evaluations);
    }
    let ratio = seconds[1] / seconds[0].max(1e-9);
    let result = serde_json::json!({
        "engine_depth": engine_depth, "move_distance": move_distance, "software_depth": depth,
        "seconds_one_worker": seconds[0], "seconds_two_workers": seconds[1],
        "evaluations": evaluations, "time_ratio_two_over_one": ratio,
    });
    if json {
        println!("{result}");
    } else {
        println!(
            "settling depth {depth} (D {engine_depth}, distance {move_distance}): one worker {:.2} s, two workers {:.2} s, ratio {ratio:.2}",
            seconds[0], seconds[1]
        );
    }

    Ok(())
}

/// A new temporary directory named `prefix` and a random suffix, removed with everything in it when it is dropped.
fn scratch_dir(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(prefix).tempdir()
}

/// The fake engine the relay and host benches drive: the one given, else `deeptree-fake-engine` beside this
/// executable (cargo builds both).
fn fake_engine_path(given: Option<std::path::PathBuf>) -> Result<std::path::PathBuf, String> {
    let fake = match given {
        Some(path) => path,
        None => std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("deeptree-fake-engine"),
    };
    if fake.is_file() {
        Ok(fake)
    } else {
        Err(format!(
            "this bench needs the fake engine at {} (cargo build --release builds it), or --fake-engine PATH",
            fake.display()
        ))
    }
}

/// `deeptree fill`: generated positions, for the crash tests.
#[derive(Debug, clap::Args)]
pub struct FillArgs {
    #[arg(long, default_value_t = 10_000)]
    pub positions: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
}

/// Writes generated positions into the store in `db` as a bulk load, settled every ten submissions, printing
/// `committed N` after each settle.
pub fn fill(db: Option<&Path>, config: &Config, args: FillArgs) -> CommandResult {
    let FillArgs { positions, seed, batch } = args;
    let store = open_store(db, config)?;
    let changes = bench::random_positions(seed, positions);
    let mut out = std::io::stdout().lock();
    bench::write_all(&store, changes, batch.max(1), Some(10), |n| {
        let _ = writeln!(out, "committed {n}");
        let _ = out.flush();
    })?;
    Ok(())
}
