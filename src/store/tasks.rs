//! The analyst's tasks: lines to analyse, each with a priority and a budget, kept in the tree's store so that a run
//! resumes where the last one stopped (docs/design.md §6.5).
//!
//! ```
//! use deeptree::store::{Store, StoreOptions, marks::MarkSource, tasks::NewTask};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let task = store.add_task(NewTask {
//!     fen: None,
//!     moves: vec!["e2e4".into(), "c7c5".into()],
//!     chess960: false,
//!     label: "Sicilian".into(),
//!     priority: 2,
//!     budget_seconds: 600.0,
//!     max_depth: Some(12),
//!     engine_depth: None,
//!     source: MarkSource::Cli,
//! })?;
//! assert_eq!(task.id, 1);
//! assert_eq!(store.read()?.tasks()?.len(), 1);
//! // A run spends some of it: the progress is added to what the store holds.
//! store.add_task_progress(1, 30.0, 400, Some(3))?;
//! assert_eq!(store.read()?.tasks()?[0].left_seconds(), 570.0);
//! store.remove_task(1)?;
//! assert!(store.read()?.tasks()?.is_empty());
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! A task is a meta entry `tasks/<id>` (JSON): the line (a FEN, or the start position, and moves in UCI), a label,
//! its priority (a task of priority k may settle k software depths ahead of one of priority 0, as a root reached by
//! 2^k games does: [`crate::search::roots::priority`]), its budget in seconds of growth, the deepest software depth it
//! asks for, and its progress: seconds spent, evaluations, the settled depth at its root. `analyze --tasks` grows
//! every open task together within what is left of each budget, saving each task's progress after every depth it
//! settles; a task is done when its budget is spent or its depth settled.

use super::{Change, ReadView, Store, StoreError, marks::MarkSource};

/// Prefix of the meta entries that hold tasks: `tasks/<id>`, the id zero-padded to sort in order.
pub(super) const META_TASKS: &str = "tasks/";

/// A line to analyse, its budget and its progress.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// Its number, from 1, never reused while the store holds a later one.
    pub id: u32,
    /// The position the moves start from; `None`: the standard start position.
    pub fen: Option<String>,
    /// The moves to the task's root, in UCI.
    pub moves: Vec<String>,
    /// Chess960: the FEN read as such, castling as king takes rook.
    #[serde(default)]
    pub chess960: bool,
    pub label: String,
    /// Software depths this task may settle ahead of a task of priority 0.
    pub priority: u8,
    /// Seconds of growth it may take, over all runs.
    pub budget_seconds: f64,
    /// The deepest software depth it asks for; `None`: as deep as its budget goes.
    pub max_depth: Option<u8>,
    /// The engine depth its searches are made at; `None`: the run's (a task the UCI session adds for a refutation
    /// names the session's, which its `max_depth` counts from). Absent from tasks stored before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_depth: Option<u8>,
    /// Seconds of growth spent on it so far.
    pub spent_seconds: f64,
    /// Engine searches answered for it so far.
    pub evaluations: u64,
    /// The software depth settled at its root.
    pub settled_depth: Option<u8>,
    /// Where it was added, by whom and when (milliseconds since 1970, UTC).
    pub source: MarkSource,
    pub user: String,
    pub created: u64,
}

impl Task {
    /// Seconds of its budget not spent yet.
    pub fn left_seconds(&self) -> f64 {
        (self.budget_seconds - self.spent_seconds).max(0.0)
    }

    /// Its budget is spent, or its deepest depth settled.
    pub fn is_done(&self) -> bool {
        self.left_seconds() <= 0.0 || self.max_depth.is_some_and(|max| self.settled_depth.is_some_and(|d| d >= max))
    }

    /// The share of its budget spent, 0 to 1.
    pub fn progress(&self) -> f64 {
        if self.is_done() { 1.0 } else { (self.spent_seconds / self.budget_seconds.max(f64::MIN_POSITIVE)).min(1.0) }
    }
}

/// What a new task says; the store gives it its number, its user and its time.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub fen: Option<String>,
    pub moves: Vec<String>,
    pub chess960: bool,
    pub label: String,
    pub priority: u8,
    pub budget_seconds: f64,
    pub max_depth: Option<u8>,
    /// The engine depth of its searches; `None`: the run's.
    pub engine_depth: Option<u8>,
    pub source: MarkSource,
}

