//! PGN games as read by the `pgn-reader` crate, checked so that nothing in them goes unread.
//!
//! ```
//! use deeptree::interop::pgn_read::GameReader;
//!
//! let pgn = "[White \"A\"]\n[FEN \"8/8/8/8/8/8/8/K1k5 w - - 0 1\"]\n\n1. Kb2 {a comment} $1 (1. Ka2) *\n1. e4 e5 1-0\n\n\
//!            1. e4 Nf9 2. d4 *\n";
//! let mut games = GameReader::new(pgn.as_bytes());
//! let first = games.next_game()?.expect("a game");
//! assert_eq!(first.tag("FEN"), Some("8/8/8/8/8/8/8/K1k5 w - - 0 1"));
//! assert_eq!(first.moves.iter().map(ToString::to_string).collect::<Vec<_>>(), ["Kb2", "(", "Ka2", ")"]);
//! let second = games.next_game()?.expect("a game");
//! assert_eq!((second.number, second.line, second.moves.len()), (2, 5, 2));
//! let third = games.next_game()?.expect("a game");
//! assert_eq!(third.error.as_deref(), Some("move 2 'Nf9' is not SAN"));
//! assert!(games.next_game()?.is_none());
//! # Ok::<_, std::io::Error>(())
//! ```
//!
//! `pgn-reader` does the reading: tag pairs and their escapes, moves, variations, comments, NAGs, results, `%`
//! escape lines, a byte order mark. It leaves the moves' legality to the importers, and it passes over a token it
//! cannot read as SAN (`Nf9`, `xyz`, `Nf6&`, a stray `}`) without a word. So the text of every game is scanned once
//! more here: every token must be a move number, a move in SAN, a NAG, a result, a variation's
//! parenthesis, a comment or an escape line, and every tag pair `[Name "value"]`. The first problem is kept as
//! [`RawGame::error`], so that the game's reader reports the game and skips it; and the scan's count of moves must
//! be the count `pgn-reader` passed on, or the game is reported too.
//!
//! The scan stays as long as `pgn-reader`'s visitor says nothing of what it cannot read: tried with 0.29.0 and
//! 0.29.1, it gives no callback and no error for `[Event x]`, `[Site "a" y]`, `xyz`, `Nf6&`, `e5x`, `}`, `$x`,
//! `Nf9` or `Qxx9` (its only errors are an unterminated tag or comment), so with the visitor alone such games would be
//! imported with moves missing. The scan reads tokens as 0.29 does; a later release that read otherwise would make
//! the counts differ and the games be reported, never imported wrong, so the version is not pinned exactly.
//!
//! A game ends at its result (a result inside a variation ends nothing) or where the next tag section begins, so
//! files without tags or without results split into games too; a blank line within a game's moves, before its
//! result, ends nothing. Bytes that are not UTF-8 are read lossily in tag values.

mod scan;

use self::scan::{Scan, newlines, scan};
use std::{
    cell::RefCell,
    collections::VecDeque,
    fmt,
    io::{self, Read},
    ops::ControlFlow,
    rc::Rc,
};

use pgn_reader::{Outcome, RawTag, Reader, SanPlus, Skip, Visitor};

use super::lines::{LineBound, MAX_PGN_LINE_BYTES};

/// One token of movetext that matters for the moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveToken {
    /// A move in SAN (a null move is `San::Null`).
    San(SanPlus),
    /// `(`: a variation replacing the last move.
    Open,
    /// `)`
    Close,
}

impl fmt::Display for MoveToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MoveToken::San(san) => write!(f, "{san}"),
            MoveToken::Open => f.write_str("("),
            MoveToken::Close => f.write_str(")"),
        }
    }
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
    pub result: Option<Outcome>,
    pub error: Option<String>,
}

