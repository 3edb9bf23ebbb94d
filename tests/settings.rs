//! Each setting is declared once (`config::SETTINGS`): the settings file, `analyze`'s flags and the UCI options take
//! the same ranges, an out-of-range value, a bad name or an unknown key is refused by each with the key and the
//! range (exit status 2 for the file and the command line), and `analyze --help`, the option table of
//! docs/reference/uci-options.md, `uci`'s option list and configs/deeptree.toml cannot disagree with the table.

use std::{collections::BTreeSet, path::Path};

use deeptree::{
    config::{Kind, SETTINGS},
    uci::options::{MARK_ACTIONS, options},
};

mod common;

use common::deeptree;

const UCI_OPTIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference/uci-options.md");
const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/deeptree.toml");

/// A settings file holding `text`, and `stats` run with it on a store of one position (made once).
fn with_settings(dir: &Path, text: &str) -> (Option<i32>, String) {
    let db = dir.join("tree");
    if !db.exists() {
        let epd = dir.join("one.epd");
        std::fs::write(&epd, "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - ce 30; acd 10;\n").unwrap();
        let made = deeptree(&["--db", db.to_str().unwrap(), "import", "epd", epd.to_str().unwrap()]);
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    }
    let file = dir.join("deeptree.toml");
    std::fs::write(&file, text).unwrap();
    let output = deeptree(&["--config", file.to_str().unwrap(), "--db", db.to_str().unwrap(), "stats"]);
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The file: each numeric setting one past each end of its range, a name its setting does not know, an unknown key.
#[test]
fn the_settings_file_refuses_what_is_out_of_range_with_the_key_and_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut spins = 0;
    for setting in SETTINGS {
        if let Kind::Spin { min, max } = setting.kind {
            spins += 1;
            for value in [min - 1, max + 1] {
                // A value past the field's own type is refused by the reader, naming the key too.
                let (code, stderr) = with_settings(dir.path(), &format!("{} = {value}\n", setting.key));
                assert_eq!(code, Some(2), "{} = {value}: {stderr}", setting.key);
                assert!(stderr.contains(setting.key), "{} = {value}: {stderr}", setting.key);
                let in_type = !stderr.contains("invalid value");
                if in_type {
                    assert!(stderr.contains(&format!("out of range {min}..{max}")), "{}: {stderr}", setting.key);
                }
            }
            let (code, stderr) = with_settings(dir.path(), &format!("{} = {max}\n", setting.key));
            assert_eq!(code, Some(0), "{} = {max} is in range: {stderr}", setting.key);
        }
    }
    assert!(spins >= 10, "the numeric settings are in the table: {spins}");
    let (code, stderr) = with_settings(dir.path(), "log_level = \"screaming\"\n");
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("log_level takes one of off, error, warn, info, debug, trace, not 'screaming'"),
        "{stderr}"
    );
    let (code, stderr) = with_settings(dir.path(), "think_mode = \"fast\"\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("think_mode"), "{stderr}");
    let (code, stderr) = with_settings(dir.path(), "look_ahead = -100\n");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("look_ahead -100 is out of range -1..255"), "{stderr}");
    let (code, stderr) = with_settings(dir.path(), "workerz = 3\n");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown field `workerz`"), "{stderr}");
}

/// The command line: `analyze`'s flags refuse what the file refuses, before anything starts (exit status 2).
#[test]
fn the_flags_refuse_what_is_out_of_range_with_the_flag_and_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tree");
    let mut flags = 0;
    for setting in SETTINGS {
        let (Some(flag), Kind::Spin { min, max }) = (setting.flag, setting.kind) else { continue };
        flags += 1;
        for value in [min - 1, max + 1] {
            let value = value.to_string();
            let output = deeptree(&["--db", db.to_str().unwrap(), "analyze", &format!("--{flag}={value}")]);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "--{flag} {value}: {stderr}");
            assert!(stderr.contains(&format!("--{flag}")), "{stderr}");
            assert!(stderr.contains(&format!("{} {value} is out of range {min}..{max}", setting.key)), "{stderr}");
        }
    }
    assert!(flags >= 6, "{flags}");
    for (flag, value) in [("--screen", "maybe"), ("--look-ahead", "some"), ("--no-progress", "2")] {
        let output = deeptree(&["--db", db.to_str().unwrap(), "analyze", flag, value]);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}");
    }
    assert!(!db.exists(), "nothing was started");
}

