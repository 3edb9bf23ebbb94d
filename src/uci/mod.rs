//! The UCI face: deeptree as any GUI sees it.
//!
//! From the bottom up (each uses only those before it):
//!
//! - `command`, `message`, `options`, `time`, `depth`: what the GUI sends (parsed), what deeptree sends (typed
//!   messages with `Display`, and the one writer of stdout), the option table, the clock's share of a move, and the
//!   depth a search would reach; `wdl`, the win rates of a score.
//! - `control`: what a search thread is given (its `Context`) and how the session steers it (`Signal`s on a
//!   channel).
//! - `answer`: a search's `Outcome` (tree, direct or fallback) and the tree's move for a position.
//! - `direct`: the direct engine, which searches what the tree does not answer, relayed at no cost.
//! - `growth`: tree growth in `go infinite`, `go ponder` and background analysis.
//! - `policy`: the `go` policy, the tree's move against a search, run on the search thread.
//! - `session`: the protocol loop; owns the state, lends the engines to a search and writes its answer, so that every
//!   `go` gets exactly one `bestmove`.
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
