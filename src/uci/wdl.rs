//! Win rates for the GUI (`UCI_ShowWDL`): the score of a line as the win, draw and loss rates a GUI shows.
//!
//! ```
//! use deeptree::{score::Score, uci::wdl::win_rates};
//! use shakmaty::Chess;
//!
//! let start = Chess::default();
//! let even = win_rates(Score::cp(0), &start);
//! assert_eq!(even.win, even.loss);
//! // Stockfish's scale: +1.00 is an even chance to win, with all the pieces on the board.
//! assert_eq!(win_rates(Score::cp(100), &start).win, 500);
//! assert_eq!(win_rates(Score::cp(-100), &start).loss, 500);
//! assert_eq!(win_rates(Score::mate_in_plies(3), &start).win, 1000);
//! ```
//!
//! An inner engine that gives its own rates (Stockfish with `UCI_ShowWDL`) has them relayed as they are. Everything
//! else, the tree's lines among them, gets them from one model: Stockfish's published win-rate model by material
//! (official-stockfish/WDL_model, the fit its recent releases ship). On Stockfish's scale a score of +1.00 is an even
//! chance to win from any material; the model says how much draw is left around it, as a cubic in the material on
//! the board. The tree's scores are its inner engine's (Stockfish's by default, and other engines score on a similar
//! scale), backed up by minimax: the model is applied to the score the line shows, at the position it is shown for.
//! The store keeps scores, not win rates: one model of the score a line shows is what a minimax of scores can give.

use shakmaty::{Chess, Position, Role};

use crate::{engine::protocol::Wdl, score::Score};

/// The material count the model reads: pawns 1, knights and bishops 3, rooks 5, queens 9, both sides.
pub fn material(position: &Chess) -> u32 {
    let board = position.board();
    [(Role::Pawn, 1), (Role::Knight, 3), (Role::Bishop, 3), (Role::Rook, 5), (Role::Queen, 9)]
        .into_iter()
        .map(|(role, value)| board.by_role(role).count() as u32 * value)
        .sum()
}

/// The model's two parameters at `material`: the score (in the model's internal unit) at which the win rate is one
/// half, and the spread of the logistic around it.
fn parameters(material: u32) -> (f64, f64) {
    const A: [f64; 4] = [-72.32565836, 185.93832038, -144.58862193, 416.44950446];
    const B: [f64; 4] = [83.86794042, -136.06112997, 69.98820887, 47.62901433];
    let m = f64::from(material.clamp(17, 78)) / 58.0;
    let cubic = |c: [f64; 4]| ((c[0] * m + c[1]) * m + c[2]) * m + c[3];
    (cubic(A), cubic(B))
}

/// The win rate in per mille of a side whose score is `cp` centipawns, at `material`.
fn win_per_mille(cp: f64, material: u32) -> u16 {
    let (a, b) = parameters(material);
    // Centipawns are the internal unit scaled so that `a` is 100.
    let internal = cp * a / 100.0;
    (1000.0 / (1.0 + ((a - internal) / b).exp())).round().clamp(0.0, 1000.0) as u16
}

/// The win, draw and loss rates of `score` (from the side to move's point of view) at `position`, where the material
/// is `material` (see [`material`]): a mate is won or lost outright.
pub fn win_rates_at(score: Score, material: u32) -> Wdl {
    if score.is_mate() {
        let won = Wdl { win: 1000, draw: 0, loss: 0 };
        // A mate against the side to move is the other side's win.
        return if score.value() > 0 { won } else { won.flipped() };
    }
    let cp = f64::from(score.as_cp().unwrap_or(0)).clamp(-4000.0, 4000.0);
    let win = win_per_mille(cp, material);
    // The side to move loses where the other side wins: its score, the sign flipped, at the same material.
    let loss = win_per_mille(-cp, material);
    let (win, loss) = if win + loss > 1000 { (win, 1000 - win) } else { (win, loss) };
    Wdl { win, draw: 1000 - win - loss, loss }
}

/// The win, draw and loss rates of `score` (from the side to move's point of view) at `position`.
pub fn win_rates(score: Score, position: &Chess) -> Wdl {
    win_rates_at(score, material(position))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_add_up_rise_with_the_score_and_are_symmetric() {
        for material in [0, 17, 40, 58, 78, 100] {
            let mut last_win = 0;
            for cp in (-1500..=1500).step_by(25) {
                let wdl = win_rates_at(Score::cp(cp), material);
                assert_eq!(u32::from(wdl.win) + u32::from(wdl.draw) + u32::from(wdl.loss), 1000);
                assert!(wdl.win >= last_win, "win rate falls at {cp} cp, material {material}");
                last_win = wdl.win;
                assert_eq!(win_rates_at(Score::cp(-cp), material), wdl.flipped(), "{cp} cp, material {material}");
            }
        }
        assert_eq!(win_rates_at(Score::mated_in_plies(2), 30), Wdl { win: 0, draw: 0, loss: 1000 });
    }

    #[test]
    fn less_material_leaves_more_draws_at_a_small_edge() {
        // At the same small edge an endgame is drawn more often than a middlegame is (Stockfish's fit).
        let middlegame = win_rates_at(Score::cp(50), 70);
        let endgame = win_rates_at(Score::cp(50), 20);
        assert!(endgame.draw > middlegame.draw && endgame.win < middlegame.win, "{endgame} against {middlegame}");
        assert_eq!(material(&Chess::default()), 78);
    }
}
