//! What a game teaches the tree: a tree move that the game's own later searches refuted (they scored it
//! [`REFUTATION_DROP_CP`](crate::interop::played::REFUTATION_DROP_CP) or more lower within
//! [`REFUTATION_PLIES`](crate::interop::played::REFUTATION_PLIES) plies) is searched again, deeper, at the next
//! `ucinewgame` (while the GUI waits for `readyok`), before another game can play it, for at most a 40th of the game's
//! clock ([`research_budget`]): a runner that starts the next game's clock first counts the wait against its first
//! move. It writes to
//! the tree, so it runs only with `StoreSearches` on (off keeps a grown book as it was grown).
//!
//! The search: the position after the move, by the direct engine, to the deeper of the tree's depth there (its
//! combined depth less the move) and the refuting search's depth, plus [`EXTRA_DEPTH`] plies, for at most
//! the game end's [`research_budget`] (stopped then, and what it reached counts); then the position after the reply the game
//! went on with, one ply shallower (the game's own search there, stored in play, is what the tree saw drop). Each
//! principal variation is stored as a spine ([`crate::search::split::spine_changes`]): each position of the line at
//! the depth the search saw it, down to the tree's engine depth. Stored records never lose depth, so the tree's minimax takes the deeper verdict: a refutation
//! the search confirms lowers the move's value and the tree plays another move; one it does not confirm leaves the
//! move where it was.
//!
//! A refutation is also a source of growth: each becomes one of the analyst's tasks ([`refutation_task`], shown by
//! `deeptree task list`), the position where the tree played the move, to be deepened past the depth that refuted it
//! by the next `analyze --tasks` on the growth's frontier. The task is added at every game end (and at `quit`), with
//! or without a search again (a game of 2+0.02 leaves no time for one), once per position and depth: a task there
//! already, open or done to at least that depth, stands for it; and at most [`MAX_OPEN_REFUTATION_TASKS`] are open at
//! once, so that a bot's thousands of games leave a list the analyst can read and budgets `--tasks` can spend.

use crate::game::play_uci;
use std::time::{Duration, Instant};

use shakmaty::{Chess, uci::UciMove};

use crate::{
    engine::{Engine, EnginePosition, EvalRequest, Limit},
    interop::played::Refutation,
    score::Score,
    search::split::store_spine,
    store::{Store, key::PositionKey, marks::MarkSource, node::PackedPosition, tasks::NewTask},
};

/// The priority of a refutation's task: that of the analyst's own by default, so as not to go ahead of them.
pub const REFUTATION_TASK_PRIORITY: u8 = 0;

/// The most tasks of refutations open at once: one found with as many open is left out (and logged).
pub const MAX_OPEN_REFUTATION_TASKS: usize = 32;

/// How a refutation's task's label begins: how they are told from the analyst's own.
pub const REFUTATION_LABEL: &str = "refuted in play: ";

/// The growth a refutation's task may spend: five minutes of the engines' time.
pub const REFUTATION_TASK_SECONDS: f64 = 300.0;

/// Plies past the deeper of the tree's and the refuting search's depths.
pub const EXTRA_DEPTH: u32 = 2;

/// The longest all the searches again of one game's end may take together: they run at `ucinewgame`, while the
/// GUI waits for `readyok`. What the budget leaves unsearched is dropped (and logged).
pub const RESEARCH_BUDGET: Duration = Duration::from_secs(2);

/// The share of the game's clock the searches again may take at most: some runners (python-chess's, which
/// lichess-bot and scripts/match use) start the next game's clock before `ucinewgame`, so the wait counts against its
/// first move, where Stockfish answers `readyok` at once.
pub const RESEARCH_CLOCK_SHARE: u32 = 40;

/// Under this budget the searches again are left out: too short to reach the depth that refuted the move.
pub const RESEARCH_MIN: Duration = Duration::from_millis(200);

/// The budget of the searches again after a game whose side's clock was `clock` before its first move (`None`: no
/// clock): [`RESEARCH_BUDGET`], at most a [`RESEARCH_CLOCK_SHARE`]th of the clock; `None` (no search) under
/// [`RESEARCH_MIN`]. At 2+0.02 none, at 10+0.1 0.25 s, from 80 s on the whole 2 s.
pub fn research_budget(clock: Option<Duration>) -> Option<Duration> {
    let budget = clock.map_or(RESEARCH_BUDGET, |clock| (clock / RESEARCH_CLOCK_SHARE).min(RESEARCH_BUDGET));
    (budget >= RESEARCH_MIN).then_some(budget)
}

/// What a search again found.
#[derive(Debug, Clone, Copy)]
pub struct Researched {
    /// The depth it reached.
    pub depth: u32,
    /// Its score of the move, from the mover's point of view.
    pub score: Score,
    /// Positions of its line stored.
    pub stored: usize,
}

