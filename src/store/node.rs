//! One stored position: its packed setup, its own engine evaluation and the moves evaluated from it.
//!
//! ```
//! use deeptree::score::{Bound, Score};
//! use deeptree::store::node::{Edge, Eval, Node, PackedPosition};
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
//! Version 4 adds the analyst's marks on moves (see [`Steering`] and [`marks`](super::marks)):
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
//! for its key (see [`checksum`]). A store of schema 4 or older holds the records bare; they are
//! sealed when it is upgraded.

use std::fmt;

use shakmaty::{
    CastlingMode, Chess, EnPassantMode, FromSetup, Position,
    fen::Fen,
    packed::{PackedSetup, PackedUciMove},
    uci::UciMove,
};

use super::{
    checksum::{self, Table},
    key::PositionKey,
};
use crate::score::{Bound, Score};

/// The newest record layout version. A record is written in the oldest version that holds it: without a marked move as
/// version 3, without a screen bound either as version 2, and without engine numbers either as version 1, which every
/// deeptree reads.
pub const FORMAT_VERSION: u8 = 4;

const FLAG_EVAL: u8 = 0x01;
const FLAG_BEST: u8 = 0x02;
const FLAG_REST: u8 = 0x04;
const FLAG_IDEA: u8 = 0x08;
const FLAG_SETTLED: u8 = 0x10;
const FLAG_CYCLIC: u8 = 0x20;
const FLAG_ENGINE: u8 = 0x40;
const FLAG_SCREEN: u8 = 0x80;

const EDGE_IMPORTED: u8 = 0x04;
const EDGE_ENGINE: u8 = 0x08;
const EDGE_EXCLUDED: u8 = 0x10;
const EDGE_INCLUDED: u8 = 0x20;
const EDGE_BOUND_MASK: u8 = 0x03;

/// Largest packed setup of a legal standard chess position without move counters.
pub const MAX_SETUP_BYTES: usize = 24;

