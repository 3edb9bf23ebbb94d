//! deeptree's UCI options: one table of rows (name, kind, get, set), the standard options among them, and the check
//! of a value against an option's declaration (also used for the inner engine's options that deeptree offers).
//!
//! The settings' options set the session's one [`Config`] (the settings file's values with the GUI's changes over
//! them); the standard ones (`Threads`, `MultiPV`, `Ponder`, `UCI_AnalyseMode`, `UCI_Chess960`) belong to the session
//! alone. A setting is a UCI option where its row of `config::SETTINGS` names one, with the range declared there; a
//! name that no row has is an error.
//!
//! ```
//! use deeptree::{config::Config, uci::options::Options};
//!
//! let mut options = Options::new(Config::default());
//! options.set("EngineDepth", "12")?;
//! assert_eq!(options.config.engine_depth, 12);
//! assert!(options.set("EngineDepht", "12").unwrap_err().contains("unknown option"));
//! # Ok::<_, String>(())
//! ```

use crate::{
    config::{Config, SETTINGS, Setting},
    engine::protocol::{EngineOption, OptionKind},
    search::analysis::Params,
};

/// The values of deeptree's options: the settings, and what only a GUI sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The settings as the GUI has changed them (`TreePath` is `tree_path`, `InnerEngine` is `engine`, ...).
    pub config: Config,
    /// Threads of the direct engine, and the tree's single-threaded workers when `Engines` is empty.
    pub threads: u32,
    pub multipv: u32,
    pub ponder: bool,
    pub analyse_mode: bool,
    /// Positions and moves are Chess960 (castling as king takes rook); forwarded to the inner engines.
    pub chess960: bool,
    /// `UCI_ShowWDL`: every `info` line with a score carries its win, draw and loss rates (see `uci::wdl`).
    pub show_wdl: bool,
    /// `ShowTreeInfo`: the tree's own `info string`s during a search (its main line, the idea scores).
    pub show_tree_info: bool,
    /// Options of the inner engine set by the GUI, forwarded to every worker.
    pub inner: Vec<(String, String)>,
}

pub use crate::config::Kind;

/// Where a row's value lives: a setting of the session's [`Config`] (declared in `config::SETTINGS`, its range
/// there), or the session's own (the standard options).
enum Value {
    Setting(&'static Setting),
    Session { get: fn(&Options) -> String, set: fn(&mut Options, &str) },
}

/// One of deeptree's options: its UCI name and kind, and where its value lives.
pub struct Row {
    pub name: &'static str,
    pub kind: Kind,
    value: Value,
}

/// The option that excludes a move of the last `position` from the tree (`setoption name MarkExclude value Nf3`).
pub const MARK_EXCLUDE: &str = "MarkExclude";
/// The option that includes a move of the last `position` in the tree whatever the move distance.
pub const MARK_INCLUDE: &str = "MarkInclude";
/// The option that lifts the mark on a move of the last `position`.
pub const MARK_LIFT: &str = "MarkLift";

/// The options that are actions, not values: the analyst's marks on a move of the last `position` (see
/// `store::marks`), the value being the move in SAN or UCI. The session makes the mark; they keep no value, and
/// `uci` declares them after [`options`].
pub const MARK_ACTIONS: [&str; 3] = [MARK_EXCLUDE, MARK_INCLUDE, MARK_LIFT];

/// A number the row's range has already checked.
fn checked<T: std::str::FromStr + Default>(value: &str) -> T {
    value.parse().unwrap_or_default()
}

/// A standard option: its name, its kind, how it reads and how it sets a checked value.
type SessionOption = (&'static str, Kind, fn(&Options) -> String, fn(&mut Options, &str));

/// The standard options, the session's alone.
const SESSION: [SessionOption; 7] = [
    ("Threads", Kind::Spin { min: 1, max: 1024 }, |o| o.threads.to_string(), |o, v| o.threads = checked(v)),
    ("MultiPV", Kind::Spin { min: 1, max: 500 }, |o| o.multipv.to_string(), |o, v| o.multipv = checked(v)),
    ("Ponder", Kind::Check, |o| o.ponder.to_string(), |o, v| o.ponder = v == "true"),
    ("UCI_AnalyseMode", Kind::Check, |o| o.analyse_mode.to_string(), |o, v| o.analyse_mode = v == "true"),
    ("UCI_Chess960", Kind::Check, |o| o.chess960.to_string(), |o, v| o.chess960 = v == "true"),
    ("UCI_ShowWDL", Kind::Check, |o| o.show_wdl.to_string(), |o, v| o.show_wdl = v == "true"),
    ("ShowTreeInfo", Kind::Check, |o| o.show_tree_info.to_string(), |o, v| o.show_tree_info = v == "true"),
];

/// deeptree's options, in the order `uci` declares them: the settings that are UCI options, then the standard ones.
pub fn options() -> &'static [Row] {
    static ROWS: std::sync::LazyLock<Vec<Row>> = std::sync::LazyLock::new(|| {
        let settings = SETTINGS.iter().filter_map(|setting| {
            setting.option.map(|name| Row { name, kind: setting.kind, value: Value::Setting(setting) })
        });
        let session =
            SESSION.iter().map(|&(name, kind, get, set)| Row { name, kind, value: Value::Session { get, set } });
        settings.chain(session).collect()
    });
    &ROWS
}

/// The row of the option `name` (compared as UCI does, ignoring case).
pub fn row(name: &str) -> Option<&'static Row> {
    options().iter().find(|r| r.name.eq_ignore_ascii_case(name))
}

