//! EPD in and out: positions with `ce` (centipawns for the side to move), `acd` (depth), `bm` (best moves, SAN) and
//! `pv` (SAN).
//!
//! ```
//! use deeptree::interop::epd::parse_line;
//! use deeptree::score::Score;
//!
//! let record = parse_line("4k3/8/8/8/8/8/4P3/4K3 w - - bm e4; ce 150; acd 20; id \"x; y\";").unwrap().unwrap();
//! assert_eq!(record.score, Some(Score::cp(150)));
//! assert_eq!(record.depth, Some(20));
//! assert_eq!(record.best.iter().map(|m| m.to_string()).collect::<Vec<_>>(), ["e2e4"]);
//! ```
//!
//! # Import
//!
//! Each line is a position (four FEN fields, optionally followed by the two move counters) and operations. With `ce`
//! (or `dm`, mate in n moves) and a best move (`bm`, else the first move of `pv`), the position gets that evaluation
//! (depth `acd`, 0 when absent: the next analysis at its engine depth evaluates it again) and an edge for each `bm`
//! move with that score. A `bm` without a score becomes an imported move (see [`super`]). A score without any best
//! move cannot be stored (the store ties an evaluation to its best move) and is reported; the position is still
//! stored. Lines that do not parse are reported with their line number and skipped.
//!
//! # Export
//!
//! One line per position that has an evaluation: `ce` is the best alpha score from that position (no history), `acd`
//! the engine depth behind it ([`ShownMove::depth`](crate::search::show::ShownMove::depth)), `bm` the best move and
//! `pv` the line that follows the best move at each position (up to 32 plies, stopping before a repetition). A move
//! that nothing has valued yet (an imported one) is never a best move: a position with no other is written from its
//! own evaluation, or left out without one. Mate scores are written as `ce ±(32767 − plies)`, with
//! `dm n` added when the side to move mates in `n`.

use crate::game::{play_uci, quote};
use std::{
    borrow::Borrow,
    io::{BufRead, Write},
};

use shakmaty::{
    Chess, EnPassantMode, Position,
    fen::Epd,
    san::{San, SanPlus},
    uci::UciMove,
};

use crate::{
    score::{Bound, Score},
    store::{
        Change, ReadView, Store, StoreError,
        answer::{Answer, Searched},
        key::{KeyMap, KeySet, PositionKey},
        node::{Edge, Eval, Node, PackedPosition},
    },
};

use super::{
    BatchWriter, InteropError, gather,
    lines::{BoundedLines, MAX_LINE_BYTES},
    walk::{self, Scope},
};

/// One EPD line.
#[derive(Debug, Clone)]
pub struct EpdRecord {
    pub position: Chess,
    pub score: Option<Score>,
    pub depth: Option<u8>,
    pub nodes: Option<u64>,
    pub best: Vec<UciMove>,
    pub pv: Vec<UciMove>,
}

/// ce values at or beyond this magnitude are mates: 32767 − plies.
const CE_MATE: i64 = 32_767;

/// Parses one line; `Ok(None)` for a blank or comment (`#`) line.
pub fn parse_line(line: &str) -> Result<Option<EpdRecord>, String> {
    parse_line_in(line, false)
}

/// As [`parse_line`], the position set up for Chess960 with `chess960` (a Shredder-FEN implies it).
pub fn parse_line_in(line: &str, chess960: bool) -> Result<Option<EpdRecord>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let mut rest = line;
    let mut fen = Vec::new();
    for _ in 0..4 {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if end == 0 {
            return Err("fewer than four position fields".into());
        }
        fen.push(&rest[..end]);
        rest = rest[end..].trim_start();
    }
    let fen = fen.join(" ");
    let (position, _) =
        crate::notation::parse_position(&fen, chess960).map_err(|e| format!("bad position {}: {e}", quote(&fen)))?;
    // Optional move counters, as in a FEN.
    for _ in 0..2 {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        if end > 0 && rest[..end].bytes().all(|b| b.is_ascii_digit()) {
            rest = rest[end..].trim_start();
        }
    }
    let mut record = EpdRecord { position, score: None, depth: None, nodes: None, best: Vec::new(), pv: Vec::new() };
    let mut mate: Option<i64> = None;
    for (opcode, operands) in operations(rest)? {
        let number = |what: &str| -> Result<i64, String> {
            operands
                .first()
                .and_then(|o| o.parse::<i64>().ok())
                .ok_or_else(|| format!("{what}: {} is not a number", quote(&operands.join(" "))))
        };
        match opcode.as_str() {
            "ce" => {
                let ce = number("ce")?;
                record.score = Some(if ce.abs() >= CE_MATE - 999 {
                    let plies = (CE_MATE - ce.abs()).clamp(0, 999) as u16;
                    if ce > 0 { Score::mate_in_plies(plies.max(1)) } else { Score::mated_in_plies(plies) }
                } else {
                    Score::cp(ce.clamp(-30_000, 30_000) as i32)
                });
            }
            "dm" => mate = Some(number("dm")?),
            "acd" => record.depth = Some(number("acd")?.clamp(0, 255) as u8),
            "acn" => record.nodes = Some(number("acn")?.max(0) as u64),
            "bm" => record.best = sans(&record.position, &operands, false).map_err(|e| format!("bm: {e}"))?,
            "pv" => record.pv = sans(&record.position, &operands, true).map_err(|e| format!("pv: {e}"))?,
            _ => {}
        }
    }
    if record.score.is_none()
        && let Some(n) = mate
    {
        record.score = Some(Score::from_uci_mate(n.clamp(-500, 500) as i32));
    }
    Ok(Some(record))
}

