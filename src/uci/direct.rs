//! The direct engine: one inner engine with all of `Threads`, which searches every move the tree does not answer.
//!
//! With an empty tree deeptree is this engine, so the relay must cost nothing: the engine is started and configured
//! before the first `go` (at `uci` and `isready`), takes the GUI's `setoption` and `ucinewgame` as a bare engine would,
//! gets the GUI's clocks unchanged, and is given the relay's own latency through its `Move Overhead` option. Between
//! the GUI's `go` and the engine's, and between the engine's `bestmove` and deeptree's, nothing is stored or logged:
//! the result is stored after `bestmove` is out.

use crate::game::Line;
use std::{collections::VecDeque, time::Duration};

use shakmaty::{Chess, Position, uci::UciMove};

use super::{
    answer::{Answerer, DepthSample, Outcome, RelayHops, bestmove, fallback, store_game_line},
    command::Go,
    control::{Context, Control},
    depth::Phase,
    message::Info,
    time::{Overhead, share},
};
use crate::{
    engine::{
        Engine, EngineConfig, EngineError, EnginePosition, EvalRequest, Evaluation, Limit, STOP_ANSWER, Searchmoves,
    },
    notation::{canonical_uci, legal_line},
    score::Bound,
    store::answer::{Answer, Searched},
};

/// The direct engine's process and what it has been told.
#[derive(Default)]
pub struct DirectSlot {
    engine: Option<Engine>,
    /// The command line the running engine was started with.
    command: String,
    /// Option values the running engine has been sent, under the names it declared.
    applied: Vec<(String, String)>,
    /// A `ucinewgame` from the GUI that the engine has not been sent yet.
    new_game: bool,
    /// Buttons the GUI pressed (`Clear Hash`) that the engine has not been sent yet: a press is an act, sent once
    /// for each time the GUI sends it, and never kept as a value.
    presses: Vec<String>,
}

impl DirectSlot {
    /// The engine, started if needed, with `config`'s options and the overhead applied (only what changed is sent)
    /// and a pending `ucinewgame` sent; with whether it was quiet (nothing started, nothing sent). It does not wait
    /// for the engine: [`Engine::sync`] does, and every search does before its `go`.
    pub fn prepare(&mut self, config: &EngineConfig, overhead: Overhead) -> Result<(&mut Engine, bool), EngineError> {
        if self.engine.is_some() && self.command != config.command {
            self.engine = None;
        }
        let started = self.engine.is_none();
        if started {
            let engine = Engine::spawn(config)?;
            self.command = config.command.clone();
            self.applied = config.options.clone();
            self.engine = Some(engine);
        }
        let engine = self.engine.as_mut().ok_or(EngineError::Eof)?;
        let mut wanted = config.options.clone();
        wanted.extend(overhead.option(engine.identity()));
        let new_game = self.new_game;
        let presses = std::mem::take(&mut self.presses);
        let configured = configure(engine, &mut self.applied, &wanted).and_then(|sent| {
            if new_game {
                engine.begin_new_game()?;
            }
            for name in &presses {
                match engine.set_option(name, "") {
                    Err(e) if e.is_engine_fault() => return Err(e),
                    Err(e) => crate::engine::note_option_not_set(&engine.identity().name, name, &e),
                    Ok(()) => {}
                }
            }
            Ok(sent || !presses.is_empty())
        });
        match configured {
            Ok(sent) => {
                self.new_game = false;
                let quiet = !started && !sent && !new_game;
                self.engine.as_mut().map(|engine| (engine, quiet)).ok_or(EngineError::Eof)
            }
            Err(e) => {
                if e.is_engine_fault() {
                    self.engine = None;
                }
                Err(e)
            }
        }
    }

    /// The GUI's `ucinewgame`: sent with the next [`DirectSlot::prepare`] (a fresh process gets it too).
    pub fn new_game(&mut self) {
        self.new_game = true;
    }

