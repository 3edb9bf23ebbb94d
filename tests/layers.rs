//! Enforces the crate's layering, read from its own source (std only, no build of the crate needed).
//!
//! - The `# Layers` section of `src/lib.rs`'s crate docs lists the top-level modules from the bottom layer up,
//!   one bullet per level, and must name every module `lib.rs` declares, and only those. The section has this
//!   shape (a bullet's level is its position; modules in one bullet share it):
//!
//!   ```text
//!   //! # Layers
//!   //!
//!   //! From the bottom up; each module uses only those above it in this list.
//!   //!
//!   //! - [`score`], [`notation`], [`logger`]: text...
//!   //!   continuation text...
//!   //! - [`engine`]: text...
//!   //! - [`commands`], [`bench`](mod@bench): ...
//!   ```
//!
//!   Every `` [`name`] `` link before a bullet's first `:` counts, optionally followed by `(mod@name)`.
//! - No file under `src/` (but `main.rs` and `bin/`, which sit on top of everything) refers to a top-level module at
//!   a higher level than its own: `crate::x` (in `use` trees too) or `super::`/`self::` paths reaching out of it.
//! - Inside each top-level module, no two submodules import each other unless one is the other's ancestor, and no
//!   longer cycle runs through them.
//!
//! Comments (doc comments included), string and char literals and `#[cfg(test)] mod NAME { .. }` blocks are
//! ignored: a test module's `super` is its file's module, and tests may reach anywhere. Names brought in by a glob
//! (`use super::*;` then `policy::x`) are not followed; only paths written from `crate`, `super` or `self` are.

use std::collections::{BTreeMap, BTreeSet};
use std::{fs, path::Path};

/// A module path from the crate root (`[uci, session]`); imports: importer -> imported -> first `file:line`.
type Module = Vec<String>;
type Graph = BTreeMap<Module, BTreeMap<Module, String>>;

/// A token of code with its 1-based line: a word, `::`, or one other character.
type Token = (String, usize);

/// The tokens of `src`, leaving out comments (doc comments too), string and char literals and
/// `#[cfg(test)] mod NAME { .. }` blocks.
fn tokens(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let to = |from: usize, end: char| c.iter().skip(from).position(|&x| x == end).map_or(c.len(), |p| from + p);
    // A raw string literal (`r"..."`, `br#"..."#`) at `c[i]`: the length of its prefix before the `r`, its `#`s.
    // (`c[i]` starts a word there: words are taken whole.)
    let raw = |i: usize| {
        let p = usize::from(matches!(c[i], 'b' | 'c'));
        let n = c.iter().skip(i + p + 1).take_while(|&&h| h == '#').count();
        (c.get(i + p) == Some(&'r') && c.get(i + p + 1 + n) == Some(&'"')).then_some((p, n))
    };
    let (mut toks, mut line, mut i) = (Vec::new(), 1, 0);
    while i < c.len() {
        let (start, next) = (i, c.get(i + 1).copied().unwrap_or(' '));
        if c[i] == '/' && next == '/' {
            i = to(i, '\n');
        } else if c[i] == '/' && next == '*' {
            let mut depth = 0; // block comments nest
            while i < c.len() && (i == start || depth > 0) {
                let pair = (c[i], c.get(i + 1).copied().unwrap_or(' '));
                let step = i32::from(pair == ('/', '*')) - i32::from(pair == ('*', '/'));
                (depth, i) = (depth + step, i + 1 + usize::from(step != 0));
            }
        } else if let Some((p, n)) = raw(i) {
            i = to(i + p + 2 + n, '"');
            while i < c.len() && !c.iter().skip(i + 1).take(n).all(|&h| h == '#') {
                i = to(i + 1, '"');
            }
            i += 1 + n;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += 1 + usize::from(c[i] == '\\');
            }
            i += 1;
        } else if c[i] == '\'' && next == '\\' {
            i = to(i + 3, '\'') + 1; // '\n', '\'', '\u{..}'
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3; // 'x', where 'a alone is a lifetime
        } else {
            let word: String = c[i..].iter().take_while(|ch| ch.is_alphanumeric() || **ch == '_').collect();
            let tok = match c[i] {
                _ if !word.is_empty() => word,
                ':' if next == ':' => "::".to_string(),
                ch => ch.to_string(),
            };
            i += tok.chars().count();
            if !tok.trim().is_empty() {
                toks.push((tok, line));
            }
        }
        line += c[start..i.min(c.len())].iter().filter(|&&ch| ch == '\n').count();
    }
    let test_mod = ["#", "[", "cfg", "(", "test", ")", "]", "mod"];
    let is_test_mod =
        |t: &[Token]| t.iter().map(|t| t.0.as_str()).take(8).eq(test_mod) && t.get(9).is_some_and(|t| t.0 == "{");
    while let Some(at) = (0..toks.len()).find(|&k| is_test_mod(&toks[k..])) {
        let mut depth = 0;
        let braces = toks[at + 9..].iter().position(|t| {
            depth += i32::from(t.0 == "{") - i32::from(t.0 == "}");
            depth == 0
        });
        toks.drain(at..braces.map_or(toks.len(), |p| at + 10 + p));
    }
    toks
}

