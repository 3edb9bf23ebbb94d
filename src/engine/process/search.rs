//! The search session: `position` and `go`, the `info` lines gathered into an [`Evaluation`] with every move checked
//! legal, a screen's early stop, and a search restricted to `searchmoves` asked another way of an engine that does
//! not keep to them (through MultiPV, or each move on its own).

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use log::{debug, trace, warn};
use shakmaty::{Position, uci::UciMove};

use super::{
    super::{
        EngineError,
        protocol::{EngineMessage, Info, OptionKind},
        request::{Asked, EvalRequest, Evaluation, Limit, PvLine, ScreenCut, SearchTiming},
    },
    Engine,
    config::{OUTSIDE_SEARCHMOVES, Searchmoves, learnt_to_ignore_searchmoves},
    watchdog::Phase,
};
use crate::{
    notation::{canonical, played},
    score::{Bound, Score},
};

impl Engine {
    /// Runs a search to its limit and returns the result.
    pub fn evaluate(&mut self, request: &EvalRequest) -> Result<Evaluation, EngineError> {
        self.search(request, &mut |_| {})
    }

    /// Runs a search; `on_info` sees every `info` line as it comes. A [`StopHandle`] (see [`Engine::stop_handle`])
    /// ends it early: the engine is sent `stop` and its `bestmove` ends the search, marked `stopped`; a stop asked
    /// for before the search started is [`EngineError::Stopped`], and nothing is sent.
    ///
    /// The engine has answered `readyok` to everything that configured it before `go` is sent. The request is
    /// checked before anything is sent; every move the engine sends is checked legal before it is used, and an
    /// illegal (or outside `searchmoves`) best move is an [`EngineError::IllegalMove`].
    ///
    /// Deadlines: an engine silent for [`Timeouts::search_silence`] is asked `isready`, and is hung if it does not
    /// answer within [`Timeouts::handshake`]; after `stop`, `bestmove` must come within [`Timeouts::handshake`].
    ///
    /// `searchmoves` with an engine that does not keep to them (see [`Searchmoves`]): each move is searched on its
    /// own, as the position after it one ply shallower (a depth or node limit is shared out, and so are the GUI's
    /// limits beside it; the replies' own `info` lines are not passed on, but one line for this position after each
    /// move is valued: the best so far), and the best of the replies' scores, backed up one ply, is the answer at
    /// the depth asked (at the shallowest reply's depth plus one where another limit could have ended a reply).
    pub fn search(&mut self, request: &EvalRequest, on_info: &mut dyn FnMut(&Info)) -> Result<Evaluation, EngineError> {
        let each_move = !request.searchmoves.is_empty() && request.multipv == 1;
        let started = Instant::now();
        let result = if each_move && self.searchmoves == Searchmoves::Ignored {
            self.search_each_move(request, Duration::ZERO, on_info)
        } else if each_move && self.searchmoves == Searchmoves::MultiPv {
            self.search_by_multipv(request, Duration::ZERO, on_info)
        } else {
            match self.start_and_read(request, on_info) {
                // An answer within `searchmoves` proves nothing (the engine's own best move may be among them):
                // only a violation is learnt, and only the configuration says an engine keeps to them.
                // A search cut short by `stop` may answer with any move (its hash's, the first legal one): no lesson,
                // and no second search for a caller that wanted it over.
                Err(EngineError::IllegalMove { what: OUTSIDE_SEARCHMOVES, .. })
                    if each_move && self.link.state.lock().stop_sent =>
                {
                    Err(EngineError::Stopped)
                }
                Err(EngineError::IllegalMove { what: OUTSIDE_SEARCHMOVES, .. })
                    if each_move && self.searchmoves == Searchmoves::Unknown =>
                {
                    self.searchmoves = self.learnt_method();
                    let how = if self.searchmoves == Searchmoves::MultiPv {
                        "the moves allowed are asked through MultiPV (each alone where fewer are allowed than its \
                         lines would need)"
                    } else {
                        "each move is searched on its own"
                    };
                    warn!("{} does not keep to searchmoves: {how}", self.name);
                    learnt_to_ignore_searchmoves(&self.identity.command);
                    let spent = started.elapsed();
                    self.end_search_phase(false);
                    if self.searchmoves == Searchmoves::MultiPv {
                        self.search_by_multipv(request, spent, on_info)
                    } else {
                        self.search_each_move(request, spent, on_info)
                    }
                }
                result => result,
            }
        };
        // However the search ended, it is over: its stop handles no longer apply.
        self.end_search_phase(true);
        result
    }

