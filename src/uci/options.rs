//! deeptree's own UCI options, the standard ones, and the inner engine's, with their checks.

use crate::{
    config::Config,
    engine::protocol::{EngineOption, OptionKind},
    search::analysis::{Params, Screening},
};

/// Options deeptree declares itself; an inner engine's option of the same name is not offered again.
pub const OWN: [&str; 16] = [
    "TreePath",
    "InnerEngine",
    "Engines",
    "EngineDepth",
    "MoveDistance",
    "BackgroundAnalysis",
    "StoreSearches",
    "TreeDepthMargin",
    "NoProgress",
    "Screen",
    "Hash",
    "Threads",
    "MultiPV",
    "Ponder",
    "UCI_AnalyseMode",
    "UCI_Chess960",
];

/// The values of deeptree's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub tree_path: String,
    pub inner_engine: String,
    /// The tree's engines in the one-line form of [`crate::engine::spec`]; empty: `InnerEngine`, as many as `Threads`.
    pub engines: String,
    pub engine_depth: u8,
    pub move_distance: u32,
    pub background_analysis: bool,
    /// A game's direct searches are stored in the tree as their positions' evaluations.
    pub store_searches: bool,
    /// Plies the tree may know less than a timed search would reach and still answer at once.
    pub tree_depth_margin: u8,
    /// Deep Blue's "no progress" rule in the tree's growth.
    pub no_progress: bool,
    /// Screening of alternatives in the tree's growth.
    pub screen: bool,
    /// Its margin, from the settings (not a UCI option).
    pub screen_margin: u32,
    pub hash_mib: u32,
    pub threads: u32,
    pub multipv: u32,
    pub ponder: bool,
    pub analyse_mode: bool,
    /// Positions and moves are Chess960 (castling as king takes rook); forwarded to the inner engines.
    pub chess960: bool,
    /// Options of the inner engine set by the GUI, forwarded to every worker.
    pub inner: Vec<(String, String)>,
    /// The settings' look ahead for the tree's growth (not a UCI option).
    pub look_ahead: Option<u8>,
}

impl Options {
    /// The search's parameters as these options set them, with no depth or time limit (a search in a game runs until
    /// the GUI stops it).
    pub fn analysis_params(&self) -> Params {
        Params {
            engine_depth: self.engine_depth,
            move_distance: self.move_distance as i32,
            max_depth: u8::MAX - 1,
            time: None,
            no_progress: self.no_progress,
            screen: Screening::of_setting(self.screen, self.screen_margin),
        }
    }

    pub fn from_config(config: &Config, tree_path: String) -> Options {
        Options {
            tree_path,
            inner_engine: config.engine.clone(),
            engines: config.engines.clone(),
            engine_depth: config.engine_depth,
            move_distance: config.move_distance,
            background_analysis: config.background_analysis,
            store_searches: config.store_searches,
            tree_depth_margin: config.tree_depth_margin,
            no_progress: config.no_progress,
            screen: config.screen,
            screen_margin: config.screen_margin,
            hash_mib: config.engine_hash_mib,
            threads: 1,
            multipv: 1,
            ponder: false,
            analyse_mode: false,
            chess960: false,
            inner: Vec::new(),
            look_ahead: config.look_ahead(),
        }
    }

