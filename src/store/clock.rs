//! The clock the tree is grown for, and the depth model it was read from: two meta entries, JSON.
//!
//! ```
//! use deeptree::store::{Store, StoreOptions, clock::{DepthFit, FollowedSeed, GrownFor}};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! assert!(store.read()?.depth_fit()?.is_none());
//! let fit =
//!     DepthFit { offsets: [-5.0; 5], nps: 900_000.0, spend: 1.0, samples: 6, engine: "stockfish".into(), threads: 1 };
//! store.put_depth_fit(&fit)?;
//! assert_eq!(store.read()?.depth_fit()?, Some(fit.clone()));
//! // A fit of 4 threads is kept beside the 1-thread fit: each thread count reads its own.
//! let four = DepthFit { threads: 4, nps: 3_000_000.0, ..fit.clone() };
//! store.put_depth_fit(&four)?;
//! assert_eq!(store.read()?.depth_fit_for(1)?, Some(fit));
//! assert_eq!(store.read()?.depth_fit_for(4)?, Some(four));
//! assert_eq!(store.read()?.depth_fit_for(2)?, None);
//! let grown = GrownFor {
//!     clock: "5+0.05".into(),
//!     threads: 1,
//!     margin: 0,
//!     engine_depth: 16,
//!     targets: [21, 21, 22, 23, 25],
//!     seeds: 12,
//!     expected_answers: 3.4,
//!     answered_share: 0.8,
//!     followed: vec![FollowedSeed::startpos(1.0)],
//!     temperature: Some(20),
//!     beyond: Some(3),
//! };
//! store.put_grown_for(&grown)?;
//! assert_eq!(store.read()?.grown_for()?, Some(grown));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! - `clock/fit/N` ([`DepthFit`]): the depth model of an engine searching on N threads that a UCI session fitted to
//!   its direct searches (saved at each `ucinewgame` where the session stores searches), or the one `analyze --for`
//!   timed: the depth a search reaches against its nodes, by phase, the engine's speed and how it spends its share
//!   of the clock. A session starts from the fit of its own `Threads`; `analyze --for --threads N` reads a clock's
//!   depth from the fit of N. One entry for each thread count, so a fit of one count never replaces another's.
//! - `clock/fit`: the last fit saved, whatever its threads (as builds before `clock/fit/N` kept their one fit; a
//!   store of theirs is read through it where it has no `clock/fit/N` of the threads asked for).
//! - `clock/grown` ([`GrownFor`]): the clock the last `analyze --for` grew the tree for, the target depths it grew
//!   to (by phase) and the seeds games go on from, which `stats` and `show` report (what games from those seeds
//!   reach is walked again from the tree as it stands).
//!
//! Stability: all are additive entries (a store without them is read as before, and builds that do not know them
//! leave them alone); fields are only ever added, with defaults.

use heed::RwTxn;

use super::{Change, ReadView, Shared, Store, StoreError};

/// The meta entries' names.
pub(super) const META_FIT: &str = "clock/fit";
/// The prefix of the fit of each thread count, `clock/fit/N`.
pub(super) const META_FIT_OF: &str = "clock/fit/";
pub(super) const META_GROWN: &str = "clock/grown";

/// The depth model's fit: `depth = offsets[phase] + 1.6 ln(nodes)`, nodes at `nps` a second, the engine spending
/// `spend` times its share of the clock.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DepthFit {
    /// By phase: 27 men or more, 21 to 26, 15 to 20, 9 to 14, 8 or fewer.
    pub offsets: [f64; 5],
    pub nps: f64,
    pub spend: f64,
    /// Searches it was fitted to.
    pub samples: u32,
    /// The inner engine's command line.
    #[serde(default)]
    pub engine: String,
    /// The threads the engine searched with (a fit holds for that many only).
    #[serde(default = "one_thread")]
    pub threads: u32,
}

fn one_thread() -> u32 {
    1
}

/// The clock a tree was grown for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GrownFor {
    /// As given to `--for` (`5+0.05`).
    pub clock: String,
    /// The threads of the engine playing at it.
    pub threads: u32,
    /// TreeDepthMargin when it was grown.
    pub margin: u8,
    /// The engine depth of the growth's searches.
    pub engine_depth: u8,
    /// The target depth, by phase (as [`DepthFit::offsets`]).
    pub targets: [u32; 5],
    /// At the end of the last run: its seeds whose games are followed,
    #[serde(default)]
    pub seeds: u32,
    /// the tree moves a game from them is expected to get,
    #[serde(default)]
    pub expected_answers: f64,
    /// and the share of the positions of the tree's side their games reach that the tree answers at the target.
    #[serde(default)]
    pub answered_share: f64,
    /// The seeds games go on from (empty where the entry was written by an older build): what `stats` walks again.
    #[serde(default)]
    pub followed: Vec<FollowedSeed>,
    /// The walk's temperature (centipawns) and its aim past the target (plies); `None` where written by an older
    /// build (the defaults are taken).
    #[serde(default)]
    pub temperature: Option<u32>,
    #[serde(default)]
    pub beyond: Option<u32>,
}

