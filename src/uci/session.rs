//! The session: command loop, searches on their own thread, background growth when idle.

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
use shakmaty::{Chess, Position, uci::UciMove};

use crate::{
    config::Config,
    engine::{
        Engine, EngineConfig, EngineError, EnginePool, EnginePosition, EvalRequest, Limit,
        protocol::{EngineOption, Info},
    },
    score::{Bound, Score},
    search::{
        analysis::{Analysis, Line, Params},
        evaluator::PoolEvaluator,
    },
    store::{
        Change, Store,
        key::PositionKey,
        node::{Edge, Eval, Node, PackedPosition, RestBound},
    },
};

use super::{
    command::{Go, GuiCommand, parse},
    options::{OWN, Options, check_value},
    time::{OVERHEAD_MS, budget},
    tree,
};

/// Below this thinking time a move is searched by the inner engine directly; from it on, by the tree's search.
const TREE_SEARCH_MIN: Duration = Duration::from_secs(20);

/// The protocol's side of stdout: one line at a time, flushed.
#[derive(Clone)]
struct Out(Arc<Mutex<std::io::Stdout>>);

impl Out {
    fn send(&self, line: &str) {
        let out = self.0.lock();
        let mut lock = out.lock();
        let _ = writeln!(lock, "{line}");
        let _ = lock.flush();
        log::debug!(">> {line}");
    }

    fn error(&self, message: &str) {
        self.send(&format!("info string error: {message}"));
    }
}

/// The inner engines, started when first needed with the options of that time.
#[derive(Default)]
struct Engines {
    /// Single-threaded workers for tree growth (as many as `Threads`).
    tree: Option<PoolEvaluator>,
    /// One engine with all `Threads` for direct searches.
    direct: Option<Engine>,
}

/// What a search thread needs.
struct Shared {
    out: Out,
    store: Option<Arc<Store>>,
    engines: Arc<Mutex<Engines>>,
    options: Options,
    /// Set when this search has sent its `bestmove`: from then on the GUI may send anything.
    answered: Arc<AtomicBool>,
}

impl Shared {
    fn bestmove(&self, line: &str) {
        self.answered.store(true, Ordering::SeqCst);
        self.out.send(line);
    }
}

struct Running {
    thread: JoinHandle<()>,
    /// The search has sent its `bestmove` (its thread may still be storing what it found).
    answered: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    ponderhit: Arc<AtomicBool>,
    /// Stops a direct inner-engine search at once.
    direct_stop: Arc<Mutex<Option<crate::engine::StopHandle>>>,
}

struct Session {
    out: Out,
    base: Config,
    options: Options,
    /// Options the inner engine declared (offered under their own names).
    inner_declared: Vec<EngineOption>,
    store: Option<Arc<Store>>,
    store_error: Option<String>,
    engines: Arc<Mutex<Engines>>,
    /// The current position; `None` after a `position` that could not be used.
    line: Option<Line>,
    search: Option<Running>,
    background: Option<Running>,
    last_go_timed: bool,
    idle_since: Option<Instant>,
}

