//! Roots for `analyze --roots FILE`: the positions of a book to grow, from an EPD file (every line a root) or a PGN
//! file (every game's final position a root, the game's main line the way to it).
//!
//! ```
//! use deeptree::interop::roots::{Source, parse_epd_roots, parse_pgn_roots};
//!
//! let epd = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - id \"1. e4\";\nnot a position\n";
//! let (roots, skipped) = parse_epd_roots(epd.as_bytes(), false)?;
//! assert_eq!((roots.len(), skipped[0].source), (1, Source::Line(2)));
//!
//! let pgn = "1. d4 d5 2. c4 (2. Nf3) e6 *\n\n1. e4 e4 *\n";
//! let (roots, skipped) = parse_pgn_roots(pgn.as_bytes(), false)?;
//! assert_eq!(roots[0].line.moves.len(), 4, "the main line, without the variation");
//! assert_eq!(skipped[0].source, Source::Game(2));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! The format is told by the file's extension (`.pgn`; anything else is EPD), or, for a file without one, by its
//! first line that is not blank (a `[` tag or a move number means PGN). EPD operations (`bm`, `ce`, `id` ...) are
//! ignored: use `import` to store them. A line or game that cannot be read is reported with its number and skipped.
//! A root met again (the same position reached by the same line) adds to its weight: a root given n times is of
//! weight n, as n games from it would be (a PGN of games played counts each opening as often as it was played).
//!
//! ```
//! use deeptree::interop::roots::parse_pgn_roots;
//!
//! let pgn = "1. e4 c5 *\n\n1. d4 d5 *\n\n1. e4 c5 *\n";
//! let (roots, skipped) = parse_pgn_roots(pgn.as_bytes(), false)?;
//! assert_eq!(roots.iter().map(|r| r.weight).collect::<Vec<_>>(), [2, 1]);
//! assert!(skipped.is_empty());
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use crate::game::{Line, quote};
use std::{
    collections::HashMap,
    fmt,
    fs::File,
    io::{BufRead, BufReader, Read},
    path::Path,
};

use shakmaty::{CastlingMode, Chess, Position, san::San, uci::UciMove};

use crate::store::key::PositionKey;

use super::{
    InteropError, epd,
    lines::{BoundedLines, MAX_LINE_BYTES},
    pgn_import::game_start_in,
    pgn_read::{GameReader, MoveToken, RawGame},
};

/// Where in the file a root comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Line N of an EPD file (from 1).
    Line(u64),
    /// Game N of a PGN file (from 1).
    Game(u64),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Line(n) => write!(f, "line {n}"),
            Source::Game(n) => write!(f, "game {n}"),
        }
    }
}

/// One root: the line from a start position to it.
#[derive(Debug, Clone)]
pub struct Root {
    pub line: Line,
    /// Where it was first given.
    pub source: Source,
    /// How many times it was given (at least 1).
    pub weight: u32,
}

/// A line or game left out, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SkippedRoot {
    pub source: Source,
    pub error: String,
}

/// Reads the roots of `path`, EPD or PGN (see the module documentation).
pub fn read_roots(path: &Path, chess960: bool) -> Result<(Vec<Root>, Vec<SkippedRoot>), InteropError> {
    // A directory opens, then fails at its first read: refused by its metadata instead (a FIFO is not opened here).
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(InteropError::Invalid(format!("{}: is a directory", path.display())));
    }
    let open = || File::open(path).map_err(|e| InteropError::Invalid(format!("{}: {e}", path.display())));
    let extension = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let pgn = match extension.as_deref() {
        Some("pgn") => true,
        Some(_) => false,
        None => {
            let mut first = String::new();
            for line in BoundedLines::new(BufReader::new(open()?), MAX_LINE_BYTES) {
                let (_, line) = line.map_err(|e| InteropError::Invalid(format!("{}: {e}", path.display())))?;
                // Only the kind of file is sought here: a line that is not text is read as well as it goes.
                let line = String::from_utf8_lossy(&line);
                if !line.trim().is_empty() {
                    first = line.trim().to_owned();
                    break;
                }
            }
            first.starts_with('[')
                || first.split('.').next().is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        }
    };
    let read =
        if pgn { parse_pgn_roots(open()?, chess960) } else { parse_epd_roots(BufReader::new(open()?), chess960) };
    read.map_err(|e| match e {
        InteropError::Invalid(message) => InteropError::Invalid(format!("{}: {message}", path.display())),
        other => other,
    })
}

