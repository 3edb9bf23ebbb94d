//! A typed, tolerant parser for what a UCI engine writes.
//!
//! ```
//! use deeptree::engine::protocol::{EngineMessage, parse_line};
//! use deeptree::score::{Bound, Score};
//!
//! let EngineMessage::Info(info) = parse_line("info depth 12 seldepth 17 multipv 1 score cp -31 upperbound nodes 90210 pv e7e5 g1f3")
//! else { panic!() };
//! assert_eq!(info.depth, Some(12));
//! assert_eq!(info.score, Some((Score::cp(-31), Bound::Upper)));
//! assert_eq!(info.pv.len(), 2);
//! ```
//!
//! Unknown tokens are skipped, `string` takes the rest of the line, and a line that means nothing is
//! [`EngineMessage::Unknown`]. Moves are only parsed as UCI text here; their legality is checked by the caller
//! against the position searched.

use std::fmt;

use shakmaty::uci::UciMove;

use crate::score::{Bound, Score};

/// One line of engine output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineMessage {
    /// `id name ...`
    IdName(String),
    /// `id author ...`
    IdAuthor(String),
    UciOk,
    ReadyOk,
    Option(EngineOption),
    Info(Info),
    /// `bestmove <move> [ponder <move>]`, the moves as sent (`(none)` and `0000` included).
    BestMove {
        best: String,
        ponder: Option<String>,
    },
    /// Anything else: empty lines, garbage, messages deeptree does not use.
    Unknown,
}

/// An `info` line; fields the engine did not send are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    pub depth: Option<u32>,
    pub seldepth: Option<u32>,
    pub multipv: Option<u32>,
    /// The score and what it says: `lowerbound`/`upperbound` markers give [`Bound::Lower`]/[`Bound::Upper`].
    pub score: Option<(Score, Bound)>,
    /// `wdl W D L`: the win rates of the score, from the side to move's point of view.
    pub wdl: Option<Wdl>,
    pub nodes: Option<u64>,
    pub nps: Option<u64>,
    pub time_ms: Option<u64>,
    pub hashfull: Option<u32>,
    pub tbhits: Option<u64>,
    pub currmove: Option<UciMove>,
    pub currmovenumber: Option<u32>,
    /// The principal variation as sent (syntactically valid moves only, up to the first token that is not one).
    pub pv: Vec<UciMove>,
    /// `string ...`: the rest of the line.
    pub string: Option<String>,
}

/// Win, draw and loss rates in per mille (`wdl W D L` on an `info` line), from the side to move's point of view;
/// they add up to 1000 (an engine's that add up to less, from its rounding, are taken as they are).
///
/// ```
/// use deeptree::engine::protocol::Wdl;
///
/// let wdl: Wdl = "7 981 12".parse()?;
/// assert_eq!((wdl.win, wdl.draw, wdl.loss), (7, 981, 12));
/// assert_eq!(wdl.to_string(), "7 981 12");
/// assert_eq!(wdl.flipped().to_string(), "12 981 7");
/// assert!("500 600 1".parse::<Wdl>().is_err(), "more than 1000 in all");
/// # Ok::<_, deeptree::engine::protocol::BadWdl>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Wdl {
    pub win: u16,
    pub draw: u16,
    pub loss: u16,
}

impl Wdl {
    /// The same rates from the other side's point of view: its win is this side's loss.
    pub fn flipped(self) -> Wdl {
        Wdl { win: self.loss, draw: self.draw, loss: self.win }
    }
}

/// Three numbers that are no win, draw and loss rates in per mille.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not three per mille rates that add up to 1000 at most (win draw loss)")]
pub struct BadWdl(String);

impl std::str::FromStr for Wdl {
    type Err = BadWdl;