    /// Back to idle after a search; `last`: the search asked for is over, so that its stop handles no longer apply
    /// (otherwise one of several searches that answer it ended, and a stop still applies to the next).
    pub(super) fn end_search_phase(&self, last: bool) {
        let mut state = self.link.state.lock();
        state.searching = false;
        state.pondering = false;
        // A stop sent to one of several searches that answer one request holds for the rest of them.
        state.stop_requested |= state.stop_sent && !last;
        state.stop_sent = false;
        if last {
            state.stop_requested = false;
            state.ponderhit_requested = false;
            state.generation += 1;
        }
        self.link.enter(&mut state, Phase::Idle);
    }

    /// A search restricted to `searchmoves` as one search of the whole position with MultiPV (see
    /// [`Searchmoves::MultiPv`]): with `n` moves left out, `n + 1` lines hold the best of the moves allowed, and
    /// the first line whose move is allowed answers, with its score and depth. Each move is searched alone instead
    /// where the engine's MultiPV does not reach `n + 1`, where fewer moves are allowed than that (a search of one
    /// move would cost all the lines of the others), or where no line came for an allowed move. `spent`: the time a
    /// first search (the one that broke `searchmoves`) already took of a `movetime`.
    ///
    /// `on_info` gets, at each depth, the engine's first line for an allowed move (the best of them at that depth),
    /// without its multipv: the other lines are of moves the caller did not ask about, or worse.
    fn search_by_multipv(
        &mut self,
        request: &EvalRequest,
        spent: Duration,
        on_info: &mut dyn FnMut(&Info),
    ) -> Result<Evaluation, EngineError> {
        request.validate()?;
        let pos = request.position.position().clone();
        let allowed =
            |first: &UciMove| request.searchmoves.iter().any(|s| s.to_move(&pos).ok() == first.to_move(&pos).ok());
        let left_out = pos.legal_moves().len().saturating_sub(request.searchmoves.len());
        let lines = u32::try_from(left_out + 1).unwrap_or(u32::MAX);
        let reaches = match self.identity.option("MultiPV").map(|o| &o.kind) {
            Some(OptionKind::Spin { max, .. }) => i64::from(lines) <= *max,
            _ => false,
        };
        if !reaches || request.searchmoves.len() < left_out + 1 {
            debug!(
                "{}: {lines} lines of MultiPV for {} moves: each move is searched alone",
                self.name,
                request.searchmoves.len()
            );
            return self.search_each_move(request, spent, on_info);
        }
        // A `movetime`, as the limit or beside it, less what the first search took of it.
        let less_spent = |limit: Limit| match limit {
            Limit::MoveTime(time) => Limit::MoveTime(time.saturating_sub(spent).max(Duration::from_millis(1))),
            limit => limit,
        };
        let (limit, caps) = (less_spent(request.limit), request.caps.iter().map(|&cap| less_spent(cap)).collect());
        // A screen's bound is for the moves allowed; the first lines here may be of others.
        let whole =
            EvalRequest { searchmoves: Vec::new(), multipv: lines, limit, caps, screen: None, ..request.clone() };
        let mut shown_depth = 0;
        let mut relay = |info: &Info| {
            let (Some(depth), Some(first)) = (info.depth, info.pv.first()) else { return };
            if depth > shown_depth && allowed(first) {
                shown_depth = depth;
                on_info(&Info { multipv: None, ..info.clone() });
            }
        };
        let evaluation = self.start_and_read(&whole, &mut relay)?;
        let best = evaluation.lines().filter(|l| l.pv.first().is_some_and(&allowed)).min_by_key(|l| l.multipv).cloned();
        let Some(mut line) = best else {
            if evaluation.stopped {
                return Err(EngineError::Stopped);
            }
            debug!("{}: no line of MultiPV {lines} for a move allowed: each move is searched alone", self.name);
            self.end_search_phase(false);
            return self.search_each_move(request, spent, on_info);
        };
        line.multipv = 1;
        // The line's moves are legal from the position: the collector checked them as they came.
        let Some(&best_move) = line.pv.first() else { return Err(EngineError::NoScore) };
        Ok(Evaluation {
            best_move,
            ponder: line.pv.get(1).copied(),
            line,
            other_lines: Vec::new(),
            asked: Asked::MultiPv,
            ..evaluation
        })
    }

