//! Exactly one `bestmove` per `go`, and none after `quit`: a property test of the UCI session, the scripted fake
//! engine inside.
//!
//! Each case is one deeptree process on a copy of a small tree (grown once by `deeptree analyze` with the fake
//! engine), driven by a generated script: a few `go`s of every kind (`depth`, `nodes`, `movetime`, a clock,
//! `infinite`, `ponder` with a clock), each in a position the tree answers (the start position), in a fresh one only
//! the inner engine searches (a random game of 8 plies), or in one without a legal move; after each `go` come a few
//! events at random moments (0 to 80 ms apart): `stop`, `ponderhit`, `isready`, `position`, `quit`, end of input.
//! The next `go` is sent only once the last one has answered, so none is refused. Promised:
//! - every `go` gets exactly one `bestmove`; `go infinite` none before `stop` (UCI: "do not exit the search without
//!   being told so", and `ponderhit` is for `go ponder`), `go ponder` none before `stop` or `ponderhit` (which makes
//!   it a timed search that answers on its own); `position` ends a limited search at once;
//! - every `isready` gets its `readyok`;
//! - a `bestmove` plays a legal move of its `go`'s position (its `ponder` move legal after it), `0000` only where
//!   there is none;
//! - after `quit` or end of input no `bestmove` comes, not even for a search that had not answered, and the process
//!   exits within 5 s. Exact by construction: `quit` is sent at once only while the search surely has not answered
//!   (`go infinite` or `go ponder` not yet released, or a limited search in a fresh position by an inner engine that
//!   takes 1 s per search, with at most 240 ms of events before `quit`); anywhere else its `bestmove` is awaited first;
//! - background growth (on in some cases, given an idle second) never writes a `bestmove`.
//!
//! Across the cases some `go`s must have been answered from the tree (`info string tree move: ...`) and some `quit`s
//! must have come while a search was unanswered, so that neither path can go silently unexercised.

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, ChildStdin, Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        mpsc::{Receiver, RecvTimeoutError, channel},
    },
    thread::sleep,
    time::{Duration, Instant},
};

use proptest::{
    prelude::*,
    test_runner::{Config, TestCaseError, TestRunner},
};
use shakmaty::{Chess, Position, uci::UciMove};

const DEEPTREE: &str = env!("CARGO_BIN_EXE_deeptree");
const FAKE: &str = env!("CARGO_BIN_EXE_deeptree-fake-engine");
/// The inner engine's time per limited search: short, so that events land both during searches and after them.
const SHORT_MS: u64 = 40;
/// Where `quit` must come before a limited search answers: far longer than the events before it (3 × 80 ms).
const LONG_MS: u64 = 1000;
const PROMPT_EXIT: Duration = Duration::from_secs(5);
/// Long enough for any answer here.
const PATIENCE: Duration = Duration::from_secs(30);
/// Fool's mate: White has no legal move.
const MATED: [&str; 4] = ["f2f3", "e7e5", "g2g4", "d8h4"];
/// Every kind of `go`; the last two answer only once released (`stop`; for `go ponder` also `ponderhit`).
const GOS: [&str; 7] = [
    "go depth 1",
    "go depth 2",
    "go nodes 100",
    "go movetime 50",
    "go wtime 1000 btime 1000 winc 10 binc 10",
    "go infinite",
    "go ponder wtime 1000 btime 1000 winc 10 binc 10",
];
/// What comes after a `go` (`EOF`: the end of input).
const EVENTS: [&str; 6] = ["stop", "ponderhit", "isready", "position startpos moves e2e4 e7e5", "quit", "EOF"];

#[derive(Debug, Clone, Copy)]
enum Place {
    /// The start position, which the tree knows.
    Tree,
    /// A random game of 8 plies (from this seed and the step's index): only the inner engine knows it.
    Fresh(u32),
    /// Fool's mate: no legal move.
    Mated,
}

