//! The analyst's marks on moves: a move excluded from the tree, or included in it whatever the move distance
//! (docs/design.md §6.4).
//!
//! ```
//! use deeptree::store::{Store, StoreOptions, marks::{MarkKind, MarkSource}};
//! use shakmaty::{Chess, uci::UciMove};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let start = Chess::default();
//! let f3: UciMove = "f2f3".parse()?;
//! let mark = store.set_mark(&start, f3, MarkKind::Exclude, MarkSource::Cli)?;
//! assert_eq!((mark.kind, mark.source), (MarkKind::Exclude, MarkSource::Cli));
//! assert_eq!(store.read()?.marks()?, [mark.clone()]);
//! // Undone: the newest mark is lifted, and the tree is as it was.
//! assert_eq!(store.undo_mark()?, Some(mark));
//! assert!(store.read()?.marks()?.is_empty());
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! A mark lives in two places, written in one transaction: on the move's edge in its position's record
//! ([`Steering`], record format 4), where the search, the values and every reader of the tree meet it; and as a meta
//! entry `marks/<position key>/<move>` that says who made it, from where and when. An excluded move's edge is left out
//! of the graph the values are computed on (`values::graph`), so the position is worth what its other moves are worth,
//! and the walk never goes below it; an included move is kept by the walk whatever its window, as an imported move is.
//! A move marked before any engine valued it gets a placeholder edge (depth 0, not valued), which lifting the mark
//! removes again.

use std::time::{SystemTime, UNIX_EPOCH};

use shakmaty::{Chess, EnPassantMode, Position, fen::Fen, uci::UciMove};

use super::{
    Change, ReadView, Store, StoreError,
    key::PositionKey,
    node::{Edge, Node, PackedPosition, Steering},
};
use crate::score::{Bound, Score};

/// Prefix of the meta entries that describe marks: `marks/<position key>/<move>`.
pub(super) const META_MARKS: &str = "marks/";

/// The meta entry counting the changes of marks (a big-endian u64): a run that holds records read earlier (the
/// look-ahead's overlay) reads them again when it moves.
pub(super) const META_MARKS_VERSION: &str = "marks_version";

/// What a mark does to a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MarkKind {
    /// Never searched below, played, nor exported; the position is worth what its other moves are worth.
    Exclude,
    /// Always walked, whatever the move distance.
    Include,
}

impl MarkKind {
    /// The steering the mark puts on the move's edge.
    pub fn steering(self) -> Steering {
        match self {
            MarkKind::Exclude => Steering::Excluded,
            MarkKind::Include => Steering::Included,
        }
    }
}

impl std::fmt::Display for MarkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MarkKind::Exclude => "exclude",
            MarkKind::Include => "include",
        })
    }
}

impl std::str::FromStr for MarkKind {
    type Err = MarkError;

    fn from_str(s: &str) -> Result<Self, MarkError> {
        match s.to_ascii_lowercase().as_str() {
            "exclude" => Ok(MarkKind::Exclude),
            "include" => Ok(MarkKind::Include),
            _ => Err(MarkError::UnknownKind(s.to_owned())),
        }
    }
}

/// Where a mark was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MarkSource {
    /// `deeptree mark`.
    Cli,
    /// The page of `deeptree serve`.
    Serve,
    /// A GUI, by the UCI options `Mark Exclude` and `Mark Include`.
    Uci,
}

impl std::fmt::Display for MarkSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MarkSource::Cli => "cli",
            MarkSource::Serve => "serve",
            MarkSource::Uci => "uci",
        })
    }
}

/// One mark: the move, what it does, and who made it, from where and when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mark {
    /// The position the move is played in.
    pub fen: String,
    /// The move, in UCI.
    #[serde(rename = "move", with = "uci_text")]
    pub uci: UciMove,
    pub kind: MarkKind,
    pub source: MarkSource,
    /// The operating system's user who made it.
    pub user: String,
    /// When it was made, in milliseconds since 1970 (UTC).
    pub time: u64,
}

impl Mark {
    /// The position the move is played in: its FEN read as standard chess, or where it cannot be (a Chess960
    /// position's X-FEN), as Chess960.
    pub fn position(&self) -> Option<Chess> {
        crate::notation::parse_position(&self.fen, false)
            .or_else(|_| crate::notation::parse_position(&self.fen, true))
            .ok()
            .map(|(pos, _)| pos)
    }
}

mod uci_text {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};
    use shakmaty::uci::UciMove;

    pub fn serialize<S: Serializer>(uci: &UciMove, out: S) -> Result<S::Ok, S::Error> {
        out.collect_str(uci)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<UciMove, D::Error> {
        let text = String::deserialize(input)?;
        text.parse().map_err(|_| D::Error::custom(format!("not a UCI move: {text}")))
    }
}

