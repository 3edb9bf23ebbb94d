//! A game as UCI and PGN give it: a start position and the moves played from it ([`Line`]), the last position being
//! the root of whatever is asked about it and the earlier ones its history; with the helpers every layer above uses
//! to play moves and to quote what a user sent.
//!
//! ```
//! use deeptree::game::{Line, LineError, play_uci};
//!
//! let line = Line::parse(None, "e2e4 e7e5 g1f3")?;
//! assert_eq!((line.moves.len(), line.history_keys().len()), (3, 3));
//! let back = line.prefix(1);
//! assert_eq!(back.root(), &line.positions[1]);
//! let on = back.then(&"e7e5".parse()?).expect("legal");
//! assert_eq!(on.root(), &line.positions[2]);
//! assert!(play_uci(line.root(), &"e2e4".parse()?).is_none(), "no pawn on e2 any more");
//! // An illegal move is refused with its place in the line.
//! let refused = Line::parse(None, "e2e4 e2e4").unwrap_err();
//! assert!(matches!(refused, LineError::BadMove { ply: 1, .. }));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashSet;

use shakmaty::{Chess, Position, uci::UciMove};

pub use crate::notation::play_uci;
use crate::{
    model::key::PositionKey,
    notation::{canonical, parse_position, start_position},
};

/// The root's halfmove clock from which an engine's search of it may reach the fifty-move rule (100 half-moves), so
/// that its score is the game's and not the position's (see [`Line::history_shapes_score`]).
pub const HALFMOVES_NEAR_FIFTY: u32 = 60;

/// A root as UCI gives it: a start position and moves played from it. The last position is the root; the earlier
/// ones are its history.
#[derive(Debug, Clone)]
pub struct Line {
    pub start: Chess,
    /// In their stored (canonical) form, whichever castling notation they came in.
    pub moves: Vec<UciMove>,
    /// Positions from the start to the root, both included.
    pub positions: Vec<Chess>,
    /// Chess960: asked for, or implied by the FEN (Shredder-FEN, or castling rights only Chess960 has).
    pub chess960: bool,
}

/// A line that cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("bad FEN {}: {reason}", quote(fen))]
    BadFen { fen: String, reason: String },
    #[error("move {} ({}): {reason}", ply + 1, quote(uci))]
    BadMove { uci: String, ply: usize, reason: &'static str },
}

/// User input quoted in an error message: `'text'`, or for a longer text its first 80 characters and its length
/// (`'e2e4e2e4...' (5000000 characters)`), so that a message stays readable whatever was sent; control characters
/// are escaped as [`printable`] escapes them.
pub fn quote(text: &str) -> String {
    const SHOWN: usize = 80;
    match text.char_indices().nth(SHOWN) {
        None => format!("'{}'", printable(text)),
        Some((end, _)) => format!("'{}...' ({} characters)", printable(&text[..end]), text.chars().count()),
    }
}

