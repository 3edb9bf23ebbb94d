//! `deeptree analyze`: grow the tree of a root, settling each software depth, then deepening; or, with `--roots
//! FILE`, grow the trees of many roots together (a book).

use crate::game::{Line, quote};
use std::{
    path::Path,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use crate::{
    config::Config,
    engine::{EngineConfig, EnginePool, Limit, spec::EngineSpec},
    interop::{played::exits, roots::read_roots},
    logger::{Progress, StatusLine},
    search::{
        analysis::{Analysis, AnalysisOptions, Params, Trace},
        evaluator::PoolEvaluator,
        roots::{BookRoot, RootProgress, grow, priority},
        split::{SplitError, direct_first},
    },
    store::Store,
};

use super::{CommandResult, open_store};

/// `deeptree analyze [--fen FEN] [--moves "..."] ...`
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Start position (default: the standard start position).
    #[arg(long)]
    pub fen: Option<String>,
    /// Grow many roots together: an EPD file (every line a root) or a PGN file (every game's final position a root,
    /// its main line the way there). The engines are split into groups that grow the roots at once, shallowest
    /// settled depth first; `--time` is the budget of the whole run.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["fen", "moves", "trace"])]
    pub roots: Option<std::path::PathBuf>,
    /// Growth that follows play: grow the positions where the games of this PGN file left the tree (the first
    /// position of each game, with the player to move, where the tree knows less than --play-depth), the positions
    /// more games reached first, each up to the play depth. A UCI session records the games it plays in the store's
    /// folder as games.pgn (the `LearnFromGames` option).
    #[arg(long, value_name = "PGN", conflicts_with_all = ["fen", "moves", "trace", "roots", "nodes", "split"])]
    pub from_games: Option<std::path::PathBuf>,
    /// With --from-games: the side of each game to learn for, by a name in its White or Black tag (default: both
    /// sides).
    #[arg(long, value_name = "NAME", requires = "from_games")]
    pub player: Option<String>,
    /// With --from-games: the depth a direct search reaches in the games' time control; a position where the tree
    /// knows less is where a game left it (default 20).
    #[arg(long, value_name = "DEPTH", requires = "from_games")]
    pub play_depth: Option<u8>,
    /// Moves played from the start position, in UCI notation: the last position is the root.
    #[arg(long, default_value = "")]
    pub moves: String,
    /// Engine depth D of every inner-engine search (default: the settings' engine_depth).
    #[arg(long)]
    pub engine_depth: Option<u8>,
    /// Move distance in centipawns at plies 0 and 1 (default: the settings' move_distance).
    #[arg(long)]
    pub move_distance: Option<u32>,
    /// Deepest software depth to settle (default 4 without --time or --nodes, unlimited with either).
    #[arg(long)]
    pub max_depth: Option<u8>,
    /// Time budget in seconds.
    #[arg(long)]
    pub time: Option<f64>,
    /// Node budget: stop once the inner engines have reported N nodes in all for the searches answered (searches
    /// still running then are abandoned; `--json` reports `node_overshoot`). Not with --roots.
    #[arg(long, value_name = "N", conflicts_with = "roots")]
    pub nodes: Option<u64>,
    /// Deep Blue's split: spend this share of the --nodes or --time budget (between 0 and 1) on one direct search of
    /// the root first, store its principal variation as the tree's spine of deep evaluations, then grow the tree
    /// with the rest, testing at the engine depth the moves the direct search rejected along its line. The direct
    /// search runs on one worker: with --time and several workers the others wait for its share.
    #[arg(long, value_name = "SHARE", conflicts_with = "roots")]
    pub split: Option<f64>,
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
    /// Deep Blue's "no progress" rule: refuse a move into a position the same side could have reached earlier on the
    /// path (default: the settings' no_progress, off).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub no_progress: Option<bool>,
    /// Screening: search a node's moves without an edge at the engine depth only when a screen two plies shallower
    /// (plus the margin) could still reach its window (default: the settings' screen).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub screen: Option<bool>,
    /// Centipawns a screened score may rise at the engine depth (default: the settings' screen_margin).
    #[arg(long, value_name = "CP")]
    pub screen_margin: Option<u32>,
    /// Write one line per search decision to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// Run more workers than MAX_WORKERS_PER_CORE (4) times this machine's cores: by default such a count is
    /// refused, as a typing slip that would start thousands of engines (engines on other machines count too).
    #[arg(long)]
    pub insist_workers: bool,
    /// End with one JSON object on stdout (settled rows go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Chess960: the FEN in Shredder-FEN or X-FEN, castling as king takes rook (a Shredder-FEN implies it).
    #[arg(long)]
    pub chess960: bool,
}

