//! A tolerant streaming PGN reader: splits a file into games of tags and movetext tokens.
//!
//! ```
//! use deeptree::interop::pgn_lex::{GameReader, MoveToken};
//!
//! let pgn = "[White \"A\"]\n[FEN \"8/8/8/8/8/8/8/K1k5 w - - 0 1\"]\n\n1. Kb2 {a comment} $1 (1. Ka2) *\n1. e4 e5 1-0\n";
//! let mut games = GameReader::new(pgn.as_bytes());
//! let first = games.next_game().unwrap().unwrap();
//! assert_eq!(first.tag("FEN"), Some("8/8/8/8/8/8/8/K1k5 w - - 0 1"));
//! assert_eq!(first.moves, vec![
//!     MoveToken::San("Kb2".into()), MoveToken::Open, MoveToken::San("Ka2".into()), MoveToken::Close,
//! ]);
//! let second = games.next_game().unwrap().unwrap();
//! assert_eq!((second.number, second.moves.len(), second.result.as_deref()), (2, 2, Some("1-0")));
//! assert!(games.next_game().unwrap().is_none());
//! ```
//!
//! What it accepts: tag pairs with escaped quotes; `{...}` comments over several lines, `;` comments, `%` escape
//! lines; NAGs (`$1`) and move suffixes (`!?`); move numbers with or without a space (`12.e4`, `12...Nf6`); `0-0` for
//! castling; any line ending; bytes that are not UTF-8 (tag values are read lossily). A game ends at its result token
//! or where the next tag section begins, so files without tags or without results split into games too. Problems
//! (a tag without its closing bracket, a stray character) are kept with the game as [`RawGame::error`], so that its
//! reader can report the game and skip it.

use std::io::{self, Read};

/// One token of movetext that matters for the moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveToken {
    /// A move in SAN as written, suffixes like `!?` removed.
    San(String),
    /// `(`: a variation replacing the last move.
    Open,
    /// `)`
    Close,
}

/// One game as read: tags, the tokens of its moves, its result, and the first problem met.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawGame {
    /// 1-based number of the game in the file.
    pub number: u64,
    /// Line of the file where the game starts.
    pub line: u64,
    pub tags: Vec<(String, String)>,
    pub moves: Vec<MoveToken>,
    pub result: Option<String>,
    pub error: Option<String>,
}