/// Splits `op a b; op2 "x; y";` into opcodes and operands (quoted operands keep their spaces and semicolons).
fn operations(text: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        word.push(next);
                    }
                }
                '"' => quoted = false,
                c => word.push(c),
            }
            continue;
        }
        match c {
            '"' => {
                quoted = true;
                was_quoted = true;
            }
            ';' | ' ' | '\t' => {
                if !word.is_empty() || was_quoted {
                    words.push(std::mem::take(&mut word));
                    was_quoted = false;
                }
                if c == ';' && !words.is_empty() {
                    let opcode = words.remove(0);
                    out.push((opcode, std::mem::take(&mut words)));
                }
            }
            c => word.push(c),
        }
    }
    if quoted {
        return Err("a string without its closing quote".into());
    }
    if !word.is_empty() || was_quoted {
        words.push(word);
    }
    if !words.is_empty() {
        // The last operation may lack its semicolon.
        let opcode = words.remove(0);
        out.push((opcode, words));
    }
    Ok(out)
}

/// SAN moves, each from `pos` (`sequence` false) or each after the previous one (`sequence` true).
fn sans(pos: &Chess, words: &[String], sequence: bool) -> Result<Vec<UciMove>, String> {
    let mut current = pos.clone();
    let mut out = Vec::new();
    for word in words {
        let san: SanPlus = word.parse().map_err(|_| format!("{} is not SAN", quote(word)))?;
        let m = san.san.to_move(&current).map_err(|_| format!("{} is illegal", quote(word)))?;
        out.push(crate::notation::canonical(m));
        if sequence {
            current.play_unchecked(m);
        }
    }
    Ok(out)
}

/// A line that was not imported: its number and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    pub line: u64,
    pub reason: String,
}

/// What an EPD import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EpdSummary {
    /// Position lines read.
    pub lines: u64,
    pub skipped: u64,
    /// Distinct positions imported.
    pub positions: u64,
    /// Positions imported with an evaluation.
    pub evaluations: u64,
    /// Scores left out for want of a best move.
    pub scores_without_move: u64,
    pub new_nodes: u64,
    pub refused: u64,
}

/// Imports every line of `input`, calling `on_skipped` for each line that does not parse.
pub fn import_epd(
    store: &Store,
    input: impl BufRead,
    chess960: bool,
    on_skipped: impl FnMut(&SkippedLine),
) -> Result<EpdSummary, InteropError> {
    import_epd_with(|| Ok(store), input, chess960, on_skipped)
}

