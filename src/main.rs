//! The `deeptree` command line. With no command it speaks UCI; see `deeptree --help`. Each command's arguments
//! and body are in `deeptree::commands`; this file parses and dispatches.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

use deeptree::{
    commands::{
        self, analyze::AnalyzeArgs, bench::BenchCommand, bench::FillArgs, export::ExportArgs, import::ImportArgs,
        merge::MergeArgs, open_existing_store, open_store, serve::ServeArgs, show::ShowArgs, stats::StatsArgs,
    },
    config::Config,
    game::printable,
    store::StoreError,
};

#[derive(Parser)]
#[command(name = "deeptree", version, about = "A UCI meta-engine that grows a persistent deep-analysis tree")]
struct Cli {
    /// Directory of the tree store (default: the user's data directory, or tree_path in the settings).
    #[arg(long, global = true, env = "DEEPTREE_DB", value_name = "DIR")]
    db: Option<PathBuf>,
    /// Settings file (default: $DEEPTREE_CONFIG, else ~/.config/deeptree/deeptree.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// More log output on stderr (-v, -vv).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Grow the tree from its sources (a root, a book's roots, games, tasks), for a clock or to a depth.
    #[command(alias = "grow")]
    Analyze(Box<AnalyzeArgs>),
    /// Print the tree from a root with both scores and the depth of every move.
    Show(ShowArgs),
    /// Import games (pgn: every move becomes an imported edge) or positions with evaluations (epd).
    Import(ImportArgs),
    /// Export the tree from a root: a PGN game, a Polyglot book, EPD lines or a self-contained HTML page.
    Export(ExportArgs),
    /// Merge another deeptree store (a tree grown elsewhere) into this one.
    Merge(MergeArgs),
    /// Show what the store holds.
    Stats(StatsArgs),
    /// Steer the tree: exclude or include a move, lift a mark, undo the newest, list them.
    Mark(commands::mark::MarkArgs),
    /// The analyst's tasks: lines to analyse with a priority and a budget, grown by `analyze --tasks`.
    Task(commands::task::TaskArgs),
    /// Serve the tree live in a browser on 127.0.0.1 (steering with the per-run token printed at start).
    Serve(ServeArgs),
    /// Rewrite the store without free pages (only while no other process has it open).
    Compact(commands::compact::CompactArgs),
    /// Read and verify every record; list the damaged ones (exit status 3), and with --repair --out DIR copy every
    /// intact one into a new store.
    Check(commands::check::CheckArgs),
    /// Measure deeptree's parts.
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// Write generated positions, printing `committed N` after each commit (used by the crash tests).
    #[command(hide = true)]
    Fill(FillArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (config, config_file) = match Config::load(cli.config.as_deref()) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("deeptree: {}", printable(&e.to_string()));
            return ExitCode::from(2);
        }
    };
    let base = config.log_level.parse().unwrap_or(log::LevelFilter::Warn);
    deeptree::logger::init(base, cli.verbose);
    if let Some(file) = &config_file {
        log::info!("settings from {}", file.display());
    }
    match run(cli, &config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<commands::check::DamageFound>() {
            Some(found) => {
                eprintln!("deeptree: {}", printable(&found.to_string()));
                ExitCode::from(commands::check::DAMAGE_EXIT_CODE)
            }
            // A damaged store: its line names the store and says to run `deeptree check`, exit status 3 as check's.
            None if damaged_store(e.as_ref()) => {
                eprintln!("deeptree: error: {}", printable(&e.to_string()));
                ExitCode::from(commands::check::DAMAGE_EXIT_CODE)
            }
            None => {
                eprintln!("deeptree: error: {}", printable(&e.to_string()));
                ExitCode::FAILURE
            }
        },
    }
}

/// Whether `e`, or an error it wraps, says the store is damaged ([`StoreError::is_damage`]).
fn damaged_store(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source())
        .any(|e| e.downcast_ref::<StoreError>().is_some_and(StoreError::is_damage))
}

/// The commands that only print what the store holds end quietly when their reader goes away (`deeptree show --json
/// | head -c 3000`), as Unix tools do: by SIGPIPE, instead of a panic on the failed write. Only those: the others
/// write to inner engines, where a closed pipe is an engine fault to handle, not a reason to die.
fn quiet_on_closed_pipe(command: &Option<Command>) {
    if matches!(command, Some(Command::Show(_) | Command::Export(_) | Command::Stats(_))) {
        // SAFETY: restores the default disposition of one signal before any thread is started; no handler runs.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}

/// Children are reaped by deeptree, whatever its parent left: a SIGCHLD ignored by the process that started it (and
/// kept across exec) would have the kernel reap the engines at once, so that an engine's process group could be
/// gone, and its number taken by another process, before deeptree kills the group.
fn reap_own_children() {
    // SAFETY: restores the default disposition of one signal before any thread is started; no handler runs.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    }
}

fn run(cli: Cli, config: &Config) -> commands::CommandResult {
    reap_own_children();
    quiet_on_closed_pipe(&cli.command);
    let db = cli.db.as_deref();
    match cli.command {
        // No command: speak UCI on stdin/stdout.
        None => {
            deeptree::store::fault::speaks_uci();
            deeptree::uci::run(config, config.tree_dir(db))
        }
        Some(Command::Analyze(args)) => commands::analyze::run(db, config, *args)?,
        Some(Command::Show(args)) => commands::show::run(db, config, args)?,
        // A command that cannot do its work fails before the store is created.
        Some(Command::Import(args)) => {
            args.check()?;
            commands::import::import(|| open_store(db, config), &args)?
        }
        Some(Command::Export(args)) => commands::export::export(&open_existing_store(db, config)?, &args)?,
        Some(Command::Merge(args)) => {
            args.check()?;
            let store = open_store(db, config)?;
            commands::merge::merge(&store, &args, &deeptree::store::StoreOptions::from(config))?
        }
        Some(Command::Stats(args)) => commands::stats::run(db, config, args)?,
        Some(Command::Serve(args)) => commands::serve::run(db, config, args)?,
        Some(Command::Compact(args)) => commands::compact::run(db, config, args)?,
        Some(Command::Mark(args)) => commands::mark::run(db, config, args)?,
        Some(Command::Task(args)) => commands::task::run(db, config, args)?,
        Some(Command::Check(args)) => commands::check::run(db, config, args)?,
        Some(Command::Bench { what }) => commands::bench::run(db, config, what)?,
        Some(Command::Fill(args)) => commands::bench::fill(db, config, args)?,
    }
    Ok(())
}
