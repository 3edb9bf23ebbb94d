//! Parent links: for each child position, the keys of every node with an edge into it, held in pages of many
//! children each.
//!
//! ```
//! use deeptree::store::{key::PositionKey, links};
//!
//! let key = |n: u8| PositionKey::from_bytes([n; 8]);
//! let mut page = links::encode_page(&[(key(5), key(1))]);
//! assert!(links::insert(&mut page, key(3), key(2))?);
//! assert!(links::insert(&mut page, key(5), key(0))?);
//! assert!(!links::insert(&mut page, key(5), key(1))?, "a link is held once");
//! assert_eq!(links::parents_in(&page, key(5))?, vec![key(0), key(1)]);
//! assert_eq!(links::parents_in(&page, key(4))?, vec![]);
//! # Ok::<_, deeptree::store::node::DecodeError>(())
//! ```
//!
//! # Stability
//!
//! Format (schema 4 and later): the `link_pages` database maps a page key (8 bytes, big-endian) to a page. A page is
//! a run of 16-byte entries, each the child's key then the parent's key, both big-endian, in ascending order without
//! repeats; nothing else. A page holds the links of every child from its own key (included) to the next page's key
//! (excluded); the first page's key is 0. A page that grows past [`PAGE_LINKS`] entries is split where one child's
//! links end and the next child's begin, so one child's links are never split across pages (a child with more
//! parents than that has a page to itself).
//!
//! Schema 5 stores every page sealed ([`write_page`], [`read_page`]): the page, then its checksum for its key (see
//! [`checksum`]), 4 bytes more; a full page of 62 links still fits four to an LMDB page.
//!
//! One LMDB entry costs about 18 bytes beside its key and value, so a link held alone cost 26 bytes of its own or
//! more; in a page it costs its 16. Schema 3 kept one record per child in `links` (its parents' keys, 8 bytes each,
//! see [`decode_list`]); schema 2 and earlier one LMDB entry per link. Both are converted when a store is opened.

use super::{
    checksum::{self, Table},
    key::PositionKey,
    node::Damage,
    node::DecodeError,
};

/// Most entries of a page before it is split: 992 bytes, so that four full pages with their keys and LMDB's
/// per-entry overhead fill one 4 KiB LMDB page (64 entries left room for three). Pages written with more (64 before
/// this limit) read as they are.
pub const PAGE_LINKS: usize = 62;

/// Bytes of one entry: the child's key and the parent's.
pub const ENTRY: usize = 2 * PositionKey::SIZE;

/// The page holding `links` (child, parent), in any order, repeats allowed.
pub fn encode_page(links: &[(PositionKey, PositionKey)]) -> Vec<u8> {
    let mut sorted = links.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.iter().flat_map(|(child, parent)| [child.to_bytes(), parent.to_bytes()]).flatten().collect()
}

/// The page stored at `key` (schema 5): its checksum must hold for the key and bytes, and the page be whole and in
/// order.
pub fn read_page(key: PositionKey, value: &[u8]) -> Result<&[u8], Damage> {
    let page = checksum::open(Table::LinkPages, &key.to_bytes(), value)?;
    check(page)?;
    Ok(page)
}

/// A page as schema 5 stores it at `key` (see [`read_page`]).
pub fn write_page(key: PositionKey, page: &[u8]) -> Vec<u8> {
    checksum::sealed(Table::LinkPages, &key.to_bytes(), page)
}

/// The links a page holds, (child, parent), in ascending order.
pub fn decode_page(page: &[u8]) -> Result<Vec<(PositionKey, PositionKey)>, DecodeError> {
    check(page)?;
    Ok(page.chunks_exact(ENTRY).map(entry).collect())
}

/// How many links a page holds.
pub fn count(page: &[u8]) -> Result<u64, DecodeError> {
    check(page)?;
    Ok((page.len() / ENTRY) as u64)
}

/// The parents of `child` in a page, in ascending order (none when the page holds no link of it).
pub fn parents_in(page: &[u8], child: PositionKey) -> Result<Vec<PositionKey>, DecodeError> {
    check(page)?;
    let child = child.to_bytes();
    // The first entry of `child`: byte order is (child, parent) order.
    let first = partition(page, |e| e[..PositionKey::SIZE] < child[..]);
    Ok(page[first * ENTRY..]
        .chunks_exact(ENTRY)
        .take_while(|e| e[..PositionKey::SIZE] == child[..])
        .map(|e| entry(e).1)
        .collect())
}

/// Adds the link `child` <- `parent` to a page in place, keeping it sorted; false when it was there already.
pub fn insert(page: &mut Vec<u8>, child: PositionKey, parent: PositionKey) -> Result<bool, DecodeError> {
    check(page)?;
    Ok(insert_checked(page, child, parent))
}

