//! What `deeptree analyze` says: the rows of a root deepened alone (as before growth had sources), the lines of a
//! growth run (each item grown with its priority and terms), the games' exits, and the JSON reports.

use std::{fs::File, io::BufReader, path::Path};

use crate::{
    game::printable_path,
    interop::{
        played::{Exits, Games, exits_of_games},
        roots::SkippedRoot,
    },
    search::{
        analysis::{Iteration, Params, Report},
        growth::{Growth, GrowthReport, Step, Targets},
        split::Spine,
    },
    store::{Store, key::PositionKey, tasks::Task},
    uci::fit::Clock,
};

use super::{AnalyzeArgs, CommandResult};

/// `println!` that does not panic on a closed stdout (`deeptree analyze --tasks | head`): the growth goes on and
/// keeps what it stores, its task's spent seconds included; only the lines are lost.
macro_rules! out_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Where the command's lines go: stdout, or stderr where stdout holds the one JSON object.
#[derive(Debug, Clone, Copy)]
pub(super) struct Out {
    pub json: bool,
}

/// A line of text: on stdout, or on stderr with `--json`.
pub(super) fn say(out: Out, text: &str) {
    if out.json {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    } else {
        out_line!("{text}")
    }
}

/// The header of the rows of a root deepened alone.
pub(super) fn header(out: Out) {
    if !out.json {
        out_line!(
            "{:>6} {:>9} {:>9} {:>11} {:>10} {:>9}",
            "depth",
            "software",
            "combined",
            "evaluations",
            "positions",
            "seconds"
        );
    }
}

/// A row for each software depth settled (on stdout under the header, or on stderr with `--json`).
pub(super) fn iteration_row(out: Out, row: &Iteration) {
    let text = format!(
        "{:>6} {:>9} {:>9} {:>11} {:>10} {:>9.1}",
        row.software_depth,
        format!("{}-{}", row.min_depth, row.max_depth),
        format!("{}-{}", row.combined_min, row.combined_max),
        row.evaluations,
        row.positions,
        row.elapsed_seconds
    );
    say(out, &text);
}

/// What a growth run is about to do: its seeds, its target and its engines.
pub(super) fn run_header(out: Out, growth: &Growth, groups: usize, clock: Option<&Clock>, threads: u32) {
    let followed = growth.seeds.iter().filter(|s| s.follow).count();
    let (low, high) = growth.policy.targets.range();
    let target = match (followed, low == high) {
        (0, _) => format!("each up to software depth {}", growth.policy.params.max_depth),
        (_, true) => format!("target depth {low}, aim {}", low + growth.policy.beyond),
        (_, false) => format!("target depth {low} to {high}, aim {} plies past it", growth.policy.beyond),
    };
    let clock =
        clock.map_or(String::new(), |c| format!(" for {c} on {threads} thread{}", if threads == 1 { "" } else { "s" }));
    say(
        out,
        &format!(
            "growth: {} seeds ({followed} with games followed, {} deepened themselves), {target}{clock}, engine depth \
             {}, {groups} groups of engines{}",
            growth.seeds.len(),
            growth.seeds.len() - followed,
            growth.policy.params.engine_depth,
            growth.policy.params.time.map_or(String::new(), |t| format!(", {:.0} s", t.as_secs_f64()))
        ),
    );
}

/// One line per item grown: the choice with its terms, and what its search did.
pub(super) fn step_row(out: Out, step: &Step<'_>) {
    let item = step.item;
    let kind = item.kind.name();
    let (shown, lack) = item.terms.shown();
    let settled = match (item.kind, step.report.settled_depth) {
        (crate::search::growth::Kind::Seed, Some(depth)) => format!(", settled depth {depth}"),
        (crate::search::growth::Kind::Seed, None) => ", no depth settled".to_owned(),
        _ => String::new(),
    };
    say(
        out,
        &format!(
            "grow {:>5}: priority {} = reach {:.4} x 2^{:<2} (known {:>2}, {}) {kind:<15} ply {:>2} of {} to \
             software depth {} at engine depth {}: {} evaluations, {:.1} s{settled}: {}",
            step.number,
            shown_priority(shown),
            item.terms.reach,
            lack,
            item.terms.known,
            item.terms.depths(),
            item.ply,
            step.seed.label,
            item.settle,
            item.engine_depth,
            step.report.evaluations,
            step.seconds,
            shakmaty::fen::Fen::from_position(item.position(), shakmaty::EnPassantMode::Legal)
        ),
    );
}

