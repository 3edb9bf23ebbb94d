//! The UCI face: deeptree as any GUI sees it.
//!
//! From the bottom up (each uses only those before it; tests/layers.rs checks it):
//!
//! - `command`, `message`, `options`, `time`, `depth`, `wdl`, `fit`: what the GUI sends (parsed), what deeptree sends
//!   (typed messages with `Display`, and the one writer of stdout), the option table, the clock's share of a move,
//!   the depth a search would reach, the win rates of a score, and the depth model's fit.
//! - `control`: what a search thread is given (its `Context`) and how the session steers it (`Signal`s on a
//!   channel).
//! - `answer`: a search's `Outcome` (tree, direct or fallback) and the tree's move for a position.
//! - `direct`: the direct engine, which searches what the tree does not answer, relayed at no cost.
//! - `growth`: tree growth in `go infinite`, `go ponder`, `ThinkMode tree` and background analysis.
//! - `policy`: the `go` decision, made in one place (`decide`): the tree's move, the direct engine, or growth; it
//!   hands the move to the executors below it (`answer`, `direct`, `growth`), which decide nothing of it.
//! - `learn`: what a finished game teaches the store.
//! - `session`: the protocol loop; owns the state, lends the engines to a search and writes its answer, so that every
//!   `go` gets exactly one `bestmove`.
//! - `bench`, `stop_bench`: benchmarks of the UCI face, which drive a session from outside.
//!
//! stdout carries the protocol only.

mod answer;
pub mod bench;
pub mod command;
mod control;
pub mod depth;
mod direct;
pub mod fit;
mod growth;
mod learn;
pub mod message;
pub mod options;
mod policy;
mod session;
pub mod stop_bench;
pub mod time;
pub mod wdl;

pub use session::run;
