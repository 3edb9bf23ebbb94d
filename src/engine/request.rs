//! What an inner engine is asked (a position, a limit, optional `searchmoves` and MultiPV) and what it answers.

use std::{sync::Arc, time::Duration};

use shakmaty::{Chess, EnPassantMode, Move, Position, fen::Fen, uci::UciMove};

use super::EngineError;
use crate::{
    notation::{START_FEN, in_notation, parse_position},
    score::{Bound, Score},
};

/// A validated position to search: a start position and the moves played from it.
///
/// ```
/// use deeptree::engine::EnginePosition;
///
/// let pos = EnginePosition::from_fen(
///     "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
///     vec!["e2e4".parse()?, "e7e5".parse()?],
/// )?;
/// assert!(pos.uci_command().ends_with(" moves e2e4 e7e5"));
/// assert!(EnginePosition::from_fen("8/8/8/8/8/8/8/8 w - - 0 1", vec![]).is_err());
/// assert!(EnginePosition::new(shakmaty::Chess::default(), vec!["e2e5".parse()?]).is_err());
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct EnginePosition {
    start_fen: String,
    moves: Vec<UciMove>,
    /// The same moves as played, checked legal once: written in each engine's castling notation from these.
    played: Vec<Move>,
    position: Chess,
}

impl EnginePosition {
    /// `start` followed by `moves`; every move must be legal where it is played.
    pub fn new(start: Chess, moves: Vec<UciMove>) -> Result<EnginePosition, EngineError> {
        let start_fen = Fen::from_position(&start, EnPassantMode::Legal).to_string();
        let mut position = start;
        let mut played = Vec::with_capacity(moves.len());
        for (i, uci) in moves.iter().enumerate() {
            let m = uci.to_move(&position).map_err(|_| {
                EngineError::InvalidRequest(format!("move {} ({uci}) is illegal after {start_fen}", i + 1))
            })?;
            position.play_unchecked(m);
            played.push(m);
        }
        Ok(EnginePosition { start_fen, moves, played, position })
    }

    /// A FEN (standard, X-FEN or Shredder-FEN) followed by `moves`.
    pub fn from_fen(fen: &str, moves: Vec<UciMove>) -> Result<EnginePosition, EngineError> {
        let (start, _) = parse_position(fen, false).map_err(|e| {
            EngineError::InvalidRequest(format!("bad FEN {:?}: {e}", fen.chars().take(80).collect::<String>()))
        })?;
        EnginePosition::new(start, moves)
    }

    /// The same start and moves, then `m` (legal in the searched position).
    pub fn then(&self, m: &UciMove) -> Result<EnginePosition, EngineError> {
        let played = m
            .to_move(&self.position)
            .map_err(|_| EngineError::InvalidRequest(format!("move {m} is illegal in {}", self.fen())))?;
        let mut next = self.clone();
        next.position.play_unchecked(played);
        next.moves.push(*m);
        next.played.push(played);
        Ok(next)
    }

    /// How often `position` occurred in this line (the start position and the positions after each move), compared
    /// as the repetition rule does: the pieces, the side to move, the castling rights and the en passant square.
    pub fn occurrences(&self, position: &Chess) -> usize {
        let key = |p: &Chess| {
            Fen::from_position(p, EnPassantMode::Legal).to_string().rsplitn(3, ' ').nth(2).map(str::to_owned)
        };
        let wanted = key(position);
        let Ok((mut pos, _)) = parse_position(&self.start_fen, false) else { return 0 };
        let mut count = usize::from(key(&pos) == wanted);
        for m in &self.played {
            pos.play_unchecked(*m);
            count += usize::from(key(&pos) == wanted);
        }
        count
    }

    /// The position itself, with no moves.
    pub fn of(position: &Chess) -> EnginePosition {
        EnginePosition {
            start_fen: Fen::from_position(position, EnPassantMode::Legal).to_string(),
            moves: Vec::new(),
            played: Vec::new(),
            position: position.clone(),
        }
    }

    /// The position that is searched (after all moves).
    pub fn position(&self) -> &Chess {
        &self.position
    }

    pub fn moves(&self) -> &[UciMove] {
        &self.moves
    }

    /// FEN of the searched position.
    pub fn fen(&self) -> String {
        Fen::from_position(&self.position, EnPassantMode::Legal).to_string()
    }

    /// The `position fen ... [moves ...]` command, castling written for a standard-chess engine.
    pub fn uci_command(&self) -> String {
        self.uci_command_in(false)
    }

    /// The `position` command for an engine set up for Chess960 (`chess960`: castling as king takes rook) or for
    /// standard chess (castling as the king's move).
    pub fn uci_command_in(&self, chess960: bool) -> String {
        // The start position as GUIs send it, so that the engine hears what it would hear from the GUI itself.
        let mut command = if self.start_fen == START_FEN {
            "position startpos".to_owned()
        } else {
            format!("position fen {}", self.start_fen)
        };
        if !self.played.is_empty() {
            command.push_str(" moves");
            for m in &self.played {
                command.push(' ');
                in_notation(*m, chess960).append_to_string(&mut command);
            }
        }
        command
    }
}

