//! Growth for a clock: the depth the inner engine reaches in a move of it, read from the depth model a UCI session
//! fits (stored in the tree's store), or from a few searches timed at that clock where the store has none yet.
//!
//! ```
//! use deeptree::uci::{depth::DepthModel, fit::{Clock, targets}};
//!
//! let clock: Clock = "5+0.05".parse()?;
//! assert_eq!(clock.to_string(), "5+0.05");
//! // A Stockfish-like engine on one thread before any fit: one depth for every phase (a fit tells them apart).
//! let by_phase = targets(&DepthModel::default(), &clock, 0);
//! assert!(by_phase.iter().all(|&depth| depth == by_phase[0] && (10..20).contains(&depth)));
//! // TreeDepthMargin lowers the target as it lowers the answer rule's yardstick.
//! assert_eq!(targets(&DepthModel::default(), &clock, 2)[0], by_phase[0] - 2);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use std::{
    fmt,
    str::FromStr,
    time::{Duration, Instant},
};

use crossbeam_channel::RecvTimeoutError;

use shakmaty::{Chess, Position};

use super::{
    command::Go,
    depth::{DepthModel, PHASES_IN_ORDER, Phase},
    time::share,
};
use crate::engine::{EnginePool, EnginePosition, EvalRequest, JobOutcome, Limit};

/// A game clock: seconds for the game (or for `moves` moves), and seconds added each move.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clock {
    pub seconds: f64,
    pub increment: f64,
    /// Moves to the time control (`40/60+0.5`); `None`: the whole game.
    pub moves: Option<u32>,
}

/// A clock that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}': give a clock as SECONDS+INCREMENT (5+0.05), or MOVES/SECONDS+INCREMENT (40/60+0.5)")]
pub struct ClockError(String);

impl FromStr for Clock {
    type Err = ClockError;

    fn from_str(text: &str) -> Result<Clock, ClockError> {
        let error = || ClockError(crate::game::printable(text).chars().take(40).collect());
        let (moves, rest) = match text.trim().split_once('/') {
            Some((moves, rest)) => (Some(moves.trim().parse::<u32>().map_err(|_| error())?), rest),
            None => (None, text.trim()),
        };
        let (seconds, increment) = rest.split_once('+').unwrap_or((rest, "0"));
        // `-0` is read as 0 (`abs`): one clock, one name in the store.
        let number =
            |t: &str| t.trim().parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0 && *v < 1e7).map(f64::abs);
        let (seconds, increment) = (number(seconds).ok_or_else(error)?, number(increment).ok_or_else(error)?);
        if seconds + increment <= 0.0 || moves == Some(0) {
            return Err(error());
        }
        Ok(Clock { seconds, increment, moves })
    }
}

impl fmt::Display for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(moves) = self.moves {
            write!(f, "{moves}/")?;
        }
        write!(f, "{}+{}", self.seconds, self.increment)
    }
}

impl Clock {
    /// The `go` of a game's first move at this clock.
    pub fn go(&self) -> Go {
        let ms = |s: f64| (s * 1000.0).round() as u64;
        Go {
            wtime: Some(ms(self.seconds)),
            btime: Some(ms(self.seconds)),
            winc: Some(ms(self.increment)),
            binc: Some(ms(self.increment)),
            movestogo: self.moves.map(u64::from),
            ..Go::default()
        }
    }

    /// A move's share of it, as a session estimates it (`crate::uci::time::share`).
    pub fn share(&self) -> Duration {
        share(&self.go(), true).unwrap_or(Duration::from_millis(1))
    }

    /// The limit of a search of the game's first move at this clock, for the engine's own time management.
    fn limit(&self) -> Limit {
        let go = self.go();
        Limit::Clock {
            wtime: go.wtime.unwrap_or(0),
            btime: go.btime.unwrap_or(0),
            winc: go.winc.unwrap_or(0),
            binc: go.binc.unwrap_or(0),
            movestogo: go.movestogo,
        }
    }
}

/// The target depth of growth for `clock`, by phase (27 men or more, 21 to 26, 15 to 20, 9 to 14, 8 or fewer): the
/// depth `model` says a search of a move of it reaches, less `margin` (TreeDepthMargin), rounded up: the least
/// combined depth at which the `go` policy answers from the tree (docs/design.md §7.1).
pub fn targets(model: &DepthModel, clock: &Clock, margin: u8) -> [u32; 5] {
    let time = model.expected_time(clock.share());
    PHASES_IN_ORDER.map(|phase| {
        let depth = model.depth_for_time(phase, time) - f64::from(margin);
        depth.ceil().clamp(1.0, 200.0) as u32
    })
}

