//! A list of inner engines in one line of text, for the settings, `analyze --engines` and the UCI option `Engines`.
//!
//! ```
//! use deeptree::engine::{EngineConfig, spec::EngineSpec};
//!
//! let specs = EngineSpec::parse_list(
//!     "stockfish | workers=3 ; ssh -p 2222 box /usr/games/stockfish | workers=2 | hash=128 | option.Move Overhead=0",
//! )?;
//! assert_eq!(specs.len(), 2);
//! assert_eq!(specs[1].command, "ssh -p 2222 box /usr/games/stockfish");
//! let configs = EngineSpec::configs(&specs, &EngineConfig::new("stockfish"));
//! assert_eq!(configs.len(), 5); // one per worker
//! assert!(configs[4].options.contains(&("Hash".to_owned(), "128".to_owned())));
//! # Ok::<_, deeptree::engine::spec::SpecError>(())
//! ```
//!
//! The form: engines separated by `;`, each a command line followed by `| key=value` fields:
//! - `workers=N`: how many of this engine run at once (default 1);
//! - `threads=N`: its `Threads` (default 1);
//! - `hash=MIB`: its `Hash` (default: the settings' `engine_hash_mib`);
//! - `fresh=on`: every search starts from a cleared engine (`ucinewgame`), so that its answer depends on the
//!   position, the moves and the depth alone, never on the searches before it (default off: the hash carries over);
//! - `searchmoves=on|off|multipv`: whether the engine keeps to `go ... searchmoves` (default: learnt at its first
//!   answer outside them); with `off`, each move is searched on its own (the position after it, one ply shallower);
//!   with `multipv`, the moves allowed are asked through MultiPV (one line more than the moves left out);
//! - `option.NAME=VALUE`: any other UCI option.

use std::fmt;

use super::process::{EngineConfig, Searchmoves};

/// One kind of inner engine and how many of it run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSpec {
    pub command: String,
    pub workers: usize,
    pub threads: u32,
    pub hash_mib: Option<u32>,
    /// Every search from a cleared engine.
    pub fresh: bool,
    /// Whether it keeps to `searchmoves`, and how they are asked where it does not (`None`: learnt).
    pub searchmoves: Option<Searchmoves>,
    /// Other UCI options, in the order given.
    pub options: Vec<(String, String)>,
}

/// Most workers a list of engines may ask for in all: a `setoption name Engines` with `workers=4000000000` (or
/// thousands of engines of 1024 workers each) is refused instead of starting engines, or allocating their
/// configurations, until the machine gives out.
pub const MAX_SPEC_WORKERS: usize = 1024;

/// A list of engines that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// An engine with no command line (the 1-based place in the list).
    #[error("engine {engine}: no command line")]
    NoCommand { engine: usize },
    /// A field that is not `key=value`, or whose key is not known.
    #[error(
        "engine {engine}: '{field}' is not one of workers=N, threads=N, hash=MIB, fresh=on|off, \
         searchmoves=on|off|multipv or option.NAME=VALUE"
    )]
    BadField { engine: usize, field: String },
    /// A number that does not read as one, or is 0 where at least 1 is needed.
    #[error("engine {engine}: {key}={value}: give a whole number of at least 1")]
    BadNumber { engine: usize, key: String, value: String },
    /// More workers than [`MAX_SPEC_WORKERS`] in all, counted up to this engine.
    #[error("engine {engine}: workers={workers}: at most {MAX_SPEC_WORKERS} workers in all the list's engines")]
    TooManyWorkers { engine: usize, workers: u32 },
}