/// A path written from `crate`, `super` or `self`: its segments, each with its line.
type Written = Vec<Token>;

/// Every path in `src` that starts with `crate::`, `super::` or `self::`, one per leaf of a `use` group.
fn written_paths(src: &str) -> Vec<Written> {
    let toks = tokens(src);
    let (mut out, mut i) = (Vec::new(), 0);
    while i < toks.len() {
        let root = matches!(toks[i].0.as_str(), "crate" | "super" | "self");
        let root = root && toks.get(i + 1).is_some_and(|t| t.0 == "::") && (i == 0 || toks[i - 1].0 != "::");
        i = if root { tree(&toks, i, Vec::new(), &mut out) } else { i + 1 };
    }
    out
}

/// Parses the use-tree (or plain path) at `toks[i]` below `prefix` into `out`; returns the index after it.
fn tree(toks: &[Token], mut i: usize, mut prefix: Written, out: &mut Vec<Written>) -> usize {
    let at = |k: usize| toks.get(k).map_or("", |t| t.0.as_str());
    while at(i).starts_with(|ch: char| ch.is_alphanumeric() || ch == '_') {
        prefix.push(toks[i].clone());
        i += 1;
        if at(i) != "::" {
            out.push(prefix);
            return i;
        }
        i += 1;
    }
    if at(i) == "{" {
        i += 1;
        while !matches!(at(i), "}" | "") {
            i = tree(toks, i, prefix.clone(), out);
            while !matches!(at(i), "," | "}" | "") {
                i += 1; // `as name`
            }
            i += usize::from(at(i) == ",");
        }
        return i + 1;
    }
    out.push(prefix); // `*`, a glob: the module itself
    i + usize::from(at(i) == "*")
}

/// `path` as an absolute module path from the crate root, seen from module `from`, with the line of its first
/// segment that is not `crate`, `super` or `self`.
fn resolve(from: &[String], path: &Written) -> (Module, usize) {
    let mut abs = from.to_vec();
    for (seg, _) in path {
        match seg.as_str() {
            "crate" => abs.clear(),
            "super" => drop(abs.pop()),
            "self" => {}
            _ => abs.push(seg.clone()),
        }
    }
    let named = path.iter().find(|(seg, _)| !matches!(seg.as_str(), "crate" | "super" | "self"));
    (abs, named.unwrap_or(&path[0]).1)
}

