//! `deeptree analyze` (also `deeptree grow`): reads the sources of growth (a root, a book's roots, games, tasks), the
//! budget and the clock to grow for, starts the engines and hands them to the one growth loop
//! ([`crate::search::growth`]).

mod args;
mod engines;
mod report;

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

pub use args::{AnalyzeArgs, DEFAULT_PLAY_DEPTH};
pub use engines::MAX_WORKERS_PER_CORE;

use crate::{
    config::Config,
    engine::{EnginePool, Limit},
    game::{Line, printable_path},
    interop::{played, roots::read_roots},
    logger::{Progress, StatusLine},
    search::{
        analysis::{Params, Trace},
        evaluator::PoolEvaluator,
        growth::{self, Growth, Policy, Seed, Targets, sources},
        split::{Spine, SplitError, direct_first},
    },
    store::{Store, clock::GrownFor, tasks::Task},
    uci::{depth::DepthModel, fit},
};

use super::{CommandResult, open_store};
use engines::{Engines, engine_config_of, start_groups};
use report::{Out, say};

/// Runs `deeptree analyze` on the store in `db` (created when absent). Everything that can be refused is refused
/// before anything starts: the arguments, the roots, the budget, the engines, then the store.
pub fn run(db: Option<&Path>, config: &Config, mut args: AnalyzeArgs) -> CommandResult {
    // The time budget counts from here: starting the engines is part of it.
    let started = Instant::now();
    let config = &args.over(config);
    if let Some(path) = args.from_games.take() {
        eprintln!("--from-games: read as --games, the games' exits grown and the games followed on");
        args.games = Some(path);
    }
    check_args(&args)?;
    let time = time_budget(args.time)?;
    let engines = Engines::check(config, args.insist_workers)?;
    let clock =
        args.for_clock.as_deref().map(str::parse::<fit::Clock>).transpose().map_err(|e| format!("--for: {e}"))?;
    let single = args.roots.is_none() && args.games.is_none() && !args.tasks;
    let line = if single { Some(Line::parse_in(args.fen.as_deref(), &args.moves, args.chess960)?) } else { None };
    let (book, skipped) = match &args.roots {
        Some(path) => {
            let (roots, skipped) = read_roots(path, args.chess960)?;
            for skip in &skipped {
                eprintln!("{}: {} skipped: {}", printable_path(path), skip.source, skip.error);
            }
            if roots.is_empty() {
                return Err(format!("{}: no root to grow", path.display()).into());
            }
            let repeated = roots.iter().filter(|r| r.weight > 1).count();
            if repeated > 0 {
                eprintln!(
                    "{}: {repeated} roots given more than once, each of the weight of its count",
                    printable_path(path)
                );
            }
            (roots.into_iter().map(|r| (r.line, r.source.to_string(), f64::from(r.weight))).collect(), skipped)
        }
        None => (Vec::new(), Vec::new()),
    };
    // A PGN with no game that plays is refused before the store is created: it is read up to its first such game.
    let games = match &args.games {
        Some(path) => Some(report::first_game(path)?),
        None => None,
    };
    if args.cover || args.cover_deepen.is_some() {
        eprintln!(
            "--cover: games from the roots are followed (the one growth of --roots with a clock){}",
            if args.cover_deepen.is_some() {
                "; --cover-deepen is ignored: depth is part of the priority now"
            } else {
                ""
            }
        );
    }
    let store = open_store(db, config)?;
    let stop = stop_on_ctrl_c();
    let params = params_of(config, &args, time);
    let out = Out { json: args.json };
    // Games are followed where a clock is given (or implied: --games at play depth 20, --cover at the engine depth, as
    // these did before growth had one loop); else seeds are deepened themselves.
    let implied = match (args.games.is_some(), args.cover) {
        (true, _) => Some(DEFAULT_PLAY_DEPTH),
        (false, true) => Some(config.engine_depth),
        (false, false) => None,
    };
    let play_depth = args.play_depth.or(implied);
    // The clock grown for, with its targets: written to the store once the growth has ended (see `clock_targets`).
    let mut grown_for = None;
    let targets = match (&clock, play_depth) {
        (Some(clock), _) => {
            let (timed_on, chess960) =
                timing_positions(&book, line.as_ref(), games.as_ref().and_then(|g| g.first_line()));
            // Timing searches counts against the budget, and Ctrl-C ends it as it ends growth.
            let ends = Timing { stop: &stop, deadline: time.and_then(|t| started.checked_add(t)) };
            let positions = (timed_on, args.chess960 || chess960);
            let (targets, grown) = clock_targets(&store, config, clock, &args, positions, &ends, out)?;
            // A run stopped (or out of time) while it timed its searches grows nothing: the entry stays as it was.
            grown_for = (!ends.ended()).then_some(grown);
            Some(targets)
        }
        (None, Some(0)) => return Err("--play-depth 0: give a positive depth".into()),
        (None, Some(depth)) => Some(Targets::flat(u32::from(depth))),
        (None, None) => None,
    };
    let follow = targets.is_some();
    let mut seeds: Vec<Seed> = Vec::new();
    if let Some(line) = &line {
        seeds.push(sources::single_root(line.clone(), follow));
    }
    seeds.extend(sources::book(book, follow));
    if let (Some(path), Some(games)) = (&args.games, games) {
        let at = targets.unwrap_or_else(|| Targets::flat(u32::from(DEFAULT_PLAY_DEPTH)));
        let found = report::exits_of(&store, path, games, &params, &at, &args, out)?;
        seeds.extend(played::seeds(&found));
    }
    let mut tasks: Vec<Option<Task>> = vec![None; seeds.len()];
    if args.tasks {
        let all = store.read()?.tasks()?;
        let open = sources::tasks(&all, args.chess960, params.engine_depth)?;
        if open.is_empty() {
            say(out, if all.is_empty() { "no tasks: add one with `deeptree task add`" } else { "every task is done" });
        }
        for (seed, task) in open {
            seeds.push(seed);
            tasks.push(Some(task));
        }
    }
    if seeds.is_empty() {
        return Ok(());
    }
    let chess960 = args.chess960 || seeds.iter().any(|s| s.line.chess960);
    let engine_config = engine_config_of(config, chess960);
    let configs = engines.configs(&engine_config);
    let groups = growth::groups(&seeds, configs.len());
    let (pools, spine, params) = match (args.split, &line) {
        (Some(share), Some(line)) if !follow => {
            let pool = engines.start(&engine_config)?;
            let split = Split { share, nodes: args.nodes, time, started };
            let (params, spine) = spine_first(&pool, &store, line, params, split, &stop)?;
            (vec![PoolEvaluator::new(pool)], spine, params)
        }
        _ => (start_groups(configs, groups)?, None, params),
    };
    // What starting the engines took is spent: a run that is out of time now stops at once.
    let params = params.with_time(time.map(|t| t.saturating_sub(started.elapsed())));
    let target = targets.unwrap_or_else(|| Targets::flat(u32::from(params.engine_depth) + u32::from(params.max_depth)));
    let mut policy = Policy::new(0, params.clone());
    policy.targets = target;
    policy.temperature = args.temperature.unwrap_or(policy.temperature);
    policy.beyond = args.beyond.unwrap_or(policy.beyond);
    let mut growth = Growth::new(seeds, policy);
    growth.look_ahead = config.look_ahead();
    growth.stop = stop;
    growth.trace = match &args.trace {
        Some(path) => Trace::to_file(path)?,
        None => Trace::off(),
    };
    growth.progress = StatusLine::on_stderr().map(|line| Arc::new(line) as Arc<dyn Progress>);
    let deepen_alone = single && !follow;
    if deepen_alone {
        report::header(out);
    } else {
        report::run_header(out, &growth, groups, clock.as_ref(), args.threads.unwrap_or(1));
    }
    let engine_depth = params.engine_depth;
    let on_step = |step: &growth::Step<'_>| {
        if !deepen_alone {
            report::step_row(out, step);
        }
        if let Some(Some(task)) = tasks.get(step.item.seed) {
            report::save_task_progress(&store, task, step);
        }
    };
    let on_iteration = |_: &growth::Item, row: &crate::search::analysis::Iteration| {
        if deepen_alone {
            report::iteration_row(out, row);
        }
    };
    // What `stats` walks again: the seeds games go on from, and how the walk weighs replies and aims.
    let kept = (sources::kept(&growth.seeds), Some(growth.policy.temperature), Some(growth.policy.beyond));
    let grown = growth::grow(&store, pools, growth, on_step, on_iteration)?;
    if deepen_alone {
        let analysis = report::single_report(&store, &grown, line.as_ref())?;
        return if args.json {
            report::print_json(&analysis, spine.as_ref(), args.nodes)
        } else {
            report::print_summary(&analysis, spine.as_ref(), engine_depth);
            Ok(())
        };
    }
    if let Some(mut grown_for) = grown_for {
        // What the run leaves, said by `stats`: written only now, so that a run that fails before its end leaves the
        // entry as it was, and whole, from this run's own clock and targets (another process may have written the
        // entry meanwhile). A run that followed no games (tasks alone) for the clock and targets the store was last
        // grown for keeps that run's seeds and figures: it has none of its own to say.
        let last = store.read()?.grown_for()?;
        if !(kept.0.is_empty() && last.is_some_and(|last| last.same_growth(&grown_for))) {
            grown_for.seeds = kept.0.len() as u32;
            grown_for.expected_answers = grown.expected_answers;
            grown_for.answered_share = grown.answered_share;
            (grown_for.followed, grown_for.temperature, grown_for.beyond) = kept;
            store.put_grown_for(&grown_for)?;
        }
    }
    report::print_growth(out, &grown, &skipped)
}

