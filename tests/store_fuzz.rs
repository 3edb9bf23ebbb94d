//! A damaged store never kills a reader and is never shown as whole: a seeded sample of 100 damaged copies of a small
//! real store (50 with one bit of an LMDB node header flipped, 50 with 1 to 16 random bytes changed) run through
//! `check` and the five readers (`show`, `show --json`, `stats`, `export pgn -`, `serve`, a UCI session with the real
//! Stockfish), each outcome classified as scripts/store-fuzz classifies it (that script runs the whole fuzz: every
//! bit of every node header and 1,000 random copies).
//!
//! Every reader on every copy either prints what it prints on the undamaged store, or stops with one line on stderr
//! naming the store and `deeptree check` (exit status 3; a UCI session: a legal `bestmove` after an `info string`
//! that says the tree is damaged). None dies by a signal without that line, none panics, none prints something else
//! with exit status 0; and wherever any reader differs, `check` exits 3.
//!
//! The seed is printed; `DEEPTREE_STORE_FUZZ_SEED=N` runs another sample. A header-bit copy is named as the script
//! names it (`h:OFFSET:BIT`, the store being byte for byte the same): `scripts/store-fuzz --only h:OFFSET:BIT --keep
//! DIR` makes it again.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    os::unix::process::ExitStatusExt,
    path::Path,
    process::{Command, ExitStatus, Stdio},
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
        mpsc::channel,
    },
    time::{Duration, Instant},
};

mod common;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/store-v1");
const SEED: u64 = 48;
const HEADER_COPIES: usize = 50;
const RANDOM_COPIES: usize = 50;
/// Copies run at once.
const THREADS: usize = 4;
const READERS: [&str; 7] = ["check", "show", "show-json", "stats", "export", "serve", "uci"];
/// The start position's legal moves: a UCI session's `bestmove` is one of them.
const START_MOVES: [&str; 20] = [
    "a2a3", "a2a4", "b2b3", "b2b4", "c2c3", "c2c4", "d2d3", "d2d4", "e2e3", "e2e4", "f2f3", "f2f4", "g2g3", "g2g4",
    "h2h3", "h2h4", "b1a3", "b1c3", "g1f3", "g1h3",
];

fn deeptree(db: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deeptree"));
    command
        .arg("--db")
        .arg(db)
        .arg("--config")
        .arg(Path::new(FIXTURE).join("deeptree.toml"))
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG");
    command
}

/// What one reader did: its exit status (`None` when the harness stopped it: `serve` still running), its output with
/// the store's path written `STORE`, and its stderr.
#[derive(Debug, Clone)]
struct Outcome {
    status: Option<ExitStatus>,
    out: String,
    err: String,
}

/// How an outcome compares with the undamaged store's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Same,
    DamageLine,
    /// The damage said otherwise: the damage line with another exit status than 3, or a UCI session's `info string
    /// error` naming the store without saying it is damaged.
    SaidOtherwise,
    /// Another error, or a UCI session without a legal `bestmove`.
    Error,
    Signal,
    Panic,
    /// Exit status 0 (a `serve` answer 200, a `bestmove` without the damage said) and another output.
    Silent,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn command(db: &Path, args: &[&str]) -> Outcome {
    let output = deeptree(db).args(args).output().expect("deeptree runs");
    Outcome { status: Some(output.status), out: text(&output.stdout), err: text(&output.stderr) }
}

/// `GET path` to `serve` on `port`: the status line's code and the body, or why there was none.
fn get(port: u16, path: &str) -> String {
    let answer = (|| -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(common::PATIENCE))?;
        stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes())?;
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes)?;
        let answer = text(&bytes);
        let status = answer.split(' ').nth(1).unwrap_or("none").to_owned();
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        Ok(format!("{path} {status}\n{body}"))
    })();
    answer.unwrap_or_else(|e| format!("{path} no answer: {e}"))
}

