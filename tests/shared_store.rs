//! Processes sharing one store share the work: searches in flight are claimed in the store, a claim another live
//! process holds is not started again, and its answer is taken instead.

mod common;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use common::{PATIENCE, fake, searches};
use deeptree::store::{Store, StoreOptions, key::PositionKey, node::Node};

const DEPTH: &str = "3";
const ENGINE_DEPTH: &str = "8";

fn engine(log: &Path) -> String {
    format!("{} --mode smooth --latency-ms 4 --log {}", fake(), log.display())
}

fn analyze(db: &Path, log: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(db)
        .args(["analyze", "--engine", &engine(log), "--workers", "2", "--engine-depth", ENGINE_DEPTH])
        .args(["--max-depth", DEPTH, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("deeptree starts")
}

fn report(child: Child) -> serde_json::Value {
    let output = child.wait_with_output().expect("deeptree ends");
    assert!(output.status.success(), "analyze failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("analyze --json prints JSON")
}

/// Searches asked more than once, over all `logs`.
fn asked_twice(logs: &[&[(String, String)]]) -> usize {
    let mut count: HashMap<&(String, String), usize> = HashMap::new();
    for search in logs.iter().flat_map(|log| log.iter()) {
        *count.entry(search).or_default() += 1;
    }
    count.values().map(|n| n - 1).sum()
}

/// Searches both logs asked (as many times as the one that asked it less often).
fn asked_by_both(a: &[(String, String)], b: &[(String, String)]) -> usize {
    let mut count: HashMap<&(String, String), (usize, usize)> = HashMap::new();
    for search in a {
        count.entry(search).or_default().0 += 1;
    }
    for search in b {
        count.entry(search).or_default().1 += 1;
    }
    count.values().map(|(a, b)| *a.min(b)).sum()
}

/// The tree as a comparable list: every node's evaluation, edges, rest bound, settled depth and idea value (engine
/// numbers and node counts left out: they name who answered, not what).
fn tree(db: &Path) -> Vec<(PositionKey, String)> {
    let store = Store::open_existing(db, &StoreOptions::default()).expect("the store opens");
    let view = store.read().expect("read");
    let mut nodes: Vec<(PositionKey, String)> = view
        .nodes()
        .expect("nodes")
        .map(|item| {
            let (key, node) = item.expect("a node decodes");
            (key, describe(&node))
        })
        .collect();
    nodes.sort();
    nodes
}

fn describe(node: &Node) -> String {
    let eval = node.eval.as_ref().map(|e| (e.score, e.bound, e.depth, e.best));
    let mut edges: Vec<_> = node.edges.iter().map(|e| (e.uci.to_string(), e.score, e.bound, e.depth)).collect();
    edges.sort_by(|a, b| a.0.cmp(&b.0));
    format!("{eval:?} {edges:?} {:?} {:?} {:?}", node.rest, node.settled_depth, node.idea)
}

struct Dirs {
    _root: tempfile::TempDir,
    alone: PathBuf,
    shared: PathBuf,
    logs: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().expect("temp dir");
    let (alone, shared, logs) = (root.path().join("alone"), root.path().join("shared"), root.path().join("logs"));
    std::fs::create_dir_all(&logs).expect("logs dir");
    Dirs { alone, shared, logs, _root: root }
}

#[test]
fn two_analyses_of_one_root_share_their_searches_and_build_one_processs_tree() {
    let dirs = dirs();
    let alone_log = dirs.logs.join("alone.log");
    let alone = report(analyze(&dirs.alone, &alone_log));
    assert_eq!(alone["settled_depth"], 3);
    let one = searches(&alone_log);
    assert!(one.len() > 200, "the single run asked {} searches", one.len());

    let (log_a, log_b) = (dirs.logs.join("a.log"), dirs.logs.join("b.log"));
    let a = analyze(&dirs.shared, &log_a);
    let b = analyze(&dirs.shared, &log_b);
    let (a, b) = (report(a), report(b));
    assert_eq!((a["settled_depth"].clone(), b["settled_depth"].clone()), (3.into(), 3.into()));
    let (asked_a, asked_b) = (searches(&log_a), searches(&log_b));
    let asked = asked_a.len() + asked_b.len();
    let both = asked_by_both(&asked_a, &asked_b);
    eprintln!(
        "alone: {} searches ({} asked again after being stopped); shared: {} + {} = {asked}, {both} asked by both; answers taken \
         from the other: {} + {}",
        one.len(),
        asked_twice(&[&one]),
        asked_a.len(),
        asked_b.len(),
        a["shared"],
        b["shared"]
    );
    assert!(both * 20 <= asked, "{both} of {asked} searches were asked by both processes (more than 5 %)");
    assert!(asked * 100 <= one.len() * 105, "together they asked {asked} searches, one alone {}", one.len());
    assert!(
        a["shared"].as_u64().unwrap_or(0) + b["shared"].as_u64().unwrap_or(0) > 0,
        "neither process took an answer from the other"
    );
    // Both runs settled depth 3, and the tree they built together is the one a single run builds.
    assert_eq!(tree(&dirs.shared), tree(&dirs.alone));
}

#[test]
fn a_gui_session_and_an_analysis_share_their_searches() {
    let dirs = dirs();
    let alone_log = dirs.logs.join("alone.log");
    report(analyze(&dirs.alone, &alone_log));

    // The GUI's session grows the tree of the start position (`go infinite`) with two engines while `analyze`
    // settles it to depth 3 with two more.
    let (gui_log, cli_log) = (dirs.logs.join("gui.log"), dirs.logs.join("cli.log"));
    let mut gui = common::Uci::deeptree(&dirs.shared);
    gui.send("uci");
    gui.until("uciok", PATIENCE);
    gui.send(&format!("setoption name InnerEngine value {}", engine(&gui_log)));
    gui.send(&format!("setoption name EngineDepth value {ENGINE_DEPTH}"));
    gui.send("setoption name Threads value 2");
    gui.send("setoption name BackgroundAnalysis value false");
    gui.ready();
    gui.send("position startpos");
    gui.send("go infinite");
    let cli = analyze(&dirs.shared, &cli_log);
    let cli = report(cli);
    assert_eq!(cli["settled_depth"], 3);
    gui.send("stop");
    gui.until("bestmove", PATIENCE);
    gui.send("quit");
    drop(gui);
    std::thread::sleep(Duration::from_millis(200));

    let (asked_gui, asked_cli) = (searches(&gui_log), searches(&cli_log));
    assert!(!asked_gui.is_empty(), "the session's engines searched nothing");
    let both = asked_by_both(&asked_gui, &asked_cli);
    eprintln!(
        "alone: {}; session {} searches, analysis {} ({} taken from the session), {both} asked by both",
        searches(&alone_log).len(),
        asked_gui.len(),
        asked_cli.len(),
        cli["shared"]
    );
    assert!(both * 20 <= asked_cli.len() + asked_gui.len(), "{both} searches asked by both");
    assert!(cli["shared"].as_u64().unwrap_or(0) > 0, "the analysis took no answer from the session");
    // Every node the single run settled is in the shared tree with the same evaluation (the session may have
    // grown it further: deeper searches add to the tree).
    let shared: HashMap<PositionKey, Node> = {
        let store = Store::open_existing(&dirs.shared, &StoreOptions::default()).expect("opens");
        let view = store.read().expect("read");
        view.nodes().expect("nodes").map(|item| item.expect("decodes")).collect()
    };
    let store = Store::open_existing(&dirs.alone, &StoreOptions::default()).expect("opens");
    let view = store.read().expect("read");
    for item in view.nodes().expect("nodes") {
        let (key, node) = item.expect("decodes");
        let theirs = shared.get(&key).unwrap_or_else(|| panic!("node {key} is missing from the shared tree"));
        let eval = |n: &Node| n.eval.as_ref().map(|e| (e.score, e.bound, e.depth, e.best));
        assert_eq!(eval(theirs), eval(&node), "evaluation of {key}");
        for edge in &node.edges {
            let other = theirs.edge(&edge.uci).unwrap_or_else(|| panic!("edge {} of {key} is missing", edge.uci));
            assert_eq!((other.score, other.depth), (edge.score, edge.depth), "edge {} of {key}", edge.uci);
        }
    }
}

#[test]
fn a_claim_of_a_killed_process_does_not_hold() {
    let dirs = dirs();
    // The first process's engine never answers in time: its claims stay in the store when it is killed.
    let hung_log = dirs.logs.join("hung.log");
    let mut hung = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&dirs.shared)
        .args(["analyze", "--workers", "2", "--engine-depth", ENGINE_DEPTH, "--max-depth", "1", "--engine"])
        .arg(format!("{} --mode smooth --latency-ms 20000 --log {}", fake(), hung_log.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("deeptree starts");
    let deadline = std::time::Instant::now() + PATIENCE;
    while searches(&hung_log).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let claimed = searches(&hung_log);
    assert!(!claimed.is_empty(), "the first process started no search");
    // `stats` shows the searches it runs, and whose they are.
    let stats = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&dirs.shared)
        .args(["stats", "--json"])
        .output()
        .expect("deeptree runs");
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("stats --json prints JSON");
    assert!(stats["claims"]["running"].as_u64().unwrap_or(0) >= 1, "{stats}");
    assert_eq!(stats["claims"]["processes"], serde_json::json!([hung.id()]));
    hung.kill().expect("killed");
    hung.wait().expect("reaped");
    // Its claims would hold for a lease (30 s) were its death not seen; the second run's budget is shorter.
    let log = dirs.logs.join("second.log");
    let second = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&dirs.shared)
        .args(["analyze", "--engine", &engine(&log), "--workers", "2", "--engine-depth", ENGINE_DEPTH])
        .args(["--max-depth", "1", "--time", "15", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("deeptree starts");
    let second = report(second);
    assert_eq!(second["settled_depth"], 1, "{second}");
    assert_eq!(second["shared"], 0);
    let asked = searches(&log);
    assert!(claimed.iter().all(|search| asked.contains(search)), "the killed process's searches were asked again");
}

/// `check` while another process writes the store: it reads one state of the store (its walk of the file's pages
/// and its lookups through LMDB at the same snapshot, the pages walked kept from reuse), so nothing written meanwhile
/// reads as damaged.
#[test]
fn check_reads_one_state_of_a_store_another_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let fill = |seed: &str, positions: &str| {
        let mut fill = Command::new(env!("CARGO_BIN_EXE_deeptree"));
        fill.arg("--db").arg(&db).args(["fill", "--positions", positions, "--batch", "50", "--seed", seed]);
        fill.stdout(Stdio::piped()).stderr(Stdio::null());
        fill
    };
    // A store of 20,000 positions, whose check's walk takes a while; then a writer that commits every few
    // milliseconds (a bulk load settled every 10 submissions of 50 positions) while checks run one after another.
    assert!(fill("1", "20000").output().unwrap().status.success());
    let mut writer = fill("2", "60000").spawn().expect("deeptree starts");
    let mut committing = std::io::BufRead::lines(std::io::BufReader::new(writer.stdout.take().unwrap()));
    assert!(committing.next().is_some_and(|line| line.is_ok_and(|l| l.starts_with("committed"))));
    std::thread::spawn(move || committing.for_each(drop));
    let mut checks = 0;
    while writer.try_wait().unwrap().is_none() {
        let output = Command::new(env!("CARGO_BIN_EXE_deeptree")).arg("--db").arg(&db).arg("check").output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(0), "check {checks} while the store is written: {said}");
        checks += 1;
    }
    assert!(writer.wait().unwrap().success());
    assert!(checks >= 3, "only {checks} checks ran while the store was written");
}