impl RawGame {
    /// The value of a tag (the first one of that name).
    pub fn tag(&self, name: &str) -> Option<&str> {
        self.tags.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads games one at a time from any byte stream.
///
/// `pgn-reader` hands over its input one stretch at a time: a game's tags and moves up to a blank line or a tag
/// section. The bytes of the stretch are kept meanwhile (the tape) for the scan.
pub struct GameReader<R: Read> {
    reader: Reader<Recorder<R>>,
    tape: Rc<RefCell<Tape>>,
    builder: Builder,
    /// Games complete and checked, not yet handed out.
    ready: VecDeque<RawGame>,
    /// Line of the input where the tape starts.
    line: u64,
    finished: bool,
}

impl<R: Read> GameReader<R> {
    /// A reader whose lines may hold up to [`MAX_PGN_LINE_BYTES`] each.
    pub fn new(input: R) -> GameReader<R> {
        GameReader::with_line_bound(input, MAX_PGN_LINE_BYTES)
    }

    /// A reader whose lines may hold up to `bound` bytes: a longer line fails the read with an error of kind
    /// [`io::ErrorKind::InvalidData`] that names it ([`TooLong`](super::lines::TextError::TooLong)).
    pub fn with_line_bound(input: R, bound: usize) -> GameReader<R> {
        let tape = Rc::new(RefCell::new(Tape::default()));
        GameReader {
            reader: Reader::new(Recorder { input, tape: Rc::clone(&tape), lines: LineBound::new(bound) }),
            tape,
            builder: Builder::default(),
            ready: VecDeque::new(),
            line: 1,
            finished: false,
        }
    }

    /// The next game, or `None` at the end of the input. Only I/O fails; a malformed game comes back with its
    /// [`RawGame::error`] set.
    pub fn next_game(&mut self) -> io::Result<Option<RawGame>> {
        loop {
            if let Some(game) = self.ready.pop_front() {
                return Ok(Some(game));
            }
            if self.finished {
                return Ok(None);
            }
            self.read_stretch()?;
        }
    }

    /// Where the reader stands in the tape: the bytes before it are read.
    fn consumed(&self) -> usize {
        self.tape.borrow().bytes.len().saturating_sub(self.reader.buffer().len())
    }

    /// Reads one stretch of the input into the open game (and the games that follow its result in the stretch).
    fn read_stretch(&mut self) -> io::Result<()> {
        if !self.reader.has_more()? {
            self.finished = true;
            self.ready.extend(self.builder.games.drain(..).map(|g| g.game));
            return Ok(());
        }
        // Forget what is read, counting its lines: the tape now starts with the stretch.
        let start = self.consumed();
        {
            let mut tape = self.tape.borrow_mut();
            self.line += newlines(tape.bytes.get(..start).unwrap_or_default());
            let start = start.min(tape.bytes.len());
            tape.bytes.drain(..start);
        }
        let line = self.line;
        // The open game goes on, unless it has its result, or has moves and a tag section begins here.
        let at_tags = self.reader.buffer().first() == Some(&b'[');
        if let Some(open) = self.builder.games.pop() {
            if open.game.result.is_some() || (at_tags && open.movetext) {
                self.ready.push_back(open.game);
            } else {
                self.builder.games.push(open);
            }
        }
        if self.builder.games.is_empty() {
            self.builder.begin(line);
        }
        self.builder.start_stretch(line);
        let (depth, sans_before) = self.builder.games.first().map_or((0, 0), |g| (g.depth, g.sans));

        // pgn-reader fails on a tag pair longer than its buffer, and on a comment without its end (the rest of the
        // input); an error of the input itself is passed on.
        let failed_in_tags = match self.reader.read_game(&mut self.builder) {
            Ok(_) => false,
            Err(e) if self.tape.borrow().failed => return Err(e),
            Err(_) => self.builder.in_tags,
        };
        let end = self.consumed();
        if end == 0 {
            return Err(io::Error::other("the PGN reader read nothing of a game"));
        }
        let tape = self.tape.borrow();
        let raw = tape.bytes.get(..end).unwrap_or_default();
        let scan = scan(raw, line, depth, sans_before);
        if failed_in_tags {
            // A tag pair longer than pgn-reader's buffer (it skipped its line): the scan has it.
            if let (Some((name, value)), Some(open)) = (scan.tags.get(self.builder.tags), self.builder.games.last_mut())
            {
                open.game.tags.push(tag(raw.get(name.clone()).unwrap_or_default(), raw.get(value.clone())));
            }
        }
        self.builder.check(&scan, line);
        // Every game but the last one has its result: they are complete.
        let open = self.builder.games.pop();
        self.ready.extend(self.builder.games.drain(..).map(|g| g.game));
        self.builder.games.extend(open);
        Ok(())
    }
}

/// A tag pair as stored: the name trimmed, the value's escapes decoded.
fn tag(name: &[u8], value: Option<&[u8]>) -> (String, String) {
    let value = RawTag(value.unwrap_or_default()).decode_utf8_lossy().into_owned();
    (String::from_utf8_lossy(name.trim_ascii()).into_owned(), value)
}

/// The bytes read from the input since the start of the current stretch.
#[derive(Default)]
struct Tape {
    bytes: Vec<u8>,
    /// The input failed (an I/O error, not a problem of the text).
    failed: bool,
}

/// The input, copying what is read to the tape, its lines bounded.
struct Recorder<R> {
    input: R,
    tape: Rc<RefCell<Tape>>,
    lines: LineBound,
}

impl<R: Read> Read for Recorder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.input.read(buf) {
                Ok(n) => {
                    let read = buf.get(..n).unwrap_or(buf);
                    if let Err(e) = self.lines.pass(read) {
                        self.tape.borrow_mut().failed = true;
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                    self.tape.borrow_mut().bytes.extend_from_slice(read);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.tape.borrow_mut().failed = true;
                    return Err(e);
                }
            }
        }
    }
}

