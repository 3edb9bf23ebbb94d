//! Promises of the command line (docs/design.md §10) that hold whatever the engine: read-only commands never create
//! a store, a zero time budget is refused, the root's line is not searched again, user input in an error message is
//! cut short, and a move nothing has valued shows no score in `show --json` or any export. The inner engine here is
//! the fake one, which logs every command it receives.

mod common;

use std::{
    path::Path,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use common::interop_check;
use deeptree::{
    score::{Bound, Score},
    store::{
        Change, Store, StoreOptions,
        key::PositionKey,
        node::{Edge, Eval, Node, PackedPosition},
    },
};
use serde_json::Value;
use shakmaty::{Chess, EnPassantMode, Position, fen::Fen};

const FAKE: &str = env!("CARGO_BIN_EXE_deeptree-fake-engine");

/// Runs deeptree on `db` (nothing else set) and returns its output, whatever its exit status.
fn run(db: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_deeptree"));
    command.arg("--db").arg(db).args(args).env_remove("DEEPTREE_DB").env_remove("DEEPTREE_CONFIG");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn ok(db: &Path, args: &[&str]) -> Output {
    let output = run(db, args, &[]);
    assert!(output.status.success(), "deeptree {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    output
}

fn json(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap()
}

#[test]
fn read_only_commands_never_create_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let typo = dir.path().join("typo").join("tree");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let commands: [&[&str]; 9] = [
        &["stats"],
        &["stats", "--json"],
        &["show"],
        &["show", "--json", "--moves", "e2e4"],
        &["export", "pgn", out],
        &["export", "epd", out],
        &["export", "polyglot", out],
        &["export", "html", out],
        &["export", "pgn", "-"],
    ];
    for db in [&typo, &empty] {
        for args in commands {
            let output = run(db, args, &[]);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{args:?} on {}: {stderr}", db.display());
            assert!(stderr.contains(&format!("no deeptree store at {}", db.display())), "{args:?}: {stderr}");
            assert!(output.stdout.is_empty(), "{args:?}");
        }
    }
    assert!(!dir.path().join("typo").exists(), "no directory left behind a mistyped path");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "nothing written into a directory without a store");
    assert!(!Path::new(out).exists(), "no export written");

    // The commands that write create one: import, analyze, merge.
    let pgn = dir.path().join("game.pgn");
    std::fs::write(&pgn, "1. e4 e5 *\n").unwrap();
    ok(&typo, &["import", "pgn", pgn.to_str().unwrap()]);
    assert_eq!(json(&ok(&typo, &["stats", "--json"]))["edges"], 2);
    let analysed = dir.path().join("analysed");
    ok(&analysed, &["analyze", "--engine", FAKE, "--engine-depth", "2", "--max-depth", "0", "--workers", "1"]);
    assert!(json(&ok(&analysed, &["stats", "--json"]))["positions"].as_u64().unwrap() > 0);
    let merged = dir.path().join("merged");
    ok(&merged, &["merge", typo.to_str().unwrap()]);
    assert_eq!(json(&ok(&merged, &["stats", "--json"]))["edges"], 2);
}

#[test]
fn analyze_refuses_a_time_budget_that_is_not_positive() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for time in ["0", "0.0", "-1", "NaN", "inf"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(&db)
            .args(["analyze", "--engine", FAKE, "--engine-depth", "2", "--workers", "1"])
            .arg(format!("--time={time}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Accepted, such a budget would mean no budget at all: the analysis would not end.
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("analyze --time {time} still runs after 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "--time {time}");
        assert!(stderr.contains("--time") && stderr.contains("positive number of seconds"), "{time}: {stderr}");
        assert!(!db.exists(), "--time {time}: refused before the store is opened");
    }
    // A positive budget runs and stops.
    let output = ok(&db, &["analyze", "--engine", FAKE, "--engine-depth", "2", "--workers", "1", "--time", "0.5"]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("evaluations"));
}

/// The `go` commands in a fake-engine log, each with the `position` command its process had received before it.
fn searches(log: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut position: std::collections::HashMap<&str, &str> = Default::default();
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((pid, command)) = line.split_once(' ') else { continue };
        if command.starts_with("position ") {
            position.insert(pid, command);
        } else if command.starts_with("go ") {
            out.push((position.get(pid).copied().unwrap_or_default().to_owned(), command.to_owned()));
        }
    }
    out
}

#[test]
fn analyze_does_not_search_the_line_again_and_counts_every_search() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let analyze = |moves: &str, log: &Path| {
        let args = ["analyze", "--engine", FAKE, "--engine-depth", "3", "--max-depth", "0", "--workers", "2"];
        let output = run(&db, &[&args[..], &["--moves", moves, "--json"]].concat(), &[("DEEPTREE_FAKE_LOG", log)]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let report = json(&output);
        let searches = searches(log);
        assert_eq!(report["evaluations"].as_u64(), Some(searches.len() as u64), "every search counted: {searches:?}");
        (report, searches)
    };
    // The fake engine's best move is the first candidate in UCI text order: 1. a3 from the start position.
    let (first, _) = analyze("", &dir.path().join("first.log"));
    assert!(first["evaluations"].as_u64().unwrap() >= 1);
    let start_edge = || {
        let store = Store::open_existing(&db, &StoreOptions::default()).unwrap();
        let view = store.read().unwrap();
        view.node(PositionKey::of(&Chess::default())).unwrap().unwrap().edge(&"a2a3".parse().unwrap()).cloned()
    };
    let before = start_edge().expect("1. a3 searched from the start position");
    assert!(!before.imported && before.depth >= 3);

    // 1. a3 is stored at the engine depth: the line does not ask for it again, only for 1... a6.
    let (second, searched) = analyze("a2a3 a7a6", &dir.path().join("second.log"));
    let line_searches: Vec<&(String, String)> = searched
        .iter()
        .filter(|(_, go)| go.ends_with(" searchmoves a2a3") || go.ends_with(" searchmoves a7a6"))
        .collect();
    assert_eq!(line_searches.len(), 1, "only 1... a6 is asked: {line_searches:?}");
    assert!(line_searches[0].1.ends_with("a7a6"));
    let rows: u64 = second["iterations"].as_array().unwrap().iter().map(|r| r["evaluations"].as_u64().unwrap()).sum();
    assert_eq!(second["evaluations"].as_u64(), Some(rows + 1), "the rows and the one line search");
    let after = start_edge().unwrap();
    assert_eq!((after.score, after.depth, after.bound), (before.score, before.depth, before.bound), "kept");
    assert!(after.imported, "marked as a move of a line");

    // Again: nothing at all is asked, and nothing is counted.
    let (third, searched) = analyze("a2a3 a7a6", &dir.path().join("third.log"));
    assert_eq!((third["evaluations"].as_u64(), searched.len()), (Some(0), 0));
}

#[test]
fn quoted_input_in_error_messages_is_cut_short() {
    use deeptree::game::quote;
    assert_eq!(quote("e2e4"), "'e2e4'");
    let eighty = "é".repeat(80);
    assert_eq!(quote(&eighty), format!("'{eighty}'"));
    assert_eq!(quote(&"é".repeat(81)), format!("'{eighty}...' (81 characters)"));

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // PGN lines may hold 16 MiB, EPD lines 1 MiB; each file has one game or position that reads, so the import
    // succeeds.
    let huge = "Q".repeat(5_000_000);
    let pgn = dir.path().join("huge.pgn");
    std::fs::write(&pgn, format!("[Event \"a\"]\n\n1. e4 {huge} *\n\n[Variant \"{huge}\"]\n\n1. e4 *\n\n1. d4 *\n"))
        .unwrap();
    let long = "Q".repeat(1_000_000);
    let epd = dir.path().join("huge.epd");
    std::fs::write(
        &epd,
        format!("4k3/8/8/8/8/8/4P3/4K3 w - - bm {long};\n4k3/8/8/8/8/8/4P3/4K3 w - - ce {long};\n4k3/8/8/8/8/8/4P3/4K3 w - -\n"),
    )
    .unwrap();
    for (format, file, text, lines) in [("pgn", &pgn, &huge, 2), ("epd", &epd, &long, 2)] {
        let output = ok(&db, &["import", format, file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let length = format!("({} characters)", text.len());
        let reported: Vec<&str> = stderr.lines().filter(|l| l.contains(&length)).collect();
        assert_eq!(reported.len(), lines, "{format}: {}", &stderr[..stderr.len().min(2000)]);
        for line in reported {
            assert!(line.len() < 300, "{format}: a line of {} bytes", line.len());
            assert!(line.contains(&format!("'{}...'", &text[..80])), "{line}");
        }
    }
    // A root that does not parse, from the command line (an argument holds at most 128 KiB).
    let long = "x".repeat(100_000);
    for args in [["show", "--fen", long.as_str()], ["show", "--moves", long.as_str()]] {
        let output = run(&db, &args, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(stderr.contains("(100000 characters)") && stderr.len() < 400, "{}", &stderr[..stderr.len().min(400)]);
    }
}

/// A store whose start position has two searched moves (1. e4 at +0.30 and 1. g4 at -5.00) and, from a game, 1. d4
/// d5 that nothing has valued.
fn store_with_an_unvalued_line(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("db");
    let pgn = dir.join("game.pgn");
    std::fs::write(&pgn, "1. d4 d5 *\n").unwrap();
    ok(&db, &["import", "pgn", pgn.to_str().unwrap()]);
    let store = Store::open_existing(&db, &StoreOptions::default()).unwrap();
    let start = Chess::default();
    let mut node = Node::new(PackedPosition::of(&start));
    let e4 = "e2e4".parse().unwrap();
    node.eval =
        Some(Eval { score: Score::cp(30), bound: Bound::Exact, depth: 10, best: Some(e4), nodes: 1000, engine: None });
    node.edges.push(Edge::new(e4, Score::cp(30), Bound::Exact, 10));
    node.edges.push(Edge::new("g2g4".parse().unwrap(), Score::cp(-500), Bound::Exact, 10));
    store.writer().submit(vec![Change::merge(&start, node).unwrap()]).wait().unwrap();
    db
}

#[test]
fn a_move_nothing_has_valued_shows_no_score_in_show_or_any_export() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_an_unvalued_line(dir.path());

    let shown = json(&ok(&db, &["show", "--json", "--depth", "3"]));
    let moves = shown["moves"].as_array().unwrap();
    let ucis: Vec<&str> = moves.iter().map(|m| m["uci"].as_str().unwrap()).collect();
    assert_eq!(ucis, ["e2e4", "g2g4", "d2d4"], "valued moves first, best first; the unvalued one last");
    assert_eq!((&moves[0]["alpha"], &moves[0]["depth"]), (&serde_json::json!({"cp": 30}), &serde_json::json!(10)));
    assert_eq!(moves[1]["engine"], serde_json::json!({"cp": -500}));
    let d4 = &moves[2];
    for field in ["idea", "alpha", "engine", "depth", "bound"] {
        assert!(d4[field].is_null(), "{field} of 1. d4: {d4}");
    }
    assert_eq!(d4["imported"], true);
    let d5 = &d4["child"]["moves"][0];
    assert_eq!(d5["uci"], "d7d5");
    assert!(d5["idea"].is_null() && d5["alpha"].is_null() && d5["engine"].is_null() && d5["depth"].is_null(), "{d5}");
    let text = String::from_utf8_lossy(&ok(&db, &["show"]).stdout).into_owned();
    let d4_line = text.lines().find(|l| l.contains("1. d4")).unwrap();
    assert!(d4_line.contains("idea       ?  alpha       ?"), "{text}");

    // PGN: the valued moves carry their comment, the unvalued ones none.
    let file = dir.path().join("tree.pgn");
    ok(&db, &["export", "pgn", file.to_str().unwrap(), "--depth", "3"]);
    let read = interop_check("pgn", &file, "");
    assert_eq!(read["errors"], serde_json::json!([]));
    let comments: Vec<(&str, &str)> = read["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["uci"].as_str().unwrap(), m["comment"].as_str().unwrap().trim()))
        .collect();
    assert_eq!(
        comments,
        [("e2e4", "idea +0.30 alpha +0.30 d10"), ("g2g4", "idea -5.00 alpha -5.00 d10"), ("d2d4", "")]
    );
    assert_eq!(read["moves"][2]["children"][0]["comment"], "", "1... d5 has no comment either");

    // EPD: the start position from its valued best move; the position after 1. d4 (nothing valued) left out.
    let file = dir.path().join("tree.epd");
    ok(&db, &["export", "epd", file.to_str().unwrap()]);
    let lines = interop_check("epd", &file, "");
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["ops"]["ce"], 30);
    assert_eq!(lines[0]["ops"]["bm"], serde_json::json!(["e2e4"]));

    // Polyglot: 1. d4 weighs 0 (never chosen); the position after it has no entry.
    let file = dir.path().join("book.bin");
    ok(&db, &["export", "polyglot", file.to_str().unwrap()]);
    let start = Chess::default();
    let mut after_d4 = start.clone();
    after_d4.play_unchecked("d2d4".parse::<shakmaty::uci::UciMove>().unwrap().to_move(&start).unwrap());
    let fens: Vec<String> =
        [&start, &after_d4].iter().map(|p| Fen::from_position(*p, EnPassantMode::Legal).to_string()).collect();
    let read = interop_check("book", &file, &serde_json::to_string(&fens).unwrap());
    let positions = read["positions"].as_array().unwrap();
    assert_eq!(positions[0]["best"], "e2e4");
    let weights: Vec<(String, u64)> = positions[0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_str().unwrap().to_owned(), e[1].as_u64().unwrap()))
        .collect();
    assert!(weights.contains(&("d2d4".to_owned(), 0)), "{weights:?}");
    assert_eq!(positions[1]["entries"], serde_json::json!([]), "nothing valued after 1. d4");

    // HTML: the unvalued moves show `?` for their scores and depth, and no bar.
    let file = dir.path().join("tree.html");
    ok(&db, &["export", "html", file.to_str().unwrap(), "--depth", "3"]);
    let page = std::fs::read_to_string(&file).unwrap();
    for (uci, san) in [("d2d4", "d4"), ("d7d5", "d5")] {
        let expected = format!(
            "\"uci\":\"{uci}\",\"san\":\"{san}\",\"idea\":\"?\",\"alpha\":\"?\",\"alpha_cp\":null,\"depth\":\"?\""
        );
        assert!(page.contains(&expected), "{uci} in the page data");
    }
    assert!(page.contains(
        "\"uci\":\"e2e4\",\"san\":\"e4\",\"idea\":\"+0.30\",\"alpha\":\"+0.30\",\"alpha_cp\":30,\"depth\":\"10\""
    ));
    assert!(!page.contains("\"#0\"") && !page.contains("\"#-0\""), "never a mate score");
}

/// More workers than MAX_WORKERS_PER_CORE a core is refused before anything starts (a slip that would start
/// thousands of engines), unless insisted on; and `--time` counts the engines' start-up.
#[test]
fn analyze_bounds_its_workers_and_its_time_counts_the_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for (args, refusal) in [
        (&["--workers", "100000"][..], "100000 workers"),
        (&["--engines", "stockfish | workers=1000"][..], "1000 workers"),
    ] {
        let output = run(&db, &[&["analyze", "--engine-depth", "2"][..], args].concat(), &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr.contains(refusal) && stderr.contains("--insist-workers"), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(!db.exists(), "refused before the store is opened");
    }
    // Past what any machine runs, for one engine of a list, or a field that means nothing: refused whatever is
    // insisted on, not warned about and replaced by the default engine.
    for (list, refusal) in
        [("stockfish | workers=100000", "workers=100000: at most 1024"), ("stockfish | speed=9", "speed=9")]
    {
        let output = run(&db, &["analyze", "--engine-depth", "2", "--insist-workers", "--engines", list], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{list}");
        assert!(stderr.contains("--engines") && stderr.contains(refusal), "{stderr}");
        assert!(!db.exists(), "refused before the store is opened");
    }
    // An engine that takes 3 s to start, and a budget of 2 s: the run ends soon after the start-up, not 2 s later.
    let slow = format!("sh -c 'sleep 3; exec {FAKE}'");
    let started = Instant::now();
    let output =
        ok(&db, &["analyze", "--engine", &slow, "--engine-depth", "2", "--workers", "1", "--time", "2", "--json"]);
    let took = started.elapsed();
    assert!(took < Duration::from_millis(4500), "{took:?}");
    assert_eq!(json(&output)["stopped"], true);
}

/// A command that cannot do its work (a missing engine, PGN or merge source) fails before the store is created, and
/// a zero-byte data file is an error to the commands that only read, never set up as a new store.
#[test]
fn commands_that_cannot_work_leave_no_store_and_an_empty_data_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["analyze", "--engine", "/no/such/engine", "--engine-depth", "2", "--workers", "1"],
        vec!["analyze", "--engines", "/no/such/engine | workers=1", "--engine-depth", "2"],
        vec!["import", "pgn", missing],
        vec!["import", "epd", missing],
        vec!["merge", missing],
    ] {
        let output = run(&db, &args, &[]);
        assert!(!output.status.success(), "{args:?}");
        assert!(!String::from_utf8_lossy(&output.stderr).is_empty(), "{args:?}: an error is said");
        assert!(!db.exists(), "{args:?} left a store behind");
    }
    std::fs::create_dir(&db).unwrap();
    std::fs::write(db.join("data.mdb"), b"").unwrap();
    for args in [&["stats"][..], &["show"][..], &["export", "epd", "/dev/null"][..]] {
        let output = run(&db, args, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr.contains("data.mdb is empty (0 bytes)"), "{args:?}: {stderr}");
    }
    let left: Vec<_> = std::fs::read_dir(&db).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["data.mdb"], "nothing created beside it");
    assert_eq!(std::fs::metadata(db.join("data.mdb")).unwrap().len(), 0, "and nothing written into it");
}

/// `analyze --time T` ends by T and a few seconds whatever its engine does: one that ignores `stop` and never
/// answers (the fake engine's deaf mode) is killed a second after it is stopped.
#[test]
fn analyze_ends_on_time_with_an_engine_that_never_answers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let deaf = format!("{FAKE} --mode deaf");
    let started = Instant::now();
    let output = run(&db, &["analyze", "--engine", &deaf, "--workers", "1", "--time", "2", "--json"], &[]);
    let took = started.elapsed();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(took < Duration::from_secs(5), "{took:?}");
    let report = json(&output);
    assert_eq!(report["stopped"], true, "{report}");
    assert_eq!(report["evaluations"], 0, "{report}");
}

