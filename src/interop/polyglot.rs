//! `deeptree export polyglot`: a standard Polyglot opening book of the tree.
//!
//! ```
//! use deeptree::interop::polyglot::{book_key, polyglot_move};
//! use shakmaty::{Chess, Position, uci::UciMove};
//!
//! let start = Chess::default();
//! assert_eq!(book_key(&start), 0x463b_9618_1691_fc9c);
//! let e4: UciMove = "e2e4".parse()?;
//! assert_eq!(polyglot_move(&start, &e4), Some((12 << 6) | 28));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Format
//!
//! Entries of 16 bytes, big-endian: key `u64`, move `u16`, weight `u16`, learn `u32` (always 0), sorted by key, then
//! weight descending. The key is the Polyglot Zobrist key, which is deeptree's position key except in the rare
//! positions where an en passant capture is possible but illegal (a pinned pawn): Polyglot hashes the en passant
//! file whenever a pawn stands ready to capture, deeptree only when the capture is legal, so it stores such a
//! position as the same one without the en passant square (it is the same position by the rules). The book writes
//! the moves of such a position under both keys ([`book_keys`]), so a reader finds them whichever way the position
//! arose. A move
//! is `to` in bits 0-5, `from` in bits 6-11 (square index = rank × 8 + file) and the promotion piece in bits 12-14
//! (knight 1, bishop 2, rook 3, queen 4); castling is written as the king taking its own rook (`e1h1`).
//!
//! # Weights
//!
//! A position's moves are ranked as `deeptree show --fen` ranks them (alpha score from that position, then idea
//! score). The best move weighs [`TOP_WEIGHT`]; a move `x` centipawns worse weighs `TOP_WEIGHT × 2^(−x/10)`, at
//! least 1 and always less than the move ranked above it, so the best move is the one and only heaviest entry and a
//! book that picks moves by weight mostly plays moves within a few centipawns of the best. An imported move that no
//! engine has valued yet weighs 0 (present, never chosen). Only positions with an evaluated best move are written.

use std::io::Write;

use shakmaty::{
    CastlingMode, Chess, EnPassantMode, File, FromSetup, Piece, Position, Rank, Role, Square, uci::UciMove,
    zobrist::Zobrist64,
};

use crate::{search::show::ShownMove, store::ReadView};

use super::{
    InteropError,
    walk::{self, Scope},
};

/// Weight of a position's best move.
pub const TOP_WEIGHT: u16 = 10_000;

/// Centipawns that halve a move's weight.
pub const HALVING_CP: f64 = 10.0;

/// One book entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookEntry {
    pub key: u64,
    pub mv: u16,
    pub weight: u16,
    pub learn: u32,
}

impl BookEntry {
    pub const SIZE: usize = 16;

    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut out = [0u8; Self::SIZE];
        out[..8].copy_from_slice(&self.key.to_be_bytes());
        out[8..10].copy_from_slice(&self.mv.to_be_bytes());
        out[10..12].copy_from_slice(&self.weight.to_be_bytes());
        out[12..].copy_from_slice(&self.learn.to_be_bytes());
        out
    }

    pub fn from_bytes(bytes: &[u8; Self::SIZE]) -> BookEntry {
        let u16_at = |i: usize| u16::from_be_bytes([bytes[i], bytes[i + 1]]);
        BookEntry {
            key: u64::from_be_bytes(bytes[..8].try_into().unwrap_or_default()),
            mv: u16_at(8),
            weight: u16_at(10),
            learn: u32::from_be_bytes(bytes[12..].try_into().unwrap_or_default()),
        }
    }
}

/// The Polyglot key of a position.
pub fn book_key(pos: &Chess) -> u64 {
    pos.zobrist_hash::<Zobrist64>(EnPassantMode::PseudoLegal).0
}

