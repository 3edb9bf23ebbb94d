//! The share of the clock a move usually gets: the yardstick for how long the inner engine will think.
//!
//! deeptree does not manage the clock itself (the inner engine gets the GUI's clocks); this share, scaled by what
//! this game's engine has really spent against it ([`super::depth::DepthModel::expected_time`]), estimates how
//! deep a search of this move would go.
//!
//! ```
//! use deeptree::uci::{command::Go, time::share};
//! use std::time::Duration;
//!
//! let go = Go { wtime: Some(60_000), btime: Some(60_000), winc: Some(1_000), binc: Some(1_000), ..Go::default() };
//! let think = share(&go, true).unwrap();
//! assert!(think > Duration::from_millis(1_000) && think < Duration::from_millis(24_000));
//! ```

use std::time::Duration;

use super::command::Go;

/// This move's share of the clock, or `None` when `go` gives no clock and no move time.
pub fn share(go: &Go, white_to_move: bool) -> Option<Duration> {
    if let Some(movetime) = go.movetime {
        return Some(Duration::from_millis(movetime.max(1)));
    }
    let (time, inc) = if white_to_move { (go.wtime?, go.winc.unwrap_or(0)) } else { (go.btime?, go.binc.unwrap_or(0)) };
    let moves_left = go.movestogo.map_or(30, |m| m.clamp(1, 60) + 1);
    let share = (time / moves_left).saturating_add(inc.saturating_mul(3) / 4);
    // Never more than 40% of the clock (80% with one move to the control, where the increment follows).
    let cap = if go.movestogo == Some(1) { time / 5 * 4 } else { time / 5 * 2 };
    Some(Duration::from_millis(share.min(cap).max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the clock, the share leaves most of the clock.
        #[test]
        fn never_spends_the_clock(time in 0u64..u64::MAX, inc in 0u64..u64::MAX, mtg in prop::option::of(0u64..80)) {
            let go = Go { wtime: Some(time), winc: Some(inc), movestogo: mtg, ..Go::default() };
            let think = share(&go, true).unwrap().as_millis() as u64;
            prop_assert!(think <= (time / 5 * 4).max(1), "{think} of {time}");
        }
    }
}
