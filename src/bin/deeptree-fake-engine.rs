//! A scripted UCI engine for deeptree's tests: legal moves and made-up scores, plus scripted faults.
//!
//! ```text
//! deeptree-fake-engine [--mode MODE] [--latency-ms L] [--state FILE] [--pid-file FILE] [--log FILE] [--stamp FILE]
//! ```
//!
//! `--mode` (or `DEEPTREE_FAKE_MODE`) is one of:
//! - `normal`: answers like an engine; `go depth N` gives N depths of `info` then `bestmove`, `go infinite` waits for
//!   `stop` (`go ponder` for `stop` or `ponderhit`). Line `k` (MultiPV) plays the `k`-th candidate move (legal
//!   moves, or `searchmoves`, in UCI text order) with score `cp 20 - 7(k-1)`.
//! - `crash`: exits in the middle of every search (after one `info` line).
//! - `crash-once`: like `crash` for the first process that finds no `--state` file (it creates it), normal after.
//! - `hang`: after `go`, never answers anything again (`isready` included).
//! - `hang-handshake`: never answers `uci`.
//! - `deaf`: after `go`, one `info` line, then never a `bestmove`: `stop` is ignored, `isready` still answered.
//! - `garbage`: normal, with garbage lines (noise, bad numbers, invalid UTF-8, a 100 KB line) between the real ones.
//! - `illegal`: normal, but the best move is illegal.
//! - `bound-only`: every score carries `lowerbound` or `upperbound` (the last ones `lowerbound`).
//! - `keyed`: like an engine whose scores depend only on the position: every candidate move (legal moves, or
//!   `searchmoves`) scores what deeptree's scripted evaluator gives it (a hash of the position it leads to, -60 to
//!   +60 cp), and the best is answered, so that the move distance window closes after a few alternatives. Unlike a
//!   real engine's, a position's own evaluation is not the negation of the move that leads to it (each is its own
//!   hash), so deeper plies move the values more than a real engine's would.
//! - `smooth`: like `keyed`, with the scripted evaluator's smoother scores: a move scores the negated static value
//!   (material, piece placement, a little noise from the key) of the position it leads to, so a position's own
//!   evaluation stays close to the negated score of the move that led to it, as a real engine's does.
//! - `no-searchmoves`: normal, but `searchmoves` are ignored (as Ethereal 12 and Toga II 3.0 do).
//! - `instant`: answers every `go` at once with one `info` line (depth 1) and `bestmove`, whatever its limits: a
//!   relay's latency is all that remains to measure.
//!
//! `--script FILE` (or `DEEPTREE_FAKE_SCRIPT`) gives some positions their score: each line is a FEN's first four
//! fields, a score in centipawns from the side to move, and optionally a depth; a search of such a position (modes
//! `normal` and `no-searchmoves`) to that depth or less (any depth without one) scores its best line so.
//!
//! `--latency-ms L` (or `DEEPTREE_FAKE_LATENCY_MS`) makes every search with a limit take L milliseconds before it
//! answers, as an engine at a fixed depth would: the host's benchmark (`deeptree bench host`) uses it.
//!
//! `--stamp FILE` (or `DEEPTREE_FAKE_STAMP`) appends, for every `go`, a line `GO_READ BESTMOVE_WRITTEN`: when the
//! `go` line was read and just before its `bestmove` was written, in nanoseconds of the system clock (comparable
//! across processes on one machine). It is written after the `bestmove`, outside the measured hops.
//!
//! `--pid-file` (or `DEEPTREE_FAKE_PID_FILE`) gets the process id appended, one line per process started; `--log`
//! (or `DEEPTREE_FAKE_LOG`) gets every command received appended as `PID COMMAND`.

use std::{
    fs::OpenOptions,
    io::{BufRead, Write},
    process::ExitCode,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use deeptree::search::evaluator::ScriptedEvaluator;
use shakmaty::{CastlingMode, Chess, Position, fen::Fen, uci::UciMove};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    Crash,
    Hang,
    /// Deaf: after `go`, one `info` line and then never a `bestmove`, whatever comes (`stop` included); `isready` is
    /// still answered, so it does not look hung.
    Deaf,
    HangHandshake,
    Garbage,
    Illegal,
    BoundOnly,
    Instant,
    Keyed,
    Smooth,
    /// Normal, but `searchmoves` are ignored.
    NoSearchmoves,
}