    /// The declarations of deeptree's own and the standard options, with the current values as defaults.
    pub fn declarations(&self) -> Vec<EngineOption> {
        let spin = |name: &str, default: i64, min: i64, max: i64| EngineOption {
            name: name.to_owned(),
            kind: OptionKind::Spin { default, min, max },
        };
        let check =
            |name: &str, default: bool| EngineOption { name: name.to_owned(), kind: OptionKind::Check { default } };
        let string = |name: &str, default: &str| EngineOption {
            name: name.to_owned(),
            kind: OptionKind::String { default: default.to_owned() },
        };
        vec![
            string("TreePath", &self.tree_path),
            string("InnerEngine", &self.inner_engine),
            string("Engines", &self.engines),
            spin("EngineDepth", i64::from(self.engine_depth), 1, 99),
            spin("MoveDistance", i64::from(self.move_distance), 0, 1000),
            check("BackgroundAnalysis", self.background_analysis),
            check("StoreSearches", self.store_searches),
            spin(
                "TreeDepthMargin",
                i64::from(self.tree_depth_margin),
                0,
                i64::from(crate::config::MAX_TREE_DEPTH_MARGIN),
            ),
            check("NoProgress", self.no_progress),
            check("Screen", self.screen),
            spin("Hash", i64::from(self.hash_mib), 1, 65536),
            spin("Threads", i64::from(self.threads), 1, 1024),
            spin("MultiPV", i64::from(self.multipv), 1, 500),
            check("Ponder", self.ponder),
            check("UCI_AnalyseMode", self.analyse_mode),
            check("UCI_Chess960", self.chess960),
        ]
    }

    /// Applies `setoption` to one of deeptree's own options; the error says why a value was refused.
    pub fn set_own(&mut self, name: &str, value: &str) -> Result<(), String> {
        let declared = self.declarations().into_iter().find(|o| o.name.eq_ignore_ascii_case(name));
        let declared = declared.ok_or_else(|| format!("unknown option '{name}'"))?;
        let value = check_value(&declared, value)?;
        let number = || value.parse::<i64>().unwrap_or(0);
        match declared.name.as_str() {
            "TreePath" => self.tree_path = value,
            "InnerEngine" => self.inner_engine = value,
            "Engines" => {
                let value = if value == "<empty>" { String::new() } else { value };
                crate::engine::spec::EngineSpec::parse_list(&value).map_err(|e| format!("option Engines: {e}"))?;
                self.engines = value;
            }
            "EngineDepth" => self.engine_depth = number() as u8,
            "MoveDistance" => self.move_distance = number() as u32,
            "BackgroundAnalysis" => self.background_analysis = value == "true",
            "StoreSearches" => self.store_searches = value == "true",
            "TreeDepthMargin" => self.tree_depth_margin = number() as u8,
            "NoProgress" => self.no_progress = value == "true",
            "Screen" => self.screen = value == "true",
            "Hash" => self.hash_mib = number() as u32,
            "Threads" => self.threads = number() as u32,
            "MultiPV" => self.multipv = number() as u32,
            "Ponder" => self.ponder = value == "true",
            "UCI_Chess960" => self.chess960 = value == "true",
            _ => self.analyse_mode = value == "true",
        }
        Ok(())
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
        let mut options = Options::from_config(&Config::default(), "/tmp/tree".into());
        assert!(options.set_own("Threads", "4").is_ok());
        assert_eq!(options.threads, 4);
        assert!(options.set_own("threads", "0").unwrap_err().contains("out of range"));
        assert!(options.set_own("Ponder", "maybe").is_err());
        assert!(options.set_own("MultiPV", "x").is_err());
        assert!(options.set_own("NoSuchOption", "1").is_err());
        assert!(options.set_own("Engines", "stockfish | workers=3 ; ssh box stockfish | hash=64").is_ok());
        assert_eq!(options.engines, "stockfish | workers=3 ; ssh box stockfish | hash=64");
        let refused = options.set_own("Engines", "stockfish | workers=none").unwrap_err();
        assert!(refused.contains("Engines") && refused.contains("workers=none"), "{refused}");
        assert_eq!(
            options.engines, "stockfish | workers=3 ; ssh box stockfish | hash=64",
            "a refused list is not kept"
        );
        assert!(options.set_own("Engines", "<empty>").is_ok());
        assert_eq!(options.engines, "");
        assert!(options.set_own("UCI_AnalyseMode", "TRUE").is_ok());
        assert!(options.analyse_mode);
        assert!(options.set_own("uci_chess960", "true").is_ok());
        assert!(options.chess960 && options.analyse_mode);
    }
}
