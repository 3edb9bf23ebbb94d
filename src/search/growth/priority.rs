//! The one priority of growth: where the next step of the engines goes (docs/design.md §6.1).
//!
//! ```
//! use deeptree::search::growth::priority::{Terms, priority};
//!
//! // Two positions the tree answers (target 14, aim 17): one half the games reach known to 18, one a quarter reach
//! // known to 17: a ply more is worth a factor 2 of reach, so the two rank alike.
//! let a = priority(Terms { reach: 0.5, known: 18, target: 14, aim: 17, exit: false });
//! let b = priority(Terms { reach: 0.25, known: 17, target: 14, aim: 17, exit: false });
//! assert!((a - b).abs() < 1e-12);
//! // Where games leave the tree, the step that brings the tree's answer counts as one ply: a position a quarter of
//! // the games leave the tree at ranks with one half of them reach, answered at the aim.
//! let exit = priority(Terms { reach: 0.25, known: 0, target: 14, aim: 17, exit: true });
//! let answered = priority(Terms { reach: 0.5, known: 17, target: 14, aim: 17, exit: false });
//! assert!((exit - answered).abs() < 1e-12 && exit > b);
//! ```
//!
//! `priority = reach x 2^lack`, with `lack` in plies:
//!
//! - where games leave the tree (`exit`: a position of the tree's side it does not know to the `target`, or one of
//!   the opponent's whose replies are not all searched), `lack = 1`: one step (one search at the engine depth, where
//!   that is at least the target) gives games the tree's move there;
//! - where the tree answers, and for a seed deepened itself, `lack = aim - known`, which falls below 0 past the aim:
//!   depth keeps its worth, halved each ply;
//! - `reach` is the share of the sources' games expected to arrive at the position (the opponent's replies weighted
//!   by their loss against its best, each source by its weight: games that left the tree there, a task's priority,
//!   a root's weight);
//! - `known` is the depth the tree knows the position to, counted as a game's `go` policy counts it (§7.1);
//! - `target` is the depth the tree must know a position to for a game to get its move there: the depth the inner
//!   engine reaches in a move of the clock the tree is grown for, less `TreeDepthMargin`;
//! - `aim` is the target plus `beyond` plies (3 by default, `--beyond`): a tree answer only as deep as the search it
//!   replaces gains nothing, so positions the tree answers short of the aim are deepened before new exits of equal
//!   reach.
//!
//! It is drop-out expansion (Lincke 2000) with a depth weight of 1/2 a ply, as the growth measured best grew
//! (docs/strength.md, "depth where games go": an exit at its reach, a position answered at the play depth at half
//! its reach, halved again each ply past it): here with the aim as that play depth. A ply of depth costs the engines
//! about twice the one before (Stockfish's effective branching factor is about 1.9), so one more ply is worth asking
//! where a position is reached twice as often. A tree grown only to the target (no depth past it, every step to
//! breadth) lost to that growth by 32.7 Elo over 800 games (docs/strength.md, one growth, match A).

/// What a position's priority is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Terms {
    /// The share of the sources' games expected to arrive there (0 to 1).
    pub reach: f64,
    /// The depth the tree knows it to (its combined depth; 0 without an evaluation).
    pub known: u32,
    /// The depth a game needs there for the tree's move.
    pub target: u32,
    /// The depth growth aims at there: the target and the plies beyond it that still rank above new exits.
    pub aim: u32,
    /// Games leave the tree there: the tree does not answer (or the opponent's replies are not all searched).
    pub exit: bool,
}

impl Terms {
    /// The plies the position lacks, as ranked: 1 where games leave the tree, else its aim less its known depth
    /// (below 0 past the aim).
    pub fn lack(&self) -> i32 {
        if self.exit { 1 } else { i32::try_from(i64::from(self.aim) - i64::from(self.known)).unwrap_or(0) }
    }
}

/// A combined depth no search reaches: a run with no target (`analyze --roots` with a budget and neither `--for` nor
/// `--play-depth`) deepens every position while its budget lasts, and ranks them against a target this deep or deeper.
pub const NO_TARGET: u32 = u8::MAX as u32;

impl Terms {
    /// Whether the run grows to a target depth (see [`NO_TARGET`]).
    pub fn has_target(&self) -> bool {
        self.target < NO_TARGET
    }