/// The phase's place in [`targets`] for `men` on the board.
pub fn phase_index(men: usize) -> usize {
    PHASES_IN_ORDER.iter().position(|p| *p == Phase::of_men(men)).unwrap_or(0)
}

/// What timing searches found.
#[derive(Debug, Clone)]
pub struct Timed {
    pub model: DepthModel,
    /// Searches timed, and what each reached: depth, nodes, seconds.
    pub searches: Vec<(u32, u64, f64)>,
}

/// How often [`time_searches`] looks at its stop flag and deadline while a search runs.
const TIMING_LOOK: Duration = Duration::from_millis(100);

/// Times one search of each of `positions` (at most 8) at `clock` on the pool's first engine, as a game's first move
/// would be searched (the engine's own time management), and fits a depth model to them.
///
/// `ended` (Ctrl-C, a termination signal, the run's time budget spent) ends the timing where it stands: the search
/// under way is cancelled, and the model is fitted to the searches done (none: [`Timed::searches`] empty, the
/// default model). A search that outlives the whole clock and a minute more is an error: no move of the clock can
/// take that long. (A hung engine is found sooner, by its own watchdog.)
pub fn time_searches(
    pool: &EnginePool,
    positions: &[Chess],
    clock: &Clock,
    ended: &dyn Fn() -> bool,
) -> Result<Timed, String> {
    let mut model = DepthModel::default();
    let mut searches = Vec::new();
    let longest = Duration::try_from_secs_f64(clock.seconds + 60.0).unwrap_or(Duration::MAX);
    for (id, position) in positions.iter().take(8).enumerate() {
        let id = id as u64;
        if ended() {
            break;
        }
        let at = EnginePosition::new(position.clone(), Vec::new()).map_err(|e| e.to_string())?;
        pool.submit(id, EvalRequest::new(at, clock.limit())).map_err(|e| e.to_string())?;
        let asked = Instant::now();
        let result = loop {
            if ended() {
                // Not waited for: the engine is stopped, and killed with the pool if it does not answer.
                pool.cancel(id);
                return Ok(Timed { model, searches });
            }
            match pool.results().recv_timeout(TIMING_LOOK) {
                Ok(result) if result.id == id => break result,
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) if asked.elapsed() < longest => continue,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "the inner engine gave no answer to a search timed at {clock} in {} s",
                        longest.as_secs()
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("the inner engines' pool ended during a timed search".to_owned());
                }
            }
        };
        let evaluation = match result.outcome {
            JobOutcome::Done(evaluation) => evaluation,
            JobOutcome::Failed(e) => return Err(format!("a timed search failed: {e}")),
            JobOutcome::Cancelled => return Err("a timed search was cancelled".to_owned()),
        };
        let time = evaluation.timing.engine_time();
        let phase = Phase::of(position);
        model.record(phase, evaluation.nodes, time, evaluation.depth());
        model.record_clock(time, clock.share());
        searches.push((evaluation.depth(), evaluation.nodes, time.as_secs_f64()));
    }
    Ok(Timed { model, searches })
}

/// The positions of `positions` with a legal move: those a search can time.
pub fn searchable(positions: impl IntoIterator<Item = Chess>) -> Vec<Chess> {
    positions.into_iter().filter(|p| !p.legal_moves().is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_read_and_write_back() {
        for (text, seconds, increment, moves) in
            [("5+0.05", 5.0, 0.05, None), ("40/60+0.5", 60.0, 0.5, Some(40)), ("120", 120.0, 0.0, None)]
        {
            let clock: Clock = text.parse().unwrap();
            assert_eq!((clock.seconds, clock.increment, clock.moves), (seconds, increment, moves), "{text}");
            let again: Clock = clock.to_string().parse().unwrap();
            assert_eq!(again, clock);
        }
        assert_eq!("-0+5".parse::<Clock>().unwrap().to_string(), "0+5");
        for bad in ["", "+", "5+x", "0+0", "-5+1", "0/60+1", "inf+1", "5+0.05+1"] {
            assert!(bad.parse::<Clock>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_longer_clock_asks_for_more_depth() {
        let model = DepthModel::default();
        let fast = targets(&model, &"2+0.02".parse().unwrap(), 0);
        let slow = targets(&model, &"60+0.6".parse().unwrap(), 0);
        assert!(fast.iter().zip(&slow).all(|(f, s)| f < s), "{fast:?} {slow:?}");
        assert_eq!(phase_index(32), 0);
        assert_eq!(phase_index(5), 4);
    }
}
