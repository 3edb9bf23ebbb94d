//! The arguments of `deeptree analyze` (also `deeptree grow`): the sources, the budget, the clock grown for, the
//! search's parameters and the engines.

use crate::config::{Config, SettingFlags};

/// `deeptree analyze [--fen FEN] [--moves "..."] ...`
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Start position (default: the standard start position).
    #[arg(long)]
    pub fen: Option<String>,
    /// Roots of a book: an EPD file (every line a root) or a PGN file (every game's final position a root, its main
    /// line the way there); a root given n times is of weight n. With a clock (--for or --play-depth) games from the roots are followed, both sides; without
    /// one, each root is deepened itself, the shallowest first.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["fen", "moves"])]
    pub roots: Option<std::path::PathBuf>,
    /// Games: grow where the games of this PGN file left the tree (the first position of each game, with the player to
    /// move, where the tree knows less than the target), weighted by the games that left there, and follow them on.
    /// A UCI session records the games it plays in the store's folder as games.pgn (the `LearnFromGames` option).
    #[arg(long, value_name = "PGN", conflicts_with_all = ["fen", "moves", "nodes", "split"])]
    pub games: Option<std::path::PathBuf>,
    /// Kept for scripts: --games under its former name, said when used.
    #[arg(long, value_name = "PGN", hide = true, conflicts_with_all = ["games", "fen", "moves", "nodes", "split"])]
    pub from_games: Option<std::path::PathBuf>,
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
    #[arg(long, value_name = "NAME")]
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
    /// The settings this run sets over the settings file's (each flag declared with its setting, config::SETTINGS).
    #[command(flatten)]
    pub settings: SettingFlags,
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

impl AnalyzeArgs {
    /// The settings with this command line's choices over them: one `Config` from which the engines' and the
    /// search's options are taken.
    pub(super) fn over(&self, config: &Config) -> Config {
        let mut over = self.settings.over(config);
        // --engine or --workers on the command line choose one kind of engine over the settings' list.
        if !self.settings.gave("engines") && (self.settings.gave("engine") || self.settings.gave("workers")) {
            over.engines.clear();
        }
        over
    }
}
