//! Growth that follows play: where played games left the tree, and the record of the games a UCI session played
//! (docs/design.md §6.3).
//!
//! A game *leaves the tree* at the first position of its main line, with the learner to move, where the tree would
//! not answer a game's search: its evaluation plus the software depth settled below it (the combined depth) is less
//! than the *target*, the depth a direct search reaches there at the games' time control. Every game that leaves
//! the tree names one such position, its *exit*; games that leave at the same position (by transposition too) add
//! to its weight. [`exits`] finds them; [`seeds`] makes them a source of growth (`analyze --games`): each exit a seed
//! of its games' weight, from which the learner's games are followed on (`crate::search::growth`).
//!
//! The learner is the side a name picks out of each game's `White` and `Black` tags (`--player`), or both sides;
//! the games a UCI session plays are recorded by [`GameRecord`] with deeptree as the learner.
//!
//! ```
//! use deeptree::interop::played::exits;
//! use deeptree::search::{analysis::Params, growth::Targets};
//! use deeptree::store::{Store, StoreOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path(), &StoreOptions::default())?;
//! let pgn = "[White \"deeptree\"]\n[Black \"x\"]\n\n1. e4 e5 2. Nf3 *\n\n[White \"x\"]\n[Black \"y\"]\n\n1. e4 *\n";
//! let view = store.read()?;
//! // An empty tree answers nothing: the first game leaves it at once; the second has no side named deeptree.
//! let found = exits(&view, pgn.as_bytes(), &Params::new(8, 20), &Targets::flat(16), Some("deeptree"))?;
//! assert_eq!((found.exits.len(), found.exits[0].games, found.without_player), (1, 1, 1));
//! assert_eq!(found.exits[0].ply, 0);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use crate::game::Line;
use std::{
    collections::HashMap,
    fs::OpenOptions,
    io::{Read, Write},
    path::Path,
};

use shakmaty::{Chess, Color, Position, san::SanPlus, uci::UciMove};

use crate::{
    notation::canonical_uci,
    score::Score,
    search::{
        analysis::{Params, known_depth},
        growth::{Seed, Targets},
    },
    store::{ReadView, key::PositionKey},
};

use super::{
    InteropError,
    pgn_export::wrap,
    pgn_read::{GameReader, RawGame},
    roots::{SkippedRoot, Source, main_line},
};

/// The exits as seeds of growth: each of the weight of the games that left the tree there, its games followed on for
/// the side to move there (the learner's).
pub fn seeds(found: &Exits) -> Vec<Seed> {
    found
        .exits
        .iter()
        .map(|exit| {
            let mut seed = Seed::games_from(
                exit.line.clone(),
                format!("game {} ply {}", exit.game, exit.ply),
                f64::from(exit.games),
            );
            seed.side = Some(exit.line.root().turn());
            seed
        })
        .collect()
}

/// A position where games left the tree.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Exit {
    /// The first game's moves to it (its history for repetitions).
    #[serde(skip)]
    pub line: Line,
    pub fen: String,
    /// The first game that left the tree here (from 1), and the ply.
    pub game: u64,
    pub ply: usize,
    /// Games that left the tree here.
    pub games: u32,
    /// The combined depth the tree knows here (`None` where the position has no evaluation).
    pub known_depth: Option<u32>,
}

/// What [`exits`] found in a file of games.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Exits {
    /// Heaviest first, ties in the order the games met them.
    pub exits: Vec<Exit>,
    /// Games read.
    pub games: u64,
    /// Games that stayed in the tree to their end.
    pub stayed: u64,
    /// Games in which no side is the player.
    pub without_player: u64,
    /// Games that went on, while still in the tree, through a move the analyst excluded: nothing below it is grown.
    pub through_excluded: u64,
    pub skipped: Vec<SkippedRoot>,
}

/// The games of a PGN file, read one at a time: those whose main line cannot be played are counted as skipped.
/// [`Games::first`] reads up to the first game that plays, so that a file with none is refused before a store is
/// opened for it (`analyze --games`).
pub struct Games<R: Read> {
    reader: GameReader<R>,
    /// A game read ahead by [`Games::first`], not yet handed out.
    ahead: Option<(RawGame, Line)>,
    /// Games read, skipped ones included.
    read: u64,
    skipped: Vec<SkippedRoot>,
}

impl<R: Read> Games<R> {
    pub fn new(pgn: R) -> Games<R> {
        Games { reader: GameReader::new(pgn), ahead: None, read: 0, skipped: Vec::new() }
    }

