//! `deeptree export html`: one self-contained page to browse the tree from a root.
//!
//! The page needs no network: its style, script and data (the tree as JSON) are inline, and the board is an SVG
//! drawn with Unicode chess pieces. It shows the current position, its moves best first with both scores and the
//! depth of each score; a click on a move goes down, the path at the top (breadcrumbs) goes back up. The path is kept
//! in the address fragment (`tree.html#e2e4,e7e5`), so a position can be linked to and is restored on reload. Keys:
//! left arrow (or Backspace) goes up, right arrow follows the best move.

use crate::game::{Line, play_uci};
use std::io::Write;

use serde::Serialize;
use shakmaty::{Chess, EnPassantMode, Position, fen::Fen, uci::UciMove};

use crate::{
    search::show::{self, ShownNode},
    store::ReadView,
};

use super::{
    InteropError,
    pgn_export::{PgnSummary, comment_score},
};

const TEMPLATE: &str = include_str!("tree.html");

#[derive(Serialize)]
struct PageNode {
    fen: String,
    /// Full move number and side to move, for move labels.
    fullmove: u32,
    white: bool,
    settled: Option<u8>,
    moves: Vec<PageMove>,
}

#[derive(Serialize)]
struct PageMove {
    uci: String,
    san: String,
    idea: String,
    alpha: String,
    /// Centipawns of the alpha score for the bar (mates clamped to ±1000, `None` when nothing valued it).
    alpha_cp: Option<i32>,
    /// The engine depth behind the scores, `?` when nothing valued the move.
    depth: String,
    imported: bool,
    child: PageNode,
}

#[derive(Serialize)]
struct PageData {
    title: String,
    root: PageNode,
}

fn page_node(pos: &Chess, shown: Option<&ShownNode>, summary: &mut PgnSummary, ply: u64) -> PageNode {
    let mut moves = Vec::new();
    if let Some(shown) = shown {
        for m in &shown.moves {
            let Some(child) = m.uci.parse::<UciMove>().ok().and_then(|u| play_uci(pos, &u)) else { continue };
            summary.moves += 1;
            summary.plies = summary.plies.max(ply);
            let alpha_cp = (m.alpha.is_valued()).then(|| match m.alpha.as_uci_mate() {
                Some(n) if n > 0 => 1000,
                Some(_) => -1000,
                None => m.alpha.value().clamp(-1000, 1000),
            });
            moves.push(PageMove {
                uci: m.uci.clone(),
                san: m.san.clone(),
                idea: comment_score(m.idea),
                alpha: comment_score(m.alpha),
                alpha_cp,
                depth: if m.is_valued() { m.depth.to_string() } else { "?".to_owned() },
                imported: m.imported,
                child: page_node(&child, m.child.as_deref(), summary, ply + 1),
            });
        }
    }
    PageNode {
        fen: Fen::from_position(pos, EnPassantMode::Legal).to_string(),
        fullmove: pos.fullmoves().get(),
        white: pos.turn().is_white(),
        settled: shown.and_then(|s| s.settled_depth),
        moves,
    }
}

/// The page's text for the tree from `line`'s root, `depth` plies deep.
pub fn page(view: &ReadView<'_>, line: &Line, depth: u8) -> Result<(String, PgnSummary), InteropError> {
    let root = line.root();
    let tree = show::tree(view, root, &line.history_keys(), depth)?;
    let mut summary = PgnSummary::default();
    let data = PageData {
        title: format!("deeptree: {}", Fen::from_position(root, EnPassantMode::Legal)),
        root: page_node(root, Some(&tree), &mut summary, 1),
    };
    let json = serde_json::to_string(&data).map_err(|e| InteropError::Invalid(e.to_string()))?;
    // Inside a <script> element, "<" must not start "</script>" or "<!--": JSON allows it escaped.
    let json = json.replace('<', "\\u003c");
    let text = TEMPLATE.replace("/*TREE_DATA*/", &json).replace("<!--TITLE-->", &html_escape(&data.title));
    Ok((text, summary))
}

/// Writes the page.
pub fn export_html(
    view: &ReadView<'_>,
    line: &Line,
    depth: u8,
    out: &mut impl Write,
) -> Result<PgnSummary, InteropError> {
    let (text, summary) = page(view, line, depth)?;
    out.write_all(text.as_bytes()).map_err(|e| InteropError::Invalid(format!("writing the page: {e}")))?;
    Ok(summary)
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