/// As [`import_epd`], opening the store with `open` once a position has read: an input in which none does leaves
/// no store behind. A line longer than [`MAX_LINE_BYTES`] ends the import with an error naming it.
pub fn import_epd_with<S: Borrow<Store>>(
    open: impl FnOnce() -> Result<S, InteropError>,
    input: impl BufRead,
    chess960: bool,
    mut on_skipped: impl FnMut(&SkippedLine),
) -> Result<EpdSummary, InteropError> {
    let mut summary = EpdSummary::default();
    let mut lines = BoundedLines::new(input, MAX_LINE_BYTES);
    // The next line that reads as a position, each one skipped on the way reported.
    let mut next_record = |summary: &mut EpdSummary| -> Result<Option<(u64, EpdRecord)>, InteropError> {
        for line in lines.by_ref() {
            let (number, line) = line.map_err(|e| InteropError::Invalid(format!("reading the EPD: {e}")))?;
            match parse_line_in(&String::from_utf8_lossy(&line), chess960) {
                Ok(None) => {}
                Ok(Some(record)) => {
                    summary.lines += 1;
                    return Ok(Some((number, record)));
                }
                Err(reason) => {
                    summary.lines += 1;
                    summary.skipped += 1;
                    on_skipped(&SkippedLine { line: number, reason });
                }
            }
        }
        Ok(None)
    };
    let Some(first) = next_record(&mut summary)? else { return Ok(summary) };
    let store = open()?;
    let store = store.borrow();
    let before = store.stats()?;
    let mut batch: KeyMap<(Chess, Node)> = KeyMap::default();
    let mut seen = KeySet::default();
    let mut writer = BatchWriter::new(store);
    let mut refused = |key: PositionKey, e: &StoreError| log::warn!("position {key} not imported: {e}");
    let mut next = Some(first);
    while let Some((number, record)) = next.take() {
        let pos = record.position.clone();
        let key = PositionKey::of(&pos);
        seen.insert(key);
        let mut node = Node::new(PackedPosition::of(&pos));
        let best = record.best.first().or(record.pv.first()).copied();
        let depth = record.depth.unwrap_or(0);
        match (record.score, best) {
            (Some(score), Some(best)) => {
                // An evaluation with its best move, no bound on the others (an EPD line says nothing of them); every
                // other best move (`bm`) gets the same score.
                let answer =
                    Answer { best, score, bound: Bound::Exact, depth, nodes: record.nodes.unwrap_or(0), engine: None };
                node = answer.record(&pos, Searched::PrincipalVariation, None);
                for uci in record.best.iter().filter(|m| **m != best) {
                    node.edges.push(Edge::new(*uci, score, Bound::Exact, depth));
                }
                summary.evaluations += 1;
            }
            (Some(score), None) if pos.legal_moves().is_empty() => {
                node.eval = Some(Eval {
                    score,
                    bound: Bound::Exact,
                    depth,
                    best: None,
                    nodes: record.nodes.unwrap_or(0),
                    engine: None,
                });
                summary.evaluations += 1;
            }
            (Some(_), None) => {
                summary.scores_without_move += 1;
                log::info!("line {number}: a score without a best move is not stored");
            }
            (None, _) => {
                for uci in &record.best {
                    node.edges.push(Edge::placeholder(*uci));
                }
            }
        }
        match batch.get_mut(&key) {
            Some((_, gathered)) => {
                let edges = std::mem::take(&mut node.edges);
                gathered.merge(&node);
                for edge in edges {
                    gather(gathered, edge);
                }
            }
            None => {
                batch.insert(key, (pos, node));
            }
        }
        if batch.len() >= 20_000 {
            writer.submit(to_changes(std::mem::take(&mut batch))?, &mut refused)?;
        }
        next = next_record(&mut summary)?;
    }
    writer.submit(to_changes(batch)?, &mut refused)?;
    writer.finish(&mut refused)?;
    summary.positions = seen.len() as u64;
    summary.new_nodes = store.stats()?.positions.saturating_sub(before.positions);
    summary.refused = writer.refused;
    Ok(summary)
}

fn to_changes(batch: KeyMap<(Chess, Node)>) -> Result<Vec<Change>, InteropError> {
    batch.into_values().map(|(pos, node)| Change::merge(&pos, node).map_err(InteropError::from)).collect()
}

/// What an EPD export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EpdExportSummary {
    pub positions: u64,
}

/// Longest `pv` written.
const PV_PLIES: usize = 32;

/// `ce` of a score: centipawns, or ±(32767 − plies) for a mate.
pub fn ce_of(score: Score) -> i64 {
    match score.as_uci_mate() {
        None => i64::from(score.value()),
        Some(_) => {
            // Plies to mate from the internal value: mate scores are ±(32000 − plies).
            let plies = 32_000 - i64::from(score.value().abs());
            if score.value() > 0 { CE_MATE - plies } else { -(CE_MATE - plies) }
        }
    }
}

