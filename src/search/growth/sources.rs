//! The sources that feed growth with seeds: a single root, a book's roots, the analyst's tasks. The exits of recorded
//! games are a source too, made where games are read (`crate::interop::played::seeds`); a UCI session's position is
//! made where the session grows it (`crate::uci::growth`).
//!
//! ```
//! use deeptree::game::Line;
//! use deeptree::search::growth::sources::book;
//!
//! let roots = vec![(Line::parse(None, "e2e4 c7c5")?, "Sicilian".to_owned(), 2.0)];
//! // With a clock to grow for, games from the roots are followed; without one, each root is deepened itself.
//! assert!(book(roots.clone(), true)[0].follow);
//! assert!(!book(roots.clone(), false)[0].follow);
//! // A root given twice is of weight 2 either way: twice the games, or a depth ahead.
//! assert!(book(roots.clone(), true)[0].weight == 2.0 && book(roots, false)[0].weight == 2.0);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use std::time::Duration;

use crate::{
    game::{Line, LineError},
    store::tasks::{MAX_PRIORITY, Task},
};

use super::Seed;

/// One root (`analyze --fen --moves`): followed where a clock is given (`follow`), else deepened itself to the run's
/// deepest software depth.
pub fn single_root(line: Line, follow: bool) -> Seed {
    let label = if line.moves.is_empty() { "root".to_owned() } else { format!("root after {}", line.moves.len()) };
    if follow { Seed::games_from(line, label, 1.0) } else { Seed::root(line, label) }
}

/// A book's roots, each of its weight (the times it was given): followed where a clock is given, else each deepened
/// itself (the shallowest first, as the priority ranks a seed that lacks more; a root of weight 2^k runs k depths
/// ahead).
pub fn book(roots: Vec<(Line, String, f64)>, follow: bool) -> Vec<Seed> {
    roots
        .into_iter()
        .map(|(line, label, weight)| {
            if follow {
                Seed::games_from(line, label, weight)
            } else {
                let mut seed = Seed::root(line, label);
                seed.weight = weight;
                seed
            }
        })
        .collect()
}

/// The analyst's open tasks, each deepened itself: weight `2^priority` (a task of priority k settles k software
/// depths ahead of one of priority 0), the budget left, and its deepest software depth above its engine depth (its
/// own where it names one, else the run's `engine_depth`) as its target. Done tasks are left out; with each seed,
/// its task.
pub fn tasks(tasks: &[Task], chess960: bool, engine_depth: u8) -> Result<Vec<(Seed, Task)>, LineError> {
    let mut seeds = Vec::new();
    for task in tasks.iter().filter(|t| !t.is_done()) {
        let line = Line::parse_in(task.fen.as_deref(), &task.moves.join(" "), chess960 || task.chess960)?;
        let mut seed = Seed::root(line, format!("task {}", task.id));
        seed.weight = f64::from(1u32 << task.priority.min(MAX_PRIORITY));
        seed.budget = Some(Duration::try_from_secs_f64(task.left_seconds()).unwrap_or(Duration::MAX));
        seed.engine_depth = task.engine_depth;
        let engine_depth = task.engine_depth.unwrap_or(engine_depth);
        seed.target = task.max_depth.map(|d| u32::from(engine_depth) + u32::from(d));
        seeds.push((seed, task.clone()));
    }
    Ok(seeds)
}