impl RawGame {
    /// The value of a tag (the first one of that name).
    pub fn tag(&self, name: &str) -> Option<&str> {
        self.tags.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

enum Token {
    Tag(String, String),
    Move(MoveToken),
    Result(String),
    Bad(String),
}

/// Reads games one at a time from any byte stream.
pub struct GameReader<R: Read> {
    input: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
    line: u64,
    at_line_start: bool,
    games: u64,
    /// A token read past the end of the previous game: it starts the next one.
    pending: Option<(Token, u64)>,
}

const CHUNK: usize = 64 * 1024;

impl<R: Read> GameReader<R> {
    pub fn new(input: R) -> GameReader<R> {
        GameReader {
            input,
            buf: vec![0; CHUNK],
            pos: 0,
            len: 0,
            eof: false,
            line: 1,
            at_line_start: true,
            games: 0,
            pending: None,
        }
    }

    fn peek(&mut self) -> io::Result<Option<u8>> {
        if self.pos == self.len {
            if self.eof {
                return Ok(None);
            }
            loop {
                match self.input.read(&mut self.buf) {
                    Ok(0) => {
                        self.eof = true;
                        return Ok(None);
                    }
                    Ok(n) => {
                        self.pos = 0;
                        self.len = n;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(Some(self.buf[self.pos]))
    }

    fn bump(&mut self) -> io::Result<Option<u8>> {
        let c = self.peek()?;
        if let Some(c) = c {
            self.pos += 1;
            if c == b'\n' {
                self.line += 1;
                self.at_line_start = true;
            } else {
                self.at_line_start = false;
            }
        }
        Ok(c)
    }

    fn skip_line(&mut self) -> io::Result<()> {
        while let Some(c) = self.bump()? {
            if c == b'\n' {
                break;
            }
        }
        Ok(())
    }

    /// The next token, with its line; `None` at the end of the input.
    fn token(&mut self) -> io::Result<Option<(Token, u64)>> {
        if let Some(pending) = self.pending.take() {
            return Ok(Some(pending));
        }
        loop {
            let line_start = self.at_line_start;
            let Some(c) = self.peek()? else { return Ok(None) };
            let line = self.line;
            match c {
                b'%' if line_start => self.skip_line()?,
                b';' => self.skip_line()?,
                b'{' => {
                    self.bump()?;
                    loop {
                        match self.bump()? {
                            None => return Ok(Some((Token::Bad("comment without its closing '}'".into()), line))),
                            Some(b'}') => break,
                            Some(_) => {}
                        }
                    }
                }
                b'[' => {
                    self.bump()?;
                    return Ok(Some((self.tag()?, line)));
                }
                b'(' => {
                    self.bump()?;
                    return Ok(Some((Token::Move(MoveToken::Open), line)));
                }
                b')' => {
                    self.bump()?;
                    return Ok(Some((Token::Move(MoveToken::Close), line)));
                }
                b'$' => {
                    self.bump()?;
                    while self.peek()?.is_some_and(|c| c.is_ascii_digit()) {
                        self.bump()?;
                    }
                }
                b'!' | b'?' => {
                    self.bump()?;
                }
                b'<' => {
                    // Reserved for future expansion by the standard: skipped to its '>'.
                    while let Some(c) = self.bump()? {
                        if c == b'>' {
                            break;
                        }
                    }
                }
                b'*' => {
                    self.bump()?;
                    return Ok(Some((Token::Result("*".into()), line)));
                }
                c if c.is_ascii_whitespace() || c == 0xef || c == 0xbb || c == 0xbf => {
                    // Whitespace, and the bytes of a UTF-8 byte order mark.
                    self.bump()?;
                }
                c if is_symbol_start(c) => {
                    let mut symbol = Vec::new();
                    while let Some(c) = self.peek()? {
                        if is_symbol_continuation(c) {
                            symbol.push(c);
                            self.bump()?;
                        } else {
                            break;
                        }
                    }
                    if let Some(token) = classify(&symbol) {
                        return Ok(Some((token, line)));
                    }
                }
                c => {
                    self.bump()?;
                    return Ok(Some((Token::Bad(format!("unexpected character {}", describe(c))), line)));
                }
            }
        }
    }

    /// Reads the rest of a tag pair after its `[`.
    fn tag(&mut self) -> io::Result<Token> {
        let mut name = Vec::new();
        while self.peek()?.is_some_and(|c| c == b' ' || c == b'\t') {
            self.bump()?;
        }
        while let Some(c) = self.peek()? {
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'+' || c == b'#' || c == b'=' || c == b':' || c == b'-' {
                name.push(c);
                self.bump()?;
            } else {
                break;
            }
        }
        while self.peek()?.is_some_and(|c| c == b' ' || c == b'\t') {
            self.bump()?;
        }
        if name.is_empty() || self.peek()? != Some(b'"') {
            self.skip_line()?;
            return Ok(Token::Bad("malformed tag".into()));
        }
        self.bump()?;
        let mut value = Vec::new();
        loop {
            match self.bump()? {
                None | Some(b'\n') => return Ok(Token::Bad("tag value without its closing quote".into())),
                Some(b'\\') => match self.bump()? {
                    None | Some(b'\n') => return Ok(Token::Bad("tag value without its closing quote".into())),
                    Some(c) => value.push(c),
                },
                Some(b'"') => break,
                Some(c) => value.push(c),
            }
        }
        while self.peek()?.is_some_and(|c| c == b' ' || c == b'\t' || c == b'\r') {
            self.bump()?;
        }
        if self.peek()? != Some(b']') {
            self.skip_line()?;
            return Ok(Token::Bad("tag without its closing ']'".into()));
        }
        self.bump()?;
        Ok(Token::Tag(String::from_utf8_lossy(&name).into_owned(), String::from_utf8_lossy(&value).into_owned()))
    }

    /// The next game, or `None` at the end of the input. Only I/O fails; a malformed game comes back with its
    /// [`RawGame::error`] set.
    pub fn next_game(&mut self) -> io::Result<Option<RawGame>> {
        let mut game: Option<RawGame> = None;
        let mut in_movetext = false;
        while let Some((token, line)) = self.token()? {
            let starts_new = match &token {
                Token::Tag(..) => in_movetext,
                _ => game.as_ref().is_some_and(|g| g.result.is_some()),
            };
            if starts_new {
                self.pending = Some((token, line));
                break;
            }
            let current = game.get_or_insert_with(|| {
                self.games += 1;
                RawGame { number: self.games, line, ..RawGame::default() }
            });
            match token {
                Token::Tag(name, value) => current.tags.push((name, value)),
                Token::Move(m) => {
                    in_movetext = true;
                    current.moves.push(m);
                }
                Token::Result(result) => {
                    in_movetext = true;
                    let depth = current.moves.iter().fold(0i64, |d, m| match m {
                        MoveToken::Open => d + 1,
                        MoveToken::Close => d - 1,
                        MoveToken::San(_) => d,
                    });
                    // A result inside a variation ends nothing (some programs write one there).
                    if depth <= 0 {
                        current.result = Some(result);
                    }
                }
                Token::Bad(message) => {
                    if current.error.is_none() {
                        current.error = Some(format!("line {line}: {message}"));
                    }
                    // Stray text counts as movetext (a tag after it starts the next game); a broken tag does not.
                    in_movetext |= !message.contains("tag");
                }
            }
        }
        Ok(game)
    }
}

fn is_symbol_start(c: u8) -> bool {
    // '-' for the null move "--".
    c.is_ascii_alphanumeric() || c == b'-'
}

fn is_symbol_continuation(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'+' | b'#' | b'=' | b':' | b'-' | b'/' | b'.' | b'@')
}

fn describe(c: u8) -> String {
    if c.is_ascii_graphic() { format!("'{}'", c as char) } else { format!("0x{c:02x}") }
}

/// Classifies a symbol: a result, a move number (skipped), or a move with its move number prefix removed.
fn classify(symbol: &[u8]) -> Option<Token> {
    let text = String::from_utf8_lossy(symbol);
    match text.as_ref() {
        "1-0" | "0-1" | "1/2-1/2" => return Some(Token::Result(text.into_owned())),
        "e.p." | "ep" => return None,
        _ => {}
    }
    // A move number, possibly glued to its move: "12." "12..." "12.e4" "12...Nf6".
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let rest = if digits > 0 && text[digits..].starts_with('.') {
        text[digits..].trim_start_matches('.')
    } else if digits == text.len() {
        "" // a bare move number without its dot
    } else {
        &text
    };
    let rest = rest.trim_start_matches('.');
    if rest.is_empty() {
        return None;
    }
    let san = match rest {
        "0-0" | "0-0+" | "0-0#" => rest.replacen("0-0", "O-O", 1),
        r if r.starts_with("0-0-0") => r.replacen("0-0-0", "O-O-O", 1),
        r => r.to_owned(),
    };
    Some(Token::Move(MoveToken::San(san)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn games(text: &str) -> Vec<RawGame> {
        let mut reader = GameReader::new(text.as_bytes());
        let mut out = Vec::new();
        while let Some(game) = reader.next_game().unwrap() {
            out.push(game);
        }
        out
    }

    fn sans(game: &RawGame) -> Vec<String> {
        game.moves
            .iter()
            .map(|m| match m {
                MoveToken::San(s) => s.clone(),
                MoveToken::Open => "(".into(),
                MoveToken::Close => ")".into(),
            })
            .collect()
    }

    #[test]
    fn comments_nags_numbers_and_escapes() {
        let g = games(
            "% escape line\r\n[Event \"a \\\"quoted\\\" name\"]\r\n\r\n1.e4 {multi\nline [not a tag]} e5!? 2. Nf3 $14 ; rest\n2...Nc6 3.0-0 *",
        );
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].tag("Event"), Some("a \"quoted\" name"));
        assert_eq!(sans(&g[0]), ["e4", "e5", "Nf3", "Nc6", "O-O"]);
        assert_eq!(g[0].result.as_deref(), Some("*"));
        assert_eq!(g[0].error, None);
    }

    #[test]
    fn games_split_at_tags_and_results() {
        let g = games("[A \"1\"]\n1. e4 *\n[A \"2\"]\n1. d4\n\n[A \"3\"]\n\n1. c4 1/2-1/2 1. f4 0-1\n");
        assert_eq!(g.len(), 4);
        assert_eq!(g.iter().map(|g| g.number).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(sans(&g[1]), ["d4"]);
        assert_eq!(g[1].result, None);
        assert_eq!(g[3].tags.len(), 0);
        assert_eq!(sans(&g[3]), ["f4"]);
    }

    #[test]
    fn problems_stay_with_their_game() {
        let g = games("[Event \"broken]\n1. e4 *\n[Event \"ok\"]\n1. d4 & d5 *\n[Event \"fine\"]\n1. c4 *\n");
        assert_eq!(g.len(), 3);
        assert!(g[0].error.as_deref().unwrap().contains("closing quote"));
        assert!(g[1].error.as_deref().unwrap().contains("'&'"));
        assert_eq!(g[2].error, None);
        assert_eq!(sans(&g[2]), ["c4"]);
    }

    #[test]
    fn a_result_inside_a_variation_does_not_end_the_game() {
        let g = games("1. e4 (1. d4 d5 *) e5 *");
        assert_eq!(g.len(), 1);
        assert_eq!(sans(&g[0]), ["e4", "(", "d4", "d5", ")", "e5"]);
    }
}
