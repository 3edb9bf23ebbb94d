//! `go` and what follows it: the search thread (the tree or the direct engine, see `policy`), waiting for its
//! `bestmove`, finishing it, and growing the tree in the background while the GUI waits.

use super::*;

impl Session {
    pub(super) fn shared(&self, answered: Arc<AtomicBool>) -> Shared {
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
    pub(super) fn await_stopped(&mut self) {
        if self.search.as_ref().is_some_and(|s| s.stop.load(Ordering::SeqCst)) {
            self.finish_search();
        }
    }

    /// A `go infinite` or `go ponder` is under way: only `stop` or `ponderhit` ends it.
    pub(super) fn released_only(&self) -> bool {
        self.searching() && self.search.as_ref().is_some_and(|s| s.until_released)
    }

    /// A search is under way and has not answered yet.
    pub(super) fn searching(&self) -> bool {
        self.search.as_ref().is_some_and(|s| !s.thread.is_finished() && !s.answered.load(Ordering::SeqCst))
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
    pub(super) fn spawn_waiting_bestmove(&mut self, go: Go) {
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
    pub(super) fn finish_search(&mut self) {
        if let Some(search) = self.search.take() {
            if search.answered.load(Ordering::SeqCst) {
                self.finishing.push(search.thread);
                return;
            }
            search.stop();
            let _ = search.thread.join();
        }
    }

    pub(super) fn start_background(&mut self) {
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

    pub(super) fn stop_background(&mut self) {
        if let Some(background) = self.background.take() {
            background.stop.store(true, Ordering::SeqCst);
            let _ = background.thread.join();
        }
    }
}
