//! The protocol loop and the options: one thread reads the GUI's commands and never blocks on a search.
//!
//! `go` starts a search thread (`policy`); `stop` and `ponderhit` reach it through flags. `isready` is answered at
//! once while a search runs; otherwise, as a bare engine would, once the direct engine (`direct`) has taken every
//! `setoption` and `ucinewgame` sent so far, so that the first `go` finds it started and ready.

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
    store::Store,
};

use super::{
    command::{Go, GuiCommand, parse},
    depth::DepthModel,
    direct::{DirectSlot, Overhead, RelayClock},
    growth::grow_tree,
    options::{OWN, Options, check_value},
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
    base: Config,
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
        base: config.clone(),
        options: Options::from_config(config, tree_dir.display().to_string()),
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
            && self.options.background_analysis
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
                Err(e) => problem = Some(format!("inner engine '{}' unavailable: {e}", self.options.inner_engine)),
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
                let message = format!("inner engine '{}' unavailable: {e}", self.options.inner_engine);
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

    fn set_option(&mut self, name: &str, value: &str) {
        self.await_stopped();
        if self.searching() {
            self.out.error(&format!("setoption {name} ignored while searching"));
            return;
        }
        self.finish_search();
        self.direct_error = None;
        if OWN.iter().any(|own| own.eq_ignore_ascii_case(name)) {
            let before = self.options.clone();
            if let Err(e) = self.options.set_own(name, value) {
                self.out.error(&e);
                return;
            }
            if before.tree_path != self.options.tree_path {
                self.store = None;
                self.store_error = None;
            }
            if before.inner_engine != self.options.inner_engine {
                self.inner_declared.clear();
                self.direct.lock().close();
            }
            if before.chess960 != self.options.chess960 {
                // Castling notation changes: fresh engines rather than an option turned in a running one.
                self.direct.lock().close();
                *self.pool.lock() = None;
            }
            if (before.inner_engine, before.threads, before.hash_mib)
                != (self.options.inner_engine.clone(), self.options.threads, self.options.hash_mib)
            {
                // The direct engine takes new values with `setoption` before its next search; the workers restart.
                *self.pool.lock() = None;
            }
            return;
        }
        let Some(declared) = self.inner_declared.iter().find(|o| o.name.eq_ignore_ascii_case(name)).cloned() else {
            self.out.error(&format!("unknown option '{name}'"));
            return;
        };
        match check_value(&declared, value) {
            Ok(value) => {
                self.options.inner.retain(|(n, _)| n != &declared.name);
                self.options.inner.push((declared.name.clone(), value));
                *self.pool.lock() = None;
            }
            Err(e) => self.out.error(&e),
        }
    }

    fn engine_config(&self, threads: u32, hash_mib: u32) -> EngineConfig {
        let mut config = EngineConfig::from_config(&self.base);
        config.command = self.options.inner_engine.clone();
        config.options = vec![("Threads".into(), threads.to_string()), ("Hash".into(), hash_mib.max(1).to_string())];
        config.options.extend(self.options.inner.iter().filter(|(n, _)| !Overhead::is_option(n)).cloned());
        if self.chess960() {
            // Forwarded: the engines read and write castling as king takes rook from now on.
            config.options.push(("UCI_Chess960".into(), "true".into()));
        }
        config
    }

    /// Chess960 is on: set by the GUI, or implied by the position it sent.
    fn chess960(&self) -> bool {
        self.options.chess960 || self.line.as_ref().is_some_and(|l| l.chess960)
    }

    /// The direct engine: all `Threads` and all of `Hash`.
    fn direct_config(&self) -> EngineConfig {
        self.engine_config(self.options.threads, self.options.hash_mib)
    }

    /// The tree's workers: the `Engines` option's, else `InnerEngine` as many as `Threads`, one thread each, `Hash`
    /// shared out.
    fn tree_configs(&self) -> Vec<EngineConfig> {
        let base = self.engine_config(1, (self.options.hash_mib / self.options.threads.max(1)).max(16));
        match EngineSpec::parse_list(&self.options.engines) {
            Ok(specs) if !specs.is_empty() => EngineSpec::configs(&specs, &base),
            // A bad list was refused when it was set; the settings' own is checked at start.
            _ => vec![base; self.options.threads.max(1) as usize],
        }
    }

    fn overhead(&self) -> Overhead {
        let gui_ms = self.options.inner.iter().find(|(n, _)| Overhead::is_option(n)).and_then(|(_, v)| v.parse().ok());
        Overhead { gui_ms, relay_ms: self.relay_ms }
    }

    /// Opens the tree store if needed; false (with an error shown once) when it cannot be opened.
    fn ensure_store(&mut self) -> bool {
        if self.store.is_some() {
            return true;
        }
        if self.store_error.is_some() {
            return false;
        }
        let dir = PathBuf::from(&self.options.tree_path);
        match Store::open(&dir, &self.base.store_options()) {
            Ok(store) => {
                self.store = Some(Arc::new(store));
                true
            }
            Err(e) => {
                let message = format!("tree store unavailable, searching without it: {e}");
                self.out.error(&message);
                self.store_error = Some(message);
                false
            }
        }
    }

    fn shared(&self, answered: Arc<AtomicBool>) -> Shared {
        Shared {
            out: self.out.clone(),
            store: self.store.clone(),
            direct: self.direct.clone(),
            pool: self.pool.clone(),
            options: self.options.clone(),
            config_direct: self.direct_config(),
            config_tree: self.tree_configs(),
            overhead: self.overhead(),
            depth_model: self.depth_model.clone(),
            relay: self.relay.clone(),
            chess960: self.chess960(),
            answered,
        }
    }

    /// A search told to `stop` has its `bestmove` due at once: commands that need it over (`setoption`, `go`) wait for
    /// it, as GUIs that send `stop` and the next command back to back expect.
    fn await_stopped(&mut self) {
        if self.search.as_ref().is_some_and(|s| s.stop.load(Ordering::SeqCst)) {
            self.finish_search();
        }
    }

    /// A `go infinite` or `go ponder` is under way: only `stop` or `ponderhit` ends it.
    fn released_only(&self) -> bool {
        self.searching() && self.search.as_ref().is_some_and(|s| s.until_released)
    }

    /// A search is under way and has not answered yet.
    fn searching(&self) -> bool {
        self.search.as_ref().is_some_and(|s| !s.thread.is_finished() && !s.answered.load(Ordering::SeqCst))
    }

    fn go(&mut self, go: Go, received: Instant) {
        self.await_stopped();
        if self.searching() {
            self.out.error("go while a search is running: ignored (send stop first)");
            return;
        }
        if self.new_game_pending {
            self.begin_new_game();
        }
        self.finish_search();
        let Some(line) = self.line.clone() else {
            // Nothing is searched: the error is the `info` line, with no score.
            self.out.error("go without a valid position");
            if go.infinite || go.ponder {
                self.spawn_waiting_bestmove(go);
            } else {
                self.out.send("bestmove 0000");
            }
            return;
        };
        self.last_go_timed = go.is_timed();
        self.ensure_store();
        let answered = Arc::new(AtomicBool::new(false));
        let shared = self.shared(answered.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let ponderhit = Arc::new(AtomicBool::new(false));
        let direct_stop = Arc::new(Mutex::new(None));
        let control =
            Control { stop: stop.clone(), ponderhit: ponderhit.clone(), direct_stop: direct_stop.clone(), received };
        let until_released = go.infinite || go.ponder;
        let thread =
            std::thread::Builder::new().name("uci-search".into()).spawn(move || search(shared, line, go, control));
        match thread {
            Ok(thread) => {
                self.search = Some(Running { thread, until_released, answered, stop, ponderhit, direct_stop })
            }
            Err(e) => {
                self.out.error(&format!("cannot start a search: {e}"));
                self.out.send("bestmove 0000");
            }
        }
    }

    /// A `go infinite`/`go ponder` that cannot search: `bestmove 0000` once `stop` or `ponderhit` comes.
    fn spawn_waiting_bestmove(&mut self, go: Go) {
        let control = Control {
            stop: Arc::default(),
            ponderhit: Arc::default(),
            direct_stop: Arc::default(),
            received: Instant::now(),
        };
        let (stop, ponderhit, direct_stop) =
            (control.stop.clone(), control.ponderhit.clone(), control.direct_stop.clone());
        let out = self.out.clone();
        let answered = Arc::new(AtomicBool::new(false));
        let thread_answered = answered.clone();
        let thread = std::thread::Builder::new().name("uci-search".into()).spawn(move || {
            wait_for_release(&go, &control);
            thread_answered.store(true, Ordering::SeqCst);
            out.send("bestmove 0000");
        });
        match thread {
            Ok(thread) => {
                self.search = Some(Running { thread, until_released: true, answered, stop, ponderhit, direct_stop })
            }
            Err(_) => self.out.send("bestmove 0000"),
        }
    }

    /// Ends the search: a running one is stopped and waited for; one that has answered is left to store what it
    /// found (joined later), so that the next command is never held up by a write.
    fn finish_search(&mut self) {
        if let Some(search) = self.search.take() {
            if search.answered.load(Ordering::SeqCst) {
                self.finishing.push(search.thread);
                return;
            }
            search.stop();
            let _ = search.thread.join();
        }
    }

    fn start_background(&mut self) {
        let Some(line) = self.line.clone() else { return };
        let shared = self.shared(Arc::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new().name("uci-background".into()).spawn(move || {
            log::info!("background analysis of the last position");
            grow_tree(&shared, &line, &thread_stop, None, false);
        });
        if let Ok(thread) = thread {
            self.background = Some(Running {
                thread,
                until_released: false,
                answered: Arc::default(),
                stop,
                ponderhit: Arc::default(),
                direct_stop: Arc::default(),
            });
        }
    }

    fn stop_background(&mut self) {
        if let Some(background) = self.background.take() {
            background.stop.store(true, Ordering::SeqCst);
            let _ = background.thread.join();
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
    identity.options.iter().filter(|o| !OWN.iter().any(|own| own.eq_ignore_ascii_case(&o.name))).cloned().collect()
}