/// The depth a direct search reaches at the games' time control, by default: Stockfish at some 0.1 to 0.3 s a move.
pub const DEFAULT_PLAY_DEPTH: u8 = 20;

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

fn parse_on_off(text: &str) -> Result<bool, String> {
    match text.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("'{other}': give on or off")),
    }
}

impl AnalyzeArgs {
    /// The settings with this command line's choices over them: one `Config` from which the engines' and the
    /// search's options are taken.
    fn over(&self, config: &Config) -> Config {
        let mut config = config.clone();
        if let Some(engine_depth) = self.engine_depth {
            config.engine_depth = engine_depth;
        }
        if let Some(move_distance) = self.move_distance {
            config.move_distance = move_distance;
        }
        if let Some(engine) = &self.engine {
            config.engine = engine.clone();
        }
        if let Some(workers) = self.workers.filter(|w| *w > 0) {
            config.workers = workers;
        }
        // --engine or --workers on the command line choose one kind of engine over the settings' list.
        if let Some(engines) = &self.engines {
            config.engines = engines.clone();
        } else if self.engine.is_some() || self.workers.is_some() {
            config.engines.clear();
        }
        if let Some(LookAhead(depths)) = self.look_ahead {
            config.look_ahead = depths.map_or(-1, i32::from);
        }
        if let Some(no_progress) = self.no_progress {
            config.no_progress = no_progress;
        }
        if let Some(screen) = self.screen {
            config.screen = screen;
        }
        if let Some(screen_margin) = self.screen_margin {
            config.screen_margin = screen_margin;
        }
        config
    }
}

/// Runs `deeptree analyze` on the store in `db` (created when absent).
/// Most inner-engine workers per core of this machine that `analyze` starts without `--insist-workers`.
pub const MAX_WORKERS_PER_CORE: usize = 4;