/// Refuses arguments that cannot run, before anything starts.
fn check_args(args: &AnalyzeArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.nodes == Some(0) {
        return Err("--nodes 0: give a positive number of nodes".into());
    }
    if args.player.is_some() && args.games.is_none() {
        return Err("--player names the side of --games' games to grow for: give --games too".into());
    }
    match args.split {
        Some(share) if !(share > 0.0 && share < 1.0) => {
            Err(format!("--split {share}: give a share of the budget between 0 and 1").into())
        }
        Some(_) if args.nodes.is_none() && args.time.is_none() => {
            Err("--split shares a budget: give --nodes or --time too".into())
        }
        _ if args.threads == Some(0) => Err("--threads 0: give at least one thread".into()),
        _ => Ok(()),
    }
}

/// `--time` as a budget. Refused before anything starts: a budget of zero (or one that is not a duration) would
/// otherwise mean no budget at all, and the analysis would run for ever.
fn time_budget(time: Option<f64>) -> Result<Option<Duration>, Box<dyn std::error::Error>> {
    match time {
        None => Ok(None),
        Some(seconds) if seconds.is_finite() && seconds > 0.0 => {
            // Past what a Duration holds, a budget is as good as none.
            Ok(Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)))
        }
        Some(seconds) => Err(format!("--time {seconds}: give a positive number of seconds").into()),
    }
}

