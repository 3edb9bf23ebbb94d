//! The tree from a root, with both scores and the depth of every move.

use crate::game::play_uci;
use serde::Serialize;
use shakmaty::{Chess, Position, san::San, uci::UciMove};

use crate::{
    score::{Bound, Score},
    store::{
        ReadView, StoreError,
        key::PositionKey,
        marks::{MarkKind, MarkSource},
        node::{Node, Steering},
    },
};

use super::alpha::{Unroll, alpha_of_edge};
use crate::values::{graph::StoreGraph, idea::idea_of_edge};

/// A position of the shown tree.
#[derive(Debug, Clone, Serialize)]
pub struct ShownNode {
    pub fen: String,
    pub key: String,
    pub settled_depth: Option<u8>,
    /// The software depth a pass from this position would settle at once, with what the store holds (at least
    /// `settled_depth`; positions below an analysed root are known deeper than their own settled depth), when above
    /// 0. Only the shown root has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_depth: Option<u8>,
    pub moves: Vec<ShownMove>,
    /// Legal moves with no edge (never searched on their own).
    pub unsearched: usize,
    /// The engine-depth upper bound of those moves, when one was found.
    pub rest: Option<ShownBound>,
    /// What screening found for them (a shallower bound), when it screened them.
    pub screen: Option<ShownScreen>,
    /// The analyst's marks on this position's moves. An excluded move is here and not among `moves`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<ShownMark>,
}

/// A mark on a move of a shown position (see [`crate::store::marks`]).
#[derive(Debug, Clone, Serialize)]
pub struct ShownMark {
    #[serde(rename = "move")]
    pub uci: String,
    pub san: String,
    pub kind: MarkKind,
    /// Where the mark was made, by whom and when (milliseconds since 1970, UTC); `None` where the tree holds the
    /// mark on the move's edge without its description (never written so by deeptree; a damaged entry).
    pub source: Option<MarkSource>,
    pub user: Option<String>,
    pub time: Option<u64>,
}

/// An upper bound for the moves without an edge.
#[derive(Debug, Clone, Serialize)]
pub struct ShownBound {
    pub score: Score,
    pub depth: u8,
}

/// A screen of the moves without an edge: the best of them at a depth shallower than the engine depth.
#[derive(Debug, Clone, Serialize)]
pub struct ShownScreen {
    pub score: Score,
    pub depth: u8,
    /// How many moves it bounded; it is `current` while exactly those are still without an edge.
    pub moves: u8,
    pub current: bool,
}

/// A move of the shown tree, best first by alpha score, the moves nothing has valued yet last.
///
/// An imported move that no engine has scored holds the lowest score, [`Score::NOT_VALUED`], as a placeholder (see
/// [`crate::interop`]): no real move leaves its own side mated. In JSON every such score is `null`, never a mate.
#[derive(Debug, Clone)]
pub struct ShownMove {
    pub uci: String,
    pub san: String,
    /// Path-independent value (a move back into a position of the shown line is valued by its engine score).
    pub idea: Score,
    /// Value from the root with its history: a repetition is a draw.
    pub alpha: Score,
    /// Engine depth behind the move's value: its own score's, or for an imported move that no engine has scored
    /// itself but whose position has been evaluated, that evaluation's.
    pub depth: u8,
    /// The engine score of the move and its bound.
    pub engine: Score,
    pub bound: &'static str,
    pub imported: bool,
    /// Included by the analyst: walked whatever the move distance.
    pub included: bool,
    pub child: Option<Box<ShownNode>>,
}

/// A score, or `None` for the placeholder of a move nothing has valued.
fn valued(score: Score) -> Option<Score> {
    score.is_valued().then_some(score)
}

/// The one ranking of a position's moves, used by `show`, the exports, the tree's answer and its `info` lines: the
/// greatest key is the best move. Moves something has valued (an idea or alpha score other than the placeholder)
/// come before those nothing has, then the higher alpha score, then the higher idea score.
pub fn ranking(idea: Score, alpha: Score) -> (bool, Score, Score) {
    (valued(idea).is_some() || valued(alpha).is_some(), alpha, idea)
}

impl ShownMove {
    /// Has anything valued the move yet (an engine score of its own, its position's evaluation, a repetition)?
    pub fn is_valued(&self) -> bool {
        ranking(self.idea, self.alpha).0
    }
}

