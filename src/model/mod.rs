//! The records the tree is made of, below the store and the game: the key of a position ([`key::PositionKey`]) and
//! the node and edge records with their byte layout ([`node`]). No LMDB here: the store reads, seals and writes them.

pub mod key;
pub mod node;
