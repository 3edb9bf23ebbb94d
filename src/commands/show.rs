//! `deeptree show`: the tree from a root, with both scores and the depth of every move.

use crate::game::Line;
use std::path::Path;

use shakmaty::Position;

use crate::{
    config::Config,
    search::{
        analysis::{Params, SettledInStore},
        show,
    },
    store::{ReadView, StoreError, key::PositionKey},
};

use super::{CommandResult, PositionArgs, open_existing_store};

/// `deeptree show [--fen FEN] [--moves "..."] [--depth K] [--json]`
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub position: PositionArgs,
    /// Plies to show below the root.
    #[arg(long, default_value_t = 3)]
    pub depth: u8,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `deeptree show` on the existing store in `db`.
pub fn run(db: Option<&Path>, config: &Config, args: ShowArgs) -> CommandResult {
    let ShowArgs { position, depth, json } = args;
    let line = position.line()?;
    let store = open_existing_store(db, config)?;
    let view = store.read()?;
    let mut tree = show::tree(&view, line.root(), &line.history_keys(), depth)?;
    tree.known_depth = known_depth(&view, &line, config, tree.settled_depth)?;
    let root = line.root();
    // The clock the store was grown for, and the depth a game at it needs here. What games from its seeds reach is
    // its last run's figure here (`stats` walks them again: a walk of the whole tree is too slow for every `show`).
    let grown = view.grown_for()?.map(|grown| {
        let target = grown.targets[crate::uci::fit::phase_index(root.board().occupied().count())];
        (grown, target)
    });
    if json {
        let mut shown = serde_json::to_value(&tree)?;
        if let (Some((grown, target)), Some(object)) = (grown, shown.as_object_mut()) {
            let mut grown = super::stats::grown_for_json(&grown, None)?;
            if let Some(fields) = grown.as_object_mut() {
                fields.insert("target_here".to_owned(), target.into());
            }
            object.insert("grown_for".to_owned(), grown);
        }
        println!("{shown}");
    } else {
        let ply = (root.fullmoves().get() as usize - 1) * 2 + usize::from(root.turn().is_black());
        print!("{}", show::render_text(&tree, ply, root.turn().is_white()));
        if let Some((grown, target)) = grown {
            println!(
                "grown for {}: a game needs depth {target} at this position",
                super::stats::grown_for_line(&grown, None)
            );
        }
    }
    Ok(())
}

/// Deepest software depth a pass from the root would settle with no new search, each depth after the ones before it,
/// at the engine depth of the root's evaluation and the settings' move distance (never narrowed, unlike the UCI
/// check), screening and no-progress rule; `None` when the root has no evaluation or no depth above 0 settles.
fn known_depth(
    view: &ReadView<'_>,
    line: &Line,
    config: &Config,
    settled: Option<u8>,
) -> Result<Option<u8>, StoreError> {
    let Some(eval) = view.node(PositionKey::of(line.root()))?.and_then(|node| node.eval) else { return Ok(None) };
    let params = Params::from(config).with_engine_depth(eval.depth);
    let from = settled.map_or(1, |d| d.saturating_add(1));
    Ok(SettledInStore::new(view, line).deepest(&params, from, MAX_KNOWN_DEPTH)?.or(settled))
}

/// Deepest software depth `show` looks for.
const MAX_KNOWN_DEPTH: u8 = 40;
