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

/// Every setting of deeptree. Each is declared once, in [`SETTINGS`]: its key, its UCI option and command-line flag
/// where it has them, its range and its doc; its default is [`Config::default`]'s. The settings file, `analyze`'s
/// flags ([`SettingFlags`]) and the UCI options (`uci::options`) are all made from that table, so the three hold the
/// same ranges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub tree_path: String,
    pub engine: String,
    pub engines: String,
    pub engine_depth: u8,
    pub move_distance: u32,
    pub move_distance_white: u32,
    pub move_distance_black: u32,
    pub workers: usize,
    pub look_ahead: i32,
    pub engine_hash_mib: u32,
    pub engine_handshake_timeout_secs: u64,
    pub engine_search_timeout_secs: u64,
    pub background_analysis: bool,
    pub store_searches: bool,
    pub learn_from_games: bool,
    pub tree_depth_margin: u8,
    pub think_mode: ThinkMode,
    pub no_progress: bool,
    pub screen: bool,
    pub screen_margin: u32,
    pub map_size_mib: u64,
    pub write_batch: usize,
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
            // Chosen from the curve (docs/strength.md): a tree's gain against Stockfish reaches 0 where its
            // answers stand no deeper than the opponent's search (a margin of -0.2 ply at 0 Elo), so the tree
            // answers only where it is at least as deep as the engine's own search would be.
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

/// How a setting's value is declared and checked: the same in the settings file, on the command line and as a UCI
/// option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// On or off: `true`/`false` in the file and as a UCI option, `on`/`off` (or `true`/`false`) as a flag.
    Check,
    /// A whole number from `min` to `max`; where `min` is -1 (none), a flag also takes `off` for it.
    Spin { min: i64, max: i64 },
    /// One of `vars`.
    Combo { vars: &'static [&'static str] },
    /// Any text (a setting with a form of its own, as `engines`, checks it in its `set`).
    Text,
}

/// One setting: its key in the settings file, its UCI option and its flag of `analyze` where it has them, its kind
/// (with its range), one line of doc, and how it reads and sets its value in a [`Config`] (`set` takes a value
/// [`Setting::check`] has passed).
pub struct Setting {
    pub key: &'static str,
    pub option: Option<&'static str>,
    pub flag: Option<&'static str>,
    pub kind: Kind,
    pub doc: &'static str,
    pub get: fn(&Config) -> String,
    pub set: fn(&mut Config, &str) -> Result<(), String>,
}

/// A value of a setting, read back from its checked text.
trait SettingValue: Sized {
    fn read(text: &str) -> Result<Self, String>;
}

macro_rules! number_values {
    ($($t:ty),*) => {$(
        impl SettingValue for $t {
            fn read(text: &str) -> Result<$t, String> {
                text.parse().map_err(|_| format!("'{text}' is not a number that fits"))
            }
        }
    )*};
}
number_values!(u8, u32, u64, usize, i32);

impl SettingValue for bool {
    fn read(text: &str) -> Result<bool, String> {
        Ok(text == "true")
    }
}

impl SettingValue for String {
    fn read(text: &str) -> Result<String, String> {
        Ok(text.to_owned())
    }
}

impl SettingValue for ThinkMode {
    fn read(text: &str) -> Result<ThinkMode, String> {
        text.parse()
    }
}

/// A row of [`SETTINGS`] for the field `$key` of [`Config`].
macro_rules! setting {
    ($key:ident, $option:expr, $flag:expr, $kind:expr, $doc:expr) => {
        Setting {
            key: stringify!($key),
            option: $option,
            flag: $flag,
            kind: $kind,
            doc: $doc,
            get: |config| config.$key.to_string(),
            set: |config, value| {
                config.$key = SettingValue::read(value)?;
                Ok(())
            },
        }
    };
}