/// How long the engine searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Depth(u32),
    Nodes(u64),
    MoveTime(Duration),
    /// `go mate N`: until the engine finds a mate in `N` moves, or is stopped.
    Mate(u32),
    /// Until stopped.
    Infinite,
    /// A game clock, for the engine's own time management (milliseconds).
    Clock {
        wtime: u64,
        btime: u64,
        winc: u64,
        binc: u64,
        movestogo: Option<u64>,
    },
    /// `go ponder` with a game clock: the engine thinks on the opponent's time until `ponderhit` (then its clock
    /// runs, as for [`Limit::Clock`]) or `stop` ([`crate::engine::StopHandle::ponderhit`]).
    PonderClock {
        wtime: u64,
        btime: u64,
        winc: u64,
        binc: u64,
        movestogo: Option<u64>,
    },
}

impl Limit {
    fn uci(self) -> String {
        match self {
            Limit::Depth(d) => format!("depth {}", d.max(1)),
            Limit::Nodes(n) => format!("nodes {}", n.max(1)),
            Limit::MoveTime(t) => format!("movetime {}", t.as_millis().max(1)),
            Limit::Mate(moves) => format!("mate {}", moves.max(1)),
            Limit::Infinite => "infinite".to_owned(),
            Limit::Clock { wtime, btime, winc, binc, movestogo }
            | Limit::PonderClock { wtime, btime, winc, binc, movestogo } => {
                let ponder = if matches!(self, Limit::PonderClock { .. }) { "ponder " } else { "" };
                let mut text = format!("{ponder}wtime {wtime} btime {btime} winc {winc} binc {binc}");
                if let Some(moves) = movestogo {
                    text.push_str(&format!(" movestogo {}", moves.max(1)));
                }
                text
            }
        }
    }
}

/// One evaluation request.
///
/// ```
/// use deeptree::engine::{EnginePosition, EvalRequest, Limit};
///
/// let request = EvalRequest::new(EnginePosition::of(&shakmaty::Chess::default()), Limit::Depth(8))
///     .with_searchmoves(vec!["d2d4".parse()?, "c2c4".parse()?])?
///     .with_multipv(2);
/// assert_eq!(request.go_command(), "go depth 8 searchmoves d2d4 c2c4");
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct EvalRequest {
    pub position: EnginePosition,
    pub limit: Limit,
    /// Moves to search (all when empty); each must be legal in the searched position.
    pub searchmoves: Vec<UciMove>,
    /// Lines to report (1 = only the best).
    pub multipv: u32,
    /// Stop the search early when a shallower iteration already scores below a bound (see [`ScreenCut`]).
    pub screen: Option<ScreenCut>,
    /// More limits of the GUI's own, sent with `limit` (`go wtime 3000 btime 3000 depth 25`): the engine ends the
    /// search at whichever it meets first, as UCI has it. Depths, node counts, move times and mates only.
    pub caps: Vec<Limit>,
}

/// A screen inside a fixed-depth search: the search is stopped at the first iteration of depth `from_depth` or
/// deeper whose exact score for the best line is below `below`, and that line is its answer
/// ([`Evaluation::screened`]).
///
/// A depth-`D` search deepens one iteration after another, so the screen costs nothing when it does not cut: the
/// shallower iterations are those the search runs anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScreenCut {
    pub from_depth: u32,
    pub below: Score,
}

impl EvalRequest {
    pub fn new(position: EnginePosition, limit: Limit) -> EvalRequest {
        EvalRequest { position, limit, searchmoves: Vec::new(), multipv: 1, screen: None, caps: Vec::new() }
    }

    /// Screens the search (see [`ScreenCut`]).
    pub fn with_screen(mut self, screen: Option<ScreenCut>) -> EvalRequest {
        self.screen = screen;
        self
    }

    /// Restricts the search to `moves`, each of which must be legal in the searched position.
    pub fn with_searchmoves(mut self, moves: Vec<UciMove>) -> Result<EvalRequest, EngineError> {
        self.searchmoves = moves;
        self.validate()?;
        Ok(self)
    }

    pub fn with_multipv(mut self, lines: u32) -> EvalRequest {
        self.multipv = lines.max(1);
        self
    }

    /// Checks what can be checked before anything is sent: a legal move exists, `searchmoves` are legal.
    pub fn validate(&self) -> Result<(), EngineError> {
        let pos = self.position.position();
        if pos.legal_moves().is_empty() {
            return Err(EngineError::InvalidRequest(format!("no legal move in {}", self.position.fen())));
        }
        if let Some(bad) = self.searchmoves.iter().find(|m| m.to_move(pos).is_err()) {
            return Err(EngineError::InvalidRequest(format!("searchmove {bad} is illegal in {}", self.position.fen())));
        }
        if self.multipv == 0 {
            return Err(EngineError::InvalidRequest("MultiPV 0".to_owned()));
        }
        Ok(())
    }