    /// The GUI pressed the engine's button `name`: sent with the next [`DirectSlot::prepare`].
    pub fn press(&mut self, name: &str) {
        self.presses.push(name.to_owned());
    }

    /// Ends the engine (a new command line, a fault, or the end of the session).
    pub fn close(&mut self) {
        self.engine = None;
        self.applied.clear();
    }

    /// Takes `other`'s engine where this slot has none (an engine coming back from a search the session stopped
    /// waiting for), keeping a `ucinewgame` either still owes; otherwise `other`'s engine is ended.
    pub fn take_over(&mut self, other: DirectSlot) {
        if self.engine.is_none() {
            self.put_back(other);
        }
    }

    /// Puts back the slot a search borrowed, keeping a `ucinewgame` and the presses that came meanwhile.
    pub fn put_back(&mut self, lent: DirectSlot) {
        let (new_game, presses) = (self.new_game || lent.new_game, std::mem::take(&mut self.presses));
        *self = lent;
        self.new_game = new_game;
        self.presses.extend(presses);
    }
}

/// Sends the options of `wanted` whose values differ from what the engine was told; true when it sent any.
fn configure(
    engine: &mut Engine,
    applied: &mut Vec<(String, String)>,
    wanted: &[(String, String)],
) -> Result<bool, EngineError> {
    let mut sent = false;
    for (name, value) in wanted {
        if applied.iter().any(|(n, v)| n.eq_ignore_ascii_case(name) && v == value) {
            continue;
        }
        match engine.set_option(name, value) {
            Err(e) if e.is_engine_fault() => return Err(e),
            Err(e) => crate::engine::note_option_not_set(&engine.identity().name, name, &e),
            Ok(()) => {}
        }
        applied.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        applied.push((name.clone(), value.clone()));
        sent = true;
    }
    Ok(sent)
}

/// The relay's own latency, hop by hop, over the last searches.
#[derive(Default)]
pub struct RelayClock {
    hops: Hops,
}

#[derive(Default)]
struct Hops {
    /// From reading the GUI's `go` to writing the engine's.
    go: VecDeque<Duration>,
    /// From reading the engine's `bestmove` to writing deeptree's.
    bestmove: VecDeque<Duration>,
}

/// Searches the relay clock remembers.
const RELAY_SAMPLES: usize = 256;

impl RelayClock {
    pub fn record(&mut self, go: Duration, bestmove: Duration) {
        let Hops { go: go_hops, bestmove: bestmove_hops } = &mut self.hops;
        for (queue, hop) in [(go_hops, go), (bestmove_hops, bestmove)] {
            if queue.len() == RELAY_SAMPLES {
                queue.pop_front();
            }
            queue.push_back(hop);
        }
    }

    /// What the relay adds to a move, in whole milliseconds (rounded to the nearest): the typical (median) `go` hop
    /// plus the typical `bestmove` hop; 0 before anything is measured.
    ///
    /// The median, not a high percentile: engines multiply their overhead by the moves left to the time horizon
    /// (Stockfish by 52 with no `movestogo`), so each millisecond added takes some 5% of the thinking time of a
    /// 1 s + 0.01 s game. The engine's own overhead (the GUI's value, or its default) covers rare delays, as it does
    /// for the bare engine.
    pub fn margin_ms(&self) -> u64 {
        let hops = &self.hops;
        let total = percentile(&hops.go, 0.5) + percentile(&hops.bestmove, 0.5);
        ((total.as_micros() + 500) / 1000) as u64
    }
}

