//! deeptree as a UCI engine, driven by python-chess's engine module (tests/python/test_uci.py).

use std::process::Command;

#[test]
fn python_chess_drives_deeptree() {
    let output = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/test_uci.py"))
        .arg(env!("CARGO_BIN_EXE_deeptree"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "python-chess scenarios failed:\n{stdout}");
}
