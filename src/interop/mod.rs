//! Interchange with other chess software: PGN and EPD in, PGN, Polyglot, EPD and HTML out, and merging another
//! deeptree store.
//!
//! ```
//! use deeptree::interop::pgn_import::{ImportOptions, import_pgn};
//! use deeptree::store::{Store, StoreOptions, key::PositionKey};
//! use shakmaty::Chess;
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let pgn = "[Event \"x\"]\n\n1. e4 e5 (1... c5 2. Nf3) 2. Nf3 *\n";
//! let summary = import_pgn(&store, pgn.as_bytes(), &ImportOptions::default(), |_| {})?;
//! assert_eq!((summary.games, summary.skipped, summary.edges), (1, 0, 5));
//! let view = store.read()?;
//! let start = view.node(PositionKey::of(&Chess::default()))?.expect("imported");
//! assert!(start.edges[0].imported);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # Imported moves
//!
//! A move read from a game becomes an edge marked [`Edge::imported`](crate::store::node::Edge::imported): the search
//! walks it even when it lies outside the move distance, and the next analysis evaluates the positions it leads to.
//! Until an engine scores it, the edge carries a placeholder ([`placeholder_edge`], docs/design.md §2.1): depth 0,
//! [`Bound::Upper`] (as for a move never searched) and the lowest score there is, [`Score::NOT_VALUED`]. No engine
//! score of a move can be that low (a move's score is at worst "mated in one ply"), so the placeholder never
//! outranks an engine score in a minimax or a best-first order; and since any engine result is deeper than 0, the
//! store's merge lets it replace the placeholder while keeping the imported flag. Once the child position has an
//! evaluation, the move is valued from it like any other.

pub mod epd;
pub mod html;
pub mod lines;
pub mod merge;
pub mod pgn_export;
pub mod pgn_import;
pub mod pgn_read;
pub mod played;
pub mod polyglot;
pub mod roots;
pub mod walk;

use crate::game::LineError;
use std::{io, path::PathBuf, sync::Arc};

use crate::store::{
    Change, Store, StoreError,
    key::PositionKey,
    node::{Edge, Node},
};

/// Everything that can go wrong with an import, export or merge as a whole (single malformed games or lines are
/// reported and skipped, not errors).
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: Arc<io::Error> },
    #[error("root: {0}")]
    Root(#[from] LineError),
    #[error("{0}")]
    Invalid(String),
}

impl InteropError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> InteropError {
        InteropError::Io { path: path.into(), source: Arc::new(source) }
    }
}

/// Submits merges in batches, one batch in flight while the next is gathered. A batch the writer refuses (a key
/// collision) is retried one change at a time, so that only the offending positions are left out; each of those is
/// reported through `on_refused`.
///
/// A bulk load: the batches are submitted with deferred values ([`StoreWriter::submit_deferred`]): each is
/// checked at once and waits in the writer, and [`finish`](Self::finish) commits them with the values of every
/// record they changed, in one pass (a very large load is also committed along the way).
///
/// [`StoreWriter::submit_deferred`]: crate::store::StoreWriter::submit_deferred
pub(crate) struct BatchWriter<'s> {
    store: &'s Store,
    in_flight: Option<(Vec<Change>, crate::store::Receipt)>,
    /// Changes refused by the store.
    pub refused: u64,
}

impl<'s> BatchWriter<'s> {
    pub(crate) fn new(store: &'s Store) -> BatchWriter<'s> {
        BatchWriter { store, in_flight: None, refused: 0 }
    }

    /// Queues a batch; waits for the previous one first.
    pub(crate) fn submit(
        &mut self,
        changes: Vec<Change>,
        on_refused: &mut dyn FnMut(PositionKey, &StoreError),
    ) -> Result<(), InteropError> {
        self.wait(on_refused)?;
        if !changes.is_empty() {
            let receipt = self.store.writer().submit_deferred(changes.clone());
            self.in_flight = Some((changes, receipt));
        }
        Ok(())
    }

    /// Waits for the last batch, then brings the cached values of everything written up to date.
    pub(crate) fn finish(&mut self, on_refused: &mut dyn FnMut(PositionKey, &StoreError)) -> Result<(), InteropError> {
        self.wait(on_refused)?;
        self.store.writer().settle().wait()?;
        Ok(())
    }

    /// Waits for the batch in flight.
    pub(crate) fn wait(&mut self, on_refused: &mut dyn FnMut(PositionKey, &StoreError)) -> Result<(), InteropError> {
        let Some((changes, receipt)) = self.in_flight.take() else { return Ok(()) };
        match receipt.wait() {
            Ok(()) => Ok(()),
            Err(e @ (StoreError::Collision { .. } | StoreError::Corrupt { .. } | StoreError::IllegalMove { .. })) => {
                if changes.len() == 1 {
                    self.refused += 1;
                    on_refused(change_key(&changes[0]), &e);
                    return Ok(());
                }
                for change in changes {
                    let key = change_key(&change);
                    if let Err(e) = self.store.writer().submit_deferred(vec![change]).wait() {
                        match e {
                            StoreError::Collision { .. } | StoreError::Corrupt { .. } => {
                                self.refused += 1;
                                on_refused(key, &e);
                            }
                            e => return Err(e.into()),
                        }
                    }
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

fn change_key(change: &Change) -> PositionKey {
    match change {
        Change::Merge { key, .. } => *key,
        Change::Mark(mark) => mark.key,
        Change::SetEngine(_) | Change::AddEngines(_) | Change::Task(_) | Change::Clock(_) => PositionKey(0),
    }
}

/// Merges `extra` into the node gathered so far for its position (a batch keeps one node per position).
pub(crate) fn gather(node: &mut Node, extra: Edge) {
    match node.edges.iter_mut().find(|e| e.uci == extra.uci) {
        Some(_) => {
            let mut single = Node::new(node.position.clone());
            single.edges.push(extra);
            node.merge(&single);
        }
        None => node.edges.push(extra),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    /// The messages of an error and of each error below it, through `source()`.
    fn chain(e: &(dyn Error + 'static)) -> Vec<String> {
        std::iter::successors(Some(e), |&e| e.source()).map(ToString::to_string).collect()
    }

    /// The store's, the file's and the line's errors are reachable through `source()`; the message is the same.
    #[test]
    fn wrapped_errors_are_sources() {
        let store = StoreError::Io { path: "/x/tree".into(), source: Arc::new(io::Error::other("disk on fire")) };
        let err = InteropError::from(store);
        assert_eq!(chain(&err), ["/x/tree: disk on fire", "/x/tree: disk on fire", "disk on fire"]);
        assert!(err.source().and_then(|e| e.downcast_ref::<StoreError>()).is_some());

        let err = InteropError::io("/x/games.pgn", io::Error::from(io::ErrorKind::NotFound));
        let messages = chain(&err);
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[0], format!("/x/games.pgn: {}", messages[1]));

        let line = LineError::BadMove { uci: "e2e5".to_owned(), ply: 0, reason: "illegal" };
        let err = InteropError::from(line.clone());
        assert_eq!(chain(&err), [format!("root: {line}"), line.to_string()]);
        assert!(InteropError::Invalid("no".to_owned()).source().is_none());
    }
}