impl EngineSpec {
    /// Reads a list in the one-line form. An empty text is an empty list.
    pub fn parse_list(text: &str) -> Result<Vec<EngineSpec>, SpecError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let specs: Vec<EngineSpec> = text
            .split(';')
            .enumerate()
            .map(|(i, engine)| EngineSpec::parse(engine, i + 1))
            .collect::<Result<_, _>>()?;
        let mut total = 0usize;
        for (i, spec) in specs.iter().enumerate() {
            total = total.saturating_add(spec.workers);
            if total > MAX_SPEC_WORKERS {
                return Err(SpecError::TooManyWorkers { engine: i + 1, workers: spec.workers as u32 });
            }
        }
        Ok(specs)
    }

    fn parse(text: &str, engine: usize) -> Result<EngineSpec, SpecError> {
        let mut fields = text.split('|');
        let command = fields.next().unwrap_or_default().trim().to_owned();
        if command.is_empty() {
            return Err(SpecError::NoCommand { engine });
        }
        let mut spec = EngineSpec {
            command,
            workers: 1,
            threads: 1,
            hash_mib: None,
            fresh: false,
            searchmoves: None,
            options: Vec::new(),
        };
        for field in fields {
            let field = field.trim();
            let Some((key, value)) = field.split_once('=') else {
                return Err(SpecError::BadField { engine, field: field.to_owned() });
            };
            let (key, value) = (key.trim(), value.trim());
            let number = || match value.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(SpecError::BadNumber { engine, key: key.to_owned(), value: value.to_owned() }),
            };
            match key {
                "workers" => {
                    let workers = number()?;
                    if workers as usize > MAX_SPEC_WORKERS {
                        return Err(SpecError::TooManyWorkers { engine, workers });
                    }
                    spec.workers = workers as usize;
                }
                "threads" => spec.threads = number()?,
                "hash" => spec.hash_mib = Some(number()?),
                "fresh" if value == "on" || value == "off" => spec.fresh = value == "on",
                "searchmoves" if value == "on" => spec.searchmoves = Some(Searchmoves::Honoured),
                "searchmoves" if value == "off" => spec.searchmoves = Some(Searchmoves::Ignored),
                "searchmoves" if value == "multipv" => spec.searchmoves = Some(Searchmoves::MultiPv),
                _ => match key.strip_prefix("option.").map(str::trim).filter(|name| !name.is_empty()) {
                    Some(name) => spec.options.push((name.to_owned(), value.to_owned())),
                    None => return Err(SpecError::BadField { engine, field: field.to_owned() }),
                },
            }
        }
        Ok(spec)
    }

    /// The search threads each worker of this engine runs: its `threads`, or the number an `option.Threads` sets
    /// instead (the option is sent after `threads`, so it is the one the engine keeps).
    pub fn threads_each(&self) -> u64 {
        let set = self.options.iter().rev().find(|(name, _)| name.eq_ignore_ascii_case("threads"));
        set.and_then(|(_, value)| value.trim().parse::<u64>().ok()).unwrap_or(u64::from(self.threads))
    }

    /// The search threads of a list in all: each engine's workers times its threads. This, not the workers alone,
    /// is what the cores of a machine have to run.
    pub fn threads_in_all(specs: &[EngineSpec]) -> u64 {
        specs.iter().map(|s| (s.workers as u64).saturating_mul(s.threads_each())).fold(0, u64::saturating_add)
    }

    /// One engine configuration per worker: `base` (timeouts, `Hash`, options every engine gets) with each engine's
    /// command line, `Threads`, `Hash` and options.
    pub fn configs(specs: &[EngineSpec], base: &EngineConfig) -> Vec<EngineConfig> {
        let mut configs = Vec::new();
        for spec in specs {
            let mut config = base.clone();
            config.command = spec.command.clone();
            config = config.with_option("Threads", spec.threads);
            if let Some(hash) = spec.hash_mib {
                config = config.with_option("Hash", hash);
            }
            config.fresh = spec.fresh;
            config.searchmoves = match spec.searchmoves {
                None => Searchmoves::Unknown,
                Some(set) => set,
            };
            for (name, value) in &spec.options {
                config = config.with_option(name, value);
            }
            configs.extend(std::iter::repeat_n(config, spec.workers));
        }
        configs
    }
}