    fn from_str(text: &str) -> Result<Wdl, BadWdl> {
        let bad = || BadWdl(text.to_owned());
        let numbers: Vec<u16> = text.split_whitespace().map(str::parse).collect::<Result<_, _>>().map_err(|_| bad())?;
        match numbers[..] {
            [win, draw, loss] if u32::from(win) + u32::from(draw) + u32::from(loss) <= 1000 => {
                Ok(Wdl { win, draw, loss })
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Wdl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.win, self.draw, self.loss)
    }
}

/// The type and limits of an engine option, as the engine declared them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionKind {
    Check { default: bool },
    Spin { default: i64, min: i64, max: i64 },
    Combo { default: String, vars: Vec<String> },
    Button,
    String { default: String },
}

/// An option an engine offers (`option name ... type ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOption {
    pub name: String,
    pub kind: OptionKind,
}

impl EngineOption {
    /// The `option` line that offers this option again, as a UCI engine would print it.
    ///
    /// ```
    /// use deeptree::engine::protocol::{EngineMessage, parse_line};
    ///
    /// let line = "option name Hash type spin default 16 min 1 max 33554432";
    /// let EngineMessage::Option(option) = parse_line(line) else { panic!() };
    /// assert_eq!(option.to_uci(), line);
    /// ```
    pub fn to_uci(&self) -> String {
        let name = &self.name;
        match &self.kind {
            OptionKind::Check { default } => {
                format!("option name {name} type check default {default}")
            }
            OptionKind::Spin { default, min, max } => {
                format!("option name {name} type spin default {default} min {min} max {max}")
            }
            OptionKind::Combo { default, vars } => {
                let mut line = format!("option name {name} type combo default {default}");
                for var in vars {
                    line.push_str(" var ");
                    line.push_str(var);
                }
                line
            }
            OptionKind::Button => format!("option name {name} type button"),
            // An empty string is declared as `<empty>`, as Stockfish does: GUIs read a bare `default` as no default.
            OptionKind::String { default } if default.is_empty() => {
                format!("option name {name} type string default <empty>")
            }
            OptionKind::String { default } => {
                format!("option name {name} type string default {default}")
            }
        }
    }

    /// The value to send with `setoption` for `value`, checked against the option's type: a spin is clamped to its
    /// range, a check must be `true` or `false`, a combo one of its values (in the engine's spelling). `None` when
    /// the value does not fit; buttons take no value (`Some("")`).
    pub fn checked_value(&self, value: &str) -> Option<String> {
        let value = value.trim();
        match &self.kind {
            OptionKind::Check { .. } => {
                ["true", "false"].into_iter().find(|b| b.eq_ignore_ascii_case(value)).map(str::to_owned)
            }
            OptionKind::Spin { min, max, .. } => {
                value.parse::<i64>().ok().map(|v| v.clamp(*min, (*max).max(*min)).to_string())
            }
            OptionKind::Combo { vars, .. } => vars.iter().find(|v| v.eq_ignore_ascii_case(value)).cloned(),
            OptionKind::Button => Some(String::new()),
            OptionKind::String { .. } => Some(value.to_owned()),
        }
    }
}

/// Parses one line of engine output. Never fails: what cannot be understood is [`EngineMessage::Unknown`].
pub fn parse_line(line: &str) -> EngineMessage {
    let mut tokens = line.split_whitespace();
    match tokens.next() {
        Some("id") => match tokens.next() {
            Some("name") => EngineMessage::IdName(rest(tokens)),
            Some("author") => EngineMessage::IdAuthor(rest(tokens)),
            _ => EngineMessage::Unknown,
        },
        Some("uciok") => EngineMessage::UciOk,
        Some("readyok") => EngineMessage::ReadyOk,
        Some("bestmove") => match tokens.next() {
            Some(best) => {
                let ponder = match (tokens.next(), tokens.next()) {
                    (Some("ponder"), Some(m)) => Some(m.to_owned()),
                    _ => None,
                };
                EngineMessage::BestMove { best: best.to_owned(), ponder }
            }
            None => EngineMessage::Unknown,
        },
        Some("info") => EngineMessage::Info(parse_info(tokens)),
        Some("option") => parse_option(tokens).map_or(EngineMessage::Unknown, EngineMessage::Option),
        _ => EngineMessage::Unknown,
    }
}

