//! Castling notation, standard and Chess960: one stored form, and the form each reader expects.
//!
//! GUIs write castling as the king's move to its square (`e1g1`) or as the king taking its own rook (`e1h1`); Chess960
//! needs the second, where the first can be ambiguous. deeptree accepts both everywhere, stores one canonical form
//! (so that a move is one edge whatever notation brought it), and writes to each engine and GUI the form its
//! `UCI_Chess960` setting asks for.
//!
//! ```
//! use deeptree::notation::{canonical, in_notation, parse_position};
//! use shakmaty::{Position, uci::UciMove};
//!
//! let (pos, chess960) =
//!     parse_position("r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1", false)?;
//! assert!(!chess960);
//! let castle = "e1h1".parse::<UciMove>()?.to_move(&pos)?; // king takes rook ...
//! assert_eq!(canonical(castle).to_string(), "e1g1"); // ... stored as the king's move
//! assert_eq!(in_notation(castle, true).to_string(), "e1h1"); // and written so for a Chess960 reader
//!
//! // A Shredder-FEN is Chess960: castling is stored as king takes rook when the king is not on the e-file.
//! let (pos, chess960) = parse_position("nrbqkbrn/pppppppp/8/8/8/8/PPPPPPPP/NRBQKBRN w GBgb - 0 1", false)?;
//! assert!(chess960);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! Stability: the canonical form is part of the store's format. Castling as in standard chess (king on the e-file,
//! rook in the corner) is stored as the king's move (`e1g1`, `e8c8`, as stores have always held it); any other
//! castling as the king taking the rook.

use shakmaty::{CastlingMode, Chess, File, FromSetup, Move, Position, fen::Fen, uci::UciMove};

/// The standard start position, as a FEN (which is how GUIs write `startpos`).
pub const START_FEN: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";

/// The standard start position, set up for Chess960 (it is Chess960's position 518) when `chess960`.
pub fn start_position(chess960: bool) -> Chess {
    if chess960 {
        // The standard start is a legal Chess960 position: this cannot fail.
        Chess::from_setup(shakmaty::Setup::default(), CastlingMode::Chess960).unwrap_or_default()
    } else {
        Chess::default()
    }
}

/// The stored form of a move: castling as in standard chess (king on the e-file, rook in the corner) as the king's
/// move, any other castling as the king taking its rook (the only unambiguous form there); every other move as UCI
/// writes it.
pub fn canonical(m: Move) -> UciMove {
    match m {
        Move::Castle { king, rook } if king.file() == File::E && matches!(rook.file(), File::A | File::H) => {
            UciMove::from_standard(m)
        }
        _ => UciMove::from_chess960(m),
    }
}

/// A move as a reader set up for Chess960 (`chess960`) or standard chess expects it.
pub fn in_notation(m: Move, chess960: bool) -> UciMove {
    if chess960 { UciMove::from_chess960(m) } else { UciMove::from_standard(m) }
}

/// The canonical form of a UCI move in `pos`, in whichever notation it came; `None` when it is illegal there.
pub fn canonical_uci(pos: &Chess, uci: &UciMove) -> Option<UciMove> {
    uci.to_move(pos).ok().map(canonical)
}

/// Moves from `pos`, in the reader's notation, up to the first that is illegal where it is played.
pub fn legal_line(pos: &Chess, moves: &[UciMove], chess960: bool) -> Vec<UciMove> {
    played(pos, moves).into_iter().map(|m| in_notation(m, chess960)).collect()
}

/// The moves of `moves` as played from `pos`, in whichever notation they came, up to the first that is illegal
/// where it is played.
pub fn played(pos: &Chess, moves: &[UciMove]) -> Vec<Move> {
    let mut pos = pos.clone();
    let mut line = Vec::with_capacity(moves.len());
    for uci in moves {
        let Ok(m) = uci.to_move(&pos) else {
            log::debug!("line cut at the illegal move {uci}");
            break;
        };
        line.push(m);
        pos.play_unchecked(m);
    }
    line
}

/// The castling field of a FEN names rook files (Shredder-FEN, or X-FEN for an inner rook): Chess960.
fn names_rook_files(fen: &str) -> bool {
    fen.split_whitespace().nth(2).is_some_and(|castling| castling.chars().any(|c| !"KQkq-".contains(c)))
}

