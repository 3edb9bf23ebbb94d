//! `go` and what follows it: the search thread (the tree or the direct engine, see `policy`), its answer written in
//! one place, finishing it, and growing the tree in the background while the GUI waits.

use super::*;

impl Session {
    /// What a search thread is given: the options of this `go` and the engines' configurations, by value.
    pub(super) fn context(&self) -> Context {
        Context {
            out: self.out.info_out(),
            store: self.store.clone(),
            options: self.options.clone(),
            config_direct: self.direct_config(),
            config_tree: self.tree_configs(),
            overhead: self.overhead(),
            depth_model: self.depth_model.clone(),
            chess960: self.chess960(),
        }
    }

    /// Writes a search's answer: its `info` lines, then its one `bestmove`; then learns what it measured. The only
    /// place a `bestmove` is written.
    /// Writes a search's answer; `played`: it is a move of the game (not a `go ponder` stopped before its
    /// `ponderhit`), which the game record learns from.
    fn answer(&mut self, outcome: Outcome, played: bool) {
        // What the game record learns: the move, and its score and depth: the direct search's, or those of the
        // line of multipv 1 whose PV starts with it.
        let learned = outcome.best.best().and_then(|best| {
            if let Some((score, depth)) = outcome.searched {
                return Some((best, score, depth));
            }
            let line =
                outcome.infos.iter().rev().find(|i| i.multipv.is_none_or(|k| k == 1) && i.pv.first() == Some(&best))?;
            let (score, _) = line.score?;
            Some((best, score, line.depth.unwrap_or(0)))
        });
        for info in outcome.infos {
            self.out.send(info);
        }
        if outcome.tree_fallback {
            self.tree_fallbacks += 1;
            self.out.send(Info::string(format!("think tree: fallbacks this session: {}", self.tree_fallbacks)));
        }
        self.out.bestmove(&outcome.best);
        let written = Instant::now();
        if let Some((best, score, depth)) = learned.filter(|_| played) {
            self.game.answered(&best, outcome.by == Answerer::Tree, score, depth);
        }
        log::debug!("answered by {:?}", outcome.by);
        // From here on the GUI has its move: measure and learn.
        if let Some(hops) = outcome.relay {
            self.relay.record(
                hops.timing.go_sent.saturating_duration_since(hops.received),
                written.saturating_duration_since(hops.timing.bestmove_read),
            );
        }
        if let Some(sample) = outcome.sample {
            self.depth_model.record(sample.phase, sample.nodes, sample.time, sample.depth);
            if let Some(share) = sample.clock_share {
                self.depth_model.record_clock(sample.time, share);
            }
        }
        self.idle_since = Some(written);
    }

    /// A search thread's answer (`None`: it ended without one), with the engines it was lent. Written at once, or
    /// held until `stop` or `ponderhit` for a `go infinite` or `go ponder`.
    pub(super) fn on_answer(&mut self, answered: Option<Answered>) {
        let Some(mut running) = self.search.take() else { return };
        let (outcome, lent) = match answered {
            Some(Answered { outcome, lent, written }) => {
                running.written = Some(written);
                (outcome, Some(lent))
            }
            // The thread is gone and the engines with it: fresh ones are started when needed.
            None => (Outcome::no_move(vec![Info::error("the search ended without an answer")]), None),
        };
        if running.released() {
            self.answer(outcome, !running.ponder || running.hit);
        } else {
            running.held = Some(outcome);
        }
        if let Some(lent) = lent {
            self.direct.put_back(lent.direct);
            self.pool = lent.pool;
        }
        if running.held.is_some() {
            self.search = Some(running);
            return;
        }
        self.finished(running);
    }

    /// A search whose answer is written: it may store what it found now; it is joined later.
    fn finished(&mut self, mut running: Running) {
        drop(running.written.take());
        self.finishing.extend(running.thread);
        if self.new_game_pending {
            self.begin_new_game();
        }
    }

    /// The GUI's `stop` or `ponderhit` for the running search; an answer held for it is written now.
    pub(super) fn signal(&mut self, signal: Signal) {
        let Some(running) = &mut self.search else { return };
        match signal {
            Signal::Stop => {
                // A `go ponder` stopped without its `ponderhit`: the move it guessed was not played, and the game
                // record forgets it now (a `position` that follows sets the game's line again).
                if running.ponder
                    && !running.hit
                    && let Some(pondered) = &running.line
                {
                    self.game.guess_not_played(pondered);
                }
                running.stop(STOP_GRACE);
            }
            Signal::PonderHit => {
                running.hit = true;
                running.steer.send(signal);
                // The clock runs from here: the search gets the deadline of the same `go` without `ponder`.
                if running.ponder && running.deadline.is_none() {
                    let go = Go { ponder: false, ..running.go.clone() };
                    running.deadline = deadline(&go, running.white, Instant::now());
                }
            }
        }
        if running.released()
            && let Some(outcome) = running.held.take()
            && let Some(running) = self.search.take()
        {
            self.answer(outcome, !running.ponder || running.hit);
            self.finished(running);
        }
    }

