//! Random and mutated UCI command streams: deeptree answers every one and keeps going.

mod common;

use std::{
    io::Write,
    process::{Command, Stdio},
};

use common::Uci;

const VOCABULARY: &[&str] = &[
    "uci",
    "isready",
    "ucinewgame",
    "position startpos",
    "position startpos moves e2e4 e7e5 g1f3",
    "position startpos moves e2e4 e7e5 e1e2 e8e7 e2e1 e7e8 e1e2",
    "position fen rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1 moves c7c5",
    "position fen 8/8/8/8/8/8/8/8 w - - 0 1",
    "position fen 7k/5Q2/6K1/8/8/8/8/8 b - - 0 1",
    "go depth 2",
    "go nodes 500",
    "go movetime 50",
    "go wtime 1000 btime 1000 winc 10 binc 10",
    "go infinite",
    "go ponder",
    "go searchmoves e2e4 d2d4 depth 2",
    "stop",
    "ponderhit",
    "setoption name MultiPV value 2",
    "setoption name Threads value 1",
    "setoption name EngineDepth value 2",
    "setoption name Hash value 99999999",
    "setoption name",
    "debug on",
    "register later",
];

fn mutate(line: &str, rng: &mut fastrand::Rng) -> String {
    let mut chars: Vec<char> = line.chars().collect();
    match rng.u8(0..6) {
        0 if !chars.is_empty() => {
            let at = rng.usize(..chars.len());
            chars.truncate(at);
        }
        1 if !chars.is_empty() => {
            let at = rng.usize(..chars.len());
            chars.remove(at);
        }
        2 => {
            let at = rng.usize(..=chars.len());
            let noise = ['x', ' ', '9', '-', '\u{fffd}', 'é', '\t', 'q'];
            chars.insert(at, noise[rng.usize(..noise.len())]);
        }
        3 => return line.split_whitespace().rev().collect::<Vec<_>>().join(" "),
        _ => {}
    }
    chars.into_iter().collect()
}

#[test]
fn random_and_mutated_command_streams() {
    let fake = env!("CARGO_BIN_EXE_deeptree-fake-engine");
    for seed in 0..12u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let dir = tempfile::tempdir().unwrap();
        let mut input = format!(
            "uci\nsetoption name InnerEngine value {fake}\nsetoption name EngineDepth value 2\nsetoption name BackgroundAnalysis value false\n"
        );
        for _ in 0..40 {
            let line = VOCABULARY[rng.usize(..VOCABULARY.len())];
            let line = if rng.bool() { mutate(line, &mut rng) } else { line.to_owned() };
            input.push_str(&line);
            input.push('\n');
        }
        input.push_str("stop\nisready\n");
        let mut child = Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "seed {seed}: exit {:?}\n{stderr}", output.status);
        assert!(!stderr.contains("panicked"), "seed {seed}: {stderr}");
        assert!(stdout.lines().any(|l| l == "readyok"), "seed {seed}: no readyok\n{stdout}");
        // Every bestmove is preceded by an info line.
        let lines: Vec<&str> = stdout.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.starts_with("bestmove") {
                assert!(i > 0 && lines[..i].iter().rev().any(|l| l.starts_with("info")), "seed {seed}: bare bestmove");
            }
        }
    }
}

#[test]
fn quit_ends_every_inner_engine_and_closes_the_store() {
    let fake = env!("CARGO_BIN_EXE_deeptree-fake-engine");
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids.txt");
    let input = format!(
        "uci\nsetoption name InnerEngine value {fake}\nsetoption name EngineDepth value 2\n\
         setoption name Threads value 2\nposition startpos moves e2e4\ngo depth 3\nisready\n\
         position startpos moves e2e4 e7e5\ngo infinite\nisready\nstop\nisready\nquit\n"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(dir.path().join("tree"))
        .env("DEEPTREE_FAKE_PID_FILE", &pids)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.lines().filter(|l| l.starts_with("bestmove")).count(), 2, "{stdout}");
    let started: Vec<u32> =
        std::fs::read_to_string(&pids).unwrap().lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert!(started.len() >= 3, "a direct engine and two tree workers were started: {started:?}");
    for pid in started {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        assert!(status.is_empty() || status.contains("State:\tZ"), "inner engine {pid} still runs after quit");
    }
    // The store was closed cleanly: it opens and holds the game's moves.
    let store = deeptree::store::Store::open(&dir.path().join("tree"), &Default::default()).unwrap();
    assert!(store.stats().unwrap().edges >= 2);
}

