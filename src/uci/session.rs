//! The protocol loop: one thread reads the GUI's commands and never blocks on a search.
//!
//! The session owns its state: the options, the store, the direct engine and the tree's workers, the depth model and
//! the relay's clock. `go` lends a search thread (`policy`) the engines and a [`Context`] by value, and steers it by
//! [`Signal`]s on a channel (`stop`, `ponderhit`); the thread returns one [`Outcome`] with the engines, and the
//! session writes it in one place (`Session::answer`): its closing `info` lines, then its `bestmove`. So every `go`
//! gets exactly one `bestmove`, a `go infinite` none before `stop` and a `go ponder` none before `stop` or
//! `ponderhit`, and nothing is written after `quit` (but the answer of a search told to `stop` before it).
//!
//! `isready` is answered at once while a search runs; otherwise, as a bare engine would, once the direct engine
//! (`direct`) has taken every `setoption` and `ucinewgame` sent so far, so that the first `go` finds it started and
//! ready.
//!
//! Here: the loop, the commands' dispatch, `uci`, `isready` and `ucinewgame`. What `setoption` configures is in
//! `settings`; `go`, its search thread and background growth are in `searches`.

use crate::game::Line;
use std::{
    path::PathBuf,
    sync::Arc,
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crossbeam_channel::{Receiver, never, select, unbounded};
use shakmaty::uci::UciMove;

use crate::{
    config::{Config, ThinkMode},
    engine::{
        EngineConfig, EngineIdentity, STOP_ANSWER,
        protocol::{EngineOption, ReadLine, read_line},
        spec::EngineSpec,
    },
    interop::played::{GameRecord, Refutation},
    notation::canonical_uci,
    store::{Store, StoreOptions},
};

mod searches;
mod settings;

use super::{
    answer::{Answerer, Outcome, given_up},
    command::{Go, GuiCommand, parse},
    control::{Context, Signal, Steer},
    depth::DepthModel,
    direct::{DirectSlot, RelayClock},
    growth::{Growth, TreePool, grow_tree},
    learn,
    message::{Info, LastLine, Message, Out},
    options::{self, Options, check_value},
    policy::{Lent, think},
    time::Overhead,
};

/// What a search thread hands back when it has answered.
struct Answered {
    outcome: Outcome,
    lent: Lent,
    /// Dropped once the answer is written (or will never be): the thread then stores what it found.
    written: crossbeam_channel::Sender<()>,
}

/// A search the GUI has not had the `bestmove` of yet.
struct Running {
    /// `None` for a `go` that had nothing to search (its answer is held until `stop` or `ponderhit`).
    thread: Option<JoinHandle<()>>,
    /// `go infinite` or `go ponder`: it answers only after `stop` (or, for `go ponder`, `ponderhit`), whatever else
    /// arrives.
    until_released: bool,
    ponder: bool,
    /// A `go ponder` that got its `ponderhit`: its answer is a move of the game (one stopped without it is not).
    hit: bool,
    steer: Steer,
    answers: Receiver<Answered>,
    /// An answer that came before the GUI's `stop` (or `ponderhit` to a `go ponder`): written when it comes.
    held: Option<Outcome>,
    /// Tells the thread its answer is out (by being dropped).
    written: Option<crossbeam_channel::Sender<()>>,
    /// For a timed `go`: when the session stops the search itself, should the engine not have answered by then.
    deadline: Option<Instant>,
    /// Once stopped: when the session answers for the search should it still not have answered (see
    /// `Session::give_up`).
    give_up_at: Option<Instant>,
    /// What the session's own answer needs: the position (none after a `position` that could not be used), the
    /// `searchmoves` and the search's last best line.
    line: Option<Line>,
    searchmoves: Vec<UciMove>,
    last_line: LastLine,
    /// The castling notation of the search's position.
    chess960: bool,
    /// The `go` and the side to move: a `go ponder` gets its deadline at `ponderhit`.
    go: Go,
    white: bool,
    /// The session's count of direct engines ended by new settings, when the search was lent its engine.
    direct_closed: u64,
}

impl Running {
    /// Waits for the search's answer until `until` at most, taking the stop handles it announces meanwhile: `Err`
    /// when it has not answered by then, `Ok(None)` if the thread ended without one (it panicked).
    fn wait_until(&mut self, until: Instant) -> Result<Option<Answered>, ()> {
        loop {
            let handles = self.steer.handles();
            select! {
                recv(self.answers) -> answered => return Ok(answered.ok()),
                recv(handles) -> handle => self.steer.heard(handle),
                default(until.saturating_duration_since(Instant::now())) => return Err(()),
            }
        }
    }

    /// Sends `stop`; the session answers for the search if it has not answered `within` that time.
    fn stop(&mut self, within: Duration) {
        self.steer.send(Signal::Stop);
        let at = Instant::now() + within;
        self.give_up_at = Some(self.give_up_at.map_or(at, |earlier| earlier.min(at)));
    }

    /// The answer may be written: the search has a limit, or `stop` has been sent (or `ponderhit` to a `go ponder`).
    fn released(&self) -> bool {
        !self.until_released || self.steer.stop_sent() || (self.ponder && self.steer.ponderhit_sent())
    }
}

/// Background growth of the last position, with the tree's workers it was lent.
struct Background {
    thread: JoinHandle<Option<TreePool>>,
    steer: Steer,
}

struct Session {
    out: Out,
    options: Options,
    /// Options the inner engine declared (offered under their own names).
    inner_declared: Vec<EngineOption>,
    /// The inner engine declares `UCI_ShowWDL`: the direct engine gives its own win rates, which are relayed.
    inner_wdl: bool,
    /// The inner engine declares `Ponder`: the direct engine is told whether the GUI ponders, as the bare engine
    /// would be (Stockfish gives a move more time when it expects to ponder).
    inner_ponder: bool,
    store: Option<Arc<Store>>,
    store_error: Option<String>,
    /// The direct engine (lent to a search while it runs).
    direct: DirectSlot,
    /// The direct engine could not be started with the current options (shown once).
    direct_error: Option<String>,
    /// The tree's single-threaded workers, started when first needed (lent to a growth while it runs).
    pool: Option<TreePool>,
    depth_model: DepthModel,
    relay: RelayClock,
    /// The relay's latency given to the direct engine: measured again at every `ucinewgame`.
    relay_ms: u64,
    /// The current position; `None` after a `position` that could not be used.
    line: Option<Line>,
    /// A `position` came in this session: the analyst's marks from a GUI (`MarkExclude`, ...) apply to it, never to
    /// the start position a GUI has not sent (GUIs send their saved options at startup).
    position_sent: bool,
    search: Option<Running>,
    /// Searches that have answered and are storing what they found: joined later, never waited for by a `go`.
    finishing: Vec<JoinHandle<()>>,
    background: Option<Background>,
    last_go_timed: bool,
    /// The side's clock at the game's first timed `go` (its time before the first move, for the research budget of
    /// `learn_from_refutations`); `None` for a game without a clock.
    game_clock: Option<Duration>,
    idle_since: Option<Instant>,
    /// A `ucinewgame` came during a search: the engines get it once the search has answered.
    new_game_pending: bool,
    /// Tree searches of a timed `go` (`ThinkMode tree`) that valued nothing in time.
    tree_fallbacks: u64,
    /// Searches the session answered for (they did not answer after `stop`), oldest first: their engines come back
    /// when they end, and what they found is stored then.
    given_up: Vec<Running>,
    /// Direct engines ended by new settings so far (one lent to a search then must not come back).
    direct_closed: u64,
    /// The game being played, written to the store's games.pgn when it ends (`LearnFromGames`).
    game: GameRecord,
    /// Tree moves refuted in games that ended without `ucinewgame` (another game's position came): searched again
    /// at the next `ucinewgame`, when no clock runs.
    refuted: Vec<Refutation>,
}

/// The standard option of win rates, deeptree's own and forwarded to an inner engine that declares it.
const WDL_OPTION: &str = "UCI_ShowWDL";

/// The standard option that says the GUI ponders, deeptree's own and forwarded to an inner engine that declares it.
const PONDER_OPTION: &str = "Ponder";

/// The file in the store's folder where the games played are recorded (`LearnFromGames`).
pub const GAMES_FILE: &str = "games.pgn";

/// A PGN date (`YYYY.MM.DD`, UTC) of `time`.
fn pgn_date(time: std::time::SystemTime) -> String {
    let Ok(since) = time.duration_since(std::time::UNIX_EPOCH) else { return "????.??.??".to_owned() };
    let (year, month, day) = crate::store::marks::civil_date(since.as_secs());
    format!("{year:04}.{month:02}.{day:02}")
}

/// How long the session is idle before it grows the tree of the last position.
const IDLE_BEFORE_GROWTH: Duration = Duration::from_secs(1);

/// How long a search told to `stop` by the GUI may take to answer before the session answers for it.
const STOP_GRACE: Duration = Duration::from_millis(800);

/// How long a search stopped at its deadline may take to answer before the session answers for it.
const DEADLINE_GRACE: Duration = Duration::from_millis(50);

/// How long `quit` waits for a search that does not end: long enough for an engine that ignores `stop` to be
/// killed ([`STOP_ANSWER`] after the stop), so that no engine outlives deeptree.
const QUIT_GRACE: Duration = Duration::from_millis(STOP_ANSWER.as_millis() as u64 + 500);

/// Longest GUI line read (a `position ... moves` of a 10,000-ply game is some 50 KB); a longer one is skipped.
const MAX_GUI_LINE: usize = 1 << 20;

/// Runs the UCI session on stdin/stdout until `quit` or end of input.
pub fn run(config: &Config, tree_dir: PathBuf) {
    let (tx, rx) = unbounded::<Option<(Instant, String)>>();
    let _ = std::thread::Builder::new().name("uci-input".into()).spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = Vec::new();
        loop {
            match read_line(&mut stdin, &mut buf, MAX_GUI_LINE) {
                Ok(ReadLine::Line { text, lossy }) => {
                    if lossy {
                        // A GUI writing in its own code page (a path with 'ä' in CP1252): the line goes on with
                        // U+FFFD in place of each byte that is not UTF-8; the session does not end over it.
                        log::warn!("a GUI line that is not UTF-8, read with U+FFFD for its bad bytes: {text}");
                    }
                    if tx.send(Some((Instant::now(), text))).is_err() {
                        return;
                    }
                }
                Ok(ReadLine::Skipped) => log::warn!("skipped a line from the GUI longer than {MAX_GUI_LINE} bytes"),
                // End of input (or input that cannot be read): as `quit`.
                Ok(ReadLine::End) | Err(_) => {
                    let _ = tx.send(None);
                    return;
                }
            }
        }
    });
    let relay = RelayClock::default();
    let mut session = Session {
        out: Out::default(),
        options: Options::new(Config { tree_path: tree_dir.display().to_string(), ..config.clone() }),
        inner_declared: Vec::new(),
        inner_wdl: false,
        inner_ponder: false,
        store: None,
        store_error: None,
        direct: DirectSlot::default(),
        direct_error: None,
        pool: None,
        depth_model: DepthModel::default(),
        relay_ms: relay.margin_ms(),
        relay,
        line: Some(Line::start_position()),
        position_sent: false,
        search: None,
        finishing: Vec::new(),
        background: None,
        last_go_timed: false,
        game_clock: None,
        idle_since: None,
        new_game_pending: false,
        tree_fallbacks: 0,
        given_up: Vec::new(),
        direct_closed: 0,
        game: GameRecord::default(),
        refuted: Vec::new(),
    };
    session.run(&rx);
}