/// Why a stored value could not be read: its checksum, or (the checksum holding) its bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error(transparent)]
    Checksum(#[from] checksum::Mismatch),
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

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
    /// The analyst's mark on the move, if any (see [`marks`](super::marks)).
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

    /// Encodes the record (format [`FORMAT_VERSION`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + self.edges.len() * Edge::SIZE);
        self.encode_into(&mut out);
        out
    }

    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut flags = 0;
        if let Some(eval) = &self.eval {
            flags |= FLAG_EVAL;
            if eval.best.is_some() {
                flags |= FLAG_BEST;
            }
        }
        if self.rest.is_some() {
            flags |= FLAG_REST;
        }
        if self.idea.is_some() {
            flags |= FLAG_IDEA;
        }
        if self.settled_depth.is_some() {
            flags |= FLAG_SETTLED;
        }
        if self.cyclic {
            flags |= FLAG_CYCLIC;
        }
        if self.eval.as_ref().is_some_and(|e| e.engine.is_some()) {
            flags |= FLAG_ENGINE;
        }
        if self.screen.is_some() {
            flags |= FLAG_SCREEN;
        }
        let engines = flags & FLAG_ENGINE != 0 || self.edges.iter().any(|e| e.engine.is_some());
        out.push(if self.edges.iter().any(|e| e.steering.is_some()) {
            4
        } else if self.screen.is_some() {
            3
        } else if engines {
            2
        } else {
            1
        });
        out.push(flags);
        out.push(self.position.len);
        out.extend_from_slice(self.position.as_bytes());
        if let Some(eval) = &self.eval {
            out.extend_from_slice(&eval.score.to_bits().to_be_bytes());
            out.push(eval.bound.to_bits());
            out.push(eval.depth);
            if let Some(best) = &eval.best {
                out.extend_from_slice(&PackedUciMove::pack(*best).to_bytes());
            }
            write_varint(out, eval.nodes);
            if let Some(engine) = eval.engine {
                out.extend_from_slice(&engine.to_be_bytes());
            }
        }
        if let Some(rest) = &self.rest {
            out.extend_from_slice(&rest.score.to_bits().to_be_bytes());
            out.push(rest.depth);
        }
        if let Some(screen) = &self.screen {
            out.extend_from_slice(&screen.score.to_bits().to_be_bytes());
            out.push(screen.depth);
            out.push(screen.moves);
        }
        if let Some(idea) = self.idea {
            out.extend_from_slice(&idea.to_bits().to_be_bytes());
        }
        if let Some(settled) = self.settled_depth {
            out.push(settled);
        }
        write_varint(out, self.edges.len() as u64);
        for edge in &self.edges {
            out.extend_from_slice(&PackedUciMove::pack(edge.uci).to_bytes());
            out.extend_from_slice(&edge.score.to_bits().to_be_bytes());
            out.push(edge.depth);
            let engine = if edge.engine.is_some() { EDGE_ENGINE } else { 0 };
            let steering = match edge.steering {
                None => 0,
                Some(Steering::Excluded) => EDGE_EXCLUDED,
                Some(Steering::Included) => EDGE_INCLUDED,
            };
            out.push(edge.bound.to_bits() | if edge.imported { EDGE_IMPORTED } else { 0 } | engine | steering);
            if let Some(engine) = edge.engine {
                out.extend_from_slice(&engine.to_be_bytes());
            }
        }
    }

    /// Reads the record stored at `key` (schema 5): its checksum must hold for the key and bytes, and the bytes
    /// must decode.
    pub fn read(key: PositionKey, value: &[u8]) -> Result<Node, Damage> {
        Ok(Node::decode(checksum::open(Table::Nodes, &key.to_bytes(), value)?)?)
    }

    /// The record as schema 5 stores it at `key` (see [`Node::read`]), in `out` (cleared first).
    pub fn write(&self, key: PositionKey, out: &mut Vec<u8>) {
        out.clear();
        self.encode_into(out);
        checksum::seal(Table::Nodes, &key.to_bytes(), out);
    }

    /// Decodes a record's bytes (without its checksum); any malformation is an error.
    pub fn decode(bytes: &[u8]) -> Result<Node, DecodeError> {
        let mut r = Reader { bytes, pos: 0 };
        let version = r.u8("missing version")?;
        if version > FORMAT_VERSION {
            return Err(DecodeError::NewerVersion(version));
        }
        if version == 0 {
            return Err(r.corrupt("format version 0"));
        }
        let flags = r.u8("missing flags")?;
        // Every bit of the flags byte has a meaning since version 3; older versions may not use the newer bits.
        if (flags & (FLAG_BEST | FLAG_ENGINE) != 0 && flags & FLAG_EVAL == 0)
            || (version < 2 && flags & FLAG_ENGINE != 0)
            || (version < 3 && flags & FLAG_SCREEN != 0)
        {
            return Err(r.corrupt("unknown flags"));
        }
        let len = usize::from(r.u8("missing setup length")?);
        if len == 0 || len > MAX_SETUP_BYTES {
            return Err(r.corrupt("setup length out of range"));
        }
        let position =
            PackedPosition::from_slice(r.take(len, "truncated setup")?).ok_or_else(|| r.corrupt("setup too long"))?;
        let eval = if flags & FLAG_EVAL != 0 {
            let score = r.score()?;
            let bound = Bound::from_bits(r.u8("truncated eval")?).ok_or_else(|| r.corrupt("bad bound"))?;
            let depth = r.u8("truncated eval")?;
            let best = if flags & FLAG_BEST != 0 { Some(r.uci()?) } else { None };
            let nodes = r.varint()?;
            let engine = if flags & FLAG_ENGINE != 0 { Some(r.u16("truncated engine number")?) } else { None };
            Some(Eval { score, bound, depth, best, nodes, engine })
        } else {
            None
        };
        let rest = if flags & FLAG_REST != 0 {
            Some(RestBound { score: r.score()?, depth: r.u8("truncated rest bound")? })
        } else {
            None
        };
        let screen = if flags & FLAG_SCREEN != 0 {
            Some(ScreenBound {
                score: r.score()?,
                depth: r.u8("truncated screen bound")?,
                moves: r.u8("truncated screen bound")?,
            })
        } else {
            None
        };
        let idea = if flags & FLAG_IDEA != 0 { Some(r.score()?) } else { None };
        let settled_depth = if flags & FLAG_SETTLED != 0 { Some(r.u8("truncated settled depth")?) } else { None };
        let count = r.varint()?;
        if count > (bytes.len() / Edge::SIZE) as u64 {
            return Err(r.corrupt("edge count exceeds record"));
        }
        let mut edges = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let uci = r.uci()?;
            let score = r.score()?;
            let depth = r.u8("truncated edge")?;
            let bits = r.u8("truncated edge")?;
            let known = match version {
                1 => EDGE_BOUND_MASK | EDGE_IMPORTED,
                2 | 3 => EDGE_BOUND_MASK | EDGE_IMPORTED | EDGE_ENGINE,
                _ => EDGE_BOUND_MASK | EDGE_IMPORTED | EDGE_ENGINE | EDGE_EXCLUDED | EDGE_INCLUDED,
            };
            if bits & !known != 0 {
                return Err(r.corrupt("unknown edge flags"));
            }
            let steering = match (bits & EDGE_EXCLUDED != 0, bits & EDGE_INCLUDED != 0) {
                (false, false) => None,
                (true, false) => Some(Steering::Excluded),
                (false, true) => Some(Steering::Included),
                (true, true) => return Err(r.corrupt("a move both excluded and included")),
            };
            let bound = Bound::from_bits(bits & EDGE_BOUND_MASK).ok_or_else(|| r.corrupt("bad edge bound"))?;
            let engine = if bits & EDGE_ENGINE != 0 { Some(r.u16("truncated engine number")?) } else { None };
            edges.push(Edge { uci, score, depth, bound, imported: bits & EDGE_IMPORTED != 0, engine, steering });
        }
        if r.pos != bytes.len() {
            return Err(r.corrupt("trailing bytes"));
        }
        Ok(Node { position, eval, edges, rest, screen, idea, settled_depth, cyclic: flags & FLAG_CYCLIC != 0 })
    }
}

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn corrupt(&self, reason: &'static str) -> DecodeError {
        DecodeError::Corrupt { reason, offset: self.pos }
    }

    fn take(&mut self, n: usize, reason: &'static str) -> Result<&'a [u8], DecodeError> {
        let slice = self.bytes.get(self.pos..self.pos + n).ok_or_else(|| self.corrupt(reason))?;
        self.pos += n;
        Ok(slice)
    }

    fn u8(&mut self, reason: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, reason)?[0])
    }

    fn u16(&mut self, reason: &'static str) -> Result<u16, DecodeError> {
        let b = self.take(2, reason)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn score(&mut self) -> Result<Score, DecodeError> {
        let b = self.take(2, "truncated score")?;
        Score::from_bits(i16::from_be_bytes([b[0], b[1]])).ok_or_else(|| self.corrupt("score out of range"))
    }

    fn uci(&mut self) -> Result<UciMove, DecodeError> {
        let b = self.take(2, "truncated move")?;
        match PackedUciMove::from_bytes([b[0], b[1]]).unpack() {
            m @ UciMove::Normal { .. } => Ok(m),
            _ => Err(self.corrupt("not a chess move")),
        }
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8("truncated varint")?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.corrupt("varint too long"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use shakmaty::{Role, Square};

    fn arb_score() -> impl Strategy<Value = Score> {
        prop_oneof![(-30_000i32..=30_000).prop_map(Score::cp), (-60i32..=60).prop_map(Score::from_uci_mate)]
    }

    fn arb_bound() -> impl Strategy<Value = Bound> {
        prop_oneof![Just(Bound::Exact), Just(Bound::Lower), Just(Bound::Upper)]
    }

    fn arb_move() -> impl Strategy<Value = UciMove> {
        (0u32..64, 0u32..64, prop::option::of(prop_oneof![Just(Role::Queen), Just(Role::Knight)])).prop_map(
            |(from, to, promotion)| UciMove::Normal { from: Square::new(from), to: Square::new(to), promotion },
        )
    }

    fn arb_position() -> impl Strategy<Value = PackedPosition> {
        // Random legal positions: random playouts from the start.
        (0usize..60, any::<u64>()).prop_map(|(plies, seed)| {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut pos = Chess::default();
            for _ in 0..plies {
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                let m = moves[rng.usize(..moves.len())];
                pos.play_unchecked(m);
            }
            PackedPosition::of(&pos)
        })
    }

    fn arb_node() -> impl Strategy<Value = Node> {
        let eval = (
            arb_score(),
            arb_bound(),
            any::<u8>(),
            prop::option::of(arb_move()),
            any::<u64>(),
            prop::option::of(any::<u16>()),
        )
            .prop_map(|(score, bound, depth, best, nodes, engine)| Eval {
                score,
                bound,
                depth,
                best,
                nodes,
                engine,
            });
        let steering = prop::option::of(prop_oneof![Just(Steering::Excluded), Just(Steering::Included)]);
        let edge = (
            arb_move(),
            arb_score(),
            any::<u8>(),
            arb_bound(),
            any::<bool>(),
            prop::option::of(any::<u16>()),
            steering,
        )
            .prop_map(|(uci, score, depth, bound, imported, engine, steering)| Edge {
                uci,
                score,
                depth,
                bound,
                imported,
                engine,
                steering,
            });
        let rest = (arb_score(), any::<u8>()).prop_map(|(score, depth)| RestBound { score, depth });
        let screen = (arb_score(), any::<u8>(), any::<u8>()).prop_map(|(score, depth, moves)| ScreenBound {
            score,
            depth,
            moves,
        });
        (
            arb_position(),
            prop::option::of(eval),
            prop::collection::vec(edge, 0..40),
            prop::option::of(rest),
            prop::option::of(screen),
            prop::option::of(arb_score()),
            prop::option::of(any::<u8>()),
            any::<bool>(),
        )
            .prop_map(|(position, eval, edges, rest, screen, idea, settled_depth, cyclic)| Node {
                position,
                eval,
                edges,
                rest,
                screen,
                idea,
                settled_depth,
                cyclic,
            })
    }

    proptest! {
        #[test]
        fn codec_round_trip(node in arb_node()) {
            let bytes = node.encode();
            prop_assert_eq!(Node::decode(&bytes), Ok(node));
        }

        /// Any damage to a record is an error or a (different) valid record, never a panic.
        #[test]
        fn damaged_records_never_panic(node in arb_node(), cut in any::<prop::sample::Index>(), flip in any::<u8>()) {
            let mut bytes = node.encode();
            let i = cut.index(bytes.len());
            bytes[i] ^= flip;
            let _ = Node::decode(&bytes);
            let _ = Node::decode(&bytes[..i]);
        }
    }

    /// A sealed record reads back under its own key only, and a changed byte is a checksum mismatch, never another
    /// record.
    #[test]
    fn a_sealed_record_reads_back_under_its_key_only() {
        let key = PositionKey::of(&Chess::default());
        let mut node = Node::new(PackedPosition::of(&Chess::default()));
        node.settled_depth = Some(4);
        let mut value = Vec::new();
        node.write(key, &mut value);
        assert_eq!(value.len(), node.encode().len() + checksum::SIZE);
        assert_eq!(Node::read(key, &value), Ok(node.clone()));
        assert!(matches!(Node::read(PositionKey(key.0 ^ 1), &value), Err(Damage::Checksum(_))));
        for at in 0..value.len() {
            let mut damaged = value.clone();
            damaged[at] ^= 0x28;
            assert!(matches!(Node::read(key, &damaged), Err(Damage::Checksum(_))), "byte {at}");
        }
    }

    #[test]
    fn newer_version_is_reported() {
        let mut bytes = Node::new(PackedPosition::of(&Chess::default())).encode();
        bytes[0] = FORMAT_VERSION + 1;
        assert_eq!(Node::decode(&bytes), Err(DecodeError::NewerVersion(FORMAT_VERSION + 1)));
        assert_eq!(
            DecodeError::NewerVersion(FORMAT_VERSION + 1).to_string(),
            format!("record format {} is newer than this deeptree supports ({FORMAT_VERSION})", FORMAT_VERSION + 1)
        );
        assert_eq!(
            DecodeError::Corrupt { reason: "bad flags", offset: 3 }.to_string(),
            "corrupt record: bad flags at byte 3"
        );
    }

    /// A record with no engine number is version 1, byte for byte what earlier deeptree wrote and reads; one with
    /// an engine number is version 2, and version 1 may not carry one.
    #[test]
    fn engine_numbers_make_a_version_2_record_and_only_they_do() {
        let e4: UciMove = "e2e4".parse().unwrap();
        let mut node = Node::new(PackedPosition::of(&Chess::default()));
        node.eval =
            Some(Eval { score: Score::cp(20), bound: Bound::Exact, depth: 10, best: Some(e4), nodes: 5, engine: None });
        node.edges.push(Edge::new(e4, Score::cp(20), Bound::Exact, 10));
        let plain = node.encode();
        assert_eq!(plain[0], 1);
        let mut recorded = node.clone();
        recorded.edges[0].engine = Some(3);
        let bytes = recorded.encode();
        assert_eq!((bytes[0], bytes.len()), (2, plain.len() + 2));
        assert_eq!(Node::decode(&bytes), Ok(recorded.clone()));
        recorded.eval.as_mut().unwrap().engine = Some(7);
        assert_eq!(Node::decode(&recorded.encode()), Ok(recorded.clone()));
        let mut claimed_v1 = recorded.encode();
        claimed_v1[0] = 1;
        assert!(matches!(Node::decode(&claimed_v1), Err(DecodeError::Corrupt { .. })));
    }

    /// A screen bound makes a version 3 record, and only it does: a record without one is written as before, and a
    /// screen bound in a record that says version 2 is corrupt.
    #[test]
    fn a_screen_bound_makes_a_version_3_record_and_only_it_does() {
        let mut node = Node::new(PackedPosition::of(&Chess::default()));
        node.rest = Some(RestBound { score: Score::cp(20), depth: 10 });
        let plain = node.encode();
        assert_eq!(plain[0], 1);
        node.screen = Some(ScreenBound { score: Score::cp(-40), depth: 8, moves: 19 });
        let bytes = node.encode();
        assert_eq!((bytes[0], bytes.len()), (3, plain.len() + 4));
        assert_eq!(Node::decode(&bytes), Ok(node.clone()));
        let mut claimed_v2 = bytes.clone();
        claimed_v2[0] = 2;
        assert!(matches!(Node::decode(&claimed_v2), Err(DecodeError::Corrupt { .. })));
    }

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
    fn truncated_record_is_corrupt() {
        let bytes = Node::new(PackedPosition::of(&Chess::default())).encode();
        assert!(matches!(Node::decode(&bytes[..bytes.len() - 1]), Err(DecodeError::Corrupt { .. })));
        assert!(matches!(Node::decode(&[]), Err(DecodeError::Corrupt { .. })));
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