/// The names `log_level` takes.
pub const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Every setting, in the order `uci` declares those that are UCI options. Adding a setting touches this file alone
/// (a field of [`Config`], its default, and a row here) and one doc: `DEEPTREE_BLESS=1 cargo test --test docs` writes
/// docs/reference/settings.md's table and docs/reference/uci-options.md's list of `uci`'s options again from it, and
/// tests/settings.rs and tests/docs.rs hold every source (the file, the flags, the options, `--help`, the pages) to it.
pub const SETTINGS: &[Setting] = &[
    setting!(
        tree_path,
        Some("TreePath"),
        None,
        Kind::Text,
        "Directory of the tree store; empty: the user's data directory (--db and $DEEPTREE_DB choose another)."
    ),
    setting!(
        engine,
        Some("InnerEngine"),
        Some("engine"),
        Kind::Text,
        "Inner engine command line: a program on PATH, a path, or a wrapper such as `ssh host stockfish`."
    ),
    Setting {
        key: "engines",
        option: Some("Engines"),
        flag: Some("engines"),
        kind: Kind::Text,
        doc: "Inner engines for growing the tree, several kinds in one line: `CMD | workers=N | threads=N | hash=MIB | \
              option.NAME=VALUE ; CMD ...`; empty: `engine`, `workers` of it.",
        get: |config| config.engines.clone(),
        set: |config, value| {
            EngineSpec::parse_list(value).map_err(|e| format!("engines: {e}"))?;
            config.engines = value.to_owned();
            Ok(())
        },
    },
    setting!(
        engine_depth,
        Some("EngineDepth"),
        Some("engine-depth"),
        Kind::Spin { min: 1, max: 99 },
        "Engine depth D: the fixed depth of every inner-engine search that creates an evaluation."
    ),
    setting!(
        move_distance,
        Some("MoveDistance"),
        Some("move-distance"),
        Kind::Spin { min: 0, max: MAX_MOVE_DISTANCE },
        "Move distance in centipawns at plies 0 and 1; halved at each ply after."
    ),
    setting!(
        move_distance_white,
        None,
        Some("move-distance-white"),
        Kind::Spin { min: 0, max: MAX_MOVE_DISTANCE },
        "The move distance of White's moves where it differs; 0: the move distance."
    ),
    setting!(
        move_distance_black,
        None,
        Some("move-distance-black"),
        Kind::Spin { min: 0, max: MAX_MOVE_DISTANCE },
        "The move distance of Black's moves where it differs; 0: the move distance."
    ),
    setting!(
        workers,
        None,
        Some("workers"),
        Kind::Spin { min: 0, max: 1_000_000 },
        "Inner-engine workers for analyze; 0: one per core."
    ),
    setting!(
        look_ahead,
        None,
        Some("look-ahead"),
        Kind::Spin { min: -1, max: 255 },
        "Software depths past the one being settled in which free engines run searches ahead of their turn; -1 \
         (off) runs none."
    ),
    setting!(
        background_analysis,
        Some("BackgroundAnalysis"),
        None,
        Kind::Check,
        "When no timed game runs, keep growing the last position's tree (UCI mode)."
    ),
    setting!(
        store_searches,
        Some("StoreSearches"),
        None,
        Kind::Check,
        "Store each search of a game as its position's evaluation, so the tree answers there next time (UCI mode)."
    ),
    setting!(
        learn_from_games,
        Some("LearnFromGames"),
        None,
        Kind::Check,
        "Record the games played in the store's folder as games.pgn, for `analyze --games`, and learn from tree moves refuted in play: searched again at `ucinewgame` and added as tasks for `analyze --tasks` (with store_searches; UCI mode)."
    ),
    setting!(
        tree_depth_margin,
        Some("TreeDepthMargin"),
        None,
        Kind::Spin { min: 0, max: MAX_TREE_DEPTH_MARGIN as i64 },
        "Plies the tree may know less than a timed search would reach and still answer at once (UCI mode)."
    ),
    setting!(
        think_mode,
        Some("ThinkMode"),
        None,
        Kind::Combo { vars: &ThinkMode::NAMES },
        "What a timed `go` does where the tree does not already answer: direct, tree or auto (UCI mode)."
    ),
    setting!(
        no_progress,
        Some("NoProgress"),
        Some("no-progress"),
        Kind::Check,
        "Deep Blue's \"no progress\" rule: refuse a move into a position the same side could have reached earlier \
         on the path."
    ),
    setting!(
        screen,
        Some("Screen"),
        Some("screen"),
        Kind::Check,
        "Screening: search a node's moves without an edge at the engine depth only when a screen two plies \
         shallower (plus the margin) could still reach its window."
    ),
    setting!(
        screen_margin,
        None,
        Some("screen-margin"),
        Kind::Spin { min: 0, max: MAX_MOVE_DISTANCE },
        "Centipawns a screened score may rise at the engine depth."
    ),
    setting!(engine_hash_mib, Some("Hash"), None, Kind::Spin { min: 1, max: 65536 }, "Hash of each inner engine, MiB."),
    setting!(
        engine_handshake_timeout_secs,
        None,
        None,
        Kind::Spin { min: 1, max: 3600 },
        "Seconds an inner engine may take to answer `uci` or `isready` before it is restarted."
    ),
    setting!(
        engine_search_timeout_secs,
        None,
        None,
        Kind::Spin { min: 1, max: 86400 },
        "Seconds a searching engine may stay silent before it is asked `isready` (and counts as hung without an \
         answer)."
    ),
    setting!(
        map_size_mib,
        None,
        None,
        Kind::Spin { min: 1, max: 1 << 24 },
        "Initial LMDB map size in MiB (it grows on demand)."
    ),
    setting!(
        write_batch,
        None,
        None,
        Kind::Spin { min: 1, max: 10_000_000 },
        "Most changes committed in one write transaction."
    ),
    setting!(
        log_level,
        None,
        None,
        Kind::Combo { vars: &LOG_LEVELS },
        "Log level on stderr: off, error, warn, info, debug or trace."
    ),
];

