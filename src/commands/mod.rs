//! The commands of the `deeptree` binary, one module each: their arguments and their bodies. `main.rs` parses the
//! command line and dispatches here.
//!
//! Commands that write open the store, creating it when absent ([`open_store`]); commands that only read open an
//! existing one read-only ([`open_existing_store`]) and never create or write one.

pub mod analyze;
pub mod bench;
pub mod check;
pub mod compact;
pub mod export;
pub mod import;
pub mod mark;
pub mod merge;
pub mod serve;
pub mod show;
pub mod stats;
pub mod task;

use std::path::Path;

use crate::{
    config::Config,
    game::{Line, LineError},
    interop::InteropError,
    store::{Store, StoreError, StoreOptions},
};

/// A position as the commands take it (`show`, `mark`, `task add`, `serve`): a FEN, or the start position, and moves
/// played from it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PositionArgs {
    /// The position the moves start from (default: the standard start position).
    #[arg(long)]
    pub fen: Option<String>,
    /// Moves played from the FEN (or the start position), in UCI notation.
    #[arg(long, default_value = "")]
    pub moves: String,
    /// Chess960 (a Shredder-FEN implies it).
    #[arg(long)]
    pub chess960: bool,
}

impl PositionArgs {
    /// The line to the position, every move checked legal.
    pub fn line(&self) -> Result<Line, LineError> {
        Line::parse_in(self.fen.as_deref(), &self.moves, self.chess960)
    }
}

/// What a command comes to: nothing, or an error for the user.
pub type CommandResult = Result<(), Box<dyn std::error::Error>>;

/// Opens the tree store, creating it when absent: for the commands that write.
pub fn open_store(db: Option<&Path>, config: &Config) -> Result<Store, StoreError> {
    let dir = config.tree_dir(db);
    log::info!("tree store in {}", dir.display());
    Store::open(&dir, &StoreOptions::from(config))
}

/// Opens an existing tree store read-only: for the commands that only read, which must never create one (a mistyped
/// path fails with `no deeptree store at PATH` and leaves nothing behind), nor write to one (they work on a
/// read-only file system).
pub fn open_existing_store(db: Option<&Path>, config: &Config) -> Result<Store, StoreError> {
    let dir = config.tree_dir(db);
    log::info!("tree store in {} (read-only)", dir.display());
    Store::open_read_only(&dir, &StoreOptions::from(config))
}

/// Prints what a command did: one JSON object (`--json`), or `text`. Shared by `import`, `export` and `merge`.
fn report(json: bool, value: &impl serde::Serialize, text: String) -> Result<(), InteropError> {
    if json {
        println!("{}", serde_json::to_string(value).map_err(|e| InteropError::Invalid(e.to_string()))?);
    } else {
        println!("{text}");
    }
    Ok(())
}