    /// A search told to `stop` has its `bestmove` due at once: commands that need it over (`setoption`, `go`) wait for
    /// it, as GUIs that send `stop` and the next command back to back expect.
    pub(super) fn await_stopped(&mut self) {
        if self.search.as_ref().is_some_and(|s| s.steer.stop_sent()) {
            self.finish_search();
        }
    }

    /// A `go infinite` or `go ponder` is under way: only `stop` (or, for `go ponder`, `ponderhit`) ends it.
    pub(super) fn released_only(&self) -> bool {
        self.search.as_ref().is_some_and(|s| s.until_released)
    }

    /// A search is under way and the GUI has not had its `bestmove`.
    pub(super) fn searching(&self) -> bool {
        self.search.is_some()
    }

    pub(super) fn go(&mut self, go: Go, received: Instant) {
        self.await_stopped();
        if self.searching() {
            self.out.error("go while a search is running: ignored (send stop first)");
            return;
        }
        if self.new_game_pending {
            self.begin_new_game();
        }
        let (until_released, ponder) = (go.infinite || go.ponder, go.ponder);
        let (steer, mut control) = Steer::pair(received);
        let (answer, answers) = crossbeam_channel::bounded(1);
        let Some(line) = self.line.clone() else {
            // Nothing is searched: the error is the `info` line, with no score.
            self.out.error("go without a valid position");
            let outcome = Outcome::no_move(Vec::new());
            if until_released {
                let held = Some(outcome);
                self.search = Some(Running {
                    hit: false,
                    thread: None,
                    until_released,
                    ponder: go.ponder,
                    steer,
                    answers,
                    held,
                    written: None,
                    deadline: None,
                    give_up_at: None,
                    line: None,
                    searchmoves: Vec::new(),
                    last_line: LastLine::default(),
                    chess960: false,
                    go,
                    white: true,
                    direct_closed: self.direct_closed,
                });
            } else {
                self.answer(outcome, false);
            }
            return;
        };
        // Every scored line of this search carries its win rates where the GUI asked for them (see `uci::wdl`), and
        // its counts start from 0.
        self.out.begin_search(self.options.show_wdl.then(|| crate::uci::wdl::material(line.root())));
        self.last_go_timed = go.is_timed();
        if go.is_timed() && self.game_clock.is_none() {
            let own = if shakmaty::Position::turn(line.root()).is_white() { go.wtime } else { go.btime };
            self.game_clock = own.map(Duration::from_millis);
        }
        // What the game record learns: a game's limit (a clock, movetime, depth, nodes) makes deeptree a player of
        // the side to move; a GUI's analysis makes the game no game.
        if self.options.analyse_mode || go.infinite || (go.ponder && !go.is_timed()) {
            self.game.analysed();
        } else {
            self.game.played();
        }
        let white = shakmaty::Position::turn(line.root()).is_white();
        let deadline = deadline(&go, white, received);
        let running_go = go.clone();
        self.ensure_store();
        let ctx = self.context();
        let last_line = ctx.out.last_line();
        let chess960 = ctx.chess960;
        let searchmoves =
            go.searchmoves.iter().filter_map(|m| canonical_uci(line.root(), &m.parse::<UciMove>().ok()?)).collect();
        let answer_line = line.clone();
        let mut lent = Lent { direct: std::mem::take(&mut self.direct), pool: self.pool.take() };
        let thread = std::thread::Builder::new().name("uci-search".into()).spawn(move || {
            let (outcome, aftermath) = think(&ctx, &mut lent, &line, &go, &mut control);
            // One answer per `go`: the session writes it. What the search found is stored once it is out (or
            // dropped, after `quit`): nothing competes with the write.
            let (written, was_written) = crossbeam_channel::bounded::<()>(1);
            let _ = answer.send(Answered { outcome, lent, written });
            let _ = was_written.recv();
            aftermath.run(&ctx, &line);
        });
        match thread {
            Ok(thread) => {
                let thread = Some(thread);
                self.search = Some(Running {
                    hit: false,
                    thread,
                    until_released,
                    ponder,
                    steer,
                    answers,
                    held: None,
                    written: None,
                    deadline,
                    give_up_at: None,
                    line: Some(answer_line),
                    searchmoves,
                    last_line,
                    chess960,
                    go: running_go,
                    white,
                    direct_closed: self.direct_closed,
                })
            }
            Err(e) => {
                self.out.error(format!("cannot start a search: {e}"));
                self.answer(Outcome::no_move(Vec::new()), false);
            }
        }
    }