    /// A search restricted to `searchmoves` as one search of the position after each move (see [`Engine::search`]).
    /// `spent`: the time a first search (the one that broke `searchmoves`) already took of a time limit.
    ///
    /// The replies' own `info` lines are not passed on (they are for the positions after the moves): after each move
    /// is valued, `on_info` gets one line for the position asked: the best so far (its line, its score backed up,
    /// a lower bound while moves are left), the depth of the shallowest reply plus one, the replies' nodes summed
    /// and the time since the search began (`spent` included).
    fn search_each_move(
        &mut self,
        request: &EvalRequest,
        spent: Duration,
        on_info: &mut dyn FnMut(&Info),
    ) -> Result<Evaluation, EngineError> {
        request.validate()?;
        let began = Instant::now();
        let count = request.searchmoves.len() as u32;
        let white = request.position.position().turn().is_white();
        // Each move's share of the limit, and of each of the GUI's limits beside it (a clock's `depth`): the reply
        // ends at whichever share it meets first, as the whole search would.
        let share = |limit: Limit| match limit {
            Limit::Depth(depth) => Some(Limit::Depth(depth.saturating_sub(1).max(1))),
            Limit::Nodes(nodes) => Some(Limit::Nodes((nodes / u64::from(count)).max(1))),
            Limit::MoveTime(time) => Some(Limit::MoveTime(time.saturating_sub(spent) / count)),
            // A clock: a share of the side's own time (a thirtieth and half the increment), less what was spent.
            Limit::Clock { wtime, btime, winc, binc, .. } => {
                let (own, inc) = if white { (wtime, winc) } else { (btime, binc) };
                let share = Duration::from_millis(own / 30 + inc / 2);
                Some(Limit::MoveTime(share.saturating_sub(spent) / count))
            }
            // A mate search shared out among the moves: each a ply short of the mate's depth, as a depth is.
            Limit::Mate(moves) => Some(Limit::Depth(moves.saturating_mul(2).saturating_sub(1).clamp(1, 250))),
            Limit::Infinite | Limit::PonderClock { .. } => None,
        };
        let Some(limit) = share(request.limit) else {
            return Err(EngineError::InvalidRequest(format!(
                "{} does not keep to searchmoves, and a search without a limit cannot be shared out among the moves",
                self.name
            )));
        };
        // A `mate` beside another limit only ends the search early once the mover's mate is found: a reply's own
        // `mate` would look for the opponent's, so it has no share. Shares of one kind are merged, the tighter kept,
        // so that each word comes once in a reply's `go`.
        let mut limits = vec![limit];
        'caps: for cap in request.caps.iter().filter(|cap| !matches!(cap, Limit::Mate(_))).filter_map(|&cap| share(cap))
        {
            for kept in &mut limits {
                if let Some(merged) = tighter(*kept, cap) {
                    *kept = merged;
                    continue 'caps;
                }
            }
            limits.push(cap);
        }
        let (limit, caps) = (limits[0], &limits[1..]);
        let pos = request.position.position().clone();
        let mut best: Option<(Score, UciMove, PvLine, Option<UciMove>)> = None;
        let (mut nodes, mut stopped, mut first_go, mut last_read) = (0u64, false, None, None);
        // The shallowest reply (a depth reached by all of them), and the moves valued.
        let mut reply_depth: Option<u32> = None;
        let mut searched = 0usize;
        for uci in &request.searchmoves {
            let m =
                uci.to_move(&pos).map_err(|_| EngineError::InvalidRequest(format!("searchmove {uci} is illegal")))?;
            let mut after = pos.clone();
            after.play_unchecked(m);
            // A move that ends the game is valued here: nothing is left to search after it.
            // A draw by rule after the move is one too: searched as its own root, the engine would not see it.
            let (score, bound, line, ponder) = if after.is_checkmate() {
                (Score::mate_in_plies(1), Bound::Exact, vec![canonical(m)], None)
            } else if after.is_stalemate()
                || after.is_insufficient_material()
                || after.halfmoves() >= 100
                || request.position.occurrences(&after) >= 2
            {
                (Score::cp(0), Bound::Exact, vec![canonical(m)], None)
            } else {
                let reply = EvalRequest { caps: caps.to_vec(), ..EvalRequest::new(request.position.then(uci)?, limit) };
                let evaluation = match self.start_and_read(&reply, &mut |_| {}) {
                    Ok(evaluation) => evaluation,
                    // Stopped between two searches: what was found so far answers.
                    Err(EngineError::Stopped) if best.is_some() => {
                        stopped = true;
                        break;
                    }
                    Err(e) => return Err(e),
                };
                self.end_search_phase(false);
                nodes += evaluation.nodes;
                first_go.get_or_insert(evaluation.timing.go_sent);
                last_read = Some(evaluation.timing.bestmove_read);
                stopped |= evaluation.stopped;
                reply_depth = Some(reply_depth.map_or(evaluation.line.depth, |d: u32| d.min(evaluation.line.depth)));
                // Sign flip: the reply's score is for the side to move after the move; backed up one ply, and a
                // bound of the reply is the other bound for the mover.
                let score = evaluation.line.score.back_up();
                let bound = evaluation.line.bound.flipped();
                let mut line = vec![canonical(m)];
                line.extend(evaluation.line.pv.iter().copied());
                (score, bound, line, Some(evaluation.best_move))
            };
            searched += 1;
            if best.as_ref().is_none_or(|(b, ..)| score.value() > b.value()) {
                let pv = PvLine { multipv: 1, score, bound, depth: 0, seldepth: 0, pv: line };
                best = Some((score, canonical(m), pv, ponder));
            }
            if let Some((score, _, line, _)) = &best {
                // The best of the moves valued so far: while moves are left, the best of all is at least as good.
                let bound = if searched < request.searchmoves.len() { Bound::Lower } else { line.bound };
                // Since the search began: the first search, which broke searchmoves, counts.
                let elapsed_ms = (spent + began.elapsed()).as_millis() as u64;
                on_info(&Info {
                    depth: Some(reply_depth.map_or(1, |d| d + 1)),
                    score: Some((*score, bound)),
                    nodes: Some(nodes),
                    nps: (elapsed_ms > 0).then(|| nodes.saturating_mul(1000) / elapsed_ms),
                    time_ms: Some(elapsed_ms),
                    pv: line.pv.clone(),
                    ..Info::default()
                });
            }
            if stopped {
                break;
            }
        }
        let Some((_, best_move, mut line, ponder)) = best else { return Err(EngineError::Stopped) };
        let depth = match (request.limit, reply_depth) {
            // Each reply searched to its depth, no other limit beside it that could have ended it sooner.
            (Limit::Depth(depth), _) if !stopped && caps.is_empty() => depth,
            // Every move ended the game: nothing was searched, and the depth asked stands.
            (Limit::Depth(depth), None) if !stopped => depth,
            (_, Some(reply)) => reply + 1,
            (_, None) => 1,
        };
        (line.depth, line.seldepth) = (depth, depth);
        // Stopped before every move was valued: the best of some moves, a lower bound of the best of all.
        if searched < request.searchmoves.len() {
            line.bound = Bound::Lower;
        }
        let now = Instant::now();
        Ok(Evaluation {
            best_move,
            ponder,
            line,
            other_lines: Vec::new(),
            nodes,
            stopped,
            screened: None,
            engine: Arc::clone(&self.name),
            timing: SearchTiming { go_sent: first_go.unwrap_or(now), bestmove_read: last_read.unwrap_or(now) },
            asked: Asked::EachMove,
        })
    }

