//! `deeptree analyze`: grow the tree of a root, settling each software depth, then deepening.

use std::{path::Path, sync::atomic::Ordering, time::Duration};

use crate::{
    config::Config,
    engine::{EngineConfig, EnginePool, spec::EngineSpec},
    search::{
        analysis::{Analysis, Line, Params, Trace, quote},
        evaluator::PoolEvaluator,
    },
};

use super::{CommandResult, open_store};

/// `deeptree analyze [--fen FEN] [--moves "..."] ...`
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Start position (default: the standard start position).
    #[arg(long)]
    pub fen: Option<String>,
    /// Moves played from the start position, in UCI notation: the last position is the root.
    #[arg(long, default_value = "")]
    pub moves: String,
    /// Engine depth D of every inner-engine search (default: the settings' engine_depth).
    #[arg(long)]
    pub engine_depth: Option<u8>,
    /// Move distance in centipawns at plies 0 and 1 (default: the settings' move_distance).
    #[arg(long)]
    pub move_distance: Option<u32>,
    /// Deepest software depth to settle (default 4 without --time, unlimited with it).
    #[arg(long)]
    pub max_depth: Option<u8>,
    /// Time budget in seconds.
    #[arg(long)]
    pub time: Option<f64>,
    /// Inner-engine workers (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Inner engine command line (default: the settings' engine).
    #[arg(long)]
    pub engine: Option<String>,
    /// Inner engines, several kinds at once, in one line: `CMD | workers=N | threads=N | hash=MIB |
    /// option.NAME=VALUE ; CMD ...` (for example `stockfish | workers=12 ; ssh box stockfish | workers=2`). Replaces
    /// --engine and --workers (default: the settings' engines, if any).
    #[arg(long, conflicts_with_all = ["engine", "workers"])]
    pub engines: Option<String>,
    /// Software depths past the one being settled in which free engines may run searches ahead of their turn, or
    /// `off` to run none (every pass then waits for its slowest search; no engine time goes to searches no pass
    /// asks for). Default: the settings' look_ahead.
    #[arg(long, value_name = "DEPTHS|off", value_parser = parse_look_ahead)]
    pub look_ahead: Option<LookAhead>,
    /// Write one line per search decision to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// End with one JSON object on stdout (settled rows go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Chess960: the FEN in Shredder-FEN or X-FEN, castling as king takes rook (a Shredder-FEN implies it).
    #[arg(long)]
    pub chess960: bool,
}

/// `--look-ahead`: a number of software depths, or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookAhead(pub Option<u8>);

fn parse_look_ahead(text: &str) -> Result<LookAhead, String> {
    match text.trim() {
        "off" => Ok(LookAhead(None)),
        depths => depths
            .parse()
            .map(|d| LookAhead(Some(d)))
            .map_err(|_| format!("'{depths}': give a number of software depths (0 to 255) or off")),
    }
}

/// Runs `deeptree analyze` on the store in `db` (created when absent).
pub fn run(db: Option<&Path>, config: &Config, args: AnalyzeArgs) -> CommandResult {
    let AnalyzeArgs {
        fen,
        moves,
        engine_depth,
        move_distance,
        max_depth,
        time,
        workers,
        engine,
        engines,
        look_ahead,
        trace,
        json,
        chess960,
    } = args;
    let line = Line::parse_in(fen.as_deref(), &moves, chess960)?;
    // --engine or --workers on the command line choose one kind of engine over the settings' list.
    let engines = engines.or_else(|| (engine.is_none() && workers.is_none()).then(|| config.engines.clone()));
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
    let store = open_store(db, config)?;
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
        crate::engine::default_workers()
    });
    // Ctrl-C from here on stops the analysis cleanly (engines run in their own process groups).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handler_stop = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || handler_stop.store(true, Ordering::Relaxed)) {
        log::warn!("Ctrl-C will not stop the analysis cleanly: {e}");
    }
    let specs =
        EngineSpec::parse_list(engines.as_deref().unwrap_or_default()).map_err(|e| format!("--engines: {e}"))?;
    let pool = if specs.is_empty() {
        EnginePool::uniform(&engine_config, workers)
            .map_err(|e| format!("cannot start the inner engine {}: {e}", quote(&engine_config.command)))?
    } else {
        EnginePool::start(EngineSpec::configs(&specs, &engine_config))
            .map_err(|e| format!("cannot start the inner engines: {e}"))?
    };
    let params = Params {
        engine_depth: engine_depth.unwrap_or(config.engine_depth).max(1),
        move_distance: move_distance.unwrap_or(config.move_distance).min(100_000) as i32,
        max_depth: max_depth.unwrap_or(if time.is_some() { u8::MAX - 1 } else { 4 }),
        time,
    };
    let mut analysis = Analysis::new(&store, PoolEvaluator::new(pool), params);
    analysis.look_ahead = look_ahead.map_or(config.look_ahead(), |l| l.0);
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
        if report.ahead > 0 {
            println!(
                "{} searches ran ahead of their turn on engines a pass left free: {} of them were asked for, {} \
                 stopped when the tree no longer led to them, {} stopped when the run ended",
                report.ahead, report.ahead_used, report.aborted, report.abandoned
            );
        }
        if report.shared > 0 {
            println!(
                "{} answers were taken from searches another process sharing the tree ran (not asked again)",
                report.shared
            );
        }
    }
    Ok(())
}
