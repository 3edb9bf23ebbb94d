//! A search's answer to a `go`: the [`Outcome`] it returns to the session (which writes it: its closing `info` lines,
//! then its one `bestmove`), the tree's move for a position, the fallback when nothing can be searched, and what a
//! search stores once the GUI has its move.

use crate::game::Line;
use std::time::Instant;

use shakmaty::{Chess, Position, uci::UciMove};

use super::{
    control::Context,
    depth::Phase,
    message::{BestMove, Info},
};
use crate::{
    engine::SearchTiming,
    notation::{in_notation, legal_line},
    score::{Bound, Score},
    search::tree,
    store::{
        Change, StoreError,
        key::PositionKey,
        node::{Edge, Node, PackedPosition},
    },
};

/// Who answered a `go`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answerer {
    /// The stored tree.
    Tree,
    /// The direct engine's search.
    Direct,
    /// Nothing could be searched: the tree's best move or the first legal move, or no move at all.
    Fallback,
}

/// What the direct engine's search teaches the session's depth model: one sample of depth against nodes and time,
/// and the time spent against the clock's share.
#[derive(Debug, Clone, Copy)]
pub struct DepthSample {
    pub phase: Phase,
    pub nodes: u64,
    pub time: std::time::Duration,
    pub depth: u32,
    /// The clock's share of the move, for a clock `go`.
    pub clock_share: Option<std::time::Duration>,
}

/// The relay's own hops in a direct search, measured where the engine was ready and nothing was sent before its `go`.
#[derive(Debug, Clone, Copy)]
pub struct RelayHops {
    /// When the GUI's `go` was read.
    pub received: Instant,
    pub timing: SearchTiming,
}

/// A search's answer, as it returns it to the session.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub by: Answerer,
    /// Lines written before `bestmove` (the line whose PV starts with the move played, or what went wrong).
    pub infos: Vec<Info>,
    pub best: BestMove,
    pub relay: Option<RelayHops>,
    pub sample: Option<DepthSample>,
    /// A tree search (`ThinkMode tree`) valued nothing in time, and a quick direct search answered.
    pub tree_fallback: bool,
    /// The direct search's score of its move (the side to move's point of view) and its depth, which its relayed
    /// lines showed (they are not in `infos`): what the game record learns.
    pub searched: Option<(Score, u32)>,
}

impl Outcome {
    /// No move: `bestmove 0000` after `info` lines that say why.
    pub fn no_move(infos: Vec<Info>) -> Outcome {
        Outcome {
            by: Answerer::Fallback,
            infos,
            best: BestMove::none(),
            relay: None,
            sample: None,
            tree_fallback: false,
            searched: None,
        }
    }
}

/// `bestmove` (and `ponder` when it is legal after it) in the GUI's notation, from moves in stored form.
pub fn bestmove(root: &Chess, best: UciMove, ponder: Option<UciMove>, chess960: bool) -> BestMove {
    let line = legal_line(root, &[Some(best), ponder].into_iter().flatten().collect::<Vec<_>>(), chess960);
    let mut line = line.into_iter();
    // The best move is legal: it was checked when it came from the engine or the tree.
    let first = line.next().unwrap_or(best);
    BestMove::new(first, line.next())
}

/// The tree's move for a position.
pub struct TreeAnswer {
    best: UciMove,
    /// Alpha score of the move (repetitions of the game count as draws), from the side to move's point of view.
    pub score: Score,
    /// The game's history changes the tree's verdict ([`tree::TreeView::best_with_history`]).
    pub history_changes_verdict: bool,
    pv: Vec<UciMove>,
    /// Engine depth of the root's evaluation plus the software depth settled below it.
    pub combined_depth: u32,
    pub software_depth: u32,
    nodes: u64,
}

