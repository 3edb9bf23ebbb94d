//! The deep-analysis search: expansion, passes, settling and deepening, over the store and an evaluator.

pub mod alpha;
pub mod analysis;
pub mod cover;
pub mod evaluator;
pub mod host;
pub mod host_bench;
pub mod overlay;
pub mod roots;
pub mod show;
pub mod split;
pub mod tree;