/// Writes one EPD line for each evaluated position of `scope`.
pub fn export_epd(view: &ReadView<'_>, scope: &Scope, out: &mut impl Write) -> Result<EpdExportSummary, InteropError> {
    let mut summary = EpdExportSummary::default();
    let mut text = String::new();
    for (key, pos) in walk::positions(view, scope)? {
        let Some(node) = view.node(key)? else { continue };
        let ranked = walk::ranked(view, &pos)?;
        let (score, depth, best) = match walk::best(&ranked) {
            Some(best) => (best.alpha, best.depth, best.uci.parse::<UciMove>().ok()),
            // No move valued: the position's own evaluation, unless its best move is one the analyst excluded.
            None => match &node.eval {
                Some(eval) if eval.best.is_some_and(|b| node.edge(&b).is_some_and(|e| e.is_excluded())) => continue,
                Some(eval) => (eval.score, eval.depth, eval.best),
                None => continue,
            },
        };
        text.clear();
        text.push_str(&Epd::from_position(&pos, EnPassantMode::Legal).to_string());
        text.push_str(&format!(" ce {}; acd {depth};", ce_of(score)));
        if let Some(n) = score.as_uci_mate().filter(|n| *n > 0) {
            text.push_str(&format!(" dm {n};"));
        }
        if let Some(best) = best.and_then(|b| san(&pos, &b)) {
            text.push_str(&format!(" bm {best};"));
        }
        let pv = principal_variation(view, &pos)?;
        if !pv.is_empty() {
            text.push_str(&format!(" pv {};", pv.join(" ")));
        }
        text.push('\n');
        out.write_all(text.as_bytes()).map_err(|e| InteropError::Invalid(format!("writing the EPD: {e}")))?;
        summary.positions += 1;
    }
    Ok(summary)
}

fn san(pos: &Chess, uci: &UciMove) -> Option<String> {
    let m = uci.to_move(pos).ok()?;
    Some(SanPlus::from_move(pos.clone(), m).to_string())
}

/// The best move at each position from `pos` on (by alpha from each position), in SAN.
fn principal_variation(view: &ReadView<'_>, pos: &Chess) -> Result<Vec<String>, InteropError> {
    let mut out = Vec::new();
    let mut current = pos.clone();
    let mut seen = KeySet::default();
    seen.insert(PositionKey::of(&current));
    while out.len() < PV_PLIES {
        let ranked = walk::ranked(view, &current)?;
        let Some(best) = walk::best(&ranked) else { break };
        let Ok(uci) = best.uci.parse::<UciMove>() else { break };
        let Some(next) = play_uci(&current, &uci) else { break };
        if !seen.insert(PositionKey::of(&next)) {
            break;
        }
        let Ok(m) = uci.to_move(&current) else { break };
        out.push(San::from_move(&current, m).to_string());
        current = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_and_counters() {
        let r =
            parse_line("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 bm Nf3 e4; pv e4 e5 Nf3; acn 1000")
                .unwrap()
                .unwrap();
        assert_eq!(r.best.len(), 2);
        assert_eq!(r.pv.iter().map(|m| m.to_string()).collect::<Vec<_>>(), ["e2e4", "e7e5", "g1f3"]);
        assert_eq!(r.nodes, Some(1000));
        assert_eq!(r.score, None);
        let spaced = parse_line("  4k3/8/8/8/8/8/4P3/4K3   w  -   -    ce  12 ;  acd 3").unwrap().unwrap();
        assert_eq!((spaced.score, spaced.depth), (Some(Score::cp(12)), Some(3)));
    }

    #[test]
    fn mates_round_trip_through_ce() {
        for score in [Score::from_uci_mate(3), Score::from_uci_mate(-2), Score::mated_in_plies(0), Score::cp(-45)] {
            let line = format!("4k3/8/8/8/8/8/4P3/4K3 w - - ce {};", ce_of(score));
            assert_eq!(parse_line(&line).unwrap().unwrap().score, Some(score), "{line}");
        }
        let dm = parse_line("4k3/8/8/8/8/8/4P3/4K3 w - - dm 2;").unwrap().unwrap();
        assert_eq!(dm.score, Some(Score::from_uci_mate(2)));
    }

    #[test]
    fn bad_lines_say_why() {
        assert!(parse_line("8/8/8 w - -").unwrap_err().contains("bad position"));
        assert!(parse_line("4k3/8/8/8/8/8/4P3/4K3 w - - bm Kd2 Qh5;").unwrap_err().contains("'Qh5'"));
        assert!(parse_line("4k3/8/8/8/8/8/4P3/4K3 w - - ce x;").unwrap_err().contains("not a number"));
        assert!(parse_line("# a comment").unwrap().is_none());
    }
}
