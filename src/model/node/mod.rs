//! One stored position: its packed setup, its own engine evaluation and the moves evaluated from it.
//!
//! ```
//! use deeptree::score::{Bound, Score};
//! use deeptree::model::node::{Edge, Eval, Node, PackedPosition};
//! use shakmaty::{Chess, uci::UciMove};
//!
//! let e4: UciMove = "e2e4".parse()?;
//! let mut node = Node::new(PackedPosition::of(&Chess::default()));
//! node.eval =
//!     Some(Eval { score: Score::cp(25), bound: Bound::Exact, depth: 18, best: Some(e4), nodes: 1_200_000, engine: None });
//! node.edges.push(Edge::new(e4, Score::cp(25), Bound::Exact, 18));
//!
//! let bytes = node.encode();
//! assert_eq!(Node::decode(&bytes)?, node);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Stability
//!
//! The record layout is versioned by its first byte ([`FORMAT_VERSION`]). Version 1:
//!
//! ```text
//! u8      format version (1)
//! u8      flags: 0x01 eval, 0x02 eval has best move, 0x04 rest bound, 0x08 idea, 0x10 settled depth,
//!         0x20 cyclic (a cycle is reachable from the position)
//! u8      length L of the packed setup (1..=24), then L bytes: shakmaty's PackedSetup, move counters dropped
//! eval    i16 score, u8 bound, u8 depth, [2] best move (if flagged), LEB128 u64 nodes
//! rest    i16 score, u8 depth: an upper bound for every legal move that has no edge
//! idea    i16 score: the cached idea value of the position
//! settled u8: the software depth settled with this position as root
//! LEB128  edge count, then 6 bytes an edge: [2] move (PackedUciMove), i16 score, u8 depth, u8 bound | 0x04 imported
//! ```
//!
//! Version 2 adds the engine that gave each evaluation, as its number in the store's list of engines:
//!
//! ```text
//! flags   0x40: the eval's u16 engine number follows its nodes count
//! edge    bound byte | 0x08: the edge's u16 engine number follows its 6 bytes
//! ```
//!
//! A record with no engine number is written as version 1, byte for byte as before.
//!
//! Version 3 adds the screen bound (see [`ScreenBound`]):
//!
//! ```text
//! flags   0x80: a screen bound follows the rest bound: i16 score, u8 depth, u8 count of the moves it bounds
//! ```
//!
//! A record with no screen bound is written as version 2 or 1, byte for byte as before; a deeptree that reads only
//! those refuses a version 3 record as newer, never as corrupt.
//!
//! Version 4 adds the analyst's marks on moves (see [`Steering`] and [`marks`](crate::store::marks)):
//!
//! ```text
//! edge    bound byte | 0x10: excluded by the analyst; | 0x20: included by the analyst (never both)
//! ```
//!
//! A record with no marked move is written as version 3 or older, byte for byte as before.
//!
//! Integers are big-endian; scores use [`Score::to_bits`]. A record that does not parse is an error, never a panic.
//!
//! Schema 5 stores every record sealed ([`Node::write`], [`Node::read`]): the record as above, then its checksum
//! for its key (see [`checksum`](crate::store::checksum)). A store of schema 4 or older holds the records bare; they are
//! sealed when it is upgraded.

mod codec;

pub use self::codec::FORMAT_VERSION;

use std::fmt;

use shakmaty::{CastlingMode, Chess, EnPassantMode, FromSetup, Position, fen::Fen, packed::PackedSetup, uci::UciMove};

use crate::score::{Bound, Score};

/// Largest packed setup of a legal standard chess position without move counters.
pub const MAX_SETUP_BYTES: usize = 24;

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The record was written by a newer deeptree.
    #[error("record format {0} is newer than this deeptree supports ({FORMAT_VERSION})")]
    NewerVersion(u8),
    /// The record is damaged: what was wrong, at which byte.
    #[error("corrupt record: {reason} at byte {offset}")]
    Corrupt { reason: &'static str, offset: usize },
}

/// A position in compact stored form: the collision guard and the source of its FEN.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PackedPosition {
    len: u8,
    bytes: [u8; MAX_SETUP_BYTES],
}

impl PackedPosition {
    /// Packs a legal position, without move counters (a position is the same whatever the clocks say).
    pub fn of(pos: &Chess) -> PackedPosition {
        let setup = pos.to_setup(EnPassantMode::Legal);
        // A legal standard position always packs (its castling rights have rooks, its en passant square a pawn).
        let packed = PackedSetup::pack_standard_normalized(&setup).unwrap_or_else(|_| PackedSetup::empty());
        PackedPosition::from_slice(packed.as_bytes()).unwrap_or(PackedPosition { len: 0, bytes: [0; MAX_SETUP_BYTES] })
    }

