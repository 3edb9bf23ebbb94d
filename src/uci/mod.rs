//! The UCI face: deeptree as any GUI sees it.
//!
//! The session reads commands on one thread and never blocks on a search: `go` starts a search thread; `stop` and
//! `ponderhit` reach it through flags; `isready` is answered at once. stdout carries the protocol only.

pub mod command;
pub mod options;
mod session;
pub mod time;
pub mod tree;

pub use session::run;
