//! deeptree: a UCI meta-engine that keeps a persistent deep-analysis tree of chess positions.
//!
//! A chess GUI loads deeptree like any UCI engine. Behind that face it keeps a tree of positions in LMDB
//! ([`store`]), answers from it, hands leaf evaluation to a pool of inner UCI engines and keeps growing the tree.

pub mod bench;
pub mod commands;
pub mod config;
pub mod engine;
pub mod interop;
pub mod logger;
pub mod notation;
pub mod score;
pub mod search;
pub mod store;
pub mod uci;