    fn start_and_read(
        &mut self,
        request: &EvalRequest,
        on_info: &mut dyn FnMut(&Info),
    ) -> Result<Evaluation, EngineError> {
        request.validate()?;
        if request.multipv != self.multipv {
            self.set_option("MultiPV", &request.multipv.to_string())?;
        }
        self.await_ready()?;
        {
            let mut state = self.link.state.lock();
            if state.stop_requested {
                return Err(EngineError::Stopped);
            }
            state.searching = true;
            let ponder = matches!(request.limit, Limit::PonderClock { .. });
            state.pondering = ponder && !state.ponderhit_requested;
            self.link.enter(&mut state, Phase::Search { ping: None });
            // Sent under the lock, so that a stop comes either before this (and is kept) or after `go`, and a
            // `ponderhit` that came before `go ponder` follows it at once.
            let mut command =
                format!("{}\n{}", request.position.uci_command_in(self.chess960), request.go_command_in(self.chess960));
            if ponder && std::mem::take(&mut state.ponderhit_requested) {
                command.push_str("\nponderhit");
            }
            self.link.send(&command)?;
        }
        let go_sent = Instant::now();
        self.read_search(request, on_info, go_sent)
    }

    fn read_search(
        &mut self,
        request: &EvalRequest,
        on_info: &mut dyn FnMut(&Info),
        go_sent: Instant,
    ) -> Result<Evaluation, EngineError> {
        let mut collector = Collector::new(request.multipv);
        let mut screened: Option<PvLine> = None;
        loop {
            match self.recv()? {
                EngineMessage::Info(info) => {
                    collector.add(&info);
                    on_info(&info);
                    let cut = if screened.is_none() {
                        request.screen.and_then(|cut| screen_cut(request, &info, cut))
                    } else {
                        None
                    };
                    // Lines after a `stop` (a cancel's) come from an iteration cut short: never a screen's answer.
                    let stop_sent = cut.is_some() && self.link.state.lock().stop_sent;
                    if let Some(line) = cut.filter(|_| !stop_sent) {
                        trace!("{} screened at depth {} ({}): stop", self.name, line.depth, line.score);
                        screened = Some(line);
                        self.stop_handle().stop();
                    }
                }
                EngineMessage::BestMove { best, ponder } => {
                    let timing = SearchTiming { go_sent, bestmove_read: Instant::now() };
                    let stopped = self.link.state.lock().stop_sent;
                    let mut evaluation =
                        collector.finish(request, &best, ponder.as_deref(), stopped, &self.name, timing)?;
                    evaluation.screened = screened;
                    return Ok(evaluation);
                }
                _ => {}
            }
        }
    }
}