/// A game being read.
#[derive(Default)]
struct Building {
    game: RawGame,
    /// Variations open.
    depth: i64,
    /// Moves read (variations included).
    sans: usize,
    /// Anything but tags read.
    movetext: bool,
}

/// The visitor: builds the games of a stretch.
#[derive(Default)]
struct Builder {
    /// The games of the stretch, in order; the last one is open (between stretches, only that one is kept).
    games: Vec<Building>,
    /// The moves each game of the stretch has in it.
    sans: Vec<usize>,
    /// Games begun.
    count: u64,
    /// Line where the stretch starts.
    line: u64,
    /// Tag pairs read in the stretch, and whether the reader is in its tag section.
    tags: usize,
    in_tags: bool,
}

impl Builder {
    fn begin(&mut self, line: u64) {
        self.count += 1;
        self.games
            .push(Building { game: RawGame { number: self.count, line, ..RawGame::default() }, ..Default::default() });
    }

    fn start_stretch(&mut self, line: u64) {
        self.line = line;
        self.sans.clear();
        self.sans.push(0);
        self.tags = 0;
        self.in_tags = false;
    }

    /// A move or a parenthesis: after a result, it starts the next game.
    fn push(&mut self, token: MoveToken, depth: i64) {
        if self.games.last().is_none_or(|g| g.game.result.is_some()) {
            self.begin(self.line);
            self.sans.push(0);
        }
        let san = matches!(token, MoveToken::San(_));
        if let Some(open) = self.games.last_mut() {
            open.movetext = true;
            open.depth += depth;
            open.sans += usize::from(san);
            open.game.moves.push(token);
        }
        if let (true, Some(sans)) = (san, self.sans.last_mut()) {
            *sans += 1;
        }
    }

    /// Takes the scan's findings: its problems, the lines where games after a result start; if the scan does not
    /// see the games and moves `pgn-reader` read, every game of the stretch is reported.
    fn check(&mut self, scan: &Scan, line: u64) {
        let agree = scan.parts.len() == self.sans.len() && scan.parts.iter().zip(&self.sans).all(|(p, &n)| p.sans == n);
        for (i, building) in self.games.iter_mut().enumerate() {
            building.movetext |= scan.movetext;
            let game = &mut building.game;
            match scan.parts.get(i) {
                Some(part) if agree => {
                    if i > 0 {
                        game.line = part.line;
                    }
                    if let Some(problem) = &part.problem {
                        game.error.get_or_insert_with(|| problem.clone());
                    }
                }
                _ => {
                    let first = scan.parts.iter().find_map(|p| p.problem.clone());
                    game.error.get_or_insert_with(|| {
                        first.unwrap_or_else(|| format!("line {line}: the moves could not be read"))
                    });
                }
            }
        }
    }
}

impl Visitor for Builder {
    type Tags = ();
    type Movetext = ();
    type Output = ();

    fn begin_tags(&mut self) -> ControlFlow<(), ()> {
        self.in_tags = true;
        ControlFlow::Continue(())
    }

    fn tag(&mut self, _: &mut (), name: &[u8], value: RawTag<'_>) -> ControlFlow<()> {
        self.tags += 1;
        if let Some(open) = self.games.last_mut() {
            open.game.tags.push(tag(name, Some(value.as_bytes())));
        }
        ControlFlow::Continue(())
    }

    fn begin_movetext(&mut self, _: ()) -> ControlFlow<(), ()> {
        self.in_tags = false;
        ControlFlow::Continue(())
    }

    fn san(&mut self, _: &mut (), san: SanPlus) -> ControlFlow<()> {
        self.push(MoveToken::San(san), 0);
        ControlFlow::Continue(())
    }

    fn begin_variation(&mut self, _: &mut ()) -> ControlFlow<(), Skip> {
        self.push(MoveToken::Open, 1);
        ControlFlow::Continue(Skip(false))
    }