/// Plies apart of the positions of a game that `--for` times when the sources give no root (`--games` alone): a
/// game's first 42 plies give [`fit::time_searches`] its 8 positions, from the opening into the middlegame.
const TIMED_PLIES_APART: usize = 6;

/// The positions `--for` times searches on, where the store has no depth model: the roots (a book's, or the single
/// root); with games alone, positions of the first game that plays, every [`TIMED_PLIES_APART`] plies from its start
/// (the positions the games bring, not the start position they may never have had); else the start position. With
/// whether any of them is of Chess960 (the engine is then set up for it).
fn timing_positions(
    book: &[(Line, String, f64)],
    line: Option<&Line>,
    game: Option<&Line>,
) -> (Vec<shakmaty::Chess>, bool) {
    let mut positions: Vec<shakmaty::Chess> = book.iter().map(|(l, _, _)| l.root().clone()).collect();
    positions.extend(line.map(|l| l.root().clone()));
    let mut chess960 = book.iter().any(|(l, _, _)| l.chess960) || line.is_some_and(|l| l.chess960);
    if positions.is_empty()
        && let Some(game) = game
    {
        positions.extend(game.positions.iter().step_by(TIMED_PLIES_APART).cloned());
        chess960 = game.chess960;
    }
    if positions.is_empty() {
        positions.push(shakmaty::Chess::default());
    }
    (positions, chess960)
}

/// What ends the timing of searches for `--for` before its end: the run's stop flag and its budget's deadline.
struct Timing<'a> {
    stop: &'a AtomicBool,
    deadline: Option<Instant>,
}

