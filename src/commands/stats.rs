//! `deeptree stats`: what the store holds.

use std::path::Path;

use crate::config::Config;

use super::{CommandResult, open_existing_store};

/// `deeptree stats [--json]`
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `deeptree stats` on the existing store in `db`.
pub fn run(db: Option<&Path>, config: &Config, args: StatsArgs) -> CommandResult {
    let StatsArgs { json } = args;
    let store = open_existing_store(db, config)?;
    let stats = store.stats()?;
    let engine = store.engine_identity()?;
    if json {
        let mut value = serde_json::to_value(stats)?;
        value["path"] = store.dir().display().to_string().into();
        value["engine"] = engine.into();
        println!("{value}");
    } else {
        println!("tree       {}", store.dir().display());
        println!("positions  {}", stats.positions);
        println!("edges      {}", stats.edges);
        println!("bytes      {} ({:.1} MiB)", stats.bytes, stats.bytes as f64 / 1048576.0);
        println!("engine     {}", engine.as_deref().unwrap_or("(none recorded)"));
    }
    Ok(())
}
