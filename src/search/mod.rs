//! The deep-analysis search: expansion, passes, settling and deepening, over the store and an evaluator.

pub mod alpha;
pub mod analysis;
pub mod evaluator;
pub mod growth;
pub mod host;
pub mod host_bench;
pub mod overlay;
pub mod show;
pub mod split;
pub mod tree;