/// The module names of each bullet of the `# Layers` section of lib.rs's docs, bottom layer first.
fn layers(lib: &str) -> Result<Vec<Vec<String>>, String> {
    let docs = lib.lines().map(str::trim_start).take_while(|l| l.starts_with("//!") || l.is_empty());
    let section = docs.skip_while(|l| l.trim_end() != "//! # Layers").skip(1);
    let mut out = Vec::new();
    for line in section.take_while(|l| l.starts_with("//!") && !l.starts_with("//! #")) {
        let Some(bullet) = line.strip_prefix("//! - ") else { continue };
        let head = bullet.split(':').next().unwrap_or_default();
        let names: Vec<String> =
            head.split("[`").skip(1).filter_map(|s| s.split_once("`]")).map(|(n, _)| n.to_string()).collect();
        if names.is_empty() {
            return Err(format!("src/lib.rs: a `# Layers` bullet names no module before its `:`: {line}"));
        }
        out.push(names);
    }
    if out.is_empty() {
        return Err("src/lib.rs: no `# Layers` section in the crate docs with `//! - [`name`]: ..` bullets".into());
    }
    Ok(out)
}

/// The top-level modules `mod name;` declares in lib.rs.
fn declared(lib: &str) -> BTreeSet<String> {
    tokens(lib).windows(3).filter(|w| w[0].0 == "mod" && w[2].0 == ";").map(|w| w[1].0.clone()).collect()
}

/// Every library source file: its path, its module path (`src/uci/mod.rs` -> `[uci]`) and its source.
fn sources() -> Vec<(String, Module, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mut dirs, mut files) = (vec![root.clone()], Vec::new());
    while let Some(dir) = dirs.pop() {
        for path in fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            (if path.is_dir() { &mut dirs } else { &mut files }).push(path);
        }
    }
    files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&root).unwrap();
        let mut module: Module = rel.with_extension("").iter().map(|s| s.to_string_lossy().into_owned()).collect();
        if module == ["main"] || module[0] == "bin" {
            continue; // the binaries, on top of everything
        }
        if module == ["lib"] || module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        out.push((format!("src/{}", rel.display()), module, fs::read_to_string(&file).unwrap()));
    }
    out
}

/// Every path written in a library file: where (`file:line`), the file's module, the module path it names.
fn references() -> Vec<(String, Module, Module)> {
    let mut out = Vec::new();
    for (file, module, code) in sources() {
        for path in written_paths(&code) {
            let (abs, line) = resolve(&module, &path);
            out.push((format!("{file}:{line}"), module.clone(), abs));
        }
    }
    out
}

/// The crate root, whose docs hold the layers and which declares the top-level modules.
const LIB: &str = include_str!("../src/lib.rs");

