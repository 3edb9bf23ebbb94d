//! Which positions an export covers, and the moves of one position ranked as `deeptree show` ranks them.

use crate::game::{Line, play_uci};
use std::collections::VecDeque;

use shakmaty::Chess;

use crate::{
    search::show::{self, ShownMove, ShownNode},
    store::{
        ReadView,
        key::{KeySet, PositionKey},
    },
};

use super::InteropError;

/// The positions of an export: every stored one, or those reachable from a root.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Every position of the store.
    All,
    /// The positions reachable through stored moves from `line`'s root, down to `depth` plies below it (no limit
    /// when `None`).
    From { line: Line, depth: Option<u8> },
}

/// The stored positions of `scope` that have moves or an evaluation, in key order, each with a position to play
/// moves from (for a root-reached position, with its move counters as reached).
pub fn positions(view: &ReadView<'_>, scope: &Scope) -> Result<Vec<(PositionKey, Chess)>, InteropError> {
    let mut out = Vec::new();
    match scope {
        Scope::All => {
            for item in view.nodes()? {
                let (key, node) = item?;
                if node.edges.is_empty() && node.eval.is_none() {
                    continue;
                }
                match node.position.to_position() {
                    Some(pos) => out.push((key, pos)),
                    None => log::warn!("position {key} does not unpack; left out"),
                }
            }
        }
        Scope::From { line, depth } => {
            let root = line.root().clone();
            let mut seen = KeySet::default();
            let mut queue = VecDeque::new();
            seen.insert(PositionKey::of(&root));
            queue.push_back((root, 0u32));
            while let Some((pos, ply)) = queue.pop_front() {
                let key = PositionKey::of(&pos);
                let Some(node) = view.node(key)? else { continue };
                if node.edges.is_empty() && node.eval.is_none() {
                    continue;
                }
                if depth.is_none_or(|d| ply < u32::from(d)) {
                    // Not through a move the analyst excluded.
                    for edge in node.edges.iter().filter(|e| !e.is_excluded()) {
                        if let Some(child) = play_uci(&pos, &edge.uci)
                            && seen.insert(PositionKey::of(&child))
                        {
                            queue.push_back((child, ply + 1));
                        }
                    }
                }
                out.push((key, pos));
            }
            out.sort_by_key(|(key, _)| *key);
        }
    }
    Ok(out)
}

/// The moves of `pos` ranked as `deeptree show --fen` ranks them (best first by alpha score from this position,
/// then by idea score), with no game history.
pub fn ranked(view: &ReadView<'_>, pos: &Chess) -> Result<ShownNode, InteropError> {
    Ok(show::tree(view, pos, &[], 1)?)
}

/// The best move of a ranked position, if it has one that anything has valued.
pub fn best(node: &ShownNode) -> Option<&ShownMove> {
    node.moves.first().filter(|m| m.alpha.is_valued())
}
