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

use shakmaty::{Color, EnPassantMode, fen::Fen};

use crate::{
    game::{Line, LineError},
    store::{
        clock::FollowedSeed,
        tasks::{MAX_PRIORITY, Task},
    },
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

/// The seeds games go on from, as the store keeps them with the clock the tree is grown for (`clock/grown`), so that
/// `stats` can walk the games from them again.
pub fn kept(seeds: &[Seed]) -> Vec<FollowedSeed> {
    seeds
        .iter()
        .filter(|seed| seed.follow)
        .map(|seed| FollowedSeed {
            fen: Fen::from_position(&seed.line.start, EnPassantMode::Legal).to_string(),
            moves: seed.line.moves.iter().map(ToString::to_string).collect(),
            chess960: seed.line.chess960,
            weight: seed.weight,
            side: seed.side.map(|side| side.fold_wb("white", "black").to_owned()),
        })
        .collect()
}

/// The seeds `kept` kept, games followed from each again; one that no longer sets up (an entry a user edited) is
/// left out, with the count of those left out.
pub fn followed(kept: &[FollowedSeed]) -> (Vec<Seed>, usize) {
    let seeds: Vec<Seed> = kept
        .iter()
        .enumerate()
        .filter_map(|(index, kept)| {
            let line = Line::parse_in(Some(&kept.fen), &kept.moves.join(" "), kept.chess960).ok()?;
            let mut seed = Seed::games_from(line, format!("seed {}", index + 1), kept.weight);
            seed.side = match kept.side.as_deref() {
                Some("white") => Some(Color::White),
                Some("black") => Some(Color::Black),
                _ => None,
            };
            Some(seed)
        })
        .collect();
    let left_out = kept.len() - seeds.len();
    (seeds, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A book's roots, a game's exit for one side and a Chess960 root come back from the store as the same seeds.
    #[test]
    fn kept_seeds_come_back_as_they_were() {
        let sicilian = Line::parse(None, "e2e4 c7c5 g1f3").unwrap();
        let fen = "nrkbqrbn/pppppppp/8/8/8/8/PPPPPPPP/NRKBQRBN w FBfb - 0 1";
        let chess960 = Line::parse_in(Some(fen), "g2g3 g7g6", true).unwrap();
        let mut exit = Seed::games_from(Line::parse(None, "d2d4 d7d5 c2c4 e7e6").unwrap(), "game 1 ply 4", 3.0);
        exit.side = Some(Color::Black);
        let mut seeds = book(vec![(sicilian, "Sicilian".into(), 2.0), (chess960, "960".into(), 1.0)], true);
        seeds.push(exit);
        seeds.push(Seed::root(Line::start_position(), "deepened itself"));
        let kept = kept(&seeds);
        assert_eq!(kept.len(), 3, "only the seeds games go on from: {kept:?}");
        let json = serde_json::to_string(&kept).unwrap();
        let (back, left_out) = followed(&serde_json::from_str::<Vec<FollowedSeed>>(&json).unwrap());
        assert_eq!(left_out, 0);
        for (seed, again) in seeds.iter().zip(&back) {
            assert_eq!(again.line.root(), seed.line.root());
            assert_eq!(again.line.history_keys(), seed.line.history_keys());
            assert_eq!((again.weight, again.side, again.follow), (seed.weight, seed.side, true));
        }
        let mut bad = kept.clone();
        bad[0].moves.push("e1e8".into());
        assert_eq!(followed(&bad).1, 1, "a line that no longer plays is left out, and counted");
    }
}
