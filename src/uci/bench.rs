//! `deeptree bench relay`: what the relay costs a move, hop by hop, against a bare pipe in the same run.
//!
//! The bench plays the GUI. It starts `deeptree` (this executable, with a fresh store in a temporary directory) with
//! the fake engine in its `instant` mode as the inner engine, and sends timed `go` commands from positions of random
//! games (a `ucinewgame` every 40 plies). The fake engine stamps when it read each `go` and when it wrote its
//! `bestmove`; the bench stamps when it wrote `go` and when it read deeptree's `bestmove`. So:
//! - the `go` hop is from the bench writing `go` to the engine reading it,
//! - the `bestmove` hop is from the engine writing `bestmove` to the bench reading deeptree's.
//!
//! The baseline is the same exchange with the fake engine alone, over one pipe each way: what any GUI pays. The
//! clock is the system clock, which both processes read on one machine.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{SystemTime, UNIX_EPOCH},
};

use serde::Serialize;
use shakmaty::{Chess, Position, uci::UciMove};

/// Plies of each game before a `ucinewgame`.
const GAME_PLIES: usize = 40;

/// Median and 99th percentile of one hop, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Hop {
    pub median_ms: f64,
    pub p99_ms: f64,
}

/// The result of `deeptree bench relay`.
#[derive(Debug, Clone, Serialize)]
pub struct RelayBench {
    pub searches: usize,
    /// Through deeptree.
    pub relay_go: Hop,
    pub relay_bestmove: Hop,
    /// The engine alone, over a bare pipe.
    pub bare_go: Hop,
    pub bare_bestmove: Hop,
    /// What deeptree adds to each hop (relay minus bare), at the median and the 99th percentile.
    pub added_go: Hop,
    pub added_bestmove: Hop,
}

/// A UCI peer driven line by line.
pub(super) struct Peer {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Peer {
    pub(super) fn start(program: &Path, args: &[String]) -> Result<Peer, String> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let input = child.stdin.take().ok_or("no stdin")?;
        let output = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Peer { child, input, output })
    }

    pub(super) fn send(&mut self, line: &str) -> Result<(), String> {
        self.input
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| self.input.flush())
            .map_err(|e| e.to_string())
    }

    /// Reads lines until one starts with `prefix`; returns it, with the instant it was read.
    pub(super) fn until(&mut self, prefix: &str) -> Result<(String, u128), String> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.output.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err(format!("the engine closed its output while '{prefix}' was awaited"));
            }
            if line.starts_with(prefix) {
                return Ok((line.trim_end().to_owned(), now_nanos()));
            }
        }
    }

    pub(super) fn quit(mut self) {
        let _ = self.send("quit");
        let _ = self.child.wait();
    }
}

fn now_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// Positions of random games, as `position` commands, with a `None` where a new game starts.
pub(super) fn positions(searches: usize, seed: u64) -> Vec<Option<String>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = Vec::with_capacity(searches + searches / GAME_PLIES + 1);
    let mut played = 0;
    while played < searches {
        out.push(None);
        let mut pos = Chess::default();
        let mut moves: Vec<String> = Vec::new();
        for _ in 0..GAME_PLIES {
            if played == searches {
                break;
            }
            let legal = pos.legal_moves();
            if legal.is_empty() {
                break;
            }
            let text = if moves.is_empty() { String::new() } else { format!(" moves {}", moves.join(" ")) };
            out.push(Some(format!("position startpos{text}")));
            played += 1;
            let m = legal[rng.usize(..legal.len())];
            moves.push(UciMove::from_standard(m).to_string());
            pos.play_unchecked(m);
        }
    }
    out
}

/// Plays the GUI against `peer`: returns, per search, (bench wrote `go`, bench read `bestmove`).
fn drive(peer: &mut Peer, script: &[Option<String>]) -> Result<Vec<(u128, u128)>, String> {
    let mut stamps = Vec::new();
    for step in script {
        match step {
            None => {
                peer.send("ucinewgame")?;
                peer.send("isready")?;
                peer.until("readyok")?;
            }
            Some(position) => {
                peer.send(position)?;
                let sent = now_nanos();
                peer.send("go wtime 60000 btime 60000 winc 100 binc 100")?;
                let (_, read) = peer.until("bestmove")?;
                stamps.push((sent, read));
            }
        }
    }
    Ok(stamps)
}

/// The engine's stamps: (read `go`, wrote `bestmove`).
fn engine_stamps(path: &Path) -> Result<Vec<(u128, u128)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .map(|line| {
            let mut words = line.split_whitespace().map(str::parse::<u128>);
            match (words.next(), words.next()) {
                (Some(Ok(a)), Some(Ok(b))) => Ok((a, b)),
                _ => Err(format!("{}: bad stamp line {line:?}", path.display())),
            }
        })
        .collect()
}

