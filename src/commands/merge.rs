//! `deeptree merge`: another deeptree store's records merged into this one.

use std::path::PathBuf;

use super::report;
use crate::{
    interop::{InteropError, merge},
    store::{Store, StoreOptions},
};

/// `deeptree merge DIR`
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// Directory of the other deeptree store.
    pub dir: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

impl MergeArgs {
    /// What the command needs before it opens (or creates) the store: the other store is there.
    pub fn check(&self) -> Result<(), InteropError> {
        merge::check_source(&self.dir)
    }
}

/// Runs `deeptree merge`.
pub fn merge(store: &Store, args: &MergeArgs, options: &StoreOptions) -> Result<(), InteropError> {
    let dir = crate::game::printable_path(&args.dir);
    let summary = merge::merge_store(store, &args.dir, options, |key, reason| {
        eprintln!("{dir}: position {key} not merged: {reason}")
    })?;
    report(
        args.json,
        &summary,
        format!(
            "{} records merged from {}: {} new positions, {} new edges{}",
            summary.records,
            dir,
            summary.new_nodes,
            summary.new_edges,
            if summary.refused > 0 { format!(", {} refused", summary.refused) } else { String::new() }
        ),
    )
}
