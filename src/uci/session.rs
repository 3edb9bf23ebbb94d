//! The protocol loop: one thread reads the GUI's commands and never blocks on a search.
//!
//! `go` starts a search thread (`policy`); `stop` and `ponderhit` reach it through flags. `isready` is answered at
//! once while a search runs; otherwise, as a bare engine would, once the direct engine (`direct`) has taken every
//! `setoption` and `ucinewgame` sent so far, so that the first `go` finds it started and ready.
//!
//! Here: the loop, the commands' dispatch, `uci`, `isready` and `ucinewgame`. What `setoption` configures is in
//! `settings`; `go`, its search thread and background growth are in `searches`.

use std::{
    io::{BufRead, Write},
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use parking_lot::Mutex;

use crate::{
    config::Config,
    engine::{EngineConfig, EngineIdentity, StopHandle, protocol::EngineOption, spec::EngineSpec},
    search::{analysis::Line, evaluator::PoolEvaluator},
    store::{Store, StoreOptions},
};

mod searches;
mod settings;

use super::{
    command::{Go, GuiCommand, parse},
    depth::DepthModel,
    direct::{DirectSlot, Overhead, RelayClock},
    growth::grow_tree,
    options::{self, Options, check_value},
    policy::{search, wait_for_release},
};

/// The protocol's side of stdout: one line at a time, flushed.
#[derive(Clone)]
pub struct Out(Arc<Mutex<std::io::Stdout>>);

impl Out {
    pub fn send(&self, line: &str) {
        let out = self.0.lock();
        let mut lock = out.lock();
        let _ = writeln!(lock, "{line}");
        let _ = lock.flush();
        drop(lock);
        drop(out);
        log::debug!(">> {line}");
    }

    pub fn error(&self, message: &str) {
        self.send(&format!("info string error: {message}"));
    }
}

/// The tree's workers, with the configurations they were started with (replaced when those change).
pub type TreePool = (Vec<EngineConfig>, PoolEvaluator);

/// What a search thread needs.
pub struct Shared {
    pub out: Out,
    pub store: Option<Arc<Store>>,
    /// One engine with all `Threads` for direct searches.
    pub direct: Arc<Mutex<DirectSlot>>,
    /// Single-threaded workers for tree growth (as many as `Threads`), started when first needed.
    pub pool: Arc<Mutex<Option<TreePool>>>,
    pub options: Options,
    pub config_direct: EngineConfig,
    /// The tree's workers, one configuration each.
    pub config_tree: Vec<EngineConfig>,
    pub overhead: Overhead,
    pub depth_model: Arc<Mutex<DepthModel>>,
    pub relay: Arc<RelayClock>,
    /// Moves go to the GUI as king takes rook (`UCI_Chess960`, or a Chess960 position).
    pub chess960: bool,
    /// Set when this search has sent its `bestmove`: from then on the GUI may send anything.
    pub answered: Arc<AtomicBool>,
}

impl Shared {
    pub fn bestmove(&self, line: &str) {
        self.answered.store(true, Ordering::SeqCst);
        self.out.send(line);
    }
}

/// How the session steers a running search.
pub struct Control {
    pub stop: Arc<AtomicBool>,
    pub ponderhit: Arc<AtomicBool>,
    /// Stops a direct inner-engine search at once.
    pub direct_stop: Arc<Mutex<Option<StopHandle>>>,
    /// When the GUI's `go` was read.
    pub received: Instant,
}

struct Running {
    thread: JoinHandle<()>,
    /// `go infinite` or `go ponder`: it answers only after `stop` or `ponderhit`, whatever else arrives.
    until_released: bool,
    /// The search has sent its `bestmove` (its thread may still be storing what it found).
    answered: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    ponderhit: Arc<AtomicBool>,
    direct_stop: Arc<Mutex<Option<StopHandle>>>,
}

impl Running {
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.direct_stop.lock().as_ref() {
            handle.stop();
        }
    }
}