/// Why a task was not added or changed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TaskError {
    #[error("the task's line: {0}")]
    Line(String),
    #[error("a task's budget is a number of seconds above 0 and at most {MAX_BUDGET_SECONDS} (a year), not {0}")]
    Budget(f64),
    #[error("a task's priority is 0 to {MAX_PRIORITY}, not {0}")]
    Priority(u8),
    #[error("no task {0}")]
    Missing(u32),
    #[error("no number was free for the task after {ADD_ATTEMPTS} tries: other processes are adding tasks")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The highest priority: 16 software depths ahead of a task of priority 0.
pub const MAX_PRIORITY: u8 = 16;

/// Tries at a free task number before adding a task fails: each loses only to another process's task.
pub const ADD_ATTEMPTS: usize = 8;

/// The largest budget: a year of growth.
pub const MAX_BUDGET_SECONDS: f64 = 366.0 * 86_400.0;

/// A change of one task, applied by the writer to the task as the store holds it in the write's transaction.
#[derive(Debug, Clone)]
pub enum TaskChange {
    /// Write the task (a new one): never over a task stored under its number (another process added one first).
    Put(Task),
    /// Remove task `id`.
    Remove(u32),
    /// Add a run's progress to task `id` as it stands: seconds and evaluations added, the settled depth the deeper.
    /// A task removed meanwhile stays removed; two runs sharing the store both count.
    Progress { id: u32, seconds: f64, evaluations: u64, settled_depth: Option<u8> },
}

impl TaskChange {
    pub(super) fn meta_name(&self) -> String {
        meta_name(match self {
            TaskChange::Put(task) => task.id,
            TaskChange::Remove(id) | TaskChange::Progress { id, .. } => *id,
        })
    }

    /// The task's entry after this change, from the entry stored now (`None`: absent); `None`: removed.
    pub(super) fn applied(&self, stored: Option<Task>) -> Option<Task> {
        match self {
            TaskChange::Put(task) => Some(stored.unwrap_or_else(|| task.clone())),
            TaskChange::Remove(_) => None,
            TaskChange::Progress { seconds, evaluations, settled_depth, .. } => stored.map(|mut task| {
                task.spent_seconds += seconds;
                task.evaluations += evaluations;
                task.settled_depth = task.settled_depth.max(*settled_depth);
                task
            }),
        }
    }
}

fn meta_name(id: u32) -> String {
    format!("{META_TASKS}{id:010}")
}

/// A task's meta entry body (JSON), read back.
pub(super) fn decode(body: &[u8]) -> Option<Task> {
    serde_json::from_slice(body).ok()
}

/// A task's meta entry body.
pub(super) fn encode(task: &Task) -> Vec<u8> {
    serde_json::to_vec(task).unwrap_or_default()
}

/// The task's line must be playable: a FEN that reads (or none: the start position), and every move legal where it is
/// played (in UCI, castling either way).
fn check_line(fen: Option<&str>, moves: &[String], chess960: bool) -> Result<(), TaskError> {
    let mut pos = match fen.map(str::trim).filter(|f| !f.is_empty() && *f != "startpos") {
        None => crate::notation::start_position(chess960),
        Some(fen) => {
            crate::notation::parse_position(fen, chess960).map_err(|e| TaskError::Line(format!("{fen}: {e}")))?.0
        }
    };
    for (ply, text) in moves.iter().enumerate() {
        let uci: shakmaty::uci::UciMove =
            text.parse().map_err(|_| TaskError::Line(format!("move {} '{text}' is not a UCI move", ply + 1)))?;
        pos = crate::notation::play_uci(&pos, &uci)
            .ok_or_else(|| TaskError::Line(format!("move {} '{text}' is illegal in its position", ply + 1)))?;
    }
    Ok(())
}

