//! `deeptree import pgn`: every move of every game, main line and variations, becomes an imported edge.
//!
//! A game whose FEN does not set up a legal standard position, or one of whose moves is not valid SAN or not legal
//! where it stands (in the main line or in any variation), is reported with its number and skipped whole; the rest
//! of the file imports. A null move (`--`, `Z0`) ends its line: what follows it in that variation is not imported.

use crate::game::quote;
use std::{borrow::Borrow, collections::HashSet, io::Read};

use shakmaty::{Chess, Position, fen::Fen, san::San, uci::UciMove};

use crate::store::{
    Change, Store,
    key::{KeyMap, KeySet, PositionKey},
    node::{Edge, Node, PackedPosition},
};

use super::{
    BatchWriter, InteropError, gather,
    pgn_read::{GameReader, MoveToken, RawGame},
};

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Import only moves up to this ply of each game (counted from the game's start, variations included).
    pub max_ply: Option<u32>,
    /// Every game is Chess960 (a game's `Variant "Chess960"` tag, or a Shredder-FEN, says so on its own).
    pub chess960: bool,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ImportSummary {
    /// Games read.
    pub games: u64,
    /// Games skipped as malformed.
    pub skipped: u64,
    /// Distinct moves (position and move) imported.
    pub edges: u64,
    /// Distinct positions they join (their starting positions and the positions they lead to).
    pub positions: u64,
    /// Edges the store did not hold before.
    pub new_edges: u64,
    /// Records (positions with moves) the store did not hold before.
    pub new_nodes: u64,
    /// Positions the store refused (a key collision with a different stored position).
    pub refused: u64,
}

/// A malformed game: its number in the file, the line it starts on, and why it was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub game: u64,
    pub line: u64,
    pub reason: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "game {} (line {}) skipped: {}", self.game, self.line, self.reason)
    }
}

/// Positions gathered before a batch is written.
const BATCH_POSITIONS: usize = 20_000;

/// Imports every game of `input` into `store`, calling `on_skipped` for each malformed game.
pub fn import_pgn(
    store: &Store,
    input: impl Read,
    options: &ImportOptions,
    on_skipped: impl FnMut(&Skipped),
) -> Result<ImportSummary, InteropError> {
    import_pgn_with(|| Ok(store), input, options, on_skipped)
}

/// As [`import_pgn`], opening the store with `open` once a game has read whole: an input in which no game does
/// (an empty file, random bytes, games of another variant) leaves no store behind.
pub fn import_pgn_with<S: Borrow<Store>>(
    open: impl FnOnce() -> Result<S, InteropError>,
    input: impl Read,
    options: &ImportOptions,
    mut on_skipped: impl FnMut(&Skipped),
) -> Result<ImportSummary, InteropError> {
    let mut reader = GameReader::new(input);
    let mut summary = ImportSummary::default();
    // The next game that imports, each one skipped on the way reported.
    let mut next_game = |summary: &mut ImportSummary| -> Result<Option<Vec<_>>, InteropError> {
        while let Some(game) = reader.next_game().map_err(|e| InteropError::Invalid(format!("reading the PGN: {e}")))? {
            summary.games += 1;
            match game_moves_in(&game, options.max_ply, options.chess960) {
                Ok(moves) => return Ok(Some(moves)),
                Err(reason) => {
                    summary.skipped += 1;
                    on_skipped(&Skipped { game: game.number, line: game.line, reason });
                }
            }
        }
        Ok(None)
    };
    let Some(first) = next_game(&mut summary)? else { return Ok(summary) };
    let store = open()?;
    let store = store.borrow();
    let before = store.stats()?;
    let mut batch: KeyMap<(Chess, Node)> = KeyMap::default();
    let mut edges_seen: HashSet<(PositionKey, UciMove)> = HashSet::new();
    let mut positions_seen = KeySet::default();
    let mut writer = BatchWriter::new(store);
    let mut refused = |key: PositionKey, e: &crate::store::StoreError| {
        log::warn!("position {key} not imported: {e}");
    };
    let mut next = Some(first);
    while let Some(moves) = next.take() {
        for (pos, uci, child) in moves {
            let key = PositionKey::of(&pos);
            positions_seen.insert(key);
            positions_seen.insert(child);
            if edges_seen.insert((key, uci)) {
                let (_, node) = batch.entry(key).or_insert_with(|| (pos.clone(), Node::new(PackedPosition::of(&pos))));
                gather(node, Edge::placeholder(uci));
            }
        }
        if batch.len() >= BATCH_POSITIONS {
            writer.submit(changes(std::mem::take(&mut batch))?, &mut refused)?;
        }
        next = next_game(&mut summary)?;
    }
    writer.submit(changes(batch)?, &mut refused)?;
    writer.finish(&mut refused)?;
    let after = store.stats()?;
    summary.edges = edges_seen.len() as u64;
    summary.positions = positions_seen.len() as u64;
    summary.new_edges = after.edges.saturating_sub(before.edges);
    summary.new_nodes = after.positions.saturating_sub(before.positions);
    summary.refused = writer.refused;
    Ok(summary)
}