/// [`insert`] into a page already checked.
pub(crate) fn insert_checked(page: &mut Vec<u8>, child: PositionKey, parent: PositionKey) -> bool {
    let mut new = [0u8; ENTRY];
    new[..PositionKey::SIZE].copy_from_slice(&child.to_bytes());
    new[PositionKey::SIZE..].copy_from_slice(&parent.to_bytes());
    let at = partition(page, |e| e < &new[..]);
    if page.get(at * ENTRY..(at + 1) * ENTRY) == Some(&new[..]) {
        return false;
    }
    page.splice(at * ENTRY..at * ENTRY, new);
    true
}

/// Removes the link `child` <- `parent` from a page already checked, in place; false when it was not there.
pub(crate) fn remove_checked(page: &mut Vec<u8>, child: PositionKey, parent: PositionKey) -> bool {
    let mut gone = [0u8; ENTRY];
    gone[..PositionKey::SIZE].copy_from_slice(&child.to_bytes());
    gone[PositionKey::SIZE..].copy_from_slice(&parent.to_bytes());
    let at = partition(page, |e| e < &gone[..]);
    if page.get(at * ENTRY..(at + 1) * ENTRY) != Some(&gone[..]) {
        return false;
    }
    page.drain(at * ENTRY..(at + 1) * ENTRY);
    true
}

/// A page cut into pages of at most [`PAGE_LINKS`] entries of about equal size, each cut where one child's links
/// end; with the key of each piece after the first (its first child's). A page within the limit comes back whole.
pub fn split(page: &[u8]) -> Vec<(Option<PositionKey>, &[u8])> {
    let entries = page.len() / ENTRY;
    if entries <= PAGE_LINKS {
        return vec![(None, page)];
    }
    let pieces = entries.div_ceil(PAGE_LINKS);
    let size = entries.div_ceil(pieces);
    let child = |i: usize| &page[i * ENTRY..i * ENTRY + PositionKey::SIZE];
    let mut out = Vec::with_capacity(pieces);
    let mut start = 0;
    while start < entries {
        let target = (start + size).min(entries);
        // Back to where a child's links begin; forward past the end of a child whose links alone fill the piece.
        let mut end = target;
        while end > start && end < entries && child(end) == child(end - 1) {
            end -= 1;
        }
        if end == start {
            end = target;
            while end < entries && child(end) == child(end - 1) {
                end += 1;
            }
        }
        let key = (start > 0).then(|| entry(&page[start * ENTRY..(start + 1) * ENTRY]).0);
        out.push((key, &page[start * ENTRY..end * ENTRY]));
        start = end;
    }
    out
}

/// The parents of one child as schema 3 held them (its own record: their keys, ascending, 8 bytes each).
pub fn decode_list(bytes: &[u8]) -> Result<Vec<PositionKey>, DecodeError> {
    if !bytes.len().is_multiple_of(PositionKey::SIZE) {
        return Err(DecodeError::Corrupt { reason: "parent list is not a whole number of keys", offset: bytes.len() });
    }
    Ok(bytes.chunks_exact(PositionKey::SIZE).filter_map(PositionKey::from_slice).collect())
}

fn entry(bytes: &[u8]) -> (PositionKey, PositionKey) {
    let key = |range: std::ops::Range<usize>| {
        let mut out = [0u8; PositionKey::SIZE];
        out.copy_from_slice(&bytes[range]);
        PositionKey::from_bytes(out)
    };
    (key(0..PositionKey::SIZE), key(PositionKey::SIZE..ENTRY))
}

