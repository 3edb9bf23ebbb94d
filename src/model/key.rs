//! Position keys: shakmaty's `Zobrist64` with `EnPassantMode::Legal`, the Polyglot book key.
//!
//! ```
//! use deeptree::model::key::PositionKey;
//! use shakmaty::Chess;
//!
//! let key = PositionKey::of(&Chess::default());
//! assert_eq!(key, PositionKey(0x463b_9618_1691_fc9c)); // the Polyglot key of the start position
//! assert_eq!(PositionKey::from_bytes(key.to_bytes()), key);
//! ```
//!
//! # Stability
//!
//! Keys are stored big-endian, so LMDB's byte order is numeric order (and Polyglot order). shakmaty promises that
//! its Zobrist64 values are stable.

use std::{
    collections::{HashMap, HashSet},
    fmt,
    hash::{BuildHasherDefault, Hasher},
};

use shakmaty::{Chess, EnPassantMode, Position, zobrist::Zobrist64};

/// The key of one position in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PositionKey(pub u64);

impl PositionKey {
    /// Bytes in the persisted form.
    pub const SIZE: usize = 8;

    pub fn of(pos: &Chess) -> PositionKey {
        PositionKey(pos.zobrist_hash::<Zobrist64>(EnPassantMode::Legal).0)
    }

    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        self.0.to_be_bytes()
    }

    pub fn from_bytes(bytes: [u8; Self::SIZE]) -> PositionKey {
        PositionKey(u64::from_be_bytes(bytes))
    }

    /// Reads a key from a slice of exactly [`Self::SIZE`] bytes.
    pub fn from_slice(bytes: &[u8]) -> Option<PositionKey> {
        Some(PositionKey::from_bytes(bytes.try_into().ok()?))
    }
}

impl fmt::Display for PositionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Hashes a position key by taking its value: Zobrist keys are already uniformly spread.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// A hash map keyed by position.
pub type KeyMap<V> = HashMap<PositionKey, V, BuildHasherDefault<KeyHasher>>;
/// A hash set of positions.
pub type KeySet = HashSet<PositionKey, BuildHasherDefault<KeyHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// LMDB compares keys as bytes: byte order must be numeric order.
        #[test]
        fn byte_order_is_numeric_order(a: u64, b: u64) {
            let (ka, kb) = (PositionKey(a), PositionKey(b));
            prop_assert_eq!(ka.to_bytes().cmp(&kb.to_bytes()), ka.cmp(&kb));
            prop_assert_eq!(PositionKey::from_bytes(ka.to_bytes()), ka);
        }
    }
}
