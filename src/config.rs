//! Settings: read from `--config`, else `DEEPTREE_CONFIG`, else the user's config directory
//! (`~/.config/deeptree/deeptree.toml` on Linux), else built-in defaults. `configs/deeptree.toml` documents every
//! setting with its default.
//!
//! ```
//! use deeptree::config::Config;
//!
//! let config: Config = Config::parse("engine_depth = 12\n", "inline".as_ref())?;
//! assert_eq!(config.engine_depth, 12);
//! assert_eq!(config.engine, "stockfish");
//! # Ok::<_, deeptree::config::ConfigError>(())
//! ```

use std::{
    fmt,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize};

use crate::{
    engine::{EngineConfig, Timeouts, spec::EngineSpec},
    interop::lines::{BoundedLines, Bytes, MAX_LINE_BYTES, TextError},
    search::analysis::{DEFAULT_LOOK_AHEAD, Params, Screening},
    store::StoreOptions,
};

/// Most plies of `tree_depth_margin` (and of the UCI option `TreeDepthMargin`).
pub const MAX_TREE_DEPTH_MARGIN: u8 = 20;

/// Every setting of deeptree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Directory of the tree store; empty means the user's data directory.
    pub tree_path: String,
    /// Inner engine command line.
    pub engine: String,
    /// Inner engines for growing the tree, in the one-line form of `deeptree::engine::spec` (for example
    /// `stockfish | workers=12 ; ssh -p 2222 box stockfish | workers=2`); empty: `engine`, `workers` of it.
    pub engines: String,
    /// Engine depth `D` of every inner-engine search.
    pub engine_depth: u8,
    /// Move distance `δ` in centipawns at plies 0 and 1.
    pub move_distance: u32,
    /// The move distance of White's moves where it differs (0: `move_distance`).
    pub move_distance_white: u32,
    /// The move distance of Black's moves where it differs (0: `move_distance`).
    pub move_distance_black: u32,
    /// Workers for `analyze`; 0 means one per core.
    pub workers: usize,
    /// Software depths past the one being settled in which free engines run searches ahead of their turn; -1 runs
    /// none.
    pub look_ahead: i32,
    /// Hash of each inner engine, MiB.
    pub engine_hash_mib: u32,
    /// Seconds to wait for `uciok`/`readyok`.
    pub engine_handshake_timeout_secs: u64,
    /// Seconds a searching engine may stay silent before it is asked `isready` (and counts as hung without an answer).
    pub engine_search_timeout_secs: u64,
    /// Grow the last root's tree when no timed game is running (UCI mode).
    pub background_analysis: bool,
    /// Store each direct search of a game (UCI mode) as its position's evaluation, so that the position is answered
    /// from the tree when it comes again.
    pub store_searches: bool,
    /// Record the games played (UCI mode) in the store's folder as games.pgn, for `analyze --from-games` to grow
    /// where they left the tree.
    pub learn_from_games: bool,
    /// Plies the tree may know less than a timed search (UCI mode) would reach and still answer at once: 0 answers
    /// only where the tree knows at least as deep; each ply more answers where a search of about half the time
    /// would reach.
    pub tree_depth_margin: u8,
    /// What a timed `go` (clock or `movetime`) does where the tree does not already answer (UCI mode): `direct`
    /// (the inner engine searches), `tree` (the tree is grown for the move's time share, then its best move is
    /// played) or `auto` (the stronger of the two by docs/duel.md; `direct` while it shows no crossing).
    pub think_mode: ThinkMode,
    /// Deep Blue's "no progress" rule in the search: a move into a position the same side could have reached
    /// earlier on the path is refused (off by default).
    pub no_progress: bool,
    /// Screening of alternatives: a node's moves without an edge are searched at the engine depth only when a
    /// screen two plies shallower says they could still enter the window.
    pub screen: bool,
    /// Centipawns a screened score may rise at the engine depth (see docs/benchmarks.md, "Screening").
    pub screen_margin: u32,
    /// Initial LMDB map size in MiB (it grows on demand).
    pub map_size_mib: u64,
    /// Most changes committed in one write transaction.
    pub write_batch: usize,
    /// Log level on stderr: off, error, warn, info, debug, trace.
    pub log_level: String,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            tree_path: String::new(),
            engine: "stockfish".into(),
            engines: String::new(),
            engine_depth: 18,
            move_distance: 20,
            move_distance_white: 0,
            move_distance_black: 0,
            workers: 0,
            look_ahead: i32::from(DEFAULT_LOOK_AHEAD),
            engine_hash_mib: 64,
            engine_handshake_timeout_secs: 10,
            engine_search_timeout_secs: 60,
            background_analysis: true,
            store_searches: true,
            learn_from_games: true,
            tree_depth_margin: 0,
            think_mode: ThinkMode::Direct,
            no_progress: false,
            screen: false,
            screen_margin: Screening::DEFAULT.margin as u32,
            map_size_mib: 1024,
            write_batch: 50_000,
            log_level: "warn".into(),
        }
    }
}

