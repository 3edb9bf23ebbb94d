//! The documentation cannot silently disagree with the code: README stays a page of 200 lines at most, every
//! relative link of README.md and docs/ leads to a file (and a heading, where it names one), and the reference pages
//! say what the program does: docs/reference/commands.md names every command and every flag of `--help` and no
//! other, docs/reference/settings.md holds the table generated from `config::SETTINGS`, docs/reference/uci-options.md
//! lists what `uci` declares, and docs/reference/exit-status.md gives the status each kind of ending returns.
//!
//! `DEEPTREE_BLESS=1 cargo test --test docs` writes the generated parts again: docs/reference/settings.md's table
//! and docs/reference/uci-options.md's block of what `uci` declares.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use deeptree::{
    commands::check::DAMAGE_EXIT_CODE,
    config::{Config, Kind, SETTINGS},
    store::fault::DAMAGE_EXIT_STATUS,
    uci::options::{MARK_ACTIONS, options},
};

mod common;

use common::{Uci, deeptree};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const README_MOST_LINES: usize = 200;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn readme_is_a_page_of_at_most_200_lines() {
    let lines = read("README.md").lines().count();
    assert!(lines <= README_MOST_LINES, "README.md has {lines} lines; the reference pages and guides hold the rest");
}

/// README.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    let mut found = vec![Path::new(ROOT).join("README.md")];
    walk(&Path::new(ROOT).join("docs"), &mut found);
    found.sort();
    found
}

/// A heading's anchor as GitHub makes it: lower case, letters, digits, spaces, `-` and `_` kept, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The text of a page outside its fenced code blocks.
fn prose(text: &str) -> String {
    let mut fenced = false;
    let mut kept = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// The anchors of a page's headings (a repeated heading's with `-1`, `-2`, ... as GitHub numbers them).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = BTreeSet::new();
    for line in prose(text).lines() {
        let Some(heading) = line.strip_prefix('#').map(|l| l.trim_start_matches('#')) else { continue };
        if !heading.starts_with(' ') {
            continue;
        }
        let slug = anchor(heading);
        let count = seen.entry(slug.clone()).or_default();
        found.insert(if *count == 0 { slug.clone() } else { format!("{slug}-{count}") });
        *count += 1;
    }
    found
}

/// The targets of a page's markdown links and images: `[text](target)`, outside code blocks.
fn links(text: &str) -> Vec<String> {
    let text = prose(text);
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        if !target.contains(char::is_whitespace) && !target.is_empty() {
            found.push(target.to_owned());
        }
        rest = &rest[end..];
    }
    found
}