/// A priority as a step line shows it: 4 decimals, or 4 significant digits where those would show none.
fn shown_priority(priority: f64) -> String {
    if priority >= 1e-3 { format!("{priority:.4}") } else { format!("{priority:.3e}") }
}

/// Saves a task's progress after a step of its seed: what the step added (its seconds and evaluations) is added to
/// the task as the store holds it now; a failure is logged, and the run goes on.
pub(super) fn save_task_progress(store: &Store, task: &Task, step: &Step<'_>) {
    let settled = step.report.settled_depth.filter(|_| step.item.kind == crate::search::growth::Kind::Seed);
    if let Err(e) = store.add_task_progress(task.id, step.seconds, step.report.evaluations, settled) {
        log::error!("task {}: its progress was not saved: {e}", task.id);
    }
}

/// The games of the PGN file at `path`, read up to the first whose main line plays: an error when it cannot be opened,
/// is a directory, or has no such game (the games skipped on the way said first, as the import says them).
pub(super) fn first_game(path: &Path) -> Result<Games<BufReader<File>>, Box<dyn std::error::Error>> {
    let named = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    // Opened once (a FIFO's writer is read by this open alone); a directory is refused by its metadata.
    let file = File::open(path).map_err(|e| named(&e))?;
    if file.metadata().map_err(|e| named(&e))?.is_dir() {
        return Err(named(&"is a directory").into());
    }
    let mut games = Games::new(BufReader::new(file));
    let first = games.first();
    if let Err(e) = first {
        for skip in games.skipped() {
            eprintln!("{}: {} skipped: {}", printable_path(path), skip.source, skip.error);
        }
        return Err(format!("{}: {e}; nothing to grow", path.display()).into());
    }
    Ok(games)
}

/// The exits of the games of the PGN file at `path` (`games`, from [`first_game`]), said one a line (with `--json`
/// and no exit, the exits are the JSON object).
pub(super) fn exits_of(
    store: &Store,
    path: &Path,
    games: Games<BufReader<File>>,
    params: &Params,
    targets: &Targets,
    args: &AnalyzeArgs,
    out: Out,
) -> Result<Exits, Box<dyn std::error::Error>> {
    let found = {
        let view = store.read()?;
        exits_of_games(&view, games, params, targets, args.player.as_deref())
            .map_err(|e| format!("{}: {e}", path.display()))?
    };
    let extra = [(found.without_player, "without the player"), (found.through_excluded, "through an excluded move")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!(", {n} {what}"))
        .collect::<String>();
    let (low, high) = targets.range();
    let target = if low == high { low.to_string() } else { format!("{low} to {high}") };
    say(
        out,
        &format!(
            "{} games: {} left the tree at {} positions, {} stayed in it{extra}; target depth {target}, engine depth \
             {}: the positions more games reached first, and their games followed on",
            found.games,
            found.exits.iter().map(|e| u64::from(e.games)).sum::<u64>(),
            found.exits.len(),
            found.stayed,
            params.engine_depth,
        ),
    );
    for (i, exit) in found.exits.iter().enumerate() {
        let known = exit.known_depth.map_or("-".to_owned(), |d| d.to_string());
        let text = format!(
            "exit {:>3}: {:>3} games, first game {} ply {}, known depth {known}: {}",
            i + 1,
            exit.games,
            exit.game,
            exit.ply,
            exit.fen
        );
        say(out, &text);
    }
    for skip in &found.skipped {
        eprintln!("{}: {} skipped: {}", printable_path(path), skip.source, skip.error);
    }
    if found.exits.is_empty() && out.json {
        out_line!("{}", serde_json::json!({ "exits": found }));
    }
    Ok(found)
}

/// The report of a root deepened alone: its one step's, or where nothing was left to grow, what the store holds.
pub(super) fn single_report(
    store: &Store,
    grown: &GrowthReport,
    line: Option<&crate::game::Line>,
) -> Result<Report, Box<dyn std::error::Error>> {
    if let Some(report) = &grown.last {
        return Ok(report.clone());
    }
    let settled_depth = match line {
        Some(line) => store.read()?.node(PositionKey::of(line.root()))?.and_then(|n| n.settled_depth),
        None => None,
    };
    Ok(Report { settled_depth, positions: grown.positions, stopped: grown.stopped, ..Report::default() })
}