/// The roots of an EPD text: every line a position (blank lines and `#` comments skipped).
pub fn parse_epd_roots(input: impl BufRead, chess960: bool) -> Result<(Vec<Root>, Vec<SkippedRoot>), InteropError> {
    let mut roots = Roots::default();
    for line in BoundedLines::new(input, MAX_LINE_BYTES) {
        let (number, line) = line.map_err(|e| InteropError::Invalid(e.to_string()))?;
        let source = Source::Line(number);
        // A line that is not UTF-8 text (a binary file, a mixed one) is skipped with its number; the rest are read.
        let Ok(line) = String::from_utf8(line) else {
            roots.skip(source, "not UTF-8 text".to_owned());
            continue;
        };
        let line = line.strip_suffix('\r').unwrap_or(&line);
        match epd::parse_line_in(line, chess960) {
            Ok(None) => {}
            Ok(Some(record)) => {
                let chess960 = chess960 || record.position.castles().mode() == CastlingMode::Chess960;
                let position = record.position;
                let line = Line { start: position.clone(), moves: Vec::new(), positions: vec![position], chess960 };
                roots.add(line, source);
            }
            Err(error) => roots.skip(source, error),
        }
    }
    Ok(roots.finish())
}

/// The roots of a PGN text: every game's final position, its main line the way there (variations are ignored).
pub fn parse_pgn_roots(input: impl Read, chess960: bool) -> Result<(Vec<Root>, Vec<SkippedRoot>), InteropError> {
    let mut roots = Roots::default();
    let mut games = GameReader::new(input);
    while let Some(game) = games.next_game().map_err(|e| InteropError::Invalid(format!("reading PGN: {e}")))? {
        let source = Source::Game(game.number);
        match main_line(&game, chess960) {
            Ok(line) => roots.add(line, source),
            Err(error) => roots.skip(source, error),
        }
    }
    Ok(roots.finish())
}

/// A game's main line, from its start position.
pub fn main_line(game: &RawGame, chess960: bool) -> Result<Line, String> {
    if let Some(error) = &game.error {
        return Err(error.clone());
    }
    let start = game_start_in(game, chess960)?;
    let chess960 = chess960 || start.castles().mode() == CastlingMode::Chess960;
    let mut positions = vec![start.clone()];
    let mut moves: Vec<UciMove> = Vec::new();
    let mut nesting = 0usize;
    let mut number = 0usize;
    for token in &game.moves {
        match token {
            MoveToken::Open => nesting += 1,
            MoveToken::Close => nesting = nesting.saturating_sub(1),
            MoveToken::San(san) => {
                number += 1;
                if nesting > 0 {
                    continue;
                }
                if san.san == San::Null {
                    return Err(format!("move {number} is a null move: the main line cannot be followed"));
                }
                let current: &Chess = positions.last().unwrap_or(&start);
                let m = san
                    .san
                    .to_move(current)
                    .map_err(|_| format!("move {number} {} is illegal", quote(&san.to_string())))?;
                let mut next = current.clone();
                next.play_unchecked(m);
                moves.push(crate::notation::canonical(m));
                positions.push(next);
            }
        }
    }
    Ok(Line { start, moves, positions, chess960 })
}

/// Roots as they are read, each position once.
#[derive(Default)]
struct Roots {
    roots: Vec<Root>,
    skipped: Vec<SkippedRoot>,
    /// The roots so far, by their position and the positions before them (the same position by another line is
    /// another root: its repetitions differ), with their place in `roots`.
    seen: HashMap<Vec<PositionKey>, usize>,
}

