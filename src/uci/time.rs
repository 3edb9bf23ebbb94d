//! The share of the clock a move usually gets: the yardstick for how long the inner engine will think; and the time
//! the direct engine keeps back for communication ([`Overhead`]).
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
use crate::engine::{EngineIdentity, protocol::OptionKind};

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

/// The name under which engines (Stockfish among them) take the time they keep back for communication.
const MOVE_OVERHEAD: &str = "Move Overhead";

/// What the direct engine should keep back for communication: the GUI's value (or the engine's default) plus the
/// relay's own latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overhead {
    /// `Move Overhead` as the GUI set it; `None`: the engine's default.
    pub gui_ms: Option<i64>,
    /// The relay's measured latency, rounded up to whole milliseconds.
    pub relay_ms: u64,
}

impl Overhead {
    /// The `setoption` for an engine that declares `Move Overhead` as a spin; `None` for any other engine.
    pub fn option(&self, identity: &EngineIdentity) -> Option<(String, String)> {
        let option = identity.option(MOVE_OVERHEAD)?;
        let OptionKind::Spin { default, min, max } = option.kind else { return None };
        let relay = i64::try_from(self.relay_ms).unwrap_or(i64::MAX);
        // An engine may declare its range upside down (min over max): clamped as `EngineOption::checked_value` does,
        // instead of `clamp`'s panic.
        let value = self.gui_ms.unwrap_or(default).saturating_add(relay).clamp(min, max.max(min));
        Some((option.name.clone(), value.to_string()))
    }

    /// Whether `name` is the option this plan sets.
    pub fn is_option(name: &str) -> bool {
        name.eq_ignore_ascii_case(MOVE_OVERHEAD)
    }
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

    #[test]
    fn the_overhead_adds_the_relay_to_the_guis_value_or_the_engines_default() {
        let identity = EngineIdentity {
            name: "x".into(),
            author: None,
            options: vec![crate::engine::protocol::EngineOption {
                name: "Move Overhead".into(),
                kind: OptionKind::Spin { default: 10, min: 0, max: 5000 },
            }],
            command: "x".into(),
        };
        let plan = Overhead { gui_ms: None, relay_ms: 1 };
        assert_eq!(plan.option(&identity), Some(("Move Overhead".into(), "11".into())));
        let plan = Overhead { gui_ms: Some(100), relay_ms: 2 };
        assert_eq!(plan.option(&identity), Some(("Move Overhead".into(), "102".into())));
        let plan = Overhead { gui_ms: Some(4999), relay_ms: 2 };
        assert_eq!(plan.option(&identity), Some(("Move Overhead".into(), "5000".into())));
        let bare = EngineIdentity { options: Vec::new(), ..identity.clone() };
        assert_eq!(plan.option(&bare), None);
        // An engine that declares its range upside down (min 100, max 0) gets its min, and no panic.
        let upside_down = EngineIdentity {
            options: vec![crate::engine::protocol::EngineOption {
                name: "Move Overhead".into(),
                kind: OptionKind::Spin { default: 10, min: 100, max: 0 },
            }],
            ..identity
        };
        assert_eq!(plan.option(&upside_down), Some(("Move Overhead".into(), "100".into())));
    }
}