impl Session {
    fn run(&mut self, input: &Receiver<Option<(Instant, String)>>) {
        loop {
            // A GUI that closed our stdout is gone, even if it keeps our stdin open: as `quit`.
            if self.out.gone() {
                log::info!("stdout is closed: the session ends");
                break;
            }
            // The running search's answer (none once it is held) and the stop handles it announces.
            let (answers, handles) = match &self.search {
                Some(running) => {
                    (if running.held.is_none() { running.answers.clone() } else { never() }, running.steer.handles())
                }
                None => (never(), never()),
            };
            let given_up = self.given_up.first().map_or(never(), |g| g.answers.clone());
            let idle = self.until_background().min(self.until_deadline());
            select! {
                recv(input) -> line => match line {
                    Ok(Some((received, line))) => {
                        if !self.handle(&line, received) {
                            break;
                        }
                        // Logged after the command is handled: a `go` is forwarded first.
                        log::debug!("<< {line}");
                    }
                    // End of input: as `quit`.
                    Ok(None) | Err(_) => break,
                },
                recv(answers) -> answered => self.on_answer(answered.ok()),
                recv(given_up) -> answered => self.on_given_up(answered.ok()),
                recv(handles) -> handle => if let Some(running) = &mut self.search {
                    running.steer.heard(handle);
                },
                default(idle) => self.tick(),
            }
        }
        self.shutdown();
    }