#[derive(Debug, Clone)]
struct Step {
    go: &'static str,
    place: Place,
    /// Each event after so many milliseconds; `quit` or `EOF` ends the session.
    events: Vec<(u64, &'static str)>,
}

#[derive(Debug, Clone)]
struct Script {
    background: bool,
    steps: Vec<Step>,
}

fn script() -> impl Strategy<Value = Script> {
    let place = prop_oneof![4 => Just(Place::Tree), 3 => any::<u32>().prop_map(Place::Fresh), 1 => Just(Place::Mated)];
    let weights = [3, 2, 2, 2, 2, 2]; // of EVENTS
    let event = prop::strategy::Union::new_weighted(EVENTS.iter().zip(weights).map(|(e, w)| (w, Just(*e))).collect());
    let step = (prop::sample::select(&GOS[..]), place, prop::collection::vec((0u64..80, event), 0..=3))
        .prop_map(|(go, place, events)| Step { go, place, events });
    (prop::bool::weighted(0.25), prop::collection::vec(step, 1..=4))
        .prop_map(|(background, steps)| Script { background, steps })
}

fn waits(go: &str) -> bool {
    go == "go infinite" || go.starts_with("go ponder")
}

/// The moves from the start position to the step's position.
fn moves_of(place: Place, step: usize) -> Vec<String> {
    match place {
        Place::Tree => Vec::new(),
        Place::Mated => MATED.iter().map(ToString::to_string).collect(),
        Place::Fresh(seed) => {
            let mut rng = fastrand::Rng::with_seed((u64::from(seed) << 8) | step as u64);
            let (mut pos, mut moves) = (Chess::default(), Vec::new());
            for _ in 0..8 {
                let legal = pos.legal_moves();
                if legal.is_empty() {
                    break;
                }
                let m = legal[rng.usize(..legal.len())];
                moves.push(UciMove::from_standard(m).to_string());
                pos.play_unchecked(m);
            }
            moves
        }
    }
}

fn play(pos: &Chess, text: &str) -> Option<Chess> {
    let m = text.parse::<UciMove>().ok()?.to_move(pos).ok()?;
    let mut after = pos.clone();
    after.play_unchecked(m);
    Some(after)
}

/// Checks a `bestmove` line against the position of its `go`.
fn check_bestmove(root: &Chess, line: &str) -> Result<(), String> {
    let mut words = line.split_whitespace().skip(1);
    match words.next() {
        Some("0000") if root.legal_moves().is_empty() => Ok(()),
        Some("0000") => Err(format!("'{line}' where there are legal moves")),
        Some(best) => {
            let after = play(root, best).ok_or_else(|| format!("'{line}': {best} is not legal"))?;
            match (words.next(), words.next()) {
                (None, _) => Ok(()),
                (Some("ponder"), Some(ponder)) if play(&after, ponder).is_some() => Ok(()),
                _ => Err(format!("'{line}': a bad ponder move")),
            }
        }
        None => Err(format!("'{line}' without a move")),
    }
}

/// deeptree on pipes, its output read on a thread and recorded as it is taken.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    log: Vec<String>,
    bestmoves: Vec<String>,
    isready: usize,
    readyok: usize,
    tree_moves: usize,
}

impl Session {
    fn start(dir: &Path, background: bool) -> Session {
        let settings = dir.join("settings.toml");
        let text = format!(
            "engine = \"{FAKE} --mode smooth --latency-ms {SHORT_MS}\"\nengine_depth = 4\n\
             background_analysis = {background}\n"
        );
        std::fs::write(&settings, text).expect("settings written");
        let mut child = Command::new(DEEPTREE)
            .arg("--config")
            .arg(&settings)
            .arg("--db")
            .arg(dir.join("tree"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("deeptree starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let (log, bestmoves) = (Vec::new(), Vec::new());
        Session { child, stdin, lines, log, bestmoves, isready: 0, readyok: 0, tree_moves: 0 }
    }

    fn send(&mut self, line: &str) {
        self.log.push(format!("> {line}"));
        self.isready += usize::from(line == "isready");
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = writeln!(stdin, "{line}").and_then(|()| stdin.flush());
        }
    }

    fn close_input(&mut self) {
        self.log.push("> (end of input)".into());
        self.stdin = None;
    }

    fn record(&mut self, line: String) {
        if !line.starts_with("option ") {
            self.log.push(format!("< {line}"));
        }
        self.readyok += usize::from(line == "readyok");
        self.tree_moves += usize::from(line.starts_with("info string tree move:"));
        if line.starts_with("bestmove") {
            self.bestmoves.push(line);
        }
    }

    /// Takes the lines that have come by `deadline`; false if it passed (or output ended) before `done`.
    fn take_until(&mut self, deadline: Instant, done: impl Fn(&Session) -> bool) -> bool {
        while !done(self) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.record(line),
                Err(_) => return false,
            }
        }
        true
    }