/// `serve` on a free port: its page and the root's `/api/position` fetched, then, after a moment (its sampler reads
/// the store at start), stopped if it still runs.
fn serve(db: &Path) -> Outcome {
    let mut child = deeptree(db)
        .args(["serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("deeptree serve starts");
    // Its stderr read as it comes: a process blocked writing a full pipe would look hung.
    let mut err = child.stderr.take().expect("stderr");
    let err_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = err.read_to_end(&mut bytes);
        bytes
    });
    let mut url = String::new();
    let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut url);
    let mut answers = Vec::new();
    if let Some(port) = url.trim().strip_prefix("http://127.0.0.1:").and_then(|rest| rest.split('/').next()) {
        let port: u16 = port.parse().expect("serve prints its port");
        answers = vec![get(port, "/"), get(port, "/api/position")];
        std::thread::sleep(Duration::from_millis(300));
    }
    // A `serve` that printed no address is ending (its standard output closed): wait for its status, a while.
    let mut ended = child.try_wait().expect("try_wait");
    let waited = Instant::now();
    while answers.is_empty() && ended.is_none() && waited.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
        ended = child.try_wait().expect("try_wait");
    }
    if ended.is_none() {
        let _ = child.kill();
    }
    child.wait().expect("serve ends");
    let err = err_reader.join().expect("its stderr is read");
    Outcome { status: ended, out: answers.join("\n"), err: text(&err) }
}

/// A UCI session: Stockfish as the inner engine, no background analysis, `go depth 3` at the start position (the
/// tree answers there). Its lines after `uciok` up to `bestmove`, but the search's `time`, `nps` and `hashfull`.
fn uci(db: &Path) -> Outcome {
    let mut child = deeptree(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("deeptree starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let stockfish = common::stockfish();
    let commands = [
        "uci".to_owned(),
        format!("setoption name InnerEngine value {}", stockfish.display()),
        "setoption name BackgroundAnalysis value false".to_owned(),
        "setoption name Hash value 16".to_owned(),
        "isready".to_owned(),
        "position startpos".to_owned(),
        "go depth 3".to_owned(),
    ];
    let _ = writeln!(stdin, "{}", commands.join("\n"));
    let mut seen = Vec::new();
    while let Ok(line) = lines.recv_timeout(common::PATIENCE) {
        if line.starts_with("option ") || line.starts_with("id ") {
            continue;
        }
        let mut words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"info") && words.get(1) != Some(&"string") {
            for field in ["time", "nps", "hashfull"] {
                if let Some(at) = words.iter().position(|w| *w == field) {
                    words.drain(at..(at + 2).min(words.len()));
                }
            }
        }
        let done = line.starts_with("bestmove");
        seen.push(words.join(" "));
        if done {
            break;
        }
    }
    let _ = writeln!(stdin, "quit");
    drop(stdin);
    let output = child.wait_with_output().expect("the session ends");
    Outcome { status: Some(output.status), out: seen.join("\n"), err: text(&output.stderr) }
}

/// Every reader's outcome on the store at `db`.
fn readers(db: &Path) -> BTreeMap<&'static str, Outcome> {
    let mut outcomes = BTreeMap::new();
    for reader in READERS {
        let mut outcome = match reader {
            "check" => command(db, &["check"]),
            "show" => command(db, &["show", "--moves", "e2e4 c7c5", "--depth", "2"]),
            "show-json" => command(db, &["show", "--json", "--depth", "3"]),
            "stats" => command(db, &["stats"]),
            "export" => command(db, &["export", "pgn", "-"]),
            "serve" => serve(db),
            _ => uci(db),
        };
        outcome.out = outcome.out.replace(db.to_str().expect("utf-8 path"), "STORE");
        outcomes.insert(reader, outcome);
    }
    outcomes
}

/// Each reader's class and outcome on one copy.
type Judged = BTreeMap<&'static str, (Class, Outcome)>;

/// One line on stderr, naming the store and `deeptree check`.
fn damage_line(outcome: &Outcome, db: &Path) -> bool {
    // `serve` says where it serves before it reads the store: that line is not the damage's.
    let lines: Vec<&str> = outcome
        .err
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with("deeptree: serving the tree in "))
        .collect();
    lines.len() == 1 && lines[0].contains(db.to_str().expect("utf-8 path")) && lines[0].contains("deeptree check")
}