impl Store {
    /// Adds a task, its line checked legal; returns it with its number.
    pub fn add_task(&self, new: NewTask) -> Result<Task, TaskError> {
        check_line(new.fen.as_deref(), &new.moves, new.chess960)?;
        if !new.budget_seconds.is_finite() || new.budget_seconds <= 0.0 || new.budget_seconds > MAX_BUDGET_SECONDS {
            return Err(TaskError::Budget(new.budget_seconds));
        }
        if new.priority > MAX_PRIORITY {
            return Err(TaskError::Priority(new.priority));
        }
        // The number is the next after the store's highest; where another process took it meanwhile, its task is
        // kept (a put never overwrites) and this one takes the next.
        for _ in 0..ADD_ATTEMPTS {
            let id = self.read()?.tasks()?.iter().map(|t| t.id).max().unwrap_or(0) + 1;
            let task = Task {
                id,
                fen: new.fen.clone(),
                moves: new.moves.clone(),
                chess960: new.chess960,
                label: new.label.clone(),
                priority: new.priority,
                budget_seconds: new.budget_seconds,
                max_depth: new.max_depth,
                engine_depth: new.engine_depth,
                spent_seconds: 0.0,
                evaluations: 0,
                settled_depth: None,
                source: new.source,
                user: super::marks::os_user(),
                created: super::marks::now(),
            };
            self.writer().submit(vec![Change::Task(TaskChange::Put(task.clone()))]).wait()?;
            if self.read()?.tasks()?.contains(&task) {
                return Ok(task);
            }
        }
        Err(TaskError::Busy)
    }

    /// Adds a run's progress on task `id` to what the store holds of it (nothing where it was removed).
    pub fn add_task_progress(
        &self,
        id: u32,
        seconds: f64,
        evaluations: u64,
        settled_depth: Option<u8>,
    ) -> Result<(), TaskError> {
        let change = TaskChange::Progress { id, seconds, evaluations, settled_depth };
        self.writer().submit(vec![Change::Task(change)]).wait()?;
        Ok(())
    }

    /// Removes task `id`; the tree it grew stays.
    pub fn remove_task(&self, id: u32) -> Result<Task, TaskError> {
        let task = self.read()?.tasks()?.into_iter().find(|t| t.id == id).ok_or(TaskError::Missing(id))?;
        self.writer().submit(vec![Change::Task(TaskChange::Remove(id))]).wait()?;
        Ok(task)
    }
}

impl ReadView<'_> {
    /// Every task, by number.
    pub fn tasks(&self) -> Result<Vec<Task>, StoreError> {
        let shared = self.shared;
        let mut tasks = Vec::new();
        for item in shared.meta.prefix_iter(&self.txn, META_TASKS).map_err(|e| shared.lmdb_error(e))? {
            let (name, value) = item.map_err(|e| shared.lmdb_error(e))?;
            let body = shared.meta_body(name, value)?;
            let task = decode(body)
                .ok_or_else(|| StoreError::CorruptMeta { path: shared.data_file.clone(), entry: META_TASKS.into() })?;
            tasks.push(task);
        }
        Ok(tasks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;

    fn new(label: &str) -> NewTask {
        NewTask {
            fen: None,
            moves: vec!["e2e4".into()],
            chess960: false,
            label: label.into(),
            priority: 0,
            budget_seconds: 60.0,
            max_depth: None,
            engine_depth: None,
            source: MarkSource::Cli,
        }
    }

    /// Two processes that read the same highest number both put a task under the next: the one stored first stays,
    /// and the other's `add_task` sees that and takes the number after.
    #[test]
    fn a_task_put_never_overwrites_another_under_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreOptions::default()).unwrap();
        let first = store.add_task(new("first")).unwrap();
        // Another process's task under number 2, put as add_task puts it.
        let other = Task { id: 2, label: "another process's".into(), ..first.clone() };
        store.writer().submit(vec![Change::Task(TaskChange::Put(other.clone()))]).wait().unwrap();
        let late = Task { id: 2, label: "late".into(), ..first.clone() };
        store.writer().submit(vec![Change::Task(TaskChange::Put(late))]).wait().unwrap();
        let stored = store.read().unwrap().tasks().unwrap();
        assert_eq!(stored.iter().map(|t| t.label.as_str()).collect::<Vec<_>>(), ["first", "another process's"]);
        assert_eq!(store.add_task(new("third")).unwrap().id, 3);
    }
}