/// Most centipawns of a move distance (and of the screen's margin).
pub const MAX_MOVE_DISTANCE: i64 = 1000;

/// The setting of `key`.
pub fn setting(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key)
}

impl Setting {
    /// Checks `value` against the setting's kind and returns it normalised (`true`/`false`, a number, a name as the
    /// kind spells it); the error names the setting and its range.
    pub fn check(&self, value: &str) -> Result<String, String> {
        let value = value.trim();
        let key = self.key;
        match self.kind {
            Kind::Check => match value.to_ascii_lowercase().as_str() {
                "true" | "on" => Ok("true".into()),
                "false" | "off" => Ok("false".into()),
                _ => Err(format!("{key} takes true or false (on or off), not '{}'", printable_value(value))),
            },
            Kind::Spin { min, max } => {
                let number = match value.parse::<i64>() {
                    Ok(number) => number,
                    Err(_) if min == -1 && value.eq_ignore_ascii_case("off") => -1,
                    Err(_) => {
                        let off = if min == -1 { " or off" } else { "" };
                        return Err(format!(
                            "{key} takes a number {min}..{max}{off}, not '{}'",
                            printable_value(value)
                        ));
                    }
                };
                if !(min..=max).contains(&number) {
                    return Err(format!("{key} {number} is out of range {min}..{max}"));
                }
                Ok(number.to_string())
            }
            Kind::Combo { vars } => vars
                .iter()
                .find(|v| v.eq_ignore_ascii_case(value))
                .map(|v| (*v).to_owned())
                .ok_or_else(|| format!("{key} takes one of {}, not '{}'", vars.join(", "), printable_value(value))),
            Kind::Text => Ok(value.to_owned()),
        }
    }

