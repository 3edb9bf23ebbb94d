//! The store's list of engines, one entry per engine: a label as the engine module writes it today
//! ([`canonical_label`]), and the merge of the duplicates that stores written before programs were resolved hold
//! (`Stockfish 15.1 (stockfish)` beside `Stockfish 15.1 (/usr/games/stockfish)`: one engine, listed and counted
//! twice).
//!
//! The merge runs when a command that writes opens the store: each label is made canonical, a label listed again
//! takes the number of its first entry, the numbers after it close up, and every record that names a number that
//! changed is written again with the new one, all in one transaction. Renumbering needs the store alone (another
//! process may hold numbers of the old list): where another process has it open, only the labels that change
//! without a duplicate are renamed, and the merge waits for the next open that finds the store alone.

use std::sync::Arc;

use heed::RwTxn;

use super::{
    META_ENGINES, Shared, StoreError,
    checksum::{self, Table},
    key::PositionKey,
    node::Node,
};
use crate::engine::canonical_label;

/// What a tidy of the list changes: the new list, and each old number's new one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tidy {
    pub labels: Vec<String>,
    pub numbers: Vec<u16>,
}

impl Tidy {
    /// The tidy of `labels` (the list as stored), or `None` where every label is canonical and listed once.
    pub fn of(labels: &[String]) -> Option<Tidy> {
        let mut tidy = Tidy { labels: Vec::new(), numbers: Vec::with_capacity(labels.len()) };
        for label in labels {
            let label = canonical_label(label);
            let number = match tidy.labels.iter().position(|known| *known == label) {
                Some(first) => first,
                None => {
                    tidy.labels.push(label);
                    tidy.labels.len() - 1
                }
            };
            // The list never holds more than u16::MAX + 1 entries (`add_engines`): a number fits.
            tidy.numbers.push(u16::try_from(number).unwrap_or(u16::MAX));
        }
        (tidy.labels != labels).then_some(tidy)
    }

    /// Some number changes: records must be written again, which needs the store alone.
    pub fn renumbers(&self) -> bool {
        self.numbers.iter().enumerate().any(|(old, new)| usize::from(*new) != old)
    }

    /// The labels renamed in place, each number kept (for a store shared with another process).
    pub fn renames_only(&self, labels: &[String]) -> Option<Tidy> {
        let mut renamed = labels.to_vec();
        for (old, label) in labels.iter().enumerate() {
            let canonical = canonical_label(label);
            if !labels.iter().enumerate().any(|(other, known)| other != old && canonical_label(known) == canonical) {
                renamed[old] = canonical;
            }
        }
        (renamed != labels).then(|| Tidy { numbers: (0..labels.len()).map(|n| n as u16).collect(), labels: renamed })
    }

    fn new_number(&self, old: Option<u16>) -> Option<u16> {
        old.map(|n| self.numbers.get(usize::from(n)).copied().unwrap_or(n))
    }
}

/// What the tidy did, for the log and for tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tidied {
    /// Entries that named an engine listed before them.
    pub merged: usize,
    /// Entries whose label was made canonical.
    pub renamed: usize,
    /// Records written again with new engine numbers.
    pub records: u64,
}

impl Shared {
    /// Applies `tidy` to the list and to every record, in `txn`. Records that do not decode are left as they are:
    /// they are reported as damaged where they are read.
    pub(super) fn apply_tidy(&self, txn: &mut RwTxn<'_>, old: &[String], tidy: &Tidy) -> Result<Tidied, StoreError> {
        let lmdb = |e| self.lmdb_error(e);
        let mut records = 0u64;
        if tidy.renumbers() {
            let mut buffer = Vec::with_capacity(256);
            let mut cursor = self.nodes.iter_mut(txn).map_err(lmdb)?;
            while let Some(item) = cursor.next() {
                let (key, value) = item.map_err(lmdb)?;
                let Some(key) = PositionKey::from_slice(key) else { continue };
                let Ok(mut node) = Node::read(key, value) else { continue };
                let mut changed = false;
                if let Some(eval) = node.eval.as_mut() {
                    let number = tidy.new_number(eval.engine);
                    changed |= number != eval.engine;
                    eval.engine = number;
                }
                for edge in &mut node.edges {
                    let number = tidy.new_number(edge.engine);
                    changed |= number != edge.engine;
                    edge.engine = number;
                }
                if changed {
                    node.write(key, &mut buffer);
                    // SAFETY: the key and the value are owned: nothing borrowed from the database is alive while
                    // the cursor writes.
                    unsafe { cursor.put_current(&key.to_bytes(), &buffer) }.map_err(lmdb)?;
                    records += 1;
                }
            }
        }
        for number in tidy.labels.len()..old.len() {
            self.meta.delete(txn, &format!("{META_ENGINES}{number}")).map_err(lmdb)?;
        }
        let mut renamed = 0;
        for (number, label) in tidy.labels.iter().enumerate() {
            if old.get(number) != Some(label) {
                let name = format!("{META_ENGINES}{number}");
                self.meta
                    .put(txn, &name, &checksum::sealed(Table::Meta, name.as_bytes(), label.as_bytes()))
                    .map_err(lmdb)?;
                renamed += 1;
            }
        }
        Ok(Tidied { merged: old.len() - tidy.labels.len(), renamed, records })
    }
}