/// Why a mark was not made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MarkError {
    #[error("{uci} is not a legal move in {fen}")]
    IllegalMove { fen: String, uci: String },
    #[error("{uci} is the last move of {fen} not excluded: a position keeps at least one move")]
    LastMove { fen: String, uci: String },
    #[error("{uci} has no mark in {fen}")]
    NotMarked { fen: String, uci: String },
    #[error("unknown mark '{0}': exclude or include")]
    UnknownKind(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A change of the mark on one move: set (`mark`) or lifted (`None`), on the edge and in the meta entry at once.
#[derive(Debug, Clone)]
pub struct MarkChange {
    pub key: PositionKey,
    pub position: PackedPosition,
    pub uci: UciMove,
    /// The position after the move (for the parent link of a new edge).
    pub child: PositionKey,
    pub mark: Option<Mark>,
}

impl MarkChange {
    /// The name of the mark's meta entry.
    pub(super) fn meta_name(&self) -> String {
        meta_name(self.key, &self.uci)
    }

    /// `node` with this change made to its edge: the steering set (a placeholder edge made where the move has none)
    /// or lifted (a placeholder that only the mark made removed, unless the position it leads to was evaluated since:
    /// `child_evaluated`, and the edge stays to carry that value). Returns whether an edge was made.
    pub(super) fn apply(&self, node: &mut Node, child_evaluated: bool) -> bool {
        let steering = self.mark.as_ref().map(|m| m.kind.steering());
        match node.edges.iter().position(|e| e.uci == self.uci) {
            Some(index) => {
                let edge = &mut node.edges[index];
                edge.steering = steering;
                if steering.is_none() && made_by_mark(edge) && !child_evaluated {
                    node.edges.remove(index);
                }
                false
            }
            None if steering.is_some() => {
                node.edges.push(Edge { steering, ..Edge::new(self.uci, Score::NOT_VALUED, Bound::Upper, 0) });
                true
            }
            None => false,
        }
    }
}

/// The position's FEN, the move in its stored (canonical) form and the position after it; an illegal move is an
/// error.
fn legal(pos: &Chess, uci: UciMove) -> Result<(String, UciMove, Chess), MarkError> {
    let fen = Fen::from_position(pos, EnPassantMode::Legal).to_string();
    let illegal = || MarkError::IllegalMove { fen: fen.clone(), uci: uci.to_string() };
    let canonical = crate::notation::canonical_uci(pos, &uci).ok_or_else(illegal)?;
    let child = crate::notation::play_uci(pos, &canonical).ok_or_else(illegal)?;
    Ok((fen, canonical, child))
}

/// The moves of `pos` a search may consider, as `searchmoves`: none named (all moves) unless the analyst excluded
/// some in `node`, its record; then every legal move but those.
pub fn searchable_moves(pos: &Chess, node: Option<&Node>) -> Vec<UciMove> {
    let Some(node) = node.filter(|n| n.edges.iter().any(Edge::is_excluded)) else { return Vec::new() };
    pos.legal_moves()
        .iter()
        .map(|m| crate::notation::canonical(*m))
        .filter(|uci| !node.edge(uci).is_some_and(Edge::is_excluded))
        .collect()
}

/// A placeholder edge a mark made: no engine valued it, and no game or book brought it.
pub fn made_by_mark(edge: &Edge) -> bool {
    !edge.imported && edge.depth == 0 && !edge.is_valued()
}

fn meta_name(key: PositionKey, uci: &UciMove) -> String {
    format!("{META_MARKS}{key}/{uci}")
}

impl Store {
    /// Marks `uci` in `pos` (replacing any mark it had), made from `source` by the current user now. Excluding the
    /// last move of a position that is not excluded yet is refused; so is a move that is not legal.
    pub fn set_mark(&self, pos: &Chess, uci: UciMove, kind: MarkKind, source: MarkSource) -> Result<Mark, MarkError> {
        let (fen, uci, child) = legal(pos, uci)?;
        let key = PositionKey::of(pos);
        let mark = Mark { fen, uci, kind, source, user: os_user(), time: now() };
        let change = MarkChange {
            key,
            position: PackedPosition::of(pos),
            uci,
            child: PositionKey::of(&child),
            mark: Some(mark.clone()),
        };
        // The writer refuses, in its transaction, an exclusion that would leave the position no move.
        match self.writer().submit(vec![Change::Mark(change)]).wait() {
            Ok(()) => Ok(mark),
            Err(StoreError::LastMoveExcluded { .. }) => {
                Err(MarkError::LastMove { fen: mark.fen, uci: uci.to_string() })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Lifts the mark on `uci` in `pos`, returning it: the move is as it was before it was marked.
    pub fn lift_mark(&self, pos: &Chess, uci: UciMove) -> Result<Mark, MarkError> {
        let (fen, uci, child) = legal(pos, uci)?;
        let key = PositionKey::of(pos);
        let lifted = self.read()?.marks_at(key)?.into_iter().find(|m| m.uci == uci);
        let lifted = lifted.ok_or_else(|| MarkError::NotMarked { fen, uci: uci.to_string() })?;
        let change =
            MarkChange { key, position: PackedPosition::of(pos), uci, child: PositionKey::of(&child), mark: None };
        self.writer().submit(vec![Change::Mark(change)]).wait()?;
        Ok(lifted)
    }

    /// Undoes the newest mark: lifts it and returns it; `None` when the tree has no mark.
    pub fn undo_mark(&self) -> Result<Option<Mark>, MarkError> {
        let newest = self.read()?.marks()?.into_iter().max_by_key(|m| m.time);
        let Some(newest) = newest else { return Ok(None) };
        let pos = newest
            .position()
            .ok_or_else(|| MarkError::IllegalMove { fen: newest.fen.clone(), uci: newest.uci.to_string() })?;
        self.lift_mark(&pos, newest.uci).map(Some)
    }
}

impl ReadView<'_> {
    /// How many times marks were set or lifted in this store (0 for one never marked): a change means records read
    /// before may carry stale marks.
    pub fn marks_version(&self) -> Result<u64, StoreError> {
        let shared = self.shared;
        Ok(shared
            .meta_value(&self.txn, META_MARKS_VERSION)?
            .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
            .map_or(0, u64::from_be_bytes))
    }

    /// Every mark in the tree, in the order of their positions' keys.
    pub fn marks(&self) -> Result<Vec<Mark>, StoreError> {
        self.marks_with_prefix(META_MARKS)
    }

    /// The marks on the moves of the position at `key`.
    pub fn marks_at(&self, key: PositionKey) -> Result<Vec<Mark>, StoreError> {
        self.marks_with_prefix(&format!("{META_MARKS}{key}/"))
    }

    fn marks_with_prefix(&self, prefix: &str) -> Result<Vec<Mark>, StoreError> {
        let shared = self.shared;
        let mut marks = Vec::new();
        for item in shared.meta.prefix_iter(&self.txn, prefix).map_err(|e| shared.lmdb_error(e))? {
            let (name, value) = item.map_err(|e| shared.lmdb_error(e))?;
            let body = shared.meta_body(name, value)?;
            let mark = decode(body)
                .ok_or_else(|| StoreError::CorruptMeta { path: shared.data_file.clone(), entry: "marks/".into() })?;
            marks.push(mark);
        }
        Ok(marks)
    }
}

/// A mark's meta entry body (JSON), read back.
pub(super) fn decode(body: &[u8]) -> Option<Mark> {
    serde_json::from_slice(body).ok()
}

/// A mark's meta entry body.
pub(super) fn encode(mark: &Mark) -> Vec<u8> {
    serde_json::to_vec(mark).unwrap_or_default()
}

/// The operating system's user running this process: `$USER` (or `$LOGNAME`), else the name the user database
/// gives the process's user id, else that id.
pub(super) fn os_user() -> String {
    for variable in ["USER", "LOGNAME"] {
        if let Ok(name) = std::env::var(variable)
            && !name.is_empty()
        {
            return name;
        }
    }
    // SAFETY: getuid cannot fail; getpwuid returns null or a pointer to a static record whose name is a C string,
    // read at once, before any other call could reuse it.
    unsafe {
        let uid = libc::getuid();
        let entry = libc::getpwuid(uid);
        if !entry.is_null() && !(*entry).pw_name.is_null() {
            return std::ffi::CStr::from_ptr((*entry).pw_name).to_string_lossy().into_owned();
        }
        format!("uid {uid}")
    }
}

/// Now, in milliseconds since 1970.
pub(super) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `time` (milliseconds since 1970) as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_text(time_ms: u64) -> String {
    let time = time_ms / 1_000;
    let (year, month, day) = civil_date(time);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", time % 86_400 / 3_600, time % 3_600 / 60)
}

/// The civil date (year, month, day; UTC, the proleptic Gregorian calendar) of `time` seconds since 1970, by
/// H. Hinnant's algorithm.
pub fn civil_date(time: u64) -> (i64, i64, i64) {
    let z = (time / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_civil_dates() {
        assert_eq!(utc_text(0), "1970-01-01 00:00 UTC");
        // 2024-02-29 13:45 UTC: a leap day.
        assert_eq!(utc_text(1_709_214_300_999), "2024-02-29 13:45 UTC");
        assert_eq!(civil_date(951_782_400), (2000, 2, 29));
    }
}
