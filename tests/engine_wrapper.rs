//! An engine behind a wrapper that does not `exec` it (`sh -c 'engine; true'`), hung in a search, on a machine
//! without a kill(1) program: the watchdog ends the wrapper's whole process group, so the search fails with a timeout
//! instead of waiting forever for the end of an output the hung engine holds open. The only test of its binary: it
//! empties PATH.

use std::{
    sync::mpsc,
    time::{Duration, Instant},
};

use deeptree::engine::{Engine, EngineConfig, EngineError, EnginePosition, EvalRequest, Limit, Timeouts};

const FAKE: &str = env!("CARGO_BIN_EXE_deeptree-fake-engine");

/// The process is gone, or a zombie waiting for a reaper that is not deeptree.
fn gone(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.is_empty() || status.contains("State:\tZ")
}

fn until_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    gone(pid)
}

#[test]
fn a_hung_engine_behind_a_wrapper_is_killed_with_it_on_a_machine_without_kill() {
    // SAFETY: the only test of this binary, and it has started no thread yet: nothing reads the environment while it
    // changes. Without a PATH there is no kill(1) to run.
    unsafe { std::env::set_var("PATH", "/nonexistent") };
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let wrapped =
        EngineConfig::new(format!("/bin/sh -c \"'{FAKE}' --mode hang --pid-file '{}'; true\"", pids.display()))
            // A generous handshake (a loaded machine starts `sh` and the engine slowly); the search's silence is what is timed.
            .with_timeouts(Timeouts { handshake: Duration::from_secs(10), search_silence: Duration::from_millis(300) });
    let engine_pid = || -> u32 {
        let text = std::fs::read_to_string(&pids).unwrap();
        text.lines().next().and_then(|l| l.trim().parse().ok()).unwrap()
    };

    // A hung search: the watchdog's kill must reach the engine under the wrapper, or the read never ends.
    let (tx, rx) = mpsc::channel();
    let config = wrapped;
    std::thread::spawn(move || {
        let mut engine = Engine::spawn(&config).unwrap();
        let outcome =
            engine.evaluate(&EvalRequest::new(EnginePosition::of(&shakmaty::Chess::default()), Limit::Depth(3)));
        let _ = tx.send(outcome.map(|_| ()));
    });
    // The watchdog asks `isready` after 0.3 s of silence and kills the group when no `readyok` comes within the
    // handshake's 10 s.
    let outcome = rx.recv_timeout(Duration::from_secs(40)).expect("the hung search ends");
    assert!(matches!(outcome, Err(EngineError::Timeout { .. })), "{outcome:?}");
    assert!(until_gone(engine_pid()), "the engine under the wrapper still runs");
}