impl GrownFor {
    /// Whether `other` is growth for the same clock, threads, margin, engine depth and targets (its run's figures
    /// and seeds aside).
    pub fn same_growth(&self, other: &GrownFor) -> bool {
        (&self.clock, self.threads, self.margin, self.engine_depth, self.targets)
            == (&other.clock, other.threads, other.margin, other.engine_depth, other.targets)
    }
}

/// A seed games go on from, as [`GrownFor::followed`] keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FollowedSeed {
    /// The FEN of the position the moves start from.
    pub fen: String,
    /// The moves to the seed, in UCI notation.
    pub moves: Vec<String>,
    #[serde(default)]
    pub chess960: bool,
    /// The games it stands for.
    pub weight: f64,
    /// The side the tree plays for there, `white` or `black`; none for both.
    #[serde(default)]
    pub side: Option<String>,
}

impl FollowedSeed {
    /// The start position, of `weight`, the tree playing both sides.
    pub fn startpos(weight: f64) -> FollowedSeed {
        FollowedSeed {
            fen: "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1".to_owned(),
            moves: Vec::new(),
            chess960: false,
            weight,
            side: None,
        }
    }
}

/// The body of an entry, read back.
pub(super) fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Option<T> {
    serde_json::from_slice(body).ok()
}

/// Whether `name` is one of these entries.
pub(super) fn is_clock_entry(name: &str) -> bool {
    name == META_FIT || name == META_GROWN || name.starts_with(META_FIT_OF)
}

/// Whether `body`, the entry `name`, reads as what it should be (a fit under `clock/fit/N` is one of N threads).
pub(super) fn readable(name: &str, body: &[u8]) -> bool {
    match name {
        META_FIT => decode::<DepthFit>(body).is_some(),
        META_GROWN => decode::<GrownFor>(body).is_some(),
        // `clock/fit/N` as this build writes N (no sign, no leading zero), of a fit of N threads.
        _ => name
            .strip_prefix(META_FIT_OF)
            .is_some_and(|count| decode::<DepthFit>(body).is_some_and(|fit| fit.threads.to_string() == count)),
    }
}

/// A change of one of the entries.
#[derive(Debug, Clone)]
pub enum ClockChange {
    Fit(DepthFit),
    Grown(GrownFor),
}

impl ClockChange {
    /// Writes the change: a fit under its thread count and as the last fit saved (`clock/fit`). The last fit, where
    /// it is of other threads, is first written under its own count: it is that count's newest (a build that kept
    /// one fit writes only `clock/fit`), so that no count's fit replaces another's.
    pub(super) fn write(&self, shared: &Shared, txn: &mut RwTxn<'_>) -> Result<(), StoreError> {
        match self {
            ClockChange::Fit(fit) => {
                let last = shared.meta_value(txn, META_FIT)?.map(<[u8]>::to_vec);
                if let Some(body) = last
                    && let Some(older) = decode::<DepthFit>(&body)
                    && older.threads != fit.threads
                {
                    shared.put_meta(txn, &format!("{META_FIT_OF}{}", older.threads), &body)?;
                }
                let body = serde_json::to_vec(fit).unwrap_or_default();
                shared.put_meta(txn, &format!("{META_FIT_OF}{}", fit.threads), &body)?;
                shared.put_meta(txn, META_FIT, &body)
            }
            ClockChange::Grown(grown) => {
                shared.put_meta(txn, META_GROWN, &serde_json::to_vec(grown).unwrap_or_default())
            }
        }
    }
}

impl ReadView<'_> {
    /// The last depth model's fit saved, whatever its threads, where one was.
    pub fn depth_fit(&self) -> Result<Option<DepthFit>, StoreError> {
        self.clock_entry(META_FIT)
    }

    /// The depth model's fit of an engine on `threads` threads, where one was saved: the last fit saved where it is
    /// of as many threads (the newest, whichever build saved it: one that kept one fit writes only that), else the
    /// count's own entry.
    pub fn depth_fit_for(&self, threads: u32) -> Result<Option<DepthFit>, StoreError> {
        if let Some(fit) = self.depth_fit()?.filter(|fit| fit.threads == threads) {
            return Ok(Some(fit));
        }
        self.clock_entry::<DepthFit>(&format!("{META_FIT_OF}{threads}"))
    }

    /// The clock the tree was last grown for, where it was.
    pub fn grown_for(&self) -> Result<Option<GrownFor>, StoreError> {
        self.clock_entry(META_GROWN)
    }

    fn clock_entry<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StoreError> {
        let shared = self.shared;
        let Some(body) = shared.meta_value(&self.txn, name)? else { return Ok(None) };
        decode(body)
            .map(Some)
            .ok_or_else(|| StoreError::CorruptMeta { path: shared.data_file.clone(), entry: name.to_owned() })
    }
}

