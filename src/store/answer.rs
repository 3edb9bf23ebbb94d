//! The one answer model: an engine's answer to one search, from the engine through the claims to the stored record.
//!
//! An [`Answer`] is what every search gives, however it ran (a pool's worker, the direct relay, another process
//! through its claim, an EPD line's evaluation); [`Answer::record`] is the one constructor of the record it stores,
//! and what it stores depends on what was [`Searched`]: a whole position gives its evaluation and bounds its other
//! moves; the moves without an edge give the best of them and bound the rest; a screened search cut short gives a
//! screen bound; a move of a line is kept as imported; a principal variation's position gives its evaluation alone.
//! A position without a legal move needs no engine: [`terminal_record`].
//!
//! ```
//! use deeptree::score::{Bound, Score};
//! use deeptree::store::answer::{Answer, Searched};
//! use shakmaty::Chess;
//!
//! let answer = Answer {
//!     best: "e2e4".parse()?,
//!     score: Score::cp(30),
//!     bound: Bound::Exact,
//!     depth: 18,
//!     nodes: 1_000_000,
//!     engine: None,
//! };
//! let node = answer.record(&Chess::default(), Searched::Position, Some(0));
//! assert_eq!(node.eval.as_ref().map(|e| (e.score, e.depth)), Some((Score::cp(30), 18)));
//! // The best move bounds the 19 others from above.
//! assert_eq!(node.rest.map(|r| r.score), Some(Score::cp(30)));
//! assert_eq!((node.edges.len(), node.edges[0].engine), (1, Some(0)));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use shakmaty::{Chess, Position, uci::UciMove};

use crate::{
    engine::Evaluation,
    score::{Bound, Score},
};

use super::{
    Change, StoreError,
    node::{Edge, Eval, Node, PackedPosition, RestBound, ScreenBound},
};

/// An engine's answer to one search: the best of the moves searched and its score, from the side to move's point
/// of view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub best: UciMove,
    pub score: Score,
    pub bound: Bound,
    pub depth: u8,
    pub nodes: u64,
    /// The engine that answered, by its label (as the store's list of engines names it); `None` where no engine did
    /// (an EPD line).
    pub engine: Option<String>,
}

impl Answer {
    /// A search's answer, the engine named by `label`: its best line (or, for a search its screen stopped, the
    /// iteration that stopped it).
    pub fn of_evaluation(evaluation: &Evaluation, label: Option<String>) -> Answer {
        match (&evaluation.screened, evaluation.screened.as_ref().and_then(|l| l.pv.first())) {
            (Some(line), Some(best)) => Answer {
                best: *best,
                score: line.score,
                bound: line.bound,
                depth: line.depth.min(255) as u8,
                nodes: evaluation.nodes,
                engine: label,
            },
            _ => Answer {
                best: evaluation.best_move,
                score: evaluation.score(),
                bound: evaluation.bound(),
                depth: evaluation.depth().min(255) as u8,
                nodes: evaluation.nodes,
                engine: label,
            },
        }
    }

    /// The record this answer stores for `position`, where `searched` was asked; `engine` is the answering
    /// engine's number in the store's list.
    pub fn record(&self, position: &Chess, searched: Searched, engine: Option<u16>) -> Node {
        let mut node = Node::new(PackedPosition::of(position));
        let mut edge = Edge::new(self.best, self.score, self.bound, self.depth);
        edge.engine = engine;
        let eval = || Eval {
            score: self.score,
            bound: self.bound,
            depth: self.depth,
            best: Some(self.best),
            nodes: self.nodes,
            engine,
        };
        match searched {
            Searched::Position => {
                node.eval = Some(eval());
                // The best move bounds every other move from above.
                if position.legal_moves().len() > 1 {
                    node.rest = Some(RestBound { score: self.score, depth: self.depth });
                }
            }
            Searched::PrincipalVariation => node.eval = Some(eval()),
            Searched::Screened { unsearched } => {
                // Cut by its screen: a shallower bound for every unsearched move, kept apart from values.
                node.screen =
                    Some(ScreenBound { score: self.score, depth: self.depth, moves: unsearched.min(255) as u8 });
                return node;
            }
            Searched::Alternatives { unsearched } => {
                // The best of the unsearched moves bounds the ones still unsearched.
                if unsearched > 1 {
                    node.rest = Some(RestBound { score: self.score, depth: self.depth });
                }
            }
            Searched::LineMove => edge.imported = true,
            Searched::Single => {}
        }
        node.edges.push(edge);
        node
    }

    /// The change that merges [`Answer::record`] into the store (its move checked legal in `position`).
    pub fn change(&self, position: &Chess, searched: Searched, engine: Option<u16>) -> Result<Change, StoreError> {
        Change::merge(position, self.record(position, searched, engine))
    }
}

/// The record of a position without a legal move, valued without an engine: checkmate (mated now) or stalemate (a
/// draw), as `depth` deep as the search asks, `nodes` as an EPD line may say.
pub fn terminal_record(position: &Chess, depth: u8, nodes: u64) -> Node {
    let score = if position.is_check() { Score::MATED_NOW } else { Score::DRAW };
    let mut node = Node::new(PackedPosition::of(position));
    node.eval = Some(Eval { score, bound: Bound::Exact, depth, best: None, nodes, engine: None });
    node
}

/// What a search asked, which says what its answer stores ([`Answer::record`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Searched {
    /// The whole position: its evaluation, the best move's edge, and a rest bound on the other moves.
    Position,
    /// A position of a principal variation (a deeper search's line, not a search of this position): its evaluation
    /// and its move's edge, and no bound on the other moves, which were not searched here.
    PrincipalVariation,
    /// The `unsearched` moves without an edge: the best one's edge, and a rest bound on the others when there are.
    Alternatives { unsearched: usize },
    /// The same, cut short by its screen at a shallower iteration: a screen bound on the `unsearched` moves.
    Screened { unsearched: usize },
    /// One move of a line (the root's): its edge, kept as imported.
    LineMove,
    /// One move alone: its edge.
    Single,
}
