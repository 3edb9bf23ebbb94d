//! The exported HTML page in headless Chromium (Debian's `chromium`, installed by scripts/install-deps): it loads
//! with no network, a click on a move goes down, the breadcrumbs go back up, and a screenshot shows the board.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use deeptree::{
    game::Line,
    search::{
        analysis::{Analysis, Params},
        evaluator::ScriptedEvaluator,
        show,
    },
    store::{Store, StoreOptions},
};
use serde_json::Value;
use shakmaty::{Chess, EnPassantMode, fen::Fen};

fn chromium() -> PathBuf {
    let path = PathBuf::from(std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    assert!(path.exists(), "{} is missing: run scripts/install-deps", path.display());
    path
}

fn deeptree(db: &Path, args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_deeptree")).arg("--db").arg(db).args(args).output().unwrap();
    assert!(output.status.success(), "deeptree {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

fn check(mode: &str, file: &Path) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop_check.py");
    let output = Command::new("python3").arg(script).arg(mode).arg(file).env("CHROMIUM", chromium()).output().unwrap();
    assert!(output.status.success(), "interop_check.py {mode}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A tree from the start position and its page.
fn page(dir: &Path) -> (PathBuf, show::ShownNode) {
    let db = dir.join("db");
    let shown = {
        let store = Store::open(&db, &StoreOptions::default()).unwrap();
        let params = Params::new(10, 20).with_max_depth(2);
        let mut analysis = Analysis::new(&store, ScriptedEvaluator::new(2, 3), params);
        analysis.run(&Line::parse(None, "").unwrap(), |_| {}).unwrap();
        let view = store.read().unwrap();
        show::tree(&view, &Chess::default(), &[], 3).unwrap()
    };
    let html = dir.join("tree.html");
    deeptree(&db, &["export", "html", html.to_str().unwrap(), "--depth", "3"]);
    (html, shown)
}

#[test]
fn the_page_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let (html, shown) = page(dir.path());
    let text = std::fs::read_to_string(&html).unwrap();
    // The only URL is the SVG namespace, which is a name, never fetched.
    assert_eq!(text.matches("://").count(), text.matches("\"http://www.w3.org/2000/svg\"").count());
    for fetch in ["<link", "src=", "@import", "url("] {
        assert!(!text.contains(fetch), "the page loads nothing: found {fetch}");
    }
    assert!(text.contains(&shown.moves[0].san), "the data is embedded");
}

#[test]
fn the_page_loads_descends_on_click_and_goes_back_up() {
    let dir = tempfile::tempdir().unwrap();
    let (html, shown) = page(dir.path());
    let seen = check("browse", &html);
    let start_fen = Fen::from_position(&Chess::default(), EnPassantMode::Legal).to_string();

    let loaded = &seen["loaded"];
    assert_eq!(loaded["fen"], start_fen.as_str());
    assert_eq!(loaded["squares"], 64);
    assert_eq!(loaded["pieces"].as_str().unwrap().len(), 32);
    assert_eq!(loaded["crumbs"], serde_json::json!(["root"]));
    let rows = loaded["moves"].as_array().unwrap();
    assert_eq!(rows.len(), shown.moves.len());
    for (row, m) in rows.iter().zip(&shown.moves) {
        assert_eq!(row["uci"], m.uci.as_str(), "best first, as show has them");
        let cells = row["cells"].as_array().unwrap();
        assert_eq!(cells[0], format!("1. {}", m.san), "the move");
        assert_eq!(cells[1], show::format_score(m.idea), "idea score");
        assert_eq!(cells[2], show::format_score(m.alpha), "alpha score");
        assert_eq!(cells[3], m.depth.to_string(), "depth");
    }

    // A click on the best move goes down to its position.
    let best = &shown.moves[0];
    let child = best.child.as_ref().expect("the best move has analysis below");
    let down = &seen["after_click"];
    assert_eq!(down["fen"], child.fen.as_str());
    assert_eq!(down["path"], best.uci.as_str());
    assert_eq!(down["hash"], format!("#{}", best.uci));
    assert_eq!(down["crumbs"], serde_json::json!(["root", format!("1. {}", best.san)]));
    let rows: Vec<&str> = down["moves"].as_array().unwrap().iter().map(|r| r["uci"].as_str().unwrap()).collect();
    let expected: Vec<&str> = child.moves.iter().map(|m| m.uci.as_str()).collect();
    assert_eq!(rows, expected);

    // Again, one ply further; then the breadcrumb of the first move leads back up to it.
    let reply = &child.moves[0];
    assert_eq!(seen["after_second_click"]["path"], format!("{},{}", best.uci, reply.uci));
    assert_eq!(seen["after_second_click"]["crumbs"].as_array().unwrap().len(), 3);
    assert_eq!(seen["after_crumb"]["fen"], child.fen.as_str());
    assert_eq!(seen["after_crumb"]["path"], best.uci.as_str());
    assert!(seen["screenshot_bytes"].as_u64().unwrap() > 10_000);
}

#[test]
fn a_screenshot_shows_the_board() {
    let dir = tempfile::tempdir().unwrap();
    let (html, shown) = page(dir.path());
    let profile = tempfile::tempdir().unwrap();
    let shot = dir.path().join("shot.png");
    let best = &shown.moves[0].uci;
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1100,800")
        .arg(format!("file://{}#{best}", html.display()))
        .output()
        .unwrap();
    assert!(shot.exists(), "no screenshot: {}", String::from_utf8_lossy(&output.stderr));
    let png = check("png", &shot);
    assert_eq!((png["width"].as_u64(), png["height"].as_u64()), (Some(1100), Some(800)));
    assert!(png["colours"].as_u64().unwrap() > 100, "not blank: {} colours", png["colours"]);
    // The board's squares: light and dark, 100-unit squares drawn 60 px wide, most of them visible.
    let count = |hex: &str| png["counts"][hex].as_u64().unwrap_or(0);
    assert!(count("f0d9b5") > 20 * 50 * 50, "light squares: {}", count("f0d9b5"));
    assert!(count("b58863") > 20 * 50 * 50, "dark squares: {}", count("b58863"));
    // The move just played (the URL's fragment) is highlighted on its two squares.
    assert!(count("cdd26a") + count("aaa23a") > 2 * 40 * 40, "last move highlighted");
    // Pieces: white and black glyphs.
    assert!(count("ffffff") > 2000 && count("111111") > 2000, "pieces drawn");
}
