//! `deeptree import`: games (PGN) or positions (EPD) into the tree, the store opened once something has read.

use std::{
    fs::File,
    io::BufReader,
    path::{Path, PathBuf},
};

use super::report;
use crate::{
    interop::{
        InteropError, epd,
        pgn_import::{self, ImportOptions},
    },
    store::{Store, StoreError},
};

/// What to import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportFormat {
    /// Games: every move of the main line and of every variation becomes an imported edge.
    Pgn,
    /// Positions, with their evaluations where `ce`/`acd`/`bm` are given.
    Epd,
}

/// `deeptree import pgn|epd FILE`
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    #[arg(value_enum)]
    pub format: ImportFormat,
    pub file: PathBuf,
    /// PGN: import only the first N plies of each game (variations included).
    #[arg(long, value_name = "N")]
    pub max_ply: Option<u32>,
    /// Chess960: FENs in Shredder-FEN or X-FEN, castling as king takes rook (a PGN's `Variant "Chess960"` tag, or a
    /// Shredder-FEN, implies it).
    #[arg(long)]
    pub chess960: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn open_input(path: &Path) -> Result<BufReader<File>, InteropError> {
    File::open(path).map(BufReader::new).map_err(|e| InteropError::io(path, e))
}

/// Runs `deeptree import`.
impl ImportArgs {
    /// What the command needs before it opens (or creates) the store: its file is there and is not a directory,
    /// and a regular file can be opened. A FIFO is not opened here: a second open would wait for a second writer.
    pub fn check(&self) -> Result<(), InteropError> {
        let meta = std::fs::metadata(&self.file).map_err(|e| InteropError::io(&self.file, e))?;
        if meta.is_dir() {
            return Err(InteropError::Invalid(format!("{}: is a directory", self.file.display())));
        }
        if meta.is_file() {
            File::open(&self.file).map_err(|e| InteropError::io(&self.file, e))?;
        }
        Ok(())
    }
}

/// Runs `deeptree import`, opening the store with `open` once a game or position of the file has read (an input
/// with none leaves no store). Ends in an error, after its summary, when nothing could be read: an empty file, or
/// every game or line skipped.
pub fn import(open: impl FnOnce() -> Result<Store, StoreError>, args: &ImportArgs) -> Result<(), InteropError> {
    let input = open_input(&args.file)?;
    let file = crate::game::printable_path(&args.file);
    let open = || open().map_err(InteropError::from);
    // A problem of the file as a whole names it.
    let named = |e: InteropError| match e {
        InteropError::Invalid(message) => InteropError::Invalid(format!("{file}: {message}")),
        e => e,
    };
    let nothing_read = |what: &str, read: u64, skipped: u64| {
        if read == 0 {
            Err(InteropError::Invalid(format!("{file}: no {what} in it; nothing imported")))
        } else if read == skipped {
            Err(InteropError::Invalid(format!("{file}: no {what} could be read ({skipped} skipped); nothing imported")))
        } else {
            Ok(())
        }
    };
    match args.format {
        ImportFormat::Pgn => {
            let options = ImportOptions { max_ply: args.max_ply, chess960: args.chess960 };
            let summary = pgn_import::import_pgn_with(open, input, &options, |skipped| eprintln!("{file}: {skipped}"))
                .map_err(named)?;
            report(
                args.json,
                &summary,
                format!(
                    "{} games ({} skipped): {} edges ({} new), {} positions ({} new records), waiting for the next analysis",
                    summary.games,
                    summary.skipped,
                    summary.edges,
                    summary.new_edges,
                    summary.positions,
                    summary.new_nodes
                ),
            )?;
            nothing_read("game", summary.games, summary.skipped)
        }
        ImportFormat::Epd => {
            if args.max_ply.is_some() {
                return Err(InteropError::Invalid("--max-ply applies to PGN imports only".into()));
            }
            let summary = epd::import_epd_with(open, input, args.chess960, |skipped| {
                eprintln!("{file}: line {} skipped: {}", skipped.line, skipped.reason)
            })
            .map_err(named)?;
            report(
                args.json,
                &summary,
                format!(
                    "{} lines ({} skipped): {} positions ({} new), {} with an evaluation{}",
                    summary.lines,
                    summary.skipped,
                    summary.positions,
                    summary.new_nodes,
                    summary.evaluations,
                    if summary.scores_without_move > 0 {
                        format!(", {} scores without a best move left out", summary.scores_without_move)
                    } else {
                        String::new()
                    }
                ),
            )?;
            nothing_read("position", summary.lines, summary.skipped)
        }
    }
}
