//! `deeptree bench engine`: the cost of the pool, and how it scales.
//!
//! Two figures, each against a baseline measured in the same run: evaluations per second through a one-worker pool at
//! depth 1 against a bare loop that sends the same `position` and `go depth 1` commands straight to the same engine
//! binary over pipes (the pool's overhead: target ratio 0.9 or more), and the speed-up of two workers over one at
//! depth 10 (target 1.7 or more on two cores).

use std::{
    io::{BufRead, BufReader, BufWriter, Write},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use serde::Serialize;

use super::{
    EngineConfig, EngineError, EnginePool, EnginePosition, EvalRequest, JobOutcome, Limit, default_workers,
    resolve_program, split_command_line,
};

/// Varied positions (openings, middlegames, tactics, endgames), all legal with White or Black to move.
pub const BENCH_POSITIONS: &[&str] = &[
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1",
    "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
    "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
    "r1bqkbnr/pppp1ppp/2n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3",
    "rnbqkb1r/ppp2ppp/4pn2/3p4/2PP4/2N5/PP2PPPP/R1BQKBNR w KQkq - 2 4",
    "rnbq1rk1/ppp1ppbp/3p1np1/8/2PPP3/2N2N2/PP3PPP/R1BQKB1R w KQ - 0 6",
    "1k1r4/pp1b1R2/3q2pp/4p3/2B5/4Q3/PPP2B2/2K5 b - - 0 1",
    "3r1k2/4npp1/1ppr3p/p6P/P2PPPP1/1NR5/5K2/2R5 w - - 0 1",
    "2q1rr1k/3bbnnp/p2p1pp1/2pPp3/PpP1P1P1/1P2BNNP/2BQ1PRK/7R b - - 0 1",
    "rnbqkb1r/p3pppp/1p6/2ppP3/3N4/2P5/PPP1QPPP/R1B1KB1R w KQkq - 0 1",
    "r1b2rk1/2q1b1pp/p2ppn2/1p6/3QP3/1BN1B3/PPP3PP/R4RK1 w - - 0 1",
    "2r3k1/pppR1pp1/4p3/4P1P1/5P2/1P4K1/P1P5/8 w - - 0 1",
    "4b3/p3kp2/6p1/3pP2p/2pP1P2/4K1P1/P3N2P/8 w - - 0 1",
    "2kr1bnr/pbpq4/2n1pp2/3p3p/3P1P1B/2N2N1Q/PPP3PP/2KR1B1R w - - 0 1",
    "3rr1k1/pp3pp1/1qn2np1/8/3p4/PP1R1P2/2P1NQPP/R1B3K1 b - - 0 1",
    "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",
    "1K1k4/1P6/8/8/8/8/r7/2R5 w - - 0 1",
    "8/pp3k2/2p5/3p4/3P4/2P3K1/PP6/8 w - - 0 1",
    "8/6k1/8/3Q4/8/5K2/1q6/8 w - - 0 1",
];

/// How much work the benchmark does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineBenchSizes {
    /// Depth-1 evaluations per measurement of the pool and of the bare loop.
    pub shallow_evaluations: usize,
    /// Measurements of pool and bare loop (each round both, in alternating order); the best of each counts.
    pub shallow_rounds: usize,
    pub deep_depth: u32,
    /// Evaluations at `deep_depth` for the one- and two-worker runs.
    pub deep_evaluations: usize,
    /// Measurements of one and two workers (fresh engines each time, alternating order); the best of each counts.
    pub deep_rounds: usize,
}

impl Default for EngineBenchSizes {
    fn default() -> EngineBenchSizes {
        EngineBenchSizes {
            shallow_evaluations: 1000,
            shallow_rounds: 9,
            deep_depth: 10,
            deep_evaluations: 44,
            deep_rounds: 3,
        }
    }
}

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct EngineBench {
    pub engine: String,
    pub command: String,
    pub cores: usize,
    pub shallow_evaluations: usize,
    /// Bare loop over pipes, depth 1.
    pub bare_evals_per_sec: f64,
    /// One-worker pool, depth 1.
    pub pool_evals_per_sec: f64,
    /// `pool_evals_per_sec / bare_evals_per_sec` (target ≥ 0.9).
    pub pool_to_bare_ratio: f64,
    pub deep_depth: u32,
    pub deep_evaluations: usize,
    pub one_worker_secs: f64,
    pub two_workers_secs: f64,
    /// `one_worker_secs / two_workers_secs` (target ≥ 1.7 on two cores).
    pub two_worker_speedup: f64,
}