    /// Sets `value` in `config` after checking it; nothing changes on an error.
    pub fn apply(&self, config: &mut Config, value: &str) -> Result<(), String> {
        let value = self.check(value)?;
        (self.set)(config, &value)
    }
}

/// User text quoted in a message: control characters escaped, at most 40 characters.
fn printable_value(text: &str) -> String {
    crate::game::printable(text).chars().take(40).collect()
}

/// The flags of `analyze` that set settings: one `--flag` for each row of [`SETTINGS`] that has one, with its doc
/// and its range, made from the table (clap's `flatten`). What the command line gave, in the table's order.
#[derive(Debug, Clone, Default)]
pub struct SettingFlags {
    pub given: Vec<(&'static str, String)>,
}

impl SettingFlags {
    /// Whether the command line gave the setting `key`.
    pub fn gave(&self, key: &str) -> bool {
        self.given.iter().any(|(k, _)| *k == key)
    }

    /// `config` with the command line's settings over it.
    pub fn over(&self, config: &Config) -> Config {
        let mut config = config.clone();
        for (key, value) in &self.given {
            if let Some(setting) = setting(key) {
                // Checked whole by the flag's parser: a value clap accepted sets.
                if let Err(e) = setting.apply(&mut config, value) {
                    log::warn!("--{}: {e}", setting.flag.unwrap_or(key));
                }
            }
        }
        config
    }
}

impl clap::FromArgMatches for SettingFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<SettingFlags, clap::Error> {
        let given = SETTINGS
            .iter()
            .filter(|s| s.flag.is_some())
            .filter_map(|s| matches.get_one::<String>(s.key).map(|value| (s.key, value.clone())))
            .collect();
        Ok(SettingFlags { given })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = SettingFlags::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for SettingFlags {
    fn augment_args(command: clap::Command) -> clap::Command {
        let command = SETTINGS.iter().fold(command, |command, setting| {
            let Some(flag) = setting.flag else { return command };
            let value_name = match setting.kind {
                Kind::Check => "on|off",
                Kind::Spin { min: -1, .. } => "N|off",
                Kind::Spin { .. } => "N",
                Kind::Combo { .. } | Kind::Text => "VALUE",
            };
            let range = match setting.kind {
                Kind::Spin { min, max } => format!(" ({min} to {max})"),
                _ => String::new(),
            };
            command.arg(
                clap::Arg::new(setting.key)
                    .long(flag)
                    .allow_negative_numbers(matches!(setting.kind, Kind::Spin { min, .. } if min < 0))
                    .value_name(value_name)
                    .help(format!("{} Default: the settings' {}{range}.", setting.doc, setting.key))
                    // The whole setting's rule (an engine list's fields included), so that a value `over` would
                    // refuse is clap's error, not a warning and the default.
                    .value_parser(move |value: &str| {
                        setting.apply(&mut Config::default(), value).and_then(|()| setting.check(value))
                    }),
            )
        });
        // A list of engines replaces one engine and its workers.
        command.mut_arg("engines", |arg| arg.conflicts_with_all(["engine", "workers"]))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        SettingFlags::augment_args(command)
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
        // Every value held to its setting's range, name or form, as a flag or a UCI option is.
        for setting in SETTINGS {
            setting
                .apply(&mut config.clone(), &(setting.get)(&config))
                .map_err(|message| ConfigError::Parse { path: path.to_owned(), message })?;
        }
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
    // A directory opens, then fails at its first read (`line 1: Is a directory`): said as it is.
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        let source = std::io::Error::from(std::io::ErrorKind::IsADirectory);
        return Err(ConfigError::Read { path: path.to_owned(), source });
    }
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
        // The settings' ranges hold in a checked `Config`; clamped again for one made in code.
        let cap = |cp: u32| i64::from(cp).min(MAX_MOVE_DISTANCE) as i32;
        let side = |cp: u32| (cp > 0).then(|| cap(cp));
        Params::new(config.engine_depth.max(1), cap(config.move_distance))
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
