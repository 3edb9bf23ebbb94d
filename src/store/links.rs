//! Parent links: for each child position, the keys of every node with an edge into it, packed in one record.
//!
//! ```
//! use deeptree::store::{key::PositionKey, links};
//!
//! let (a, b) = (PositionKey::from_bytes([0, 0, 0, 0, 0, 0, 0, 9]), PositionKey::from_bytes([1; 8]));
//! let mut list = links::encode(&[b]);
//! assert!(links::insert(&mut list, a)?);
//! assert!(!links::insert(&mut list, b)?, "a link is held once");
//! assert_eq!(links::decode(&list)?, vec![a, b]);
//! # Ok::<_, deeptree::store::node::DecodeError>(())
//! ```
//!
//! Format (schema 3 and later; stable): the parents' keys, 8 bytes each, big-endian, in ascending order, without
//! repeats; nothing else. A child has one record in the `links` database, keyed by its own key. Schema 2 and earlier
//! kept one LMDB entry per link (the `parents` database, sorted duplicates); a store of those schemas is converted
//! when it is opened.

use super::{key::PositionKey, node::DecodeError};

/// The record of `parents` (any order, repeats allowed).
pub fn encode(parents: &[PositionKey]) -> Vec<u8> {
    let mut sorted = parents.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.iter().flat_map(|key| key.to_bytes()).collect()
}

/// The parents a record holds, in ascending order.
pub fn decode(bytes: &[u8]) -> Result<Vec<PositionKey>, DecodeError> {
    check(bytes)?;
    Ok(bytes.chunks_exact(PositionKey::SIZE).filter_map(PositionKey::from_slice).collect())
}

/// How many parents a record holds.
pub fn count(bytes: &[u8]) -> Result<u64, DecodeError> {
    check(bytes)?;
    Ok((bytes.len() / PositionKey::SIZE) as u64)
}

/// Adds `parent` to a record in place, keeping it sorted; false when it was there already.
pub fn insert(record: &mut Vec<u8>, parent: PositionKey) -> Result<bool, DecodeError> {
    check(record)?;
    let key = parent.to_bytes();
    let entries = record.len() / PositionKey::SIZE;
    // Binary search over the fixed-size entries: byte order is key order.
    let (mut low, mut high) = (0, entries);
    while low < high {
        let mid = (low + high) / 2;
        match record[mid * PositionKey::SIZE..(mid + 1) * PositionKey::SIZE].cmp(&key[..]) {
            std::cmp::Ordering::Less => low = mid + 1,
            std::cmp::Ordering::Greater => high = mid,
            std::cmp::Ordering::Equal => return Ok(false),
        }
    }
    let at = low * PositionKey::SIZE;
    record.splice(at..at, key);
    Ok(true)
}

fn check(bytes: &[u8]) -> Result<(), DecodeError> {
    if !bytes.len().is_multiple_of(PositionKey::SIZE) {
        return Err(DecodeError::Corrupt { reason: "parent list is not a whole number of keys", offset: bytes.len() });
    }
    if bytes.chunks_exact(PositionKey::SIZE).zip(bytes.chunks_exact(PositionKey::SIZE).skip(1)).any(|(a, b)| a >= b) {
        return Err(DecodeError::Corrupt { reason: "parent list out of order", offset: 0 });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn inserting_in_any_order_gives_the_sorted_set(keys in prop::collection::vec(any::<u64>(), 0..40)) {
            let mut record = Vec::new();
            for key in &keys {
                insert(&mut record, PositionKey::from_bytes(key.to_be_bytes())).unwrap();
            }
            let mut expected: Vec<u64> = keys.clone();
            expected.sort_unstable();
            expected.dedup();
            let expected: Vec<PositionKey> =
                expected.into_iter().map(|k| PositionKey::from_bytes(k.to_be_bytes())).collect();
            prop_assert_eq!(decode(&record).unwrap(), expected.clone());
            prop_assert_eq!(record, encode(&expected));
        }
    }

    #[test]
    fn damaged_records_are_errors() {
        assert!(decode(&[0; 7]).is_err());
        let (a, b) = (PositionKey::from_bytes([1; 8]), PositionKey::from_bytes([2; 8]));
        let mut reversed = b.to_bytes().to_vec();
        reversed.extend(a.to_bytes());
        assert!(decode(&reversed).is_err());
        assert!(count(&reversed).is_err());
    }
}