/// Searches `refutation`'s move again with `engine` and stores what it found in `store`; `engine_depth` is the
/// tree's, the shallowest depth a spine keeps. Two searches: the position after the move, to the depth of
/// [`research_depth`]; then the position after the game's reply one ply shallower, so that the game's own
/// evaluation there (shallower, stored in play) does not outweigh the deeper verdict.
pub fn research(
    engine: &mut Engine,
    store: &Store,
    refutation: &Refutation,
    engine_depth: u8,
    until: Instant,
) -> Result<Researched, String> {
    let depth = research_depth(refutation);
    let mut moves = refutation.line.moves.clone();
    moves.push(refutation.best);
    let start = &refutation.line.start;
    let (score, reached, mut stored) = search_and_store(engine, store, start, &moves, depth, engine_depth, until)?;
    if let Some(reply) = refutation.reply.filter(|_| Instant::now() < until) {
        moves.push(reply);
        stored += search_and_store(engine, store, start, &moves, depth - 1, engine_depth, until)?.2;
    }
    // Sign flip: the search scored the reply's side; the move's score is the mover's.
    Ok(Researched { depth: reached, score: score.back_up(), stored })
}

/// The depth of a search again: the deeper of the tree's depth below the move (its combined depth less the move)
/// and the refuting search's depth, plus [`EXTRA_DEPTH`].
pub fn research_depth(refutation: &Refutation) -> u32 {
    refutation.depth.saturating_sub(1).max(refutation.later_depth) + EXTRA_DEPTH
}

/// The task that grows a refuted tree move's position: the game's line to where the tree played it, deepened to one
/// ply more than [`research_depth`] asks of the position after the move (a software depth above `engine_depth`, the
/// session's, at least 1; the task keeps that engine depth), with [`REFUTATION_TASK_PRIORITY`] and
/// [`REFUTATION_TASK_SECONDS`]; its label says the move and what refuted it.
pub fn refutation_task(refutation: &Refutation, engine_depth: u8) -> NewTask {
    let line = &refutation.line;
    let fen = (line.start != crate::notation::start_position(line.chess960))
        .then(|| shakmaty::fen::Fen::from_position(&line.start, shakmaty::EnPassantMode::Legal).to_string());
    let target = research_depth(refutation) + 1;
    let software = target.saturating_sub(u32::from(engine_depth)).max(1);
    let san = crate::search::show::san_of(line.root(), &refutation.best);
    NewTask {
        fen,
        moves: line.moves.iter().map(ToString::to_string).collect(),
        chess960: line.chess960,
        label: format!(
            "{REFUTATION_LABEL}{san} ({} at depth {}; the game's search {} plies later {} at depth {})",
            refutation.score, refutation.depth, refutation.plies, refutation.later, refutation.later_depth
        ),
        priority: REFUTATION_TASK_PRIORITY,
        budget_seconds: REFUTATION_TASK_SECONDS,
        max_depth: Some(u8::try_from(software).unwrap_or(u8::MAX)),
        engine_depth: Some(engine_depth),
        source: MarkSource::Uci,
    }
}

/// What became of a refutation's task.
#[derive(Debug, Clone, PartialEq)]
pub enum Tasked {
    /// Added, with its number.
    Added(u32),
    /// A task at that position, open or done to at least that depth, stands for it.
    Already(u32),
    /// [`MAX_OPEN_REFUTATION_TASKS`] are open: left out.
    Full,
}

/// Adds [`refutation_task`] to `store` unless a task already stands for it, or too many are open (see [`Tasked`]).
pub fn add_refutation_task(
    store: &Store,
    refutation: &Refutation,
    engine_depth: u8,
) -> Result<Tasked, crate::store::tasks::TaskError> {
    let new = refutation_task(refutation, engine_depth);
    let here = PositionKey::of(refutation.line.root());
    let tasks = store.read()?.tasks()?;
    let at_here = |task: &&crate::store::tasks::Task| {
        crate::game::Line::parse_in(task.fen.as_deref(), &task.moves.join(" "), task.chess960)
            .is_ok_and(|line| PositionKey::of(line.root()) == here)
    };
    // Open, it grows the position on; done, it stands where it asked at least as deep at the same engine depth.
    let deep_enough = |task: &crate::store::tasks::Task| {
        !task.is_done() || (task.engine_depth == new.engine_depth && task.max_depth >= new.max_depth)
    };
    if let Some(task) = tasks.iter().filter(at_here).find(|task| deep_enough(task)) {
        return Ok(Tasked::Already(task.id));
    }
    let open = tasks.iter().filter(|t| !t.is_done() && t.label.starts_with(REFUTATION_LABEL)).count();
    if open >= MAX_OPEN_REFUTATION_TASKS {
        return Ok(Tasked::Full);
    }
    store.add_task(new).map(|task| Tasked::Added(task.id))
}