impl fmt::Display for EngineSpec {
    /// The one-line form, which [`EngineSpec::parse_list`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} | workers={} | threads={}", self.command, self.workers, self.threads)?;
        if let Some(hash) = self.hash_mib {
            write!(f, " | hash={hash}")?;
        }
        if self.fresh {
            write!(f, " | fresh=on")?;
        }
        match self.searchmoves {
            None | Some(Searchmoves::Unknown) => {}
            Some(Searchmoves::Honoured) => write!(f, " | searchmoves=on")?,
            Some(Searchmoves::Ignored) => write!(f, " | searchmoves=off")?,
            Some(Searchmoves::MultiPv) => write!(f, " | searchmoves=multipv")?,
        }
        for (name, value) in &self.options {
            write!(f, " | option.{name}={value}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_engines_are_read_written_and_configured() {
        let specs = EngineSpec::parse_list("stockfish | fresh=on ; stockfish | fresh=off").unwrap();
        assert_eq!((specs[0].fresh, specs[1].fresh), (true, false));
        assert_eq!(EngineSpec::parse_list(&specs[0].to_string()).unwrap()[0], specs[0]);
        let configs = EngineSpec::configs(&specs, &EngineConfig::new("x"));
        assert_eq!((configs[0].fresh, configs[1].fresh), (true, false));
        assert!(matches!(EngineSpec::parse_list("stockfish | fresh=yes"), Err(SpecError::BadField { engine: 1, .. })));
    }

    #[test]
    fn a_list_reads_back_from_its_text() {
        let text = "stockfish | workers=12 ; ssh -p 2222 127.0.0.1 /usr/games/stockfish | workers=2 | threads=2 | \
                    hash=128 | searchmoves=off | option.Move Overhead=0 | option.Skill Level=20";
        let specs = EngineSpec::parse_list(text).unwrap();
        assert_eq!(
            specs[0],
            EngineSpec {
                command: "stockfish".into(),
                workers: 12,
                threads: 1,
                hash_mib: None,
                fresh: false,
                searchmoves: None,
                options: vec![]
            }
        );
        assert_eq!(specs[1].threads, 2);
        assert_eq!(
            specs[1].options,
            vec![("Move Overhead".to_owned(), "0".to_owned()), ("Skill Level".to_owned(), "20".to_owned())]
        );
        let again: Vec<String> = specs.iter().map(ToString::to_string).collect();
        assert_eq!(EngineSpec::parse_list(&again.join(" ; ")).unwrap(), specs);
        assert_eq!(EngineSpec::parse_list("  ").unwrap(), vec![]);
    }

    #[test]
    fn bad_lists_say_which_engine_and_field() {
        assert_eq!(EngineSpec::parse_list("stockfish ; | workers=2"), Err(SpecError::NoCommand { engine: 2 }));
        assert_eq!(
            EngineSpec::parse_list("stockfish | workers=0"),
            Err(SpecError::BadNumber { engine: 1, key: "workers".into(), value: "0".into() })
        );
        assert_eq!(
            EngineSpec::parse_list("stockfish ; sf2 | workers=4000000000"),
            Err(SpecError::TooManyWorkers { engine: 2, workers: 4_000_000_000 })
        );
        assert_eq!(EngineSpec::parse_list("stockfish | workers=1024").unwrap()[0].workers, MAX_SPEC_WORKERS);
        // The bound is on the list's workers in all, not on each engine's.
        let many = ["a | workers=1000"; 2].join(" ; ");
        assert_eq!(EngineSpec::parse_list(&many), Err(SpecError::TooManyWorkers { engine: 2, workers: 1000 }));
        assert_eq!(
            EngineSpec::parse_list("stockfish | speed=9"),
            Err(SpecError::BadField { engine: 1, field: "speed=9".into() })
        );
        assert_eq!(
            EngineSpec::parse_list("stockfish | option.=1"),
            Err(SpecError::BadField { engine: 1, field: "option.=1".into() })
        );
        let message = EngineSpec::parse_list("stockfish | hash=lots").unwrap_err().to_string();
        assert!(message.contains("engine 1") && message.contains("hash=lots"), "{message}");
        // The messages, word for word.
        assert_eq!(SpecError::NoCommand { engine: 2 }.to_string(), "engine 2: no command line");
        assert_eq!(
            SpecError::BadField { engine: 1, field: "speed=9".into() }.to_string(),
            "engine 1: 'speed=9' is not one of workers=N, threads=N, hash=MIB, fresh=on|off, searchmoves=on|off|multipv \
             or option.NAME=VALUE"
        );
        assert_eq!(message, "engine 1: hash=lots: give a whole number of at least 1");
    }

    #[test]
    fn threads_in_all_count_every_worker_and_an_option_that_sets_threads() {
        let specs = EngineSpec::parse_list(
            "a | workers=3 | threads=4 ; b | threads=2 | option.threads=16 ; c | option.Threads=x",
        )
        .unwrap();
        assert_eq!(specs.iter().map(EngineSpec::threads_each).collect::<Vec<_>>(), [4, 16, 1]);
        assert_eq!(EngineSpec::threads_in_all(&specs), 12 + 16 + 1);
        let huge =
            EngineSpec::parse_list(&format!("a | workers={MAX_SPEC_WORKERS} | option.Threads={}", u64::MAX)).unwrap();
        assert_eq!(EngineSpec::threads_in_all(&[huge.clone(), huge].concat()), u64::MAX, "no overflow");
    }

    #[test]
    fn every_worker_gets_its_engines_command_and_options() {
        let specs = EngineSpec::parse_list("a | workers=2 | hash=32 ; b | threads=4 | option.X=y").unwrap();
        let base = EngineConfig::new("stockfish").with_option("Hash", 64);
        let configs = EngineSpec::configs(&specs, &base);
        let described: Vec<(String, Vec<(String, String)>)> =
            configs.iter().map(|c| (c.command.clone(), c.options.clone())).collect();
        let pair = |n: &str, v: &str| (n.to_owned(), v.to_owned());
        assert_eq!(
            described,
            vec![
                ("a".into(), vec![pair("Threads", "1"), pair("Hash", "32")]),
                ("a".into(), vec![pair("Threads", "1"), pair("Hash", "32")]),
                ("b".into(), vec![pair("Threads", "4"), pair("Hash", "64"), pair("X", "y")]),
            ]
        );
    }
}