    /// The `go ...` command (`searchmoves` last, since engines read it to the end of the line).
    pub fn go_command(&self) -> String {
        self.go_command_in(false)
    }

    /// The `go` command for an engine set up for Chess960 (`chess960`) or standard chess: castling among the
    /// `searchmoves` is written as that engine reads it.
    pub fn go_command_in(&self, chess960: bool) -> String {
        let mut command = format!("go {}", self.limit.uci());
        let cap = |cap: &&Limit| matches!(cap, Limit::Depth(_) | Limit::Nodes(_) | Limit::MoveTime(_) | Limit::Mate(_));
        for cap in self.caps.iter().filter(cap) {
            command.push(' ');
            command.push_str(&cap.uci());
        }
        if !self.searchmoves.is_empty() {
            command.push_str(" searchmoves");
            let pos = self.position.position();
            for uci in &self.searchmoves {
                command.push(' ');
                match uci.to_move(pos) {
                    Ok(m) => in_notation(m, chess960).append_to_string(&mut command),
                    Err(_) => uci.append_to_string(&mut command),
                }
            }
        }
        command
    }
}

/// One principal variation with its score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvLine {
    /// 1 for the best line.
    pub multipv: u32,
    /// From the point of view of the side to move in the searched position.
    pub score: Score,
    pub bound: Bound,
    pub depth: u32,
    pub seldepth: u32,
    /// Legal moves from the searched position (cut at the first illegal one the engine sent).
    pub pv: Vec<UciMove>,
}

/// The answer to an [`EvalRequest`].
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// Legal in the searched position, and one of `searchmoves` when they were given.
    pub best_move: UciMove,
    /// Legal after `best_move`, when the engine sent one.
    pub ponder: Option<UciMove>,
    /// Line of multipv 1: the score of the search.
    pub line: PvLine,
    /// Lines 2, 3, ... when MultiPV was asked for.
    pub other_lines: Vec<PvLine>,
    /// Nodes searched (the largest count the engine reported).
    pub nodes: u64,
    /// The search was stopped before its limit.
    pub stopped: bool,
    /// The iteration at which a screen stopped the search ([`EvalRequest::screen`]): it, not `line`, is the answer.
    pub screened: Option<PvLine>,
    /// `id name` of the engine that produced it.
    pub engine: Arc<str>,
    /// When `go` went to the engine and when its `bestmove` was read: the engine's own time, and the relay's.
    pub timing: SearchTiming,
    /// How the engine was asked: as the request said, or another way where it does not keep to `searchmoves`.
    pub asked: Asked,
}

/// How an engine was asked for the best of some moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Asked {
    /// As the request said (`searchmoves`, or no restriction).
    #[default]
    AsRequested,
    /// One search of the whole position with MultiPV: the first line of a move allowed.
    MultiPv,
    /// One search of the position after each move allowed, one ply shallower.
    EachMove,
}

impl Asked {
    /// What marks an answer asked this way in the store's list of engines, after the engine's label (nothing for an
    /// answer asked as requested). Stored answers keep their method so: `stats` counts them apart.
    pub fn label_suffix(self) -> &'static str {
        match self {
            Asked::AsRequested => "",
            Asked::MultiPv => " [MultiPV]",
            Asked::EachMove => " [each move]",
        }
    }

    /// The engine's label without the method's mark, and the method.
    pub fn of_label(label: &str) -> (&str, Asked) {
        for asked in [Asked::MultiPv, Asked::EachMove] {
            if let Some(engine) = label.strip_suffix(asked.label_suffix()) {
                return (engine, asked);
            }
        }
        (label, Asked::AsRequested)
    }

    /// The method's name in `stats`.
    pub fn name(self) -> &'static str {
        match self {
            Asked::AsRequested => "as asked",
            Asked::MultiPv => "MultiPV",
            Asked::EachMove => "each move",
        }
    }
}

/// The two instants that bound a search as the handle saw them.
#[derive(Debug, Clone, Copy)]
pub struct SearchTiming {
    /// Just after `go` was written to the engine.
    pub go_sent: std::time::Instant,
    /// Just after the engine's `bestmove` line was read.
    pub bestmove_read: std::time::Instant,
}

impl SearchTiming {
    /// The engine's time for the search, as the handle saw it.
    pub fn engine_time(&self) -> std::time::Duration {
        self.bestmove_read.saturating_duration_since(self.go_sent)
    }
}

impl Evaluation {
    pub fn score(&self) -> Score {
        self.line.score
    }

    pub fn bound(&self) -> Bound {
        self.line.bound
    }

    pub fn depth(&self) -> u32 {
        self.line.depth
    }

    /// All lines, best first.
    pub fn lines(&self) -> impl Iterator<Item = &PvLine> {
        std::iter::once(&self.line).chain(&self.other_lines)
    }
}