impl Serialize for ShownMove {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let searched = valued(self.engine).is_some();
        let mut out = serializer.serialize_struct("ShownMove", 10)?;
        out.serialize_field("uci", &self.uci)?;
        out.serialize_field("san", &self.san)?;
        out.serialize_field("idea", &valued(self.idea))?;
        out.serialize_field("alpha", &valued(self.alpha))?;
        out.serialize_field("depth", &self.is_valued().then_some(self.depth))?;
        out.serialize_field("engine", &valued(self.engine))?;
        out.serialize_field("bound", &searched.then_some(self.bound))?;
        out.serialize_field("imported", &self.imported)?;
        if self.included {
            out.serialize_field("included", &true)?;
        } else {
            out.skip_field("included")?;
        }
        out.serialize_field("child", &self.child)?;
        out.end()
    }
}

/// Builds the tree from `root` (reached after `history`) down to `depth` plies.
pub fn tree(view: &ReadView<'_>, root: &Chess, history: &[PositionKey], depth: u8) -> Result<ShownNode, StoreError> {
    let graph = StoreGraph::new(view);
    let root_key = PositionKey::of(root);
    let mut path: Vec<PositionKey> = history.to_vec();
    path.push(root_key);
    let mut line = vec![root_key];
    let node = view.node(root_key)?;
    let shown = shown_node(view, &graph, root, root_key, node.as_ref(), depth, &mut path, &mut line)?;
    if let Some(e) = graph.take_error() {
        return Err(e);
    }
    Ok(shown)
}

#[allow(clippy::too_many_arguments)]
fn shown_node(
    view: &ReadView<'_>,
    graph: &StoreGraph<'_, '_>,
    pos: &Chess,
    key: PositionKey,
    node: Option<&Node>,
    depth: u8,
    path: &mut Vec<PositionKey>,
    line: &mut Vec<PositionKey>,
) -> Result<ShownNode, StoreError> {
    let mut moves = Vec::new();
    if let Some(node) = node {
        let mut budget = Unroll::default();
        // An excluded move is no move of the tree: it is shown among the marks only.
        for edge in node.edges.iter().filter(|e| !e.is_excluded()) {
            let Some(child_pos) = play_uci(pos, &edge.uci) else { continue };
            let child_key = PositionKey::of(&child_pos);
            let alpha = alpha_of_edge(graph, child_key, edge.score, path, &mut budget);
            let idea = idea_of_edge(graph, child_key, edge.score, line);
            let repeats = path.contains(&child_key);
            // An imported move that no engine has scored itself takes its value from its position's evaluation.
            let through_child = valued(edge.score).is_none() && valued(idea).is_some();
            let child_node = if (depth > 1 && !repeats) || through_child { view.node(child_key)? } else { None };
            let value_depth = match child_node.as_ref().and_then(|n| n.eval.as_ref()) {
                Some(eval) if through_child => eval.depth,
                _ => edge.depth,
            };
            let child = if depth > 1 && !repeats {
                match child_node {
                    Some(child_node) if !child_node.edges.is_empty() => {
                        path.push(child_key);
                        line.push(child_key);
                        let shown =
                            shown_node(view, graph, &child_pos, child_key, Some(&child_node), depth - 1, path, line)?;
                        path.pop();
                        line.pop();
                        Some(Box::new(shown))
                    }
                    _ => None,
                }
            } else {
                None
            };
            moves.push(ShownMove {
                uci: edge.uci.to_string(),
                san: san_of(pos, &edge.uci),
                idea,
                alpha,
                depth: value_depth,
                engine: edge.score,
                bound: bound_name(edge.bound),
                imported: edge.imported,
                included: edge.steering == Some(Steering::Included),
                child,
            });
        }
    }
    moves.sort_by_key(|m| std::cmp::Reverse(ranking(m.idea, m.alpha)));
    let unsearched = pos
        .legal_moves()
        .iter()
        .filter(|m| node.is_none_or(|n| n.edge(&crate::notation::canonical(**m)).is_none()))
        .count();
    Ok(ShownNode {
        fen: shakmaty::fen::Fen::from_position(pos, shakmaty::EnPassantMode::Legal).to_string(),
        key: key.to_string(),
        settled_depth: node.and_then(|n| n.settled_depth),
        known_depth: None,
        moves,
        unsearched,
        rest: node
            .and_then(|n| n.rest)
            .filter(|_| unsearched > 0)
            .map(|r| ShownBound { score: r.score, depth: r.depth }),
        screen: node.and_then(|n| n.screen).filter(|_| unsearched > 0).map(|s| ShownScreen {
            score: s.score,
            depth: s.depth,
            moves: s.moves,
            current: usize::from(s.moves) == unsearched,
        }),
        marks: shown_marks(view, pos, key, node)?,
    })
}