    fn end_variation(&mut self, _: &mut ()) -> ControlFlow<()> {
        self.push(MoveToken::Close, -1);
        ControlFlow::Continue(())
    }

    fn outcome(&mut self, _: &mut (), outcome: Outcome) -> ControlFlow<()> {
        if let Some(open) = self.games.last_mut() {
            open.movetext = true;
            // A result inside a variation ends nothing (some programs write one there).
            if open.depth <= 0 && open.game.result.is_none() {
                open.game.result = Some(outcome);
            }
        }
        ControlFlow::Continue(())
    }

    fn end_game(&mut self, _: ()) {}
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
        game.moves.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn comments_nags_numbers_and_escapes() {
        let g = games(
            "% escape line\r\n[Event \"a \\\"quoted\\\" name\"]\r\n\r\n1.e4 {multi\nline [not a tag]} e5!? 2. Nf3 $14 ; rest\n2...Nc6 3.0-0 *",
        );
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].tag("Event"), Some("a \"quoted\" name"));
        assert_eq!(sans(&g[0]), ["e4", "e5", "Nf3", "Nc6", "O-O"]);
        assert_eq!(g[0].result, Some(Outcome::Unknown));
        assert_eq!(g[0].error, None);
    }

    #[test]
    fn games_split_at_tags_and_results() {
        let g = games("[A \"1\"]\n1. e4 *\n[A \"2\"]\n1. d4\n\n[A \"3\"]\n\n1. c4 1/2-1/2 1. f4 0-1\n");
        assert_eq!(g.len(), 4);
        assert_eq!(g.iter().map(|g| g.number).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(g.iter().map(|g| g.line).collect::<Vec<_>>(), [1, 3, 6, 8]);
        assert_eq!(sans(&g[1]), ["d4"]);
        assert_eq!(g[1].result, None);
        assert_eq!(g[3].tags.len(), 0);
        assert_eq!(sans(&g[3]), ["f4"]);
        assert!(g.iter().all(|g| g.error.is_none()));
    }

    #[test]
    fn a_blank_line_before_the_result_ends_nothing() {
        let g = games("1. e4 e5\n\n2. Nf3 (2. f4\n\nexf4) Nc6 *\n\n1. d4 *\n");
        assert_eq!(g.len(), 2);
        assert_eq!(sans(&g[0]), ["e4", "e5", "Nf3", "(", "f4", "exf4", ")", "Nc6"]);
        assert_eq!((g[1].number, g[1].line), (2, 7));
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

    #[test]
    fn tokens_pgn_reader_passes_over_are_reported_with_their_game() {
        for (text, problem) in [
            ("1. e4 Nf9 2. d4 *", "move 2 'Nf9' is not SAN"),
            ("1. e4 xyz 2. d4 *", "move 2 'xyz' is not SAN"),
            ("1. e4 Nf6& 2. d4 *", "move 2 'Nf6&' is not SAN"),
            ("1. e4 e5x 2. d4 *", "move 2 'e5x' is not SAN"),
            ("1. e4 (1. d4 Nxx) e5 *", "move 3 'Nxx' is not SAN"),
            ("1. e4 } e5 *", "line 1: unexpected character '}'"),
            ("1. e4 $x e5 *", "line 1: NAG 'x' is not a number"),
            ("1. e4 1-0x *", "move 2 '1-0x' is not SAN"),
            ("1. e4 e5 {open\n\n2. Nf3 *", "line 1: comment without its closing '}'"),
            ("[Event x]\n\n1. e4 *", "line 1: malformed tag"),
            ("[Event \"x\" y]\n\n1. e4 *", "line 1: tag without its closing ']'"),
        ] {
            let text = format!("[Event \"before\"]\n\n1. e4 *\n\n{text}\n\n[Event \"after\"]\n\n1. d4 d5 *\n");
            let g = games(&text);
            assert_eq!(g.len(), if problem.contains("comment") { 2 } else { 3 }, "{text}");
            assert_eq!(g[0].error, None, "{text}");
            let reported = g[1].error.as_deref().unwrap_or_default().replace("line 5", "line 1");
            assert_eq!(reported, problem, "{text}");
            if g.len() == 3 {
                assert_eq!((g[2].number, g[2].error.as_deref(), sans(&g[2]).len()), (3, None, 2), "{text}");
            }
        }
        assert_eq!(games("1. e4 e.p. e5 ep *")[0].error, None);
    }

    #[test]
    fn text_after_a_result_goes_with_the_game_that_follows() {
        // Without one, with the game it follows; text that holds a result is a problem of the game it ends.
        let g = games("1. e4 e5 1-0 xyz 1. d4 *\n\n1. c4 * Nf9\n\n1. Nf3 1-0x 1. e4 *\n");
        assert_eq!(
            g.iter().map(|g| g.error.as_deref()).collect::<Vec<_>>(),
            [
                None,
                Some("line 1: 'xyz' is not SAN"),
                Some("line 3: 'Nf9' is not SAN"),
                Some("move 2 '1-0x' is not SAN"),
                None
            ]
        );
        assert_eq!(
            g.iter().map(|g| (g.number, g.line, g.moves.len())).collect::<Vec<_>>(),
            [(1, 1, 2), (2, 1, 1), (3, 3, 1), (4, 5, 1), (5, 5, 1)]
        );
    }

    #[test]
    fn a_tag_longer_than_the_readers_buffer_is_kept() {
        let long = "Q".repeat(100_000);
        let g = games(&format!("[Event \"a\"]\n[Annotator \"{long}\"]\n[Site \"b\"]\n\n1. e4 *\n\n1. d4 *\n"));
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].tag("Annotator").map(str::len), g[0].tag("Site")), (Some(100_000), Some("b")));
        assert_eq!((sans(&g[0]), g[0].error.as_deref()), (vec!["e4".to_owned()], None));
        assert_eq!((g[1].number, g[1].line), (2, 7));
    }

    #[test]
    fn a_line_longer_than_the_bound_is_an_error_naming_it() {
        let text = format!("[Event \"a\"]\n\n1. e4 *\n\n1. d4 {{{}}} *\n", "x".repeat(5000));
        let mut reader = GameReader::with_line_bound(text.as_bytes(), 4096);
        let error = loop {
            match reader.next_game() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("read to the end"),
                Err(e) => break e,
            }
        };
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(error.to_string(), "line 5 is longer than 4 KiB (the most a line may hold here)");
        let mut all = GameReader::with_line_bound(text.as_bytes(), 5010);
        assert_eq!((all.next_game().unwrap().unwrap().number, all.next_game().unwrap().unwrap().number), (1, 2));
    }

    /// Pieces of PGN, good and bad, for texts made at random.
    const PIECES: &[&[u8]] = &[
        b"[Event \"x\"]\n",
        b"[FEN \"8/8/8/8/8/8/8/K1k5 w - - 0 1\"]",
        b"[",
        b"]",
        b"\"",
        b"\\",
        b"\n",
        b"\n\n",
        b"\r\n",
        b" ",
        b"1.",
        b"2...",
        b"e4",
        b"e5",
        b"Nf3",
        b"O-O",
        b"0-0-0",
        b"--",
        b"Nf9",
        b"xyz",
        b"(",
        b")",
        b"{c}",
        b"{",
        b"}",
        b";c\n",
        b"\n%e\n",
        b"$1",
        b"$",
        b"!?",
        b"*",
        b"1-0",
        b"1/2-1/2",
        b"\xc2\xbd",
        b"\xff",
        b"e.p.",
        b"\xef\xbb\xbf",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        #[test]
        fn any_text_is_read_to_its_end_without_panicking(
            pieces in proptest::collection::vec(proptest::sample::select(PIECES), 0..80)
        ) {
            let text = pieces.concat();
            let mut reader = GameReader::new(text.as_slice());
            let mut numbers = Vec::new();
            while let Some(game) = reader.next_game().unwrap() {
                numbers.push(game.number);
            }
            proptest::prop_assert_eq!(numbers.clone(), (1..=numbers.len() as u64).collect::<Vec<_>>());
        }
    }

    #[test]
    fn bad_bytes_and_truncated_text_do_not_panic() {
        let mut text: Vec<u8> = b"[Event \"\xff\xfe\"]\n\n1. e4 \xc2\xbd \xe2\x80\x93 e5 {\xff} *\n\n[Ev".to_vec();
        for end in 0..=text.len() {
            let mut reader = GameReader::new(&text[..end]);
            while reader.next_game().unwrap().is_some() {}
        }
        text.extend_from_slice(b"ent \"x\"]\n\n1. d4 *");
        let mut reader = GameReader::new(text.as_slice());
        let first = reader.next_game().unwrap().unwrap();
        assert_eq!(first.tag("Event"), Some("\u{fffd}\u{fffd}"));
        assert!(first.error.is_some());
        assert_eq!(reader.next_game().unwrap().unwrap().error, None);
    }
}