struct Session {
    out: Out,
    options: Options,
    /// Options the inner engine declared (offered under their own names).
    inner_declared: Vec<EngineOption>,
    store: Option<Arc<Store>>,
    store_error: Option<String>,
    direct: Arc<Mutex<DirectSlot>>,
    /// The direct engine could not be started with the current options (shown once).
    direct_error: Option<String>,
    pool: Arc<Mutex<Option<TreePool>>>,
    depth_model: Arc<Mutex<DepthModel>>,
    relay: Arc<RelayClock>,
    /// The relay's latency given to the direct engine: measured again at every `ucinewgame`.
    relay_ms: u64,
    /// The current position; `None` after a `position` that could not be used.
    line: Option<Line>,
    search: Option<Running>,
    /// Searches that have answered and are storing what they found: joined later, never waited for by a `go`.
    finishing: Vec<JoinHandle<()>>,
    background: Option<Running>,
    last_go_timed: bool,
    idle_since: Option<Instant>,
    /// A `ucinewgame` came during a search: the engines get it once the search has answered.
    new_game_pending: bool,
}

/// Runs the UCI session on stdin/stdout until `quit` or end of input.
pub fn run(config: &Config, tree_dir: PathBuf) {
    let (tx, rx) = unbounded::<Option<(Instant, String)>>();
    let _ = std::thread::Builder::new().name("uci-input".into()).spawn(move || {
        let stdin = std::io::stdin();
        let mut lines = stdin.lock().lines();
        loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if tx.send(Some((Instant::now(), line))).is_err() {
                        return;
                    }
                }
                // End of input (or unreadable input): as `quit`.
                Some(Err(_)) | None => {
                    let _ = tx.send(None);
                    return;
                }
            }
        }
    });
    let relay = Arc::new(RelayClock::default());
    let mut session = Session {
        out: Out(Arc::new(Mutex::new(std::io::stdout()))),
        options: Options::new(Config { tree_path: tree_dir.display().to_string(), ..config.clone() }),
        inner_declared: Vec::new(),
        store: None,
        store_error: None,
        direct: Arc::default(),
        direct_error: None,
        pool: Arc::default(),
        depth_model: Arc::default(),
        relay_ms: relay.margin_ms(),
        relay,
        line: Some(Line::start_position()),
        search: None,
        finishing: Vec::new(),
        background: None,
        last_go_timed: false,
        idle_since: None,
        new_game_pending: false,
    };
    session.run(&rx);
}

