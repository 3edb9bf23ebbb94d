//! Deep Blue's split of the work (Campbell, Hoane and Hsu, "Deep Blue", Artificial Intelligence 134, 2002: the host
//! searches the top of the tree while the chips search deep at its leaves), as a lever of `analyze` (docs/design.md
//! §4.3): one direct search of the root first, with a share of the budget; its principal variation stored as the
//! tree's spine of deep evaluations; then the tree grows with the rest of the budget, testing at the engine depth the
//! alternatives the direct search rejected along that line.
//!
//! The spine is stored as evaluations only (no rest bound): a position of the spine has its move of the principal
//! variation as its one edge, so the walk searches the other moves of every spine position it reaches, once, at the
//! engine depth, and the tree's minimax decides between them and the direct search's line.
//!
//! ```
//! use deeptree::score::Score;
//! // The score of the principal variation, seen from each position along it: negated at every ply.
//! assert_eq!(Score::cp(30).toward_child(), Score::cp(-30));
//! ```

use crate::game::Line;
use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use serde::Serialize;
use shakmaty::{Chess, Position, uci::UciMove};

use crate::{
    engine::{EnginePool, EnginePosition, EvalRequest, Evaluation, JobOutcome, Limit},
    notation::canonical,
    score::{Bound, Score},
    store::{
        Change, Store, StoreError,
        answer::{Answer, Searched},
    },
};

/// What the direct search of a split found and stored.
#[derive(Debug, Clone, Serialize)]
pub struct Spine {
    /// Its best move at the root (UCI).
    pub best: String,
    /// Its score at the root, centipawns from the side to move (mates as ±(32000 − plies)).
    pub score: i32,
    /// The depth it reached.
    pub depth: u32,
    /// Nodes it searched: spent from the budget.
    pub nodes: u64,
    /// Positions of its principal variation stored as evaluations (those at least `engine depth` deep).
    pub stored: usize,
}

/// Why a split's direct search gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error("the direct search could not be asked: {0}")]
    Request(String),
    #[error("the direct search failed: {0}")]
    Failed(String),
    #[error("stopped before the direct search answered")]
    Stopped,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Runs one direct search of `line`'s root on `pool` with `limit`, then stores its principal variation down to the
/// positions searched at least `engine_depth` deep. `stop` (Ctrl-C) cancels it.
pub fn direct_first(
    pool: &EnginePool,
    store: &Store,
    line: &Line,
    limit: Limit,
    engine_depth: u8,
    stop: &AtomicBool,
) -> Result<Spine, SplitError> {
    let position =
        EnginePosition::new(line.start.clone(), line.moves.clone()).map_err(|e| SplitError::Request(e.to_string()))?;
    // Not the moves the analyst excluded at the root.
    let searchmoves = crate::store::marks::searchable_moves(
        line.root(),
        store.read()?.node(crate::store::key::PositionKey::of(line.root()))?.as_ref(),
    );
    const ID: u64 = u64::MAX;
    let request = EvalRequest::new(position, limit)
        .with_searchmoves(searchmoves)
        .map_err(|e| SplitError::Request(e.to_string()))?;
    pool.submit(ID, request).map_err(|e| SplitError::Request(e.to_string()))?;
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            pool.cancel(ID);
            return Err(SplitError::Stopped);
        }
        match pool.results().recv_timeout(Duration::from_millis(100)) {
            Ok(result) if result.id == ID => break result,
            Ok(_) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(SplitError::Failed("the engines are gone".to_owned()));
            }
        }
    };
    let evaluation = match result.outcome {
        JobOutcome::Done(evaluation) => evaluation,
        JobOutcome::Failed(e) => return Err(SplitError::Failed(e.to_string())),
        JobOutcome::Cancelled => return Err(SplitError::Stopped),
    };
    let label = result.worker.and_then(|w| pool.identity(w)).map(|identity| identity.label());
    let stored = store_spine(store, line.root(), &evaluation, label, engine_depth)?;
    Ok(Spine {
        best: evaluation.best_move.to_string(),
        score: evaluation.score().value(),
        depth: evaluation.depth(),
        nodes: evaluation.nodes,
        stored,
    })
}

/// Stores the principal variation of a search of `position` as a spine ([`spine_changes`]: down to `engine_depth`),
/// its records marked with the engine labelled `label` (numbered in the store's list); returns the positions stored.
pub fn store_spine(
    store: &Store,
    position: &Chess,
    evaluation: &Evaluation,
    label: Option<String>,
    engine_depth: u8,
) -> Result<usize, StoreError> {
    let engine = match label {
        Some(label) => store.engine_numbers(&[label])?.first().copied().flatten(),
        None => None,
    };
    let mut pv = evaluation.line.pv.clone();
    if pv.first() != Some(&evaluation.best_move) {
        pv = vec![evaluation.best_move];
    }
    pv.truncate(before_excluded(store, position, &pv)?);
    let (score, bound, depth) = (evaluation.score(), evaluation.bound(), evaluation.depth());
    let changes = spine_changes(position, &pv, score, bound, depth, engine, engine_depth)?;
    let stored = changes.len();
    store.writer().submit(changes).wait()?;
    Ok(stored)
}