fn percentile(samples: &VecDeque<Duration>, p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted: Vec<Duration> = samples.iter().copied().collect();
    sorted.sort_unstable();
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// The inner engine's limit for a `go`: the GUI's own, clocks unchanged. A clock comes first, then `movetime`, then
/// `depth` and `nodes`: the GUI's other limits go beside it ([`caps_of`]), so that a clock is never dropped for a
/// depth (`go wtime 3000 btime 3000 depth 25` must not search to depth 25 whatever the clock).
pub(super) fn limit_of(go: &Go, engine_depth: u8) -> Limit {
    if go.infinite && !go.ponder {
        // Until the GUI's `stop` (the tree's growth takes `go infinite` where it can grow).
        Limit::Infinite
    } else if go.is_timed() {
        // The game clock as the GUI sent it: the engine manages its own time, and `Move Overhead` covers the relay.
        let (wtime, btime) = (go.wtime.or(go.btime).unwrap_or(0), go.btime.or(go.wtime).unwrap_or(0));
        let (winc, binc, movestogo) = (go.winc.unwrap_or(0), go.binc.unwrap_or(0), go.movestogo);
        if go.ponder {
            // The engine ponders on the opponent's time, as the bare engine would: `ponderhit` starts its clock.
            Limit::PonderClock { wtime, btime, winc, binc, movestogo }
        } else {
            Limit::Clock { wtime, btime, winc, binc, movestogo }
        }
    } else {
        // The first of the GUI's own limits, in the order movetime, depth, nodes, mate; with none, the engine depth.
        gui_limits(go).into_iter().flatten().next().unwrap_or(Limit::Depth(u32::from(engine_depth)))
    }
}

/// The GUI's own limits, each clamped to what an engine takes, in the order [`limit_of`] prefers them: `movetime`,
/// `depth`, `nodes` and `mate` (a `mate` search runs until the engine finds the mate or is stopped, as the bare engine
/// would run it).
fn gui_limits(go: &Go) -> [Option<Limit>; 4] {
    [
        go.movetime.map(|ms| Limit::MoveTime(Duration::from_millis(ms.max(1)))),
        go.depth.map(|depth| Limit::Depth(depth.clamp(1, 250) as u32)),
        go.nodes.map(|nodes| Limit::Nodes(nodes.max(1))),
        go.mate.map(|mate| Limit::Mate(mate.clamp(1, u64::from(u32::MAX)) as u32)),
    ]
}

/// The GUI's limits that go to the engine beside [`limit_of`]'s: its `movetime`, `depth`, `nodes` and `mate` other
/// than the one that limit is. The engine ends the search at whichever it meets first.
pub(super) fn caps_of(go: &Go, limit: Limit) -> Vec<Limit> {
    gui_limits(go).into_iter().flatten().filter(|cap| *cap != limit).collect()
}

/// A search by the direct engine. The outcome is returned the moment the engine's `bestmove` comes (the session writes
/// it); what the search found is stored after that, by the [`Aftermath`].
pub fn direct(
    ctx: &Context,
    slot: &mut DirectSlot,
    line: &Line,
    go: &Go,
    searchmoves: &[UciMove],
    control: &mut Control,
) -> (Outcome, Aftermath) {
    let limit = limit_of(go, ctx.options.config.engine_depth);
    let request = match engine_request(line, limit, searchmoves, ctx.options.multipv) {
        Ok(request) => EvalRequest { caps: caps_of(go, limit), ..request },
        Err(e) => {
            return (
                fallback(ctx, line, searchmoves, Some(Info::error(format!("cannot search: {e}")))),
                Aftermath::NONE,
            );
        }
    };
    let (engine, quiet) = match slot.prepare(&ctx.config_direct, ctx.overhead) {
        Ok(prepared) => prepared,
        Err(e) => {
            let problem = Info::error(format!("inner engine '{}' unavailable: {e}", ctx.config_direct.command));
            return (fallback(ctx, line, searchmoves, Some(problem)), Aftermath::NONE);
        }
    };
    // The relay's latency is measured only where the engine was ready: a start or a `setoption` is not the relay's.
    let measured = engine.is_synced();
    control.stoppable(engine.stop_handle());
    if control.stopped() {
        engine.stop_handle().stop();
    }
    let (root, chess960) = (line.root(), ctx.chess960);
    // An engine that does not keep to searchmoves is asked each allowed move alone: its lines are the session's
    // (the best so far after each move), and an info string says so, before the search where it is known, after it
    // where this search found it out.
    let each_move = !searchmoves.is_empty() && ctx.options.multipv <= 1;
    let method = |engine: &Engine| {
        let how = match engine.searchmoves_method() {
            Searchmoves::MultiPv => {
                "the moves allowed are asked through MultiPV, or each alone where fewer are allowed than its lines \
                 would need; the lines show the best so far"
            }
            _ => "each allowed move is searched alone, one ply shallower; the lines show the best so far",
        };
        Info::string(format!("{} does not keep to searchmoves: {how}", engine.identity().name))
    };
    let known_each_move = each_move && engine.ignores_searchmoves();
    if known_each_move {
        ctx.out.send(method(engine));
    }
    // The first move of the last relayed line of multipv 1 (stored form): the last best line before `bestmove` must
    // start with its move. The engine's other lines (MultiPV) come after its line 1 in each batch and leave it be:
    // the engine's final batch, with its multipv, is then the last thing before `bestmove`, as GUIs that show k
    // lines expect, and no line without multipv is added after it.
    let mut last_head: Option<UciMove> = None;
    let mut relay = |info: &Info| {
        if let Some((info, head)) = relayed(info, root, chess960) {
            // A line outside searchmoves is no line of this search (an engine that ignores them, before it is found
            // out): the GUI would show a move the answer may not play.
            if head.is_some_and(|head| !searchmoves.is_empty() && !searchmoves.contains(&head)) {
                return;
            }
            if info.multipv.unwrap_or(1) == 1 {
                last_head = head;
            }
            ctx.out.send(info);
        }
    };
    // A search nothing can stop any more (the quick one after a spent `stop`) must end soon all the same.
    let mut result = if control.is_quiet() {
        search_soon(engine, &request, &mut relay)
    } else {
        engine.search(&request, &mut relay)
    };
    let found_each_move = (each_move && !known_each_move && engine.ignores_searchmoves()).then(|| method(engine));
    if matches!(result, Err(EngineError::Stopped)) {
        // Stopped before it began (a `stop` right behind the `go`): the quickest real search still answers with a
        // searched move, as the bare engine would, rather than an unsearched one.
        if let Ok(quick) = engine_request(line, Limit::Depth(1), searchmoves, ctx.options.multipv) {
            result = search_soon(engine, &quick, &mut relay);
        }
    }
    match result {
        Ok(evaluation) => {
            let closing = (last_head != Some(evaluation.best_move)).then(|| closing_info(&evaluation, root, chess960));
            let infos: Vec<Info> = found_each_move.into_iter().chain(closing).collect();
            // The engine's ponder move, else its line's second move, Ponder on or off, as Stockfish gives one
            // whenever its line has it.
            let pv = &evaluation.line.pv;
            let ponder =
                evaluation.ponder.or_else(|| pv.get(1).copied().filter(|_| pv.first() == Some(&evaluation.best_move)));
            let timing = evaluation.timing;
            // A search of every move the analyst did not exclude is the position's, as the tree values it (§6.4): it
            // is learnt from and stored; one the GUI narrowed is not.
            let whole = searchmoves.is_empty() || only_exclusions(ctx, root, searchmoves);
            let learns = whole && !evaluation.stopped;
            let sample = learns.then(|| DepthSample {
                phase: Phase::of(root),
                nodes: evaluation.nodes,
                time: timing.engine_time(),
                depth: evaluation.depth(),
                // A clock's search alone teaches the clock: one a depth, node or mate limit of the GUI's may have ended
                // early would teach it to expect less time than a clock gives.
                clock_share: if go.movetime.is_none() && go.depth.is_none() && go.nodes.is_none() && go.mate.is_none() {
                    share(go, root.turn().is_white())
                } else {
                    None
                },
            });
            let outcome = Outcome {
                by: Answerer::Direct,
                infos,
                best: bestmove(root, evaluation.best_move, ponder, chess960),
                relay: (quiet && measured).then_some(RelayHops { received: control.received, timing }),
                sample,
                tree_fallback: false,
                searched: Some((evaluation.score(), evaluation.depth())),
            };
            // A score the game's history shaped (a repetition or the fifty-move rule within reach) is the game's, not
            // the position's: not stored (§3.7).
            let stores = ctx.options.config.store_searches
                && learns
                && evaluation.bound() == Bound::Exact
                && !line.history_shapes_score();
            let aftermath = Aftermath {
                game_line: true,
                direct_result: stores.then(|| (evaluation, ctx.config_direct.command.clone())),
            };
            (outcome, aftermath)
        }
        Err(e) => {
            if e.is_engine_fault() {
                slot.close(); // respawned at the next search
            }
            let problem =
                (!matches!(e, EngineError::Stopped)).then(|| Info::error(format!("inner engine search failed: {e}")));
            // The engine died or hung mid-search: the first move of the last line it sent is its best move so far.
            if let Some(head) = last_head.filter(|m| searchmoves.is_empty() || searchmoves.contains(m)) {
                let mut infos: Vec<Info> = problem.into_iter().collect();
                infos.push(Info::string("playing the first move of the engine's last line"));
                let outcome = Outcome {
                    by: Answerer::Fallback,
                    infos,
                    best: bestmove(root, head, None, chess960),
                    relay: None,
                    sample: None,
                    tree_fallback: false,
                    searched: None,
                };
                return (outcome, Aftermath::GAME_LINE);
            }
            (fallback(ctx, line, searchmoves, problem), Aftermath::NONE)
        }
    }
}

/// Whether `searchmoves` are exactly the moves the analyst left at `root` (every move but those excluded): a
/// search of them is a search of the position as the tree values it.
fn only_exclusions(ctx: &Context, root: &Chess, searchmoves: &[UciMove]) -> bool {
    let Some(store) = &ctx.store else { return false };
    match store.read().and_then(|view| view.node(crate::store::key::PositionKey::of(root))) {
        Ok(node) => {
            let searchable = crate::store::marks::searchable_moves(root, node.as_ref());
            !searchable.is_empty() && searchable == searchmoves
        }
        Err(_) => false,
    }
}

/// A search that must end soon, as the quick depth-1 one after a `stop`: stopped after [`STOP_ANSWER`] should it
/// still run, so that an engine that ignores `stop` too is killed a second later and the search ends with an error.
fn search_soon(
    engine: &mut Engine,
    request: &EvalRequest,
    relay: &mut dyn FnMut(&Info),
) -> Result<Evaluation, EngineError> {
    let handle = engine.stop_handle();
    let (done, finished) = crossbeam_channel::bounded::<()>(0);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            if let Err(crossbeam_channel::RecvTimeoutError::Timeout) = finished.recv_timeout(STOP_ANSWER) {
                handle.stop();
            }
        });
        let result = engine.search(request, relay);
        drop(done);
        result
    })
}

