//! `deeptree compact`: rewrite the store without its free pages.

use std::path::Path;

use crate::{config::Config, store::Store};

use super::CommandResult;

/// `deeptree compact [--json]`
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `deeptree compact` on the existing store in `db`: refused while another process has it open.
pub fn run(db: Option<&Path>, config: &Config, args: CompactArgs) -> CommandResult {
    let dir = config.tree_dir(db);
    let done = Store::compact(&dir)?;
    let per_position = |bytes: u64| bytes as f64 / done.positions.max(1) as f64;
    if args.json {
        let mut value = serde_json::to_value(done)?;
        value["path"] = dir.display().to_string().into();
        println!("{value}");
    } else {
        println!(
            "{}: {:.1} MiB -> {:.1} MiB ({:.1} -> {:.1} bytes a position, {} positions)",
            dir.display(),
            done.bytes_before as f64 / (1 << 20) as f64,
            done.bytes_after as f64 / (1 << 20) as f64,
            per_position(done.bytes_before),
            per_position(done.bytes_after),
            done.positions
        );
    }
    Ok(())
}
