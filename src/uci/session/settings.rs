//! The options a GUI sets (`setoption`) and what they configure: the direct engine's and the tree's engine
//! configurations, the clock's overhead, and the tree store, opened when first needed.

use super::*;
use crate::engine::protocol::OptionKind;
use crate::store::marks::{MarkKind, MarkSource};

impl Session {
    pub(super) fn set_option(&mut self, name: &str, value: &str) {
        self.await_stopped();
        if self.searching() {
            self.out.error(format!("setoption {name} ignored while searching"));
            return;
        }
        self.finish_search();
        self.direct_error = None;
        let mark = [(options::MARK_EXCLUDE, Some(MarkKind::Exclude)), (options::MARK_INCLUDE, Some(MarkKind::Include))]
            .into_iter()
            .chain([(options::MARK_LIFT, None)])
            .find(|(option, _)| option.eq_ignore_ascii_case(name));
        if let Some((_, kind)) = mark {
            self.mark_move(kind, value);
            return;
        }
        if options::row(name).is_some() {
            let before = self.options.clone();
            if let Err(e) = self.options.set(name, value) {
                self.out.error(&e);
                return;
            }
            if (&before.config.engine, before.threads) != (&self.options.config.engine, self.options.threads) {
                // The depth model is of one engine on so many threads: kept as theirs, and the new ones start from
                // the store's fit of their thread count (or from none).
                self.save_depth_fit_of(&before.config.engine, before.threads, before.config.store_searches);
                self.depth_model = self
                    .store
                    .as_deref()
                    .and_then(|store| stored_depth_model(store, self.options.threads))
                    .unwrap_or_default();
            }
            if before.config.tree_path != self.options.config.tree_path {
                self.store = None;
                self.store_error = None;
            }
            if before.config.engine != self.options.config.engine {
                self.inner_declared.clear();
                self.inner_wdl = false;
                self.inner_ponder = false;
                self.close_direct();
            }
            if before.chess960 != self.options.chess960 {
                // Castling notation changes: fresh engines rather than an option turned in a running one.
                self.close_direct();
                self.pool = None;
            }
            if (&before.config.engine, before.threads, before.config.engine_hash_mib)
                != (&self.options.config.engine, self.options.threads, self.options.config.engine_hash_mib)
            {
                // The direct engine takes new values with `setoption` before its next search; the workers restart.
                self.pool = None;
            }
            return;
        }
        let Some(declared) = self.inner_declared.iter().find(|o| o.name.eq_ignore_ascii_case(name)).cloned() else {
            self.out.error(format!("unknown option '{name}'"));
            return;
        };
        match check_value(&declared, value) {
            // A button is an act, not a value: the direct engine is sent one press for each the GUI sends (a second
            // `Clear Hash` clears again), the tree's workers are left running, and nothing is kept for later starts.
            Ok(_) if declared.kind == OptionKind::Button => self.direct.press(&declared.name),
            Ok(value) => {
                self.options.inner.retain(|(n, _)| n != &declared.name);
                self.options.inner.push((declared.name.clone(), value));
                self.pool = None;
            }
            Err(e) => self.out.error(&e),
        }
    }

    /// Ends the direct engine for new settings; one lent to a search now must not come back either (see
    /// `on_given_up`).
    fn close_direct(&mut self) {
        self.direct.close();
        self.direct_closed += 1;
    }

    pub(super) fn engine_config(&self, threads: u32, hash_mib: u32) -> EngineConfig {
        let mut config = EngineConfig::from(&self.options.config);
        config.options = vec![("Threads".into(), threads.to_string()), ("Hash".into(), hash_mib.max(1).to_string())];
        config.options.extend(self.options.inner.iter().filter(|(n, _)| !Overhead::is_option(n)).cloned());
        if self.chess960() {
            // Forwarded: the engines read and write castling as king takes rook from now on.
            config.options.push(("UCI_Chess960".into(), "true".into()));
        }
        config
    }

    /// Chess960 is on: set by the GUI, or implied by the position it sent.
    pub(super) fn chess960(&self) -> bool {
        self.options.chess960 || self.line.as_ref().is_some_and(|l| l.chess960)
    }

