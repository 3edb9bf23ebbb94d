//! Engine scores and their bounds.
//!
//! ```
//! use deeptree::score::Score;
//!
//! let white_mates_in_one = Score::from_uci_mate(1);
//! // One ply up, the side to move is the one being mated, one ply further away.
//! assert_eq!(white_mates_in_one.back_up(), Score::from_uci_mate(-1));
//! assert_eq!(Score::cp(-19).back_up(), Score::cp(19));
//! assert!(Score::from_uci_mate(2) < Score::from_uci_mate(1));
//! ```
//!
//! A [`Score`] is always from the point of view of the side to move in the position that owns it. Mate scores count
//! plies internally, so that "a mate found `n` plies below grows by `n`" is exact; UCI's `mate N` counts moves.
//!
//! # Stability
//!
//! The 16-bit encoding ([`Score::to_bits`]) is persisted in the store and will not change within a store format
//! version.

use std::fmt;

use serde::ser::SerializeMap;

/// A score in centipawns or a mate distance, from the side to move's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Score(i16);

/// Internal value of "mate in 0 plies" (the side to move is checkmated has `-MATE`).
const MATE: i16 = 32_000;
/// Scores beyond this magnitude are mate scores.
const MATE_BOUND: i16 = MATE - 1_000;
/// Largest centipawn magnitude; larger engine scores are clamped.
pub const MAX_CP: i32 = 30_000;

impl Score {
    pub const DRAW: Score = Score(0);
    /// The side to move is checkmated: the lowest score.
    pub const MATED_NOW: Score = Score(-MATE);
    /// Above every reachable score (mate in 0 plies cannot be the side to move's).
    pub const MATE_NOW: Score = Score(MATE);
    /// The score of a move nothing has valued yet (a game's move before any engine scored it), and the alpha score
    /// such a move backs up: the lowest score there is. No engine score of a move is this low (a move's score is at
    /// worst "mated in one ply"), so it never outranks a real one. Test it with [`Score::is_valued`].
    pub const NOT_VALUED: Score = Score(-MATE);

    /// A centipawn score, clamped to ±30000.
    pub fn cp(cp: i32) -> Score {
        Score(cp.clamp(-MAX_CP, MAX_CP) as i16)
    }

    /// The side to move mates in `plies` plies (1 = mate with its next move).
    pub fn mate_in_plies(plies: u16) -> Score {
        Score(MATE - plies.min(999) as i16)
    }

    /// The side to move is mated in `plies` plies (0 = it is checkmated now).
    pub fn mated_in_plies(plies: u16) -> Score {
        Score(-(MATE - plies.min(999) as i16))
    }

    /// UCI `score mate N`: `N > 0` the side to move mates in `N` moves, `N <= 0` it is mated in `-N` moves.
    pub fn from_uci_mate(moves: i32) -> Score {
        if moves > 0 {
            // Saturating: an engine's `score mate 1073741825` must not wrap round to a mate in 1.
            Score::mate_in_plies(moves.saturating_mul(2).saturating_sub(1).min(999) as u16)
        } else {
            Score::mated_in_plies(moves.saturating_mul(-2).min(999) as u16)
        }
    }

    pub fn is_mate(self) -> bool {
        self.0.abs() > MATE_BOUND
    }

    /// Centipawns, or `None` for a mate score.
    pub fn as_cp(self) -> Option<i32> {
        (!self.is_mate()).then_some(i32::from(self.0))
    }

    /// UCI's mate in moves, or `None` for a centipawn score.
    pub fn as_uci_mate(self) -> Option<i32> {
        if self.0 > MATE_BOUND {
            Some((i32::from(MATE - self.0) + 1) / 2)
        } else if self.0 < -MATE_BOUND {
            Some(-(i32::from(MATE + self.0) / 2))
        } else {
            None
        }
    }

    /// The same score seen from the parent position, one ply up.
    ///
    /// Sign flip: the parent's side to move is the child's opponent, so the score is negated; a mate score also
    /// moves one ply further away.
    pub fn back_up(self) -> Score {
        if self.0 > MATE_BOUND {
            Score(-self.0 + 1)
        } else if self.0 < -MATE_BOUND {
            Score(-self.0 - 1)
        } else {
            Score(-self.0)
        }
    }

    /// The same score seen from the child position after the best move, one ply down: the inverse of
    /// [`Score::back_up`].
    ///
    /// Sign flip: the child's side to move is the parent's opponent, so the score is negated; a mate score also
    /// comes one ply nearer.
    /// A mate that has run out (mated now: the line should have ended) stays at the end of the scale, never past it.
    pub fn toward_child(self) -> Score {
        if self.0 > MATE_BOUND {
            Score((-self.0 - 1).max(-MATE))
        } else if self.0 < -MATE_BOUND {
            Score((-self.0 + 1).min(MATE))
        } else {
            Score(-self.0)
        }
    }

    /// Whether a move's score (or the alpha score of a move) is a value, not [`Score::NOT_VALUED`].
    pub fn is_valued(self) -> bool {
        self != Score::NOT_VALUED
    }

    /// A plain comparable number: centipawns, or ±(32000 − plies) for mates.
    pub fn value(self) -> i32 {
        i32::from(self.0)
    }

    /// Persisted 16-bit form.
    pub fn to_bits(self) -> i16 {
        self.0
    }