impl Info {
    /// `info string TEXT`.
    pub fn string(text: impl Into<String>) -> Info {
        Info { string: Some(text.into()), ..Info::default() }
    }

    /// `info string error: TEXT`: how deeptree reports what it could not do.
    pub fn error(text: impl fmt::Display) -> Info {
        Info::string(format!("error: {text}"))
    }
}

/// The line as UCI writes it: the fields that are set, `string` last (it takes the rest of the line).
impl fmt::Display for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("info")?;
        for (name, value) in [("depth", self.depth), ("seldepth", self.seldepth), ("multipv", self.multipv)] {
            if let Some(value) = value {
                write!(f, " {name} {value}")?;
            }
        }
        if let Some((score, bound)) = self.score {
            write!(f, " score {score}")?;
            match bound {
                Bound::Exact => {}
                Bound::Lower => f.write_str(" lowerbound")?,
                Bound::Upper => f.write_str(" upperbound")?,
            }
            if let Some(wdl) = self.wdl {
                write!(f, " wdl {wdl}")?;
            }
        }
        for (name, value) in [("nodes", self.nodes), ("nps", self.nps), ("time", self.time_ms), ("tbhits", self.tbhits)]
        {
            if let Some(value) = value {
                write!(f, " {name} {value}")?;
            }
        }
        if let Some(hashfull) = self.hashfull {
            write!(f, " hashfull {hashfull}")?;
        }
        if let Some(currmove) = &self.currmove {
            write!(f, " currmove {currmove}")?;
        }
        if let Some(number) = self.currmovenumber {
            write!(f, " currmovenumber {number}")?;
        }
        if !self.pv.is_empty() {
            f.write_str(" pv")?;
            for m in &self.pv {
                write!(f, " {m}")?;
            }
        }
        if let Some(text) = &self.string {
            write!(f, " string {text}")?;
        }
        Ok(())
    }
}

fn rest<'a>(tokens: impl Iterator<Item = &'a str>) -> String {
    tokens.collect::<Vec<_>>().join(" ")
}

fn parse_info<'a>(tokens: impl Iterator<Item = &'a str>) -> Info {
    let mut info = Info::default();
    let mut tokens = tokens.peekable();
    while let Some(token) = tokens.next() {
        match token {
            "depth" => info.depth = number(tokens.next()),
            "seldepth" => info.seldepth = number(tokens.next()),
            "multipv" => info.multipv = number(tokens.next()),
            "nodes" => info.nodes = number(tokens.next()),
            "nps" => info.nps = number(tokens.next()),
            "time" => info.time_ms = number(tokens.next()),
            "hashfull" => info.hashfull = number(tokens.next()),
            "tbhits" => info.tbhits = number(tokens.next()),
            "currmovenumber" => info.currmovenumber = number(tokens.next()),
            "currmove" => info.currmove = tokens.next().and_then(|m| UciMove::from_ascii(m.as_bytes()).ok()),
            "score" => {
                let mut score = None;
                let mut bound = Bound::Exact;
                while let Some(&next) = tokens.peek() {
                    match next {
                        "cp" => {
                            tokens.next();
                            score = number::<i32>(tokens.next()).map(Score::cp);
                        }
                        "mate" => {
                            tokens.next();
                            score = number::<i32>(tokens.next()).map(Score::from_uci_mate);
                        }
                        "lowerbound" => {
                            tokens.next();
                            bound = Bound::Lower;
                        }
                        "upperbound" => {
                            tokens.next();
                            bound = Bound::Upper;
                        }
                        // Stockfish writes its win rates between the score and its bound.
                        "wdl" => {
                            tokens.next();
                            info.wdl = wdl(&mut tokens);
                        }
                        _ => break,
                    }
                }
                info.score = score.map(|s| (s, bound));
            }
            "pv" => {
                info.pv.clear();
                while let Some(m) = tokens.peek().and_then(|t| UciMove::from_ascii(t.as_bytes()).ok()) {
                    info.pv.push(m);
                    tokens.next();
                }
            }
            "wdl" => info.wdl = wdl(&mut tokens),
            "string" => {
                info.string = Some(rest(&mut tokens));
            }
            _ => {}
        }
    }
    info
}

