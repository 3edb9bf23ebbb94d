//! The one priority of growth: where the next step of the engines goes (docs/design.md §6.1).
//!
//! ```
//! use deeptree::search::growth::priority::{Terms, priority};
//!
//! // A position half the games reach, known 4 plies short of the target, against one a quarter reach, 5 short:
//! // a ply still lacking is worth a factor 2 of reach, so the two rank alike.
//! let a = priority(Terms { reach: 0.5, known: 18, target: 22 });
//! let b = priority(Terms { reach: 0.25, known: 17, target: 22 });
//! assert!((a - b).abs() < 1e-12);
//! // At or past the target nothing is lacking: the position is not grown.
//! assert_eq!(priority(Terms { reach: 1.0, known: 22, target: 22 }), 0.0);
//! ```
//!
//! `priority = reach x 2^lack`, with `lack = target - known` in plies (none at or past the target):
//!
//! - `reach` is the share of the sources' games expected to arrive at the position (the opponent's replies weighted
//!   by their loss against its best, each source by its weight: games that left the tree there, a task's priority,
//!   a root's weight);
//! - `known` is the depth the tree knows the position to, counted as a game's `go` policy counts it (§7.1);
//! - `target` is the depth the tree must know a position to for a game to get its move there: the depth the inner
//!   engine reaches in a move of the clock the tree is grown for, less `TreeDepthMargin`.
//!
//! It is drop-out expansion (Lincke 2000) with a depth weight of 1/2 a ply (`reach x 2^-known`, up to the constant
//! `2^target`), cut at the target as KataGo's book cuts at its cost: where games leave the tree first (a position
//! unknown lacks the most), then depth where games arrive most. A ply of depth costs the engines about twice the one
//! before (Stockfish's effective branching factor is about 1.9), so one more ply is worth asking where a position is
//! reached twice as often. The factor 2 is the rule both earlier growths were measured best with: a root reached by
//! `2^k` games settled `k` depths ahead, and depth where games go was deepened at half the priority a ply.

/// What a position's priority is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Terms {
    /// The share of the sources' games expected to arrive there (0 to 1).
    pub reach: f64,
    /// The depth the tree knows it to (its combined depth; 0 without an evaluation).
    pub known: u32,
    /// The depth a game needs there.
    pub target: u32,
}

impl Terms {
    /// The plies the position still lacks of its target.
    pub fn lack(&self) -> u32 {
        self.target.saturating_sub(self.known)
    }
}

/// What a ply still lacking is worth, as a factor of reach.
pub const PLY_FACTOR: f64 = 2.0;

/// The priority of growing a position with these terms: `reach x 2^lack`, or 0 where nothing is lacking (or no game
/// arrives). The only place where growth ranks positions.
pub fn priority(terms: Terms) -> f64 {
    let lack = terms.lack();
    if lack == 0 || terms.reach.is_nan() || terms.reach <= 0.0 {
        return 0.0;
    }
    // A lack past 1,000 plies is no target a search reaches; kept finite.
    terms.reach * PLY_FACTOR.powi(lack.min(1000) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// More reach, or more lacking, ranks higher; the target is a cut.
        #[test]
        fn more_reach_or_more_lack_ranks_higher(
            reach in 1e-9f64..1.0, more in 1.0001f64..100.0, known in 0u32..60, target in 0u32..60,
        ) {
            let at = |reach: f64, known: u32| priority(Terms { reach, known, target });
            if known < target {
                prop_assert!(at(reach * more, known) > at(reach, known));
                prop_assert!(at(reach, known.saturating_sub(1)) >= at(reach, known));
                prop_assert!(at(reach, known) > 0.0);
            } else {
                prop_assert_eq!(at(reach, known), 0.0);
            }
        }

        /// One ply lacking is worth exactly a factor 2 of reach.
        #[test]
        fn a_ply_is_worth_twice_the_reach(reach in 1e-6f64..0.5, known in 1u32..40, lack in 1u32..20) {
            let target = known + lack;
            let shallower = priority(Terms { reach, known: known - 1, target });
            let likelier = priority(Terms { reach: reach * 2.0, known, target });
            prop_assert!((shallower - likelier).abs() <= 1e-9 * shallower);
        }
    }

    #[test]
    fn nothing_is_grown_that_no_game_reaches() {
        assert_eq!(priority(Terms { reach: 0.0, known: 0, target: 20 }), 0.0);
        assert_eq!(priority(Terms { reach: f64::NAN, known: 0, target: 20 }), 0.0);
        assert!(priority(Terms { reach: 1e-3, known: 0, target: 5000 }).is_finite());
    }
}