impl TreeAnswer {
    /// The answer of a growth that searched `nodes` for this `go`: its `info` line counts those, as the growth's
    /// batches did, rather than the stored evaluation's.
    pub fn with_searched_nodes(self, nodes: u64) -> TreeAnswer {
        if nodes == 0 { self } else { TreeAnswer { nodes, ..self } }
    }

    /// The outcome: the `info` line (its PV starts with the move) and `bestmove`, in the GUI's notation, after
    /// `notes` (`info string`s that say why the tree answered).
    pub fn outcome(&self, ctx: &Context, line: &Line, started: Instant, notes: Vec<Info>) -> Outcome {
        let info = Info {
            depth: Some(self.combined_depth),
            score: Some((self.score, Bound::Exact)),
            nodes: Some(self.nodes),
            time_ms: Some(started.elapsed().as_millis() as u64),
            pv: legal_line(line.root(), &self.pv, ctx.chess960),
            ..Info::default()
        };
        let mut infos = notes;
        infos.push(info);
        self.outcome_after(ctx, line, infos)
    }

    /// The outcome with the `info` lines given (a growth's final batch, whose line 1 is this move): `bestmove`
    /// follows them.
    pub fn outcome_after(&self, ctx: &Context, line: &Line, infos: Vec<Info>) -> Outcome {
        // The line's second move, Ponder on or off, as Stockfish gives one whenever its line has it.
        let ponder = self.pv.get(1).copied();
        Outcome {
            by: Answerer::Tree,
            infos,
            best: bestmove(line.root(), self.best, ponder, ctx.chess960),
            relay: None,
            sample: None,
            tree_fallback: false,
            searched: None,
        }
    }
}

/// The tree's move for the position: its best move by the one ranking of moves (alpha score; repetitions of the
/// game are draws), when the root has an evaluation. A tree that cannot be read (a damaged record) answers nothing,
/// and the caller searches directly; the first time in a session an `info string` says so ([`tree_unreadable`]).
pub fn tree_answer(ctx: &Context, line: &Line, searchmoves: &[UciMove]) -> Option<TreeAnswer> {
    read_tree_answer(ctx, line, searchmoves).unwrap_or_else(|e| {
        tree_unreadable(ctx, &e);
        None
    })
}

/// Says, once per session and store, that the tree could not be read and the engine searches directly; logs it
/// every time.
pub fn tree_unreadable(ctx: &Context, e: &StoreError) {
    log::warn!("the tree could not be read: {e}");
    if ctx.store.as_ref().is_some_and(|store| store.first_trouble()) {
        ctx.out.send(Info::string(format!("tree unreadable, searching directly (said once): {e}")));
    }
}

fn read_tree_answer(ctx: &Context, line: &Line, searchmoves: &[UciMove]) -> Result<Option<TreeAnswer>, StoreError> {
    let Some(store) = ctx.store.as_ref() else { return Ok(None) };
    let view = store.read()?;
    // The common case in a game out of the book: the root has no evaluation; nothing more is read or computed.
    if view.node(PositionKey::of(line.root()))?.and_then(|node| node.eval).is_none() {
        return Ok(None);
    }
    let Some(tree) = tree::view(&view, line.root(), &line.history_keys())? else { return Ok(None) };
    Ok(answer_of(&tree, searchmoves))
}

/// The tree's move in a view of it (the root evaluated): its best allowed move by alpha.
pub fn answer_of(tree: &tree::TreeView, searchmoves: &[UciMove]) -> Option<TreeAnswer> {
    // A move nothing has valued yet keeps the placeholder score: never the tree's word.
    let (best, history_changes_verdict) =
        tree.best_with_history(|c| searchmoves.is_empty() || searchmoves.contains(&c.uci))?;
    let software = u32::from(tree.settled_depth.unwrap_or(0));
    Some(TreeAnswer {
        best: best.uci,
        score: best.alpha,
        history_changes_verdict,
        pv: best.pv.clone(),
        combined_depth: software + u32::from(tree.engine_depth),
        software_depth: software,
        nodes: tree.nodes,
    })
}