/// The marks on the moves of `pos`, as its record's edges carry them, with who made them from the meta entries.
fn shown_marks(
    view: &ReadView<'_>,
    pos: &Chess,
    key: PositionKey,
    node: Option<&Node>,
) -> Result<Vec<ShownMark>, StoreError> {
    let Some(node) = node.filter(|n| n.edges.iter().any(|e| e.steering.is_some())) else { return Ok(Vec::new()) };
    let described = view.marks_at(key)?;
    Ok(node
        .edges
        .iter()
        .filter_map(|edge| {
            let kind = match edge.steering? {
                Steering::Excluded => MarkKind::Exclude,
                Steering::Included => MarkKind::Include,
            };
            let mark = described.iter().find(|m| m.uci == edge.uci);
            Some(ShownMark {
                uci: edge.uci.to_string(),
                san: san_of(pos, &edge.uci),
                kind,
                source: mark.map(|m| m.source),
                user: mark.map(|m| m.user.clone()),
                time: mark.map(|m| m.time),
            })
        })
        .collect())
}

fn bound_name(bound: Bound) -> &'static str {
    bound.as_str()
}

/// SAN of a move in `pos`, or its UCI text if it is not legal there.
pub fn san_of(pos: &Chess, uci: &UciMove) -> String {
    uci.to_move(pos).map(|m| San::from_move(pos, m).to_string()).unwrap_or_else(|_| uci.to_string())
}

/// Centipawns as pawns with a sign (`+0.31`), or `#3` / `#-2` for mates; `?` for a move nothing has valued yet
/// (an imported move keeps the lowest score as a placeholder: no real move leaves its own side mated).
pub fn format_score(score: Score) -> String {
    if !score.is_valued() {
        return "?".to_owned();
    }
    match score.as_uci_mate() {
        Some(m) => format!("#{m}"),
        None => format!("{:+.2}", f64::from(score.value()) / 100.0),
    }
}

/// The tree as indented text, one move a line.
pub fn render_text(root: &ShownNode, ply_offset: usize, white_to_move: bool) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{}  (key {}){}\n",
        root.fen,
        root.key,
        root.settled_depth.map(|d| format!("  settled depth {d}")).unwrap_or_default()
            + &root
                .known_depth
                .filter(|&d| Some(d) != root.settled_depth)
                .map(|d| format!("  known to software depth {d}"))
                .unwrap_or_default()
    ));
    render_moves(&mut out, root, 0, ply_offset, white_to_move);
    out
}

/// The line that says what bounds a node's moves without an edge, when anything does.
fn render_unsearched(out: &mut String, node: &ShownNode, indent: usize) {
    let mut parts = Vec::new();
    if let Some(rest) = &node.rest {
        parts.push(format!("at most {} at depth {}", format_score(rest.score), rest.depth));
    }
    if let Some(screen) = &node.screen {
        parts.push(format!(
            "screened at depth {}: {}{}",
            screen.depth,
            format_score(screen.score),
            if screen.current {
                String::new()
            } else {
                format!(" (of {} moves, before some were searched)", screen.moves)
            }
        ));
    }
    if !parts.is_empty() {
        out.push_str(&format!(
            "{:indent$}({} moves unsearched: {})\n",
            "",
            node.unsearched,
            parts.join("; "),
            indent = indent * 2
        ));
    }
}

fn render_moves(out: &mut String, node: &ShownNode, indent: usize, ply: usize, white: bool) {
    for m in &node.moves {
        let number = ply / 2 + 1;
        let label = if white { format!("{number}. {}", m.san) } else { format!("{number}... {}", m.san) };
        out.push_str(&format!(
            "{:indent$}{:<14} idea {:>7}  alpha {:>7}  depth {:>2}{}\n",
            "",
            label,
            format_score(m.idea),
            format_score(m.alpha),
            m.depth,
            match (m.imported, m.included) {
                (_, true) => "  (included)",
                (true, false) => "  (line)",
                (false, false) => "",
            },
            indent = indent * 2
        ));
        if let Some(child) = &m.child {
            render_moves(out, child, indent + 1, ply + 1, !white);
        }
    }
    render_unsearched(out, node, indent);
    render_marks(out, node, indent, ply, white);
}

/// The line for each mark of a node, an excluded move's among them (it is not among the moves).
fn render_marks(out: &mut String, node: &ShownNode, indent: usize, ply: usize, white: bool) {
    for mark in &node.marks {
        let number = ply / 2 + 1;
        let label = if white { format!("{number}. {}", mark.san) } else { format!("{number}... {}", mark.san) };
        let made = match (&mark.user, mark.source, mark.time) {
            (Some(user), Some(source), Some(time)) => {
                format!(" by {user} ({source}) at {}", crate::store::marks::utc_text(time))
            }
            _ => String::new(),
        };
        out.push_str(&format!("{:indent$}{:<14} {}d{made}\n", "", label, mark.kind, indent = indent * 2));
    }
}