impl Store {
    /// Saves the depth model's fit.
    pub fn put_depth_fit(&self, fit: &DepthFit) -> Result<(), StoreError> {
        self.writer().submit(vec![Change::Clock(ClockChange::Fit(fit.clone()))]).wait()
    }

    /// Saves the clock the tree is grown for.
    pub fn put_grown_for(&self, grown: &GrownFor) -> Result<(), StoreError> {
        self.writer().submit(vec![Change::Clock(ClockChange::Grown(grown.clone()))]).wait()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Record, StoreOptions};

    fn fit(threads: u32) -> DepthFit {
        DepthFit {
            offsets: [-5.0; 5],
            nps: 900_000.0 * f64::from(threads),
            spend: 1.0,
            samples: 6,
            engine: "sf".into(),
            threads,
        }
    }

    /// A store of a build that kept one fit holds `clock/fit` alone: it is read for its own thread count only, and
    /// a fit of other threads saved by this build keeps it under its own thread count.
    #[test]
    fn a_store_with_one_fit_is_read_for_its_threads() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let shared = &store.shared;
        let mut txn = shared.env.write_txn().unwrap();
        shared.put_meta(&mut txn, META_FIT, &serde_json::to_vec(&fit(2)).unwrap()).unwrap();
        txn.commit().unwrap();
        let view = store.read().unwrap();
        assert_eq!(view.depth_fit_for(2).unwrap(), Some(fit(2)));
        assert_eq!(view.depth_fit_for(1).unwrap(), None);
        drop(view);
        store.put_depth_fit(&fit(1)).unwrap();
        let view = store.read().unwrap();
        assert_eq!((view.depth_fit_for(1).unwrap(), view.depth_fit().unwrap()), (Some(fit(1)), Some(fit(1))));
        assert_eq!(view.depth_fit_for(2).unwrap(), Some(fit(2)));
        drop(view);
        // An older build's later fit of 2 threads, under `clock/fit` alone, is the newest: read, and kept as 2's.
        store.put_depth_fit(&fit(2)).unwrap();
        let older = DepthFit { samples: 60, ..fit(2) };
        let mut txn = shared.env.write_txn().unwrap();
        shared.put_meta(&mut txn, META_FIT, &serde_json::to_vec(&older).unwrap()).unwrap();
        txn.commit().unwrap();
        assert_eq!(store.read().unwrap().depth_fit_for(2).unwrap(), Some(older.clone()));
        store.put_depth_fit(&fit(1)).unwrap();
        assert_eq!(store.read().unwrap().depth_fit_for(2).unwrap(), Some(older));
        // A later fit of 2 threads replaces the one of 2 threads only.
        let faster = DepthFit { nps: 5e6, ..fit(2) };
        store.put_depth_fit(&faster).unwrap();
        let view = store.read().unwrap();
        assert_eq!((view.depth_fit_for(1).unwrap(), view.depth_fit_for(2).unwrap()), (Some(fit(1)), Some(faster)));
        assert!(store.check().unwrap().is_clean());
    }

    /// `deeptree check` reads each thread count's fit: one that does not decode, or that is of other threads than
    /// its name says, is damage.
    #[test]
    fn check_reads_each_thread_counts_fit() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        store.put_depth_fit(&fit(4)).unwrap();
        assert!(store.check().unwrap().is_clean());
        let shared = &store.shared;
        let mut txn = shared.env.write_txn().unwrap();
        shared.put_meta(&mut txn, "clock/fit/8", &serde_json::to_vec(&fit(4)).unwrap()).unwrap();
        shared.put_meta(&mut txn, "clock/fit/3", b"{not json").unwrap();
        txn.commit().unwrap();
        let damaged: Vec<String> = store
            .check()
            .unwrap()
            .damaged
            .into_iter()
            .filter_map(|d| match d.record {
                Record::Meta(name) => Some(name),
                _ => None,
            })
            .collect();
        assert_eq!(damaged, ["clock/fit/3", "clock/fit/8"]);
        assert!(matches!(
            store.read().unwrap().depth_fit_for(3),
            Err(StoreError::CorruptMeta { entry, .. }) if entry == "clock/fit/3"
        ));
    }
}
