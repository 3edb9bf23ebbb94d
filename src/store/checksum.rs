//! The checksum every stored value carries from schema 5 on: a damaged record is found when it is read, never shown.
//!
//! ```
//! use deeptree::store::checksum::{self, Mismatch, Table};
//!
//! let key = 0x463b_9618_1691_fc9cu64.to_be_bytes();
//! let mut value = b"a record".to_vec();
//! checksum::seal(Table::Nodes, &key, &mut value);
//! assert_eq!(checksum::open(Table::Nodes, &key, &value), Ok(&b"a record"[..]));
//! // One bit flipped, the same bytes under another key or in another table: all caught.
//! let mut flipped = value.clone();
//! flipped[3] ^= 0x10;
//! assert!(matches!(checksum::open(Table::Nodes, &key, &flipped), Err(Mismatch::Differs { .. })));
//! assert!(checksum::open(Table::Nodes, &[0; 8], &value).is_err());
//! assert!(checksum::open(Table::LinkPages, &key, &value).is_err());
//! ```
//!
//! # Stability
//!
//! A sealed value is its body (the record as its own codec writes it) followed by 4 bytes, big-endian: the CRC-32C
//! (Castagnoli, the `crc32c` crate) of the table's tag byte, the record's key and the body, in that order. The tags:
//! `n` for `nodes`, `l` for `link_pages`, `m` for `meta`, `c` for the claims. Covering the key and the table catches a
//! value moved under another key or into another database, not only changed bytes; CRC-32C finds every error of up
//! to 3 bits in a record and every burst of up to 32 bits, and misses other damage once in 2^32.

/// The databases whose values are sealed, each with its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Nodes,
    LinkPages,
    Meta,
    Claims,
}

impl Table {
    fn tag(self) -> u8 {
        match self {
            Table::Nodes => b'n',
            Table::LinkPages => b'l',
            Table::Meta => b'm',
            Table::Claims => b'c',
        }
    }
}

/// Bytes a seal adds to a value.
pub const SIZE: usize = 4;

/// Why a sealed value does not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// The stored checksum is not the one of the key and bytes: they were changed after they were written.
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    Differs { stored: u32, computed: u32 },
    /// The value is too short to hold a checksum.
    #[error("{len} bytes: too short to hold its checksum")]
    Short { len: usize },
    /// The value's length, as LMDB read it from its node, runs past the store's map: the node is damaged.
    #[error("{len} bytes: its length runs past the store's map")]
    PastMap { len: usize },
}

fn crc(table: Table, key: &[u8], body: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[table.tag()]), key);
    crc32c::crc32c_append(crc, body)
}

/// Appends the checksum of `key` and the whole of `value` (the body) to `value`.
pub fn seal(table: Table, key: &[u8], value: &mut Vec<u8>) {
    let sum = crc(table, key, value);
    value.extend_from_slice(&sum.to_be_bytes());
}

/// A sealed copy of `body`.
pub fn sealed(table: Table, key: &[u8], body: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(body.len() + SIZE);
    value.extend_from_slice(body);
    seal(table, key, &mut value);
    value
}

/// The body of a sealed value, once its checksum holds for `key`.
pub fn open<'v>(table: Table, key: &[u8], value: &'v [u8]) -> Result<&'v [u8], Mismatch> {
    if super::fault::runs_past_map(value) {
        return Err(Mismatch::PastMap { len: value.len() });
    }
    let Some(split) = value.len().checked_sub(SIZE) else { return Err(Mismatch::Short { len: value.len() }) };
    let (body, stored) = value.split_at(split);
    let stored = u32::from_be_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let computed = crc(table, key, body);
    if stored == computed { Ok(body) } else { Err(Mismatch::Differs { stored, computed }) }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The check value of CRC-32C: the one every implementation gives for "123456789".
    #[test]
    fn the_crate_computes_crc32c() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn a_value_too_short_for_its_checksum_is_refused() {
        assert_eq!(open(Table::Meta, b"engine", &[1, 2, 3]), Err(Mismatch::Short { len: 3 }));
    }

    proptest! {
        /// A sealed value opens to its body; any one flipped byte, another key or another table is a mismatch.
        #[test]
        fn any_changed_byte_key_or_table_is_caught(
            body in prop::collection::vec(any::<u8>(), 0..300),
            key in any::<u64>(),
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
            other in any::<u64>(),
        ) {
            let key = key.to_be_bytes();
            let value = sealed(Table::Nodes, &key, &body);
            prop_assert_eq!(open(Table::Nodes, &key, &value), Ok(&body[..]));
            let mut damaged = value.clone();
            damaged[at.index(value.len())] ^= flip;
            prop_assert!(open(Table::Nodes, &key, &damaged).is_err());
            if other.to_be_bytes() != key {
                prop_assert!(open(Table::Nodes, &other.to_be_bytes(), &value).is_err());
            }
            prop_assert!(open(Table::LinkPages, &key, &value).is_err());
        }
    }
}
