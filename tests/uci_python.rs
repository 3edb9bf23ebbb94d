//! deeptree as a UCI engine, driven by python-chess's engine module (tests/python/test_uci.py), with Stockfish inside
//! and with another engine inside: Toga II 3.0 (`scripts/install-deps` installs it), which ignores `searchmoves`
//! and has no `Threads` or `UCI_Chess960` option.

use std::{path::Path, process::Command};

/// Runs the python-chess scenarios with `inner` as deeptree's inner engine (Stockfish where `None`); returns their
/// output, having checked that none failed.
fn scenarios(inner: Option<&str>) -> String {
    let output = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/test_uci.py"))
        .arg(env!("CARGO_BIN_EXE_deeptree"))
        .args(inner)
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "python-chess scenarios failed:\n{stdout}");
    stdout
}

#[test]
fn python_chess_drives_deeptree() {
    let stdout = scenarios(None);
    assert!(stdout.contains(" 0 skipped, 0 failed"), "with Stockfish every scenario runs:\n{stdout}");
}

#[test]
fn python_chess_drives_deeptree_with_toga_ii_inside() {
    const TOGA: &str = "/usr/games/toga2";
    assert!(Path::new(TOGA).exists(), "{TOGA} is missing: run scripts/install-deps");
    let stdout = scenarios(Some(TOGA));
    // Only Chess960 is left out, and says why: Toga II plays none.
    let skipped: Vec<&str> = stdout.lines().filter(|l| l.starts_with("skip ")).collect();
    assert_eq!(skipped.len(), 1, "{stdout}");
    assert!(skipped[0].starts_with("skip test_chess960_tree_and_game: ") && skipped[0].contains("UCI_Chess960"));
    assert!(stdout.contains("10 passed, 1 skipped, 0 failed"), "{stdout}");
}