/// What a search stores once the GUI has its move.
#[derive(Debug)]
pub struct Aftermath {
    /// The game's moves, as edges.
    pub game_line: bool,
    /// A direct search's result as its position's evaluation, with the engine's command line.
    pub direct_result: Option<(Evaluation, String)>,
}

impl Aftermath {
    pub const NONE: Aftermath = Aftermath { game_line: false, direct_result: None };

    /// Stores the game's moves (the tree then knows its repetitions).
    pub const GAME_LINE: Aftermath = Aftermath { game_line: true, direct_result: None };

    pub fn run(self, ctx: &Context, line: &Line) {
        // A store whose disk failed takes nothing more: said once, and nothing is tried.
        if ctx.growth_paused() {
            return;
        }
        if self.game_line {
            store_game_line(ctx, line);
        }
        if let Some((evaluation, command)) = &self.direct_result {
            store_direct_result(ctx, line.root(), evaluation, command);
        }
    }
}

/// The `info` line sent before `bestmove` when the engine's last line did not start with its best move: the
/// engine's principal variation when it starts with the best move, else the best move alone.
fn closing_info(evaluation: &Evaluation, root: &Chess, chess960: bool) -> Info {
    let pv = &evaluation.line.pv;
    let pv = if pv.first() == Some(&evaluation.best_move) { pv.as_slice() } else { &[evaluation.best_move][..] };
    Info {
        depth: Some(evaluation.depth().max(1)),
        score: Some((evaluation.score(), evaluation.bound())),
        nodes: Some(evaluation.nodes),
        time_ms: Some(evaluation.timing.engine_time().as_millis() as u64),
        pv: legal_line(root, pv, chess960),
        ..Info::default()
    }
}