/// What a timed `go` does where the tree does not already answer (setting `think_mode`, UCI option `ThinkMode`;
/// docs/design.md §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkMode {
    /// The inner engine searches, as the bare engine would.
    Direct,
    /// The tree is grown from the position for the move's time share, with all `Threads` as single-threaded workers,
    /// and its best move by alpha is played.
    Tree,
    /// The stronger of the two for the budget, by the duel's measurements (docs/duel.md): `direct` while they show
    /// no budget at which the tree's own search wins.
    Auto,
}

impl ThinkMode {
    pub const NAMES: [&'static str; 3] = ["direct", "tree", "auto"];

    /// What `auto` is, by docs/duel.md: the duel has named no budget at which the tree's own search wins.
    pub fn resolved(self) -> ThinkMode {
        match self {
            ThinkMode::Auto => ThinkMode::Direct,
            mode => mode,
        }
    }
}

impl fmt::Display for ThinkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThinkMode::Direct => "direct",
            ThinkMode::Tree => "tree",
            ThinkMode::Auto => "auto",
        })
    }
}

impl std::str::FromStr for ThinkMode {
    type Err = String;

    fn from_str(text: &str) -> Result<ThinkMode, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "direct" => Ok(ThinkMode::Direct),
            "tree" => Ok(ThinkMode::Tree),
            "auto" => Ok(ThinkMode::Auto),
            other => Err(format!("'{other}' is not a think mode (direct, tree or auto)")),
        }
    }
}

/// A settings file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read settings {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// A line longer than [`MAX_LINE_BYTES`], or one that fails to read.
    #[error("cannot read settings {}: {source}", path.display())]
    Line { path: PathBuf, source: TextError },
    /// A file longer than [`MAX_SETTINGS_BYTES`].
    #[error("cannot read settings {}: longer than {} (a settings file holds a few KiB)", path.display(), Bytes(*bound))]
    TooLong { path: PathBuf, bound: usize },
    #[error("bad settings in {}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
}

impl Config {
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = basic_toml::from_str(text)
            .map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
        if config.tree_depth_margin > MAX_TREE_DEPTH_MARGIN {
            return Err(ConfigError::Parse {
                path: path.to_owned(),
                message: format!(
                    "tree_depth_margin {} is out of range 0..{MAX_TREE_DEPTH_MARGIN}",
                    config.tree_depth_margin
                ),
            });
        }
        EngineSpec::parse_list(&config.engines)
            .map_err(|e| ConfigError::Parse { path: path.to_owned(), message: format!("engines: {e}") })?;
        Ok(config)
    }

    /// The look ahead as the analysis takes it: `None` (nothing run ahead) for a negative setting.
    pub fn look_ahead(&self) -> Option<u8> {
        u8::try_from(self.look_ahead).ok()
    }

    /// Loads the settings file that applies: `explicit` (from `--config`), else `DEEPTREE_CONFIG`, else the user's
    /// config directory when the file exists there. Returns the settings and the file they came from.
    pub fn load(explicit: Option<&Path>) -> Result<(Config, Option<PathBuf>), ConfigError> {
        let chosen = explicit
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("DEEPTREE_CONFIG").filter(|v| !v.is_empty()).map(PathBuf::from))
            .or_else(|| dirs::config_dir().map(|d| d.join("deeptree").join("deeptree.toml")).filter(|p| p.is_file()));
        match chosen {
            None => Ok((Config::default(), None)),
            Some(path) => {
                let text = read_settings(&path)?;
                Ok((Config::parse(&text, &path)?, Some(path)))
            }
        }
    }

    /// The tree directory: `override_dir` (from `--db` or `DEEPTREE_DB`), else `tree_path`, else the user's data
    /// directory, so that an engine started by a GUI from any folder finds the same tree.
    pub fn tree_dir(&self, override_dir: Option<&Path>) -> PathBuf {
        if let Some(dir) = override_dir {
            return dir.to_owned();
        }
        if !self.tree_path.is_empty() {
            return PathBuf::from(&self.tree_path);
        }
        dirs::data_dir().or_else(dirs::home_dir).unwrap_or_else(|| PathBuf::from(".")).join("deeptree").join("tree")
    }
}

/// The longest settings file read, in bytes.
pub const MAX_SETTINGS_BYTES: usize = 4 << 20;