/// Tidies the list of a store opened to write (see the module's docs): `alone` says whether numbers may change.
/// A failure leaves the store as it was (the transaction is not committed) and is only logged: the list is then
/// used as it is, and the next open tries again.
pub(super) fn tidy_at_open(shared: &Arc<Shared>, alone: impl FnOnce() -> bool) -> Tidied {
    let run = || -> Result<Tidied, StoreError> {
        let old = {
            let view = shared.read()?;
            shared.engines(&view.txn)?
        };
        let Some(tidy) = Tidy::of(&old) else { return Ok(Tidied::default()) };
        let tidy = if tidy.renumbers() && !alone() {
            log::info!(
                "{}: the list of engines names one engine twice; another process has the store open, so they are \
                 merged at the next open that finds it alone",
                shared.data_file.display()
            );
            match tidy.renames_only(&old) {
                Some(renames) => renames,
                None => return Ok(Tidied::default()),
            }
        } else {
            tidy
        };
        let mut txn = shared.env.write_txn().map_err(|e| shared.lmdb_error(e))?;
        // The list as this transaction sees it: a writer may have added an engine since it was read.
        if shared.engines(&txn)? != old {
            return Ok(Tidied::default());
        }
        let tidied = shared.apply_tidy(&mut txn, &old, &tidy)?;
        txn.commit().map_err(|e| shared.lmdb_error(e))?;
        Ok(tidied)
    };
    match run() {
        Ok(tidied) => {
            if tidied != Tidied::default() {
                log::info!(
                    "{}: list of engines tidied: {} entries merged into the engine listed first, {} labels made \
                     canonical, {} records renumbered",
                    shared.data_file.display(),
                    tidied.merged,
                    tidied.renamed,
                    tidied.records
                );
            }
            tidied
        }
        // Damage is said once, by the reader that meets it (its one line, or a UCI session's `info string`), and
        // `check` lists it: a warning here would be a second line for the same damage.
        Err(e) if e.is_damage() => {
            log::debug!("the list of engines was not tidied: {e}");
            Tidied::default()
        }
        Err(e) => {
            log::warn!("the list of engines was not tidied: {e}");
            Tidied::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_take_the_first_number_and_the_rest_close_up() {
        let sh = crate::engine::resolve_program("sh").display().to_string();
        let old = vec![
            "Shell (sh -c x)".to_owned(),
            "scripted".to_owned(),
            format!("Shell ({sh} -c x)"),
            "Other (ssh b stockfish)".to_owned(),
        ];
        let tidy = Tidy::of(&old).expect("a duplicate");
        let ssh = canonical_label("Other (ssh b stockfish)");
        assert_eq!(tidy.labels, vec![format!("Shell ({sh} -c x)"), "scripted".into(), ssh.clone()]);
        assert_eq!(tidy.numbers, vec![0, 1, 0, 2]);
        assert!(tidy.renumbers());
        // Shared with another process: no label with a duplicate is renamed (a number would have to change).
        let shared = tidy.renames_only(&old);
        let expected = (ssh != old[3]).then(|| vec![old[0].clone(), old[1].clone(), old[2].clone(), ssh]);
        assert_eq!(shared.map(|t| t.labels), expected);
        assert_eq!(Tidy::of(&tidy.labels), None, "a tidy list stays as it is");
        // A label to rename without a duplicate keeps its number.
        let renamed = Tidy::of(&["scripted".to_owned(), "Shell (sh -c x)".to_owned()]).unwrap();
        assert!(!renamed.renumbers());
        assert_eq!(renamed.labels[1], format!("Shell ({sh} -c x)"));
    }
}
