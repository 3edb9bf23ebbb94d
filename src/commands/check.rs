//! `deeptree check`: every record of the store read and verified, the damaged ones listed; with `--repair --out
//! DIR`, a new store with every intact record.
//!
//! Exit status: 0 when nothing is damaged, [`DAMAGE_EXIT_CODE`] (3) when something is (a file cut short included;
//! the repair, when asked for, is written all the same), 1 when the store cannot be checked at all (no store, an
//! older schema to upgrade first, ...). The store is read page by page, never mapped (see `store::check`): a damaged
//! file is reported, never a reason to die.

use std::path::{Path, PathBuf};

use crate::{
    config::Config,
    store::{
        Store,
        check::{CheckReport, Damaged},
    },
};

use super::CommandResult;

/// The exit status of a check that found damage.
pub const DAMAGE_EXIT_CODE: u8 = 3;

/// `deeptree check [--json] [--repair --out DIR]`
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write a new store with every intact record (the parent links rebuilt from the nodes' edges) into the
    /// directory --out names; the store checked is only read.
    #[arg(long, requires = "out")]
    pub repair: bool,
    /// Where --repair writes the new store: a directory that does not exist or is empty.
    #[arg(long, value_name = "DIR", requires = "repair")]
    pub out: Option<PathBuf>,
}

/// The check found damage: `main` exits with [`DAMAGE_EXIT_CODE`].
#[derive(Debug, thiserror::Error)]
#[error("{problems} problems found in {}", path.display())]
pub struct DamageFound {
    pub problems: u64,
    pub path: PathBuf,
}

/// Runs `deeptree check` on the existing store in `db`.
pub fn run(db: Option<&Path>, config: &Config, args: CheckArgs) -> CommandResult {
    let CheckArgs { json, repair, out } = args;
    let dir = config.tree_dir(db);
    let report = Store::check_dir(&dir)?;
    let repaired = match out.filter(|_| repair) {
        Some(out) => Some(Store::repair(&dir, &out)?),
        None => None,
    };
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["clean"] = report.is_clean().into();
        if let Some(repaired) = &repaired {
            value["repair"] = serde_json::to_value(repaired)?;
        }
        println!("{value}");
    } else {
        print!("{}", render(&report));
        if let Some(repaired) = &repaired {
            println!(
                "repair     {}: {} nodes, {} parent links, {} meta entries copied; {} damaged records left out",
                repaired.path.display(),
                repaired.nodes,
                repaired.links,
                repaired.meta_entries,
                repaired.left_out.len()
            );
        }
    }
    if report.is_clean() {
        Ok(())
    } else {
        Err(Box::new(DamageFound { problems: report.problems(), path: report.path }))
    }
}

/// The report as text.
fn render(report: &CheckReport) -> String {
    let mut out = String::new();
    let count = |database: &str| report.damaged.iter().filter(|d| d.record.database() == database).count();
    let checked = if report.checksums { "checksums verified" } else { "no checksums: records decoded only" };
    out += &format!("store      {} (schema {}, {checked})\n", report.path.display(), report.schema);
    out += &format!("nodes      {} read, {} damaged\n", report.nodes, count("nodes"));
    out += &format!(
        "link pages {} read, {} damaged; {} links, {} missing, {} stray{}\n",
        report.link_pages,
        count("link_pages"),
        report.links,
        report.links_missing,
        report.links_stray,
        if report.links_of_damaged > 0 {
            format!(" ({} of damaged nodes)", report.links_of_damaged)
        } else {
            String::new()
        }
    );
    out += &format!("meta       {} entries, {} damaged\n", report.meta_entries, count("meta"));
    if report.values_owed {
        out += "values     owed by an interrupted bulk load: the next command that writes recomputes them\n";
    }
    for Damaged { record, problem } in &report.damaged {
        // A damaged key may hold any byte: printed escaped.
        out += &format!("damaged    {} {}: {problem}\n", record.database(), record.key().escape_debug());
    }
    if report.is_clean() {
        out += "result     clean\n";
    } else {
        out += &format!(
            "result     {} problems: `deeptree check --repair --out DIR` copies every intact record into a new store\n",
            report.problems()
        );
    }
    out
}