/// What a growth run did: one JSON object on stdout (with the roots skipped), or a line in words.
pub(super) fn print_growth(out: Out, report: &GrowthReport, skipped: &[SkippedRoot]) -> CommandResult {
    if out.json {
        let mut value = serde_json::to_value(report)?;
        value["skipped"] = serde_json::to_value(skipped)?;
        out_line!("{value}");
        return Ok(());
    }
    let settled: Vec<u8> = report.roots.iter().filter_map(|r| r.settled_depth).collect();
    let expected = if report.expected_answers_before > 0.0 || report.expected_answers > 0.0 {
        format!(
            "; tree moves a game expected {:.2} before, {:.2} after ({:.1} % of the positions games reach answered)",
            report.expected_answers_before,
            report.expected_answers,
            100.0 * report.answered_share
        )
    } else {
        String::new()
    };
    out_line!(
        "{} positions grown, {} evaluations ({} taken from other searches, {} failed), {} positions in the tree; \
             settled depth {} to {} at the {} seeds{}{expected}{}",
        report.steps,
        report.evaluations,
        report.shared,
        report.failed,
        report.positions,
        settled.iter().min().map_or("-".to_owned(), ToString::to_string),
        settled.iter().max().map_or("-".to_owned(), ToString::to_string),
        report.roots.len(),
        if skipped.is_empty() { String::new() } else { format!(" ({} skipped)", skipped.len()) },
        if report.stopped { "; stopped: run the command again to resume" } else { "" }
    );
    Ok(())
}

/// The report as one JSON object on stdout; with a split, the direct search's nodes count as the run's.
pub(super) fn print_json(report: &Report, spine: Option<&Spine>, nodes: Option<u64>) -> CommandResult {
    let mut value = serde_json::to_value(report)?;
    if let Some(spine) = spine {
        // The direct search's nodes are the run's too.
        let all = report.engine_nodes + spine.nodes;
        value["engine_nodes"] = all.into();
        if let Some(budget) = nodes {
            value["node_budget"] = budget.into();
            value["node_overshoot"] = all.saturating_sub(budget).into();
        }
        value["split"] = serde_json::to_value(spine)?;
    }
    out_line!("{value}");
    Ok(())
}

/// The report in words on stdout.
pub(super) fn print_summary(report: &Report, spine: Option<&Spine>, engine_depth: u8) {
    if let Some(spine) = spine {
        out_line!(
            "split: a direct search of {} nodes to depth {} chose {} ({}); {} positions of its line stored",
            spine.nodes,
            spine.depth,
            spine.best,
            spine.score,
            spine.stored
        );
    }
    // What `stats` counts is what was stored: the searches a pass asked for. The rest of the searches answered
    // ran ahead of their turn and no pass asked for them (or came from other processes).
    let unasked = if report.unasked > 0 {
        format!(", {} answered ahead of their turn and not asked for (kept for other processes)", report.unasked)
    } else {
        String::new()
    };
    out_line!(
        "{} evaluations at engine depth {engine_depth} ({} stored in the tree, as stats counts them{unasked}), {} \
         positions in the tree, settled depth {}{}",
        report.evaluations,
        report.stored,
        report.positions,
        report.settled_depth.map_or("none".to_owned(), |d| d.to_string()),
        if report.stopped { " (stopped before the last depth settled)" } else { "" }
    );
    if let (Some(budget), Some(over)) = (report.node_budget, report.node_overshoot) {
        out_line!("{} engine nodes against a budget of {budget} ({over} over it)", report.engine_nodes);
    }
    if report.ahead > 0 {
        out_line!(
            "{} searches ran ahead of their turn on engines a pass left free: {} of them were asked for, {} \
             stopped when the tree no longer led to them, {} stopped when the run ended",
            report.ahead,
            report.ahead_used,
            report.aborted,
            report.abandoned
        );
    }
    if report.shared > 0 {
        out_line!(
            "{} answers were taken from searches another process sharing the tree ran (not asked again)",
            report.shared
        );
    }
}