fn classify(reader: &str, outcome: &Outcome, undamaged: &Outcome, db: &Path) -> Class {
    let code = outcome.status.and_then(|status| status.code());
    if code == Some(101) || outcome.err.contains("panicked") {
        return Class::Panic;
    }
    let signalled = outcome.status.is_some_and(|status| status.signal().is_some())
        || code.is_some_and(|code| (129..160).contains(&code));
    if signalled {
        return if damage_line(outcome, db) { Class::DamageLine } else { Class::Signal };
    }
    match reader {
        "uci" => {
            let last: Vec<&str> = outcome.out.lines().last().unwrap_or("").split_whitespace().collect();
            let legal = last.first() == Some(&"bestmove") && last.get(1).is_some_and(|mv| START_MOVES.contains(mv));
            let said = outcome.out.lines().any(|line| {
                line.starts_with("info string")
                    && ["damaged", "unreadable", "deeptree check"].iter().any(|word| line.contains(word))
            });
            if !legal {
                // A fault in LMDB's map ends the session: it may not go on, but it must say so, in an `info
                // string` and in its one line on stderr, with exit status 3.
                if code == Some(3) && said && damage_line(outcome, db) { Class::DamageLine } else { Class::Error }
            } else if said {
                Class::DamageLine
            } else if outcome.out.lines().any(|line| line.starts_with("info string error") && line.contains("STORE")) {
                Class::SaidOtherwise
            } else if outcome.out == undamaged.out {
                Class::Same
            } else {
                Class::Silent
            }
        }
        "check" => match code {
            Some(3) => Class::DamageLine,
            Some(0) if outcome.out == undamaged.out => Class::Same,
            Some(0) => Class::Silent,
            _ => Class::Error,
        },
        // Still running when stopped: judged by its answers.
        "serve" if outcome.status.is_none() => {
            if outcome.out == undamaged.out {
                return Class::Same;
            }
            let statuses: Vec<&str> =
                outcome.out.split("\n/").map(|answer| answer.lines().next().unwrap_or("")).collect();
            if statuses.iter().all(|status| status.ends_with(" 200")) {
                Class::Silent
            } else if outcome.out.contains("deeptree check") {
                Class::DamageLine
            } else {
                Class::Error
            }
        }
        _ => match code {
            Some(3) if damage_line(outcome, db) => Class::DamageLine,
            Some(0) if outcome.out == undamaged.out => Class::Same,
            Some(0) => Class::Silent,
            _ if damage_line(outcome, db) => Class::SaidOtherwise,
            _ => Class::Error,
        },
    }
}

/// The file offsets of every LMDB node header on the pages the current meta page reaches (the main, free-page and
/// named databases' trees; src/store/pages.rs describes the format).
fn node_headers(data: &[u8]) -> Vec<usize> {
    let u16_at = |at: usize| usize::from(u16::from_ne_bytes([data[at], data[at + 1]]));
    let u64_at = |at: usize| u64::from_ne_bytes(data[at..at + 8].try_into().expect("8 bytes"));
    let page_size = u64_at(40) & 0xffff_ffff;
    // The current meta: the one of the two with the greater transaction id.
    let meta = if u64_at(page_size as usize + 144) > u64_at(144) { page_size as usize } else { 0 };
    let mut stack = vec![(u64_at(meta + 128), true), (u64_at(meta + 80), false)];
    let mut found = Vec::new();
    while let Some((page, main)) = stack.pop() {
        if page == u64::MAX {
            continue;
        }
        let at = (page * page_size) as usize;
        let (flags, lower) = (u16_at(at + 10), u16_at(at + 12));
        for i in 0..(lower - 16) / 2 {
            let node = at + u16_at(at + 16 + 2 * i);
            found.push(node);
            let (lo, hi, node_flags, key_size) = (u16_at(node), u16_at(node + 2), u16_at(node + 4), u16_at(node + 6));
            if flags & 1 != 0 {
                stack.push(((lo | hi << 16 | node_flags << 32) as u64, main));
            } else if main && node_flags & 2 != 0 {
                stack.push((u64_at(node + 8 + key_size + 40), false));
            }
        }
    }
    found
}

