//! `deeptree merge DIR`: brings the records of another deeptree store (a tree grown on another machine) into this
//! one.
//!
//! Every record of the other store is submitted as a [`Change::Merge`]: the store's merge keeps the deeper
//! evaluation, unites the edges (per move the deeper score wins, an imported flag is kept), keeps the deeper rest bound
//! (the tighter at equal depth), and the larger settled depth (a depth settled on either machine stays settled: the merged
//! tree holds at least what settled it). The cached values (`idea` and `cyclic`) of the incoming records are
//! dropped: they describe the other graph, and this store's writer recomputes them for every record the merge
//! changes and carries the changes upward. A second merge of the same store therefore changes nothing: every
//! incoming record then merges into an equal record. Engine numbers are the other store's: each is renumbered to the
//! same engine's number in this store's list (added to it when missing). The other store's marks come with their
//! records (on the edges) and with who made them (its `marks/` entries), replacing a mark on the same move here.

use std::path::Path;

use crate::store::{Change, Store, StoreError, StoreOptions, key::PositionKey, marks::MarkChange};

use super::{BatchWriter, InteropError};

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MergeSummary {
    /// Records read from the other store.
    pub records: u64,
    /// Positions this store did not hold before.
    pub new_nodes: u64,
    /// Edges this store did not hold before.
    pub new_edges: u64,
    /// Records left out: they do not describe the position of their key, or collide with a stored position.
    pub refused: u64,
    /// The other store's inner engine, when it differs from this store's.
    pub other_engine: Option<String>,
    /// The analyst's marks brought in from the other store.
    pub marks: u64,
}

/// Records submitted in one batch.
const BATCH: usize = 10_000;

/// Merges the store in `other_dir` into `store`.
/// The other store is there (checked before this one is opened, so that a missing source creates nothing).
pub fn check_source(other_dir: &Path) -> Result<(), InteropError> {
    if !other_dir.join("data.mdb").is_file() {
        return Err(InteropError::Invalid(format!("{}: not a deeptree store (no data.mdb)", other_dir.display())));
    }
    Ok(())
}

/// Brings the other store's marks in, each with who made it and when (its record's edge is merged already; a mark
/// on the same move here is replaced). Returns how many.
fn merge_marks(store: &Store, other: &Store) -> Result<u64, InteropError> {
    let marks = other.read()?.marks()?;
    let mut changes = Vec::with_capacity(marks.len());
    for mark in marks {
        let Some(pos) = mark.position() else {
            log::warn!("a mark of the other store names no position ({}); left out", mark.fen);
            continue;
        };
        let Some(child) = crate::notation::play_uci(&pos, &mark.uci) else {
            log::warn!("a mark of the other store names an illegal move ({} in {}); left out", mark.uci, mark.fen);
            continue;
        };
        changes.push(Change::Mark(MarkChange {
            key: PositionKey::of(&pos),
            position: crate::store::node::PackedPosition::of(&pos),
            uci: mark.uci,
            child: PositionKey::of(&child),
            mark: Some(mark),
        }));
    }
    // One submission each: a mark refused here (it would exclude a position's last move) leaves the others.
    let receipts: Vec<_> = changes.into_iter().map(|change| store.writer().submit(vec![change])).collect();
    let mut count = 0;
    for receipt in receipts {
        match receipt.wait() {
            Ok(()) => count += 1,
            Err(e @ StoreError::LastMoveExcluded { .. }) => log::warn!("a mark of the other store is left out: {e}"),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(count)
}

pub fn merge_store(
    store: &Store,
    other_dir: &Path,
    options: &StoreOptions,
    mut on_refused: impl FnMut(PositionKey, &str),
) -> Result<MergeSummary, InteropError> {
    check_source(other_dir)?;
    let same = match (other_dir.canonicalize(), store.dir().canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        return Err(InteropError::Invalid(format!("{}: this is the store itself", other_dir.display())));
    }
    // Only read: a store of an older schema is merged from as it is, not upgraded.
    let other = Store::open_read_only(other_dir, options)?;
    let before = store.stats()?;
    let mut summary = MergeSummary::default();
    let ours = store.engine_identity()?;
    let theirs = other.engine_identity()?;
    if theirs.is_some() && theirs != ours {
        summary.other_engine = theirs.clone();
        log::warn!(
            "the other store's evaluations come from '{}', this store's from '{}'",
            theirs.as_deref().unwrap_or("?"),
            ours.as_deref().unwrap_or("(none recorded)")
        );
    }
    // The other store's engine N is this store's engine renumbered[N].
    let renumbered = store.engine_numbers(&other.engines()?)?;
    let renumber = |engine: Option<u16>| engine.and_then(|n| renumbered.get(usize::from(n)).copied().flatten());
    let mut writer = BatchWriter::new(store);
    let mut refused_by_store = |key: PositionKey, e: &StoreError| on_refused(key, &e.to_string());
    let mut batch = Vec::with_capacity(BATCH);
    let mut refused = 0u64;
    {
        let view = other.read()?;
        for item in view.nodes()? {
            let (key, mut node) = item?;
            summary.records += 1;
            let Some(pos) = node.position.to_position().filter(|p| PositionKey::of(p) == key) else {
                refused += 1;
                refused_by_store(
                    key,
                    &StoreError::Corrupt {
                        path: other_dir.join("data.mdb"),
                        key,
                        source: crate::store::node::DecodeError::Corrupt {
                            reason: "the record's position does not have its key",
                            offset: 0,
                        },
                    },
                );
                continue;
            };
            node.idea = None;
            node.cyclic = false;
            if let Some(eval) = &mut node.eval {
                eval.engine = renumber(eval.engine);
            }
            for edge in &mut node.edges {
                edge.engine = renumber(edge.engine);
            }
            // A placeholder the other store's mark made comes with the mark (`merge_marks`), or not at all.
            node.edges.retain(|e| !(e.steering.is_some() && crate::store::marks::made_by_mark(e)));
            match Change::merge(&pos, node) {
                Ok(change) => batch.push(change),
                Err(e) => {
                    refused += 1;
                    refused_by_store(key, &e);
                    continue;
                }
            }
            if batch.len() >= BATCH {
                writer.submit(std::mem::take(&mut batch), &mut refused_by_store)?;
            }
        }
    }
    writer.submit(batch, &mut refused_by_store)?;
    writer.finish(&mut refused_by_store)?;
    summary.marks = merge_marks(store, &other)?;
    drop(other);
    let after = store.stats()?;
    summary.new_nodes = after.positions.saturating_sub(before.positions);
    summary.new_edges = after.edges.saturating_sub(before.edges);
    summary.refused = refused + writer.refused;
    Ok(summary)
}