/// The three numbers after `wdl` (none where they are not win, draw and loss rates).
fn wdl<'a>(tokens: &mut impl Iterator<Item = &'a str>) -> Option<Wdl> {
    let numbers: Vec<&str> = tokens.take(3).collect();
    numbers.join(" ").parse().ok()
}

fn number<T: std::str::FromStr>(token: Option<&str>) -> Option<T> {
    token.and_then(|t| t.parse().ok())
}

/// Keywords that end a field of an `option` line.
const OPTION_KEYWORDS: &[&str] = &["name", "type", "default", "min", "max", "var"];

fn parse_option<'a>(tokens: impl Iterator<Item = &'a str>) -> Option<EngineOption> {
    let mut name = None;
    let mut kind = None;
    let mut default = None;
    let mut min = None;
    let mut max = None;
    let mut vars = Vec::new();
    let mut tokens = tokens.peekable();
    while let Some(keyword) = tokens.next() {
        let mut words = Vec::new();
        while let Some(&t) = tokens.peek() {
            if OPTION_KEYWORDS.contains(&t) {
                break;
            }
            words.push(t);
            tokens.next();
        }
        let value = words.join(" ");
        match keyword {
            "name" => name = Some(value),
            "type" => kind = Some(value),
            "default" => default = Some(value),
            "min" => min = value.parse::<i64>().ok(),
            "max" => max = value.parse::<i64>().ok(),
            "var" => vars.push(value),
            _ => {}
        }
    }
    let name = name.filter(|n| !n.is_empty())?;
    let default_text = || {
        let d = default.clone().unwrap_or_default();
        if d == "<empty>" { String::new() } else { d }
    };
    let kind = match kind?.as_str() {
        "check" => OptionKind::Check { default: default.as_deref()?.eq_ignore_ascii_case("true") },
        "spin" => {
            let default: i64 = default.as_deref()?.parse().ok()?;
            OptionKind::Spin { default, min: min.unwrap_or(i64::MIN), max: max.unwrap_or(i64::MAX) }
        }
        "combo" => OptionKind::Combo { default: default_text(), vars },
        "button" => OptionKind::Button,
        "string" => OptionKind::String { default: default_text() },
        _ => return None,
    };
    Some(EngineOption { name, kind })
}

/// One line read by [`read_line`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadLine {
    /// A line without its ending; `lossy`: it held bytes that are not UTF-8, each read as U+FFFD.
    Line { text: String, lossy: bool },
    /// A line longer than the limit, read to its end and dropped.
    Skipped,
    /// The end of the input.
    End,
}

