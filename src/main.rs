//! The `deeptree` command line. With no command it will speak UCI; see `deeptree --help`.

use std::{io::Write, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use std::{sync::atomic::Ordering, time::Duration};

use deeptree::{
    bench,
    config::Config,
    engine::{EngineConfig, EnginePool},
    search::{
        analysis::{Analysis, Line, Params, Trace, quote},
        evaluator::PoolEvaluator,
        show,
    },
    store::{Store, StoreError},
};
use shakmaty::Position;

#[derive(Parser)]
#[command(name = "deeptree", version, about = "A UCI meta-engine that grows a persistent deep-analysis tree")]
struct Cli {
    /// Directory of the tree store (default: the user's data directory, or tree_path in the settings).
    #[arg(long, global = true, env = "DEEPTREE_DB", value_name = "DIR")]
    db: Option<PathBuf>,
    /// Settings file (default: $DEEPTREE_CONFIG, else ~/.config/deeptree/deeptree.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// More log output on stderr (-v, -vv).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Grow the tree of a position: settle each software depth, then deepen.
    Analyze {
        /// Start position (default: the standard start position).
        #[arg(long)]
        fen: Option<String>,
        /// Moves played from the start position, in UCI notation: the last position is the root.
        #[arg(long, default_value = "")]
        moves: String,
        /// Engine depth D of every inner-engine search (default: the settings' engine_depth).
        #[arg(long)]
        engine_depth: Option<u8>,
        /// Move distance in centipawns at plies 0 and 1 (default: the settings' move_distance).
        #[arg(long)]
        move_distance: Option<u32>,
        /// Deepest software depth to settle (default 4 without --time, unlimited with it).
        #[arg(long)]
        max_depth: Option<u8>,
        /// Time budget in seconds.
        #[arg(long)]
        time: Option<f64>,
        /// Inner-engine workers (default: one per core).
        #[arg(long)]
        workers: Option<usize>,
        /// Inner engine command line (default: the settings' engine).
        #[arg(long)]
        engine: Option<String>,
        /// Write one line per search decision to FILE.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// End with one JSON object on stdout (settled rows go to stderr).
        #[arg(long)]
        json: bool,
        /// Chess960: the FEN in Shredder-FEN or X-FEN, castling as king takes rook (a Chess960 FEN implies it).
        #[arg(long)]
        chess960: bool,
    },
    /// Print the tree from a root with both scores and the depth of every move.
    Show {
        #[arg(long)]
        fen: Option<String>,
        #[arg(long, default_value = "")]
        moves: String,
        /// Plies to show below the root.
        #[arg(long, default_value_t = 3)]
        depth: u8,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Chess960 (a Chess960 FEN implies it).
        #[arg(long)]
        chess960: bool,
    },
    /// Import games (pgn: every move becomes an imported edge) or positions with evaluations (epd).
    Import(deeptree::interop::cli::ImportArgs),
    /// Export the tree from a root: a PGN game, a Polyglot book, EPD lines or a self-contained HTML page.
    Export(deeptree::interop::cli::ExportArgs),
    /// Merge another deeptree store (a tree grown elsewhere) into this one.
    Merge(deeptree::interop::cli::MergeArgs),
    /// Show what the store holds.
    Stats {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Measure deeptree's parts.
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// Write generated positions, printing `committed N` after each commit (used by the crash tests).
    #[command(hide = true)]
    Fill {
        #[arg(long, default_value_t = 10_000)]
        positions: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 500)]
        batch: usize,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The inner-engine pool against a bare loop over pipes (depth 1), and two workers against one (depth 10).
    Engine {
        /// Engine command line (default: the settings' engine).
        #[arg(long)]
        engine: Option<String>,
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
        fake_engine: Option<PathBuf>,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (config, config_file) = match Config::load(cli.config.as_deref()) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("deeptree: {e}");
            return ExitCode::from(2);
        }
    };
    let base = config.log_level.parse().unwrap_or(log::LevelFilter::Warn);
    deeptree::logger::init(base, cli.verbose);
    if let Some(file) = &config_file {
        log::info!("settings from {}", file.display());
    }
    match run(cli, &config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("deeptree: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Opens the tree store, creating it when absent: for the commands that write.
fn open_store(cli_db: Option<&std::path::Path>, config: &Config) -> Result<Store, StoreError> {
    let dir = config.tree_dir(cli_db);
    log::info!("tree store in {}", dir.display());
    Store::open(&dir, &config.store_options())
}

/// Opens an existing tree store: for the commands that only read, which must never create one (a mistyped path
/// fails with `no deeptree store at PATH` and leaves nothing behind).
fn open_existing_store(cli_db: Option<&std::path::Path>, config: &Config) -> Result<Store, StoreError> {
    let dir = config.tree_dir(cli_db);
    log::info!("tree store in {}", dir.display());
    Store::open_existing(&dir, &config.store_options())
}

fn run(cli: Cli, config: &Config) -> Result<(), Box<dyn std::error::Error>> {
    let Some(command) = cli.command else {
        // No command: speak UCI on stdin/stdout.
        deeptree::uci::run(config, config.tree_dir(cli.db.as_deref()));
        return Ok(());
    };
    match command {
        Command::Analyze {
            fen,
            moves,
            engine_depth,
            move_distance,
            max_depth,
            time,
            workers,
            engine,
            trace,
            json,
            chess960,
        } => {
            let line = Line::parse_in(fen.as_deref(), &moves, chess960)?;
            // Refused before anything starts: a budget of zero (or one that is not a duration) would otherwise
            // mean no budget at all, and the analysis would run for ever.
            let time = match time {
                None => None,
                Some(seconds) if seconds.is_finite() && seconds > 0.0 => {
                    // Past what a Duration holds, a budget is as good as none.
                    Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
                }
                Some(seconds) => return Err(format!("--time {seconds}: give a positive number of seconds").into()),
            };
            let store = open_store(cli.db.as_deref(), config)?;
            let mut engine_config = EngineConfig::from_config(config);
            if let Some(engine) = engine {
                engine_config.command = engine;
            }
            if line.chess960 {
                // The engines read and write castling as king takes rook.
                engine_config = engine_config.with_option("UCI_Chess960", "true");
            }
            let workers = workers.filter(|w| *w > 0).unwrap_or(if config.workers > 0 {
                config.workers
            } else {
                deeptree::engine::default_workers()
            });
            // Ctrl-C from here on stops the analysis cleanly (engines run in their own process groups).
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let handler_stop = stop.clone();
            if let Err(e) = ctrlc::set_handler(move || handler_stop.store(true, Ordering::Relaxed)) {
                log::warn!("Ctrl-C will not stop the analysis cleanly: {e}");
            }
            let pool = EnginePool::uniform(&engine_config, workers)
                .map_err(|e| format!("cannot start the inner engine {}: {e}", quote(&engine_config.command)))?;
            let params = Params {
                engine_depth: engine_depth.unwrap_or(config.engine_depth).max(1),
                move_distance: move_distance.unwrap_or(config.move_distance).min(100_000) as i32,
                max_depth: max_depth.unwrap_or(if time.is_some() { u8::MAX - 1 } else { 4 }),
                time,
            };
            let mut analysis = Analysis::new(&store, PoolEvaluator::new(pool), params);
            if let Some(path) = &trace {
                analysis.trace = Trace::to_file(path)?;
            }
            analysis.progress = true;
            analysis.stop = stop;
            let engine_depth = analysis.params.engine_depth;
            if !json {
                println!(
                    "{:>6} {:>9} {:>9} {:>11} {:>10} {:>9}",
                    "depth", "software", "combined", "evaluations", "positions", "seconds"
                );
            }
            let report = analysis.run(&line, |row| {
                let text = format!(
                    "{:>6} {:>9} {:>9} {:>11} {:>10} {:>9.1}",
                    row.software_depth,
                    format!("{}-{}", row.min_depth, row.max_depth),
                    format!("{}-{}", row.combined_min, row.combined_max),
                    row.evaluations,
                    row.positions,
                    row.elapsed_seconds
                );
                if json { eprintln!("{text}") } else { println!("{text}") }
            })?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!(
                    "{} evaluations at engine depth {engine_depth}, {} positions in the tree, settled depth {}{}",
                    report.evaluations,
                    report.positions,
                    report.settled_depth.map_or("none".to_owned(), |d| d.to_string()),
                    if report.stopped { " (stopped before the last depth settled)" } else { "" }
                );
            }
        }
        Command::Show { fen, moves, depth, json, chess960 } => {
            let line = Line::parse_in(fen.as_deref(), &moves, chess960)?;
            let store = open_existing_store(cli.db.as_deref(), config)?;
            let view = store.read()?;
            let tree = show::tree(&view, line.root(), &line.history_keys(), depth)?;
            if json {
                println!("{}", serde_json::to_string(&tree)?);
            } else {
                let root = line.root();
                let ply = (root.fullmoves().get() as usize - 1) * 2 + usize::from(root.turn().is_black());
                print!("{}", show::render_text(&tree, ply, root.turn().is_white()));
            }
        }
        Command::Import(args) => deeptree::interop::cli::import(&open_store(cli.db.as_deref(), config)?, &args)?,
        Command::Export(args) => {
            deeptree::interop::cli::export(&open_existing_store(cli.db.as_deref(), config)?, &args)?
        }
        Command::Merge(args) => {
            deeptree::interop::cli::merge(&open_store(cli.db.as_deref(), config)?, &args, &config.store_options())?
        }
        Command::Stats { json } => {
            let store = open_existing_store(cli.db.as_deref(), config)?;
            let stats = store.stats()?;
            let engine = store.engine_identity()?;
            if json {
                let mut value = serde_json::to_value(stats)?;
                value["path"] = store.dir().display().to_string().into();
                value["engine"] = engine.into();
                println!("{value}");
            } else {
                println!("tree       {}", store.dir().display());
                println!("positions  {}", stats.positions);
                println!("edges      {}", stats.edges);
                println!("bytes      {} ({:.1} MiB)", stats.bytes, stats.bytes as f64 / 1048576.0);
                println!("engine     {}", engine.as_deref().unwrap_or("(none recorded)"));
            }
        }
        Command::Bench { what: BenchCommand::Store { positions, reads, seed, json } } => {
            let scratch;
            let dir = match &cli.db {
                Some(dir) => dir.clone(),
                None => {
                    scratch = std::env::temp_dir().join(format!("deeptree-bench-{}", std::process::id()));
                    scratch.clone()
                }
            };
            let store = Store::open(&dir, &config.store_options())?;
            eprintln!("building a store of {positions} positions in {} ...", dir.display());
            let result = bench::store_bench(&store, positions, reads, seed)?;
            drop(store);
            if cli.db.is_none() {
                let _ = std::fs::remove_dir_all(&dir);
            }
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
                println!("parent lookups        {:.0} /s", result.parent_lookups_per_second);
                println!("bytes on disk         {} ({:.1} per position)", result.bytes, result.bytes_per_position);
                println!("bytes in tree pages   {:.1} per position", result.tree_bytes_per_position);
            }
        }
        Command::Bench { what: BenchCommand::Engine { engine, json } } => {
            let command = engine.unwrap_or_else(|| config.engine.clone());
            let result = deeptree::engine::bench::engine_bench(&command, &Default::default())?;
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
        }
        Command::Bench { what: BenchCommand::Relay { searches, seed, fake_engine, json } } => {
            let deeptree = std::env::current_exe()?;
            let fake = fake_engine.unwrap_or_else(|| deeptree.with_file_name("deeptree-fake-engine"));
            if !fake.is_file() {
                return Err(format!(
                    "bench relay needs the fake engine at {} (cargo build --release builds it), or --fake-engine PATH",
                    fake.display()
                )
                .into());
            }
            let result = deeptree::uci::bench::relay_bench(&deeptree, &fake, searches.max(1), seed)?;
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
        }
        Command::Bench { what: BenchCommand::Search { positions, samples, seed, json } } => {
            let dir = std::env::temp_dir().join(format!("deeptree-bench-search-{}", std::process::id()));
            let store = Store::open(&dir, &config.store_options())?;
            eprintln!("building a store of {positions} positions in {} ...", dir.display());
            let result = bench::search_bench(&store, positions, samples.max(1), seed);
            drop(store);
            let _ = std::fs::remove_dir_all(&dir);
            let result = result?;
            if json {
                println!("{}", serde_json::to_string(&result)?);
            } else {
                println!("positions                     {}", result.positions);
                println!(
                    "alpha scores of a root        median {:.3} ms, max {:.3} ms",
                    result.alpha_median_ms, result.alpha_max_ms
                );
                println!("idea update, one evaluation   median {:.3} ms (in the writer)", result.idea_update_median_ms);
                println!(
                    "submit to commit              median {:.3} ms (includes the sync to disk)",
                    result.commit_median_ms
                );
            }
        }
        Command::Bench { what: BenchCommand::Settle { engine_depth, move_distance, depth, engine, json } } => {
            let mut engine_config = EngineConfig::from_config(config);
            if let Some(engine) = engine {
                engine_config.command = engine;
            }
            let mut seconds = Vec::new();
            let mut evaluations = Vec::new();
            for workers in [1usize, 2] {
                let dir = std::env::temp_dir().join(format!("deeptree-bench-settle-{}-{workers}", std::process::id()));
                let _ = std::fs::remove_dir_all(&dir);
                let store = Store::open(&dir, &config.store_options())?;
                let pool = EnginePool::uniform(&engine_config, workers)?;
                let params = Params { engine_depth, move_distance: move_distance as i32, max_depth: depth, time: None };
                let mut analysis = Analysis::new(&store, PoolEvaluator::new(pool), params);
                let started = std::time::Instant::now();
                let report = analysis.run(&Line::parse(None, "")?, |_| {})?;
                seconds.push(started.elapsed().as_secs_f64());
                evaluations.push(report.evaluations);
                drop(analysis);
                drop(store);
                let _ = std::fs::remove_dir_all(&dir);
                eprintln!(
                    "{workers} worker(s): {:.2} s, {} evaluations",
                    seconds[seconds.len() - 1],
                    report.evaluations
                );
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
        }
        Command::Fill { positions, seed, batch } => {
            let store = open_store(cli.db.as_deref(), config)?;
            let changes = bench::random_positions(seed, positions);
            let mut out = std::io::stdout().lock();
            bench::write_all(&store, changes, batch.max(1), |n| {
                let _ = writeln!(out, "committed {n}");
                let _ = out.flush();
            })?;
        }
    }
    Ok(())
}
