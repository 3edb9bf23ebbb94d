//! `deeptree stats`: what the store holds.

use std::path::Path;

use crate::{
    config::Config,
    engine::Asked,
    search::{
        analysis::Params,
        growth::{self, Policy, Skip, Targets, sources},
    },
    store::{ReadView, StoreError, clock::GrownFor},
};

use super::{CommandResult, open_existing_store};

/// `deeptree stats [--json]`
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// What games from the seeds a tree was grown for reach in the tree as it stands: walked again ([`grown_now`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GrownNow {
    /// The seeds walked (those kept that still set up).
    pub seeds: usize,
    /// Seeds kept that no longer set up, left out.
    pub left_out: usize,
    /// The tree moves a game from them is expected to get,
    pub expected_answers: f64,
    /// and the share of the positions of the tree's side their games reach that the tree answers at the target.
    pub answered_share: f64,
}

/// The growth policy's walk (docs/design.md §6.1) from the seeds `grown` keeps, on the tree as it stands: what a
/// session with `config`'s settings would answer at the targets `grown` was grown to (growth since, by a session or
/// another run, counts). `None` where the store keeps no seeds (a store grown by an older build: its last run's
/// figures stand).
pub fn grown_now(view: &ReadView<'_>, grown: &GrownFor, config: &Config) -> Result<Option<GrownNow>, StoreError> {
    if grown.followed.is_empty() {
        return Ok(None);
    }
    let (seeds, left_out) = sources::followed(&grown.followed);
    let mut policy = Policy::new(0, Params::from(config).with_engine_depth(grown.engine_depth.max(1)));
    policy.targets = Targets::by_men(|men| grown.targets[crate::uci::fit::phase_index(men)]);
    policy.temperature = grown.temperature.unwrap_or(policy.temperature);
    policy.beyond = grown.beyond.unwrap_or(policy.beyond);
    let walked = growth::walk(view, &seeds, &policy, &Skip::default())?;
    Ok(Some(GrownNow {
        seeds: seeds.len(),
        left_out,
        expected_answers: walked.expected_answers,
        answered_share: walked.answered_share,
    }))
}

/// The clock a tree was grown for, in words: its targets, what its games reach now (`now`, where the seeds are
/// kept) and what its last run left.
pub fn grown_for_line(grown: &GrownFor, now: Option<&GrownNow>) -> String {
    let targets: Vec<String> = grown.targets.iter().map(ToString::to_string).collect();
    let threads = if grown.threads == 1 { "1 thread".to_owned() } else { format!("{} threads", grown.threads) };
    let left = match now {
        Some(now) => format!(
            "; now {:.1} % of the positions games from its {} seeds reach are answered ({:.2} tree moves a game \
             expected; {:.1} % after its last run){}",
            100.0 * now.answered_share,
            now.seeds,
            now.expected_answers,
            100.0 * grown.answered_share,
            if now.left_out > 0 { format!("; {} seeds kept no longer set up", now.left_out) } else { String::new() }
        ),
        None if grown.seeds > 0 => format!(
            "; after its last run, {:.1} % of the positions games from its {} seeds reach answered ({:.2} tree moves \
             a game expected)",
            100.0 * grown.answered_share,
            grown.seeds,
            grown.expected_answers
        ),
        None => String::new(),
    };
    format!(
        "{} on {threads}: target depth {} (27 men or more to 8 or fewer), TreeDepthMargin {}, engine depth {}{left}",
        grown.clock,
        targets.join("/"),
        grown.margin,
        grown.engine_depth
    )
}

/// The clock a tree was grown for as JSON: the entry without its seeds (their count is `seeds`), with `now` where
/// the seeds are kept.
pub fn grown_for_json(grown: &GrownFor, now: Option<&GrownNow>) -> Result<serde_json::Value, serde_json::Error> {
    let mut value = serde_json::to_value(grown)?;
    if let Some(fields) = value.as_object_mut() {
        fields.remove("followed");
        if let Some(now) = now {
            fields.insert("now".to_owned(), serde_json::to_value(now)?);
        }
    }
    Ok(value)
}

