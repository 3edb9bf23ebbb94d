//! `deeptree serve` used as a person uses it: tests/python/test_serve.py drives the page in headless Chromium with
//! selenium (Debian's chromium and chromium-driver, python's selenium: `scripts/install-deps` installs them) over a
//! store grown by the real Stockfish, and `analyze` running beside serve.

use std::process::Command;

#[test]
fn the_page_walks_moves_steers_and_updates_live_in_chromium() {
    let output = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/test_serve.py"))
        .arg(env!("CARGO_BIN_EXE_deeptree"))
        .env_remove("DEEPTREE_DB")
        .env_remove("DEEPTREE_CONFIG")
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the browser test failed:\n{stdout}");
    assert!(stdout.contains("passed in"), "{stdout}");
}