#[test]
fn show_ends_quietly_when_its_reader_goes_away() {
    // `deeptree show --json | head -c 3000`: the reader closes the pipe; deeptree ends as Unix tools do (SIGPIPE),
    // not with a panic message. Here the read end is closed before anything is written.
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    // More output than a pipe holds (64 KiB): were the read end still open in another process for a moment (a
    // test beside this one forking), the writer would block until it closes, then get the broken pipe.
    let games = dir.path().join("games.pgn");
    std::fs::write(&games, random_games(60, 80)).unwrap();
    ok(&db, &["import", "pgn", games.to_str().unwrap()]);
    for args in [&["show", "--json", "--depth", "30"][..], &["show", "--depth", "30"]] {
        let big = ok(&db, args);
        assert!(big.stdout.len() > 128 * 1024, "{args:?}: {} bytes", big.stdout.len());
    }
    for args in [&["show", "--json", "--depth", "30"][..], &["show", "--depth", "30"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_deeptree"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .env_remove("DEEPTREE_DB")
            .env_remove("DEEPTREE_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "{args:?}: {:?} {stderr}", output.status);
    }
}

/// `games` games of `plies` random legal moves from the start position, as PGN (the same every run).
fn random_games(games: usize, plies: usize) -> String {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut pgn = String::new();
    for number in 1..=games {
        pgn.push_str(&format!("[Event \"random {number}\"]\n[Result \"*\"]\n\n"));
        let mut pos = Chess::default();
        for ply in 0..plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let m = moves[rng.usize(..moves.len())];
            if ply % 2 == 0 {
                pgn.push_str(&format!("{}. ", ply / 2 + 1));
            }
            pgn.push_str(&format!("{} ", shakmaty::san::San::from_move(&pos, m)));
            pos.play_unchecked(m);
        }
        pgn.push_str("*\n\n");
    }
    pgn
}

/// Runs deeptree to its end and returns its exit code, its stderr and its peak resident memory in KiB: the
/// kernel's account of the child (`ru_maxrss` of the children of a small Python process that starts it; started
/// from this test process, whose own size the kernel counts into a child's peak until it execs, the figure would be
/// this process's).
fn run_measured(db: &Path, args: &[&str]) -> (i32, String, i64) {
    const MEASURE: &str = "import resource, subprocess, sys\n\
        done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n\
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n\
        sys.stderr.buffer.write(done.stderr)\n\
        sys.exit(done.returncode if done.returncode >= 0 else 128 - done.returncode)\n";
    let output = Command::new("python3")
        .args(["-c", MEASURE, env!("CARGO_BIN_EXE_deeptree"), "--db"])
        .arg(db)
        .args(args)
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .output()
        .expect("python3 runs");
    let peak = String::from_utf8_lossy(&output.stdout).trim().parse().expect("the peak in KiB");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned(), peak)
}