/// The inner engine's request for the game's position (start position and moves, so it sees the repetitions).
pub fn engine_request(
    line: &Line,
    limit: Limit,
    searchmoves: &[UciMove],
    multipv: u32,
) -> Result<EvalRequest, EngineError> {
    let position = EnginePosition::new(line.start.clone(), line.moves.clone())?;
    EvalRequest::new(position, limit).with_searchmoves(searchmoves.to_vec()).map(|r| r.with_multipv(multipv))
}

/// An inner engine's `info` line as relayed (without `string`s and currmove noise), its PV checked legal from `root`
/// (cut at its first illegal move) and written in the GUI's notation; with the PV's first move in stored form.
fn relayed(info: &Info, root: &Chess, chess960: bool) -> Option<(Info, Option<UciMove>)> {
    let pv = legal_line(root, &info.pv, chess960);
    let head = pv.first().and_then(|m| canonical_uci(root, m));
    let relayed = Info {
        depth: Some(info.depth?),
        seldepth: info.seldepth,
        multipv: info.multipv,
        score: Some(info.score?),
        // The engine's own win rates (`UCI_ShowWDL` forwarded), as they are: the session drops them when it is off.
        wdl: info.wdl,
        nodes: info.nodes,
        nps: info.nps,
        time_ms: info.time_ms,
        pv,
        // hashfull, tbhits, currmove and string are the engine's own, not relayed.
        ..Info::default()
    };
    Some((relayed, head))
}

