//! The UCI face: deeptree as any GUI sees it.
//!
//! - `session`: the protocol loop and the options; reads commands on one thread and never blocks on a search.
//! - `policy`: the `go` policy, the tree's move against a search (`depth` estimates what a search would reach).
//! - `direct`: the direct engine, which searches what the tree does not answer, relayed at no cost.
//! - `growth`: tree growth in `go infinite`, `go ponder` and background analysis.
//!
//! stdout carries the protocol only.

pub mod bench;
pub mod command;
pub mod depth;
mod direct;
mod growth;
pub mod options;
mod policy;
mod session;
pub mod time;
pub mod tree;

pub use session::run;