impl Session {
    fn run(&mut self, rx: &Receiver<Option<(Instant, String)>>) {
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(Some((received, line))) => {
                    if !self.handle(&line, received) {
                        break;
                    }
                    // Logged after the command is handled: a `go` is forwarded first.
                    log::debug!("<< {line}");
                }
                Ok(None) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => self.tick(),
            }
        }
        self.shutdown();
    }

    /// Housekeeping between commands: notice a finished search; start background growth when idle.
    fn tick(&mut self) {
        if self.search.as_ref().is_some_and(|s| s.thread.is_finished()) {
            if let Some(search) = self.search.take() {
                let _ = search.thread.join();
            }
            self.idle_since = Some(Instant::now());
        }
        self.reap(false);
        if self.new_game_pending && !self.searching() {
            self.begin_new_game();
        }
        let idle_long_enough = self.idle_since.is_some_and(|t| t.elapsed() >= Duration::from_secs(1));
        if idle_long_enough
            && self.search.is_none()
            && self.background.is_none()
            && self.options.config.background_analysis
            && !self.last_go_timed
            && self.line.is_some()
            && self.ensure_store()
        {
            self.start_background();
        }
    }

    /// Joins the searches that finished storing (all of them with `wait`).
    fn reap(&mut self, wait: bool) {
        let (done, running): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.finishing).into_iter().partition(|t| wait || t.is_finished());
        self.finishing = running;
        for thread in done {
            let _ = thread.join();
        }
    }

    /// Handles one line, read at `received`; false on `quit`.
    fn handle(&mut self, line: &str, received: Instant) -> bool {
        let command = parse(line);
        if !matches!(command, GuiCommand::IsReady | GuiCommand::Empty | GuiCommand::Debug(_) | GuiCommand::Unknown(_)) {
            self.stop_background();
            self.idle_since = None;
        }
        match command {
            GuiCommand::Uci => self.uci(),
            GuiCommand::Debug(_) | GuiCommand::Register | GuiCommand::Empty => {}
            GuiCommand::IsReady => {
                self.get_ready();
                self.out.send("readyok");
            }
            GuiCommand::SetOption { name, value } => self.set_option(&name, value.as_deref().unwrap_or("")),
            GuiCommand::UciNewGame => self.new_game(),
            GuiCommand::Position { fen, moves } => {
                // `go infinite` and `go ponder` go on with their own position: this one is for the next `go`. A
                // search with a limit is ended (it answers at once).
                if !self.released_only() {
                    self.finish_search();
                }
                match Line::parse_in(fen.as_deref(), &moves.join(" "), self.options.chess960) {
                    Ok(line) => self.line = Some(line),
                    Err(e) => {
                        self.line = None;
                        self.out.error(&format!("position: {e}; the position is unset until the next valid one"));
                    }
                }
            }
            GuiCommand::Go(go) => self.go(go, received),
            GuiCommand::Stop => {
                if let Some(search) = &self.search {
                    search.stop();
                }
            }
            GuiCommand::PonderHit => {
                if let Some(search) = &self.search {
                    search.ponderhit.store(true, Ordering::SeqCst);
                }
            }
            GuiCommand::Quit => return false,
            GuiCommand::Unknown(text) => self.out.error(&format!("unknown command '{text}'")),
            GuiCommand::Malformed { command, reason } => self.out.error(&format!("{command}: {reason}")),
        }
        true
    }

    fn uci(&mut self) {
        self.out.send(&format!("id name deeptree {}", env!("CARGO_PKG_VERSION")));
        self.out.send("id author the deeptree developers");
        let mut problem = None;
        if self.inner_declared.is_empty() && !self.searching() {
            // The direct engine is started now, and kept: it tells its options, and it is ready for the game.
            let (config, overhead) = (self.direct_config(), self.overhead());
            match self.direct.lock().prepare(&config, overhead) {
                Ok((engine, _)) => self.inner_declared = offered(engine.identity()),
                Err(e) => problem = Some(format!("inner engine '{}' unavailable: {e}", self.options.config.engine)),
            }
        }
        for option in self.options.declarations().iter().chain(&self.inner_declared) {
            self.out.send(&option.to_uci());
        }
        self.out.send("uciok");
        if let Some(problem) = problem {
            self.out.error(&problem);
        }
    }

    /// Before `readyok` when no search runs: the store is open and the direct engine has taken every `setoption`
    /// and `ucinewgame`, so the next `go` goes straight to it.
    fn get_ready(&mut self) {
        if self.searching() {
            return;
        }
        if self.new_game_pending {
            self.begin_new_game();
        }
        self.ensure_store();
        self.prepare_direct(true);
    }

    /// Starts and configures the direct engine (with `sync`, waits until it has taken everything); a failure is
    /// shown once per set of options.
    fn prepare_direct(&mut self, sync: bool) {
        let (config, overhead) = (self.direct_config(), self.overhead());
        let mut slot = self.direct.lock();
        let prepared = slot.prepare(&config, overhead).and_then(|(engine, _)| {
            if sync {
                engine.sync()?;
            }
            Ok(engine.identity().clone())
        });
        drop(slot);
        match prepared {
            Ok(identity) => {
                if self.inner_declared.is_empty() {
                    self.inner_declared = offered(&identity);
                }
                self.direct_error = None;
            }
            Err(e) => {
                if e.is_engine_fault() {
                    self.direct.lock().close();
                }
                let message = format!("inner engine '{}' unavailable: {e}", self.options.config.engine);
                if self.direct_error.as_ref() != Some(&message) {
                    self.out.error(&message);
                    self.direct_error = Some(message);
                }
            }
        }
    }

    fn new_game(&mut self) {
        // `last_go_timed` stays: in a match the next game is timed too, and the opponent's clock is not ours.
        self.line = Some(Line::start_position());
        if self.released_only() {
            // A search runs until `stop` or `ponderhit`: the new game begins for the engines once it has answered.
            self.new_game_pending = true;
            return;
        }
        self.begin_new_game();
    }

    /// The engines' side of `ucinewgame`.
    fn begin_new_game(&mut self) {
        self.new_game_pending = false;
        self.finish_search();
        self.depth_model.lock().new_game();
        self.relay_ms = self.relay.margin_ms();
        self.direct.lock().new_game();
        // Sent to the engine now, without waiting: it clears its state while the GUI sends `isready`.
        if self.direct_error.is_none() {
            self.prepare_direct(false);
        }
    }

    fn shutdown(&mut self) {
        self.stop_background();
        self.finish_search();
        self.reap(true);
        self.direct.lock().close();
        *self.pool.lock() = None;
        self.store = None;
    }
}

/// The inner engine's options that deeptree offers under their own names (all but those it declares itself).
fn offered(identity: &EngineIdentity) -> Vec<EngineOption> {
    identity.options.iter().filter(|o| options::row(&o.name).is_none()).cloned().collect()
}
