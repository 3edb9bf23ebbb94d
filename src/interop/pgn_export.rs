//! `deeptree export pgn`: the tree from a root as one game with nested variations, best first.
//!
//! Every move that anything has valued carries a comment with its idea and alpha scores and the engine depth behind
//! them, e.g. `{idea +0.31 alpha +0.31 d18}` (`#3` / `#-2` for mates; for an imported move valued through its
//! child's evaluation, the depth of that evaluation). An imported move that nothing has valued yet has no comment:
//! it has no score to give. The main line follows the best move (by alpha) at every position; the other moves follow
//! as variations, best first, the moves nothing has valued last.
//! Every move carries its move number (`12...` for Black), as the export format wants after a comment; lines stay
//! within 80 columns; a root other than the standard start position gets `SetUp` and `FEN` tags.

use crate::game::Line;
use std::io::Write;

use shakmaty::{Chess, EnPassantMode, Position, fen::Fen, san::SanPlus, uci::UciMove};

use crate::{
    score::Score,
    search::show::{self, ShownMove, ShownNode, format_score},
    store::ReadView,
};

use super::InteropError;

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PgnSummary {
    /// Moves written (every occurrence in the game).
    pub moves: u64,
    /// Deepest ply below the root.
    pub plies: u64,
}

/// A score for a comment: pawns with a sign, `#n` for mates, `?` for a placeholder (a move valued by a repetition
/// alone has an alpha score but no idea score).
pub fn comment_score(score: Score) -> String {
    if !score.is_valued() { "?".to_owned() } else { format_score(score) }
}

/// The comment of one move: `idea +0.31 alpha +0.31 d18`.
pub fn move_comment(m: &ShownMove) -> String {
    format!("idea {} alpha {} d{}", comment_score(m.idea), comment_score(m.alpha), m.depth)
}

/// Writes the tree from `line`'s root, `depth` plies deep, as one PGN game.
pub fn export_pgn(
    view: &ReadView<'_>,
    line: &Line,
    depth: u8,
    out: &mut impl Write,
) -> Result<PgnSummary, InteropError> {
    let root = line.root();
    let tree = show::tree(view, root, &line.history_keys(), depth)?;
    let text = game_text(root, &tree);
    out.write_all(text.as_bytes()).map_err(|e| InteropError::Invalid(format!("writing the PGN: {e}")))?;
    let mut summary = PgnSummary::default();
    count(&tree, 1, &mut summary);
    Ok(summary)
}

fn count(node: &ShownNode, ply: u64, summary: &mut PgnSummary) {
    for m in &node.moves {
        summary.moves += 1;
        summary.plies = summary.plies.max(ply);
        if let Some(child) = &m.child {
            count(child, ply + 1, summary);
        }
    }
}

/// The whole game: tags, a blank line, the movetext, a blank line.
pub fn game_text(root: &Chess, tree: &ShownNode) -> String {
    let fen = Fen::from_position(root, EnPassantMode::Legal).to_string();
    let mut out = String::new();
    for (name, value) in [
        ("Event", "deeptree analysis"),
        ("Site", "?"),
        ("Date", "????.??.??"),
        ("Round", "?"),
        ("White", "?"),
        ("Black", "?"),
        ("Result", "*"),
    ] {
        out.push_str(&format!("[{name} \"{value}\"]\n"));
    }
    if root.castles().mode() == shakmaty::CastlingMode::Chess960 {
        out.push_str("[Variant \"Chess960\"]\n");
    }
    if fen != Fen::from_position(&Chess::default(), EnPassantMode::Legal).to_string() {
        out.push_str("[SetUp \"1\"]\n");
        out.push_str(&format!("[FEN \"{fen}\"]\n"));
    }
    out.push_str("[Annotator \"deeptree\"]\n\n");
    let mut words: Vec<String> = Vec::new();
    if let Some(settled) = tree.settled_depth {
        words.push(format!("{{settled depth {settled}}}"));
    }
    write_moves(&mut words, tree, root);
    words.push("*".to_owned());
    wrap(&mut out, &words, 79);
    out.push_str("\n\n");
    out
}

fn number(fullmove: u32, white: bool) -> String {
    if white { format!("{fullmove}.") } else { format!("{fullmove}...") }
}

/// Writes one move with its number and comment; returns the position after it.
fn push_move(words: &mut Vec<String>, m: &ShownMove, pos: &Chess) -> Option<Chess> {
    let uci: UciMove = m.uci.parse().ok()?;
    let mv = uci.to_move(pos).ok()?;
    let number = number(pos.fullmoves().get(), pos.turn().is_white());
    // SAN with its check or mate mark, as the export format wants.
    words.push(format!("{number} {}", SanPlus::from_move(pos.clone(), mv)));
    if m.is_valued() {
        words.push(format!("{{{}}}", move_comment(m)));
    }
    let mut child = pos.clone();
    child.play_unchecked(mv);
    Some(child)
}

fn write_moves(words: &mut Vec<String>, node: &ShownNode, pos: &Chess) {
    let Some((main, alternatives)) = node.moves.split_first() else { return };
    let Some(after_main) = push_move(words, main, pos) else { return };
    for alternative in alternatives {
        words.push("(".to_owned());
        if let Some(after) = push_move(words, alternative, pos)
            && let Some(child) = &alternative.child
        {
            write_moves(words, child, &after);
        }
        words.push(")".to_owned());
    }
    if let Some(child) = &main.child {
        write_moves(words, child, &after_main);
    }
}

/// Joins words into lines of at most `width` columns (a comment may be broken between its words; a move number
/// stays with its move). An opening parenthesis sticks to the word after it, a closing one to the word before it
/// when it fits.
pub(super) fn wrap(out: &mut String, words: &[String], width: usize) {
    let mut line = String::new();
    let mut open = false;
    for word in words {
        let pieces: Vec<&str> = if word.starts_with('{') { word.split(' ').collect() } else { vec![word.as_str()] };
        for piece in pieces {
            if piece == "(" {
                open = true;
                continue;
            }
            let text = if std::mem::take(&mut open) { format!("({piece}") } else { piece.to_owned() };
            let space = !line.is_empty() && piece != ")";
            if !line.is_empty() && line.len() + usize::from(space) + text.len() > width {
                out.push_str(&line);
                out.push('\n');
                line.clear();
            } else if space {
                line.push(' ');
            }
            line.push_str(&text);
        }
    }
    out.push_str(&line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_lines_short_and_parentheses_tight() {
        let words: Vec<String> =
            ["1. e4", "{idea +0.31 alpha +0.31 d18}", "(", "1. d4", ")", "*"].iter().map(|s| s.to_string()).collect();
        let mut out = String::new();
        wrap(&mut out, &words, 79);
        assert_eq!(out, "1. e4 {idea +0.31 alpha +0.31 d18} (1. d4) *");
        let mut narrow = String::new();
        wrap(&mut narrow, &words, 20);
        assert!(narrow.lines().count() > 1 && narrow.lines().all(|l| l.len() <= 20), "{narrow}");
    }
}