pub fn run(db: Option<&Path>, config: &Config, args: AnalyzeArgs) -> CommandResult {
    // The time budget counts from here: starting the engines is part of it.
    let started = std::time::Instant::now();
    let config = &args.over(config);
    let AnalyzeArgs {
        fen,
        roots,
        moves,
        max_depth,
        time,
        nodes,
        trace,
        json,
        chess960,
        insist_workers,
        split,
        from_games,
        ..
    } = args;
    if nodes == Some(0) {
        return Err("--nodes 0: give a positive number of nodes".into());
    }
    match split {
        Some(share) if !(share > 0.0 && share < 1.0) => {
            return Err(format!("--split {share}: give a share of the budget between 0 and 1").into());
        }
        Some(_) if nodes.is_none() && time.is_none() => {
            return Err("--split shares a budget: give --nodes or --time too".into());
        }
        _ => {}
    }
    let play_depth = args.play_depth.unwrap_or(DEFAULT_PLAY_DEPTH);
    if from_games.is_some() && play_depth <= config.engine_depth {
        return Err(format!(
            "--play-depth {play_depth}: give a depth deeper than the engine depth {}",
            config.engine_depth
        )
        .into());
    }
    let (line, book) = match &roots {
        None if from_games.is_some() => (Line::start_position(), Some((Vec::new(), Vec::new()))),
        None => (Line::parse_in(fen.as_deref(), &moves, chess960)?, None),
        Some(path) => {
            let (roots, skipped) = read_roots(path, chess960)?;
            for skip in &skipped {
                eprintln!("{}: {} skipped: {}", path.display(), skip.source, skip.error);
            }
            if roots.is_empty() {
                return Err(format!("{}: no root to grow", path.display()).into());
            }
            let first = roots[0].line.clone();
            let book: Vec<BookRoot> = roots.into_iter().map(|r| BookRoot::new(r.line, r.source.to_string())).collect();
            (first, Some((book, skipped)))
        }
    };
    let chess960 = chess960 || book.as_ref().map_or(line.chess960, |(b, _)| b.iter().any(|r| r.line.chess960));
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
    let specs = EngineSpec::parse_list(&config.engines).map_err(|e| format!("--engines: {e}"))?;
    let workers = if config.workers > 0 { config.workers } else { crate::engine::default_workers() };
    // Refused before anything starts, the store included.
    let total = if specs.is_empty() { workers } else { specs.iter().map(|s| s.workers).sum() };
    let cores = crate::engine::default_workers();
    if total > MAX_WORKERS_PER_CORE * cores && !insist_workers {
        return Err(format!(
            "{total} workers: more than {MAX_WORKERS_PER_CORE} per core of this machine ({cores} cores, at most {}); \
             --insist-workers runs them anyway",
            MAX_WORKERS_PER_CORE * cores
        )
        .into());
    }
    // An engine that cannot start is refused before the store is created.
    let commands: Vec<&str> = if specs.is_empty() {
        vec![config.engine.as_str()]
    } else {
        specs.iter().map(|s| s.command.as_str()).collect()
    };
    if let Some(missing) = commands.iter().find(|c| !crate::engine::program_exists(c)) {
        return Err(format!("cannot start the inner engine {}: no such program", quote(missing)).into());
    }
    let store = open_store(db, config)?;
    let mut engine_config = EngineConfig::from(config);
    if chess960 {
        // The engines read and write castling as king takes rook.
        engine_config = engine_config.with_option("UCI_Chess960", "true");
    }
    // Ctrl-C from here on stops the analysis cleanly (engines run in their own process groups).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handler_stop = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || handler_stop.store(true, Ordering::Relaxed)) {
        log::warn!("Ctrl-C will not stop the analysis cleanly: {e}");
    }
    let budget = time.is_some() || nodes.is_some();
    let default_max = if from_games.is_some() {
        // Each exit grows until the tree answers there: its combined depth reaches the play depth.
        play_depth - config.engine_depth
    } else if budget {
        u8::MAX - 1
    } else {
        4
    };
    let params =
        Params::from(config).with_max_depth(max_depth.unwrap_or(default_max)).with_time(time).with_nodes(nodes);
    let look_ahead = config.look_ahead();
    let book = match (&from_games, book) {
        (Some(path), _) => {
            let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let found = {
                let view = store.read()?;
                exits(&view, std::io::BufReader::new(file), &params, play_depth, args.player.as_deref())?
            };
            let text = format!(
                "{} games: {} left the tree at {} positions, {} stayed in it{}; play depth {play_depth}, engine depth \
                 {}: each position grown to software depth {}, the positions more games reached first",
                found.games,
                found.exits.iter().map(|e| u64::from(e.games)).sum::<u64>(),
                found.exits.len(),
                found.stayed,
                if found.without_player > 0 {
                    format!(", {} without the player", found.without_player)
                } else {
                    String::new()
                },
                params.engine_depth,
                params.max_depth
            );
            if json {
                eprintln!("{text}")
            } else {
                println!("{text}")
            }
            for (i, exit) in found.exits.iter().enumerate() {
                let text = format!(
                    "exit {:>3}: {:>3} games (priority {}), first game {} ply {}, known depth {}: {}",
                    i + 1,
                    exit.games,
                    priority(exit.games),
                    exit.game,
                    exit.ply,
                    exit.known_depth.map_or("-".to_owned(), |d| d.to_string()),
                    exit.fen
                );
                if json { eprintln!("{text}") } else { println!("{text}") }
            }
            for skip in &found.skipped {
                eprintln!("{}: {} skipped: {}", path.display(), skip.source, skip.error);
            }
            if found.exits.is_empty() {
                if json {
                    println!("{}", serde_json::json!({ "exits": found }));
                }
                return Ok(());
            }
            let roots = found
                .exits
                .iter()
                .map(|e| BookRoot {
                    line: e.line.clone(),
                    label: format!("game {} ply {}", e.game, e.ply),
                    weight: e.games,
                })
                .collect::<Vec<BookRoot>>();
            if !chess960 && roots.iter().any(|r| r.line.chess960) {
                // Games of Chess960 (their `Variant` tag): the engines read and write castling as king takes rook.
                engine_config = engine_config.with_option("UCI_Chess960", "true");
            }
            Some((roots, found.skipped))
        }
        (None, book) => book,
    };
    if let Some((book, skipped)) = book {
        let configs = if specs.is_empty() {
            vec![engine_config.clone(); workers.max(1)]
        } else {
            EngineSpec::configs(&specs, &engine_config)
        };
        let book = Book { roots: book, skipped, params, look_ahead, json, stop, started };
        return grow_book(&store, configs, book);
    }
    let pool = if specs.is_empty() {
        EnginePool::uniform(&engine_config, workers)
            .map_err(|e| format!("cannot start the inner engine {}: {e}", quote(&engine_config.command)))?
    } else {
        EnginePool::start(EngineSpec::configs(&specs, &engine_config))
            .map_err(|e| format!("cannot start the inner engines: {e}"))?
    };
    // Deep Blue's split: the direct search's share of the budget is spent first, and its nodes and time count.
    let (params, spine) = match split {
        None => (params, None),
        Some(share) => {
            let limit = match (nodes, time) {
                (Some(n), _) => Limit::Nodes(((n as f64 * share) as u64).max(1)),
                (None, Some(t)) => Limit::MoveTime(t.saturating_sub(started.elapsed()).mul_f64(share)),
                (None, None) => return Err("--split shares a budget: give --nodes or --time too".into()),
            };
            match direct_first(&pool, &store, &line, limit, params.engine_depth, &stop) {
                Ok(spine) => {
                    let rest = nodes.map(|n| n.saturating_sub(spine.nodes));
                    (params.with_nodes(rest), Some(spine))
                }
                // Ctrl-C: the analysis below stops at once and reports what is stored.
                Err(SplitError::Stopped) => (params, None),
                Err(e) => return Err(format!("--split: {e}").into()),
            }
        }
    };
    // What starting the engines took is spent: a run that is out of time now stops at once.
    let params = params.with_time(time.map(|t| t.saturating_sub(started.elapsed())));
    let options = AnalysisOptions {
        look_ahead,
        trace: match &trace {
            Some(path) => Trace::to_file(path)?,
            None => Trace::off(),
        },
        progress: StatusLine::on_stderr().map(|line| Arc::new(line) as Arc<dyn Progress>),
        stop,
        line_edges: true,
    };
    let mut analysis = Analysis::with_options(&store, PoolEvaluator::new(pool), params, options);
    let engine_depth = analysis.params().engine_depth;
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
        let mut value = serde_json::to_value(&report)?;
        if let Some(spine) = &spine {
            // The direct search's nodes are the run's too.
            let all = report.engine_nodes + spine.nodes;
            value["engine_nodes"] = all.into();
            if let Some(budget) = nodes {
                value["node_budget"] = budget.into();
                value["node_overshoot"] = all.saturating_sub(budget).into();
            }
            value["split"] = serde_json::to_value(spine)?;
        }
        println!("{value}");
    } else {
        if let Some(spine) = &spine {
            println!(
                "split: a direct search of {} nodes to depth {} chose {} ({}); {} positions of its line stored",
                spine.nodes, spine.depth, spine.best, spine.score, spine.stored
            );
        }
        // What `stats` counts is what was stored: the searches a pass asked for. The rest of the searches answered
        // ran ahead of their turn and no pass asked for them (or came from other processes).
        let unasked = if report.unasked > 0 {
            format!(", {} answered ahead of their turn and not asked for (kept for other processes)", report.unasked)
        } else {
            String::new()
        };
        println!(
            "{} evaluations at engine depth {engine_depth} ({} stored in the tree, as stats counts them{unasked}), {} \
             positions in the tree, settled depth {}{}",
            report.evaluations,
            report.stored,
            report.positions,
            report.settled_depth.map_or("none".to_owned(), |d| d.to_string()),
            if report.stopped { " (stopped before the last depth settled)" } else { "" }
        );
        if let (Some(budget), Some(over)) = (report.node_budget, report.node_overshoot) {
            println!("{} engine nodes against a budget of {budget} ({over} over it)", report.engine_nodes);
        }
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

/// A run of `analyze --roots`.
struct Book {
    roots: Vec<BookRoot>,
    skipped: Vec<crate::interop::roots::SkippedRoot>,
    params: Params,
    look_ahead: Option<u8>,
    json: bool,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// When the command began: the time budget counts from there.
    started: std::time::Instant,
}

/// Grows the roots of a book with the engines of `configs`, split into as many groups as there are roots (at most
/// one per engine).
fn grow_book(store: &Store, configs: Vec<crate::engine::EngineConfig>, book: Book) -> CommandResult {
    let Book { roots, skipped, params, look_ahead, json, stop, started } = book;
    let groups = configs.len().min(roots.len()).max(1);
    let mut split: Vec<Vec<EngineConfig>> = vec![Vec::new(); groups];
    for (i, config) in configs.into_iter().enumerate() {
        split[i % groups].push(config);
    }
    let mut pools = Vec::with_capacity(groups);
    for configs in split {
        let command = configs.first().map(|c| c.command.clone()).unwrap_or_default();
        let pool = EnginePool::start(configs)
            .map_err(|e| format!("cannot start the inner engine {}: {e}", quote(&command)))?;
        pools.push(PoolEvaluator::new(pool));
    }
    // What starting the engines took is spent.
    let params = params.clone().with_time(params.time.map(|t| t.saturating_sub(started.elapsed())));
    let total = roots.len();
    if !json {
        println!(
            "{total} roots, {groups} groups of engines, engine depth {}, up to software depth {}{}",
            params.engine_depth,
            params.max_depth,
            params.time.map_or(String::new(), |t| format!(", {:.0} s", t.as_secs_f64()))
        );
    }
    let row = |p: &RootProgress| {
        let text = format!(
            "root {:>3}/{total} {:<10} settled depth {:>3}  {:>7} evaluations {:>6} shared {:>8.1} s{}",
            p.root,
            p.label,
            p.settled_depth.map_or("-".to_owned(), |d| d.to_string()),
            p.evaluations,
            p.shared,
            p.seconds,
            if p.stuck { "  (searches failed; left for a later run)" } else { "" }
        );
        if json { eprintln!("{text}") } else { println!("{text}") }
    };
    let status = StatusLine::on_stderr();
    let progress = status.as_ref().map(|line| line as &dyn Progress);
    let report = grow(store, pools, &roots, &params, look_ahead, &stop, progress, row)?;
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["skipped"] = serde_json::to_value(&skipped)?;
        println!("{value}");
    } else {
        let settled: Vec<u8> = report.roots.iter().filter_map(|r| r.settled_depth).collect();
        println!(
            "{} evaluations ({} taken from other roots' searches), {} positions in the tree; settled depth {} to {} over \
             {} roots{}{}",
            report.evaluations,
            report.shared,
            report.positions,
            settled.iter().min().map_or("-".to_owned(), ToString::to_string),
            settled.iter().max().map_or("-".to_owned(), ToString::to_string),
            report.roots.len(),
            if skipped.is_empty() { String::new() } else { format!(" ({} skipped)", skipped.len()) },
            if report.stopped { "; stopped: run the command again to resume" } else { "" }
        );
    }
    Ok(())
}