    /// The direct engine: all `Threads` and all of `Hash`.
    pub(super) fn direct_config(&self) -> EngineConfig {
        let mut config = self.engine_config(self.options.threads, self.options.config.engine_hash_mib);
        // Its lines are relayed: an engine that gives win rates gives its own (the tree's workers are not asked).
        if self.inner_wdl {
            config.options.push((WDL_OPTION.into(), self.options.show_wdl.to_string()));
        }
        // The engine that plays the moves manages the clock: told that the GUI ponders, Stockfish plans a quarter
        // more time a move, as it would bare. The tree's workers search to a depth, not a clock.
        if self.inner_ponder {
            config.options.push((PONDER_OPTION.into(), self.options.ponder.to_string()));
        }
        config
    }

    /// The tree's workers: the `Engines` option's, else `InnerEngine` as many as `Threads`, one thread each, `Hash`
    /// shared out.
    pub(super) fn tree_configs(&self) -> Vec<EngineConfig> {
        let base = self.engine_config(1, (self.options.config.engine_hash_mib / self.options.threads.max(1)).max(16));
        match EngineSpec::parse_list(&self.options.config.engines) {
            Ok(specs) if !specs.is_empty() => EngineSpec::configs(&specs, &base),
            // A bad list was refused when it was set; the settings' own is checked at start.
            _ => vec![base; self.options.threads.max(1) as usize],
        }
    }

    pub(super) fn overhead(&self) -> Overhead {
        let gui_ms = self.options.inner.iter().find(|(n, _)| Overhead::is_option(n)).and_then(|(_, v)| v.parse().ok());
        Overhead { gui_ms, relay_ms: self.relay_ms }
    }

    /// Opens the tree store if needed; false (with an error shown once) when it cannot be opened.
    /// Marks `text` (a move in SAN or UCI) in the last `position` with `kind`, or lifts its mark (`None`), in the
    /// tree store; says what it did in an `info string`, or why it did nothing.
    fn mark_move(&mut self, kind: Option<MarkKind>, text: &str) {
        // No move (an empty value, as GUIs send an option they never set): nothing to mark.
        if text.trim().is_empty() || text.trim() == "<empty>" {
            return;
        }
        let line = self.line.clone().filter(|_| self.position_sent);
        let Some(line) = line else {
            self.out.error("no position to mark a move in: send position first");
            return;
        };
        let Some(uci) = crate::game::parse_move(line.root(), text) else {
            self.out.error(format!("{}: not a legal move in the last position", text.trim()));
            return;
        };
        if !self.ensure_store() {
            return;
        }
        let Some(store) = self.store.clone() else { return };
        let done = match kind {
            Some(kind) => {
                store.set_mark(line.root(), uci, kind, MarkSource::Uci).map(|m| format!("{}d {}", m.kind, m.uci))
            }
            None => store.lift_mark(line.root(), uci).map(|m| format!("lifted the {} mark on {}", m.kind, m.uci)),
        };
        match done {
            Ok(said) => self.out.send(Info::string(said)),
            Err(e) => self.out.error(e.to_string()),
        }
    }

    pub(super) fn ensure_store(&mut self) -> bool {
        if self.store.is_some() {
            return true;
        }
        if self.store_error.is_some() {
            return false;
        }
        let dir = PathBuf::from(&self.options.config.tree_path);
        match Store::open(&dir, &StoreOptions::from(&self.options.config)) {
            Ok(store) => {
                // A fresh session starts from the depth model the last session on this store saved, of as many threads.
                if self.depth_model.samples() == 0
                    && let Some(model) = stored_depth_model(&store, self.options.threads)
                {
                    self.depth_model = model;
                }
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
}

/// The depth model of the store's fit for an engine on `threads` threads, where it has one that reads.
fn stored_depth_model(store: &Store, threads: u32) -> Option<crate::uci::depth::DepthModel> {
    let fit = store.read().and_then(|view| view.depth_fit_for(threads)).ok().flatten()?;
    Some(crate::uci::depth::DepthModel::from_fit(&fit))
}
