//! A node's record as the store holds it: the record of [`crate::model::node`] (re-exported here), sealed with the
//! checksum of its key (schema 5), and the [`Damage`] that keeps a stored value from being read.

pub use crate::model::node::*;

use super::{
    checksum::{self, Table},
    key::PositionKey,
};

/// Why a stored value could not be read: its checksum, or (the checksum holding) its bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error(transparent)]
    Checksum(#[from] checksum::Mismatch),
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

impl Node {
    /// Reads the record stored at `key` (schema 5): its checksum must hold for the key and bytes, and the bytes
    /// must decode.
    pub fn read(key: PositionKey, value: &[u8]) -> Result<Node, Damage> {
        Ok(Node::decode(checksum::open(Table::Nodes, &key.to_bytes(), value)?)?)
    }

    /// The record as schema 5 stores it at `key` (see [`Node::read`]), in `out` (cleared first).
    pub fn write(&self, key: PositionKey, out: &mut Vec<u8>) {
        out.clear();
        self.encode_into(out);
        checksum::seal(Table::Nodes, &key.to_bytes(), out);
    }
}

#[cfg(test)]
mod tests {
    use shakmaty::Chess;

    use super::*;

    /// A sealed record reads back under its own key only, and a changed byte is a checksum mismatch, never another
    /// record.
    #[test]
    fn a_sealed_record_reads_back_under_its_key_only() {
        let key = PositionKey::of(&Chess::default());
        let mut node = Node::new(PackedPosition::of(&Chess::default()));
        node.settled_depth = Some(4);
        let mut value = Vec::new();
        node.write(key, &mut value);
        assert_eq!(value.len(), node.encode().len() + checksum::SIZE);
        assert_eq!(Node::read(key, &value), Ok(node.clone()));
        assert!(matches!(Node::read(PositionKey(key.0 ^ 1), &value), Err(Damage::Checksum(_))));
        for at in 0..value.len() {
            let mut damaged = value.clone();
            damaged[at] ^= 0x28;
            assert!(matches!(Node::read(key, &damaged), Err(Damage::Checksum(_))), "byte {at}");
        }
    }
}