/// Reading an endless line (`/dev/zero`) as PGN, EPD, settings or `--roots` ends with an error naming the line and
/// its bound, holding less than 100 MiB meanwhile (the readers grew to 1.6-2.7 GB in 3-4 s before), and leaves no
/// store. A line under the bound reads.
#[test]
fn a_line_over_its_bound_is_an_error_and_dev_zero_is_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for (args, bound, code) in [
        (&["import", "pgn", "/dev/zero"][..], "16 MiB", 1),
        (&["import", "epd", "/dev/zero"][..], "1 MiB", 1),
        (&["--config", "/dev/zero", "stats"][..], "1 MiB", 2),
        (&["analyze", "--roots", "/dev/zero", "--workers", "1"][..], "1 MiB", 1),
        (&["analyze", "--games", "/dev/zero", "--workers", "1"][..], "16 MiB", 1),
    ] {
        let (status, stderr, peak_kib) = run_measured(&db, args);
        assert_eq!(status, code, "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("line 1 is longer than {bound}")), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(peak_kib < 100 * 1024, "{args:?}: peak resident memory {peak_kib} KiB");
        assert!(!db.exists(), "{args:?} left a store");
    }
    // The line number is the line's, and a long line under the bound is read.
    let epd = dir.path().join("long.epd");
    let comment = format!("# {}\n", "x".repeat(900_000));
    std::fs::write(
        &epd,
        format!("{comment}4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; ce 150;\n{comment}{comment}{}\n", "x".repeat(1_100_000)),
    )
    .unwrap();
    let (status, stderr, _) = run_measured(&db, &["import", "epd", epd.to_str().unwrap()]);
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("line 5 is longer than 1 MiB"), "{stderr}");
    let pgn = dir.path().join("long.pgn");
    std::fs::write(&pgn, format!("[Event \"a\"]\n\n1. e4 {{{}}} e5 *\n", "x".repeat(2 << 20))).unwrap();
    let output = ok(&db, &["import", "pgn", pgn.to_str().unwrap(), "--json"]);
    assert_eq!((json(&output)["games"].as_u64(), json(&output)["edges"].as_u64()), (Some(1), Some(2)));
}

