//! The clock the tree is grown for, and the depth model it was read from: two meta entries, JSON.
//!
//! ```
//! use deeptree::store::{Store, StoreOptions, clock::{DepthFit, GrownFor}};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! assert!(store.read()?.depth_fit()?.is_none());
//! let fit =
//!     DepthFit { offsets: [-5.0; 5], nps: 900_000.0, spend: 1.0, samples: 6, engine: "stockfish".into(), threads: 1 };
//! store.put_depth_fit(&fit)?;
//! assert_eq!(store.read()?.depth_fit()?, Some(fit));
//! let grown = GrownFor {
//!     clock: "5+0.05".into(),
//!     threads: 1,
//!     margin: 0,
//!     engine_depth: 16,
//!     targets: [21, 21, 22, 23, 25],
//!     seeds: 12,
//!     expected_answers: 3.4,
//!     answered_share: 0.8,
//! };
//! store.put_grown_for(&grown)?;
//! assert_eq!(store.read()?.grown_for()?, Some(grown));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! - `clock/fit` ([`DepthFit`]): the depth model a UCI session fitted to its direct searches (saved at each
//!   `ucinewgame` where the session stores searches), or the one `analyze --for` timed: the depth a search reaches
//!   against its nodes, by phase, the engine's speed and how it spends its share of the clock. A session starts from
//!   it; `analyze --for` reads a clock's depth from it.
//! - `clock/grown` ([`GrownFor`]): the clock the last `analyze --for` grew the tree for, and the target depths it
//!   grew to (by phase), which `stats` and `show` report.
//!
//! Stability: both are additive entries (a store without them is read as before, and builds that do not know them
//! leave them alone); fields are only ever added, with defaults.

use super::{Change, ReadView, Store, StoreError};

/// The meta entries' names.
pub(super) const META_FIT: &str = "clock/fit";
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
}

/// The body of an entry, read back.
pub(super) fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Option<T> {
    serde_json::from_slice(body).ok()
}

/// Whether `body`, the entry `name`, reads as what it should be.
pub(super) fn readable(name: &str, body: &[u8]) -> bool {
    match name {
        META_FIT => decode::<DepthFit>(body).is_some(),
        META_GROWN => decode::<GrownFor>(body).is_some(),
        _ => false,
    }
}

/// A change of one of the entries.
#[derive(Debug, Clone)]
pub enum ClockChange {
    Fit(DepthFit),
    Grown(GrownFor),
}

impl ClockChange {
    pub(super) fn meta_name(&self) -> &'static str {
        match self {
            ClockChange::Fit(_) => META_FIT,
            ClockChange::Grown(_) => META_GROWN,
        }
    }

    pub(super) fn body(&self) -> Vec<u8> {
        match self {
            ClockChange::Fit(fit) => serde_json::to_vec(fit),
            ClockChange::Grown(grown) => serde_json::to_vec(grown),
        }
        .unwrap_or_default()
    }
}

impl ReadView<'_> {
    /// The depth model's fit, where one was saved.
    pub fn depth_fit(&self) -> Result<Option<DepthFit>, StoreError> {
        self.clock_entry(META_FIT)
    }

    /// The clock the tree was last grown for, where it was.
    pub fn grown_for(&self) -> Result<Option<GrownFor>, StoreError> {
        self.clock_entry(META_GROWN)
    }

    fn clock_entry<T: serde::de::DeserializeOwned>(&self, name: &'static str) -> Result<Option<T>, StoreError> {
        let shared = self.shared;
        let Some(body) = shared.meta_value(&self.txn, name)? else { return Ok(None) };
        decode(body).map(Some).ok_or_else(|| StoreError::CorruptMeta { path: shared.data_file.clone(), entry: name })
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