/// One multipv slot: the deepest exact line, and the deepest bounded one (used only when no exact line came).
#[derive(Default)]
struct Slot {
    exact: Option<RawLine>,
    bounded: Option<RawLine>,
}

struct RawLine {
    score: Score,
    bound: Bound,
    depth: u32,
    seldepth: u32,
    pv: Vec<UciMove>,
}

/// The line at which `cut` stops the search: an exact score for the best line, at the screen's depth or deeper,
/// below its bound, with a legal first move (among `searchmoves` when they were given).
fn screen_cut(request: &EvalRequest, info: &Info, cut: ScreenCut) -> Option<PvLine> {
    let (score, bound) = info.score?;
    let depth = info.depth?;
    if bound != Bound::Exact || info.multipv.unwrap_or(1) != 1 || depth < cut.from_depth || score >= cut.below {
        return None;
    }
    // The search's own last iteration ends it anyway: no `stop` to send after its `bestmove`.
    if let Limit::Depth(limit) = request.limit
        && depth >= limit
    {
        return None;
    }
    let pos = request.position.position();
    let moves = played(pos, &info.pv);
    let first = *moves.first()?;
    if !request.searchmoves.is_empty() && !request.searchmoves.iter().any(|s| s.to_move(pos).ok() == Some(first)) {
        return None;
    }
    let pv = moves.into_iter().map(canonical).collect();
    Some(PvLine { multipv: 1, score, bound, depth, seldepth: info.seldepth.unwrap_or(depth), pv })
}