impl Row {
    /// The option's value now.
    pub fn get(&self, options: &Options) -> String {
        match &self.value {
            Value::Setting(setting) => (setting.get)(&options.config),
            Value::Session { get, .. } => get(options),
        }
    }

    /// Sets a value checked against the row's declaration (a setting's own form, as `Engines`', checked too).
    fn set(&self, options: &mut Options, value: &str) -> Result<(), String> {
        match &self.value {
            Value::Setting(setting) => (setting.set)(&mut options.config, value).map_err(|e| {
                format!("option {}: {}", self.name, e.trim_start_matches(setting.key).trim_start_matches(": "))
            }),
            Value::Session { set, .. } => {
                set(options, value);
                Ok(())
            }
        }
    }

    /// The row's declaration, with the current value as the default.
    pub fn declaration(&self, options: &Options) -> EngineOption {
        let value = self.get(options);
        let kind = match self.kind {
            Kind::Check => OptionKind::Check { default: value == "true" },
            Kind::Spin { min, max } => OptionKind::Spin { default: value.parse().unwrap_or(min), min, max },
            Kind::Combo { vars } => {
                OptionKind::Combo { default: value, vars: vars.iter().map(|v| (*v).to_owned()).collect() }
            }
            Kind::Text => OptionKind::String { default: value },
        };
        EngineOption { name: self.name.to_owned(), kind }
    }
}

impl Options {
    /// The settings' options, and the standard ones as a GUI finds them before it sets any (one thread, one line,
    /// no pondering, play rather than analysis, standard chess).
    pub fn new(config: Config) -> Options {
        Options {
            config,
            threads: 1,
            multipv: 1,
            ponder: false,
            analyse_mode: false,
            chess960: false,
            show_wdl: false,
            show_tree_info: true,
            inner: Vec::new(),
        }
    }

    /// The search's parameters as these options set them, with no depth or time limit (a search in a game runs until
    /// the GUI stops it).
    pub fn analysis_params(&self) -> Params {
        Params::from(&self.config)
    }

    /// The settings' look ahead for the tree's growth (not a UCI option).
    pub fn look_ahead(&self) -> Option<u8> {
        self.config.look_ahead()
    }

    /// The declarations of deeptree's options, with the current values as defaults.
    pub fn declarations(&self) -> Vec<EngineOption> {
        options()
            .iter()
            .map(|row| row.declaration(self))
            .chain(MARK_ACTIONS.iter().map(|name| EngineOption {
                name: (*name).to_owned(),
                kind: OptionKind::String { default: String::new() },
            }))
            .collect()
    }

    /// Applies `setoption` to one of deeptree's options; the error says why the name or the value was refused (and
    /// nothing changed).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let row = row(name).ok_or_else(|| format!("unknown option '{name}'"))?;
        // GUIs send an empty string option as `<empty>`.
        let value = if matches!(row.kind, Kind::Text) && value.trim() == "<empty>" { "" } else { value };
        let value = check_value(&row.declaration(self), value)?;
        row.set(self, &value)
    }
}