/// The text of a settings file, read line by line: a line longer than [`MAX_LINE_BYTES`], a file longer than
/// [`MAX_SETTINGS_BYTES`] or a line that is not UTF-8 is an error naming the file (and the line), whatever the file
/// is (`/dev/zero` included), with no more than that held in memory.
fn read_settings(path: &Path) -> Result<String, ConfigError> {
    let file = std::fs::File::open(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
    let mut text = String::new();
    for line in BoundedLines::new(std::io::BufReader::new(file), MAX_LINE_BYTES) {
        let (number, line) = line.map_err(|source| ConfigError::Line { path: path.to_owned(), source })?;
        if text.len() + line.len() >= MAX_SETTINGS_BYTES {
            return Err(ConfigError::TooLong { path: path.to_owned(), bound: MAX_SETTINGS_BYTES });
        }
        let line = String::from_utf8(line).map_err(|_| ConfigError::Read {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, format!("line {number} is not UTF-8 text")),
        })?;
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

/// The store's options: its initial map size and its largest write batch.
impl From<&Config> for StoreOptions {
    fn from(config: &Config) -> StoreOptions {
        StoreOptions {
            initial_map_size: (config.map_size_mib.max(1) << 20) as usize,
            max_batch: config.write_batch.max(1),
        }
    }
}

/// The inner engine of the settings: its command, `Hash`, `Threads` = 1 and the configured timeouts.
impl From<&Config> for EngineConfig {
    fn from(config: &Config) -> EngineConfig {
        let mut engine = EngineConfig::new(config.engine.clone()).with_option("Hash", config.engine_hash_mib);
        engine.timeouts = Timeouts {
            handshake: Duration::from_secs(config.engine_handshake_timeout_secs.max(1)),
            search_silence: Duration::from_secs(config.engine_search_timeout_secs.max(1)),
        };
        engine
    }
}

/// The search's parameters as the settings give them: their engine depth, move distance, "no progress" rule and
/// screening, every software depth and no time budget (a run sets its own with [`Params::with_max_depth`] and
/// [`Params::with_time`]).
impl From<&Config> for Params {
    fn from(config: &Config) -> Params {
        let side = |cp: u32| (cp > 0).then(|| cp.min(100_000) as i32);
        Params::new(config.engine_depth.max(1), config.move_distance.min(100_000) as i32)
            .with_side_distances([side(config.move_distance_white), side(config.move_distance_black)])
            .with_no_progress(config.no_progress)
            .with_screen(Screening::of_setting(config.screen, config.screen_margin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented file must parse and state exactly the defaults.
    #[test]
    fn shipped_config_states_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/deeptree.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(Config::parse(&text, &path).unwrap(), Config::default());
    }

    #[test]
    fn unknown_setting_is_an_error_naming_the_file() {
        let err = Config::parse("engine_dept = 3\n", Path::new("/x/deeptree.toml")).unwrap_err();
        assert!(err.to_string().contains("/x/deeptree.toml"), "{err}");
        assert!(err.to_string().contains("engine_dept"), "{err}");
    }

    #[test]
    fn a_depth_margin_out_of_range_is_an_error() {
        let err = Config::parse("tree_depth_margin = 21\n", Path::new("/x/deeptree.toml")).unwrap_err();
        assert!(err.to_string().contains("tree_depth_margin 21 is out of range"), "{err}");
        assert_eq!(Config::parse("tree_depth_margin = 20\n", Path::new("x")).unwrap().tree_depth_margin, 20);
    }

    #[test]
    fn a_bad_engine_list_is_an_error_naming_the_file() {
        let err = Config::parse("engines = \"stockfish | threads=many\"\n", Path::new("/x/deeptree.toml")).unwrap_err();
        assert!(err.to_string().contains("/x/deeptree.toml") && err.to_string().contains("threads=many"), "{err}");
        let config =
            Config::parse("engines = \"stockfish | workers=2 ; ssh box stockfish\"\n", Path::new("x")).unwrap();
        assert_eq!(config.engines, "stockfish | workers=2 ; ssh box stockfish");
    }

    /// A line too long, a file too long or a line that is not text is an error naming the file and the line, and the
    /// text read is the file's.
    #[test]
    fn a_settings_file_is_read_within_its_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deeptree.toml");
        std::fs::write(&path, format!("engine_depth = 9\r\n# {}\nworkers = 2", "x".repeat(1000))).unwrap();
        let (config, _) = Config::load(Some(&path)).unwrap();
        assert_eq!((config.engine_depth, config.workers), (9, 2));
        std::fs::write(&path, format!("engine_depth = 9\n# {}\n", "x".repeat(MAX_LINE_BYTES))).unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "cannot read settings {}: line 2 is longer than 1 MiB (the most a line may hold here)",
                path.display()
            )
        );
        let line = format!("# {}\n", "x".repeat(1000));
        std::fs::write(&path, line.repeat(MAX_SETTINGS_BYTES / line.len() + 1)).unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.ends_with("longer than 4 MiB (a settings file holds a few KiB)"), "{err}");
        std::fs::write(&path, b"engine_depth = 9\n# \xff\n").unwrap();
        let err = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(err.ends_with("line 2 is not UTF-8 text"), "{err}");
    }

    /// A file that cannot be read keeps its I/O error as the source.
    #[test]
    fn a_missing_file_is_an_error_with_its_io_source() {
        use std::error::Error;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.toml");
        let err = Config::load(Some(&path)).unwrap_err();
        assert!(err.to_string().starts_with(&format!("cannot read settings {}: ", path.display())), "{err}");
        let source = err.source().and_then(|e| e.downcast_ref::<std::io::Error>()).expect("an I/O source");
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert!(Config::parse("engine_dept = 3\n", Path::new("x")).unwrap_err().source().is_none());
    }
}
