//! Starting an engine: the process in a group of its own, its pipes, the watchdog thread and the thread that
//! forwards its stderr to the log; and ending it, killed and reaped when the handle is dropped.

use std::{
    io::{BufReader, Read},
    os::unix::process::CommandExt,
    process::{Command, Stdio},
    sync::{Arc, atomic::AtomicU64},
    thread,
    time::Instant,
};

use log::{debug, warn};
use parking_lot::{Condvar, Mutex};

use super::{
    super::{
        EngineError,
        command::{resolve_program, split_command_line},
        protocol::{ReadLine, read_line},
    },
    Engine, MAX_LINE,
    config::{EngineConfig, EngineIdentity, Searchmoves, known_to_ignore_searchmoves},
    watchdog::{Link, LinkState, Phase, kill_process_group},
};

impl Engine {
    /// Starts the engine, completes the handshake (`uci`/`uciok`), sets the configured options and waits for
    /// `readyok`. Options the engine does not have, or values that do not fit them, are skipped with a warning.
    pub fn spawn(config: &EngineConfig) -> Result<Engine, EngineError> {
        let words = split_command_line(&config.command)?;
        let Some((program, args)) = words.split_first() else {
            return Err(EngineError::BadCommand { command: config.command.clone(), reason: "empty command".into() });
        };
        let program_path = resolve_program(program);
        let spawn_error = |source| EngineError::Spawn { command: config.command.clone(), source: Arc::new(source) };
        let mut child = Command::new(&program_path)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a timeout kills wrapper and engine together, and a Ctrl-C meant for deeptree
            // does not reach the engines directly.
            .process_group(0)
            .spawn()
            .map_err(spawn_error)?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_error(std::io::Error::other("no pipes to the child")));
        };
        let label = program_path.file_name().map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
        let link = Arc::new(Link {
            input: Mutex::new(stdin),
            state: Mutex::new(LinkState {
                child,
                phase: Phase::Idle,
                watch_at: None,
                expired: None,
                closed: false,
                pending_readyok: 0,
                generation: 0,
                searching: false,
                stop_requested: false,
                stop_sent: false,
                pondering: false,
                ponderhit_requested: false,
            }),
            wake: Condvar::new(),
            timeouts: config.timeouts.bounded(),
            pid,
            label: Arc::from(label.as_str()),
            last_line: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let identity = Arc::new(EngineIdentity {
            name: label.clone(),
            author: None,
            options: Vec::new(),
            command: config.command.clone(),
        });
        let mut engine = Engine {
            link: Arc::clone(&link),
            output: BufReader::new(stdout),
            partial: Vec::new(),
            watchdog: None,
            name: Arc::from(label.as_str()),
            identity,
            multipv: 1,
            searchmoves: config.searchmoves,
            covered: false,
            chess960: false,
        };
        let err_label = label.clone();
        engine.watchdog = Some(
            thread::Builder::new()
                .name(format!("engine-{pid}-watch"))
                .spawn(move || link.watch())
                .and_then(|watchdog| {
                    thread::Builder::new()
                        .name(format!("engine-{pid}-err"))
                        .spawn(move || forward_stderr(stderr, &err_label, pid))
                        .map(|_| watchdog)
                })
                .map_err(spawn_error)?,
        );
        debug!("started engine {:?} (pid {pid})", config.command);
        engine.handshake(config)?;
        // Learnt from an earlier process of the same command, where the configuration does not say.
        if engine.searchmoves == Searchmoves::Unknown && known_to_ignore_searchmoves(&config.command) {
            engine.searchmoves = engine.learnt_method();
        }
        Ok(engine)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let pid = self.link.pid;
        {
            let mut state = self.link.state.lock();
            state.closed = true;
            self.link.wake.notify_one();
            let _ = state.child.kill();
            // The whole group, before the leader is reaped: a wrapper's engine that ignores the end of its input (or
            // hangs in a search) must not outlive its handle.
            kill_process_group(pid);
            match state.child.wait() {
                Ok(status) => debug!("engine {} (pid {pid}) ended: {status}", self.name),
                Err(e) => warn!("engine {} (pid {pid}) not reaped: {e}", self.name),
            }
        }
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
    }
}

fn forward_stderr(err: impl Read, label: &str, pid: u32) {
    let (mut err, mut buf) = (BufReader::new(err), Vec::new());
    loop {
        // Lines as the engine's output is read: an engine writing stderr without line endings costs bounded memory.
        match read_line(&mut err, &mut buf, MAX_LINE) {
            Ok(ReadLine::Line { text, .. }) => warn!("{label} (pid {pid}) stderr: {}", text.trim_end()),
            Ok(ReadLine::Skipped) => warn!("{label} (pid {pid}) stderr: a line longer than {MAX_LINE} bytes, skipped"),
            Ok(ReadLine::End) | Err(_) => return,
        }
    }
}