/// Checks a value against an option's declaration; returns it normalised (`true`/`false`, a number).
pub fn check_value(option: &EngineOption, value: &str) -> Result<String, String> {
    let value = value.trim();
    match &option.kind {
        OptionKind::Check { .. } => match value.to_ascii_lowercase().as_str() {
            "true" => Ok("true".into()),
            "false" => Ok("false".into()),
            _ => Err(format!("option {} takes true or false, not '{value}'", option.name)),
        },
        OptionKind::Spin { min, max, .. } => {
            let number: i64 =
                value.parse().map_err(|_| format!("option {} takes a number, not '{value}'", option.name))?;
            if number < *min || number > *max {
                return Err(format!("option {} value {number} is out of range {min}..{max}", option.name));
            }
            Ok(number.to_string())
        }
        OptionKind::Combo { vars, .. } => vars
            .iter()
            .find(|v| v.eq_ignore_ascii_case(value))
            .cloned()
            .ok_or_else(|| format!("option {} takes one of {}, not '{value}'", option.name, vars.join(", "))),
        OptionKind::Button => Ok(String::new()),
        OptionKind::String { .. } => Ok(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked() {
        let mut options = Options::new(Config::default());
        assert!(options.set("Threads", "4").is_ok());
        assert_eq!(options.threads, 4);
        assert!(options.set("threads", "0").unwrap_err().contains("out of range"));
        assert!(options.set("Ponder", "maybe").is_err());
        assert!(options.set("MultiPV", "x").is_err());
        assert!(options.set("NoSuchOption", "1").is_err());
        assert!(options.set("Engines", "stockfish | workers=3 ; ssh box stockfish | hash=64").is_ok());
        assert_eq!(options.config.engines, "stockfish | workers=3 ; ssh box stockfish | hash=64");
        let refused = options.set("Engines", "stockfish | workers=none").unwrap_err();
        assert!(refused.contains("Engines") && refused.contains("workers=none"), "{refused}");
        assert_eq!(
            options.config.engines, "stockfish | workers=3 ; ssh box stockfish | hash=64",
            "a refused list is not kept"
        );
        assert!(options.set("Engines", "<empty>").is_ok());
        assert_eq!(options.config.engines, "");
        assert!(options.set("UCI_AnalyseMode", "TRUE").is_ok());
        assert!(options.analyse_mode);
        assert!(options.set("uci_chess960", "true").is_ok());
        assert!(options.chess960 && options.analyse_mode);
    }

    /// Before the table, a name missing from the setter's match set `UCI_AnalyseMode`: every row now sets its own
    /// value and no other, and an unknown name changes nothing.
    #[test]
    fn every_row_sets_its_own_value_and_an_unknown_name_sets_none() {
        let before = Options::new(Config::default());
        for row in options() {
            let mut options = before.clone();
            let value = match row.kind {
                Kind::Check => if row.get(&options) == "true" { "false" } else { "true" }.to_owned(),
                Kind::Spin { min, max } => {
                    let now: i64 = row.get(&options).parse().unwrap();
                    if now < max { (now + 1).to_string() } else { min.to_string() }
                }
                Kind::Combo { vars } => {
                    let now = row.get(&options);
                    vars.iter().find(|v| **v != now).map(|v| (*v).to_owned()).unwrap()
                }
                Kind::Text => "stockfish".to_owned() + row.name,
            };
            let value = if row.name == "Engines" { "stockfish | workers=2".to_owned() } else { value };
            options.set(row.name, &value).unwrap();
            assert_eq!(row.get(&options), value, "{} reads back what was set", row.name);
            for other in super::options().iter().filter(|other| other.name != row.name) {
                assert_eq!(other.get(&options), other.get(&before), "setting {} changed {}", row.name, other.name);
            }
            assert_eq!(options.declarations().iter().filter(|d| d.name == row.name).count(), 1);
        }
        let mut options = before.clone();
        let refused = options.set("AnalyseMode", "true").unwrap_err();
        assert!(refused.contains("unknown option 'AnalyseMode'"), "{refused}");
        assert_eq!(options, before);
    }

    #[test]
    fn the_settings_set_the_declared_defaults() {
        let config = Config { engine_depth: 11, tree_depth_margin: 3, screen: true, ..Config::default() };
        let options = Options::new(config);
        let declared = options.declarations();
        let find = |name: &str| declared.iter().find(|d| d.name == name).unwrap().kind.clone();
        assert!(matches!(find("EngineDepth"), OptionKind::Spin { default: 11, min: 1, max: 99 }));
        assert!(matches!(find("TreeDepthMargin"), OptionKind::Spin { default: 3, min: 0, max: 20 }));
        assert!(matches!(find("Screen"), OptionKind::Check { default: true }));
        assert_eq!(options.analysis_params().engine_depth, 11);
        assert!(options.analysis_params().screen.is_some());
    }
}