/// One search of the position after `moves` from `start`, to `depth` or until `until` (stopped then), its line
/// stored as a spine: its score (the side to move's point of view), the depth it reached, the positions stored.
fn search_and_store(
    engine: &mut Engine,
    store: &Store,
    start: &Chess,
    moves: &[UciMove],
    depth: u32,
    engine_depth: u8,
    until: Instant,
) -> Result<(Score, u32, usize), String> {
    let mut position = start.clone();
    for m in moves {
        position = play_uci(&position, m).ok_or_else(|| format!("{m} is not legal"))?;
    }
    // The position as the tree keeps it, without the game's moves and move counters: its score is stored as the
    // position's, whatever line leads to it, so neither a repetition of the game's nor its fifty-move count may shape
    // it (§3.7).
    let alone = PackedPosition::of(&position).to_position().unwrap_or_else(|| position.clone());
    let request = EvalRequest::new(EnginePosition::of(&alone), Limit::Depth(depth));
    let stop = engine.stop_handle();
    let (done, finished) = crossbeam_channel::bounded::<()>(1);
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(until.saturating_duration_since(Instant::now())).is_err() {
            stop.stop();
        }
    });
    let result = engine.evaluate(&request);
    let _ = done.send(());
    let _ = watchdog.join();
    let evaluation = result.map_err(|e| e.to_string())?;
    let label = Some(engine.identity().label());
    let stored = store_spine(store, &position, &evaluation, label, engine_depth).map_err(|e| e.to_string())?;
    Ok((evaluation.score(), evaluation.depth(), stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_research_takes_a_40th_of_the_games_clock_at_most_and_none_of_a_short_one() {
        assert_eq!(research_budget(None), Some(RESEARCH_BUDGET), "no clock: the whole budget");
        assert_eq!(research_budget(Some(Duration::from_secs(2))), None, "2+0.02: none");
        assert_eq!(research_budget(Some(Duration::from_secs(10))), Some(Duration::from_millis(250)));
        assert_eq!(research_budget(Some(Duration::from_secs(600))), Some(RESEARCH_BUDGET));
    }

    /// The tree's `best` after `moves`, +0.10 at depth 20, refuted two plies later by a search of depth 18 at -0.60.
    fn refuted(moves: &str, best: &str) -> Refutation {
        Refutation {
            line: crate::game::Line::parse(None, moves).unwrap(),
            best: best.parse().unwrap(),
            reply: None,
            score: Score::cp(10),
            depth: 20,
            later: Score::cp(-60),
            later_depth: 18,
            plies: 2,
        }
    }

    /// A refutation's task is added once for its position: the same tree move refuted in a second game finds the open
    /// task and adds none.
    #[test]
    fn a_position_refuted_twice_is_one_task() {
        let refutation = refuted("e2e4", "e7e5");
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &crate::store::StoreOptions::default()).unwrap();
        assert_eq!(add_refutation_task(&store, &refutation, 18).unwrap(), Tasked::Added(1));
        // One ply past the search again of the position after e5 (the deeper of 20 - 1 and 18, plus 2): 22 at the
        // engine depth 18, which the task keeps.
        let task = store.read().unwrap().tasks().unwrap().remove(0);
        assert_eq!((task.moves, task.max_depth, task.engine_depth), (vec!["e2e4".to_owned()], Some(4), Some(18)));
        assert_eq!(add_refutation_task(&store, &refutation, 18).unwrap(), Tasked::Already(1));
        // Done (its budget spent), it still stands for the same depth; a deeper refutation there is a new task.
        store.add_task_progress(1, REFUTATION_TASK_SECONDS, 10, Some(4)).unwrap();
        assert_eq!(add_refutation_task(&store, &refutation, 18).unwrap(), Tasked::Already(1));
        let deeper = Refutation { later_depth: 24, ..refutation.clone() };
        assert_eq!(add_refutation_task(&store, &deeper, 18).unwrap(), Tasked::Added(2));
    }

    /// No more than MAX_OPEN_REFUTATION_TASKS are open at once: a bot's games do not pile them up.
    #[test]
    fn refutation_tasks_open_at_once_are_few() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &crate::store::StoreOptions::default()).unwrap();
        // Positions one apart: a different first move from the start, then a knight's tour of shuffles.
        let mut lines = Vec::new();
        for first in ["e2e4", "d2d4", "c2c4", "g1f3", "b1c3", "f2f4", "g2g3", "b2b3", "a2a3", "h2h3"] {
            for second in ["e7e5", "d7d5", "c7c5", "g8f6"] {
                lines.push(format!("{first} {second}"));
            }
        }
        let mut added = 0;
        for moves in &lines {
            let refutation = refuted(moves, "b1a3");
            match add_refutation_task(&store, &refutation, 18).unwrap() {
                Tasked::Added(_) => added += 1,
                Tasked::Full => {}
                other => panic!("{moves}: {other:?}"),
            }
        }
        assert_eq!((lines.len(), added), (40, MAX_OPEN_REFUTATION_TASKS));
    }
}
