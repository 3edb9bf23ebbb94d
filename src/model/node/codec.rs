//! A node's record in bytes, in the layout the module's docs give: written in the oldest format version that holds
//! it, read back checked (any malformation is an error, never a panic).

use shakmaty::{packed::PackedUciMove, uci::UciMove};

use super::{DecodeError, Edge, Eval, MAX_SETUP_BYTES, Node, PackedPosition, RestBound, ScreenBound, Steering};
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

impl Node {
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
    use shakmaty::{Chess, Position, Role, Square};

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

    #[test]
    fn truncated_record_is_corrupt() {
        let bytes = Node::new(PackedPosition::of(&Chess::default())).encode();
        assert!(matches!(Node::decode(&bytes[..bytes.len() - 1]), Err(DecodeError::Corrupt { .. })));
        assert!(matches!(Node::decode(&[]), Err(DecodeError::Corrupt { .. })));
    }
}