/// The median and 99th percentile of `millis`.
pub(super) fn hop(mut millis: Vec<f64>) -> Hop {
    millis.sort_by(f64::total_cmp);
    let at =
        |p: f64| millis.get(((millis.len().saturating_sub(1)) as f64 * p).round() as usize).copied().unwrap_or(0.0);
    Hop { median_ms: at(0.5), p99_ms: at(0.99) }
}

/// Both hops from the bench's and the engine's stamps.
fn hops(gui: &[(u128, u128)], engine: &[(u128, u128)]) -> Result<(Hop, Hop), String> {
    if gui.len() != engine.len() {
        return Err(format!(
            "{} searches were sent but the engine answered {} (did something else answer?)",
            gui.len(),
            engine.len()
        ));
    }
    let ms = |later: u128, earlier: u128| (later as f64 - earlier as f64) / 1e6;
    let go = gui.iter().zip(engine).map(|((sent, _), (read, _))| ms(*read, *sent)).collect();
    let bestmove = gui.iter().zip(engine).map(|((_, read), (_, written))| ms(*read, *written)).collect();
    Ok((hop(go), hop(bestmove)))
}

/// Runs the bench: `searches` relayed searches through `deeptree`, and as many over a bare pipe to `fake_engine`.
pub fn relay_bench(deeptree: &Path, fake_engine: &Path, searches: usize, seed: u64) -> Result<RelayBench, String> {
    // Removed with everything in it when it is dropped, however the bench ends.
    let scratch = tempfile::Builder::new()
        .prefix("deeptree-bench-relay-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    run(deeptree, fake_engine, searches, seed, scratch.path())
}

fn run(deeptree: &Path, fake: &Path, searches: usize, seed: u64, scratch: &Path) -> Result<RelayBench, String> {
    let script = positions(searches, seed);

    let bare_stamps = scratch.join("bare.stamps");
    let mut bare =
        Peer::start(fake, &["--mode".into(), "instant".into(), "--stamp".into(), bare_stamps.display().to_string()])?;
    bare.send("uci")?;
    bare.until("uciok")?;
    let bare_gui = drive(&mut bare, &script)?;
    bare.quit();

    let relay_stamps = scratch.join("relay.stamps");
    let db: PathBuf = scratch.join("tree");
    let mut relay = Peer::start(deeptree, &["--db".into(), db.display().to_string()])?;
    relay.send("uci")?;
    relay.until("uciok")?;
    let inner = format!("{} --mode instant --stamp {}", fake.display(), relay_stamps.display());
    relay.send(&format!("setoption name InnerEngine value {inner}"))?;
    relay.send("setoption name BackgroundAnalysis value false")?;
    relay.send("isready")?;
    relay.until("readyok")?;
    let relay_gui = drive(&mut relay, &script)?;
    relay.quit();

    let (bare_go, bare_bestmove) = hops(&bare_gui, &engine_stamps(&bare_stamps)?)?;
    let (relay_go, relay_bestmove) = hops(&relay_gui, &engine_stamps(&relay_stamps)?)?;
    let added =
        |relay: Hop, bare: Hop| Hop { median_ms: relay.median_ms - bare.median_ms, p99_ms: relay.p99_ms - bare.p99_ms };
    Ok(RelayBench {
        searches: relay_gui.len(),
        relay_go,
        relay_bestmove,
        bare_go,
        bare_bestmove,
        added_go: added(relay_go, bare_go),
        added_bestmove: added(relay_bestmove, bare_bestmove),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_has_every_search_and_a_new_game_every_40_plies() {
        let script = positions(100, 7);
        assert_eq!(script.iter().filter(|s| s.is_some()).count(), 100);
        assert!(script[0].is_none());
        assert_eq!(script[1].as_deref(), Some("position startpos"));
        assert!(script.iter().filter(|s| s.is_none()).count() >= 3);
    }

    #[test]
    fn hops_pair_the_stamps_of_both_sides() {
        let gui = [(1_000_000, 9_000_000), (2_000_000, 12_000_000)];
        let engine = [(1_200_000, 8_500_000), (2_400_000, 11_000_000)];
        let (go, bestmove) = hops(&gui, &engine).unwrap();
        assert!((go.median_ms - 0.2).abs() < 1e-9 || (go.median_ms - 0.4).abs() < 1e-9);
        assert!((go.p99_ms - 0.4).abs() < 1e-9);
        assert!((bestmove.p99_ms - 1.0).abs() < 1e-9);
        assert!(hops(&gui, &engine[..1]).is_err(), "a search the engine never saw is an error");
    }
}
