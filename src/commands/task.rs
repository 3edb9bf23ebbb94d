//! `deeptree task`: the analyst's tasks: lines to analyse with a priority and a budget, grown by `analyze --tasks`.

use std::path::Path;

use crate::{
    config::Config,
    game::printable,
    store::{
        marks::MarkSource,
        tasks::{MAX_PRIORITY, NewTask, Task},
    },
};

use super::{CommandResult, PositionArgs, open_existing_store, open_store};

/// `deeptree task add|list|remove`
#[derive(Debug, clap::Args)]
pub struct TaskArgs {
    #[command(subcommand)]
    pub what: TaskCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum TaskCommand {
    /// Add a line to analyse: `analyze --tasks` grows it within its budget, resuming where the last run stopped.
    Add {
        /// The task's root.
        #[command(flatten)]
        position: PositionArgs,
        /// A name for it (default: the moves).
        #[arg(long)]
        label: Option<String>,
        /// Software depths it may settle ahead of a task of priority 0 (0 to 16).
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=i64::from(MAX_PRIORITY)))]
        priority: u8,
        /// Seconds of growth it may take, over all runs.
        #[arg(long, value_name = "SECONDS")]
        time: f64,
        /// The deepest software depth it asks for (default: as deep as its budget goes).
        #[arg(long)]
        max_depth: Option<u8>,
    },
    /// List the tasks and each one's progress.
    List {
        /// Print one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Remove a task (the tree it grew stays).
    Remove {
        /// Its number, as `task list` shows it.
        id: u32,
    },
}

/// Runs `deeptree task`.
pub fn run(db: Option<&Path>, config: &Config, args: TaskArgs) -> CommandResult {
    match args.what {
        TaskCommand::Add { position, label, priority, time, max_depth } => {
            let line = position.line()?;
            let fen = position.fen.clone();
            let moves: Vec<String> = line.moves.iter().map(ToString::to_string).collect();
            let label = label.unwrap_or_else(|| if moves.is_empty() { "root".to_owned() } else { moves.join(" ") });
            let store = open_store(db, config)?;
            let new = NewTask {
                fen,
                moves,
                chess960: line.chess960,
                label,
                priority,
                budget_seconds: time,
                max_depth,
                engine_depth: None,
                source: MarkSource::Cli,
            };
            let task = store.add_task(new)?;
            println!("task {} added: {}", task.id, describe(&task));
        }
        TaskCommand::List { json } => {
            let store = open_existing_store(db, config)?;
            let tasks = store.read()?.tasks()?;
            if json {
                println!("{}", serde_json::to_string(&tasks)?);
            } else if tasks.is_empty() {
                println!("no tasks");
            } else {
                for task in &tasks {
                    println!("task {:>3}  {}", task.id, describe(task));
                }
            }
        }
        TaskCommand::Remove { id } => {
            let store = open_store(db, config)?;
            let task = store.remove_task(id)?;
            println!("task {id} removed: {}", describe(&task));
        }
    }
    Ok(())
}

/// One line for a task: its label (control characters escaped), priority, budget and progress.
fn describe(task: &Task) -> String {
    format!(
        "{:<24} priority {:>2}  {:>8.0} of {:>6.0} s ({:>3.0} %)  {:>7} evaluations  settled depth {}{}{}",
        printable(&task.label),
        task.priority,
        task.spent_seconds,
        task.budget_seconds,
        task.progress() * 100.0,
        task.evaluations,
        task.settled_depth.map_or("-".to_owned(), |d| d.to_string()),
        task.max_depth.map_or(String::new(), |d| format!(" of {d}")),
        if task.is_done() { "  done" } else { "" }
    )
}