    pub fn from_slice(bytes: &[u8]) -> Option<PackedPosition> {
        if bytes.len() > MAX_SETUP_BYTES {
            return None;
        }
        let mut out = [0; MAX_SETUP_BYTES];
        out[..bytes.len()].copy_from_slice(bytes);
        Some(PackedPosition { len: bytes.len() as u8, bytes: out })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Rebuilds the position; `None` if the bytes do not describe a legal position.
    pub fn to_position(&self) -> Option<Chess> {
        let packed = PackedSetup::try_from_bytes(self.as_bytes()).ok()?;
        let setup = packed.unpack_standard().ok()?;
        // A Chess960 position (castling rights standard chess cannot have) is set up as one.
        Chess::from_setup(setup.clone(), CastlingMode::Standard)
            .ok()
            .or_else(|| Chess::from_setup(setup, CastlingMode::Chess960).ok())
    }

    /// FEN for display (move counters are not stored: they read `0 1`).
    pub fn fen(&self) -> String {
        match self.to_position() {
            Some(pos) => Fen::from_position(&pos, EnPassantMode::Legal).to_string(),
            None => format!("<unreadable position {:02x?}>", self.as_bytes()),
        }
    }
}

impl fmt::Debug for PackedPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PackedPosition({})", self.fen())
    }
}

/// A position's own engine evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eval {
    pub score: Score,
    pub bound: Bound,
    pub depth: u8,
    /// `None` when the position has no legal move.
    pub best: Option<UciMove>,
    /// Nodes the inner engine searched for it.
    pub nodes: u64,
    /// The engine that gave it: its number in the store's list of engines (`Store::engines`); `None` when not
    /// recorded (stored before engines were recorded).
    pub engine: Option<u16>,
}

/// A move from a node with the engine's score for it (from the node's side to move's point of view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub uci: UciMove,
    pub score: Score,
    pub depth: u8,
    pub bound: Bound,
    /// Came from an imported game: kept by the search even outside the move distance.
    pub imported: bool,
    /// The engine that searched it, as [`Eval::engine`]; `None` for an imported move or one stored before engines
    /// were recorded.
    pub engine: Option<u16>,
    /// The analyst's mark on the move, if any (see [`marks`](crate::store::marks)).
    pub steering: Option<Steering>,
}

/// How the analyst steers the search at a move: a mark stored on its edge (record format 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Steering {
    /// Never searched below, played, exported as a book move nor valued into its position: the position is worth
    /// what its other moves are worth.
    Excluded,
    /// Always walked, whatever the move distance, as an imported move is.
    Included,
}

impl Edge {
    pub fn new(uci: UciMove, score: Score, bound: Bound, depth: u8) -> Edge {
        Edge { uci, score, depth, bound, imported: false, engine: None, steering: None }
    }

    /// Excluded by the analyst: no part of the tree's values, nor of its play.
    pub fn is_excluded(&self) -> bool {
        self.steering == Some(Steering::Excluded)
    }

    /// Kept by the search whatever its window: imported from a game or a book, or included by the analyst.
    pub fn is_kept(&self) -> bool {
        !self.is_excluded() && (self.imported || self.steering == Some(Steering::Included))
    }

    /// A move known but not valued yet, kept by the search whatever its window (an imported move: a game's, a
    /// book's): depth 0, an upper bound (the bound kind of a move never searched) and [`Score::NOT_VALUED`]. Any
    /// engine result is deeper, so the store's merge lets it replace the placeholder while the move stays imported.
    pub fn placeholder(uci: UciMove) -> Edge {
        let mut edge = Edge::new(uci, Score::NOT_VALUED, Bound::Upper, 0);
        edge.imported = true;
        edge
    }

    /// Whether an engine (or an evaluation of the position it leads to) has valued the move.
    pub fn is_valued(&self) -> bool {
        self.score.is_valued()
    }

    /// Bytes of one persisted edge.
    pub const SIZE: usize = 6;

    /// Is `self` a better-founded result for the same move than `other`? Deeper wins; at equal depth an exact
    /// score beats a bound; otherwise the newer (`self`) wins.
    fn supersedes(&self, other: &Edge) -> bool {
        self.depth > other.depth
            || (self.depth == other.depth && !(self.bound != Bound::Exact && other.bound == Bound::Exact))
    }
}