/// Runs `deeptree stats` on the existing store in `db`.
pub fn run(db: Option<&Path>, config: &Config, args: StatsArgs) -> CommandResult {
    let StatsArgs { json } = args;
    let store = open_existing_store(db, config)?;
    let stats = store.stats()?;
    let engine = store.engine_identity()?;
    let Evaluations { per_engine, unrecorded, work, records } = evaluations_by_engine(&store)?;
    // The count of positions is the nodes database's record's: the records read must be as many.
    if records != stats.positions {
        let what =
            format!("the nodes database's record counts {} positions, its pages hold {records}", stats.positions);
        return Err(Box::new(StoreError::Structure { path: store.dir().join("data.mdb"), what }));
    }
    let claims = store.claims_summary()?;
    let view = store.read()?;
    let grown_for = view.grown_for()?;
    let now = match &grown_for {
        Some(grown) => grown_now(&view, grown, config)?,
        None => None,
    };
    drop(view);
    if json {
        let mut value = serde_json::to_value(stats)?;
        value["path"] = store.dir().display().to_string().into();
        value["engine"] = engine.into();
        value["engines"] = by_engine(&per_engine)
            .iter()
            .map(|engine| {
                let methods: serde_json::Map<String, serde_json::Value> =
                    engine.methods.iter().map(|(asked, n)| (asked.name().to_owned(), (*n).into())).collect();
                serde_json::json!({"id": engine.id, "name": engine.name, "evaluations": engine.evaluations,
                                   "by_method": methods})
            })
            .collect::<Vec<_>>()
            .into();
        value["evaluations_without_engine"] = unrecorded.into();
        value["engine_work"] = serde_json::to_value(work)?;
        value["claims"] = serde_json::to_value(&claims)?;
        // Only where a clock was grown for: a store grown otherwise reads as it always did.
        if let Some(grown) = &grown_for {
            value["grown_for"] = grown_for_json(grown, now.as_ref())?;
        }
        println!("{value}");
    } else {
        println!("tree       {}", crate::game::printable_path(store.dir()));
        println!("positions  {}", stats.positions);
        println!("edges      {}", stats.edges);
        println!("bytes      {} ({:.1} MiB)", stats.bytes, stats.bytes as f64 / 1048576.0);
        println!("engine     {}", engine.as_deref().map_or("(none recorded)".into(), crate::game::printable));
        if !per_engine.is_empty() {
            println!("evaluations stored in the tree, by engine (analyze's 'stored'):");
        }
        for engine in by_engine(&per_engine) {
            let methods = if engine.methods.iter().any(|(asked, _)| *asked != Asked::AsRequested) {
                let each: Vec<String> =
                    engine.methods.iter().map(|(asked, n)| format!("{} {n}", asked.name())).collect();
                format!(" ({})", each.join(", "))
            } else {
                String::new()
            };
            let name = crate::game::printable(engine.name);
            println!("engine {:<3} {:>10} evaluations  {name}{methods}", engine.id, engine.evaluations);
        }
        if unrecorded > 0 {
            println!("no engine  {unrecorded:>10} evaluations (imported, or stored before engines were recorded)");
        }
        if work.position_evaluations > 0 {
            println!(
                "engine work {} nodes in the {} position evaluations ({:.0} each; searches for alternatives keep no \
                 count)",
                work.nodes,
                work.position_evaluations,
                work.nodes as f64 / work.position_evaluations as f64
            );
        }
        if let Some(grown) = &grown_for {
            println!("grown for  {}", grown_for_line(grown, now.as_ref()));
        }
        if let Some(claims) = claims {
            let processes: Vec<String> = claims.processes.iter().map(ToString::to_string).collect();
            println!(
                "claims     {} searches running{}, {} answers kept for other processes",
                claims.running,
                if processes.is_empty() { String::new() } else { format!(" in processes {}", processes.join(", ")) },
                claims.answers
            );
        }
    }
    Ok(())
}