    /// How long until background growth may start (a day when it may not).
    fn until_background(&self) -> Duration {
        match self.idle_since {
            Some(since) if self.background.is_none() => IDLE_BEFORE_GROWTH.saturating_sub(since.elapsed()),
            _ => Duration::from_secs(86_400),
        }
    }

    /// How long until the running search's deadline (a day when it has none, or was stopped already).
    fn until_deadline(&self) -> Duration {
        match &self.search {
            Some(running) if running.held.is_none() => {
                let next = if running.steer.stop_sent() { running.give_up_at } else { running.deadline };
                next.map_or(Duration::from_secs(86_400), |d| d.saturating_duration_since(Instant::now()))
            }
            _ => Duration::from_secs(86_400),
        }
    }

    /// Housekeeping between commands: stop a search past its deadline; join the searches that finished storing;
    /// start background growth when idle.
    fn tick(&mut self) {
        if let Some(running) = &mut self.search
            && running.held.is_none()
        {
            let now = Instant::now();
            if !running.steer.stop_sent() && running.deadline.is_some_and(|d| now >= d) {
                // An engine that is hung (or ignores the clock), or a tree search held up, would keep the GUI
                // waiting: stopped now, it answers within the move overhead, or the session answers for it.
                self.out.send(Info::string("the search passed the move's deadline: stopped"));
                running.stop(DEADLINE_GRACE);
                return;
            }
            if running.steer.stop_sent() && running.give_up_at.is_some_and(|g| now >= g) {
                self.give_up();
                return;
            }
        }
        self.reap(false);
        let idle_long_enough = self.idle_since.is_some_and(|t| t.elapsed() >= IDLE_BEFORE_GROWTH);
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
        // Not again until the next command.
        self.idle_since = None;
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
                self.out.send(Message::ReadyOk);
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
                    Ok(line) => {
                        if let Some(ended) = self.game.position(&line) {
                            // The next `go`'s clock may be running: the refuted moves wait for `ucinewgame`.
                            self.refuted.extend(ended.refutations.iter().cloned());
                            self.record_game(&ended, false);
                        }
                        self.line = Some(line);
                        self.position_sent = true;
                    }
                    Err(e) => {
                        self.line = None;
                        self.out.error(format!("position: {e}; the position is unset until the next valid one"));
                    }
                }
            }
            GuiCommand::Go(go) => {
                for reason in &go.unread {
                    self.out.error(format!("go: {reason}; searched without it"));
                }
                self.go(go, received)
            }
            GuiCommand::Stop => self.signal(Signal::Stop),
            GuiCommand::PonderHit => self.signal(Signal::PonderHit),
            GuiCommand::Quit => return false,
            GuiCommand::Unknown(text) => self.out.error(format!("unknown command '{text}'")),
            GuiCommand::Malformed { command, reason } => self.out.error(format!("{command}: {reason}")),
        }
        self.reap(false);
        true
    }

    fn uci(&mut self) {
        self.out.send(Message::Id {
            name: format!("deeptree {}", env!("CARGO_PKG_VERSION")),
            author: "the deeptree developers".into(),
        });
        let mut problem = None;
        if self.inner_declared.is_empty() && !self.searching() {
            // The direct engine is started now, and kept: it tells its options, and it is ready for the game.
            let (config, overhead) = (self.direct_config(), self.overhead());
            match self.direct.prepare(&config, overhead).map(|(engine, _)| engine.identity().clone()) {
                Ok(identity) => self.learn_inner(&identity),
                Err(e) => problem = Some(format!("inner engine '{}' unavailable: {e}", self.options.config.engine)),
            }
        }
        for option in self.options.declarations().into_iter().chain(self.inner_declared.iter().cloned()) {
            self.out.send(Message::Option(option));
        }
        self.out.send(Message::UciOk);
        if let Some(problem) = problem {
            self.out.error(problem);
        }
    }

    /// What the inner engine declared: the options offered under their own names, whether it gives win rates, and
    /// whether it takes `Ponder`.
    fn learn_inner(&mut self, identity: &EngineIdentity) {
        self.inner_declared = offered(identity);
        self.inner_wdl = identity.option(WDL_OPTION).is_some();
        self.inner_ponder = identity.option(PONDER_OPTION).is_some();
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
        let store = self.ensure_store();
        self.prepare_direct(true);
        // A game played with the tree starts its workers now, not inside its first move's time.
        // (Background growth holds the workers: they come back at the next command.)
        if store && self.background.is_none() && self.options.config.think_mode.resolved() == ThinkMode::Tree {
            let configs = self.tree_configs();
            if let Err(e) = TreePool::ensure(&mut self.pool, &configs) {
                self.out.error(format!("inner engines unavailable: {e}"));
            }
        }
    }

    /// Starts and configures the direct engine (with `sync`, waits until it has taken everything); a failure is
    /// shown once per set of options.
    fn prepare_direct(&mut self, sync: bool) {
        let (config, overhead) = (self.direct_config(), self.overhead());
        let prepared = self.direct.prepare(&config, overhead).and_then(|(engine, _)| {
            if sync {
                engine.sync()?;
            }
            Ok(engine.identity().clone())
        });
        match prepared {
            Ok(identity) => {
                if self.inner_declared.is_empty() {
                    self.learn_inner(&identity);
                }
                self.direct_error = None;
            }
            Err(e) => {
                if e.is_engine_fault() {
                    self.direct.close();
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
        if let Some(ended) = self.game.take() {
            self.refuted.extend(ended.refutations.iter().cloned());
            self.record_game(&ended, false);
        }
        self.learn_from_refutations();
        // The next game's first timed `go` gives its clock.
        self.game_clock = None;
        // `last_go_timed` stays: in a match the next game is timed too, and the opponent's clock is not ours.
        self.line = Some(Line::start_position());
        if self.released_only() {
            // A search runs until `stop` or `ponderhit`: the new game begins for the engines once it has answered.
            self.new_game_pending = true;
            return;
        }
        self.begin_new_game();
    }

    /// Appends a game that ended to the store's games.pgn (with `LearnFromGames`), for `analyze --games`.
    /// `quiet`: at `quit`, where nothing is written to the GUI any more (a problem is logged), and the store is not
    /// opened for it.
    fn record_game(&mut self, game: &GameRecord, quiet: bool) {
        if !self.options.config.learn_from_games || (!quiet && !self.ensure_store()) {
            return;
        }
        let Some(store) = &self.store else { return };
        let path = store.dir().join(GAMES_FILE);
        if let Err(e) = game.append_to(&path, &pgn_date(std::time::SystemTime::now())) {
            if quiet {
                log::warn!("the game was not recorded: {e}");
            } else {
                self.out.error(format!("the game was not recorded: {e}"));
            }
        }
    }

    /// Searches again, deeper, the tree moves refuted in the games that ended (`LearnFromGames`, with `StoreSearches`:
    /// it writes to the tree), within [`learn::research_budget`] of the game's clock in all, at `ucinewgame`, and adds
    /// each as a task for growth (see `learn`). Not while a search holds the engines (`go infinite` across `ucinewgame`); what the budget leaves is
    /// dropped.
    fn learn_from_refutations(&mut self) {
        let refuted = std::mem::take(&mut self.refuted);
        let config = &self.options.config;
        if refuted.is_empty() || !config.learn_from_games || !config.store_searches {
            return;
        }
        if !self.ensure_store() {
            return;
        }
        let Some(store) = self.store.clone() else { return };
        let engine_depth = self.options.config.engine_depth;
        // Each refutation is a source of growth too (a task the next `analyze --tasks` grows), also where no engine
        // is free to search it again now.
        task_refutations(&store, &refuted, engine_depth);
        if self.searching() {
            return;
        }
        let (engine_config, overhead) = (self.direct_config(), self.overhead());
        let Some(budget) = learn::research_budget(self.game_clock) else {
            log::info!("{} refuted tree moves left unsearched: the game's clock is too short to wait", refuted.len());
            return;
        };
        let until = Instant::now() + budget;
        for (done, refutation) in refuted.iter().enumerate() {
            if Instant::now() >= until {
                log::info!(
                    "{} refuted tree moves left unsearched: the time between games is spent",
                    refuted.len() - done
                );
                break;
            }
            let engine = match self.direct.prepare(&engine_config, overhead) {
                Ok((engine, _)) => engine,
                Err(e) => {
                    log::warn!("a refuted tree move was not searched again: {e}");
                    return;
                }
            };
            let san = crate::search::show::san_of(refutation.line.root(), &refutation.best);
            match learn::research(engine, &store, refutation, engine_depth, until) {
                Ok(found) => log::info!(
                    "tree move {san} scored {} at depth {}, and {} by the game's search {} plies later: searched again \
                     to depth {}, {} ({} positions stored)",
                    refutation.score,
                    refutation.depth,
                    refutation.later,
                    refutation.plies,
                    found.depth,
                    found.score,
                    found.stored
                ),
                Err(e) => log::warn!("tree move {san} was refuted in play but not searched again: {e}"),
            }
        }
    }

    /// Saves the depth model fitted to this game's searches in the store, where the session stores searches: the next
    /// session starts from it, and `analyze --for` reads a clock's depth from it (docs/design.md §6.2).
    fn save_depth_fit(&self) {
        let config = &self.options.config;
        self.save_depth_fit_of(&config.engine, self.options.threads, config.store_searches);
    }

    /// Saves the depth model as the fit of `engine` on `threads` threads, the engine it was fitted to.
    pub(super) fn save_depth_fit_of(&self, engine: &str, threads: u32, store_searches: bool) {
        if self.depth_model.samples() == 0 || !store_searches {
            return;
        }
        if let Some(store) = &self.store
            && let Err(e) = store.put_depth_fit(&self.depth_model.fit(engine, threads))
        {
            log::warn!("the depth model was not saved: {e}");
        }
    }

    /// The engines' side of `ucinewgame`.
    fn begin_new_game(&mut self) {
        self.new_game_pending = false;
        self.finish_search();
        self.save_depth_fit();
        self.depth_model.new_game();
        self.relay_ms = self.relay.margin_ms();
        self.direct.new_game();
        // Sent to the engine now, without waiting: it clears its state while the GUI sends `isready`.
        if self.direct_error.is_none() {
            self.prepare_direct(false);
        }
    }

    /// `quit` or the end of input: nothing more is written (the answer of a search not told to `stop` included), the
    /// searches are stopped and what they found is stored, the engines end.
    fn shutdown(&mut self) {
        // Recorded quietly (nothing is written after `quit`); refuted moves are not searched again (no delay), but
        // each becomes a task where the store is open (a few reads and a write).
        if let Some(ended) = self.game.take() {
            self.refuted.extend(ended.refutations.iter().cloned());
            self.record_game(&ended, true);
        }
        let config = &self.options.config;
        if config.learn_from_games
            && config.store_searches
            && let Some(store) = &self.store
        {
            task_refutations(store, &std::mem::take(&mut self.refuted), config.engine_depth);
        }
        // A search that has answered, or was told to stop, before `quit` owes its answer first; any other is ended
        // without one.
        if let Some(answered) =
            self.search.as_ref().filter(|s| s.held.is_none()).and_then(|s| s.answers.try_recv().ok())
        {
            self.on_answer(Some(answered));
        }
        self.await_stopped();
        self.out.close();
        self.stop_background();
        if let Some(mut running) = self.search.take() {
            running.stop(QUIT_GRACE);
            let answered = match running.give_up_at.filter(|_| running.held.is_none()) {
                // Its answer is dropped unwritten, and with it the thread's wait to store.
                Some(until) => running.wait_until(until).is_ok(),
                None => true,
            };
            drop(running.written.take());
            // A search that does not end when told is not waited for: the process ends with the session.
            if answered && let Some(thread) = running.thread {
                let _ = thread.join();
            }
        }
        // Searches the session answered for: those that end within the grace store what they found.
        let until = Instant::now() + QUIT_GRACE;
        for mut running in std::mem::take(&mut self.given_up) {
            if let Ok(Some(answered)) = running.wait_until(until) {
                drop(answered);
                if let Some(thread) = running.thread {
                    let _ = thread.join();
                }
            }
        }
        self.reap(true);
        self.direct.close();
        self.pool = None;
        self.store = None;
    }
}

/// The inner engine's options that deeptree offers under their own names: all but those it declares itself, and
/// any other count of threads (Toga II's `Number of Threads`): the threads are deeptree's `Threads` budget, which it
/// shares out among its engines itself and sends to each engine's own thread option, whatever its name.
fn offered(identity: &EngineIdentity) -> Vec<EngineOption> {
    identity
        .options
        .iter()
        .filter(|o| options::row(&o.name).is_none() && !o.name.to_ascii_lowercase().contains("thread"))
        .cloned()
        .collect()
}

/// Each refuted tree move as a task for growth (see `learn`), what became of it logged.
fn task_refutations(store: &Store, refuted: &[crate::interop::played::Refutation], engine_depth: u8) {
    for refutation in refuted {
        let san = crate::search::show::san_of(refutation.line.root(), &refutation.best);
        match learn::add_refutation_task(store, refutation, engine_depth) {
            Ok(learn::Tasked::Added(id)) => log::info!("tree move {san} refuted in play: task {id} grows it"),
            Ok(learn::Tasked::Already(id)) => log::info!("tree move {san} refuted in play: task {id} stands for it"),
            Ok(learn::Tasked::Full) => log::info!(
                "tree move {san} refuted in play: no task added, {} of refutations are open",
                learn::MAX_OPEN_REFUTATION_TASKS
            ),
            Err(e) => log::warn!("tree move {san} refuted in play: no task added: {e}"),
        }
    }
}
