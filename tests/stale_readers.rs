//! A process killed with a read transaction open leaves its reader slot in LMDB's lock file; while another process
//! keeps the store open, LMDB does not clear it, and no page freed since that snapshot is reused: the data file grows
//! with every write. The next deeptree process that opens the store clears it.
//!
//! The test runs its own binary twice more as plain LMDB clients (heed, no deeptree): one that is killed holding a
//! read transaction, one that counts the slots left.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
};

use deeptree::store::{Store, StoreOptions};

const ROLE: &str = "DEEPTREE_TEST_LMDB_ROLE";
const DIR: &str = "DEEPTREE_TEST_LMDB_DIR";
const TEST: &str = "a_reader_slot_left_by_a_killed_process_is_cleared_by_the_next_open";

fn raw_env(dir: &Path) -> heed::Env<heed::WithoutTls> {
    // SAFETY: a test's store, opened once in this process.
    unsafe {
        heed::EnvOpenOptions::new().read_txn_without_tls().map_size(1 << 30).max_dbs(6).max_readers(254).open(dir)
    }
    .unwrap()
}

/// This binary in one of its roles: `hold` opens a read transaction, says so and waits to be killed; `count` clears
/// the stale reader slots and prints how many there were.
fn role(name: &str, dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads", "1"])
        .env(ROLE, name)
        .env(DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_reader_slot_left_by_a_killed_process_is_cleared_by_the_next_open() {
    if let (Ok(role), Ok(dir)) = (std::env::var(ROLE), std::env::var(DIR)) {
        let env = raw_env(Path::new(&dir));
        match role.as_str() {
            "hold" => {
                let _txn = env.read_txn().unwrap();
                println!("role: holding");
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
            _ => println!("role: stale {}", env.clear_stale_readers().unwrap()),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    // A process that keeps the store open all along: a GUI's session, an `analyze` of weeks.
    let survivor = Store::open(&db, &StoreOptions::default()).unwrap();
    let line_of = |child: &mut std::process::Child| -> String {
        let stdout = child.stdout.take().unwrap();
        // The test harness may have written the test's name on the same line, before it.
        let said = |line: String| line.find("role: ").map(|at| line[at..].to_owned());
        BufReader::new(stdout).lines().map_while(Result::ok).find_map(said).unwrap_or_default()
    };
    let mut holder = role("hold", &db);
    assert_eq!(line_of(&mut holder), "role: holding");
    holder.kill().unwrap();
    holder.wait().unwrap();
    // The next deeptree process to open the store, to read it only.
    let stats = Command::new(env!("CARGO_BIN_EXE_deeptree")).arg("--db").arg(&db).args(["stats"]).output().unwrap();
    assert!(stats.status.success(), "{}", String::from_utf8_lossy(&stats.stderr));
    let mut counter = role("count", &db);
    assert_eq!(line_of(&mut counter), "role: stale 0", "the killed process's slot is still held");
    counter.wait().unwrap();
    drop(survivor);
}