/// An import exits 1 when no game or position could be read, says how many it skipped and leaves no store; one that
/// reads known games again exits 0. A directory is refused before any store is made.
#[test]
fn an_import_that_reads_nothing_exits_1_and_leaves_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let mut rng = fastrand::Rng::with_seed(48);
    let random: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(4000).collect();
    let utf16: Vec<u8> = "[Event \"x\"]\n\n1. e4 e5 *\n".encode_utf16().flat_map(u16::to_le_bytes).collect::<Vec<u8>>();
    let game = "[Event \"x\"]\n\n1. e4 e5 2. Nf3 *\n";
    for (format, path, said) in [
        ("pgn", file("random.pgn", &random), "skipped); nothing imported"),
        ("pgn", file("utf16.pgn", &[&[0xff, 0xfe][..], &utf16].concat()), "(1 skipped); nothing imported"),
        ("pgn", file("illegal.pgn", b"1. e5 *\n"), "no game could be read (1 skipped)"),
        ("pgn", file("atomic.pgn", b"[Variant \"Atomic\"]\n\n1. e4 *\n"), "no game could be read (1 skipped)"),
        ("pgn", file("empty.pgn", b""), "no game in it; nothing imported"),
        ("epd", file("random.epd", &random), "skipped); nothing imported"),
        (
            "epd",
            file("bad.epd", b"8/8/8 w - -\n# a comment\nnot a position\n"),
            "no position could be read (2 skipped)",
        ),
        ("epd", file("comments.epd", b"# nothing\n\n"), "no position in it"),
        ("pgn", dir.path().to_str().unwrap().to_owned(), "is a directory"),
        ("epd", dir.path().to_str().unwrap().to_owned(), "is a directory"),
    ] {
        let output = run(&db, &["import", format, &path], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{path}: {stderr}");
        let last = stderr.trim().lines().last().unwrap_or_default();
        assert!(
            last.starts_with("deeptree: error: ") && last.contains(&path) && last.contains(said),
            "{path}: {stderr}"
        );
        assert!(!db.exists(), "{path}: no store is left");
    }
    // Games that read: exit 0; again, nothing new: exit 0 too.
    let games = file("games.pgn", format!("{game}\n1. e5 *\n").as_bytes());
    for new_edges in [3, 0] {
        let output = run(&db, &["import", "pgn", &games, "--json"], &[]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let summary = json(&output);
        assert_eq!((summary["games"].as_u64(), summary["skipped"].as_u64()), (Some(2), Some(1)));
        assert_eq!(summary["new_edges"].as_u64(), Some(new_edges));
    }
    // A FIFO is opened once, by the import (an earlier open would have taken the writer's bytes with it).
    let fifo = dir.path().join("games.fifo");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `name` is a valid C string for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, "1. d4 d5 *\n").unwrap())
    };
    let fresh = dir.path().join("fresh");
    let output = run(&fresh, &["import", "pgn", fifo.to_str().unwrap(), "--json"], &[]);
    writer.join().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(json(&output)["new_edges"].as_u64(), Some(2));
}