    /// The priority and the lack as a step line shows them: as ranked; in a run with no target, divided by
    /// `2^aim`, that is `reach x 2^-known`: the same order, without a number of some 80 digits. (Such a run follows
    /// no games, so it has no exits; one would be shown as ranked.)
    pub fn shown(&self) -> (f64, i32) {
        if self.has_target() || self.exit {
            (priority(*self), self.lack())
        } else {
            let lack = -i32::try_from(self.known).unwrap_or(i32::MAX);
            (priority(Terms { target: 0, aim: 0, ..*self }), lack)
        }
    }

    /// `target T, aim A` as a step line shows them, or `no target`.
    pub fn depths(&self) -> String {
        if self.has_target() {
            format!("target {:>2}, aim {:>2}", self.target, self.aim)
        } else {
            "no target".to_owned()
        }
    }
}

/// What a ply still lacking is worth, as a factor of reach.
pub const PLY_FACTOR: f64 = 2.0;

/// Plies past the target that growth aims at by default (`--beyond`).
pub const DEFAULT_BEYOND: u32 = 3;

/// The priority of growing a position with these terms: `reach x 2^lack`, or 0 where no game arrives. The only
/// place where growth ranks positions.
pub fn priority(terms: Terms) -> f64 {
    if terms.reach.is_nan() || terms.reach <= 0.0 {
        return 0.0;
    }
    // Kept finite: no search reaches 1,000 plies.
    terms.reach * PLY_FACTOR.powi(terms.lack().clamp(-1000, 1000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// More reach, or less known, ranks higher where the tree answers; an exit ranks by its reach alone.
        #[test]
        fn more_reach_or_more_lack_ranks_higher(
            reach in 1e-9f64..1.0, more in 1.0001f64..100.0, known in 1u32..60, target in 1u32..40, beyond in 0u32..8,
        ) {
            let aim = target + beyond;
            let at = |reach: f64, known: u32, exit: bool| priority(Terms { reach, known, target, aim, exit });
            prop_assert!(at(reach * more, known, false) > at(reach, known, false));
            prop_assert!(at(reach, known - 1, false) > at(reach, known, false));
            prop_assert!(at(reach, known, false) > 0.0);
            prop_assert!(at(reach * more, known, true) > at(reach, known, true));
            prop_assert_eq!(at(reach, known, true), at(reach, 0, true));
            // Past the aim, a position answered ranks below an exit of the same reach; short of it, above.
            if known >= aim {
                prop_assert!(at(reach, known, false) < at(reach, known, true));
            } else if known + 1 < aim {
                prop_assert!(at(reach, known, false) > at(reach, known, true));
            }
        }

        /// One ply lacking is worth exactly a factor 2 of reach.
        #[test]
        fn a_ply_is_worth_twice_the_reach(reach in 1e-6f64..0.5, known in 1u32..40, aim in 0u32..40) {
            let shallower = priority(Terms { reach, known: known - 1, target: 0, aim, exit: false });
            let likelier = priority(Terms { reach: reach * 2.0, known, target: 0, aim, exit: false });
            prop_assert!((shallower - likelier).abs() <= 1e-9 * shallower);
        }
    }

    /// A run with no target shows `reach x 2^-known`, in the order it ranks; one with a target shows what it ranks.
    #[test]
    fn a_run_with_no_target_shows_its_priority_over_two_to_the_aim() {
        let deep = Terms { reach: 0.5, known: 18, target: 268, aim: 268, exit: false };
        let shallow = Terms { reach: 0.125, known: 16, ..deep };
        assert!(!deep.has_target() && deep.depths() == "no target");
        assert_eq!(deep.shown(), (0.5 * 2f64.powi(-18), -18));
        assert_eq!(priority(deep) > priority(shallow), deep.shown().0 > shallow.shown().0);
        let aimed = Terms { target: 14, aim: 17, ..deep };
        assert_eq!(aimed.shown(), (priority(aimed), -1));
        assert_eq!(aimed.depths(), "target 14, aim 17");
        let exit = Terms { exit: true, ..deep };
        assert_eq!(exit.shown(), (priority(exit), 1));
    }

    #[test]
    fn nothing_is_grown_that_no_game_reaches() {
        let terms = |reach| Terms { reach, known: 0, target: 20, aim: 23, exit: true };
        assert_eq!(priority(terms(0.0)), 0.0);
        assert_eq!(priority(terms(f64::NAN)), 0.0);
        assert!(priority(Terms { reach: 1e-3, known: 0, target: 5000, aim: 5000, exit: false }).is_finite());
        assert!(priority(Terms { reach: 1e-3, known: 5000, target: 0, aim: 0, exit: false }) > 0.0);
    }
}