/// When nothing can be searched: the tree's best move, else the first legal move (among `searchmoves` when given),
/// so the game goes on; `problem` (an `info string error`) comes first.
pub fn fallback(ctx: &Context, line: &Line, searchmoves: &[UciMove], problem: Option<Info>) -> Outcome {
    let notes: Vec<Info> = problem.into_iter().collect();
    if let Some(answer) = tree_answer(ctx, line, searchmoves) {
        let mut outcome = answer.outcome(ctx, line, Instant::now(), notes);
        outcome.by = Answerer::Fallback;
        return outcome;
    }
    let root = line.root();
    let allowed =
        |m: &&shakmaty::Move| searchmoves.is_empty() || searchmoves.contains(&crate::notation::canonical(**m));
    let mut infos = notes;
    // Nothing was searched: an `info string` says so, with no score.
    match root.legal_moves().iter().find(allowed) {
        Some(m) => {
            infos.push(Info::string("nothing could be searched: playing the first legal move"));
            Outcome {
                by: Answerer::Fallback,
                infos,
                best: BestMove::new(in_notation(*m, ctx.chess960), None),
                relay: None,
                sample: None,
                tree_fallback: false,
                searched: None,
            }
        }
        None => {
            infos.push(Info::string("no legal move"));
            Outcome::no_move(infos)
        }
    }
}

/// A search that did not answer in time after it was told to stop (a hung engine, a stalled write): the session
/// answers for it with the tree's best move, else the first move of the best line the search wrote, else the first
/// legal move, and says which in an `info string`.
pub fn given_up(ctx: &Context, line: &Line, searchmoves: &[UciMove], last_line: Option<UciMove>) -> Outcome {
    let note = Info::string("the search did not answer after it was stopped: the session answers for it");
    if tree_answer(ctx, line, searchmoves).is_some() {
        return fallback(ctx, line, searchmoves, Some(note));
    }
    let root = line.root();
    // `searchmoves` are canonical; the line is in the GUI's notation (a Chess960 castling as king takes rook).
    let allowed = |m: &shakmaty::Move| searchmoves.is_empty() || searchmoves.contains(&crate::notation::canonical(*m));
    let seen = last_line.and_then(|m| m.to_move(root).ok()).filter(allowed);
    match seen {
        Some(m) => Outcome {
            by: Answerer::Fallback,
            infos: vec![note, Info::string("playing the first move of the search's last line")],
            best: BestMove::new(in_notation(m, ctx.chess960), None),
            relay: None,
            sample: None,
            tree_fallback: false,
            searched: None,
        },
        None => fallback(ctx, line, searchmoves, Some(note)),
    }
}

/// Stores the game's moves as edges (a placeholder score until analysed), so that the tree knows the game's
/// positions and repetitions of them. Called once the GUI has its move (or before growth, where no clock runs).
pub fn store_game_line(ctx: &Context, line: &Line) {
    let Some(store) = &ctx.store else { return };
    // A store whose disk failed takes nothing more (said once, where growth pauses).
    if store.write_failure().is_some() {
        return;
    }
    let Ok(view) = store.read() else { return };
    let mut changes = Vec::new();
    for (pos, uci) in line.positions.iter().zip(&line.moves) {
        let key = PositionKey::of(pos);
        if view.node(key).ok().flatten().is_some_and(|n| n.edge(uci).is_some()) {
            continue;
        }
        let mut node = Node::new(PackedPosition::of(pos));
        node.edges.push(Edge::placeholder(*uci));
        if let Ok(change) = Change::merge(pos, node) {
            changes.push(change);
        }
    }
    drop(view);
    if !changes.is_empty()
        && let Err(e) = store.writer().submit(changes).wait()
        && !e.stops_writes()
    {
        log::warn!("the game's moves were not stored: {e}");
    }
}