/// `analyze --from-games` reads its games up to the first that plays before it makes the store: a file with none
/// (random bytes, UTF-16, an illegal first move, another variant, no game at all, a directory) exits 1, says how many
/// it skipped and leaves no store; `--roots` and `--config` refuse a directory as one, not by a failed first line.
#[test]
fn games_to_grow_from_that_read_nothing_exit_1_and_leave_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let mut rng = fastrand::Rng::with_seed(49);
    let random: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(4000).collect();
    let utf16: Vec<u8> = "[Event \"x\"]\n\n1. e4 e5 *\n".encode_utf16().flat_map(u16::to_le_bytes).collect::<Vec<u8>>();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let empty = empty.to_str().unwrap();
    for (args, said) in [
        (vec!["analyze", "--from-games", &file("random.pgn", &random)], "skipped); nothing to grow"),
        (
            vec!["analyze", "--from-games", &file("utf16.pgn", &[&[0xff, 0xfe][..], &utf16].concat())],
            "(1 skipped); nothing to grow",
        ),
        (vec!["analyze", "--from-games", &file("illegal.pgn", b"1. e5 *\n")], "no game could be read (1 skipped)"),
        (
            vec!["analyze", "--from-games", &file("atomic.pgn", b"[Variant \"Atomic\"]\n\n1. e4 *\n")],
            "no game could be read (1 skipped); nothing to grow",
        ),
        (vec!["analyze", "--from-games", &file("empty.pgn", b"")], "no game in it; nothing to grow"),
        (vec!["analyze", "--from-games", empty], "is a directory"),
        (vec!["analyze", "--roots", empty], "is a directory"),
        (vec!["--config", empty, "stats"], "is a directory"),
    ] {
        let mut args = args.clone();
        if args[0] == "analyze" {
            args.extend(["--engine", FAKE, "--engine-depth", "2", "--workers", "1"]);
        }
        let output = run(&db, &args, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let (code, path) = if args[0] == "--config" { (2, args[1]) } else { (1, args[2]) };
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        let last = stderr.trim().lines().last().unwrap_or_default();
        assert!(last.starts_with("deeptree: ") && last.contains(path), "{args:?}: {stderr}");
        assert!(last.contains(said) && !last.contains("line 1"), "{args:?}: {stderr}");
        assert!(!db.exists(), "{args:?}: no store is left");
    }
}