/// Runs the benchmark against `command` (any engine command line, `Threads` = 1 everywhere).
pub fn engine_bench(command: &str, sizes: &EngineBenchSizes) -> Result<EngineBench, EngineError> {
    let positions =
        BENCH_POSITIONS.iter().map(|fen| EnginePosition::from_fen(fen, Vec::new())).collect::<Result<Vec<_>, _>>()?;
    let config = EngineConfig::new(command);
    let shallow: Vec<EvalRequest> = (0..sizes.shallow_evaluations.max(1))
        .map(|i| EvalRequest::new(positions[i % positions.len()].clone(), Limit::Depth(1)))
        .collect();
    let commands: Vec<String> =
        shallow.iter().map(|r| format!("{}\n{}\n", r.position.uci_command(), r.go_command())).collect();

    let pool = EnginePool::uniform(&config, 1)?;
    let engine = pool.identity(0).map_or_else(|| command.to_owned(), |i| i.name.clone());
    let mut bare = BareEngine::start(command)?;
    // Warm both up (NNUE load, first allocations) before measuring.
    bare.run(&commands[..commands.len().min(50)])?;
    run_jobs(&pool, &shallow[..shallow.len().min(50)])?;
    let (mut bare_best, mut pool_best) = (Duration::MAX, Duration::MAX);
    // Alternate which goes first, so that neither always runs on a warmer (or colder) machine.
    for round in 0..sizes.shallow_rounds.max(1) {
        if round % 2 == 0 {
            bare_best = bare_best.min(bare.run(&commands)?);
            pool_best = pool_best.min(run_jobs(&pool, &shallow)?);
        } else {
            pool_best = pool_best.min(run_jobs(&pool, &shallow)?);
            bare_best = bare_best.min(bare.run(&commands)?);
        }
    }
    drop((bare, pool));
    let rate = |d: Duration| shallow.len() as f64 / d.as_secs_f64().max(1e-9);

    let deep: Vec<EvalRequest> = (0..sizes.deep_evaluations.max(2))
        .map(|i| EvalRequest::new(positions[i % positions.len()].clone(), Limit::Depth(sizes.deep_depth)))
        .collect();
    let (mut one, mut two) = (Duration::MAX, Duration::MAX);
    for round in 0..sizes.deep_rounds.max(1) {
        let (one_pool, two_pool) = (EnginePool::uniform(&config, 1)?, EnginePool::uniform(&config, 2)?);
        if round % 2 == 0 {
            one = one.min(run_jobs(&one_pool, &deep)?);
            two = two.min(run_jobs(&two_pool, &deep)?);
        } else {
            two = two.min(run_jobs(&two_pool, &deep)?);
            one = one.min(run_jobs(&one_pool, &deep)?);
        }
    }

    Ok(EngineBench {
        engine,
        command: command.to_owned(),
        cores: default_workers(),
        shallow_evaluations: shallow.len(),
        bare_evals_per_sec: rate(bare_best),
        pool_evals_per_sec: rate(pool_best),
        pool_to_bare_ratio: bare_best.as_secs_f64() / pool_best.as_secs_f64().max(1e-9),
        deep_depth: sizes.deep_depth,
        deep_evaluations: deep.len(),
        one_worker_secs: one.as_secs_f64(),
        two_workers_secs: two.as_secs_f64(),
        two_worker_speedup: one.as_secs_f64() / two.as_secs_f64().max(1e-9),
    })
}

/// Submits every request, waits for every result; the wall time. A job that does not succeed is the error.
fn run_jobs(pool: &EnginePool, requests: &[EvalRequest]) -> Result<Duration, EngineError> {
    let started = Instant::now();
    for (id, request) in requests.iter().enumerate() {
        pool.submit(id as u64, request.clone())?;
    }
    for _ in requests {
        let result = pool.results().recv().map_err(|_| EngineError::Eof)?;
        match result.outcome {
            JobOutcome::Done(_) => {}
            JobOutcome::Failed(e) => return Err(e),
            JobOutcome::Cancelled => {
                return Err(EngineError::InvalidRequest("a benchmark job was cancelled".into()));
            }
        }
    }
    Ok(started.elapsed())
}

/// The baseline: the engine binary driven directly over pipes, with no checks, no threads and no timeouts.
struct BareEngine {
    child: Child,
    input: BufWriter<std::process::ChildStdin>,
    output: BufReader<std::process::ChildStdout>,
    line: String,
}

impl BareEngine {
    fn start(command: &str) -> Result<BareEngine, EngineError> {
        let words = split_command_line(command)?;
        let spawn_error = |source| EngineError::Spawn { command: command.to_owned(), source: Arc::new(source) };
        let (program, args) = words.split_first().ok_or_else(|| spawn_error(std::io::Error::other("empty")))?;
        let mut child = Command::new(resolve_program(program))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(spawn_error)?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_error(std::io::Error::other("no pipes")));
        };
        let mut bare =
            BareEngine { child, input: BufWriter::new(input), output: BufReader::new(output), line: String::new() };
        bare.send("uci\n")?;
        bare.read_until("uciok")?;
        bare.send("setoption name Threads value 1\nisready\n")?;
        bare.read_until("readyok")?;
        Ok(bare)
    }

    fn send(&mut self, text: &str) -> Result<(), EngineError> {
        let written = self.input.write_all(text.as_bytes());
        written.and_then(|()| self.input.flush()).map_err(|e| EngineError::Io { source: Arc::new(e) })
    }

    fn read_until(&mut self, prefix: &str) -> Result<(), EngineError> {
        loop {
            self.line.clear();
            match self.output.read_line(&mut self.line) {
                Ok(0) | Err(_) => return Err(EngineError::Eof),
                Ok(_) if self.line.starts_with(prefix) => return Ok(()),
                Ok(_) => {}
            }
        }
    }

    /// Sends each `position`/`go` pair and reads to its `bestmove`; the wall time.
    fn run(&mut self, commands: &[String]) -> Result<Duration, EngineError> {
        let started = Instant::now();
        for command in commands {
            self.send(command)?;
            self.read_until("bestmove")?;
        }
        Ok(started.elapsed())
    }
}

impl Drop for BareEngine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_positions_are_legal_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for fen in BENCH_POSITIONS {
            let pos = EnginePosition::from_fen(fen, Vec::new()).unwrap_or_else(|e| panic!("{fen}: {e}"));
            EvalRequest::new(pos.clone(), Limit::Depth(1)).validate().unwrap();
            assert!(seen.insert(pos.fen()), "{fen} twice");
        }
    }
}