#[test]
fn layer_list_names_every_module() {
    let listed: Vec<String> = layers(LIB).unwrap_or_else(|e| panic!("{e}")).concat();
    let declared = declared(LIB);
    let mut errors = Vec::new();
    for m in declared.iter().filter(|m| !listed.contains(m)) {
        errors.push(format!("module `{m}` is declared in src/lib.rs but missing from its `# Layers` list"));
    }
    for m in listed.iter().filter(|m| !declared.contains(*m)) {
        errors.push(format!("`# Layers` lists `{m}`, which src/lib.rs does not declare"));
    }
    for m in listed.iter().filter(|m| listed.iter().filter(|n| n == m).count() > 1).collect::<BTreeSet<_>>() {
        errors.push(format!("`# Layers` lists `{m}` more than once"));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn modules_use_only_lower_layers() {
    let layers = layers(LIB).unwrap_or_else(|e| panic!("{e}"));
    let level: BTreeMap<&str, usize> =
        layers.iter().enumerate().flat_map(|(i, names)| names.iter().map(move |n| (n.as_str(), i))).collect();
    let mut errors = Vec::new();
    for (at, module, abs) in references().iter().filter(|(_, m, _)| !m.is_empty()) {
        let (Some(&own), Some(other)) = (level.get(module[0].as_str()), abs.first()) else { continue };
        let Some(&j) = level.get(other.as_str()).filter(|&&j| j > own) else { continue };
        errors.push(format!("{at}: {} (level {own}) uses {other} (level {j})", module[0]));
    }
    errors.dedup(); // once for all the leaves of a `use` group on one line
    assert!(errors.is_empty(), "{} layering violation(s):\n{}", errors.len(), errors.join("\n"));
}

#[test]
fn submodules_do_not_import_each_other() {
    let modules: BTreeSet<Module> = sources().into_iter().map(|(_, m, _)| m).collect();
    let related = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    // Only imports within one top-level module, between modules neither of which is the other's ancestor.
    let mut edges = Graph::new();
    for (at, module, abs) in references().into_iter().filter(|(_, m, _)| !m.is_empty()) {
        // The most specific module file the path names: `uci::session::Out` is `uci::session`.
        let Some(target) = (1..=abs.len()).rev().map(|n| &abs[..n]).find(|p| modules.contains(*p)) else { continue };
        if target[0] == module[0] && !related(&module, target) {
            edges.entry(module).or_default().entry(target.to_vec()).or_insert(at);
        }
    }
    // Every cycle, mutual imports included: from each start, a DFS through later modules only finds each once.
    fn dfs<'a>(g: &'a Graph, path: &mut Vec<&'a Module>, out: &mut Vec<Vec<&'a Module>>) {
        for next in g.get(path[path.len() - 1]).into_iter().flat_map(|t| t.keys()) {
            if next == path[0] {
                out.push(path.iter().copied().chain([next]).collect());
            } else if next > path[0] && !path.contains(&next) {
                path.push(next);
                dfs(g, path, out);
                path.pop();
            }
        }
    }
    let mut cycles = Vec::new();
    edges.keys().for_each(|start| dfs(&edges, &mut vec![start], &mut cycles));
    let mut errors = Vec::new();
    for cycle in cycles {
        let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
        let at: Vec<&str> = cycle.windows(2).map(|w| edges[w[0]][w[1]].as_str()).collect();
        errors.push(format!("{} (imports at {})", names.join(" -> "), at.join(", ")));
    }
    assert!(errors.is_empty(), "{} submodule import cycle(s):\n{}", errors.len(), errors.join("\n"));
}

/// The layers inside `uci`, from the "From the bottom up" list of `src/uci/mod.rs`'s docs: one bullet a level, its
/// submodules named in backticks before the bullet's first `:`. The `go` decision (`policy`) sits above the executors
/// it hands a move to (`answer`, `direct`, `growth`), and none of them calls back up into it or into each other's
/// higher neighbours.
fn sublayers(module_docs: &str) -> Vec<Vec<String>> {
    let docs = module_docs.lines().map(str::trim_start).take_while(|l| l.starts_with("//!") || l.is_empty());
    let list = docs.skip_while(|l| !l.contains("From the bottom up")).skip(1);
    let mut out = Vec::new();
    for line in list.take_while(|l| l.starts_with("//!") && !l.starts_with("//! #")) {
        let Some(bullet) = line.strip_prefix("//! - ") else { continue };
        let head = bullet.split(':').next().unwrap_or_default();
        out.push(head.split('`').skip(1).step_by(2).map(str::to_string).collect());
    }
    out
}

#[test]
fn uci_submodules_use_only_lower_layers() {
    let mod_rs = include_str!("../src/uci/mod.rs");
    let layers = sublayers(mod_rs);
    let level: BTreeMap<&str, usize> =
        layers.iter().enumerate().flat_map(|(i, names)| names.iter().map(move |n| (n.as_str(), i))).collect();
    let mut errors = Vec::new();
    for m in declared(mod_rs).iter().filter(|m| !level.contains_key(m.as_str())) {
        errors.push(format!("src/uci/mod.rs declares `{m}`, which its \"From the bottom up\" list leaves out"));
    }
    for (at, module, abs) in references() {
        let (Some(own), Some(other)) = (module.get(1), abs.get(1)) else { continue };
        if module[0] != "uci" || abs[0] != "uci" || own == other {
            continue;
        }
        let (Some(&i), Some(&j)) = (level.get(own.as_str()), level.get(other.as_str())) else { continue };
        if j > i {
            errors.push(format!("{at}: uci::{own} (level {i}) uses uci::{other} (level {j})"));
        }
    }
    errors.dedup();
    assert!(errors.is_empty(), "{} layering violation(s) inside uci:\n{}", errors.len(), errors.join("\n"));
}

/// The terminal is the command layer's: the status line it hands the search (`logger::StatusLine`) is the one place
/// that writes terminal escape codes; the search says what a progress line holds, never how it is drawn.
#[test]
fn only_the_status_line_writes_terminal_escape_codes() {
    let escapes = ["\\x1b", "\\u{1b}", "\\033"];
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|(file, _, code)| file != "src/logger.rs" && escapes.iter().any(|e| code.contains(e)))
        .map(|(file, ..)| file)
        .collect();
    assert!(offenders.is_empty(), "terminal escape codes outside src/logger.rs: {}", offenders.join(", "));
}