/// The bound on workers counts each worker with its engine's threads (`threads=` or `option.Threads=`), before the
/// store or any engine starts; `--insist-workers` passes it.
#[test]
fn analyze_bounds_its_workers_times_their_threads() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let most = 4 * std::thread::available_parallelism().map_or(1, |n| n.get());
    let half = most / 2 + 1;
    for engines in [
        "stockfish | threads=256".to_owned(),
        format!("stockfish | threads={}", most + 1),
        format!("stockfish | workers=2 | threads={half}"),
        format!("stockfish | workers=2 | option.Threads={half}"),
        format!("stockfish | workers={half} ; stockfish | workers=1 | threads={half}"),
    ] {
        let output = run(&db, &["analyze", "--engine-depth", "2", "--engines", &engines], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{engines}: {stderr}");
        assert!(stderr.contains("engine threads in all") && stderr.contains("--insist-workers"), "{engines}: {stderr}");
        assert!(stderr.contains(&format!("at most {most})")), "{engines}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(!db.exists(), "{engines}: refused before the store is opened");
    }
    // The settings' engine list is bounded the same way.
    let settings = dir.path().join("deeptree.toml");
    std::fs::write(&settings, "engines = \"stockfish | threads=256\"\n").unwrap();
    let output = run(&db, &["--config", settings.to_str().unwrap(), "analyze", "--engine-depth", "2"], &[]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("256 engine threads in all"), "{output:?}");
    // At the bound, or insisted on: the run goes on (the fake engine takes any Threads).
    for (engines, insist) in
        [(format!("{FAKE} | threads={most}"), false), (format!("{FAKE} | threads={}", most * 2), true)]
    {
        let mut args = vec!["analyze", "--engine-depth", "2", "--max-depth", "0", "--engines", &engines, "--json"];
        if insist {
            args.push("--insist-workers");
        }
        let output = ok(&db, &args);
        assert_eq!(json(&output)["settled_depth"], 0, "{engines}");
    }
}

/// Labels and other user text are printed with control characters escaped: a task's label by `task add` and `task
/// list` (one with NUL, put in the store as a browser's request could), a mark's user, and user input quoted in an
/// error message.
#[test]
fn user_text_is_printed_with_control_characters_escaped() {
    use deeptree::store::{marks::MarkSource, tasks::NewTask};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let label = "red\u{1b}[31m\u{7}\u{7f}\r\u{202e}end";
    let added = ok(&db, &["task", "add", "--label", label, "--time", "5"]);
    let stdout = String::from_utf8_lossy(&added.stdout).into_owned();
    assert!(stdout.contains("red\\u{1b}[31m\\u{7}\\u{7f}\\r\\u{202e}end"), "{stdout}");
    {
        let store = Store::open(&db, &StoreOptions::default()).unwrap();
        let new = NewTask {
            fen: None,
            moves: vec!["e2e4".to_owned()],
            chess960: false,
            label: "nul\0\u{1b}]0;title\u{7}".to_owned(),
            priority: 0,
            budget_seconds: 5.0,
            max_depth: None,
            engine_depth: None,
            source: MarkSource::Serve,
        };
        store.add_task(new).unwrap();
    }
    let listed = ok(&db, &["task", "list"]);
    let stdout = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(stdout.contains("red\\u{1b}[31m") && stdout.contains("nul\\0\\u{1b}]0;title\\u{7}"), "{stdout}");
    let json_list = ok(&db, &["task", "list", "--json"]);
    assert_eq!(json(&json_list)[1]["label"], "nul\0\u{1b}]0;title\u{7}", "JSON keeps the text, escaped as JSON");
    for output in [&added.stdout, &added.stderr, &listed.stderr, &listed.stdout] {
        assert!(!output.iter().any(|&b| b == 0x1b || b == 0 || b == 7 || b == 0x7f || b == b'\r'), "no control bytes");
    }
    let output = run(&db, &["show", "--moves", "e2e4\u{1b}[2J"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("'e2e4\\u{1b}[2J'") && !stderr.contains('\u{1b}'), "{stderr}");

    // A file's name: in an import's skipped games, its summary and its error, and in an export's error.
    let named = dir.path().join("games\u{1b}[31m.pgn");
    std::fs::write(&named, "[Variant \"Atomic\"]\n\n1. e4 *\n").unwrap();
    let imported = run(&db, &["import", "pgn", named.to_str().unwrap()], &[]);
    let stderr = String::from_utf8_lossy(&imported.stderr).into_owned();
    assert_eq!(imported.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("games\\u{1b}[31m.pgn: game 1 (line 1) skipped"), "{stderr}");
    assert!(stderr.contains("error: ") && stderr.trim().lines().last().unwrap().contains("games\\u{1b}[31m.pgn"));
    let missing = dir.path().join("no\u{1b}[2J").join("tree.pgn");
    let exported = run(&db, &["export", "pgn", missing.to_str().unwrap()], &[]);
    assert_eq!(exported.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&exported.stderr).contains("no\\u{1b}[2J/tree.pgn: No such file"), "{exported:?}");
    // An engine's name, as `stats` lists the engines that evaluated the tree (a program reached by a link whose
    // name holds an escape code, recorded under that path).
    let engine = dir.path().join("fake\u{1b}[31m");
    std::os::unix::fs::symlink(FAKE, &engine).unwrap();
    ok(&db, &["analyze", "--engine", engine.to_str().unwrap(), "--engine-depth", "2", "--max-depth", "0"]);
    let stats = ok(&db, &["stats"]);
    assert!(String::from_utf8_lossy(&stats.stdout).contains("fake\\u{1b}[31m)"), "{stats:?}");
    for output in [&imported.stderr, &imported.stdout, &exported.stderr, &stats.stdout, &stats.stderr] {
        assert!(!output.contains(&0x1b), "no escape code: {}", String::from_utf8_lossy(output));
    }
}