    /// Reads up to the first game whose main line plays, keeping it for the next [`Games::next_line`]. An error when
    /// the file has none: no game at all, or every game skipped (how many is said); the games skipped on the way
    /// are in [`Games::skipped`] either way.
    pub fn first(&mut self) -> Result<(), InteropError> {
        if self.ahead.is_none() {
            self.ahead = self.read_line()?;
        }
        match (self.ahead.is_some(), self.read) {
            (true, _) => Ok(()),
            (false, 0) => Err(InteropError::Invalid("no game in it".into())),
            (false, _) => Err(InteropError::Invalid(format!("no game could be read ({} skipped)", self.skipped.len()))),
        }
    }

    /// The line of the game read ahead by [`Games::first`] (the first that plays), not yet handed out.
    pub fn first_line(&self) -> Option<&Line> {
        self.ahead.as_ref().map(|(_, line)| line)
    }

    /// The games skipped so far, and why.
    pub fn skipped(&self) -> &[SkippedRoot] {
        &self.skipped
    }

    /// The next game whose main line plays, with its line; `None` at the end of the file.
    fn next_line(&mut self) -> Result<Option<(RawGame, Line)>, InteropError> {
        match self.ahead.take() {
            Some(game) => Ok(Some(game)),
            None => self.read_line(),
        }
    }

    fn read_line(&mut self) -> Result<Option<(RawGame, Line)>, InteropError> {
        while let Some(game) =
            self.reader.next_game().map_err(|e| InteropError::Invalid(format!("reading PGN: {e}")))?
        {
            self.read += 1;
            let chess960 = game.tag("Variant").is_some_and(|v| v.eq_ignore_ascii_case("chess960"));
            match main_line(&game, chess960) {
                Ok(line) => return Ok(Some((game, line))),
                Err(error) => self.skipped.push(SkippedRoot { source: Source::Game(game.number), error }),
            }
        }
        Ok(None)
    }
}

/// The positions where the games of `pgn` left the tree of `view`, with the learner `player` (a name in the `White`
/// or `Black` tag, compared without case; `None`: both sides) to move, for `params`' engine depth and move distance
/// and the target depths `targets` (a game's search reaches that deep there: the tree must know more to answer).
pub fn exits(
    view: &ReadView<'_>,
    pgn: impl Read,
    params: &Params,
    targets: &Targets,
    player: Option<&str>,
) -> Result<Exits, InteropError> {
    exits_of_games(view, Games::new(pgn), params, targets, player)
}

/// [`exits`] of games already opened (and perhaps read up to their first game).
pub fn exits_of_games(
    view: &ReadView<'_>,
    mut games: Games<impl Read>,
    params: &Params,
    targets: &Targets,
    player: Option<&str>,
) -> Result<Exits, InteropError> {
    let mut found = Exits::default();
    let mut by_key: HashMap<PositionKey, usize> = HashMap::new();
    while let Some((game, line)) = games.next_line()? {
        let learner: Option<Color> = match player {
            None => None,
            Some(name) => {
                let named = |tag: &str| game.tag(tag).is_some_and(|v| v.to_lowercase().contains(&name.to_lowercase()));
                match (named("White"), named("Black")) {
                    (true, false) => Some(Color::White),
                    (false, true) => Some(Color::Black),
                    (true, true) => None,
                    (false, false) => {
                        found.without_player += 1;
                        continue;
                    }
                }
            }
        };
        let mut left = None;
        let mut excluded = false;
        for ply in 0..line.positions.len() {
            let position = &line.positions[ply];
            if !(learner.is_some_and(|c| c != position.turn()) || position.legal_moves().is_empty()) {
                let prefix = line.prefix(ply);
                let target = targets.at(position);
                let known = known_depth(view, &prefix, params, u8::try_from(target).unwrap_or(u8::MAX - 1))?;
                if known.is_none_or(|d| d < target) {
                    left = Some((ply, prefix, known));
                    break;
                }
            }
            // The analyst excluded the game's next move here: nothing reachable through it is grown.
            let next = line.moves.get(ply);
            let record = view.node(PositionKey::of(position))?;
            if next.is_some_and(|m| record.as_ref().and_then(|r| r.edge(m)).is_some_and(|e| e.is_excluded())) {
                excluded = true;
                break;
            }
        }
        let Some((ply, prefix, known_depth)) = left else {
            if excluded {
                found.through_excluded += 1;
            } else {
                found.stayed += 1;
            }
            continue;
        };
        let key = PositionKey::of(prefix.root());
        match by_key.get(&key) {
            Some(&i) => found.exits[i].games += 1,
            None => {
                by_key.insert(key, found.exits.len());
                let fen = shakmaty::fen::Fen::from_position(prefix.root(), shakmaty::EnPassantMode::Legal).to_string();
                found.exits.push(Exit { line: prefix, fen, game: game.number, ply, games: 1, known_depth });
            }
        }
    }
    found.games = games.read;
    found.skipped = games.skipped;
    // Heaviest first; a stable sort keeps the games' order among equals.
    found.exits.sort_by_key(|e| std::cmp::Reverse(e.games));
    Ok(found)
}