/// How many moves of `pv` from `position` come before the first one the analyst excluded where it is played: the
/// spine stops there (the position before it keeps no evaluation of the excluded line).
fn before_excluded(store: &Store, position: &Chess, pv: &[UciMove]) -> Result<usize, StoreError> {
    let view = store.read()?;
    let mut at = position.clone();
    for (ply, uci) in pv.iter().enumerate() {
        let Some(stored) = crate::notation::canonical_uci(&at, uci) else { return Ok(ply) };
        let record = view.node(crate::store::key::PositionKey::of(&at))?;
        if record.and_then(|r| r.edge(&stored).cloned()).is_some_and(|e| e.is_excluded()) {
            return Ok(ply);
        }
        let Some(next) = crate::notation::play_uci(&at, &stored) else { return Ok(ply) };
        at = next;
    }
    Ok(pv.len())
}

/// The records of the spine: from `root` along `pv`, each position with the next move as its one edge, scored with
/// the search's `score` seen from that position's side to move, at the search's `depth` less the plies played; the
/// spine ends where that depth falls below `engine_depth`, at an illegal move, or at the line's end.
pub fn spine_changes(
    root: &Chess,
    pv: &[UciMove],
    score: Score,
    bound: Bound,
    depth: u32,
    engine: Option<u16>,
    engine_depth: u8,
) -> Result<Vec<Change>, StoreError> {
    let mut changes = Vec::new();
    let (mut position, mut score, mut bound) = (root.clone(), score, bound);
    for (ply, uci) in pv.iter().enumerate() {
        // A mate that has run out ends the line: the side to move is mated, whatever moves the engine sent after.
        if score == Score::MATED_NOW || score == Score::MATE_NOW {
            break;
        }
        let Some(at) = depth.checked_sub(ply as u32).filter(|d| *d >= u32::from(engine_depth)) else { break };
        let Ok(m) = uci.to_move(&position) else { break };
        let best = canonical(m);
        let at = at.min(u32::from(u8::MAX)) as u8;
        let answer = Answer { best, score, bound, depth: at, nodes: 0, engine: None };
        changes.push(answer.change(&position, Searched::PrincipalVariation, engine)?);
        position.play_unchecked(m);
        // Sign flip: one ply down the line the opponent is to move; the score is negated (a mate one ply nearer) and
        // a bound for one side is the other bound for the other.
        score = score.toward_child();
        bound = bound.flipped();
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uci(text: &str) -> UciMove {
        text.parse().expect("a UCI move")
    }

    #[test]
    fn the_spine_negates_the_score_at_every_ply_and_stops_below_the_engine_depth() {
        let root = Chess::default();
        let pv = [uci("e2e4"), uci("e7e5"), uci("g1f3"), uci("b8c6")];
        let changes = spine_changes(&root, &pv, Score::cp(30), Bound::Exact, 20, Some(1), 18).expect("legal");
        // Depths 20, 19, 18 reach the engine depth; 17 does not.
        assert_eq!(changes.len(), 3);
        let expected = [(Score::cp(30), 20, "e2e4"), (Score::cp(-30), 19, "e7e5"), (Score::cp(30), 18, "g1f3")];
        for (change, (score, depth, best)) in changes.iter().zip(expected) {
            let Change::Merge { node, children, .. } = change else { panic!("a merge") };
            let eval = node.eval.as_ref().expect("an evaluation");
            assert_eq!((eval.score, eval.depth, eval.best), (score, depth, Some(uci(best))));
            assert_eq!(node.edges.len(), 1);
            assert_eq!((node.edges[0].uci, node.edges[0].score), (uci(best), score));
            // No rest bound: the walk is to search the other moves at the engine depth.
            assert!(node.rest.is_none());
            assert_eq!(children.len(), 1);
        }
    }

    #[test]
    fn a_line_longer_than_its_mate_ends_where_the_mate_does() {
        // Mate in 1 (one ply), with three moves more in the line: only the mating move is stored, never a score out
        // of range or one that reads as not valued.
        let root = Chess::default();
        let pv = [uci("e2e4"), uci("e7e5"), uci("g1f3"), uci("b8c6")];
        let changes = spine_changes(&root, &pv, Score::from_uci_mate(1), Bound::Exact, 30, None, 10).expect("legal");
        assert_eq!(changes.len(), 1);
        let Change::Merge { node, .. } = &changes[0] else { panic!("a merge") };
        assert!(node.edges.iter().all(|e| e.is_valued()));
    }

    #[test]
    fn a_lower_bound_at_the_root_is_an_upper_bound_one_ply_down_and_an_illegal_move_ends_the_spine() {
        let root = Chess::default();
        let pv = [uci("e2e4"), uci("e2e4")];
        let changes = spine_changes(&root, &pv, Score::cp(50), Bound::Lower, 30, None, 10).expect("legal");
        assert_eq!(changes.len(), 1);
        let pv = [uci("e2e4"), uci("e7e5")];
        let changes = spine_changes(&root, &pv, Score::cp(50), Bound::Lower, 30, None, 10).expect("legal");
        let Change::Merge { node, .. } = &changes[1] else { panic!("a merge") };
        assert_eq!(node.eval.as_ref().map(|e| e.bound), Some(Bound::Upper));
    }
}