/// Every Polyglot key under which a reader may look up a stored position: its own key, and when no legal en passant
/// capture is possible, the key of each variant with an en passant square that a double pawn push could have left
/// and that a pawn stands ready to capture (illegally: the legal ones are different positions).
pub fn book_keys(pos: &Chess) -> Vec<u64> {
    let mut keys = vec![book_key(pos)];
    if pos.ep_square(EnPassantMode::Legal).is_some() {
        return keys;
    }
    let us = pos.turn();
    let board = pos.board();
    // Ranks (0-based) of the double-pushed pawn, of the square it skipped and of its origin, from White's side.
    let (pawn_rank, skipped_rank, origin_rank) = if us.is_white() { (4, 5, 6) } else { (3, 2, 1) };
    for file in 0..8u32 {
        let at = |rank: u32| Square::from_coords(File::new(file), Rank::new(rank));
        let theirs = board.piece_at(at(pawn_rank)) == Some(Piece { color: !us, role: Role::Pawn });
        if !theirs || board.piece_at(at(skipped_rank)).is_some() || board.piece_at(at(origin_rank)).is_some() {
            continue;
        }
        let beside = [file.checked_sub(1), (file < 7).then_some(file + 1)];
        let ready = beside.into_iter().flatten().any(|f| {
            board.piece_at(Square::from_coords(File::new(f), Rank::new(pawn_rank)))
                == Some(Piece { color: us, role: Role::Pawn })
        });
        if !ready {
            continue;
        }
        let mut setup = pos.to_setup(EnPassantMode::Legal);
        setup.ep_square = Some(at(skipped_rank));
        if let Ok(variant) = Chess::from_setup(setup, CastlingMode::Standard) {
            let key = book_key(&variant);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// A legal move in Polyglot's encoding.
pub fn polyglot_move(pos: &Chess, uci: &UciMove) -> Option<u16> {
    let m = uci.to_move(pos).ok()?;
    let from = u16::from(m.from()?); // castling: the king's square
    let to = u16::from(m.to()); // castling: the rook's square
    let promotion = match m.promotion() {
        None => 0,
        Some(Role::Knight) => 1,
        Some(Role::Bishop) => 2,
        Some(Role::Rook) => 3,
        Some(Role::Queen) => 4,
        Some(_) => return None,
    };
    Some(to | (from << 6) | (promotion << 12))
}

/// Weights of ranked moves (best first), as the module documentation describes.
pub fn weights(moves: &[ShownMove]) -> Vec<u16> {
    let Some(best) = moves.first().map(|m| m.alpha) else { return Vec::new() };
    let mut out: Vec<u16> = Vec::with_capacity(moves.len());
    for m in moves {
        if !m.alpha.is_valued() {
            out.push(0);
            continue;
        }
        let worse = f64::from((best.value() - m.alpha.value()).max(0));
        let raw = (f64::from(TOP_WEIGHT) * (-worse / HALVING_CP).exp2()).round() as u16;
        let weight = match out.last() {
            None => TOP_WEIGHT,
            Some(&above) => raw.min(above.saturating_sub(1)).max(1),
        };
        out.push(weight);
    }
    out
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BookSummary {
    pub positions: u64,
    pub entries: u64,
}

/// The book entries of the positions in `scope`, sorted.
pub fn book_entries(view: &ReadView<'_>, scope: &Scope) -> Result<(Vec<BookEntry>, BookSummary), InteropError> {
    let mut entries = Vec::new();
    let mut summary = BookSummary::default();
    for (_, pos) in walk::positions(view, scope)? {
        let ranked = walk::ranked(view, &pos)?;
        if walk::best(&ranked).is_none() {
            continue;
        }
        summary.positions += 1;
        let weights = weights(&ranked.moves);
        for key in book_keys(&pos) {
            for (m, weight) in ranked.moves.iter().zip(&weights) {
                let Ok(uci) = m.uci.parse::<UciMove>() else { continue };
                let Some(mv) = polyglot_move(&pos, &uci) else { continue };
                entries.push(BookEntry { key, mv, weight: *weight, learn: 0 });
            }
        }
    }
    entries.sort_by(|a, b| a.key.cmp(&b.key).then(b.weight.cmp(&a.weight)).then(a.mv.cmp(&b.mv)));
    summary.entries = entries.len() as u64;
    Ok((entries, summary))
}

/// Writes the book of `scope` to `out`.
pub fn export_polyglot(view: &ReadView<'_>, scope: &Scope, out: &mut impl Write) -> Result<BookSummary, InteropError> {
    let (entries, summary) = book_entries(view, scope)?;
    let mut bytes = Vec::with_capacity(entries.len() * BookEntry::SIZE);
    for entry in entries {
        bytes.extend_from_slice(&entry.to_bytes());
    }
    out.write_all(&bytes).map_err(|e| InteropError::Invalid(format!("writing the book: {e}")))?;
    Ok(summary)
}

/// Reads a book's entries (for checks).
pub fn read_book(bytes: &[u8]) -> Vec<BookEntry> {
    bytes.chunks_exact(BookEntry::SIZE).filter_map(|c| c.try_into().ok()).map(BookEntry::from_bytes).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::Score;
    use shakmaty::{CastlingMode, fen::Fen};

    fn shown(alpha: Score) -> ShownMove {
        ShownMove {
            uci: "e2e4".into(),
            san: "e4".into(),
            idea: alpha,
            alpha,
            depth: 10,
            engine: alpha,
            bound: "exact",
            imported: false,
            included: false,
            child: None,
        }
    }

    #[test]
    fn castling_is_king_takes_rook_and_promotions_are_coded() {
        let pos: Chess = "r3k2r/1P6/8/8/8/8/8/R3K2R w KQkq - 0 1"
            .parse::<Fen>()
            .unwrap()
            .into_position(CastlingMode::Standard)
            .unwrap();
        let castle: UciMove = "e1g1".parse().unwrap();
        assert_eq!(polyglot_move(&pos, &castle), Some(7 | (4 << 6)));
        let long: UciMove = "e1c1".parse().unwrap();
        assert_eq!(polyglot_move(&pos, &long), Some(4 << 6));
        let promote: UciMove = "b7a8n".parse().unwrap();
        assert_eq!(polyglot_move(&pos, &promote), Some(56 | (49 << 6) | (1 << 12)));
    }

    #[test]
    fn the_best_move_is_strictly_heaviest() {
        let moves = [shown(Score::cp(30)), shown(Score::cp(30)), shown(Score::cp(20)), shown(Score::cp(-500))];
        let w = weights(&moves);
        assert_eq!(w[0], TOP_WEIGHT);
        assert_eq!(w[1], TOP_WEIGHT - 1);
        assert_eq!(w[2], 5000);
        assert_eq!(w[3], 1);
        let unvalued = [shown(Score::cp(5)), shown(Score::NOT_VALUED)];
        assert_eq!(weights(&unvalued), [TOP_WEIGHT, 0]);
    }

    #[test]
    fn a_pinned_en_passant_position_is_written_under_both_keys() {
        let with_ep: Chess =
            "8/8/8/K2pP2r/8/8/8/7k w - d6 0 1".parse::<Fen>().unwrap().into_position(CastlingMode::Standard).unwrap();
        let stored = crate::store::node::PackedPosition::of(&with_ep).to_position().unwrap();
        assert_eq!(crate::store::key::PositionKey::of(&stored), crate::store::key::PositionKey::of(&with_ep));
        let keys = book_keys(&stored);
        assert_eq!(keys.len(), 2);
        assert!(keys.contains(&book_key(&with_ep)) && keys.contains(&book_key(&stored)));
        assert_ne!(book_key(&with_ep), book_key(&stored));
        // A legal en passant capture makes a position of its own: one key.
        let legal: Chess =
            "8/8/8/3pP3/8/8/8/K6k w - d6 0 1".parse::<Fen>().unwrap().into_position(CastlingMode::Standard).unwrap();
        assert_eq!(book_keys(&legal), [book_key(&legal)]);
        assert_eq!(book_keys(&Chess::default()), [book_key(&Chess::default())]);
    }

    #[test]
    fn entries_round_trip() {
        let e = BookEntry { key: 0x463b_9618_1691_fc9c, mv: 796, weight: 7, learn: 0 };
        assert_eq!(read_book(&e.to_bytes()), [e]);
    }
}
