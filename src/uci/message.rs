//! What deeptree sends the GUI, as typed messages with `Display`, and the one writer of stdout.
//!
//! ```
//! use deeptree::{score::{Bound, Score}, uci::message::{BestMove, Info}};
//!
//! let info = Info { depth: Some(20), score: Some((Score::cp(31), Bound::Exact)), pv: vec!["e2e4".parse()?], ..Info::default() };
//! assert_eq!(info.to_string(), "info depth 20 score cp 31 pv e2e4");
//! assert_eq!(BestMove::new("e2e4".parse()?, None).to_string(), "bestmove e2e4");
//! assert_eq!(BestMove::none().to_string(), "bestmove 0000");
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! An `info` line is the one wire type both ways: the engine's, parsed by [`crate::engine::protocol`], is written by
//! the same [`Info`]'s `Display`.
//!
//! [`Out`] writes lines; the session holds it and writes `bestmove` from one place (see `session`), so that every
//! `go` gets exactly one. A search thread gets an [`InfoOut`], which writes `info` lines and nothing else.

use std::{
    fmt,
    io::Write,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use shakmaty::uci::UciMove;

pub use crate::engine::protocol::Info;

/// `bestmove` with its `ponder` move, in the GUI's notation; `bestmove 0000` where there is no move to play.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BestMove {
    best: Option<UciMove>,
    ponder: Option<UciMove>,
}

impl BestMove {
    pub fn new(best: UciMove, ponder: Option<UciMove>) -> BestMove {
        BestMove { best: Some(best), ponder }
    }

    /// The move played, in the GUI's notation (`None`: no move).
    pub fn best(&self) -> Option<UciMove> {
        self.best
    }

    /// No legal move, or no position to play from.
    pub fn none() -> BestMove {
        BestMove { best: None, ponder: None }
    }
}

impl fmt::Display for BestMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.best, &self.ponder) {
            (Some(best), Some(ponder)) => write!(f, "bestmove {best} ponder {ponder}"),
            (Some(best), None) => write!(f, "bestmove {best}"),
            (None, _) => f.write_str("bestmove 0000"),
        }
    }
}

/// The other messages of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Id { name: String, author: String },
    Option(crate::engine::protocol::EngineOption),
    UciOk,
    ReadyOk,
    Info(Info),
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::Id { name, author } => write!(f, "id name {name}\nid author {author}"),
            Message::Option(option) => f.write_str(&option.to_uci()),
            Message::UciOk => f.write_str("uciok"),
            Message::ReadyOk => f.write_str("readyok"),
            Message::Info(info) => info.fmt(f),
        }
    }
}

impl From<Info> for Message {
    fn from(info: Info) -> Message {
        Message::Info(info)
    }
}

/// The protocol's side of stdout: one message at a time, flushed. Closed at `quit`: nothing is written after it.
#[derive(Clone)]
pub struct Out {
    stdout: Arc<Mutex<std::io::Stdout>>,
    closed: Arc<AtomicBool>,
    /// A write found the GUI's end of stdout closed: nobody reads any more.
    gone: Arc<AtomicBool>,
    /// What every `info` line of the search under way gets added.
    search: Arc<Mutex<SearchExtras>>,
}

/// What [`Out`] adds to each `info` line of the search under way, set at its `go` ([`Out::begin_search`]).
#[derive(Debug, Clone, Copy, Default)]
struct SearchExtras {
    /// `UCI_ShowWDL`: the material of the search's position, which the win-rate model reads; `None` when off.
    wdl_material: Option<u32>,
    /// Nodes searched for this `go` before its current search (a `go ponder`'s growth, before the search after
    /// `ponderhit`): added to every count written, so that the GUI's count never drops within one `go`.
    nodes_before: u64,
}

impl Default for Out {
    fn default() -> Out {
        Out {
            stdout: Arc::new(Mutex::new(std::io::stdout())),
            closed: Arc::default(),
            gone: Arc::default(),
            search: Arc::default(),
        }
    }
}

impl Out {
    pub fn send(&self, message: impl Into<Message>) {
        let mut message = message.into();
        if let Message::Info(info) = &mut message {
            self.complete(info);
        }
        self.write(&message);
    }