/// A damaged copy: its name (a header bit as scripts/store-fuzz names it, or the bytes changed) and its bytes.
fn copies(data: &[u8], seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let headers = node_headers(data);
    assert!(headers.len() > 100, "the store's node headers are found: {}", headers.len());
    let mut copies = Vec::new();
    for _ in 0..HEADER_COPIES {
        let (offset, bit) = (headers[rng.usize(..headers.len())], rng.usize(0..64));
        let mut bytes = data.to_vec();
        bytes[offset + bit / 8] ^= 1 << (bit % 8);
        copies.push((format!("h:{offset}:{bit}"), bytes));
    }
    for _ in 0..RANDOM_COPIES {
        let mut bytes = data.to_vec();
        let changed: Vec<(usize, u8)> =
            (0..rng.usize(1..=16)).map(|_| (rng.usize(..data.len()), rng.u8(1..=255))).collect();
        for &(at, xor) in &changed {
            bytes[at] ^= xor;
        }
        copies.push((format!("bytes (offset, xor) {changed:?}"), bytes));
    }
    copies
}

#[test]
fn damaged_copies_never_kill_a_reader_nor_show_as_whole() {
    let seed = std::env::var("DEEPTREE_STORE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(SEED);
    eprintln!("store fuzz: seed {seed} (DEEPTREE_STORE_FUZZ_SEED)");
    let dir = tempfile::tempdir().unwrap();
    // The fixture's store upgraded to the current schema by importing its own games again (which adds nothing).
    let base = dir.path().join("base");
    std::fs::create_dir(&base).unwrap();
    std::fs::copy(Path::new(FIXTURE).join("data.mdb"), base.join("data.mdb")).unwrap();
    let import = command(&base, &["import", "pgn", Path::new(FIXTURE).join("games.pgn").to_str().unwrap()]);
    assert_eq!(import.status.and_then(|s| s.code()), Some(0), "{}", import.err);
    let undamaged = readers(&base);
    for (reader, outcome) in &undamaged {
        assert!(outcome.status.is_none_or(|s| s.success()), "{reader} on the undamaged store: {outcome:?}");
    }
    assert!(undamaged["uci"].out.contains("tree move"), "the tree answers at the root: {}", undamaged["uci"].out);
    assert!(undamaged["serve"].out.contains("/api/position 200"), "{}", undamaged["serve"].out);

    let data = std::fs::read(base.join("data.mdb")).unwrap();
    let copies = copies(&data, seed);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(String, Judged)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            scope.spawn(|| {
                while let Some((name, bytes)) = copies.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let copy = tempfile::tempdir_in(dir.path()).unwrap();
                    let db = copy.path();
                    std::fs::write(db.join("data.mdb"), bytes).unwrap();
                    let classes = readers(db)
                        .into_iter()
                        .map(|(reader, outcome)| {
                            (reader, (classify(reader, &outcome, &undamaged[reader], db), outcome))
                        })
                        .collect();
                    results.lock().unwrap().push((name.clone(), classes));
                }
            });
        }
    });

    let results = results.into_inner().unwrap();
    let mut table: BTreeMap<(&str, Class), usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (name, classes) in &results {
        let mut said = Vec::new();
        for (reader, (class, outcome)) in classes {
            *table.entry((reader, *class)).or_default() += 1;
            if !matches!(class, Class::Same | Class::DamageLine) {
                let err: String = outcome.err.lines().last().unwrap_or("").chars().take(160).collect();
                let status = outcome.status.map_or("running".to_owned(), |s| s.to_string());
                said.push(format!("  {reader} {class:?} ({status}) {err}"));
            }
        }
        if classes.values().any(|(class, _)| *class != Class::Same) && classes["check"].0 != Class::DamageLine {
            said.push("  check did not exit 3 where a reader differs".to_owned());
        }
        if !said.is_empty() {
            wrong.push(format!("{name}:\n{}", said.join("\n")));
        }
    }
    eprintln!("{} copies, outcomes per reader:", results.len());
    for reader in READERS {
        let counts: Vec<String> =
            table.iter().filter(|((r, _), _)| *r == reader).map(|((_, class), n)| format!("{class:?} {n}")).collect();
        eprintln!("  {reader:<10} {}", counts.join(", "));
    }
    assert_eq!(results.len(), HEADER_COPIES + RANDOM_COPIES);
    assert!(
        wrong.is_empty(),
        "seed {seed}: {} outcomes other than the same output or the damage line:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