/// An upper bound for every legal move of the node that has no edge yet: the first move found outside the move
/// distance bounds all moves not yet searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestBound {
    pub score: Score,
    pub depth: u8,
}

/// What screening found: the moves without an edge, searched together at a depth shallower than the engine depth
/// (the screen), score at most `score` at `depth`. A bound at that shallower depth, never taken for an engine-depth
/// value: it only decides whether those moves are searched at the engine depth.
///
/// It bounds the `moves` moves that had no edge when it was found. Moves only ever gain edges, so while the node has
/// exactly that many moves without an edge, it bounds the same moves; once one of them gains an edge it is stale,
/// and the rest are screened again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScreenBound {
    pub score: Score,
    pub depth: u8,
    pub moves: u8,
}

impl ScreenBound {
    /// Which of two screen bounds a merge keeps: the one of fewer moves (found later), then the deeper, then the
    /// tighter (lower), so that merging does not depend on order.
    fn supersedes(&self, other: &ScreenBound) -> bool {
        (self.moves, std::cmp::Reverse(self.depth), self.score)
            < (other.moves, std::cmp::Reverse(other.depth), other.score)
    }
}

/// One stored position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub position: PackedPosition,
    pub eval: Option<Eval>,
    pub edges: Vec<Edge>,
    pub rest: Option<RestBound>,
    /// The screen of the moves without an edge, when screening searched them.
    pub screen: Option<ScreenBound>,
    /// Cached idea value of the position (its best move's idea score).
    pub idea: Option<Score>,
    /// Software depth settled with this position as root.
    pub settled_depth: Option<u8>,
    /// Cached: a cycle of stored positions is reachable from this one (its alpha scores need a walk).
    pub cyclic: bool,
}

impl Node {
    pub fn new(position: PackedPosition) -> Node {
        Node {
            position,
            eval: None,
            edges: Vec::new(),
            rest: None,
            screen: None,
            idea: None,
            settled_depth: None,
            cyclic: false,
        }
    }

    /// The record with no move marked: what a merge brings of a record the store does not hold yet (only a mark's
    /// own change sets a mark).
    pub fn without_steering(&self) -> Node {
        let mut node = self.clone();
        for edge in &mut node.edges {
            edge.steering = None;
        }
        node
    }

    pub fn edge(&self, uci: &UciMove) -> Option<&Edge> {
        self.edges.iter().find(|e| &e.uci == uci)
    }