    /// Ends the search: a running one is stopped and its answer written; it is left to store what it found (joined
    /// later), so that the next command is never held up by a write.
    pub(super) fn finish_search(&mut self) {
        let Some(running) = &mut self.search else { return };
        running.stop(STOP_GRACE);
        if running.held.is_some() {
            self.signal(Signal::Stop);
            return;
        }
        let until = running.give_up_at.unwrap_or_else(|| Instant::now() + STOP_GRACE);
        match running.wait_until(until) {
            Ok(answered) => self.on_answer(answered),
            Err(()) => self.give_up(),
        }
    }

    /// Answers for the running search, which was told to stop and has not answered within its grace (a hung
    /// engine, a write held up): the tree's best move, else the first move of the search's last best line, else the
    /// first legal move. The search is kept until it ends; its engines come back then (see `on_given_up`).
    pub(super) fn give_up(&mut self) {
        let Some(mut running) = self.search.take() else { return };
        // Its lines from now on would land in the next search's.
        running.last_line.mute();
        let outcome = match &running.line {
            Some(line) => {
                // The move in the notation of the search's position (a later `position` may have changed it).
                let ctx = Context { chess960: running.chess960, ..self.context() };
                given_up(&ctx, line, &running.searchmoves, running.last_line.first_move())
            }
            None => Outcome::no_move(Vec::new()),
        };
        self.answer(outcome, !running.ponder || running.hit);
        drop(running.written.take());
        self.given_up.push(running);
        if self.new_game_pending {
            self.begin_new_game();
        }
    }

    /// A search the session answered for has ended: its answer is not written (the GUI has one); its engines come
    /// back where none have replaced them, and it stores what it found.
    pub(super) fn on_given_up(&mut self, answered: Option<Answered>) {
        if self.given_up.is_empty() {
            return;
        }
        let mut running = self.given_up.remove(0);
        if let Some(Answered { lent, written, .. }) = answered {
            // Not an engine the settings have ended since it was lent.
            if running.direct_closed == self.direct_closed {
                self.direct.take_over(lent.direct);
            }
            if self.pool.is_none() && self.search.is_none() && self.background.is_none() {
                self.pool = lent.pool;
            }
            drop(written);
        }
        self.finishing.extend(running.thread.take());
    }

    pub(super) fn start_background(&mut self) {
        let Some(line) = self.line.clone() else { return };
        let ctx = self.context();
        let (steer, mut control) = Steer::pair(Instant::now());
        let mut pool = self.pool.take();
        let thread = std::thread::Builder::new().name("uci-background".into()).spawn(move || {
            log::info!("background analysis of the last position");
            let growth = Growth {
                params: ctx.options.analysis_params(),
                until_ponderhit: false,
                reporting: false,
                searchmoves: Vec::new(),
            };
            grow_tree(&ctx, &mut pool, &line, &mut control, growth);
            // Growth ended on its own (settled, or nothing to grow): idle until the session needs the workers.
            control.wait_for_stop();
            pool
        });
        match thread {
            Ok(thread) => self.background = Some(Background { thread, steer }),
            Err(e) => log::warn!("no background analysis: {e}"),
        }
    }

    pub(super) fn stop_background(&mut self) {
        if let Some(mut background) = self.background.take() {
            background.steer.send(Signal::Stop);
            if let Ok(pool) = background.thread.join() {
                self.pool = pool;
            }
        }
    }
}

/// Grace past a `movetime` before the session stops a search itself.
const MOVETIME_GRACE: Duration = Duration::from_millis(250);

/// When the session stops a timed search itself, should the engine not have answered: `movetime` plus a grace; for a
/// clock, ten times the move's share (at least a second), never past 85 % of the side's own time, above the most a
/// Stockfish plans for one move (82.5 % of its clock with one move to the control). A depth or node limit beside a
/// clock keeps the clock's deadline. None for a search with only limits of the GUI's own (depth, nodes, mate), for
/// `go infinite` and for `go ponder`.
fn deadline(go: &Go, white: bool, received: Instant) -> Option<Instant> {
    if go.infinite || go.ponder {
        return None;
    }
    if let Some(movetime) = go.movetime {
        return Some(received + Duration::from_millis(movetime) + MOVETIME_GRACE);
    }
    let own = if white { go.wtime.or(go.btime) } else { go.btime.or(go.wtime) }?;
    let share = crate::uci::time::share(go, white)?;
    let limit = (share * 10).max(Duration::from_secs(1)).min(Duration::from_millis(own / 20 * 17));
    Some(received + limit)
}