/// One engine of `stats`: its answers under every method they were asked by.
struct EngineCount<'a> {
    /// The number of its first entry in the store's list.
    id: usize,
    name: &'a str,
    evaluations: u64,
    /// Evaluations by the way they were asked (entries of the list marked by method, see [`Asked::label_suffix`]).
    methods: Vec<(Asked, u64)>,
}

/// The store's list of engines with the entries of one engine asked by several methods taken together.
fn by_engine(per_engine: &[(String, u64)]) -> Vec<EngineCount<'_>> {
    let mut engines: Vec<EngineCount<'_>> = Vec::new();
    for (id, (label, evaluations)) in per_engine.iter().enumerate() {
        let (name, asked) = Asked::of_label(label);
        match engines.iter_mut().find(|e| e.name == name) {
            Some(engine) => {
                engine.evaluations += evaluations;
                engine.methods.push((asked, *evaluations));
            }
            None => {
                engines.push(EngineCount { id, name, evaluations: *evaluations, methods: vec![(asked, *evaluations)] })
            }
        }
    }
    engines
}

/// What `stats` counts over the records: evaluations per engine of the store's list (name, count), those that
/// record no engine, the engine work the position evaluations hold, and how many records were read.
struct Evaluations {
    per_engine: Vec<(String, u64)>,
    unrecorded: u64,
    work: EngineWork,
    records: u64,
}

/// The engine work a tree holds: the nodes the inner engines reported for its positions' own evaluations. A count
/// that does not depend on the machine, so trees grown on different machines compare by it where their CPU-seconds
/// do not (a CPU-second of one machine searched twice the nodes of another's: docs/strength/one-growth,
/// declared-a5.txt). The searches for alternatives keep no node count: about half of all the work of a growth.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineWork {
    /// Positions with an evaluation by an engine.
    pub position_evaluations: u64,
    /// The nodes the engines reported for those evaluations, all together.
    pub nodes: u64,
}

/// Evaluations per engine of the store's list (name, count), and those that record no engine. An evaluation is one
/// engine answer kept in the tree: a position's own evaluation, or a move searched from it (the best move of the
/// position's own evaluation is part of that evaluation, not counted again). An analysis raises the count by the
/// answers it stored (its report's `stored`, where they were new), not by every search it ran: searches run ahead
/// of their turn that no pass asked for are not stored (`unasked`), and a deeper answer replaces a shallower one.
/// Also returns the engine work of the position evaluations and how many records were read.
fn evaluations_by_engine(store: &crate::store::Store) -> Result<Evaluations, StoreError> {
    let mut per_engine: Vec<(String, u64)> = store.engines()?.into_iter().map(|name| (name, 0)).collect();
    let mut unrecorded = 0u64;
    let mut count = |engine: Option<u16>| match engine.and_then(|n| per_engine.get_mut(usize::from(n))) {
        Some((_, evaluations)) => *evaluations += 1,
        None => unrecorded += 1,
    };
    let view = store.read()?;
    let mut records = 0u64;
    let mut work = EngineWork::default();
    for item in view.nodes()? {
        let (_, node) = item?;
        records += 1;
        // A checkmate or stalemate is valued without an engine (no best move, no engine): not an evaluation.
        if let Some(eval) = node.eval.as_ref().filter(|e| e.best.is_some() || e.engine.is_some()) {
            count(eval.engine);
            work.position_evaluations += 1;
            work.nodes = work.nodes.saturating_add(eval.nodes);
        }
        for edge in &node.edges {
            let own = node.eval.as_ref().is_some_and(|e| e.best == Some(edge.uci) && e.engine == edge.engine);
            // An imported move with no engine is a game's move, not an evaluation.
            if !own && (edge.engine.is_some() || !edge.imported) {
                count(edge.engine);
            }
        }
    }
    Ok(Evaluations { per_engine, unrecorded, work, records })
}