    /// Takes what has come so far.
    fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.record(line);
        }
    }

    /// Waits for the session's `n`th `bestmove`, the answer to a `go` in `root`, and checks its move.
    fn answer(&mut self, n: usize, root: &Chess) -> Result<(), String> {
        self.take_until(Instant::now() + PATIENCE, |s| s.bestmoves.len() >= n);
        check_bestmove(root, self.bestmoves.get(n - 1).ok_or("no bestmove")?)
    }

    fn sync(&mut self) -> Result<(), String> {
        self.send("isready");
        let ready = self.take_until(Instant::now() + PATIENCE, |s| s.readyok >= s.isready);
        if ready { Ok(()) } else { Err(format!("no readyok\n{}", self.transcript())) }
    }

    /// After `quit` or end of input: the process exits within `PROMPT_EXIT`, its output read to the end.
    fn ends(&mut self) -> Result<Duration, String> {
        let since = Instant::now();
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            if since.elapsed() > PROMPT_EXIT {
                return Err(format!("still running {PROMPT_EXIT:?} after quit or end of input"));
            }
            sleep(Duration::from_millis(10));
        }
        let took = since.elapsed();
        loop {
            match self.lines.recv_timeout(PROMPT_EXIT) {
                Ok(line) => self.record(line),
                Err(RecvTimeoutError::Disconnected) => return Ok(took),
                Err(RecvTimeoutError::Timeout) => return Err("its output stays open after it exited".into()),
            }
        }
    }

    fn transcript(&self) -> String {
        let from = self.log.len().saturating_sub(60);
        self.log[from..].join("\n")
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Runs one script on a copy of the tree in `template`: with whether `quit` (or end of input) came while a search
/// was surely unanswered.
fn run(template: &Path, script: &Script, tree_moves: &AtomicUsize) -> Result<bool, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::create_dir(dir.path().join("tree")).map_err(|e| e.to_string())?;
    std::fs::copy(template.join("data.mdb"), dir.path().join("tree/data.mdb")).map_err(|e| e.to_string())?;
    let mut s = Session::start(dir.path(), script.background);
    s.send("uci");
    s.sync()?;
    let (mut latency, mut gos, mut ending) = (SHORT_MS, 0, ("quit", false));
    'steps: for (i, step) in script.steps.iter().enumerate() {
        let fail =
            |s: &Session, what: String| format!("step {i} {step:?}: {what}\n--- transcript:\n{}", s.transcript());
        let moves = moves_of(step.place, i);
        let root = moves.iter().try_fold(Chess::default(), |pos, m| play(&pos, m)).expect("a legal game");
        // A limited search that neither the tree nor the lack of a legal move answers at once.
        let slow = matches!(step.place, Place::Fresh(_)) && !waits(step.go) && !root.legal_moves().is_empty();
        let end = step.events.iter().position(|(_, e)| matches!(*e, "quit" | "EOF")).unwrap_or(usize::MAX);
        let ended = step.events.iter().take(end).any(|(_, e)| *e == "stop" || e.starts_with("position"));
        let wanted = if end < usize::MAX && slow && !ended { LONG_MS } else { SHORT_MS };
        if wanted != latency {
            s.send(&format!("setoption name InnerEngine value {FAKE} --mode smooth --latency-ms {wanted}"));
            s.sync()?;
            latency = wanted;
        }
        let answered = s.bestmoves.len();
        s.send(format!("position startpos moves {}", moves.join(" ")).trim_end());
        s.send(step.go);
        gos += 1;
        // `stop`, `ponderhit` in `go ponder`, `position` in a limited search: the search answers on its own now.
        let mut released = false;
        for &(delay, event) in &step.events {
            sleep(Duration::from_millis(delay));
            if matches!(event, "quit" | "EOF") {
                let searching = !released && (waits(step.go) || slow);
                s.drain();
                if searching && s.bestmoves.len() > answered {
                    return Err(fail(&s, format!("bestmove before {event}, though unreleased or slow")));
                } else if !searching {
                    s.answer(answered + 1, &root).map_err(|e| fail(&s, e))?;
                }
                ending = (event, searching);
                break 'steps;
            }
            s.send(event);
            released |= match event {
                "stop" => true,
                "ponderhit" => step.go.starts_with("go ponder"),
                _ => event.starts_with("position") && !waits(step.go),
            };
        }
        if waits(step.go) && !released {
            // Time enough for a wrongly released search to show its `bestmove`.
            sleep(Duration::from_millis(30));
            s.drain();
            if s.bestmoves.len() > answered {
                return Err(fail(&s, "bestmove before stop (or ponderhit in go ponder)".into()));
            }
            s.send("stop");
        }
        s.answer(answered + 1, &root).map_err(|e| fail(&s, e))?;
        if script.background && i == 0 {
            // Idle for background growth to start (after a second), interrupted by the next command.
            sleep(Duration::from_millis(1500));
        }
    }
    let (event, searching) = ending;
    if event == "quit" {
        s.send("quit");
    } else {
        s.close_input();
    }
    let took = s.ends().map_err(|e| format!("{e}\n--- transcript:\n{}", s.transcript()))?;
    let expected = gos - usize::from(searching);
    if s.bestmoves.len() != expected || s.readyok != s.isready {
        let (bestmoves, readyok, isready) = (s.bestmoves.len(), s.readyok, s.isready);
        let what = if searching { "while a search had not answered" } else { "with no search under way" };
        return Err(format!(
            "{event} {what} (exit in {took:?}): {gos} go, {bestmoves} bestmove (expected {expected}), \
             {isready} isready, {readyok} readyok\n--- transcript:\n{}",
            s.transcript()
        ));
    }
    tree_moves.fetch_add(s.tree_moves, Ordering::Relaxed);
    Ok(searching)
}

