//! The arguments of `deeptree analyze` (also `deeptree grow`): the sources, the budget, the clock grown for, the
//! search's parameters and the engines.

use crate::config::Config;

/// `deeptree analyze [--fen FEN] [--moves "..."] ...`
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Start position (default: the standard start position).
    #[arg(long)]
    pub fen: Option<String>,
    /// Roots of a book: an EPD file (every line a root) or a PGN file (every game's final position a root, its main
    /// line the way there). With a clock (--for or --play-depth) games from the roots are followed, both sides; without
    /// one, each root is deepened itself, the shallowest first.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["fen", "moves"])]
    pub roots: Option<std::path::PathBuf>,
    /// Games: grow where the games of this PGN file left the tree (the first position of each game, with the player to
    /// move, where the tree knows less than the target), weighted by the games that left there, and follow them on.
    /// A UCI session records the games it plays in the store's folder as games.pgn (the `LearnFromGames` option).
    #[arg(long, value_name = "PGN", alias = "from-games", conflicts_with_all = ["fen", "moves", "nodes", "split"])]
    pub games: Option<std::path::PathBuf>,
    /// Grow the analyst's tasks (`deeptree task add`): every open task, a task of priority k as 2^k roots, each within
    /// what is left of its own budget and up to its own depth; each task's progress is saved after every step.
    #[arg(long, conflicts_with_all = ["fen", "moves", "nodes", "split"])]
    pub tasks: bool,
    /// Grow for this clock (`5+0.05`: 5 s a game and 0.05 s a move, or `40/60+0.5`): the target depth is what the inner
    /// engine reaches in a move of it (the depth model a UCI session fits, or a few timed searches where the store has
    /// no fit yet), less TreeDepthMargin (the settings' tree_depth_margin).
    #[arg(long = "for", value_name = "CLOCK", conflicts_with = "play_depth")]
    pub for_clock: Option<String>,
    /// With --for: the threads of the inner engine that plays at that clock (default 1).
    #[arg(long, value_name = "N", requires = "for_clock")]
    pub threads: Option<u32>,
    /// A hand-set target: the depth a game's search reaches (the clock's depth); where the tree knows less, a game
    /// leaves it. Default with --games: 20; with --cover: the engine depth.
    #[arg(long, value_name = "DEPTH")]
    pub play_depth: Option<u8>,
    /// Plies past the target (--for's or --play-depth) that growth aims at where games follow the tree: a position the
    /// tree answers short of the aim is deepened before a new exit of equal reach, one at the aim ranks with an exit
    /// of half its reach (default 3).
    #[arg(long, value_name = "PLIES", value_parser = clap::value_parser!(u32).range(0..=40))]
    pub beyond: Option<u32>,
    /// With --games: the side of each game to grow for, by a name in its White or Black tag (default: both sides).
    #[arg(long, value_name = "NAME", requires = "games")]
    pub player: Option<String>,
    /// Centipawns an opponent's reply may score below its best for its probability to fall by a factor e (default 20).
    #[arg(long, value_name = "CP", alias = "cover-temperature")]
    pub temperature: Option<u32>,
    /// Kept for scripts: --roots with games followed, at the engine depth unless --for or --play-depth says otherwise.
    #[arg(long, requires = "roots")]
    pub cover: bool,
    /// Kept for scripts, and ignored: depth where games go is part of the one priority now (a ply lacking is worth a
    /// factor 2 of reach).
    #[arg(long, value_name = "FACTOR", requires = "cover")]
    pub cover_deepen: Option<f64>,
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
    /// still running then are abandoned; `--json` reports `node_overshoot`).
    #[arg(long, value_name = "N")]
    pub nodes: Option<u64>,
    /// Deep Blue's split: spend this share of the --nodes or --time budget (between 0 and 1) on one direct search of
    /// the root first, store its principal variation as the tree's spine of deep evaluations, then grow the tree
    /// with the rest, testing at the engine depth the moves the direct search rejected along its line. The direct
    /// search runs on one worker: with --time and several workers the others wait for its share.
    #[arg(long, value_name = "SHARE", conflicts_with_all = ["roots", "for_clock", "play_depth"])]
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
    /// Write one line per choice of growth (its priority and terms) and per search decision to FILE.
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

/// The target where games are followed without a clock: about what Stockfish on one thread reaches in a move of
/// 5+0.05 (20.5 plies a move in docs/strength.md's control games).
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

pub(super) fn parse_on_off(text: &str) -> Result<bool, String> {
    match text.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("'{other}': give on or off")),
    }
}

impl AnalyzeArgs {
    /// The settings with this command line's choices over them: one `Config` from which the engines' and the
    /// search's options are taken.
    pub(super) fn over(&self, config: &Config) -> Config {
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