/// A later search of the same side scoring this many centipawns below a tree move's score refutes the move.
pub const REFUTATION_DROP_CP: i32 = 50;
/// How many plies after a tree move a later search may refute it.
pub const REFUTATION_PLIES: usize = 10;

/// A tree move that the game's own later searches refuted: it is to be searched again deeper before it is played
/// again.
#[derive(Debug, Clone)]
pub struct Refutation {
    /// The game's moves to the position where the tree played it.
    pub line: Line,
    /// The move, in stored form.
    pub best: UciMove,
    /// The reply the game went on with, if it did.
    pub reply: Option<UciMove>,
    /// The tree's score of the move (the mover's point of view) and its combined depth.
    pub score: Score,
    pub depth: u32,
    /// The later search that dropped: its score (the same side's point of view), its depth, and how many plies
    /// after the tree move it came.
    pub later: Score,
    pub later_depth: u32,
    pub plies: usize,
}

/// The most plies a GUI's takeback undoes before the game goes on: a line that leaves the game's moves earlier is
/// another game (a GUI that sends no `ucinewgame` between games from the same start).
pub const TAKEBACK_PLIES: usize = 2;

/// Whether `line` goes on with the game `recorded`: the same start, and the game's moves continued, or taken back
/// by at most [`TAKEBACK_PLIES`] before it goes on.
fn goes_on(recorded: &Line, line: &Line) -> bool {
    if PositionKey::of(&recorded.start) != PositionKey::of(&line.start) {
        return false;
    }
    let common = recorded.moves.iter().zip(&line.moves).take_while(|(a, b)| a == b).count();
    recorded.moves.len() - common <= TAKEBACK_PLIES
}

/// One of deeptree's answers in the game.
#[derive(Debug, Clone)]
struct Answer {
    ply: usize,
    best: UciMove,
    from_tree: bool,
    score: Score,
    depth: u32,
    refuted: bool,
}

/// The game a UCI session is playing, appended to a PGN file when it ends (`ucinewgame`, another game's position,
/// `quit`): its moves as the GUI last sent them (a takeback replaces the moves taken back; the move a `go ponder`
/// guessed is left out when `stop` ends it without `ponderhit`), the side deeptree played
/// (the side to move at its timed `go`s) as `deeptree`. A game in which the GUI analysed (`go infinite`, `go
/// ponder` without a game's clock, `UCI_AnalyseMode`) is not a game and is not recorded.
#[derive(Debug, Clone, Default)]
pub struct GameRecord {
    line: Option<Line>,
    /// Sides deeptree was asked to move for with a game's limit.
    played: Vec<Color>,
    analysed: bool,
    /// deeptree's answers in this game, by ply.
    answers: Vec<Answer>,
    /// Tree moves the game's later searches refuted.
    pub refutations: Vec<Refutation>,
}

impl GameRecord {
    /// The GUI set up `line`. A line that does not go on with the game (another start position, or moves that
    /// neither continue the game's nor take back at most [`TAKEBACK_PLIES`] of them) begins another game: the one
    /// before is returned to be written.
    pub fn position(&mut self, line: &Line) -> Option<GameRecord> {
        let same_game = self.line.as_ref().is_some_and(|recorded| goes_on(recorded, line));
        let ended = if same_game { None } else { self.take() };
        self.line = Some(line.clone());
        ended
    }

    /// deeptree was asked to move in the current position with a game's limit (a clock, `movetime`, depth or nodes).
    pub fn played(&mut self) {
        if let Some(turn) = self.line.as_ref().map(|l| l.root().turn())
            && !self.played.contains(&turn)
        {
            self.played.push(turn);
        }
    }