/// UCI: an option out of its range, or a name it does not take, is refused with an `info string` naming the option
/// and the range, and the option keeps its value.
#[test]
fn the_uci_options_refuse_what_is_out_of_range_and_keep_their_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut uci = common::Uci::deeptree(&dir.path().join("tree"));
    uci.send("uci");
    let declared = uci.until("uciok", common::PATIENCE);
    for setting in SETTINGS {
        let (Some(option), Kind::Spin { min, max }) = (setting.option, setting.kind) else { continue };
        let line = declared.iter().find(|l| l.starts_with(&format!("option name {option} type spin"))).unwrap();
        assert!(line.ends_with(&format!("min {min} max {max}")), "the table's range: {line}");
        uci.send(&format!("setoption name {option} value {}", max + 1));
        uci.send("isready");
        let lines = uci.until("readyok", common::PATIENCE);
        assert!(
            lines.iter().any(|l| l.starts_with("info string") && l.contains(option) && l.contains("out of range")),
            "{option}: {lines:?}"
        );
    }
    uci.send("setoption name ThinkMode value fast");
    uci.send("isready");
    let lines = uci.until("readyok", common::PATIENCE);
    assert!(lines.iter().any(|l| l.contains("ThinkMode takes one of direct, tree, auto")), "{lines:?}");
    // Still the defaults: `uci` again declares them.
    uci.send("uci");
    let again = uci.until("uciok", common::PATIENCE);
    assert!(again.iter().any(|l| l == "option name EngineDepth type spin default 18 min 1 max 99"), "{again:?}");
    assert!(again.iter().any(|l| l.starts_with("option name ThinkMode type combo default direct")), "{again:?}");
}

/// The option names of docs/reference/uci-options.md's table (the first cell's names in backticks, but "every other
/// option of the inner engine").
fn documented_options() -> BTreeSet<String> {
    let page = std::fs::read_to_string(UCI_OPTIONS).unwrap();
    let table = page.split("| option | meaning |").nth(1).expect("the page has its option table");
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .flat_map(|l| {
            let cell = l.split('|').nth(1).unwrap_or_default();
            cell.split('`').skip(1).step_by(2).map(str::to_owned).collect::<Vec<_>>()
        })
        .collect()
}

/// `uci`'s list, the reference page's table, `analyze --help` and the shipped settings file say what the table says.
#[test]
fn help_the_reference_uci_and_the_shipped_file_agree_with_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut uci = common::Uci::deeptree(&dir.path().join("tree"));
    uci.send("uci");
    let declared: BTreeSet<String> = uci
        .until("uciok", common::PATIENCE)
        .iter()
        .filter_map(|l| l.strip_prefix("option name "))
        .filter_map(|l| l.split(" type ").next().map(str::to_owned))
        .collect();
    // deeptree's own options: the settings' and the session's, then the marks (the inner engine's follow them).
    let own: BTreeSet<String> = options().iter().map(|row| row.name).chain(MARK_ACTIONS).map(str::to_owned).collect();
    for setting in SETTINGS {
        if let Some(option) = setting.option {
            assert!(own.contains(option), "{option} is one of deeptree's options");
        }
    }
    assert!(own.is_subset(&declared), "uci declares every one: {declared:?}");
    // The page's table describes the session's own options, each of them; an option that is a setting is described
    // by docs/reference/settings.md's generated table (with its option's name) and may have a row here too.
    let documented = documented_options();
    let of_settings: BTreeSet<String> = SETTINGS.iter().filter_map(|s| s.option).map(str::to_owned).collect();
    let session: BTreeSet<String> = own.difference(&of_settings).cloned().collect();
    assert!(documented.is_subset(&own), "docs/reference/uci-options.md's table names only deeptree's options");
    assert!(session.is_subset(&documented), "docs/reference/uci-options.md's table describes {session:?}");

    let help = String::from_utf8_lossy(&deeptree(&["analyze", "--help"]).stdout).into_owned();
    for setting in SETTINGS {
        if let Some(flag) = setting.flag {
            let line = help.lines().find(|l| l.trim_start().starts_with(&format!("--{flag} "))).unwrap_or_default();
            let first_words: String = setting.doc.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
            assert!(line.contains(&first_words), "--{flag} is documented with its setting's doc: {line}");
            if let Kind::Spin { min, max } = setting.kind {
                assert!(line.contains(&format!("({min} to {max})")), "--{flag} says its range: {line}");
            }
        }
    }

    let shipped = std::fs::read_to_string(SHIPPED).unwrap();
    let keys: BTreeSet<&str> = shipped
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
        .collect();
    // The shipped file is an example: every key it states is a setting (with its default, checked where it loads);
    // docs/reference/settings.md, generated from the table, lists every setting.
    let table: BTreeSet<&str> = SETTINGS.iter().map(|s| s.key).collect();
    assert!(keys.is_subset(&table), "configs/deeptree.toml states only settings: {:?}", keys.difference(&table));
}