struct Fake {
    mode: Mode,
    position: Chess,
    multipv: usize,
    /// A `go infinite` waiting for `stop`: its candidate moves.
    pending: Option<Vec<UciMove>>,
    /// Where `go`/`bestmove` instants are appended.
    stamp: Option<std::fs::File>,
    /// When the `go` being answered was read.
    go_read: u128,
    /// How long every search with a limit takes.
    latency: Duration,
    /// Scores of scripted positions (`--script`), by the first four fields of their FEN, with the deepest search
    /// they hold for.
    script: std::collections::HashMap<String, (i32, u32)>,
}

/// The first four fields of a position's FEN: the key of `--script`.
fn script_key(position: &Chess) -> String {
    let fen = Fen::from_position(position, shakmaty::EnPassantMode::Legal).to_string();
    fen.split_whitespace().take(4).collect::<Vec<_>>().join(" ")
}

/// Reads `--script`: `FEN4 CP [DEPTH]` per line (blank lines and `#` comments skipped).
fn read_script(path: &str) -> Result<std::collections::HashMap<String, (i32, u32)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut script = std::collections::HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let cp = words.get(4).and_then(|w| w.parse().ok());
        let depth = match words.get(5) {
            None => Some(u32::MAX),
            Some(w) => w.parse().ok(),
        };
        let (Some(cp), Some(depth), 5 | 6) = (cp, depth, words.len()) else {
            return Err(format!("{path} line {}: give a FEN's first four fields, a score and a depth", number + 1));
        };
        script.insert(words[..4].join(" "), (cp, depth));
    }
    Ok(script)
}