/// User text (a label, a name, a line of a file) as it may be printed to a terminal: control characters (ESC, NUL,
/// BEL, a line end, DEL, C1 controls) and the characters that reorder text (bidirectional overrides) escaped as Rust
/// writes them (`\u{7}` for BEL, `\0`, `\n`), so that the text cannot move the cursor, change colours, clear the
/// screen or hide itself; everything else as it is.
///
/// ```
/// use deeptree::game::printable;
///
/// assert_eq!(printable("Sicilian, Najdorf"), "Sicilian, Najdorf");
/// let escape = char::from(27);
/// let shown = printable(&format!("{escape}[2Jgone\0\u{7}\n")).into_owned();
/// assert!(!shown.contains(escape) && shown.ends_with("[2Jgone\\0\\u{7}\\n"), "{shown}");
/// assert_eq!(printable("abc\u{202e}fed"), "abc\\u{202e}fed");
/// ```
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| {
        c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\0' {
            out.push_str("\\0");
        } else if escaped(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A path as [`printable`] writes user text (a file's name can hold control characters too).
pub fn printable_path(path: &std::path::Path) -> String {
    printable(&path.to_string_lossy()).into_owned()
}

/// A move of `pos` written in UCI (`g1f3`, castling either way) or SAN (`Nf3`, `O-O`), in its stored form; `None`
/// when it is neither, or not legal there.
pub fn parse_move(pos: &Chess, text: &str) -> Option<UciMove> {
    let text = text.trim();
    if let Ok(uci) = text.parse::<UciMove>()
        && let Some(m) = crate::notation::canonical_uci(pos, &uci)
    {
        return Some(m);
    }
    let san: shakmaty::san::SanPlus = text.parse().ok()?;
    san.san.to_move(pos).ok().map(canonical)
}

/// `moves` played from `pos` in SAN with move numbers (`1. e4 e5 2. Nf3`, or `3... Nc6 4. d4` from Black's move), up
/// to the first that is not legal where it is played.
///
/// ```
/// use deeptree::game::{Line, san_line};
///
/// let moves = ["e2e4", "e7e5", "g1f3", "b8c6"].map(|m| m.parse().unwrap());
/// assert_eq!(san_line(Line::start_position().root(), &moves), "1. e4 e5 2. Nf3 Nc6");
/// let after = Line::parse(None, "e2e4")?;
/// assert_eq!(san_line(after.root(), &moves[1..3]), "1... e5 2. Nf3");
/// # Ok::<_, deeptree::game::LineError>(())
/// ```
pub fn san_line(pos: &Chess, moves: &[UciMove]) -> String {
    let mut pos = pos.clone();
    let mut words = Vec::with_capacity(moves.len() * 3 / 2);
    for (i, uci) in moves.iter().enumerate() {
        let Ok(m) = uci.to_move(&pos) else { break };
        let number = pos.fullmoves().get();
        match (pos.turn().is_white(), i) {
            (true, _) => words.push(format!("{number}.")),
            (false, 0) => words.push(format!("{number}...")),
            (false, _) => {}
        }
        words.push(shakmaty::san::SanPlus::from_move_and_play_unchecked(&mut pos, m).to_string());
    }
    words.join(" ")
}

impl Line {
    /// Parses `fen` (the start position when `None`) and the space-separated UCI `moves`, checking each is legal.
    pub fn parse(fen: Option<&str>, moves: &str) -> Result<Line, LineError> {
        Line::parse_in(fen, moves, false)
    }

    /// As [`Line::parse`], with positions set up for Chess960 when `chess960` (or when the FEN implies it). Castling
    /// is accepted as the king's move and as the king taking its rook, and kept in the stored form.
    pub fn parse_in(fen: Option<&str>, moves: &str, chess960: bool) -> Result<Line, LineError> {
        let (start, chess960) = match fen.map(str::trim).filter(|f| !f.is_empty() && *f != "startpos") {
            None => (start_position(chess960), chess960),
            Some(fen) => {
                parse_position(fen, chess960).map_err(|reason| LineError::BadFen { fen: fen.to_owned(), reason })?
            }
        };
        let mut positions = vec![start.clone()];
        let mut parsed = Vec::new();
        for (ply, text) in moves.split_whitespace().enumerate() {
            let uci: UciMove =
                text.parse().map_err(|_| LineError::BadMove { uci: text.to_owned(), ply, reason: "not a UCI move" })?;
            let current = positions.last().cloned().unwrap_or_default();
            let m = uci.to_move(&current).map_err(|_| LineError::BadMove {
                uci: text.to_owned(),
                ply,
                reason: "illegal in its position",
            })?;
            let mut next = current;
            next.play_unchecked(m);
            positions.push(next);
            parsed.push(canonical(m));
        }
        Ok(Line { start, moves: parsed, positions, chess960 })
    }

    /// The standard start position with no moves.
    pub fn start_position() -> Line {
        Line { start: Chess::default(), moves: Vec::new(), positions: vec![Chess::default()], chess960: false }
    }

    pub fn root(&self) -> &Chess {
        self.positions.last().unwrap_or(&self.start)
    }

    /// Whether the game's history can shape an engine's score of the root (an engine sent the game's moves sees
    /// them), which is then the game's score and not the position's: a position since the last capture or pawn move
    /// has occurred twice already, so that a third occurrence within the search is a draw by repetition, or the
    /// root's halfmove clock is [`HALFMOVES_NEAR_FIFTY`] or more. Such a score is not stored: stored values are the
    /// positions' own, whatever line leads to them (docs/design.md §3.7).
    ///
    /// ```
    /// use deeptree::game::Line;
    ///
    /// // 1. Nf3 Nf6 2. Ng1 Ng8: the start position for the second time.
    /// assert!(Line::parse(None, "g1f3 g8f6 f3g1 f6g8")?.history_shapes_score());
    /// assert!(!Line::parse(None, "g1f3 g8f6 f3g1")?.history_shapes_score());
    /// // A capture or pawn move since ends what can repeat.
    /// assert!(!Line::parse(None, "g1f3 g8f6 f3g1 f6g8 g1f3 g8f6 e2e4")?.history_shapes_score());
    /// assert!(Line::parse(Some("4k3/8/8/8/8/8/4P3/4K3 w - - 60 80"), "")?.history_shapes_score());
    /// # Ok::<_, deeptree::game::LineError>(())
    /// ```
    pub fn history_shapes_score(&self) -> bool {
        let root = self.root();
        if root.halfmoves() >= HALFMOVES_NEAR_FIFTY {
            return true;
        }
        // Only positions since the last capture or pawn move can come again.
        let last = self.positions.len().saturating_sub(1);
        let since = last - usize::try_from(root.halfmoves()).unwrap_or(usize::MAX).min(last);
        let mut seen = HashSet::new();
        self.positions[since..].iter().map(PositionKey::of).any(|key| !seen.insert(key))
    }

    /// Keys of the positions before the root, oldest first.
    pub fn history_keys(&self) -> Vec<PositionKey> {
        self.positions[..self.positions.len().saturating_sub(1)].iter().map(PositionKey::of).collect()
    }

    /// The line's first `plies` moves (all of them when it has fewer).
    pub fn prefix(&self, plies: usize) -> Line {
        let plies = plies.min(self.moves.len());
        Line {
            start: self.start.clone(),
            moves: self.moves[..plies].to_vec(),
            positions: self.positions[..=plies].to_vec(),
            chess960: self.chess960,
        }
    }

    /// The line with one more move, `uci`, if it is legal at the root (kept in the stored form).
    pub fn then(&self, uci: &UciMove) -> Option<Line> {
        let m = uci.to_move(self.root()).ok()?;
        let mut next = self.root().clone();
        next.play_unchecked(m);
        let mut line = self.clone();
        line.moves.push(canonical(m));
        line.positions.push(next);
        Some(line)
    }
}