    /// A search begins: its `info` lines carry win rates (`UCI_ShowWDL`) for a position of `wdl_material` (see
    /// `uci::wdl`), or none (`None`), and count their nodes from 0.
    pub fn begin_search(&self, wdl_material: Option<u32>) {
        *self.search.lock() = SearchExtras { wdl_material, nodes_before: 0 };
    }

    /// From now on every count the search writes starts from `nodes` searched before in its `go`.
    pub fn count_from(&self, nodes: u64) {
        self.search.lock().nodes_before = nodes;
    }

    /// What an `info` line of the search gets: the nodes searched before in its `go` added to its count; win rates
    /// on a line with a score when they are on (the inner engine's own where it gave them, relayed as they are, else
    /// the model's for the score the line shows, from the same side to move's point of view); when off, none.
    fn complete(&self, info: &mut Info) {
        let SearchExtras { wdl_material, nodes_before } = *self.search.lock();
        if let Some(nodes) = info.nodes.as_mut() {
            *nodes = nodes.saturating_add(nodes_before);
        }
        match (wdl_material, info.score) {
            (None, _) => info.wdl = None,
            (Some(material), Some((score, _))) if info.wdl.is_none() => {
                info.wdl = Some(super::wdl::win_rates_at(score, material));
            }
            (Some(_), _) => {}
        }
    }

    /// `info string error: TEXT`.
    pub fn error(&self, text: impl fmt::Display) {
        self.send(Info::error(text));
    }

    /// Writes a `bestmove`. Only the session calls it, once per `go` (see `session::Session::answer`).
    pub fn bestmove(&self, best: &BestMove) {
        self.write(best);
    }

    /// The writer a search thread gets: `info` lines only, each search its own (it keeps the search's last line).
    pub fn info_out(&self) -> InfoOut {
        InfoOut { out: self.clone(), last_line: LastLine::default() }
    }

    /// The GUI no longer reads stdout (a write found the pipe closed): the session ends as on `quit`.
    pub fn gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }

    /// Nothing more is written: the GUI said `quit`.
    pub fn close(&self) {
        // Under the lock: a line being written is out before this returns, and none comes after.
        let _stdout = self.stdout.lock();
        self.closed.store(true, Ordering::SeqCst);
    }

    fn write(&self, line: &dyn fmt::Display) {
        let stdout = self.stdout.lock();
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let mut lock = stdout.lock();
        let written = writeln!(lock, "{line}").and_then(|()| lock.flush());
        if let Err(e) = written
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            self.gone.store(true, Ordering::SeqCst);
        }
        drop(lock);
        drop(stdout);
        log::debug!(">> {line}");
    }
}

/// A search thread's side of stdout: `info` lines only (its `bestmove` is the session's to write). It remembers the
/// first move of the last principal line it wrote, for a session that must answer without the search.
#[derive(Clone)]
pub struct InfoOut {
    out: Out,
    last_line: LastLine,
}

impl InfoOut {
    pub fn send(&self, info: Info) {
        // A search the session answered for says nothing more: its lines would land in the next search's.
        if self.last_line.0.muted.load(Ordering::SeqCst) {
            return;
        }
        // The best line only: MultiPV's other lines are not what the search would play.
        if let Some(first) = info.pv.first()
            && info.multipv.is_none_or(|k| k == 1)
        {
            *self.last_line.0.first.lock() = Some(*first);
        }
        self.out.send(info);
    }

    /// `info string error: TEXT`.
    pub fn error(&self, text: impl fmt::Display) {
        if !self.last_line.0.muted.load(Ordering::SeqCst) {
            self.out.error(text);
        }
    }

    /// From now on every count of this search, its answer's lines among them, starts from `nodes` searched before
    /// in its `go` (see [`Out::count_from`]).
    pub fn count_from(&self, nodes: u64) {
        self.out.count_from(nodes);
    }

    /// `info string TEXT` as a note of `kind`, where it is to be written: its text differs from the last of its kind
    /// this search wrote, and that one is [`NOTE_EVERY`] old or more (or there was none). `None` otherwise.
    pub fn note(&self, kind: Note, text: String) -> Option<Info> {
        self.note_when(kind, text, true)
    }

    /// As [`InfoOut::note`] for the batch right before `bestmove`: written where its text changed, however soon after
    /// the last, so that the GUI's last note agrees with the move.
    pub fn final_note(&self, kind: Note, text: String) -> Option<Info> {
        self.note_when(kind, text, false)
    }