impl Roots {
    /// A root, or one more of its weight where it was given before.
    fn add(&mut self, line: Line, source: Source) {
        let keys: Vec<PositionKey> = line.positions.iter().map(PositionKey::of).collect();
        match self.seen.get(&keys) {
            Some(&i) => self.roots[i].weight += 1,
            None => {
                self.seen.insert(keys, self.roots.len());
                self.roots.push(Root { line, source, weight: 1 });
            }
        }
    }

    fn skip(&mut self, source: Source, error: String) {
        self.skipped.push(SkippedRoot { source, error });
    }

    fn finish(self) -> (Vec<Root>, Vec<SkippedRoot>) {
        (self.roots, self.skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epd_roots_skip_bad_lines_with_their_numbers() {
        let text = "# openings\n\nrnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq - id \"d4\";\n\
                    rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n\
                    8/8/8 w - -\n\
                    rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1\n";
        let (roots, skipped) = parse_epd_roots(text.as_bytes(), false).unwrap();
        assert_eq!(roots.iter().map(|r| r.source).collect::<Vec<_>>(), [Source::Line(3), Source::Line(6)]);
        assert!(roots.iter().all(|r| r.line.moves.is_empty() && r.line.positions.len() == 1));
        // The same position again adds to its weight; the line that is no position is skipped.
        assert_eq!(roots.iter().map(|r| r.weight).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(skipped.iter().map(|s| s.source).collect::<Vec<_>>(), [Source::Line(5)]);
    }

    #[test]
    fn pgn_roots_follow_the_main_line_and_skip_bad_games_with_their_numbers() {
        let text = "[Event \"a\"]\n\n1. e4 c5 (1... e5 2. Nf3) 2. Nf3 d6 {Najdorf next} *\n\n\
                    [Event \"b\"]\n\n1. e4 e5 2. Ke2?! Ke7 *\n\n\
                    [Event \"c\"]\n\n1. d4 d5 2. Bf4 -- *\n\n\
                    [Event \"d\"]\n[SetUp \"1\"]\n[FEN \"4k3/8/8/8/8/8/4P3/4K3 w - - 0 1\"]\n\n1. e4 Kd7 *\n";
        let (roots, skipped) = parse_pgn_roots(text.as_bytes(), false).unwrap();
        let lines: Vec<String> =
            roots.iter().map(|r| r.line.moves.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(lines, ["e2e4 c7c5 g1f3 d7d6", "e2e4 e7e5 e1e2 e8e7", "e2e4 e8d7"]);
        assert_eq!(roots.iter().map(|r| r.source).collect::<Vec<_>>(), [1, 2, 4].map(Source::Game));
        assert_eq!(roots[2].line.positions.len(), 3);
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].source, Source::Game(3));
        assert!(skipped[0].error.contains("null move"), "{}", skipped[0].error);
    }

    #[test]
    fn a_game_with_a_token_that_is_not_a_move_is_skipped_with_its_number() {
        let text = "1. d4 d5 *\n\n1. e4 e5 2. xyz Nf3 *\n\n1. c4 e5 *\n";
        let (roots, skipped) = parse_pgn_roots(text.as_bytes(), false).unwrap();
        assert_eq!(roots.iter().map(|r| r.source).collect::<Vec<_>>(), [1, 3].map(Source::Game));
        assert_eq!(skipped.len(), 1);
        assert_eq!((skipped[0].source, skipped[0].error.as_str()), (Source::Game(2), "move 3 'xyz' is not SAN"));
    }

    #[test]
    fn the_format_is_told_by_extension_or_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let pgn = "1. e4 e5 *\n";
        let epd = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n";
        for (name, text, moves) in [("a.pgn", pgn, 2), ("b", pgn, 2), ("c.epd", epd, 0), ("d", epd, 0)] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let (roots, skipped) = read_roots(&path, false).unwrap();
            assert!(skipped.is_empty(), "{name}");
            assert_eq!(roots[0].line.moves.len(), moves, "{name}");
        }
        assert!(read_roots(&dir.path().join("missing.epd"), false).is_err());
    }
}