/// Stores a direct search's result as the position's evaluation.
fn store_direct_result(ctx: &Context, root: &Chess, evaluation: &Evaluation, command: &str) {
    let Some(store) = &ctx.store else { return };
    // The engine is numbered in the store's list once (a write only the first time it is seen).
    let name = crate::engine::engine_label(&evaluation.engine, command);
    let engine = match store.engine_numbers(std::slice::from_ref(&name)) {
        Ok(numbers) => numbers.first().copied().flatten(),
        Err(e) => {
            log::warn!("engine {name} not added to the store's list: {e}");
            None
        }
    };
    match Answer::of_evaluation(evaluation, Some(name)).change(root, Searched::Position, engine) {
        Ok(change) => {
            // Not waited for: the next move's search does not depend on it.
            let _ = store.writer().submit(vec![change]);
        }
        Err(e) => log::warn!("direct search result not stored: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_line_keeps_the_engines_own_win_rates() {
        let crate::engine::protocol::EngineMessage::Info(info) = crate::engine::protocol::parse_line(
            "info depth 12 seldepth 15 multipv 1 score cp 35 wdl 61 930 9 nodes 9000 hashfull 3 pv e2e4 e7e5",
        ) else {
            panic!("an info line")
        };
        let (relayed, head) = relayed(&info, &Chess::default(), false).expect("relayed");
        assert_eq!(
            relayed.to_string(),
            "info depth 12 seldepth 15 multipv 1 score cp 35 wdl 61 930 9 nodes 9000 pv e2e4 e7e5"
        );
        assert_eq!(head, "e2e4".parse().ok());
    }

    #[test]
    fn clocks_go_to_the_engine_unchanged() {
        let go = Go { wtime: Some(5000), btime: Some(4870), winc: Some(50), binc: Some(50), ..Go::default() };
        let Limit::Clock { wtime, btime, winc, binc, movestogo } = limit_of(&go, 18) else { panic!("a clock") };
        assert_eq!((wtime, btime, winc, binc, movestogo), (5000, 4870, 50, 50, None));
        let go = Go { movetime: Some(200), ..Go::default() };
        assert!(matches!(limit_of(&go, 18), Limit::MoveTime(t) if t == Duration::from_millis(200)));
    }

    #[test]
    fn a_pondering_clock_goes_to_the_engine_as_go_ponder_and_a_ponder_without_a_clock_does_not() {
        let go = Go { ponder: true, wtime: Some(5000), btime: Some(4870), winc: Some(50), ..Go::default() };
        let Limit::PonderClock { wtime, btime, winc, binc, movestogo } = limit_of(&go, 18) else { panic!("ponder") };
        assert_eq!((wtime, btime, winc, binc, movestogo), (5000, 4870, 50, 0, None));
        let start = crate::engine::EnginePosition::new(Chess::default(), Vec::new()).unwrap();
        let request = EvalRequest::new(start, limit_of(&go, 18));
        assert_eq!(request.go_command_in(false), "go ponder wtime 5000 btime 4870 winc 50 binc 0");
        let go = Go { ponder: true, depth: Some(12), ..Go::default() };
        assert!(matches!(limit_of(&go, 18), Limit::Depth(12)));
    }

    #[test]
    fn a_clock_with_a_depth_or_nodes_keeps_both() {
        let start = || crate::engine::EnginePosition::new(Chess::default(), Vec::new()).unwrap();
        let command = |go: &Go| {
            let limit = limit_of(go, 18);
            EvalRequest { caps: caps_of(go, limit), ..EvalRequest::new(start(), limit) }.go_command_in(false)
        };
        let go = Go { wtime: Some(3000), btime: Some(3000), depth: Some(25), ..Go::default() };
        assert_eq!(command(&go), "go wtime 3000 btime 3000 winc 0 binc 0 depth 25");
        let go = Go { movetime: Some(500), nodes: Some(20_000), depth: Some(9), ..Go::default() };
        assert_eq!(command(&go), "go movetime 500 depth 9 nodes 20000");
        let go = Go { depth: Some(9), nodes: Some(20_000), ..Go::default() };
        assert_eq!(command(&go), "go depth 9 nodes 20000");
        assert_eq!(command(&Go { depth: Some(9), ..Go::default() }), "go depth 9");
        assert_eq!(command(&Go { mate: Some(3), ..Go::default() }), "go mate 3");
        let go = Go { mate: Some(3), wtime: Some(3000), btime: Some(3000), ..Go::default() };
        assert_eq!(command(&go), "go wtime 3000 btime 3000 winc 0 binc 0 mate 3");
    }

    #[test]
    fn the_relay_margin_is_its_typical_latency_to_the_nearest_millisecond() {
        let mut clock = RelayClock::default();
        assert_eq!(clock.margin_ms(), 0, "nothing measured, nothing added");
        for _ in 0..100 {
            clock.record(Duration::from_micros(150), Duration::from_micros(80));
        }
        assert_eq!(clock.margin_ms(), 0, "0.23 ms is no whole millisecond");
        for _ in 0..10 {
            // Rare delays do not move the median.
            clock.record(Duration::from_millis(900), Duration::from_millis(900));
        }
        assert_eq!(clock.margin_ms(), 0);
        for _ in 0..200 {
            // A relay over a network: 1.1 ms each way.
            clock.record(Duration::from_micros(1100), Duration::from_micros(1100));
        }
        assert_eq!(clock.margin_ms(), 2);
    }
}