    /// deeptree answered the current position with `best` (in the GUI's notation), from the tree or by a search,
    /// scoring it `score` (the side to move's point of view) at `depth`. A search that scores at least
    /// [`REFUTATION_DROP_CP`] below a tree move of the same side played at most [`REFUTATION_PLIES`] plies before
    /// (and still in the game's moves) refutes that move: it is added to [`GameRecord::refutations`].
    pub fn answered(&mut self, best: &UciMove, from_tree: bool, score: Score, depth: u32) {
        let Some(line) = &self.line else { return };
        let Some(best) = canonical_uci(line.root(), best) else { return };
        let ply = line.moves.len();
        // A takeback answers a ply again: the answers from there on are no longer the game's.
        self.answers.retain(|a| a.ply < ply);
        for earlier in &mut self.answers {
            let plies = ply - earlier.ply;
            // The same side moves every other ply; its scores compare without a sign flip.
            let same_side = plies % 2 == 0;
            // A mate found sooner or later is no refutation of a mate (a longer mate differs by a few points only).
            let mates =
                earlier.score.is_mate() && score.is_mate() && (earlier.score.value() > 0) == (score.value() > 0);
            if earlier.from_tree
                && !mates
                && !earlier.refuted
                && same_side
                && plies <= REFUTATION_PLIES
                && line.moves.get(earlier.ply) == Some(&earlier.best)
                && score.value() <= earlier.score.value() - REFUTATION_DROP_CP
            {
                earlier.refuted = true;
                self.refutations.push(Refutation {
                    line: line.prefix(earlier.ply),
                    best: earlier.best,
                    reply: line.moves.get(earlier.ply + 1).copied(),
                    score: earlier.score,
                    depth: earlier.depth,
                    later: score,
                    later_depth: depth,
                    plies,
                });
            }
        }
        self.answers.push(Answer { ply, best, from_tree, score, depth, refuted: false });
    }

    /// A `go ponder` on `pondered` ended without its `ponderhit` (the opponent played another move, or the game
    /// ended first): the move it guessed, the last of `pondered`, was not played. Where the game's line is still the
    /// pondered one, it is cut back to before that move.
    pub fn guess_not_played(&mut self, pondered: &Line) {
        if let Some(line) = &mut self.line
            && line.start == pondered.start
            && line.moves == pondered.moves
        {
            *line = line.prefix(line.moves.len().saturating_sub(1));
        }
    }

    /// The GUI analysed in this game: it is not recorded.
    pub fn analysed(&mut self) {
        self.analysed = true;
    }

    /// The game ends (`ucinewgame`, `quit`): what there is to write.
    pub fn take(&mut self) -> Option<GameRecord> {
        let record = std::mem::take(self);
        (record.line.as_ref().is_some_and(|l| !l.moves.is_empty()) && !record.analysed && !record.played.is_empty())
            .then_some(record)
    }

    /// The game as PGN text.
    pub fn pgn(&self, date: &str) -> String {
        let Some(line) = &self.line else { return String::new() };
        let name = |c: Color| if self.played.contains(&c) { "deeptree" } else { "?" };
        let fen = shakmaty::fen::Fen::from_position(&line.start, shakmaty::EnPassantMode::Legal).to_string();
        let result = line.root().outcome().to_string();
        let mut text = format!(
            "[Event \"deeptree game\"]\n[Date \"{date}\"]\n[White \"{}\"]\n[Black \"{}\"]\n[Result \"{result}\"]\n",
            name(Color::White),
            name(Color::Black)
        );
        if line.chess960 {
            text.push_str("[Variant \"Chess960\"]\n");
        }
        if line.start != Chess::default() {
            text.push_str(&format!("[SetUp \"1\"]\n[FEN \"{fen}\"]\n"));
        }
        text.push('\n');
        let mut words = Vec::new();
        for (ply, (position, uci)) in line.positions.iter().zip(&line.moves).enumerate() {
            let Ok(m) = uci.to_move(position) else { break };
            if position.turn() == Color::White {
                words.push(format!("{}.", position.fullmoves()));
            } else if ply == 0 {
                words.push(format!("{}...", position.fullmoves()));
            }
            words.push(SanPlus::from_move(position.clone(), m).to_string());
        }
        words.push(result);
        // Lines of at most 80 characters, as PGN asks.
        wrap(&mut text, &words, 80);
        text.push_str("\n\n");
        text
    }

