//! `deeptree analyze`: grow the tree of a root, settling each software depth, then deepening; or, with `--roots
//! FILE`, grow the trees of many roots together (a book).

use crate::game::{Line, quote};
use std::{
    collections::HashSet,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use crate::{
    config::Config,
    engine::{EngineConfig, EnginePool, Limit, spec::EngineSpec},
    interop::{
        played::{Exits, exits},
        roots::{SkippedRoot, read_roots},
    },
    logger::{Progress, StatusLine},
    search::{
        analysis::{Analysis, AnalysisError, AnalysisOptions, Params, Report, Trace},
        cover::{Cover, Leaf, walk},
        evaluator::PoolEvaluator,
        roots::{BookReport, BookRoot, RootProgress, grow, grow_fed, priority},
        split::{Spine, SplitError, direct_first},
    },
    store::{
        Store,
        key::PositionKey,
        tasks::{MAX_PRIORITY, Task},
    },
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
    /// Grow the analyst's tasks (`deeptree task add`): every open task together, a task of priority k settling k
    /// depths ahead of one of priority 0, each within what is left of its own budget and up to its own depth; each
    /// task's progress is saved after every depth it settles, so a later run resumes it. `--time` bounds the run.
    #[arg(long, conflicts_with_all = ["fen", "moves", "trace", "roots", "from_games", "nodes", "split"])]
    pub tasks: bool,
    /// Growth for play, with --roots: rounds that each grow the positions a game from the roots is most likely to
    /// reach where the tree would not answer at once (known less than --play-depth, default the engine depth), the
    /// likeliest first; the opponent's replies are taken as likely by how close they score to its best. Each round
    /// says what it grows and the tree moves a game is expected to get. `--time` bounds the run.
    #[arg(long, requires = "roots", conflicts_with_all = ["from_games", "tasks", "nodes", "split", "max_depth"])]
    pub cover: bool,
    /// With --cover: centipawns a reply may score below the opponent's best for its probability to fall by a factor
    /// e (default 20).
    #[arg(long, value_name = "CP", requires = "cover")]
    pub cover_temperature: Option<u32>,
    /// With --cover: depth where games go. A position the tree answers is also grown, one ply deeper at a time, when
    /// its reach divided by FACTOR for each ply past the play depth ranks among the leaves (2: the first ply past
    /// the play depth where games arrive twice as often ranks with a new leaf, each further ply at half that). Without
    /// it, cover growth only widens the tree; with it, the run ends when no leaf is left above the walk's floor.
    #[arg(long, value_name = "FACTOR", requires = "cover")]
    pub cover_deepen: Option<f64>,
    /// With --from-games: the side of each game to learn for, by a name in its White or Black tag (default: both
    /// sides).
    #[arg(long, value_name = "NAME", requires = "from_games")]
    pub player: Option<String>,
    /// With --from-games or --cover: the depth a direct search reaches in the games' time control; a position where
    /// the tree knows less is where a game left it (default 20 with --from-games, the engine depth with --cover).
    #[arg(long, value_name = "DEPTH")]
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
    /// The move distance of White's moves where it differs (default: the settings' move_distance_white; 0: the
    /// move distance).
    #[arg(long, value_name = "CP")]
    pub move_distance_white: Option<u32>,
    /// The move distance of Black's moves where it differs (default: the settings' move_distance_black; 0: the
    /// move distance).
    #[arg(long, value_name = "CP")]
    pub move_distance_black: Option<u32>,
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
    /// Run more engine threads (each worker times its engine's threads) than MAX_WORKERS_PER_CORE (4) times this
    /// machine's cores: by default such a count is refused, as a typing slip that would start thousands of engines
    /// or threads (engines on other machines count too).
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
        if let Some(cp) = self.move_distance_white {
            config.move_distance_white = cp;
        }
        if let Some(cp) = self.move_distance_black {
            config.move_distance_black = cp;
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

/// Most inner-engine workers per core of this machine that `analyze` starts without `--insist-workers`.
pub const MAX_WORKERS_PER_CORE: usize = 4;

/// Runs `deeptree analyze` on the store in `db` (created when absent). Everything that can be refused is refused
/// before anything starts: the arguments, the roots, the budget, the engines, then the store.
pub fn run(db: Option<&Path>, config: &Config, args: AnalyzeArgs) -> CommandResult {
    // The time budget counts from here: starting the engines is part of it.
    let started = Instant::now();
    let config = &args.over(config);
    let play_depth = check_args(&args, config)?;
    let (line, book) = roots_of(&args)?;
    let chess960 = args.chess960 || book.as_ref().map_or(line.chess960, |(b, _)| b.iter().any(|r| r.line.chess960));
    let time = time_budget(args.time)?;
    let engines = Engines::check(config, args.insist_workers)?;
    if let Some(path) = &args.from_games {
        // A PGN that cannot be read is refused before the store is created.
        readable_file(path)?;
    }
    let store = open_store(db, config)?;
    let stop = stop_on_ctrl_c();
    let params = params_of(config, &args, time, play_depth);
    // The tasks as this run finds them: its roots, in this order, and where their progress goes.
    let tasks = if args.tasks { store.read()?.tasks()? } else { Vec::new() };
    let book = match &args.from_games {
        Some(path) => match exits_book(&store, path, &params, play_depth, args.player.as_deref(), args.json)? {
            Some(book) => Some(book),
            // No game left the tree: nothing to grow.
            None => return Ok(()),
        },
        None if args.tasks => match tasks_book(&tasks, args.chess960, args.json)? {
            Some(book) => Some(book),
            None => return Ok(()),
        },
        None => book,
    };
    // Games of Chess960 too (a `Variant` tag of --from-games).
    let chess960 = chess960 || book.as_ref().is_some_and(|(roots, _)| roots.iter().any(|r| r.line.chess960));
    let engine_config = engine_config_of(config, chess960);
    let (look_ahead, json) = (config.look_ahead(), args.json);
    if let Some((roots, skipped)) = book {
        if args.cover {
            let mut cover = Cover::new(play_depth, params.clone());
            cover.temperature = args.cover_temperature.unwrap_or(cover.temperature);
            cover.deepen = args.cover_deepen;
            let book = Book { roots, skipped, params, look_ahead, json, stop, started, tasks: None };
            return grow_cover(&store, engines.configs(&engine_config), book, &cover);
        }
        let tasks = args.tasks.then_some(tasks);
        let book = Book { roots, skipped, params, look_ahead, json, stop, started, tasks };
        return grow_book(&store, engines.configs(&engine_config), book);
    }
    let pool = engines.start(&engine_config)?;
    let nodes = args.nodes;
    let (params, spine) = match args.split {
        None => (params, None),
        Some(share) => spine_first(&pool, &store, &line, params, Split { share, nodes, time, started }, &stop)?,
    };
    // What starting the engines took is spent: a run that is out of time now stops at once.
    let params = params.with_time(time.map(|t| t.saturating_sub(started.elapsed())));
    let options = AnalysisOptions {
        look_ahead,
        trace: match &args.trace {
            Some(path) => Trace::to_file(path)?,
            None => Trace::off(),
        },
        progress: StatusLine::on_stderr().map(|line| Arc::new(line) as Arc<dyn Progress>),
        stop,
        line_edges: true,
    };
    let engine_depth = params.engine_depth;
    let analysis = Analysis::with_options(&store, PoolEvaluator::new(pool), params, options);
    let report = analyze_root(analysis, &line, json)?;
    if json {
        print_json(&report, spine.as_ref(), nodes)
    } else {
        print_summary(&report, spine.as_ref(), engine_depth);
        Ok(())
    }
}

/// Refuses arguments that cannot run, before anything starts: a node budget of 0, a split that is not a share of a
/// budget, a play depth not deeper than the engine depth. Returns the play depth.
fn check_args(args: &AnalyzeArgs, config: &Config) -> Result<u8, Box<dyn std::error::Error>> {
    if args.nodes == Some(0) {
        return Err("--nodes 0: give a positive number of nodes".into());
    }
    match args.split {
        Some(share) if !(share > 0.0 && share < 1.0) => {
            return Err(format!("--split {share}: give a share of the budget between 0 and 1").into());
        }
        Some(_) if args.nodes.is_none() && args.time.is_none() => {
            return Err("--split shares a budget: give --nodes or --time too".into());
        }
        _ => {}
    }
    if args.play_depth.is_some() && args.from_games.is_none() && !args.cover {
        return Err("--play-depth goes with --from-games or --cover".into());
    }
    if let Some(factor) = args.cover_deepen.filter(|f| !(f.is_finite() && *f > 1.0)) {
        return Err(format!("--cover-deepen {factor}: give a factor above 1").into());
    }
    if args.cover {
        return match args.play_depth.unwrap_or(config.engine_depth) {
            0 => Err("--play-depth 0: give a positive depth".into()),
            depth => Ok(depth),
        };
    }
    let play_depth = args.play_depth.unwrap_or(DEFAULT_PLAY_DEPTH);
    if args.from_games.is_some() && play_depth <= config.engine_depth {
        return Err(format!(
            "--play-depth {play_depth}: give a depth deeper than the engine depth {}",
            config.engine_depth
        )
        .into());
    }
    Ok(play_depth)
}

/// Roots of a book, and the entries of its file that were skipped.
type BookRoots = (Vec<BookRoot>, Vec<SkippedRoot>);

/// The root to analyse (the first of a book), and the book's roots where there are many: `--roots FILE` (its
/// skipped entries said on stderr), or none yet with `--from-games` (they are the games' exits).
fn roots_of(args: &AnalyzeArgs) -> Result<(Line, Option<BookRoots>), Box<dyn std::error::Error>> {
    match &args.roots {
        None if args.from_games.is_some() || args.tasks => Ok((Line::start_position(), Some((Vec::new(), Vec::new())))),
        None => Ok((Line::parse_in(args.fen.as_deref(), &args.moves, args.chess960)?, None)),
        Some(path) => {
            let (roots, skipped) = read_roots(path, args.chess960)?;
            for skip in &skipped {
                eprintln!("{}: {} skipped: {}", path.display(), skip.source, skip.error);
            }
            if roots.is_empty() {
                return Err(format!("{}: no root to grow", path.display()).into());
            }
            let first = roots[0].line.clone();
            let book: Vec<BookRoot> = roots.into_iter().map(|r| BookRoot::new(r.line, r.source.to_string())).collect();
            Ok((first, Some((book, skipped))))
        }
    }
}

/// `--time` as a budget. Refused before anything starts: a budget of zero (or one that is not a duration) would
/// otherwise mean no budget at all, and the analysis would run for ever.
fn time_budget(time: Option<f64>) -> Result<Option<Duration>, Box<dyn std::error::Error>> {
    match time {
        None => Ok(None),
        Some(seconds) if seconds.is_finite() && seconds > 0.0 => {
            // Past what a Duration holds, a budget is as good as none.
            Ok(Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)))
        }
        Some(seconds) => Err(format!("--time {seconds}: give a positive number of seconds").into()),
    }
}

/// The engines of a run: the kinds of `--engines` (or the settings' list), else `workers` of the one engine.
struct Engines {
    specs: Vec<EngineSpec>,
    workers: usize,
}

impl Engines {
    /// The engines the settings name, refused before anything starts (the store included): more workers (each
    /// counted with its engine's threads) than [`MAX_WORKERS_PER_CORE`] per core without `insist`, or a program that
    /// is not there.
    fn check(config: &Config, insist: bool) -> Result<Engines, Box<dyn std::error::Error>> {
        let specs = EngineSpec::parse_list(&config.engines).map_err(|e| format!("--engines: {e}"))?;
        let workers = if config.workers > 0 { config.workers } else { crate::engine::default_workers() };
        // Each worker runs its engine's threads (one where the settings' single engine runs): the bound is on those.
        let total =
            if specs.is_empty() { workers } else { specs.iter().map(|s| s.workers).fold(0, usize::saturating_add) };
        let threads = if specs.is_empty() { workers as u64 } else { EngineSpec::threads_in_all(&specs) };
        let cores = crate::engine::default_workers();
        let most = MAX_WORKERS_PER_CORE * cores;
        if threads > most as u64 && !insist {
            let what = if threads == total as u64 {
                format!("{total} workers")
            } else {
                format!("{threads} engine threads in all (each worker times its engine's threads)")
            };
            return Err(format!(
                "{what}: more than {MAX_WORKERS_PER_CORE} per core of this machine ({cores} cores, at most {most}); \
                 --insist-workers runs them anyway"
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
        Ok(Engines { specs, workers })
    }

    /// The configuration of every worker, each kind's options over `base`.
    fn configs(&self, base: &EngineConfig) -> Vec<EngineConfig> {
        if self.specs.is_empty() {
            vec![base.clone(); self.workers.max(1)]
        } else {
            EngineSpec::configs(&self.specs, base)
        }
    }

    /// Starts them all, in one pool.
    fn start(&self, base: &EngineConfig) -> Result<EnginePool, String> {
        if self.specs.is_empty() {
            EnginePool::uniform(base, self.workers)
                .map_err(|e| format!("cannot start the inner engine {}: {e}", quote(&base.command)))
        } else {
            EnginePool::start(EngineSpec::configs(&self.specs, base))
                .map_err(|e| format!("cannot start the inner engines: {e}"))
        }
    }
}

/// The engines' settings; for Chess960 they read and write castling as king takes rook.
fn engine_config_of(config: &Config, chess960: bool) -> EngineConfig {
    let engine_config = EngineConfig::from(config);
    if chess960 { engine_config.with_option("UCI_Chess960", "true") } else { engine_config }
}

/// A stop flag that Ctrl-C sets from now on: it stops the analysis cleanly (engines run in their own process groups).
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let handler_stop = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || handler_stop.store(true, Ordering::Relaxed)) {
        log::warn!("Ctrl-C will not stop the analysis cleanly: {e}");
    }
    stop
}

/// The search's parameters: the settings', and the deepest software depth (by default 4, every depth with a budget,
/// and with `--from-games` the depth at which an exit's combined depth reaches the play depth).
fn params_of(config: &Config, args: &AnalyzeArgs, time: Option<Duration>, play_depth: u8) -> Params {
    // Tasks carry their own budgets and depths.
    let budget = time.is_some() || args.nodes.is_some() || args.tasks;
    let default_max = if args.from_games.is_some() {
        // Each exit grows until the tree answers there: its combined depth reaches the play depth.
        play_depth - config.engine_depth
    } else if budget {
        u8::MAX - 1
    } else {
        4
    };
    Params::from(config).with_max_depth(args.max_depth.unwrap_or(default_max)).with_time(time).with_nodes(args.nodes)
}

/// A file that can be opened and is not a directory.
fn readable_file(path: &Path) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match file.metadata() {
        Ok(meta) if meta.is_dir() => Err(format!("{}: is a directory", path.display())),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// A line of text: on stdout, or on stderr where stdout holds the one JSON object.
fn say(json: bool, text: &str) {
    if json { eprintln!("{text}") } else { println!("{text}") }
}

/// The roots of growth that follows play: the positions where the games of the PGN file at `path` left the tree,
/// said one a line. `None` where no game left it (with `--json`, the exits are the JSON object).
fn exits_book(
    store: &Store,
    path: &Path,
    params: &Params,
    play_depth: u8,
    player: Option<&str>,
    json: bool,
) -> Result<Option<BookRoots>, Box<dyn std::error::Error>> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let found = {
        let view = store.read()?;
        exits(&view, std::io::BufReader::new(file), params, play_depth, player)
            .map_err(|e| format!("{}: {e}", path.display()))?
    };
    say_exits(&found, params, play_depth, json);
    for skip in &found.skipped {
        eprintln!("{}: {} skipped: {}", path.display(), skip.source, skip.error);
    }
    if found.exits.is_empty() {
        if json {
            println!("{}", serde_json::json!({ "exits": found }));
        }
        return Ok(None);
    }
    let roots = found
        .exits
        .iter()
        .map(|e| BookRoot::weighted(e.line.clone(), format!("game {} ply {}", e.game, e.ply), e.games))
        .collect();
    Ok(Some((roots, found.skipped)))
}

/// What the games say: how many left the tree where, one line, then each exit.
fn say_exits(found: &Exits, params: &Params, play_depth: u8, json: bool) {
    let text = format!(
        "{} games: {} left the tree at {} positions, {} stayed in it{}; play depth {play_depth}, engine depth {}: \
         each position grown to software depth {}, the positions more games reached first",
        found.games,
        found.exits.iter().map(|e| u64::from(e.games)).sum::<u64>(),
        found.exits.len(),
        found.stayed,
        if found.without_player > 0 { format!(", {} without the player", found.without_player) } else { String::new() }
            + &if found.through_excluded > 0 {
                format!(", {} through an excluded move", found.through_excluded)
            } else {
                String::new()
            },
        params.engine_depth,
        params.max_depth
    );
    say(json, &text);
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
        say(json, &text);
    }
}

/// Deep Blue's split: the share of the node or time budget the direct search spends first.
struct Split {
    share: f64,
    nodes: Option<u64>,
    time: Option<Duration>,
    /// When the command began.
    started: Instant,
}

/// Deep Blue's split: the direct search's share of the budget is spent first, and its nodes and time count. Returns
/// the parameters for the rest of the budget, and the spine the direct search stored.
fn spine_first(
    pool: &EnginePool,
    store: &Store,
    line: &Line,
    params: Params,
    split: Split,
    stop: &Arc<AtomicBool>,
) -> Result<(Params, Option<Spine>), Box<dyn std::error::Error>> {
    let Split { share, nodes, time, started } = split;
    let limit = match (nodes, time) {
        (Some(n), _) => Limit::Nodes(((n as f64 * share) as u64).max(1)),
        (None, Some(t)) => Limit::MoveTime(t.saturating_sub(started.elapsed()).mul_f64(share)),
        (None, None) => return Err("--split shares a budget: give --nodes or --time too".into()),
    };
    match direct_first(pool, store, line, limit, params.engine_depth, stop) {
        Ok(spine) => {
            let rest = nodes.map(|n| n.saturating_sub(spine.nodes));
            Ok((params.with_nodes(rest), Some(spine)))
        }
        // Ctrl-C: the analysis below stops at once and reports what is stored.
        Err(SplitError::Stopped) => Ok((params, None)),
        Err(e) => Err(format!("--split: {e}").into()),
    }
}

/// Runs the analysis of `line`'s root, a row for each settled depth (on stdout under a header, or on stderr with
/// `--json`).
fn analyze_root<E: crate::search::evaluator::Evaluator>(
    mut analysis: Analysis<'_, E>,
    line: &Line,
    json: bool,
) -> Result<Report, AnalysisError> {
    if !json {
        println!(
            "{:>6} {:>9} {:>9} {:>11} {:>10} {:>9}",
            "depth", "software", "combined", "evaluations", "positions", "seconds"
        );
    }
    analysis.run(line, |row| {
        let text = format!(
            "{:>6} {:>9} {:>9} {:>11} {:>10} {:>9.1}",
            row.software_depth,
            format!("{}-{}", row.min_depth, row.max_depth),
            format!("{}-{}", row.combined_min, row.combined_max),
            row.evaluations,
            row.positions,
            row.elapsed_seconds
        );
        say(json, &text);
    })
}

/// The report as one JSON object on stdout; with a split, the direct search's nodes count as the run's.
fn print_json(report: &Report, spine: Option<&Spine>, nodes: Option<u64>) -> CommandResult {
    let mut value = serde_json::to_value(report)?;
    if let Some(spine) = spine {
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
    Ok(())
}

/// The report in words on stdout.
fn print_summary(report: &Report, spine: Option<&Spine>, engine_depth: u8) {
    if let Some(spine) = spine {
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

/// A run of `analyze --roots`.
struct Book {
    roots: Vec<BookRoot>,
    skipped: Vec<SkippedRoot>,
    params: Params,
    look_ahead: Option<u8>,
    json: bool,
    stop: Arc<AtomicBool>,
    /// When the command began: the time budget counts from there.
    started: Instant,
    /// With `--tasks`: the tasks as the run began, the roots in their order; each one's progress is saved after
    /// every step.
    tasks: Option<Vec<Task>>,
}

/// Growth for play (`--cover`): rounds of a walk of the tree from the book's roots ([`walk`]) and growth of the
/// leaves of highest priority it finds, a few per group of engines, until the budget is spent, `stop` is set or no
/// leaf is left above the walk's floor. Each round says what it grows; the engines, one group each, serve every
/// round. A round's walk runs as soon as a group has nothing left to grow ([`grow_fed`]): the engines do not wait
/// for the slowest leaf of the round before.
fn grow_cover(store: &Store, configs: Vec<EngineConfig>, book: Book, cover: &Cover) -> CommandResult {
    let Book { roots, skipped, params, look_ahead, json, stop, started, .. } = book;
    // One group per engine, started once and lent to every round.
    let engines = configs.len();
    let pools = start_groups(configs, engines)?;
    let per_round = pools.len() * COVER_LEAVES_PER_ENGINE;
    let mut grown = HashSet::new();
    // Every leaf handed over to the engines, in the order handed over, with the round that handed it over.
    let mut fed: Vec<(usize, Leaf)> = Vec::new();
    let mut round = 0usize;
    // The first walk says where the tree stands and picks the first round's leaves; each later round walks again.
    let mut first = Some(walk(&store.read()?, &roots, cover, &grown)?);
    let expected_before = first.as_ref().map_or(0.0, |f| f.expected_answers);
    say(
        json,
        &format!(
            "cover: {} roots, play depth {}, engine depth {}, temperature {} cp{}; {:.2} tree moves a game expected",
            roots.len(),
            cover.play_depth,
            params.engine_depth,
            cover.temperature,
            cover.deepen.map_or(String::new(), |f| format!(", deepen by reach / {f} a ply")),
            expected_before
        ),
    );
    let mut feed = |unfinished: &[usize]| -> Result<Vec<BookRoot>, AnalysisError> {
        let found = match first.take() {
            Some(found) => found,
            None => walk(&store.read()?, &roots, cover, &grown)?,
        };
        // A position is not grown plain at the run's engine depth and deepened at another at the same time (its
        // settled depth would be counted at the wrong one): of two such leaves, in this round or in one still under
        // way, the later waits for a later walk.
        let deepened_elsewhere = |l: &Leaf| l.deeper.is_some_and(|d| d.engine_depth != params.engine_depth);
        let in_flight = || unfinished.iter().filter_map(|&i| fed.get(i).map(|(_, l)| l));
        let mut plain: HashSet<PositionKey> = in_flight().filter(|l| l.deeper.is_none()).map(|l| l.key).collect();
        let mut deepening: HashSet<PositionKey> =
            in_flight().filter(|l| deepened_elsewhere(l)).map(|l| l.key).collect();
        let mut leaves: Vec<Leaf> = Vec::with_capacity(per_round);
        for leaf in found.leaves {
            if leaves.len() == per_round {
                break;
            }
            if leaf.deeper.is_none() {
                if deepening.contains(&leaf.key) {
                    continue;
                }
                plain.insert(leaf.key);
            } else if deepened_elsewhere(&leaf) {
                if plain.contains(&leaf.key) {
                    continue;
                }
                deepening.insert(leaf.key);
            }
            leaves.push(leaf);
        }
        if leaves.is_empty() {
            return Ok(Vec::new());
        }
        round += 1;
        say(
            json,
            &format!(
                "round {round}: {:.2} tree moves a game expected; growing {} positions of priority {:.4} to {:.4}",
                found.expected_answers,
                leaves.len(),
                cover.priority(&leaves[0]),
                cover.priority(&leaves[leaves.len() - 1])
            ),
        );
        let mut leaf_roots = Vec::with_capacity(leaves.len());
        for leaf in &leaves {
            grown.insert(leaf.id());
            let depth = cover.grow_depth(leaf);
            let what = match leaf.deeper {
                Some(deeper) => {
                    format!("deeper, priority {:.4}, at engine depth {}", cover.priority(leaf), deeper.engine_depth)
                }
                None if leaf.ours => "tree's move ".to_owned(),
                None => "the replies".to_owned(),
            };
            say(
                json,
                &format!(
                    "  reach {:.4} ply {:>2} {what} root {:>3} to depth {depth}: {}",
                    leaf.reach,
                    leaf.ply,
                    leaf.root + 1,
                    shakmaty::fen::Fen::from_position(leaf.line.root(), shakmaty::EnPassantMode::Legal)
                ),
            );
            let mut root = BookRoot::new(leaf.line.clone(), format!("reach {:.4}", leaf.reach));
            root.max_depth = Some(depth);
            root.engine_depth = leaf.deeper.map(|d| d.engine_depth);
            leaf_roots.push(root);
        }
        fed.extend(leaves.into_iter().map(|l| (round, l)));
        Ok(leaf_roots)
    };
    // What the first walk took is spent too. Every leaf has its own depth to settle.
    let left = params.time.map(|t| t.saturating_sub(started.elapsed()));
    let run_params = params.clone().with_max_depth(u8::MAX).with_time(left);
    let report = grow_fed(store, pools, &run_params, look_ahead, &stop, &mut feed)?;
    // Leaves grown: those the engines took a step at (a leaf handed over when the budget ran out, or whose depth was
    // settled already, is not counted). The report's roots are the leaves in the order handed over.
    debug_assert_eq!(report.roots.len(), fed.len(), "one root of the run for each leaf handed over");
    let grown_leaves: Vec<&(usize, Leaf)> =
        report.roots.iter().zip(&fed).filter(|(r, _)| r.steps > 0).map(|(_, fed)| fed).collect();
    let deepened = grown_leaves.iter().filter(|(_, l)| l.deeper.is_some()).count();
    // Rounds that grew a leaf: a round handed over as the budget ran out, none of its leaves taken, is not counted.
    let rounds = grown_leaves.iter().map(|(round, _)| round).collect::<HashSet<_>>().len();
    let found = walk(&store.read()?, &roots, cover, &grown)?;
    let expected = found.expected_answers;
    // Stopped (the time spent, or Ctrl-C) with leaves still to grow: a later run goes on.
    let interrupted = stop.load(Ordering::Relaxed) || params.time.is_some_and(|t| started.elapsed() >= t);
    let stopped = report.stopped || (interrupted && !found.leaves.is_empty());
    let positions = store.stats()?.positions;
    let (evaluations, shared, failed) = (report.evaluations, report.shared, report.failed);
    let text = format!(
        "cover: {rounds} rounds, {} leaves grown ({deepened} of them deeper), {evaluations} evaluations ({shared} \
         taken from other searches, {failed} failed), {positions} positions in the tree; tree moves a game expected \
         {expected_before:.2} before, {expected:.2} after{}",
        grown_leaves.len(),
        if stopped { "; stopped: run the command again to go on" } else { "" }
    );
    if json {
        eprintln!("{text}");
        let value = serde_json::json!({
            "rounds": rounds, "grown": grown_leaves.len(), "deepened": deepened, "evaluations": evaluations,
            "shared": shared, "failed": failed, "positions": positions, "expected_answers_before": expected_before,
            "expected_answers": expected,
            "stopped": stopped, "skipped": skipped,
        });
        println!("{value}");
    } else {
        println!("{text}");
    }
    Ok(())
}

/// Leaves a round of `--cover` grows for each inner engine: enough that a round's searches keep every engine busy
/// while few enough that the next walk soon follows what this one grew.
const COVER_LEAVES_PER_ENGINE: usize = 4;

/// Grows the roots of a book with the engines of `configs`, split into as many groups as there are roots (at most
/// one per engine).
fn grow_book(store: &Store, configs: Vec<EngineConfig>, book: Book) -> CommandResult {
    let Book { roots, skipped, params, look_ahead, json, stop, started, tasks } = book;
    // What each task's progress saved of this run so far.
    let saved: Vec<parking_lot::Mutex<(f64, u64)>> = roots.iter().map(|_| parking_lot::Mutex::new((0.0, 0))).collect();
    let pools = start_groups(configs, roots.len())?;
    let groups = pools.len();
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
        say(json, &text);
        if let Some(task) = tasks.as_ref().and_then(|t| t.get(p.root - 1)) {
            save_task_progress(store, task, p, &saved[p.root - 1]);
        }
    };
    let status = StatusLine::on_stderr();
    let progress = status.as_ref().map(|line| line as &dyn Progress);
    let report = grow(store, pools, &roots, &params, look_ahead, &stop, progress, row)?;
    print_book_report(&report, &skipped, json)
}

/// The open tasks of the store as roots: weight 2^priority, what is left of each budget, each one's depth. `None`
/// (said) when no task is open.
fn tasks_book(tasks: &[Task], chess960: bool, json: bool) -> Result<Option<BookRoots>, Box<dyn std::error::Error>> {
    let mut roots = Vec::new();
    for task in tasks {
        let line = Line::parse_in(task.fen.as_deref(), &task.moves.join(" "), chess960 || task.chess960)?;
        let mut root = BookRoot::weighted(line, format!("task {}", task.id), 1 << task.priority.min(MAX_PRIORITY));
        root.budget = Some(Duration::try_from_secs_f64(task.left_seconds()).unwrap_or(Duration::MAX));
        root.max_depth = task.max_depth;
        roots.push(root);
    }
    if tasks.iter().all(|task| task.is_done()) {
        say(json, if tasks.is_empty() { "no tasks: add one with `deeptree task add`" } else { "every task is done" });
        return Ok(None);
    }
    Ok(Some((roots, Vec::new())))
}

/// Saves a task's progress after a step of the run: what the step added (its seconds and evaluations, the run's
/// totals less `saved`, what was saved of this run before) is added to the task as the store holds it now; a
/// failure is logged, and the run goes on.
fn save_task_progress(store: &Store, task: &Task, progress: &RootProgress, saved: &parking_lot::Mutex<(f64, u64)>) {
    let mut saved = saved.lock();
    let (seconds, evaluations) = (progress.seconds - saved.0, progress.evaluations.saturating_sub(saved.1));
    match store.add_task_progress(task.id, seconds, evaluations, progress.settled_depth) {
        Ok(()) => *saved = (progress.seconds, progress.evaluations),
        Err(e) => log::error!("task {}: its progress was not saved: {e}", task.id),
    }
}

/// The engines of `configs` started in as many groups as there are `roots` (at most one per engine), dealt out in
/// turn.
fn start_groups(configs: Vec<EngineConfig>, roots: usize) -> Result<Vec<PoolEvaluator>, String> {
    let groups = configs.len().min(roots).max(1);
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
    Ok(pools)
}

/// What growing a book did: one JSON object on stdout (with the roots skipped), or a line in words.
fn print_book_report(report: &BookReport, skipped: &[SkippedRoot], json: bool) -> CommandResult {
    if json {
        let mut value = serde_json::to_value(report)?;
        value["skipped"] = serde_json::to_value(skipped)?;
        println!("{value}");
        return Ok(());
    }
    let settled: Vec<u8> = report.roots.iter().filter_map(|r| r.settled_depth).collect();
    println!(
        "{} evaluations ({} taken from other roots' searches), {} positions in the tree; settled depth {} to {} over {} \
         roots{}{}",
        report.evaluations,
        report.shared,
        report.positions,
        settled.iter().min().map_or("-".to_owned(), ToString::to_string),
        settled.iter().max().map_or("-".to_owned(), ToString::to_string),
        report.roots.len(),
        if skipped.is_empty() { String::new() } else { format!(" ({} skipped)", skipped.len()) },
        if report.stopped { "; stopped: run the command again to resume" } else { "" }
    );
    Ok(())
}