/// Parses a FEN (standard, X-FEN or Shredder-FEN). With `chess960`, or when the FEN names rook files in its castling
/// field (Shredder-FEN, or X-FEN for an inner rook), the position is set up for Chess960; the second value says
/// which. Otherwise it is standard chess: `KQkq` rights that only Chess960 could have are an error that says so,
/// never a silent switch to Chess960 (they are more often stale rights of a standard game).
pub fn parse_position(fen: &str, chess960: bool) -> Result<(Chess, bool), String> {
    let parsed: Fen = fen.trim().parse().map_err(|e| format!("{e}"))?;
    if chess960 || names_rook_files(fen) {
        return parsed.into_position(CastlingMode::Chess960).map(|p| (p, true)).map_err(|e| e.to_string());
    }
    match parsed.clone().into_position(CastlingMode::Standard) {
        Ok(pos) => Ok((pos, false)),
        Err(standard) if parsed.into_position::<Chess>(CastlingMode::Chess960).is_ok() => Err(format!(
            "{standard} (a Chess960 position: set UCI_Chess960, give --chess960, or write its rights in Shredder-FEN)"
        )),
        Err(standard) => Err(standard.to_string()),
    }
}

/// Plays a UCI move if it is legal (in either castling notation).
pub fn play_uci(pos: &Chess, uci: &UciMove) -> Option<Chess> {
    let m = uci.to_move(pos).ok()?;
    let mut child = pos.clone();
    child.play_unchecked(m);
    Some(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn play(pos: &Chess, uci: &str) -> Move {
        uci.parse::<UciMove>().expect("uci").to_move(pos).expect("legal")
    }

    #[test]
    fn both_castling_notations_are_one_stored_move() {
        let (pos, _) = parse_position("r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1", false).expect("fen");
        for (a, b) in [("e1g1", "e1h1"), ("e1c1", "e1a1")] {
            assert_eq!(canonical(play(&pos, a)), canonical(play(&pos, b)));
            assert_eq!(canonical(play(&pos, b)).to_string(), a);
            assert_eq!(in_notation(play(&pos, a), true).to_string(), b);
            assert_eq!(in_notation(play(&pos, b), false).to_string(), a);
        }
        // The same position set up for Chess960 stores the same moves.
        let (pos960, chess960) =
            parse_position("r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1", true).expect("fen");
        assert!(chess960);
        assert_eq!(canonical(play(&pos960, "e1h1")).to_string(), "e1g1");
    }

    #[test]
    fn chess960_castling_is_stored_as_king_takes_rook() {
        // King on b1, rook on a1: the king's own square c1 would read as a plain king move.
        let (pos, chess960) = parse_position("rk4r1/8/8/8/8/8/8/RK4R1 w AGag - 0 1", false).expect("fen");
        assert!(chess960);
        let long = play(&pos, "b1a1");
        assert!(long.is_castle());
        assert_eq!(canonical(long).to_string(), "b1a1");
        assert_eq!(canonical_uci(&pos, &"b1a1".parse().expect("uci")), Some(canonical(long)));
    }

    #[test]
    fn an_e_file_king_with_an_inner_rook_castles_as_king_takes_rook() {
        // King e1, rooks b1 and g1: e1c1 would read as castling with a rook on a1.
        let (pos, _) = parse_position("1r2k1r1/8/8/8/8/8/8/1R2K1R1 w GBgb - 0 1", false).expect("fen");
        let long = play(&pos, "e1b1");
        assert!(long.is_castle());
        assert_eq!(canonical(long).to_string(), "e1b1");
        assert_eq!(canonical_uci(&pos, &canonical(long)), Some(canonical(long)));
    }

    #[test]
    fn kqkq_rights_only_chess960_can_have_need_chess960_and_bad_fens_are_errors() {
        let x_fen = "nrbqkbrn/pppppppp/8/8/8/8/PPPPPPPP/NRBQKBRN w KQkq - 0 1";
        let refused = parse_position(x_fen, false).expect_err("standard chess has no such rights");
        assert!(refused.contains("UCI_Chess960"), "{refused}");
        let (_, chess960) = parse_position(x_fen, true).expect("an X-FEN of Chess960");
        assert!(chess960);
        // Stale rights in a standard game (the rook left a1) are refused, not taken for Chess960.
        assert!(parse_position("4k3/8/8/8/8/8/8/1R2K2R w KQ - 0 1", false).is_err());
        assert!(parse_position("not a fen", false).is_err());
        assert!(parse_position("8/8/8/8/8/8/8/8 w - - 0 1", false).is_err());
    }

    #[test]
    fn lines_are_cut_at_the_first_illegal_move() {
        let pos = Chess::default();
        let moves: Vec<UciMove> = ["e2e4", "e7e5", "e1g1", "g1f3"].iter().map(|m| m.parse().expect("uci")).collect();
        let line = legal_line(&pos, &moves, false);
        assert_eq!(line.iter().map(ToString::to_string).collect::<Vec<_>>(), ["e2e4", "e7e5"]);
    }
}