/// Gathers `info` lines into the result of a search.
struct Collector {
    multipv: u32,
    slots: BTreeMap<u32, Slot>,
    nodes: u64,
}

impl Collector {
    fn new(multipv: u32) -> Collector {
        Collector { multipv, slots: BTreeMap::new(), nodes: 0 }
    }

    fn add(&mut self, info: &Info) {
        self.nodes = self.nodes.max(info.nodes.unwrap_or(0));
        let Some((score, bound)) = info.score else {
            return;
        };
        let index = info.multipv.unwrap_or(1);
        if index == 0 || index > self.multipv {
            return;
        }
        let depth = info.depth.unwrap_or(0);
        let slot = self.slots.entry(index).or_default();
        let keep = if bound == Bound::Exact { &mut slot.exact } else { &mut slot.bounded };
        // The last line at the deepest depth wins.
        if keep.as_ref().is_none_or(|line| depth >= line.depth) {
            *keep =
                Some(RawLine { score, bound, depth, seldepth: info.seldepth.unwrap_or(depth), pv: info.pv.clone() });
        }
    }

    fn finish(
        self,
        request: &EvalRequest,
        best: &str,
        ponder: Option<&str>,
        stopped: bool,
        engine: &Arc<str>,
        timing: SearchTiming,
    ) -> Result<Evaluation, EngineError> {
        let pos = request.position.position();
        let illegal =
            |what: &'static str| EngineError::IllegalMove { mv: best.to_owned(), fen: request.position.fen(), what };
        let best_move = UciMove::from_ascii(best.as_bytes())
            .ok()
            .and_then(|uci| uci.to_move(pos).ok())
            .ok_or_else(|| illegal("illegal best move"))?;
        if !request.searchmoves.is_empty()
            && !request.searchmoves.iter().any(|s| s.to_move(pos).ok() == Some(best_move))
        {
            return Err(illegal(OUTSIDE_SEARCHMOVES));
        }
        let mut after = pos.clone();
        after.play_unchecked(best_move);
        let ponder = ponder
            .and_then(|p| UciMove::from_ascii(p.as_bytes()).ok())
            .and_then(|uci| uci.to_move(&after).ok().map(canonical));
        let mut lines = self.slots.into_iter().filter_map(|(multipv, slot)| {
            let raw = slot.exact.or(slot.bounded)?;
            Some(PvLine {
                multipv,
                score: raw.score,
                bound: raw.bound,
                depth: raw.depth,
                seldepth: raw.seldepth,
                pv: played(pos, &raw.pv).into_iter().map(canonical).collect(),
            })
        });
        let line = match lines.next().filter(|l| l.multipv == 1) {
            Some(line) => line,
            // Stopped before its first scored line: not the engine's fault.
            None if stopped => return Err(EngineError::Stopped),
            None => return Err(EngineError::NoScore),
        };
        Ok(Evaluation {
            best_move: canonical(best_move),
            ponder,
            line,
            other_lines: lines.collect(),
            nodes: self.nodes,
            stopped,
            screened: None,
            engine: Arc::clone(engine),
            timing,
            asked: Asked::AsRequested,
        })
    }
}

/// The tighter of two limits of one kind (the shallower depth, the fewer nodes, the shorter time); `None` for two of
/// different kinds, which the engine keeps side by side.
fn tighter(a: Limit, b: Limit) -> Option<Limit> {
    match (a, b) {
        (Limit::Depth(a), Limit::Depth(b)) => Some(Limit::Depth(a.min(b))),
        (Limit::Nodes(a), Limit::Nodes(b)) => Some(Limit::Nodes(a.min(b))),
        (Limit::MoveTime(a), Limit::MoveTime(b)) => Some(Limit::MoveTime(a.min(b))),
        _ => None,
    }
}