#[test]
fn every_relative_link_leads_to_a_file_and_its_heading() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(ROOT).unwrap().display().to_string();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, heading) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
            if !path.exists() {
                broken.push(format!("{name}: {target} (no such file)"));
                continue;
            }
            if !heading.is_empty() && path.extension().is_some_and(|e| e == "md") {
                let there = std::fs::read_to_string(&path).unwrap();
                if !anchors(&there).contains(heading) {
                    broken.push(format!("{name}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(checked > 100, "the pages' links were found: {checked}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// A command's help, parsed: its subcommands and its long flags.
struct Help {
    commands: Vec<String>,
    flags: BTreeSet<String>,
}

fn help(path: &[&str]) -> Help {
    let mut args = path.to_vec();
    args.push("--help");
    let output = deeptree(&args);
    assert!(output.status.success(), "deeptree {args:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let (mut commands, mut flags, mut section) = (Vec::new(), BTreeSet::new(), "");
    for line in text.lines() {
        if line.ends_with(':') && !line.starts_with(' ') {
            section = line;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let words: Vec<&str> = line.split_whitespace().collect();
        match (section, words.first()) {
            ("Commands:", Some(name)) if indent == 2 && *name != "help" => commands.push((*name).to_owned()),
            // An option's own line: `  -v, --verbose...` or `      --db <DIR>`; its description is indented deeper.
            ("Options:", Some(_)) if indent <= 6 => {
                if let Some(flag) = words.iter().find(|w| w.starts_with("--")) {
                    flags.insert(flag.trim_end_matches("...").trim_end_matches(',').to_owned());
                }
            }
            _ => {}
        }
    }
    Help { commands, flags }
}

/// The flags every subcommand's help repeats, documented once under `deeptree` itself.
const GLOBAL: [&str; 4] = ["--db", "--config", "--verbose", "--help"];

/// Every command path of the help (`[]`, `["analyze"]`, `["mark", "exclude"]`, ...) with its own flags.
fn commands_of_the_help() -> BTreeMap<String, BTreeSet<String>> {
    let mut found = BTreeMap::new();
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = queue.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let parsed = help(&args);
        let mut flags = parsed.flags;
        if !path.is_empty() {
            flags.retain(|f| !GLOBAL.contains(&f.as_str()));
        }
        found.insert(path.join(" "), flags);
        for command in parsed.commands {
            let mut next = path.clone();
            next.push(command);
            queue.push(next);
        }
    }
    found
}

/// The commands of docs/reference/commands.md (a heading `` `deeptree ...` ``) and the flags in the first cells of
/// their `| flag | meaning |` tables.
fn commands_of_the_page() -> BTreeMap<String, BTreeSet<String>> {
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let (mut current, mut in_table) = (None::<String>, false);
    for line in prose(&read("docs/reference/commands.md")).lines() {
        if line.starts_with('#') {
            let title = line.trim_start_matches('#').trim();
            current = title
                .strip_prefix("`deeptree")
                .and_then(|t| t.strip_suffix('`'))
                .map(|t| t.trim().to_owned())
                .or(if title.starts_with('`') { None } else { current });
            if let Some(command) = &current {
                found.entry(command.clone()).or_default();
            }
            continue;
        }
        if line.starts_with("| flag | meaning |") {
            in_table = true;
            continue;
        }
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let (true, Some(command)) = (in_table, &current) else { continue };
        let cell = line.split('|').nth(1).unwrap_or_default();
        for code in cell.split('`').skip(1).step_by(2) {
            if let Some(flag) = code.split_whitespace().next().filter(|f| f.starts_with("--")) {
                found.get_mut(command).unwrap().insert(flag.to_owned());
            }
        }
    }
    found
}

#[test]
fn the_commands_page_names_every_command_and_flag_of_the_help_and_no_other() {
    let help = commands_of_the_help();
    let page = commands_of_the_page();
    assert!(help.len() >= 25, "the help's commands were found: {:?}", help.keys());
    let missing: Vec<&String> = help.keys().filter(|c| !page.contains_key(*c)).collect();
    let extra: Vec<&String> = page.keys().filter(|c| !help.contains_key(*c)).collect();
    assert!(missing.is_empty(), "commands the page does not document: {missing:?}");
    assert!(extra.is_empty(), "commands the page documents that do not exist: {extra:?}");
    for (command, flags) in &help {
        let documented = &page[command];
        let missing: Vec<&String> = flags.difference(documented).collect();
        let extra: Vec<&String> = documented.difference(flags).collect();
        assert!(missing.is_empty(), "deeptree {command}: flags the page does not document: {missing:?}");
        assert!(extra.is_empty(), "deeptree {command}: flags the page documents that do not exist: {extra:?}");
    }
}

/// A value in the settings file's form: text quoted, numbers and true or false bare.
fn toml_value(kind: Kind, value: &str) -> String {
    match kind {
        Kind::Text | Kind::Combo { .. } => format!("\"{value}\""),
        Kind::Check | Kind::Spin { .. } => value.to_owned(),
    }
}

/// What a setting takes.
fn range(kind: Kind) -> String {
    match kind {
        Kind::Check => "true or false".to_owned(),
        Kind::Spin { min: -1, max } => format!("-1 (off) to {max}"),
        Kind::Spin { min, max } => format!("{min} to {max}"),
        Kind::Combo { vars } => vars.join(", "),
        Kind::Text => "text".to_owned(),
    }
}

const TABLE_START: &str = "<!-- The table below is generated from config::SETTINGS: DEEPTREE_BLESS=1 cargo test --test docs \
                           writes it again. -->";
const TABLE_END: &str = "<!-- The end of the generated table. -->";

/// The table of every setting, as docs/reference/settings.md holds it.
fn settings_table() -> String {
    let defaults = Config::default();
    let code = |text: Option<&str>, prefix: &str| text.map(|t| format!("`{prefix}{t}`")).unwrap_or_default();
    let mut table = String::from(
        "| key | default | takes | UCI option | `analyze` flag | what it does |\n|---|---|---|---|---|---|\n",
    );
    for setting in SETTINGS {
        let default = toml_value(setting.kind, &(setting.get)(&defaults));
        table.push_str(&format!(
            "| `{}` | `{default}` | {} | {} | {} | {} |\n",
            setting.key,
            range(setting.kind),
            code(setting.option, ""),
            code(setting.flag, "--"),
            setting.doc.replace('|', "\\|"),
        ));
    }
    table
}

#[test]
fn the_settings_page_holds_the_table_of_every_setting() {
    let path = Path::new(ROOT).join("docs/reference/settings.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let (before, rest) = page.split_once(TABLE_START).expect("the page marks where its generated table starts");
    let (held, after) = rest.split_once(TABLE_END).expect("the page marks where its generated table ends");
    let table = format!("\n\n{}\n", settings_table());
    if std::env::var_os("DEEPTREE_BLESS").is_some() {
        std::fs::write(&path, format!("{before}{TABLE_START}{table}{TABLE_END}{after}")).unwrap();
        return;
    }
    assert_eq!(held, table, "docs/reference/settings.md's table is not config::SETTINGS': DEEPTREE_BLESS=1 writes it");
    // The file shipped states each setting with its default, and only those (tests/settings.rs).
    for setting in SETTINGS {
        assert!(page.contains(&format!("| `{}` |", setting.key)), "{}", setting.key);
    }
}

/// What `uci` declares with an empty settings file: `option name ...` lines.
fn declared() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("empty.toml");
    std::fs::write(&config, "").unwrap();
    let db = dir.path().join("tree");
    let mut uci = Uci::start(
        Path::new(env!("CARGO_BIN_EXE_deeptree")),
        &["--config", config.to_str().unwrap(), "--db", db.to_str().unwrap()],
    );
    uci.send("uci");
    let declared = uci.until("uciok", common::PATIENCE);
    assert_eq!(declared.last().map(String::as_str), Some("uciok"), "{declared:?}");
    declared.into_iter().filter(|l| l.starts_with("option name ")).collect()
}

/// The `option name` lines `uci` declares for deeptree's own options, as the page's block shows them (the tree's
/// directory as the user's data directory).
fn declared_block() -> String {
    let own: BTreeSet<&str> = options().iter().map(|row| row.name).chain(MARK_ACTIONS).collect();
    let lines: Vec<String> = declared()
        .into_iter()
        .filter(|l| {
            l.strip_prefix("option name ").and_then(|l| l.split(" type ").next()).is_some_and(|n| own.contains(n))
        })
        .map(|l| match l.split_once(" default ") {
            Some((head, _)) if head == "option name TreePath type string" => {
                format!("{head} default ~/.local/share/deeptree/tree")
            }
            _ => l,
        })
        .collect();
    lines.join("\n") + "\n"
}

#[test]
fn the_uci_options_page_lists_what_uci_declares() {
    if std::env::var_os("DEEPTREE_BLESS").is_some() {
        let path = Path::new(ROOT).join("docs/reference/uci-options.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let start = page.find("```\noption name ").expect("the page's block of `uci`'s lines") + 4;
        let end = start + page[start..].find("```").expect("the block ends");
        std::fs::write(&path, format!("{}{}{}", &page[..start], declared_block(), &page[end..])).unwrap();
        return;
    }
    let page = read("docs/reference/uci-options.md");
    let own: BTreeSet<&str> = options().iter().map(|row| row.name).chain(MARK_ACTIONS).collect();
    let block: Vec<&str> = page.lines().filter(|l| l.starts_with("option name ")).collect();
    let listed: BTreeSet<&str> =
        block.iter().filter_map(|l| l.strip_prefix("option name ")?.split(" type ").next()).collect();
    assert_eq!(listed, own, "the page's `uci` block lists deeptree's own options");
    // The tree's directory is the user's data directory; elsewhere, each option as `uci` declares it, in its order.
    assert_eq!(
        block.join("\n") + "\n",
        declared_block(),
        "the page's block is not what `uci` declares: DEEPTREE_BLESS=1"
    );
}

/// The statuses of docs/reference/exit-status.md's table.
fn documented_statuses() -> BTreeSet<i32> {
    read("docs/reference/exit-status.md")
        .lines()
        .filter_map(|l| l.strip_prefix("| ")?.split(" |").next()?.parse().ok())
        .collect()
}

#[test]
fn each_exit_status_is_the_one_the_page_gives() {
    assert_eq!(documented_statuses(), BTreeSet::from([0, 1, 2, 3]));
    assert_eq!(i32::from(DAMAGE_EXIT_CODE), 3, "check's status on damage");
    assert_eq!(DAMAGE_EXIT_STATUS, 3, "a damaged store met by another command");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let db = db.to_str().unwrap();
    let epd = dir.path().join("one.epd");
    std::fs::write(&epd, "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - ce 30; acd 10;\n").unwrap();
    let status = |args: &[&str]| deeptree(args).status.code();

    assert_eq!(status(&["--db", db, "import", "epd", epd.to_str().unwrap()]), Some(0), "did its work");
    assert_eq!(status(&["--db", db, "stats"]), Some(0), "did its work");
    assert_eq!(status(&["--db", dir.path().join("none").to_str().unwrap(), "show"]), Some(1), "no store there");
    assert_eq!(status(&["--db", db, "stats", "--no-such-flag"]), Some(2), "a command line that cannot be read");
    let settings = dir.path().join("deeptree.toml");
    std::fs::write(&settings, "workerz = 3\n").unwrap();
    assert_eq!(status(&["--config", settings.to_str().unwrap(), "--db", db, "stats"]), Some(2), "a bad settings file");
    // A data file cut short after LMDB's two meta pages: every command says the store is damaged.
    let data = Path::new(db).join("data.mdb");
    std::fs::File::options().write(true).open(&data).unwrap().set_len(8192).unwrap();
    assert_eq!(status(&["--db", db, "stats"]), Some(3), "a damaged store");
    assert_eq!(status(&["--db", db, "check"]), Some(3), "check found damage");
}