    /// Appends the game to the PGN file at `path` (created when absent).
    pub fn append_to(&self, path: &Path, date: &str) -> Result<(), InteropError> {
        let io = |source| InteropError::Io { path: path.to_owned(), source: std::sync::Arc::new(source) };
        let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
        file.write_all(self.pgn(date).as_bytes()).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_game_is_recorded_with_deeptree_on_the_side_it_played_and_its_moves_as_last_sent() {
        let mut record = GameRecord::default();
        let first = Line::parse(None, "e2e4 e7e5 g1f3").unwrap();
        assert!(record.position(&Line::parse(None, "e2e4").unwrap()).is_none());
        record.played(); // Black to move
        // A takeback and another move: the game's moves are the last ones sent.
        assert!(record.position(&first).is_none());
        record.played();
        let ended = record.take().expect("a game");
        let text = ended.pgn("2026.11.26");
        assert!(text.contains("[White \"?\"]\n[Black \"deeptree\"]"), "{text}");
        assert!(text.contains("\n1. e4 e5 2. Nf3 *\n"), "{text}");
        assert!(record.take().is_none(), "taken once");
    }

    #[test]
    fn a_later_search_of_the_same_side_50_cp_lower_within_10_plies_refutes_a_tree_move() {
        let e4: UciMove = "e2e4".parse().unwrap();
        let nf3: UciMove = "g1f3".parse().unwrap();
        let game = |moves: &str| Line::parse(None, moves).unwrap();
        // 40 cp lower: no refutation; 50: one; the opponent's plies and searches after 10 plies are not compared.
        for (later, moves, played, refuted) in [
            (-10, "e2e4 e7e5", "g1f3", false),
            (-20, "e2e4 e7e5", "g1f3", true),
            (-90, "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 b5a4 g8f6 e1g1 f8e7", "d2d3", true),
            (-90, "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 b5a4 g8f6 e1g1 f8e7 f1e1 b7b5", "d2d3", false),
            (-90, "e2e4 e7e5 g1f3", "b8c6", false),
        ] {
            let mut record = GameRecord::default();
            record.position(&game(""));
            record.answered(&e4, true, Score::cp(30), 24);
            record.position(&game(moves));
            record.answered(&played.parse().unwrap(), false, Score::cp(later), 18);
            assert_eq!(record.refutations.len(), usize::from(refuted), "{later} after {moves}");
        }
        // A search's own move is no tree move: nothing to refute.
        let mut record = GameRecord::default();
        record.position(&game(""));
        record.answered(&e4, false, Score::cp(30), 24);
        record.position(&game("e2e4 e7e5"));
        record.answered(&nf3, false, Score::cp(-90), 18);
        assert!(record.refutations.is_empty());
        // A tree move the game no longer went through (a takeback): nothing to refute.
        let mut record = GameRecord::default();
        record.position(&game(""));
        record.answered(&e4, true, Score::cp(30), 24);
        record.position(&game("d2d4 e7e5"));
        record.answered(&nf3, false, Score::cp(-90), 18);
        assert!(record.refutations.is_empty());
    }

    #[test]
    fn analysis_or_no_timed_go_is_not_a_game() {
        let mut record = GameRecord::default();
        record.position(&Line::parse(None, "e2e4").unwrap());
        record.played();
        record.analysed();
        assert!(record.take().is_none());
        record.position(&Line::parse(None, "d2d4").unwrap());
        assert!(record.take().is_none(), "deeptree never moved");
    }

    #[test]
    fn a_line_that_leaves_the_games_moves_is_another_game_and_a_short_takeback_is_not() {
        let game = |moves: &str| Line::parse(None, moves).unwrap();
        let mut record = GameRecord::default();
        record.position(&game("a2a3 e7e5 b2b3"));
        record.played();
        // Two plies taken back, then on: the same game.
        assert!(record.position(&game("a2a3 e7e6")).is_none());
        assert!(record.position(&game("a2a3 e7e6 c2c3 d7d5")).is_none());
        // From the same start, another opening: the game before ended.
        let ended = record.position(&game("e2e4 a7a6 d2d4")).expect("a new game");
        assert!(ended.pgn("?").contains("1. a3 e6 2. c3 d5 *"), "{}", ended.pgn("?"));
        record.played();
        let second = record.take().expect("the second game");
        assert!(second.pgn("?").contains("[White \"?\"]\n[Black \"deeptree\"]"), "{}", second.pgn("?"));
    }

    #[test]
    fn another_start_ends_the_game_before() {
        let mut record = GameRecord::default();
        record.position(&Line::parse(None, "e2e4 e7e5").unwrap());
        record.played();
        let other = Line::parse(Some("8/8/8/8/8/k7/8/K6R w - - 0 1"), "h1h2").unwrap();
        let ended = record.position(&other).expect("the first game ended");
        let text = ended.pgn("?");
        assert!(text.contains("1. e4 e5 *"), "{text}");
        assert!(record.take().is_none(), "the second game has no timed go yet");
    }
}