/// Nanoseconds of the system clock.
fn now_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut mode = std::env::var("DEEPTREE_FAKE_MODE").unwrap_or_else(|_| "normal".into());
    let mut state = std::env::var("DEEPTREE_FAKE_STATE").ok();
    let mut pid_file = std::env::var("DEEPTREE_FAKE_PID_FILE").ok();
    let mut log_file = std::env::var("DEEPTREE_FAKE_LOG").ok();
    let mut stamp_file = std::env::var("DEEPTREE_FAKE_STAMP").ok();
    let mut script_file = std::env::var("DEEPTREE_FAKE_SCRIPT").ok();
    let mut latency_ms: u64 = std::env::var("DEEPTREE_FAKE_LATENCY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mode" => mode = args.next().unwrap_or_default(),
            "--state" => state = args.next(),
            "--pid-file" => pid_file = args.next(),
            "--log" => log_file = args.next(),
            "--stamp" => stamp_file = args.next(),
            "--script" => script_file = args.next(),
            "--latency-ms" => match args.next().and_then(|v| v.parse().ok()) {
                Some(ms) => latency_ms = ms,
                None => {
                    eprintln!("deeptree-fake-engine: --latency-ms takes a number of milliseconds");
                    return ExitCode::from(2);
                }
            },
            other => {
                eprintln!("deeptree-fake-engine: unknown argument {other:?}");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(path) = pid_file
        && let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path)
    {
        // One write per line: with O_APPEND, lines of concurrent processes never interleave.
        let _ = file.write_all(format!("{}\n", std::process::id()).as_bytes());
    }
    let mode = match mode.as_str() {
        "normal" => Mode::Normal,
        "crash" => Mode::Crash,
        "crash-once" => {
            let first = state.is_some_and(|path| OpenOptions::new().write(true).create_new(true).open(path).is_ok());
            if first { Mode::Crash } else { Mode::Normal }
        }
        "hang" => Mode::Hang,
        "deaf" => Mode::Deaf,
        "hang-handshake" => Mode::HangHandshake,
        "garbage" => Mode::Garbage,
        "illegal" => Mode::Illegal,
        "bound-only" => Mode::BoundOnly,
        "instant" => Mode::Instant,
        "keyed" => Mode::Keyed,
        "smooth" => Mode::Smooth,
        "no-searchmoves" => Mode::NoSearchmoves,
        other => {
            eprintln!("deeptree-fake-engine: unknown mode {other:?}");
            return ExitCode::from(2);
        }
    };
    let stamp = stamp_file.and_then(|path| OpenOptions::new().create(true).append(true).open(path).ok());
    let script = match script_file.as_deref().map(read_script).transpose() {
        Ok(script) => script.unwrap_or_default(),
        Err(e) => {
            eprintln!("deeptree-fake-engine: {e}");
            return ExitCode::from(2);
        }
    };
    let mut fake = Fake {
        mode,
        position: Chess::default(),
        multipv: 1,
        pending: None,
        stamp,
        go_read: 0,
        latency: Duration::from_millis(latency_ms),
        script,
    };
    let mut log = log_file.and_then(|path| OpenOptions::new().create(true).append(true).open(path).ok());
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        fake.go_read = now_nanos();
        if let Some(log) = log.as_mut() {
            let _ = log.write_all(format!("{} {}\n", std::process::id(), line.trim()).as_bytes());
        }
        if let Some(code) = fake.handle(line.trim()) {
            return code;
        }
    }
    if matches!(fake.mode, Mode::Hang | Mode::HangHandshake) {
        // A hung engine does not even notice that its input closed.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    ExitCode::SUCCESS
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn garbage() {
    let mut out = std::io::stdout().lock();
    for line in [
        "",
        "hello from the fake engine",
        "info depth banana score cp x",
        "info string bestmove a1a1",
        "bestmove",
        "readyokay",
        "option name",
        "id",
        "info depth 1 frobnicate 3 score",
        "\u{1}\u{2}\u{7f}",
    ] {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.write_all(b"\xff\xfe\xfd not utf-8 \xc3\n");
    let _ = out.write_all(&vec![b'x'; 100 * 1024]);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

impl Fake {
    /// Handles one command; `Some(code)` ends the process.
    fn handle(&mut self, line: &str) -> Option<ExitCode> {
        let mut tokens = line.split_whitespace();
        let command = tokens.next().unwrap_or("");
        if self.mode == Mode::HangHandshake || (self.mode == Mode::Hang && self.pending.is_some()) {
            return None;
        }
        if self.mode == Mode::Garbage {
            garbage();
        }
        match command {
            "uci" => {
                say("id name deeptree fake engine");
                say("id author deeptree tests");
                say("option name Hash type spin default 16 min 1 max 1024");
                say("option name Threads type spin default 1 min 1 max 8");
                say("option name MultiPV type spin default 1 min 1 max 10");
                say("option name Clear Hash type button");
                say("option name Move Overhead type spin default 10 min 0 max 5000");
                say("option name UCI_Chess960 type check default false");
                say("uciok");
            }
            "isready" => say("readyok"),
            "setoption" => {
                let rest: Vec<&str> = tokens.collect();
                if let [_, name, _, value] = rest.as_slice()
                    && name.eq_ignore_ascii_case("MultiPV")
                {
                    self.multipv = value.parse().unwrap_or(1);
                }
            }
            "position" => {
                if let Some(position) = parse_position(tokens) {
                    self.position = position;
                } else {
                    say("info string bad position");
                }
            }
            "go" => return self.go(tokens),
            // After `go ponder`, `ponderhit` answers as `stop` does: the fake engine's clock is not kept.
            "stop" | "ponderhit" => {
                if let Some(candidates) = self.pending.take() {
                    self.answer(&candidates, 3);
                }
            }
            "quit" => return Some(ExitCode::SUCCESS),
            _ => {}
        }
        None
    }

    fn go<'a>(&mut self, mut tokens: impl Iterator<Item = &'a str>) -> Option<ExitCode> {
        let mut depth = 3;
        let mut infinite = false;
        let mut searchmoves = Vec::new();
        while let Some(token) = tokens.next() {
            match token {
                "depth" => depth = tokens.next().and_then(|d| d.parse().ok()).unwrap_or(3),
                "infinite" | "ponder" => infinite = true,
                "searchmoves" => {
                    searchmoves.extend(tokens.by_ref().filter_map(|m| m.parse::<UciMove>().ok()));
                }
                _ => {}
            }
        }
        let mut candidates: Vec<UciMove> = self
            .position
            .legal_moves()
            .into_iter()
            .map(UciMove::from_standard)
            .filter(|m| searchmoves.is_empty() || self.mode == Mode::NoSearchmoves || searchmoves.contains(m))
            .collect();
        candidates.sort_by_key(ToString::to_string);
        match self.mode {
            Mode::Crash => {
                if let Some(first) = candidates.first() {
                    say(&format!("info depth 1 score cp 20 nodes 10 pv {first}"));
                }
                std::process::exit(3);
            }
            Mode::Hang => {
                self.pending = Some(candidates);
                None
            }
            Mode::Deaf => {
                if let Some(first) = candidates.first() {
                    say(&format!("info depth 1 score cp 20 nodes 10 pv {first}"));
                }
                None
            }
            Mode::Instant => {
                match candidates.first() {
                    Some(best) => {
                        say(&format!(
                            "info depth 1 seldepth 1 multipv 1 score cp 20 nodes 1 nps 1000 time 0 pv {best}"
                        ));
                        self.bestmove(&best.to_string());
                    }
                    None => {
                        say("info depth 0 score mate 0");
                        self.bestmove("(none)");
                    }
                }
                None
            }
            _ if infinite => {
                self.pending = Some(candidates);
                None
            }
            Mode::Keyed | Mode::Smooth => {
                std::thread::sleep(self.latency);
                self.keyed_answer(&candidates, depth);
                None
            }
            _ => {
                self.answer(&candidates, depth);
                None
            }
        }
    }

    /// The best candidate by the scripted evaluator's score of the position it leads to.
    fn keyed_answer(&self, candidates: &[UciMove], depth: u32) {
        let best = candidates
            .iter()
            .filter_map(|m| {
                let score = match self.mode {
                    Mode::Smooth => ScriptedEvaluator::smooth_move_score(&self.position, m),
                    _ => ScriptedEvaluator::move_score(&self.position, m),
                };
                Some((score?, *m))
            })
            .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.to_string().cmp(&a.1.to_string())));
        match best {
            Some((score, best)) => {
                say(&format!("info depth {depth} seldepth {depth} multipv 1 score {score} nodes 1000 pv {best}"));
                self.bestmove(&best.to_string());
            }
            None => {
                say("info depth 0 score mate 0");
                self.bestmove("(none)");
            }
        }
    }

    fn answer(&self, candidates: &[UciMove], depth: u32) {
        let Some(best) = candidates.first() else {
            say("info depth 0 score mate 0");
            self.bestmove("(none)");
            return;
        };
        for d in 1..=depth {
            for (i, m) in candidates.iter().take(self.multipv.max(1)).enumerate() {
                let bound = match self.mode {
                    Mode::BoundOnly if d == depth || d % 2 == 1 => " lowerbound",
                    Mode::BoundOnly => " upperbound",
                    _ => "",
                };
                let scripted = match self.script.get(&script_key(&self.position)) {
                    Some(&(cp, deepest)) if i == 0 && depth <= deepest => Some(cp),
                    _ => None,
                };
                let cp = scripted.unwrap_or(20 - 7 * i as i32);
                say(&format!(
                    "info depth {d} seldepth {} multipv {} score cp {cp}{bound} nodes {} nps 1000 pv {m}",
                    d + 2,
                    i + 1,
                    100 * u64::from(d)
                ));
                if self.mode == Mode::Garbage {
                    garbage();
                }
            }
        }
        if self.mode == Mode::Illegal {
            let illegal = ["e2e5", "a1h8", "h8a1"]
                .iter()
                .filter_map(|m| m.parse::<UciMove>().ok())
                .find(|m| m.to_move(&self.position).is_err())
                .map_or_else(|| "a1a1".to_owned(), |m| m.to_string());
            self.bestmove(&illegal);
        } else {
            self.bestmove(&best.to_string());
        }
    }

    /// Writes `bestmove`, then the stamp of this search.
    fn bestmove(&self, best: &str) {
        let written = now_nanos();
        say(&format!("bestmove {best}"));
        if let Some(mut file) = self.stamp.as_ref() {
            let _ = file.write_all(format!("{} {written}\n", self.go_read).as_bytes());
        }
    }
}

fn parse_position<'a>(mut tokens: impl Iterator<Item = &'a str>) -> Option<Chess> {
    let mut position = match tokens.next()? {
        "startpos" => Chess::default(),
        "fen" => {
            let mut fen = Vec::new();
            for token in tokens.by_ref() {
                if token == "moves" {
                    break;
                }
                fen.push(token);
            }
            let fen: Fen = fen.join(" ").parse().ok()?;
            let position: Chess = fen.into_position(CastlingMode::Standard).ok()?;
            // "moves" has been consumed; fall through to the moves.
            return play(position, tokens);
        }
        _ => return None,
    };
    if tokens.next() == Some("moves") {
        position = play(position, tokens)?;
    }
    Some(position)
}

fn play<'a>(mut position: Chess, tokens: impl Iterator<Item = &'a str>) -> Option<Chess> {
    for token in tokens {
        let m = token.parse::<UciMove>().ok()?.to_move(&position).ok()?;
        position.play_unchecked(m);
    }
    Some(position)
}