/// The number of leading entries for which `before` holds (it must hold for a prefix of the page).
fn partition(page: &[u8], before: impl Fn(&[u8]) -> bool) -> usize {
    let (mut low, mut high) = (0, page.len() / ENTRY);
    while low < high {
        let mid = (low + high) / 2;
        if before(&page[mid * ENTRY..(mid + 1) * ENTRY]) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

/// Checks that a page is whole and in order.
pub(crate) fn check_page(page: &[u8]) -> Result<(), DecodeError> {
    check(page)
}

fn check(page: &[u8]) -> Result<(), DecodeError> {
    if !page.len().is_multiple_of(ENTRY) {
        return Err(DecodeError::Corrupt { reason: "link page is not a whole number of links", offset: page.len() });
    }
    if page.chunks_exact(ENTRY).zip(page.chunks_exact(ENTRY).skip(1)).any(|(a, b)| a >= b) {
        return Err(DecodeError::Corrupt { reason: "link page out of order", offset: 0 });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn key(n: u64) -> PositionKey {
        PositionKey::from_bytes(n.to_be_bytes())
    }

    proptest! {
        /// Links inserted in any order give the sorted set, and each child's parents are found in it.
        #[test]
        fn a_page_holds_the_links_inserted_in_any_order(
            links in prop::collection::vec((0u64..40, any::<u64>()), 0..120),
        ) {
            let mut page = Vec::new();
            let mut model: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
            for (child, parent) in &links {
                let fresh = !model.get(child).is_some_and(|p| p.contains(parent));
                prop_assert_eq!(insert(&mut page, key(*child), key(*parent)).unwrap(), fresh);
                model.entry(*child).or_default().push(*parent);
            }
            let pairs: Vec<(PositionKey, PositionKey)> = links.iter().map(|(c, p)| (key(*c), key(*p))).collect();
            prop_assert_eq!(&page, &encode_page(&pairs));
            for child in 0..41 {
                let mut expected = model.get(&child).cloned().unwrap_or_default();
                expected.sort_unstable();
                expected.dedup();
                let expected: Vec<PositionKey> = expected.into_iter().map(key).collect();
                prop_assert_eq!(parents_in(&page, key(child)).unwrap(), expected);
            }
        }

        /// A split keeps every link once, in order; no piece is over the limit unless one child fills it; no child's
        /// links are cut; each piece after the first is keyed by its first child.
        #[test]
        fn a_split_keeps_each_childs_links_together(
            links in prop::collection::vec((0u64..300, any::<u64>()), 0..600),
            crowded in 0u64..300,
            crowd in 0usize..150,
        ) {
            let mut pairs: Vec<(PositionKey, PositionKey)> = links.iter().map(|(c, p)| (key(*c), key(*p))).collect();
            pairs.extend((0..crowd as u64).map(|p| (key(crowded), key(p))));
            let page = encode_page(&pairs);
            let pieces = split(&page);
            prop_assert_eq!(pieces.concat_bytes(), page.clone());
            for (i, (first, piece)) in pieces.iter().enumerate() {
                let entries = decode_page(piece).unwrap();
                prop_assert!(!entries.is_empty() || page.is_empty());
                let one_child = entries.iter().all(|e| e.0 == entries[0].0);
                prop_assert!(entries.len() <= PAGE_LINKS || one_child, "piece of {} entries", entries.len());
                prop_assert_eq!(*first, (i > 0).then(|| entries[0].0));
                if let Some((_, next)) = pieces.get(i + 1) {
                    let next = decode_page(next).unwrap();
                    prop_assert!(entries.last().unwrap().0 < next[0].0, "a child's links are cut");
                }
            }
        }
    }

    trait Concat {
        fn concat_bytes(&self) -> Vec<u8>;
    }

    impl Concat for Vec<(Option<PositionKey>, &[u8])> {
        fn concat_bytes(&self) -> Vec<u8> {
            self.iter().flat_map(|(_, piece)| piece.iter().copied()).collect()
        }
    }

    /// Byte order is the intended order: big-endian keys sort as numbers, child first.
    #[test]
    fn byte_order_is_child_then_parent_order() {
        let page = encode_page(&[(key(256), key(1)), (key(1), key(u64::MAX)), (key(1), key(2))]);
        assert_eq!(decode_page(&page).unwrap(), vec![(key(1), key(2)), (key(1), key(u64::MAX)), (key(256), key(1))]);
    }

    #[test]
    fn a_sealed_page_reads_back_under_its_key_only() {
        let page = encode_page(&[(key(5), key(1)), (key(7), key(2))]);
        let value = write_page(key(0), &page);
        assert_eq!(read_page(key(0), &value), Ok(&page[..]));
        assert!(matches!(read_page(key(5), &value), Err(Damage::Checksum(_))));
        let mut damaged = value.clone();
        damaged[9] ^= 1;
        assert!(matches!(read_page(key(0), &damaged), Err(Damage::Checksum(_))));
        let unordered = write_page(key(0), &[page[16..].to_vec(), page[..16].to_vec()].concat());
        assert!(matches!(read_page(key(0), &unordered), Err(Damage::Decode(_))));
    }

    #[test]
    fn damaged_pages_are_errors() {
        assert!(decode_page(&[0; 15]).is_err());
        let reversed = [encode_page(&[(key(2), key(1))]), encode_page(&[(key(1), key(1))])].concat();
        assert!(decode_page(&reversed).is_err());
        assert!(count(&reversed).is_err());
        assert!(parents_in(&reversed, key(1)).is_err());
        assert!(decode_list(&[0; 7]).is_err());
    }
}