/// Reads one UCI line from `reader` into `buf` (cleared first), as either side of the protocol may send it: bytes
/// that are not UTF-8 (a GUI writing a path in its own code page) are read as U+FFFD instead of ending the input,
/// the line ending (`\n` or `\r\n`) is removed, and a line over `max` bytes is read to its end and skipped, so that
/// no sender can make the reader hold more than `max + 1` bytes.
///
/// ```
/// use deeptree::engine::protocol::{ReadLine, read_line};
///
/// let mut input: &[u8] = b"setoption name SyzygyPath value C:\\Tableb\xe4se\r\nisready\n";
/// let mut buf = Vec::new();
/// let ReadLine::Line { text, lossy } = read_line(&mut input, &mut buf, 1024).unwrap() else { panic!() };
/// assert!(lossy && text.ends_with("Tableb\u{FFFD}se"));
/// assert_eq!(read_line(&mut input, &mut buf, 1024).unwrap(), ReadLine::Line { text: "isready".into(), lossy: false });
/// assert_eq!(read_line(&mut input, &mut buf, 1024).unwrap(), ReadLine::End);
/// ```
pub fn read_line(reader: &mut impl std::io::BufRead, buf: &mut Vec<u8>, max: usize) -> std::io::Result<ReadLine> {
    use std::io::{BufRead as _, Read as _};
    let mut skipping = false;
    loop {
        buf.clear();
        match reader.by_ref().take(max as u64 + 1).read_until(b'\n', buf) {
            Ok(0) => return Ok(ReadLine::End),
            // No line ending within `max + 1` bytes: the line is too long; read on to its end.
            Ok(_) if buf.last() != Some(&b'\n') && buf.len() > max => skipping = true,
            Ok(_) if skipping => return Ok(ReadLine::Skipped),
            Ok(_) => {
                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                    buf.pop();
                }
                return Ok(match String::from_utf8_lossy(buf) {
                    std::borrow::Cow::Borrowed(text) => ReadLine::Line { text: text.to_owned(), lossy: false },
                    std::borrow::Cow::Owned(text) => ReadLine::Line { text, lossy: true },
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(line: &str) -> Info {
        match parse_line(line) {
            EngineMessage::Info(info) => info,
            other => panic!("{line}: {other:?}"),
        }
    }

    /// What deeptree writes of an `info` line, the parser reads back as it was.
    #[test]
    fn an_info_line_reads_back_as_written() {
        let written = Info {
            depth: Some(20),
            seldepth: Some(31),
            multipv: Some(2),
            score: Some((Score::from_uci_mate(-3), Bound::Lower)),
            wdl: Some(Wdl { win: 0, draw: 2, loss: 998 }),
            nodes: Some(123_456),
            nps: Some(1_000_000),
            time_ms: Some(123),
            hashfull: Some(512),
            tbhits: Some(7),
            currmove: "e2e4".parse().ok(),
            currmovenumber: Some(1),
            pv: vec!["e2e4".parse().unwrap(), "e7e5".parse().unwrap()],
            string: Some("a note with words".into()),
        };
        assert_eq!(info(&written.to_string()), written);
        assert_eq!(Info::error("no position").to_string(), "info string error: no position");
    }

    fn option(line: &str) -> EngineOption {
        match parse_line(line) {
            EngineMessage::Option(option) => option,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn handshake_lines() {
        assert_eq!(parse_line("id name Stockfish 15.1"), EngineMessage::IdName("Stockfish 15.1".into()));
        assert_eq!(parse_line("id author the  Stockfish devs"), EngineMessage::IdAuthor("the Stockfish devs".into()));
        assert_eq!(parse_line("uciok"), EngineMessage::UciOk);
        assert_eq!(parse_line("  readyok  "), EngineMessage::ReadyOk);
        assert_eq!(
            parse_line("bestmove e2e4 ponder e7e5"),
            EngineMessage::BestMove { best: "e2e4".into(), ponder: Some("e7e5".into()) }
        );
        assert_eq!(parse_line("bestmove (none)"), EngineMessage::BestMove { best: "(none)".into(), ponder: None });
    }

    #[test]
    fn options_are_typed() {
        assert_eq!(
            option("option name Threads type spin default 1 min 1 max 1024"),
            EngineOption { name: "Threads".into(), kind: OptionKind::Spin { default: 1, min: 1, max: 1024 } }
        );
        assert_eq!(option("option name Clear Hash type button").kind, OptionKind::Button);
        assert_eq!(option("option name Ponder type check default false").kind, OptionKind::Check { default: false });
        assert_eq!(
            option("option name Debug Log File type string default ").kind,
            OptionKind::String { default: "".into() }
        );
        assert_eq!(
            option("option name SyzygyPath type string default <empty>").kind,
            OptionKind::String { default: "".into() }
        );
        let style = option("option name Analysis Contempt type combo default Both var Off var White var Both");
        assert_eq!(style.name, "Analysis Contempt");
        assert_eq!(
            style.kind,
            OptionKind::Combo { default: "Both".into(), vars: vec!["Off".into(), "White".into(), "Both".into()] }
        );
        assert_eq!(style.checked_value("white").as_deref(), Some("White"));
        assert_eq!(style.checked_value("Black"), None);
        let threads = option("option name Threads type spin default 1 min 1 max 1024");
        assert_eq!(threads.checked_value("5000").as_deref(), Some("1024"));
        assert_eq!(threads.checked_value("two"), None);
        for bad in ["option", "option name", "option name X", "option name X type spin default z", "option type spin"] {
            assert_eq!(parse_line(bad), EngineMessage::Unknown, "{bad}");
        }
    }

    #[test]
    fn info_lines_keep_bounds_and_skip_unknown_tokens() {
        let i = info(
            "info depth 20 seldepth 31 multipv 2 score cp 17 lowerbound nodes 1234 nps 99 hashfull 5 tbhits 0 time 12 pv e2e4 e7e5",
        );
        assert_eq!((i.depth, i.seldepth, i.multipv), (Some(20), Some(31), Some(2)));
        assert_eq!(i.score, Some((Score::cp(17), Bound::Lower)));
        assert_eq!(
            (i.nodes, i.nps, i.time_ms, i.hashfull, i.tbhits),
            (Some(1234), Some(99), Some(12), Some(5), Some(0))
        );
        assert_eq!(i.pv, vec![UciMove::from_ascii(b"e2e4").unwrap(), UciMove::from_ascii(b"e7e5").unwrap()]);

        let i = info("info depth 9 score mate -3 wdl 0 0 1000 frobnicate 7 pv g1f3 nonsense depth 10");
        assert_eq!(i.score, Some((Score::from_uci_mate(-3), Bound::Exact)));
        assert_eq!(i.wdl, Some(Wdl { win: 0, draw: 0, loss: 1000 }));
        assert_eq!(i.pv.len(), 1);
        assert_eq!(i.depth, Some(10));

        let i = info("info string pv e2e4 score cp 3 depth 1");
        assert_eq!(i.string.as_deref(), Some("pv e2e4 score cp 3 depth 1"));
        assert_eq!((i.score, i.depth), (None, None));

        let i = info("info depth x score cp banana upperbound currmove e2e4 currmovenumber 1");
        assert_eq!((i.depth, i.score), (None, None));
        assert_eq!(i.currmove, UciMove::from_ascii(b"e2e4").ok());
    }

    #[test]
    fn win_rates_are_read_wherever_the_engine_puts_them_and_written_after_the_bound() {
        // Stockfish 15 and 16 put them between the score and its bound.
        let i = info("info depth 6 seldepth 4 multipv 1 score cp -125 wdl 0 186 814 upperbound nodes 706 pv e7e5");
        assert_eq!(i.score, Some((Score::cp(-125), Bound::Upper)));
        assert_eq!(i.wdl, Some(Wdl { win: 0, draw: 186, loss: 814 }));
        assert_eq!(i.nodes, Some(706));
        assert_eq!(
            i.to_string(),
            "info depth 6 seldepth 4 multipv 1 score cp -125 upperbound wdl 0 186 814 nodes 706 pv e7e5"
        );
        let i = info("info depth 6 score cp 20 lowerbound wdl 30 950 20 nodes 9");
        assert_eq!((i.score, i.wdl.map(|w| w.win), i.nodes), (Some((Score::cp(20), Bound::Lower)), Some(30), Some(9)));
        // Rates that are not rates are dropped, and the line read on.
        let i = info("info depth 6 score cp 20 wdl 900 900 900 nodes 9");
        assert_eq!((i.wdl, i.nodes), (None, Some(9)));
    }

    #[test]
    fn garbage_is_unknown() {
        for line in
            ["", "   ", "hello", "id", "bestmove", "\u{fffd}\u{fffd}", "Stockfish 15.1 by the Stockfish developers"]
        {
            assert_eq!(parse_line(line), EngineMessage::Unknown, "{line:?}");
        }
    }
}