impl Timing<'_> {
    /// Stopped, or out of time.
    fn ended(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// The target depths for `clock`: from the store's depth model where it has one; else from searches timed at that
/// clock on `positions` (stored as the store's fit; `chess960`: the engine set up for Chess960; where none was timed,
/// the default model, stored nowhere). Said, with the entry of the clock the tree is grown for, which the caller
/// stores once the growth has ended.
fn clock_targets(
    store: &Store,
    config: &Config,
    clock: &fit::Clock,
    args: &AnalyzeArgs,
    (positions, chess960): (Vec<shakmaty::Chess>, bool),
    ends: &Timing<'_>,
    out: Out,
) -> Result<(Targets, GrownFor), Box<dyn std::error::Error>> {
    let threads = args.threads.unwrap_or(1);
    let model = match store.read()?.depth_fit_for(threads)? {
        Some(fit) => {
            say(out, &format!("--for {clock}: the store's depth model, fitted to {} searches", fit.samples));
            DepthModel::from_fit(&fit)
        }
        _ => {
            let config = engine_config_of(config, chess960).with_option("Threads", threads);
            let pool = EnginePool::uniform(&config, 1).map_err(|e| format!("--for: cannot start the engine: {e}"))?;
            let searchable = fit::searchable(positions);
            let timed = fit::time_searches(&pool, &searchable, clock, &|| ends.ended())?;
            let on = if threads == 1 { "1 thread".to_owned() } else { format!("{threads} threads") };
            if timed.searches.is_empty() {
                // Nothing timed (every position mate or stalemate, or stopped or out of time first): no fit is
                // stored, so that the next run times its searches; this one goes on with the default model.
                let why = if searchable.is_empty() {
                    "no position with a move to time"
                } else if ends.stop.load(Ordering::Relaxed) {
                    "stopped"
                } else {
                    "out of time"
                };
                say(out, &format!("--for {clock}: no search timed on {on} ({why}): the default depth model"));
            } else {
                let depths: Vec<String> =
                    timed.searches.iter().map(|(d, n, s)| format!("depth {d} ({n} nodes, {s:.2} s)")).collect();
                say(out, &format!("--for {clock}: searches timed on {on}: {}", depths.join(", ")));
                store.put_depth_fit(&timed.model.fit(&config.command, threads))?;
            }
            timed.model
        }
    };
    let margin = config.tree_depth_margin;
    let by_phase = fit::targets(&model, clock, margin);
    let engine_depth = config.engine_depth;
    say(
        out,
        &format!(
            "--for {clock}: target depth {} (27 men or more), {}, {}, {}, {} (8 or fewer), TreeDepthMargin {margin}",
            by_phase[0], by_phase[1], by_phase[2], by_phase[3], by_phase[4]
        ),
    );
    let grown = GrownFor {
        clock: clock.to_string(),
        threads,
        margin,
        engine_depth,
        targets: by_phase,
        seeds: 0,
        expected_answers: 0.0,
        answered_share: 0.0,
        followed: Vec::new(),
        temperature: None,
        beyond: None,
    };
    Ok((Targets::by_men(|men| by_phase[fit::phase_index(men)]), grown))
}

/// A stop flag that Ctrl-C sets from now on, and SIGTERM and SIGHUP (a `kill`, a service stop, a closed terminal):
/// it stops the analysis cleanly, storing the pass under way (engines run in their own process groups).
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let handler_stop = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || handler_stop.store(true, Ordering::Relaxed)) {
        log::warn!("Ctrl-C will not stop the analysis cleanly: {e}");
    }
    stop
}

/// The search's parameters: the settings', and the deepest software depth of a seed deepened itself (by default 4,
/// every depth with a budget or tasks).
fn params_of(config: &Config, args: &AnalyzeArgs, time: Option<Duration>) -> Params {
    let budget = time.is_some() || args.nodes.is_some() || args.tasks;
    let default_max = if budget { u8::MAX - 1 } else { 4 };
    Params::from(config).with_max_depth(args.max_depth.unwrap_or(default_max)).with_time(time).with_nodes(args.nodes)
}

/// Deep Blue's split: the share of the node or time budget the direct search spends first.
struct Split {
    share: f64,
    nodes: Option<u64>,
    time: Option<Duration>,
    /// When the command began.
    started: Instant,
}

/// Deep Blue's split: the direct search's share of the budget is spent first, and its nodes and time count. Returns
/// the parameters for the rest of the budget, and the spine the direct search stored.
fn spine_first(
    pool: &EnginePool,
    store: &Store,
    line: &Line,
    params: Params,
    split: Split,
    stop: &Arc<AtomicBool>,
) -> Result<(Params, Option<Spine>), Box<dyn std::error::Error>> {
    let Split { share, nodes, time, started } = split;
    let limit = match (nodes, time) {
        (Some(n), _) => Limit::Nodes(((n as f64 * share) as u64).max(1)),
        (None, Some(t)) => Limit::MoveTime(t.saturating_sub(started.elapsed()).mul_f64(share)),
        (None, None) => return Err("--split shares a budget: give --nodes or --time too".into()),
    };
    match direct_first(pool, store, line, limit, params.engine_depth, stop) {
        Ok(spine) => {
            let rest = nodes.map(|n| n.saturating_sub(spine.nodes));
            Ok((params.with_nodes(rest), Some(spine)))
        }
        // Ctrl-C: the analysis below stops at once and reports what is stored.
        Err(SplitError::Stopped) => Ok((params, None)),
        Err(e) => Err(format!("--split: {e}").into()),
    }
}