/// A deeptree session on pipes with the fake engine inside.
fn session(db: &std::path::Path) -> Uci {
    let mut session = Uci::deeptree(db);
    session.send(&format!("setoption name InnerEngine value {}", common::fake()));
    session.send("setoption name EngineDepth value 2");
    session.send("setoption name BackgroundAnalysis value false");
    session
}

#[test]
fn no_bestmove_before_stop_in_infinite_mode_even_without_a_move() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    for setup in ["position fen 7k/6Q1/6K1/8/8/8/8/8 b - - 0 1", "position fen not a fen"] {
        session.send(setup);
        session.send("go infinite");
        let early = session.until("bestmove", Duration::from_millis(600));
        assert!(!early.iter().any(|l| l.starts_with("bestmove")), "{setup}: bestmove before stop: {early:?}");
        session.send("stop");
        let after = session.until("bestmove", Duration::from_secs(5));
        assert_eq!(after.last().map(String::as_str), Some("bestmove 0000"), "{setup}: {after:?}");
    }
}

#[test]
fn setoption_right_after_bestmove_is_accepted() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    session.send("position startpos moves e2e4");
    session.send("go depth 2");
    assert!(session.until("bestmove", Duration::from_secs(10)).last().is_some_and(|l| l.starts_with("bestmove")));
    session.send("setoption name MultiPV value 3");
    session.send("isready");
    let replies = session.until("readyok", Duration::from_secs(5));
    assert!(!replies.iter().any(|l| l.contains("error")), "{replies:?}");
    assert_eq!(replies.last().map(String::as_str), Some("readyok"));
}

#[test]
fn a_gui_that_closes_our_stdout_ends_the_session_even_with_stdin_open() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut child = deeptree_on_pipes(&dir.path().join("tree"), Stdio::null());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "uci").unwrap();
    let mut line = String::new();
    while !line.starts_with("uciok") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "uciok");
    }
    drop(stdout);
    // The next answer finds the pipe closed; stdin stays open all along. (`isready` again and again: were our read
    // end open in another process for a moment, a test beside this one forking, one answer could still go through.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        let _ = writeln!(stdin, "isready");
        std::thread::sleep(std::time::Duration::from_millis(100));
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
    };
    let _ = child.kill();
    assert!(status.is_some_and(|s| s.success()), "the session ended on its own: {status:?}");
    drop(stdin);
}

/// A GUI that writes a line in its own code page (a Windows path with 'ä' in CP1252) or an endless line does not end
/// the session: the bad line is read with U+FFFD (or skipped) and the game goes on, with the real Stockfish inside.
#[test]
fn a_line_that_is_not_utf8_or_too_long_does_not_end_the_session() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut input = Vec::new();
    input.extend_from_slice(b"uci\nsetoption name BackgroundAnalysis value false\n");
    input.extend_from_slice(format!("setoption name InnerEngine value {}\n", common::stockfish().display()).as_bytes());
    input.extend_from_slice(b"setoption name SyzygyPath value C:\\Schach\\Tableb\xe4se\r\n");
    input.extend(std::iter::repeat_n(b'x', 3 << 20));
    input.extend_from_slice(b"\nisready\nposition startpos moves e2e4\ngo depth 3\n");
    let mut child = deeptree_on_pipes(&dir.path().join("tree"), Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    // Written from a thread: the session's replies are read while 3 MiB go in.
    let writer = std::thread::spawn(move || {
        stdin.write_all(&input).unwrap();
        stdin
    });
    let mut replies = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let done = line.starts_with("bestmove");
        replies.push(line);
        if done {
            break;
        }
    }
    let mut stdin = writer.join().unwrap();
    writeln!(stdin, "quit").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(replies.iter().filter(|l| *l == "readyok").count(), 1, "{replies:?}\n{stderr}");
    // The line was read: the error names the option, and the session went on to search.
    assert!(replies.iter().any(|l| l.contains("unknown option 'SyzygyPath'")), "{replies:?}");
    let best = replies.last().filter(|l| l.starts_with("bestmove ")).unwrap_or_else(|| panic!("{replies:?}"));
    assert!(!best.starts_with("bestmove 0000"), "{best}");
    assert!(stderr.contains("not UTF-8") && stderr.contains("longer than"), "{stderr}");
}

/// deeptree on the store in `db`, stdin and stdout piped, stderr as given, the user's store and settings out of reach.
fn deeptree_on_pipes(db: &std::path::Path, stderr: Stdio) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}
