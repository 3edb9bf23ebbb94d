//! `deeptree bench stops`: how soon `stop` and `ponderhit` are answered, whatever the tree is doing, against the bare
//! inner engine's `stop` in the same run.
//!
//! The bench plays the GUI with the real inner engine (Stockfish by default). First the bare engine: `go infinite`,
//! a wait, `stop`, timed to its `bestmove`. Then deeptree on a fresh store in a temporary directory: the start
//! position's tree is grown for a few seconds, and `TreeDepthMargin` is set to its most so that the tree answers a
//! clock there. Then, each case as many times, after a random wait of 100 to 500 ms:
//! - the tree, `go infinite` then `stop` (growth under way);
//! - the tree, `go ponder` on a clock then `stop` (a ponder miss; growth under way);
//! - the tree, `go ponder` then `ponderhit` (the tree answers the move at once);
//! - relayed, `go ponder` on a position the tree does not know, then `stop` (the engine ponders);
//! - relayed, a long timed `go` there, then `stop`.
//!
//! Each is timed from the bench writing `stop` (or `ponderhit`) to it reading `bestmove`: what the GUI's clock sees.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use serde::Serialize;

use super::bench::{Hop, Peer, hop, positions};

/// How long the start position's tree grows before the trials.
const GROWTH: Duration = Duration::from_secs(4);

/// One case: its trials' latencies in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub name: &'static str,
    pub trials: usize,
    pub median_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Case {
    fn of(name: &'static str, millis: Vec<f64>) -> Case {
        let (trials, max_ms) = (millis.len(), millis.iter().copied().fold(0.0, f64::max));
        let Hop { median_ms, p99_ms } = hop(millis);
        Case { name, trials, median_ms, p99_ms, max_ms }
    }
}

/// The result of `deeptree bench stops`.
#[derive(Debug, Clone, Serialize)]
pub struct StopBench {
    pub engine: String,
    /// The bare engine's `stop` after `go infinite`: the baseline.
    pub bare: Case,
    /// Through deeptree.
    pub cases: Vec<Case>,
}

/// A clock far from its end: the engine would think for seconds.
const CLOCK: &str = "wtime 600000 btime 600000 winc 5000 binc 5000";

/// Sends `signal` after a random wait of 100 to 500 ms and returns the milliseconds to `bestmove`.
fn after_a_while(peer: &mut Peer, rng: &mut fastrand::Rng, signal: &str) -> Result<f64, String> {
    std::thread::sleep(Duration::from_millis(rng.u64(100..=500)));
    let sent = Instant::now();
    peer.send(signal)?;
    peer.until("bestmove")?;
    Ok(sent.elapsed().as_secs_f64() * 1e3)
}

/// Runs the bench with `engine` (a command line) as the inner engine: `trials` of each case.
pub fn stop_bench(deeptree: &Path, engine: &str, trials: usize, seed: u64) -> Result<StopBench, String> {
    let scratch = tempfile::Builder::new()
        .prefix("deeptree-bench-stops-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let words = crate::engine::split_command_line(engine).map_err(|e| e.to_string())?;
    let (program, args) = words.split_first().ok_or("no engine command")?;
    let program = crate::engine::resolve_program(program);
    let mut rng = fastrand::Rng::with_seed(seed);
    // Positions the tree does not know: random games, from their fifth ply.
    let elsewhere: Vec<String> =
        positions(trials * 20, seed).into_iter().flatten().filter(|p| p.split_whitespace().count() > 7).collect();
    let elsewhere = |k: usize| elsewhere.get(k % elsewhere.len().max(1)).cloned().unwrap_or_default();

    let mut bare = Peer::start(&program, args)?;
    bare.send("uci")?;
    bare.until("uciok")?;
    let mut millis = Vec::new();
    for k in 0..trials {
        bare.send(&elsewhere(k))?;
        bare.send("go infinite")?;
        millis.push(after_a_while(&mut bare, &mut rng, "stop")?);
    }
    bare.quit();
    let bare = Case::of("bare engine: stop after go infinite", millis);

    let db = scratch.path().join("tree");
    let mut uci = Peer::start(deeptree, &["--db".into(), db.display().to_string()])?;
    uci.send("uci")?;
    uci.until("uciok")?;
    for setting in [
        format!("InnerEngine value {engine}"),
        "BackgroundAnalysis value false".into(),
        "EngineDepth value 12".into(),
        "TreeDepthMargin value 20".into(),
    ] {
        uci.send(&format!("setoption name {setting}"))?;
    }
    uci.send("isready")?;
    uci.until("readyok")?;
    uci.send("position startpos")?;
    uci.send("go infinite")?;
    std::thread::sleep(GROWTH);
    uci.send("stop")?;
    uci.until("bestmove")?;

    let mut cases = Vec::new();
    let scripts: [(&'static str, bool, String, &str); 5] = [
        ("tree: stop after go infinite", true, "go infinite".into(), "stop"),
        ("tree: stop after go ponder (a ponder miss)", true, format!("go ponder {CLOCK}"), "stop"),
        ("tree: ponderhit (the tree answers)", true, format!("go ponder {CLOCK}"), "ponderhit"),
        ("relayed: stop after go ponder", false, format!("go ponder {CLOCK}"), "stop"),
        ("relayed: stop after a timed go", false, format!("go {CLOCK}"), "stop"),
    ];
    for (case, (name, tree, go, signal)) in scripts.into_iter().enumerate() {
        let mut millis = Vec::new();
        for k in 0..trials {
            let position = if tree { "position startpos".to_owned() } else { elsewhere(case * trials + k) };
            uci.send(&position)?;
            uci.send(&go)?;
            millis.push(after_a_while(&mut uci, &mut rng, signal)?);
        }
        cases.push(Case::of(name, millis));
    }
    uci.quit();
    Ok(StopBench { engine: engine.to_owned(), bare, cases })
}