    /// Merges another record of the same position into this one: the deeper evaluation wins, edges are united
    /// (per move the deeper score wins, the analyst's mark kept as it is here, none taken from `other`), the deeper rest bound wins (the lower at equal depth), the screen bound of
    /// fewer moves wins (see [`ScreenBound`]), the settled depth is the larger.
    pub fn merge(&mut self, other: &Node) {
        match (&self.eval, &other.eval) {
            (_, None) => {}
            (None, Some(theirs)) => self.eval = Some(theirs.clone()),
            (Some(ours), Some(theirs)) => {
                // An evaluation whose best move the analyst excluded gives way to any that keeps to the marks (a
                // search of the other moves): it is the excluded line's, however deep.
                let excluded =
                    |best: Option<UciMove>| best.is_some_and(|b| self.edge(&b).is_some_and(Edge::is_excluded));
                if (excluded(ours.best) && !excluded(theirs.best))
                    || (excluded(ours.best) == excluded(theirs.best)
                        && (theirs.depth > ours.depth
                            || (theirs.depth == ours.depth
                                && !(theirs.bound != Bound::Exact && ours.bound == Bound::Exact))))
                {
                    self.eval = Some(theirs.clone());
                }
            }
        }
        for theirs in &other.edges {
            match self.edges.iter_mut().find(|e| e.uci == theirs.uci) {
                Some(ours) => {
                    let imported = ours.imported || theirs.imported;
                    // A mark is set or lifted only by a mark's own change (see `marks`), never by a merge: a copy of
                    // an edge read before its mark was lifted must not bring the mark back.
                    let steering = ours.steering;
                    if theirs.supersedes(ours) {
                        *ours = theirs.clone();
                    }
                    ours.imported = imported;
                    ours.steering = steering;
                }
                None => self.edges.push(Edge { steering: None, ..theirs.clone() }),
            }
        }
        // Every rest bound bounds every move that has no edge now: moves only ever gain edges, so a bound found when
        // more moves had none still holds. The deeper bound wins, and at equal depth the tighter (lower) one, so
        // merging does not depend on order, and an answer stored twice (two processes sharing a tree) cannot
        // loosen the bound.
        self.rest = match (self.rest, other.rest) {
            (Some(a), Some(b)) if b.depth > a.depth || (b.depth == a.depth && b.score < a.score) => Some(b),
            (Some(a), _) => Some(a),
            (None, b) => b,
        };
        self.screen = match (self.screen, other.screen) {
            (Some(a), Some(b)) if b.supersedes(&a) => Some(b),
            (Some(a), _) => Some(a),
            (None, b) => b,
        };
        if other.idea.is_some() {
            self.idea = other.idea;
        }
        self.settled_depth = self.settled_depth.max(other.settled_depth);
        self.cyclic |= other.cyclic;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merging screen bounds keeps the one of fewer moves (the later screen), then the deeper, then the lower, in
    /// whichever order the records come.
    #[test]
    fn screen_bounds_merge_in_any_order_to_the_latest_screen() {
        let with = |score: i32, depth: u8, moves: u8| {
            let mut node = Node::new(PackedPosition::of(&Chess::default()));
            node.screen = Some(ScreenBound { score: Score::cp(score), depth, moves });
            node
        };
        let cases = [
            (with(-10, 8, 19), with(-50, 8, 18), with(-50, 8, 18)),
            (with(-10, 8, 18), with(-50, 6, 18), with(-10, 8, 18)),
            (with(-10, 8, 18), with(-50, 8, 18), with(-50, 8, 18)),
        ];
        for (a, b, kept) in cases {
            let mut ab = a.clone();
            ab.merge(&b);
            let mut ba = b.clone();
            ba.merge(&a);
            assert_eq!((ab.screen, ba.screen), (kept.screen, kept.screen));
        }
        let mut none = Node::new(PackedPosition::of(&Chess::default()));
        none.merge(&with(-10, 8, 19));
        assert_eq!(none.screen, with(-10, 8, 19).screen);
    }

    #[test]
    fn packed_position_round_trip_and_size() {
        let pos = Chess::default();
        let packed = PackedPosition::of(&pos);
        assert!(packed.as_bytes().len() <= MAX_SETUP_BYTES);
        assert_eq!(packed.to_position(), Some(pos));
        assert_eq!(packed.fen(), "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1");
    }

    #[test]
    fn merge_keeps_deeper_results_and_unites_edges() {
        let e4: UciMove = "e2e4".parse().unwrap();
        let d4: UciMove = "d2d4".parse().unwrap();
        let mut a = Node::new(PackedPosition::of(&Chess::default()));
        a.eval =
            Some(Eval { score: Score::cp(20), bound: Bound::Exact, depth: 10, best: Some(e4), nodes: 1, engine: None });
        a.edges.push(Edge::new(e4, Score::cp(20), Bound::Exact, 10));
        let mut b = a.clone();
        b.eval =
            Some(Eval { score: Score::cp(30), bound: Bound::Exact, depth: 12, best: Some(d4), nodes: 2, engine: None });
        b.edges = vec![Edge::new(e4, Score::cp(5), Bound::Exact, 8), Edge::new(d4, Score::cp(30), Bound::Exact, 12)];
        let mut merged = a.clone();
        merged.merge(&b);
        assert_eq!(merged.eval.as_ref().map(|e| e.depth), Some(12));
        assert_eq!(merged.edge(&e4).map(|e| e.score), Some(Score::cp(20)));
        assert_eq!(merged.edge(&d4).map(|e| e.score), Some(Score::cp(30)));
        let mut twice = merged.clone();
        twice.merge(&b);
        assert_eq!(twice, merged, "merging is idempotent");
    }

    #[test]
    fn rest_bounds_merge_in_any_order_to_the_deepest_then_tightest() {
        let bound = |score, depth| {
            let mut node = Node::new(PackedPosition::of(&Chess::default()));
            node.rest = Some(RestBound { score: Score::cp(score), depth });
            node
        };
        let (loose, tight, deep) = (bound(40, 12), bound(10, 12), bound(60, 14));
        for order in
            [[&loose, &tight, &deep], [&deep, &tight, &loose], [&tight, &loose, &deep], [&loose, &deep, &tight]]
        {
            let mut merged = Node::new(PackedPosition::of(&Chess::default()));
            for node in order {
                merged.merge(node);
            }
            assert_eq!(merged.rest, deep.rest);
        }
        let mut merged = tight.clone();
        merged.merge(&loose);
        assert_eq!(merged.rest, tight.rest, "a looser bound stored again does not replace a tighter one");
    }
}