fn changes(batch: KeyMap<(Chess, Node)>) -> Result<Vec<Change>, InteropError> {
    let mut out = Vec::with_capacity(batch.len());
    for (_, (pos, node)) in batch {
        out.push(Change::merge(&pos, node)?);
    }
    Ok(out)
}

/// The starting position of a game: its FEN tag, else the standard start.
pub fn game_start(game: &RawGame) -> Result<Chess, String> {
    game_start_in(game, false)
}

/// As [`game_start`], set up for Chess960 with `chess960`, a `Variant "Chess960"` tag or a Shredder-FEN.
pub fn game_start_in(game: &RawGame, chess960: bool) -> Result<Chess, String> {
    let mut chess960 = chess960;
    if let Some(variant) = game.tag("Variant") {
        let v = variant.trim().to_ascii_lowercase();
        if matches!(v.as_str(), "chess960" | "chess 960" | "fischerandom" | "fischer random" | "960") {
            chess960 = true;
        } else if !(v.is_empty() || v == "standard" || v == "chess" || v == "normal" || v == "from position") {
            return Err(format!("variant {} is not supported", quote(variant)));
        }
    }
    match game.tag("FEN") {
        Some(fen) => {
            if game.tag("SetUp").is_some_and(|s| s.trim() == "0") {
                log::debug!("game {}: SetUp \"0\" with a FEN tag; the FEN is used", game.number);
            }
            crate::notation::parse_position(fen, chess960)
                .map(|(pos, _)| pos)
                .map_err(|e| format!("bad FEN {}: {e}", quote(fen)))
        }
        None if chess960 => Ok(crate::notation::start_position(true)),
        None if game.tag("SetUp").is_some_and(|s| s.trim() == "1") => Err("SetUp \"1\" without a FEN tag".into()),
        None => Ok(Chess::default()),
    }
}

struct Frame {
    pos: Chess,
    /// The position before the last move of this line (where a variation starting here branches off).
    before: Option<Chess>,
    ply: u32,
    /// After a null move: the rest of this line is not imported.
    dead: bool,
}

/// Every move of a game (main line and variations) as (position, move, key of the position after it), or why the
/// game cannot be imported.
pub fn game_moves(game: &RawGame, max_ply: Option<u32>) -> Result<Vec<(Chess, UciMove, PositionKey)>, String> {
    game_moves_in(game, max_ply, false)
}