/// A tree of the start position at combined depth 4 + 2, grown by the fake engine.
fn grow_tree(db: &Path) {
    let settings = db.with_extension("toml");
    std::fs::write(&settings, "").expect("settings written");
    let output = Command::new(DEEPTREE)
        .arg("--config")
        .arg(&settings)
        .arg("--db")
        .arg(db)
        .args(["analyze", "--engine", &format!("{FAKE} --mode smooth"), "--engine-depth", "4"])
        .args(["--max-depth", "2", "--workers", "1", "--json"])
        .output()
        .expect("analyze runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && report.contains("\"settled_depth\":2"), "{report}");
}

#[test]
fn one_bestmove_per_go_none_after_quit() {
    let template = tempfile::tempdir().expect("tempdir");
    let db = template.path().join("tree");
    grow_tree(&db);
    let (tree_moves, quits_while_searching) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let config = Config {
        cases: 40,
        failure_persistence: None,
        max_shrink_iters: 64,
        max_shrink_time: 30_000,
        ..Config::default()
    };
    let result = TestRunner::new(config).run(&script(), |script| {
        let searching = run(&db, &script, &tree_moves).map_err(TestCaseError::fail)?;
        quits_while_searching.fetch_add(usize::from(searching), Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (tree_moves, quits) = (tree_moves.into_inner(), quits_while_searching.into_inner());
    println!("{tree_moves} answers from the tree, {quits} quits while a search was unanswered");
    assert!(tree_moves > 0, "no go was answered from the tree");
    assert!(quits > 0, "no quit came while a search was unanswered");
}