/// Tests of the checker itself.
mod self_tests {
    use super::*;

    fn resolved(from: &[&str], code: &str) -> Vec<String> {
        let from: Vec<String> = from.iter().map(|s| s.to_string()).collect();
        written_paths(code).iter().map(|p| resolve(&from, p).0.join("::")).collect()
    }

    #[test]
    fn use_groups_expand_to_every_leaf() {
        let code = "use crate::{a::b,\n c::{d, e as f}, g::*};\nuse super::{tree, x::{self, y}};";
        assert_eq!(
            resolved(&["uci", "policy"], code),
            ["a::b", "c::d", "c::e", "g", "uci::tree", "uci::x", "uci::x::y"]
        );
        let code = "use super::*;\nself::a::f(); super::super::engine::g(); pub(super) fn h(&self) {}";
        assert_eq!(resolved(&["uci", "session"], code), ["uci", "uci::session::a::f", "engine::g"]);
        let lines: Vec<usize> =
            written_paths("use crate::{\n  a::b,\n  c::d };").iter().map(|p| resolve(&[], p).1).collect();
        assert_eq!(lines, [2, 3]);
    }

    #[test]
    fn comments_strings_and_test_modules_are_ignored() {
        let code = r##"//! see crate::uci
/// [`x`](crate::uci::A)
// crate::uci
/* crate::uci /* nested */ crate::uci */
let s = "crate::uci \" crate::uci"; let r = r#"crate::uci"#; let c = '"'; let l: &'a str;
#[cfg(test)]
mod tests { use crate::uci; fn f() { {} } }
crate::store::f(b'\'', crate::score::x);"##;
        assert_eq!(resolved(&["engine"], code), ["store::f", "score::x"]);
        assert_eq!(written_paths(code).iter().map(|p| resolve(&[], p).1).collect::<Vec<_>>(), [8, 8]);
    }

    #[test]
    fn layers_are_read_from_the_bullets() {
        let lib = "//! Crate.\n//!\n//! # Layers\n//!\n//! From the bottom up.\n//!\n\
                   //! - [`score`], [`notation`]: a: b [`no`]\n//!   more [`not`]: this\n\
                   //! - [`commands`], [`bench`](mod@bench): top\n//!\n//! # Other\n//! - [`x`]: y\n\n\
                   pub mod score;\nmod notation; // mod z;\n";
        assert_eq!(layers(lib).unwrap(), [vec!["score", "notation"], vec!["commands", "bench"]]);
        assert_eq!(declared(lib).into_iter().collect::<Vec<_>>(), ["notation", "score"]);
        assert!(layers("//! Crate.\n\npub mod a;\n").unwrap_err().contains("no `# Layers` section"));
        assert!(layers("//! # Layers\n//!\n//! - no links: here\n").unwrap_err().contains("names no module"));
    }
}