/// Runs the UCI session on stdin/stdout until `quit` or end of input.
pub fn run(config: &Config, tree_dir: PathBuf) {
    let (tx, rx) = unbounded::<Option<String>>();
    let _ = std::thread::Builder::new().name("uci-input".into()).spawn(move || {
        let stdin = std::io::stdin();
        let mut lines = stdin.lock().lines();
        loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if tx.send(Some(line)).is_err() {
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
    let mut session = Session {
        out: Out(Arc::new(Mutex::new(std::io::stdout()))),
        base: config.clone(),
        options: Options::from_config(config, tree_dir.display().to_string()),
        inner_declared: Vec::new(),
        store: None,
        store_error: None,
        engines: Arc::default(),
        line: Some(Line::start_position()),
        search: None,
        background: None,
        last_go_timed: false,
        idle_since: None,
    };
    session.run(&rx);
}

impl Session {
    fn run(&mut self, rx: &Receiver<Option<String>>) {
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(Some(line)) => {
                    log::debug!("<< {line}");
                    if !self.handle(&line) {
                        break;
                    }
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

    /// Handles one line; false on `quit`.
    fn handle(&mut self, line: &str) -> bool {
        let command = parse(line);
        if !matches!(command, GuiCommand::IsReady | GuiCommand::Empty | GuiCommand::Debug(_) | GuiCommand::Unknown(_)) {
            self.stop_background();
            self.idle_since = None;
        }
        match command {
            GuiCommand::Uci => self.uci(),
            GuiCommand::Debug(_) | GuiCommand::Register | GuiCommand::Empty => {}
            GuiCommand::IsReady => self.out.send("readyok"),
            GuiCommand::SetOption { name, value } => self.set_option(&name, value.as_deref().unwrap_or("")),
            GuiCommand::UciNewGame => {
                self.finish_search();
                // `last_go_timed` stays: in a match the next game is timed too, and the opponent's clock is not ours.
                self.line = Some(Line::start_position());
            }
            GuiCommand::Position { fen, moves } => {
                self.finish_search();
                match Line::parse(fen.as_deref(), &moves.join(" ")) {
                    Ok(line) => self.line = Some(line),
                    Err(e) => {
                        self.line = None;
                        self.out.error(&format!("position: {e}; the position is unset until the next valid one"));
                    }
                }
            }
            GuiCommand::Go(go) => self.go(go),
            GuiCommand::Stop => {
                if let Some(search) = &self.search {
                    search.stop.store(true, Ordering::SeqCst);
                    if let Some(handle) = search.direct_stop.lock().as_ref() {
                        handle.stop();
                    }
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
        if self.inner_declared.is_empty() {
            match Engine::spawn(&self.engine_config(1, self.options.hash_mib)) {
                Ok(engine) => {
                    self.inner_declared = engine
                        .identity()
                        .options
                        .iter()
                        .filter(|o| !OWN.iter().any(|own| own.eq_ignore_ascii_case(&o.name)))
                        .cloned()
                        .collect();
                }
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

    fn set_option(&mut self, name: &str, value: &str) {
        if self.searching() {
            self.out.error(&format!("setoption {name} ignored while searching"));
            return;
        }
        self.finish_search();
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
            }
            if (before.inner_engine, before.threads, before.hash_mib)
                != (self.options.inner_engine.clone(), self.options.threads, self.options.hash_mib)
            {
                *self.engines.lock() = Engines::default();
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
                *self.engines.lock() = Engines::default();
            }
            Err(e) => self.out.error(&e),
        }
    }

    fn engine_config(&self, threads: u32, hash_mib: u32) -> EngineConfig {
        let mut config = EngineConfig::from_config(&self.base);
        config.command = self.options.inner_engine.clone();
        config.options = vec![("Threads".into(), threads.to_string()), ("Hash".into(), hash_mib.max(1).to_string())];
        config.options.extend(self.options.inner.iter().cloned());
        config
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
            engines: self.engines.clone(),
            options: self.options.clone(),
            answered,
        }
    }

    /// A search is under way and has not answered yet.
    fn searching(&self) -> bool {
        self.search.as_ref().is_some_and(|s| !s.thread.is_finished() && !s.answered.load(Ordering::SeqCst))
    }

    fn go(&mut self, go: Go) {
        if self.searching() {
            self.out.error("go while a search is running: ignored (send stop first)");
            return;
        }
        self.finish_search();
        let Some(line) = self.line.clone() else {
            self.out.error("go without a valid position");
            self.out.send("info depth 0 score cp 0");
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
        let config_direct = self.engine_config(self.options.threads, self.options.hash_mib);
        let config_tree = self.engine_config(1, (self.options.hash_mib / self.options.threads.max(1)).max(16));
        let stop = Arc::new(AtomicBool::new(false));
        let ponderhit = Arc::new(AtomicBool::new(false));
        let direct_stop = Arc::new(Mutex::new(None));
        let control = Control { stop: stop.clone(), ponderhit: ponderhit.clone(), direct_stop: direct_stop.clone() };
        let thread = std::thread::Builder::new()
            .name("uci-search".into())
            .spawn(move || search(shared, line, go, control, config_direct, config_tree));
        match thread {
            Ok(thread) => self.search = Some(Running { thread, answered, stop, ponderhit, direct_stop }),
            Err(e) => {
                self.out.error(&format!("cannot start a search: {e}"));
                self.out.send("bestmove 0000");
            }
        }
    }

    /// A `go infinite`/`go ponder` that cannot search: `bestmove 0000` once `stop` or `ponderhit` comes.
    fn spawn_waiting_bestmove(&mut self, go: Go) {
        let control = Control { stop: Arc::default(), ponderhit: Arc::default(), direct_stop: Arc::default() };
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
            Ok(thread) => self.search = Some(Running { thread, answered, stop, ponderhit, direct_stop }),
            Err(_) => self.out.send("bestmove 0000"),
        }
    }

    /// Waits for a finished search thread (a running one is stopped first).
    fn finish_search(&mut self) {
        if let Some(search) = self.search.take() {
            search.stop.store(true, Ordering::SeqCst);
            if let Some(handle) = search.direct_stop.lock().as_ref() {
                handle.stop();
            }
            let _ = search.thread.join();
        }
    }

    fn start_background(&mut self) {
        let Some(line) = self.line.clone() else { return };
        let shared = self.shared(Arc::default());
        let config_tree = self.engine_config(1, (self.options.hash_mib / self.options.threads.max(1)).max(16));
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new().name("uci-background".into()).spawn(move || {
            log::info!("background analysis of the last position");
            grow_tree(&shared, &line, &thread_stop, &config_tree, None, false);
        });
        if let Ok(thread) = thread {
            self.background = Some(Running {
                thread,
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
        *self.engines.lock() = Engines::default();
        self.store = None;
    }
}

struct Control {
    stop: Arc<AtomicBool>,
    ponderhit: Arc<AtomicBool>,
    direct_stop: Arc<Mutex<Option<crate::engine::StopHandle>>>,
}

/// The search thread: always ends with exactly one `bestmove`, preceded by an `info` line.
fn search(
    shared: Shared,
    line: Line,
    go: Go,
    control: Control,
    config_direct: EngineConfig,
    config_tree: EngineConfig,
) {
    let started = Instant::now();
    store_game_line(&shared, &line);
    let root = line.root().clone();
    if root.legal_moves().is_empty() {
        let score = if root.is_check() { "mate 0" } else { "cp 0" };
        shared.out.send(&format!("info depth 0 score {score}"));
        wait_for_release(&go, &control);
        shared.bestmove("bestmove 0000");
        return;
    }
    let searchmoves: Vec<UciMove> =
        go.searchmoves.iter().filter_map(|m| m.parse::<UciMove>().ok()).filter(|m| m.to_move(&root).is_ok()).collect();
    if go.searchmoves.len() != searchmoves.len() {
        shared.out.error("go searchmoves: some moves are not legal here and were left out");
    }

    if go.infinite || go.ponder {
        // Grow the tree around the position, reporting as it grows, until stop (or ponderhit).
        let until = if go.ponder { Some(control.ponderhit.clone()) } else { None };
        grow_tree(&shared, &line, &control.stop, &config_tree, until.map(|p| (p, started)), true);
        if go.ponder && control.ponderhit.load(Ordering::SeqCst) && !control.stop.load(Ordering::SeqCst) {
            // The opponent played the expected move: the clock runs now.
            let mut timed = go.clone();
            timed.ponder = false;
            play(&shared, &line, &timed, &searchmoves, &control, &config_direct, &config_tree, Instant::now());
            return;
        }
        // After stop: answer with the tree's best move (or, if it has none, a quick direct search).
        if let Some(answer) = tree_answer(&shared, &line, &searchmoves, false) {
            send_answer(&shared, &answer, started);
        } else {
            // The GUI's stop is spent: the quick search gets a flag of its own (it keeps the GUI's stop handle).
            let quick = Go { depth: Some(1), ..Go::default() };
            let quick_control = Control {
                stop: Arc::default(),
                ponderhit: control.ponderhit.clone(),
                direct_stop: control.direct_stop.clone(),
            };
            direct(&shared, &line, &quick, &searchmoves, &quick_control, &config_direct, started);
        }
        return;
    }
    play(&shared, &line, &go, &searchmoves, &control, &config_direct, &config_tree, started);
}

/// In `go infinite` and `go ponder`, `bestmove` waits for `stop` or `ponderhit`.
fn wait_for_release(go: &Go, control: &Control) {
    if go.infinite || go.ponder {
        while !control.stop.load(Ordering::SeqCst) && !control.ponderhit.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A move to play: from the tree when it knows the position, else by the tree's search when there is time, else
/// by the inner engine directly.
#[allow(clippy::too_many_arguments)]
fn play(
    shared: &Shared,
    line: &Line,
    go: &Go,
    searchmoves: &[UciMove],
    control: &Control,
    config_direct: &EngineConfig,
    config_tree: &EngineConfig,
    started: Instant,
) {
    if !shared.options.analyse_mode
        && let Some(answer) = tree_answer(shared, line, searchmoves, true)
    {
        send_answer(shared, &answer, started);
        return;
    }
    let think = budget(go, line.root().turn().is_white());
    let unlimited_engine = go.depth.is_none() && go.nodes.is_none() && go.mate.is_none();
    if unlimited_engine && shared.store.is_some() && think.is_some_and(|t| t >= TREE_SEARCH_MIN) {
        let limit = think.map(|t| t.mul_f64(0.85));
        let stop = control.stop.clone();
        let deadline = limit.map(|l| started + l);
        let watch = Arc::new(AtomicBool::new(false));
        let watcher_stop = watch.clone();
        // Stop the growth at the deadline or at `stop`.
        let thread_stop = stop.clone();
        let timer = std::thread::spawn(move || {
            while !thread_stop.load(Ordering::SeqCst) && deadline.is_none_or(|d| Instant::now() < d) {
                std::thread::sleep(Duration::from_millis(20));
            }
            watcher_stop.store(true, Ordering::SeqCst);
        });
        // Growth ends only once the timer has set `watch` (deadline or stop), so the timer is done.
        grow_tree(shared, line, &watch, config_tree, None, true);
        let _ = timer.join();
        if let Some(answer) = tree_answer(shared, line, searchmoves, false) {
            send_answer(shared, &answer, started);
            return;
        }
    }
    direct(shared, line, go, searchmoves, control, config_direct, started);
}

/// A search by one inner engine with all the threads; what it finds is stored.
fn direct(
    shared: &Shared,
    line: &Line,
    go: &Go,
    searchmoves: &[UciMove],
    control: &Control,
    config: &EngineConfig,
    started: Instant,
) {
    let root = line.root();
    let limit = if let Some(depth) = go.depth {
        Limit::Depth(depth.clamp(1, 250) as u32)
    } else if let Some(nodes) = go.nodes {
        Limit::Nodes(nodes.max(1))
    } else if go.movetime.is_none() && go.is_timed() {
        // A game clock: the inner engine manages its time itself, less the relay's overhead.
        let own = |t: Option<u64>| t.unwrap_or(0).saturating_sub(OVERHEAD_MS).max(1);
        Limit::Clock {
            wtime: own(go.wtime.or(go.btime)),
            btime: own(go.btime.or(go.wtime)),
            winc: go.winc.unwrap_or(0),
            binc: go.binc.unwrap_or(0),
            movestogo: go.movestogo,
        }
    } else if let Some(think) = budget(go, root.turn().is_white()) {
        Limit::MoveTime(think)
    } else if let Some(mate) = go.mate {
        Limit::Depth((mate * 2).clamp(1, 250) as u32)
    } else {
        Limit::Depth(u32::from(shared.options.engine_depth))
    };
    let request = match engine_request(line, limit, searchmoves, shared.options.multipv) {
        Ok(request) => request,
        Err(e) => {
            shared.out.error(&format!("cannot search: {e}"));
            fallback_move(shared, line);
            return;
        }
    };
    let mut engines = shared.engines.lock();
    if engines.direct.is_none() {
        match Engine::spawn(config) {
            Ok(engine) => engines.direct = Some(engine),
            Err(e) => {
                drop(engines);
                shared.out.error(&format!("inner engine '{}' unavailable: {e}", config.command));
                fallback_move(shared, line);
                return;
            }
        }
    }
    let Some(engine) = engines.direct.as_mut() else { return };
    *control.direct_stop.lock() = Some(engine.stop_handle());
    if control.stop.load(Ordering::SeqCst) {
        engine.stop_handle().stop();
    }
    let out = shared.out.clone();
    let mut relay = |info: &Info| {
        if let Some(text) = info_line(info) {
            out.send(&text);
        }
    };
    let result = engine.search(&request, &mut relay);
    *control.direct_stop.lock() = None;
    match result {
        Ok(evaluation) => {
            let depth = evaluation.depth();
            let score = evaluation.score();
            shared.out.send(&format!(
                "info depth {} score {} nodes {} time {} pv {}",
                depth.max(1),
                uci_score(score, evaluation.bound()),
                evaluation.nodes,
                started.elapsed().as_millis(),
                std::iter::once(evaluation.best_move)
                    .chain(evaluation.line.pv.iter().skip(1).copied())
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
            let ponder = evaluation.ponder.filter(|_| shared.options.ponder);
            shared.bestmove(&bestmove(evaluation.best_move, ponder));
            drop(engines);
            if searchmoves.is_empty() && !evaluation.stopped && evaluation.bound() == Bound::Exact {
                store_direct_result(shared, root, evaluation.best_move, score, depth, evaluation.nodes);
            }
        }
        Err(e) => {
            if e.is_engine_fault() {
                engines.direct = None; // respawned at the next search
            }
            drop(engines);
            if !matches!(e, EngineError::Stopped) {
                shared.out.error(&format!("inner engine search failed: {e}"));
            }
            fallback_move(shared, line);
        }
    }
}

/// The inner engine's request for the game's position (start position and moves, so it sees the repetitions).
fn engine_request(
    line: &Line,
    limit: Limit,
    searchmoves: &[UciMove],
    multipv: u32,
) -> Result<EvalRequest, EngineError> {
    let position = EnginePosition::new(line.start.clone(), line.moves.clone())?;
    EvalRequest::new(position, limit).with_searchmoves(searchmoves.to_vec()).map(|r| r.with_multipv(multipv))
}

/// When nothing can be searched: the tree's best move, else the first legal move, so the game goes on.
fn fallback_move(shared: &Shared, line: &Line) {
    if let Some(answer) = tree_answer(shared, line, &[], false) {
        send_answer(shared, &answer, Instant::now());
        return;
    }
    let root = line.root();
    match root.legal_moves().first() {
        Some(m) => {
            shared.out.send("info depth 0 score cp 0");
            shared.bestmove(&format!("bestmove {}", UciMove::from_standard(*m)));
        }
        None => {
            shared.out.send("info depth 0 score cp 0");
            shared.bestmove("bestmove 0000");
        }
    }
}

/// Relays an inner engine's `info` line (without `string`s and currmove noise).
fn info_line(info: &Info) -> Option<String> {
    let (score, bound) = info.score?;
    let mut text = format!("info depth {}", info.depth?);
    if let Some(seldepth) = info.seldepth {
        text.push_str(&format!(" seldepth {seldepth}"));
    }
    if let Some(multipv) = info.multipv {
        text.push_str(&format!(" multipv {multipv}"));
    }
    text.push_str(&format!(" score {}", uci_score(score, bound)));
    for (name, value) in [("nodes", info.nodes), ("nps", info.nps), ("time", info.time_ms)] {
        if let Some(value) = value {
            text.push_str(&format!(" {name} {value}"));
        }
    }
    if !info.pv.is_empty() {
        text.push_str(" pv");
        for m in &info.pv {
            text.push_str(&format!(" {m}"));
        }
    }
    Some(text)
}

fn uci_score(score: Score, bound: Bound) -> String {
    match bound {
        Bound::Exact => score.to_string(),
        Bound::Lower => format!("{score} lowerbound"),
        Bound::Upper => format!("{score} upperbound"),
    }
}

fn bestmove(best: UciMove, ponder: Option<UciMove>) -> String {
    match ponder {
        Some(p) => format!("bestmove {best} ponder {p}"),
        None => format!("bestmove {best}"),
    }
}

struct TreeAnswer {
    best: UciMove,
    score: Score,
    pv: Vec<UciMove>,
    depth: u32,
    nodes: u64,
}

/// The tree's move for the position: its best move by alpha score (repetitions of the game are draws).
/// With `settled_only`, only when the tree has looked below the position (a settled depth, or an evaluated reply).
fn tree_answer(shared: &Shared, line: &Line, searchmoves: &[UciMove], settled_only: bool) -> Option<TreeAnswer> {
    let store = shared.store.as_ref()?;
    let view = store.read().ok()?;
    let tree = tree::view(&view, line.root(), &line.history_keys()).ok()??;
    if settled_only && tree.settled_depth.unwrap_or(0) == 0 && !tree.deepened {
        return None;
    }
    // Evaluations shallower than the engine depth asked for are not the tree's word yet.
    if settled_only && tree.engine_depth < shared.options.engine_depth {
        return None;
    }
    let best = tree.candidates.iter().find(|c| searchmoves.is_empty() || searchmoves.contains(&c.uci))?;
    let software = u32::from(tree.settled_depth.unwrap_or(0)).max((best.pv.len() as u32).saturating_sub(1).min(1));
    Some(TreeAnswer {
        best: best.uci,
        score: best.alpha,
        pv: best.pv.clone(),
        depth: software + u32::from(tree.engine_depth),
        nodes: tree.nodes,
    })
}

fn send_answer(shared: &Shared, answer: &TreeAnswer, started: Instant) {
    let pv: Vec<String> = answer.pv.iter().map(|m| m.to_string()).collect();
    shared.out.send(&format!(
        "info depth {} score {} nodes {} time {} pv {}",
        answer.depth,
        answer.score,
        answer.nodes,
        started.elapsed().as_millis(),
        pv.join(" ")
    ));
    let ponder = answer.pv.get(1).copied().filter(|_| shared.options.ponder);
    shared.bestmove(&bestmove(answer.best, ponder));
}

/// Grows the tree rooted at the line's position with the single-threaded workers until `stop` (or `until`
/// turns true), reporting `info` lines as it grows when `until`/reporting is wanted.
fn grow_tree(
    shared: &Shared,
    line: &Line,
    stop: &Arc<AtomicBool>,
    config_tree: &EngineConfig,
    until: Option<(Arc<AtomicBool>, Instant)>,
    reporting: bool,
) {
    let Some(store) = shared.store.clone() else {
        // Without a store there is no tree to grow: wait for the end of the search.
        while !stop.load(Ordering::SeqCst) && until.as_ref().is_none_or(|(p, _)| !p.load(Ordering::SeqCst)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        return;
    };
    let mut engines = shared.engines.lock();
    if engines.tree.is_none() {
        match EnginePool::uniform(config_tree, shared.options.threads.max(1) as usize) {
            Ok(pool) => engines.tree = Some(PoolEvaluator::new(pool)),
            Err(e) => {
                shared.out.error(&format!("inner engines unavailable: {e}"));
                drop(engines);
                while !stop.load(Ordering::SeqCst) && until.as_ref().is_none_or(|(p, _)| !p.load(Ordering::SeqCst)) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                return;
            }
        }
    }
    let Some(evaluator) = engines.tree.as_mut() else { return };
    let params = Params {
        engine_depth: shared.options.engine_depth,
        move_distance: shared.options.move_distance as i32,
        max_depth: u8::MAX - 1,
        time: None,
    };
    let analysis_stop = Arc::new(AtomicBool::new(false));
    // Reporter: `info` lines from the tree while it grows; it also turns stop/ponderhit into the analysis' stop.
    let reporter = {
        let (stop, analysis_stop, out, store, line) =
            (stop.clone(), analysis_stop.clone(), shared.out.clone(), store.clone(), line.clone());
        let multipv = shared.options.multipv.max(1) as usize;
        // Searches report as the tree grows; background growth (no `until`, no search) stays silent.
        let report = reporting;
        let ponderhit = until.as_ref().map(|(p, _)| p.clone());
        let started = until.as_ref().map_or_else(Instant::now, |(_, t)| *t);
        std::thread::spawn(move || {
            let mut next_report = Instant::now() + Duration::from_millis(300);
            loop {
                let ended = stop.load(Ordering::SeqCst) || ponderhit.as_ref().is_some_and(|p| p.load(Ordering::SeqCst));
                if ended || analysis_stop.load(Ordering::SeqCst) {
                    analysis_stop.store(true, Ordering::SeqCst);
                    return;
                }
                if report && Instant::now() >= next_report {
                    for text in tree_info_lines(&store, &line, multipv, started) {
                        out.send(&text);
                    }
                    next_report = Instant::now() + Duration::from_secs(1);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let mut analysis = Analysis::new(&store, &mut *evaluator, params);
    analysis.stop = analysis_stop.clone();
    // The session stores the game's moves itself; the engine time goes to the position.
    analysis.line_edges = false;
    if let Err(e) = analysis.run(line, |_| {}) {
        shared.out.error(&format!("tree search: {e}"));
    }
    drop(analysis);
    // The analysis may end on its own (everything settled): wait for stop/ponderhit all the same.
    analysis_stop.store(stop.load(Ordering::SeqCst) || analysis_stop.load(Ordering::SeqCst), Ordering::SeqCst);
    while !analysis_stop.load(Ordering::SeqCst) && !reporter.is_finished() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = reporter.join();
}

/// `info` lines for the tree's candidate moves (MultiPV), with their idea scores in an `info string`.
fn tree_info_lines(store: &Store, line: &Line, multipv: usize, started: Instant) -> Vec<String> {
    let Ok(view) = store.read() else { return Vec::new() };
    let Ok(Some(tree)) = tree::view(&view, line.root(), &line.history_keys()) else { return Vec::new() };
    let depth = u32::from(tree.settled_depth.unwrap_or(0)) + u32::from(tree.engine_depth);
    let mut lines = Vec::new();
    let mut ideas = Vec::new();
    for (i, candidate) in tree.candidates.iter().take(multipv).enumerate() {
        let pv: Vec<String> = candidate.pv.iter().map(|m| m.to_string()).collect();
        lines.push(format!(
            "info depth {depth} multipv {} score {} nodes {} time {} pv {}",
            i + 1,
            candidate.alpha,
            tree.nodes,
            started.elapsed().as_millis(),
            pv.join(" ")
        ));
        ideas.push(format!("{} {}", candidate.uci, candidate.idea));
    }
    if !ideas.is_empty() {
        lines.push(format!("info string idea {}", ideas.join(", ")));
    }
    lines
}

/// Stores the game's moves as edges (a placeholder score until analysed), so that the tree knows the game's
/// positions and repetitions of them.
fn store_game_line(shared: &Shared, line: &Line) {
    let Some(store) = &shared.store else { return };
    let Ok(view) = store.read() else { return };
    let mut changes = Vec::new();
    for (pos, uci) in line.positions.iter().zip(&line.moves) {
        let key = PositionKey::of(pos);
        if view.node(key).ok().flatten().is_some_and(|n| n.edge(uci).is_some()) {
            continue;
        }
        let mut node = Node::new(PackedPosition::of(pos));
        let mut edge = Edge::new(*uci, Score::MATED_NOW, Bound::Upper, 0);
        edge.imported = true;
        node.edges.push(edge);
        if let Ok(change) = Change::merge(pos, node) {
            changes.push(change);
        }
    }
    drop(view);
    if !changes.is_empty()
        && let Err(e) = store.writer().submit(changes).wait()
    {
        log::warn!("the game's moves were not stored: {e}");
    }
}

/// Stores a direct search's result as the position's evaluation.
fn store_direct_result(shared: &Shared, root: &Chess, best: UciMove, score: Score, depth: u32, nodes: u64) {
    let Some(store) = &shared.store else { return };
    let depth = depth.min(255) as u8;
    let mut node = Node::new(PackedPosition::of(root));
    node.eval = Some(Eval { score, bound: Bound::Exact, depth, best: Some(best), nodes });
    node.edges.push(Edge::new(best, score, Bound::Exact, depth));
    if root.legal_moves().len() > 1 {
        node.rest = Some(RestBound { score, depth });
    }
    match Change::merge(root, node) {
        Ok(change) => {
            // Not waited for: the next move's search does not depend on it.
            let _ = store.writer().submit(vec![change]);
        }
        Err(e) => log::warn!("direct search result not stored: {e}"),
    }
}
