//! `deeptree show`: the tree from a root, with both scores and the depth of every move.

use std::path::Path;

use shakmaty::Position;

use crate::{
    config::Config,
    search::{analysis::Line, show},
};

use super::{CommandResult, open_existing_store};

/// `deeptree show [--fen FEN] [--moves "..."] [--depth K] [--json]`
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    #[arg(long)]
    pub fen: Option<String>,
    #[arg(long, default_value = "")]
    pub moves: String,
    /// Plies to show below the root.
    #[arg(long, default_value_t = 3)]
    pub depth: u8,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Chess960 (a Shredder-FEN implies it).
    #[arg(long)]
    pub chess960: bool,
}

/// Runs `deeptree show` on the existing store in `db`.
pub fn run(db: Option<&Path>, config: &Config, args: ShowArgs) -> CommandResult {
    let ShowArgs { fen, moves, depth, json, chess960 } = args;
    let line = Line::parse_in(fen.as_deref(), &moves, chess960)?;
    let store = open_existing_store(db, config)?;
    let view = store.read()?;
    let tree = show::tree(&view, line.root(), &line.history_keys(), depth)?;
    if json {
        println!("{}", serde_json::to_string(&tree)?);
    } else {
        let root = line.root();
        let ply = (root.fullmoves().get() as usize - 1) * 2 + usize::from(root.turn().is_black());
        print!("{}", show::render_text(&tree, ply, root.turn().is_white()));
    }
    Ok(())
}