    fn note_when(&self, kind: Note, text: String, at_most_every_second: bool) -> Option<Info> {
        let now = Instant::now();
        let mut notes = self.last_line.0.notes.lock();
        match notes.iter_mut().find(|(k, ..)| *k == kind) {
            Some((_, last, at)) => {
                if *last == text || (at_most_every_second && now.saturating_duration_since(*at) < NOTE_EVERY) {
                    return None;
                }
                last.clone_from(&text);
                *at = now;
            }
            None => notes.push((kind, text.clone(), now)),
        }
        Some(Info::string(text))
    }

    /// The first move of the last best line written, shared: it stays readable after the search is given up.
    pub fn last_line(&self) -> LastLine {
        self.last_line.clone()
    }
}

/// The first move of the last best line a search wrote (see [`InfoOut::last_line`]), and whether the search may
/// still write.
#[derive(Clone, Default)]
pub struct LastLine(Arc<SearchLines>);

#[derive(Default)]
struct SearchLines {
    first: Mutex<Option<UciMove>>,
    muted: AtomicBool,
    /// The last note of each kind written, and when.
    notes: Mutex<Vec<(Note, String, Instant)>>,
}

/// deeptree's own `info string`s during a search, which would otherwise say the same thing batch after batch: each
/// kind is written only when its text changed, at most once every [`NOTE_EVERY`] (see [`InfoOut::note`]). A client
/// that turns every line into a line of analysis (polyglot for xboard) then shows no stream of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// `info string tree main line ...`
    MainLine,
    /// `info string idea ...`
    Ideas,
}

/// The least time between two notes of one kind.
pub const NOTE_EVERY: Duration = Duration::from_secs(1);

impl LastLine {
    pub fn first_move(&self) -> Option<UciMove> {
        *self.0.first.lock()
    }

    /// The search's `info` lines are dropped from now on.
    pub fn mute(&self) {
        self.0.muted.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::{Bound, Score};

    #[test]
    fn a_note_is_written_when_its_text_changed_at_most_once_a_second() {
        let out = Out::default().info_out();
        let text = |info: Option<Info>| info.and_then(|i| i.string);
        assert_eq!(
            text(out.note(Note::MainLine, "tree main line 1. e4".into())).as_deref(),
            Some("tree main line 1. e4")
        );
        // Another kind is its own.
        assert!(out.note(Note::Ideas, "idea e2e4 +0.30".into()).is_some());
        // The same text: never again; another one: not within the second.
        assert_eq!(out.note(Note::MainLine, "tree main line 1. e4".into()), None);
        assert_eq!(out.note(Note::MainLine, "tree main line 1. d4".into()), None);
        std::thread::sleep(NOTE_EVERY);
        assert_eq!(out.note(Note::MainLine, "tree main line 1. e4".into()), None, "still the last one written");
        assert!(out.note(Note::MainLine, "tree main line 1. d4".into()).is_some());
        // The batch before bestmove: a change is written at once, the same text still not.
        assert_eq!(out.final_note(Note::MainLine, "tree main line 1. d4".into()), None);
        assert!(out.final_note(Note::MainLine, "tree main line 1. c4".into()).is_some());
        // Each search starts afresh.
        assert!(Out::default().info_out().note(Note::MainLine, "tree main line 1. d4".into()).is_some());
    }

    #[test]
    fn info_lines_are_written_in_the_protocols_order() {
        let info = Info {
            depth: Some(12),
            seldepth: Some(17),
            multipv: Some(2),
            score: Some((Score::cp(-40), Bound::Upper)),
            nodes: Some(1000),
            nps: Some(50_000),
            time_ms: Some(20),
            pv: vec!["e7e5".parse().unwrap(), "g1f3".parse().unwrap()],
            ..Info::default()
        };
        assert_eq!(
            info.to_string(),
            "info depth 12 seldepth 17 multipv 2 score cp -40 upperbound nodes 1000 nps 50000 time 20 pv e7e5 g1f3"
        );
        assert_eq!(Info::error("no position").to_string(), "info string error: no position");
        let ponder = BestMove::new("e1h1".parse().unwrap(), Some("e8g8".parse().unwrap()));
        assert_eq!(ponder.to_string(), "bestmove e1h1 ponder e8g8");
        assert_eq!(Message::ReadyOk.to_string(), "readyok");
    }
}
