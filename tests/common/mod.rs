//! A UCI program on pipes, driven line by line: the GUI's side in the tests of deeptree's UCI face.

#![allow(dead_code)] // each test file uses its own part

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, ChildStdin, Command, Output, Stdio},
    sync::mpsc::{Receiver, channel},
    time::{Duration, Instant},
};

/// Long enough for any answer here; the tests assert what comes, never how fast.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// deeptree run with `args` to its end, the user's store and settings out of reach (`DEEPTREE_DB` and
/// `DEEPTREE_CONFIG` removed).
pub fn deeptree(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .args(args)
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .output()
        .expect("deeptree runs")
}

/// A UCI program on pipes, its output read on a thread.
pub struct Uci {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Uci {
    pub fn start(program: &Path, args: &[&str]) -> Uci {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Uci { child, stdin, lines }
    }

    pub fn deeptree(db: &Path) -> Uci {
        Uci::start(Path::new(env!("CARGO_BIN_EXE_deeptree")), &["--db", db.to_str().expect("utf-8 path")])
    }

    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Lines until one starts with `prefix` (that line last); an empty tail means the wait ran out.
    pub fn until(&self, prefix: &str, timeout: Duration) -> Vec<String> {
        let mut seen: Vec<String> =
            self.timed_until(prefix, timeout, Instant::now()).into_iter().map(|(_, line)| line).collect();
        if !seen.last().is_some_and(|line| line.starts_with(prefix)) {
            seen.push(String::new());
        }
        seen
    }

    /// Every line that comes within `span`, with when it came (from the call).
    pub fn lines_for(&self, span: Duration) -> Vec<(Duration, String)> {
        let started = Instant::now();
        self.read(started + span, started, None)
    }

    /// Lines until one starts with `prefix` (that line last, none after the wait ran out), each with when it came,
    /// counted from `since`.
    pub fn timed_until(&self, prefix: &str, timeout: Duration, since: Instant) -> Vec<(Duration, String)> {
        self.read(Instant::now() + timeout, since, Some(prefix))
    }

    /// The lines that come before `deadline`, each with when it came counted from `since`; with a `prefix`, up to the
    /// first that starts with it.
    fn read(&self, deadline: Instant, since: Instant, prefix: Option<&str>) -> Vec<(Duration, String)> {
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = self.lines.recv_timeout(left) else { break };
            let done = prefix.is_some_and(|prefix| line.starts_with(prefix));
            seen.push((since.elapsed(), line));
            if done {
                break;
            }
        }
        seen
    }

    pub fn ready(&mut self) {
        self.send("isready");
        let lines = self.until("readyok", PATIENCE);
        assert_eq!(lines.last().map(String::as_str), Some("readyok"), "{lines:?}");
    }

    /// `go` and the `bestmove` move, with every line before it.
    pub fn best(&mut self, go: &str) -> (String, Vec<String>) {
        self.send(go);
        let lines = self.until("bestmove", PATIENCE);
        let last = lines.last().cloned().unwrap_or_default();
        let mv = last.split_whitespace().nth(1).unwrap_or_else(|| panic!("no bestmove after {go}: {lines:?}"));
        (mv.to_owned(), lines)
    }
}

impl Drop for Uci {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// The value following `key` in an `info` line.
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1).copied())
}

/// The real Stockfish, found as deeptree finds it.
pub fn stockfish() -> std::path::PathBuf {
    deeptree::engine::resolve_program("stockfish")
}

/// The scripted fake engine built with the tests.
pub fn fake() -> &'static str {
    env!("CARGO_BIN_EXE_deeptree-fake-engine")
}

/// The fake engine's `--log`: every command it received, one per line, after its process id.
pub fn fake_log(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_once(' ').map_or(String::new(), |(_, command)| command.to_owned()))
        .collect()
}

/// Reads an exported file back through python-chess (tests/interop_check.py `mode` FILE, `stdin` on its input).
pub fn interop_check(mode: &str, file: &Path, stdin: &str) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop_check.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(mode)
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/install-deps installs python-chess)");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write");
    let output = child.wait_with_output().expect("python3 ends");
    assert!(output.status.success(), "interop_check.py {mode}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("interop_check.py prints JSON")
}

/// A deeptree session whose inner engine is the fake one, logging what it receives to `log`; `settings` are further
/// `setoption` lines (`Name value V`) sent before the session is made ready.
pub fn fake_session(db: &Path, log: &Path, settings: &[&str]) -> Uci {
    session(db, &format!("{} --log {}", fake(), log.display()), settings)
}

/// A UCI session of deeptree on the tree in `db` with `inner` as its inner engine (a command line), no background
/// analysis, and `settings` (`NAME value VALUE`) set; ready.
pub fn session(db: &Path, inner: &str, settings: &[&str]) -> Uci {
    let mut uci = Uci::deeptree(db);
    uci.send("uci");
    uci.until("uciok", PATIENCE);
    uci.send(&format!("setoption name InnerEngine value {inner}"));
    uci.send("setoption name BackgroundAnalysis value false");
    for setting in settings {
        uci.send(&format!("setoption name {setting}"));
    }
    uci.ready();
    uci
}

/// A scripted evaluator (exact answers for the tests of the search) that records every job it is given.
pub struct Recording {
    pub inner: deeptree::search::evaluator::ScriptedEvaluator,
    pub jobs: Vec<deeptree::search::evaluator::Job>,
}

impl Recording {
    pub fn new(workers: usize, seed: u64) -> Recording {
        Recording { inner: deeptree::search::evaluator::ScriptedEvaluator::new(workers, seed), jobs: Vec::new() }
    }
}

impl deeptree::search::evaluator::Evaluator for Recording {
    fn workers(&self) -> usize {
        self.inner.workers()
    }
    fn submit(
        &mut self,
        id: u64,
        job: deeptree::search::evaluator::Job,
    ) -> Result<(), deeptree::search::evaluator::EvalError> {
        self.jobs.push(job.clone());
        self.inner.submit(id, job)
    }
    fn next(
        &mut self,
        timeout: Duration,
    ) -> Option<(u64, Result<deeptree::search::evaluator::Answer, deeptree::search::evaluator::EvalError>)> {
        self.inner.next(timeout)
    }
    fn cancel_all(&mut self) {
        self.inner.cancel_all()
    }
    fn identity(&self) -> String {
        self.inner.identity()
    }
}

/// Every search an engine was asked (its position and its `go` line), in the order asked. The engines of one run
/// share the log: each line starts with its process id.
pub fn searches(log: &Path) -> Vec<(String, String)> {
    let mut position: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut asked = Vec::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let Some((pid, command)) = line.split_once(' ') else { continue };
        if command.starts_with("position ") {
            position.insert(pid.to_owned(), command.to_owned());
        } else if command.starts_with("go ") {
            asked.push((position.get(pid).cloned().unwrap_or_default(), command.to_owned()));
        }
    }
    asked
}