/// As [`game_moves`], with every game Chess960 when `chess960`.
pub fn game_moves_in(
    game: &RawGame,
    max_ply: Option<u32>,
    chess960: bool,
) -> Result<Vec<(Chess, UciMove, PositionKey)>, String> {
    if let Some(error) = &game.error {
        return Err(error.clone());
    }
    let start = game_start_in(game, chess960)?;
    let mut out = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut current = Frame { pos: start, before: None, ply: 0, dead: false };
    let mut number = 0usize;
    for token in &game.moves {
        match token {
            MoveToken::San(san) => {
                number += 1;
                if current.dead {
                    continue;
                }
                if san.san == San::Null {
                    current.dead = true;
                    continue;
                }
                let m = san.san.to_move(&current.pos).map_err(|_| {
                    format!(
                        "move {number} {} is illegal in {}",
                        quote(&san.to_string()),
                        Fen::from_position(&current.pos, shakmaty::EnPassantMode::Legal)
                    )
                })?;
                let uci = crate::notation::canonical(m);
                let mut next = current.pos.clone();
                next.play_unchecked(m);
                if max_ply.is_none_or(|max| current.ply < max) {
                    out.push((current.pos.clone(), uci, PositionKey::of(&next)));
                }
                current.before = Some(std::mem::replace(&mut current.pos, next));
                current.ply += 1;
            }
            MoveToken::Open => {
                let Some(before) = current.before.clone() else {
                    return Err(format!("a variation before any move, after move {number}"));
                };
                let variation = Frame { pos: before, before: None, ply: current.ply - 1, dead: current.dead };
                stack.push(std::mem::replace(&mut current, variation));
            }
            MoveToken::Close => {
                current = stack.pop().ok_or_else(|| format!("')' without its '(' after move {number}"))?;
            }
        }
    }
    // Variations left open at the end of the game are closed silently.
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interop::pgn_read::GameReader;

    fn first(text: &str) -> RawGame {
        GameReader::new(text.as_bytes()).next_game().unwrap().unwrap()
    }

    #[test]
    fn variations_branch_from_the_position_before_their_move() {
        let game = first("1. e4 e5 (1... c5 2. Nf3 (2. Nc3) d6) (1... e6) 2. Nf3 *");
        let moves = game_moves(&game, None).unwrap();
        let ucis: Vec<String> = moves.iter().map(|(_, u, _)| u.to_string()).collect();
        assert_eq!(ucis, ["e2e4", "e7e5", "c7c5", "g1f3", "b1c3", "d7d6", "e7e6", "g1f3"]);
        let after_e4 = PositionKey::of(&moves[1].0);
        assert_eq!(PositionKey::of(&moves[2].0), after_e4, "1... c5 replaces 1... e5");
        assert_eq!(PositionKey::of(&moves[6].0), after_e4);
    }

    #[test]
    fn max_ply_limits_every_line() {
        let game = first("1. e4 e5 (1... c5 2. Nf3) 2. Nf3 Nc6 *");
        let moves = game_moves(&game, Some(2)).unwrap();
        assert_eq!(moves.len(), 3);
    }

    #[test]
    fn malformed_games_say_why() {
        assert!(game_moves(&first("1. e4 e4 *"), None).unwrap_err().contains("illegal"));
        assert!(game_moves(&first("1. e4 Xy9 *"), None).unwrap_err().contains("not SAN"));
        assert!(game_moves(&first("[FEN \"8/8/8 w - - 0 1\"]\n1. e4 *"), None).unwrap_err().contains("bad FEN"));
        assert!(game_moves(&first("1. e4 ) e5 *"), None).unwrap_err().contains("without its '('"));
        assert!(game_moves(&first("[SetUp \"1\"]\n1. e4 *"), None).unwrap_err().contains("without a FEN"));
        assert!(game_moves(&first("[Variant \"Atomic\"]\n1. e4 *"), None).unwrap_err().contains("variant"));
    }

    #[test]
    fn fen_games_and_null_moves() {
        let game =
            first("[SetUp \"1\"]\n[FEN \"4k3/8/8/8/8/8/4P3/4K3 b - - 0 12\"]\n12... Kd7 13. e4 (13. -- Kc6 14. e4) *");
        let moves = game_moves(&game, None).unwrap();
        let ucis: Vec<String> = moves.iter().map(|(_, u, _)| u.to_string()).collect();
        assert_eq!(ucis, ["e8d7", "e2e4"]);
    }
}
