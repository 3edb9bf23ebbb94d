//! `deeptree mark`: steer the tree: exclude a move, include a move, lift a mark, undo the newest, list them.

use std::path::Path;

use crate::{
    config::Config,
    game::{parse_move, printable},
    store::marks::{Mark, MarkKind, MarkSource, utc_text},
};

use super::{CommandResult, PositionArgs, open_existing_store, open_store};

/// `deeptree mark exclude|include|lift MOVE [--fen FEN] [--moves "..."]`, `deeptree mark undo`, `deeptree mark list`
#[derive(Debug, clap::Args)]
pub struct MarkArgs {
    #[command(subcommand)]
    pub what: MarkCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum MarkCommand {
    /// Exclude a move: never searched below, played nor exported; its position is worth what its other moves are.
    Exclude(MoveAt),
    /// Include a move: always walked, whatever the move distance.
    Include(MoveAt),
    /// Lift the mark on a move.
    Lift(MoveAt),
    /// Lift the newest mark.
    Undo,
    /// List every mark: position, move, kind, who made it, from where and when.
    List {
        /// Print one JSON array.
        #[arg(long)]
        json: bool,
    },
}

/// A move of a position: the position as `show` takes it, the move in SAN or UCI.
#[derive(Debug, clap::Args)]
pub struct MoveAt {
    /// The move, in SAN (`Nf3`) or UCI (`g1f3`).
    #[arg(value_name = "MOVE")]
    pub mv: String,
    #[command(flatten)]
    pub position: PositionArgs,
}

/// Runs `deeptree mark`.
pub fn run(db: Option<&Path>, config: &Config, args: MarkArgs) -> CommandResult {
    match args.what {
        MarkCommand::Exclude(at) => set(db, config, at, Some(MarkKind::Exclude)),
        MarkCommand::Include(at) => set(db, config, at, Some(MarkKind::Include)),
        MarkCommand::Lift(at) => set(db, config, at, None),
        MarkCommand::Undo => {
            let store = open_store(db, config)?;
            match store.undo_mark()? {
                Some(mark) => println!("lifted: {}", describe(&mark)),
                None => println!("no mark to undo"),
            }
            Ok(())
        }
        MarkCommand::List { json } => {
            let store = open_existing_store(db, config)?;
            let mut marks = store.read()?.marks()?;
            marks.sort_by_key(|m| m.time);
            if json {
                println!("{}", serde_json::to_string(&marks)?);
            } else if marks.is_empty() {
                println!("no marks");
            } else {
                for mark in &marks {
                    println!("{}", describe(mark));
                }
            }
            Ok(())
        }
    }
}

fn set(db: Option<&Path>, config: &Config, at: MoveAt, kind: Option<MarkKind>) -> CommandResult {
    let line = at.position.line()?;
    let pos = line.root();
    let uci = parse_move(pos, &at.mv).ok_or_else(|| format!("{}: not a legal move here (SAN or UCI)", at.mv))?;
    let store = open_store(db, config)?;
    match kind {
        Some(kind) => println!("{}", describe(&store.set_mark(pos, uci, kind, MarkSource::Cli)?)),
        None => println!("lifted: {}", describe(&store.lift_mark(pos, uci)?)),
    }
    Ok(())
}

/// One line for a mark: `exclude f2f3 in FEN (by USER, cli, TIME)`.
fn describe(mark: &Mark) -> String {
    // The FEN and the user name are text from the store (a browser's request may have put them there).
    let (fen, user) = (printable(&mark.fen), printable(&mark.user));
    format!("{} {} in {fen} (by {user}, {}, {})", mark.kind, mark.uci, mark.source, utc_text(mark.time))
}