    /// Reads the persisted form; `None` when the value cannot be a score.
    pub fn from_bits(bits: i16) -> Option<Score> {
        // `checked_abs`: i16::MIN has no absolute value and is no score.
        bits.checked_abs().is_some_and(|abs| abs <= MATE).then_some(Score(bits))
    }

    /// Subtract a centipawn margin (window arithmetic); saturates inside the score range.
    pub fn minus_cp(self, margin: i32) -> Score {
        Score((i32::from(self.0) - margin).clamp(-i32::from(MATE), i32::from(MATE)) as i16)
    }
}

impl fmt::Display for Score {
    /// UCI form: `cp -19` or `mate 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_uci_mate() {
            Some(m) => write!(f, "mate {m}"),
            None => write!(f, "cp {}", self.0),
        }
    }
}

impl serde::Serialize for Score {
    /// JSON form, as UCI has it: `{"cp": -19}` or `{"mate": 3}`.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match self.as_uci_mate() {
            Some(m) => map.serialize_entry("mate", &m)?,
            None => map.serialize_entry("cp", &self.0)?,
        }
        map.end()
    }
}

/// What an engine score says about the true value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// The score is the value at its depth.
    Exact,
    /// The true value is at least the score (fail high).
    Lower,
    /// The true value is at most the score (fail low, or a move never searched).
    Upper,
}

impl Bound {
    /// The same bound seen from the other side: a lower bound for one side is an upper bound for its opponent.
    pub fn flipped(self) -> Bound {
        match self {
            Bound::Lower => Bound::Upper,
            Bound::Upper => Bound::Lower,
            Bound::Exact => Bound::Exact,
        }
    }

    pub fn to_bits(self) -> u8 {
        match self {
            Bound::Exact => 0,
            Bound::Lower => 1,
            Bound::Upper => 2,
        }
    }

    pub fn from_bits(bits: u8) -> Option<Bound> {
        match bits {
            0 => Some(Bound::Exact),
            1 => Some(Bound::Lower),
            2 => Some(Bound::Upper),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Exact => "exact",
            Bound::Lower => "lower",
            Bound::Upper => "upper",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uci_mate_round_trip() {
        for n in [-20, -3, -1, 0, 1, 2, 7, 40] {
            assert_eq!(Score::from_uci_mate(n).as_uci_mate(), Some(n), "mate {n}");
        }
        assert_eq!(Score::cp(35).as_uci_mate(), None);
        assert_eq!(Score::cp(99_999), Score::cp(MAX_CP));
        // What an engine may send past any real mate: the farthest mate kept, never a wrap to a near one.
        assert_eq!(Score::from_uci_mate(1_073_741_825), Score::mate_in_plies(999));
        assert_eq!(Score::from_uci_mate(i32::MAX), Score::mate_in_plies(999));
        assert_eq!(Score::from_uci_mate(-1_073_741_824), Score::mated_in_plies(999));
        assert_eq!(Score::from_uci_mate(i32::MIN), Score::mated_in_plies(999));
    }

    #[test]
    fn only_scores_read_from_bits() {
        assert_eq!(Score::from_bits(-32_000), Some(Score::MATED_NOW));
        assert_eq!(Score::from_bits(32_001), None);
        assert_eq!(Score::from_bits(i16::MIN), None);
    }

    #[test]
    fn back_up_flips_sign_and_grows_mate_distance() {
        // Checkmated now (0 plies): the parent mates in 1 ply = "mate 1".
        assert_eq!(Score::mated_in_plies(0).back_up(), Score::from_uci_mate(1));
        assert_eq!(Score::from_uci_mate(1).back_up(), Score::from_uci_mate(-1));
        assert_eq!(Score::from_uci_mate(-1).back_up(), Score::from_uci_mate(2));
        assert_eq!(Score::cp(-45).back_up(), Score::cp(45));
    }

    #[test]
    fn toward_child_undoes_back_up() {
        for score in
            [Score::cp(-45), Score::cp(0), Score::from_uci_mate(1), Score::from_uci_mate(-3), Score::cp(MAX_CP)]
        {
            assert_eq!(score.toward_child().back_up(), score);
            assert_eq!(score.back_up().toward_child(), score);
        }
        // The side that mates in 1 move leaves its opponent mated at once.
        assert_eq!(Score::from_uci_mate(1).toward_child(), Score::MATED_NOW);
        // Past the end of a mate (an engine's line longer than its mate), the scale's end: no score out of range.
        assert_eq!(Score::MATED_NOW.toward_child(), Score::MATE_NOW);
        assert_eq!(Score::MATE_NOW.toward_child(), Score::MATED_NOW);
    }

    #[test]
    fn ordering_prefers_faster_mates() {
        assert!(Score::from_uci_mate(1) > Score::from_uci_mate(5));
        assert!(Score::from_uci_mate(5) > Score::cp(MAX_CP));
        assert!(Score::from_uci_mate(-5) > Score::from_uci_mate(-1));
        assert!(Score::from_uci_mate(-1) < Score::cp(-MAX_CP));
    }

    #[test]
    fn json_form() {
        assert_eq!(serde_json::to_string(&Score::cp(-19)).unwrap(), r#"{"cp":-19}"#);
        assert_eq!(serde_json::to_string(&Score::from_uci_mate(3)).unwrap(), r#"{"mate":3}"#);
    }
}
