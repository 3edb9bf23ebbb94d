//! The scan of a stretch of PGN text: every token and tag pair read as `pgn-reader` 0.29 reads it, the first problem
//! of each game kept, and the moves in SAN counted, so that a game with a token `pgn-reader` passed over is reported.

use std::ops::Range;

use pgn_reader::SanPlus;

use crate::game::quote;

/// What the scan of a stretch found.
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// The open game, then one part for every game that starts after a result.
    pub(super) parts: Vec<Part>,
    /// The tag pairs that are well formed: the ranges of their names and values.
    pub(super) tags: Vec<(Range<usize>, Range<usize>)>,
    /// Whether there is anything but tag pairs.
    pub(super) movetext: bool,
    /// Variations open in the open game.
    pub(super) depth: i64,
    /// The open game has its result.
    pub(super) ended: bool,
    /// A problem after the result: it goes with the game that follows, if one does in the stretch.
    pub(super) pending: Option<String>,
}

#[derive(Debug, Default)]
pub(super) struct Part {
    pub(super) line: u64,
    /// Moves in SAN.
    pub(super) sans: usize,
    pub(super) problem: Option<String>,
}

impl Scan {
    fn problem(&mut self, problem: impl FnOnce() -> String) {
        if self.ended {
            self.pending.get_or_insert_with(problem);
        } else if let Some(part) = self.parts.last_mut() {
            part.problem.get_or_insert_with(problem);
        }
    }

    /// A move or a parenthesis: after a result, it starts the next game.
    fn item(&mut self, line: u64) {
        self.movetext = true;
        if std::mem::take(&mut self.ended) {
            self.parts.push(Part { line, problem: self.pending.take(), ..Part::default() });
            self.depth = 0;
        }
    }

    /// A result: outside variations, it ends the open game.
    fn result(&mut self) {
        self.movetext = true;
        self.ended |= self.depth <= 0;
    }
}

/// Bytes that end a token, as `pgn-reader` 0.29 has them.
fn is_token_end(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'{' | b'}' | b'(' | b')' | b'!' | b'?' | b'$' | b';' | b'.' | b'*')
}

/// Scans the text of a stretch, which starts at `line` with `depth` variations of the open game open and
/// `sans_before` of its moves read: every token and tag pair must be one `pgn-reader` reads for what it is.
pub(super) fn scan(raw: &[u8], mut line: u64, depth: i64, sans_before: usize) -> Scan {
    let mut out = Scan { parts: vec![Part { line, ..Part::default() }], depth, ..Scan::default() };
    let mut i = 0;
    loop {
        i = skip_blanks(raw, i, &mut line);
        if raw.get(i) != Some(&b'[') {
            break;
        }
        match tag_at(raw, i) {
            Ok((end, name, value)) => {
                out.tags.push((name, value));
                i = end;
            }
            Err(why) => {
                out.problem(|| format!("line {line}: {why}"));
                i = line_end(raw, i);
            }
        }
    }
    while let Some(&byte) = raw.get(i) {
        match byte {
            b'\n' => {
                line += 1;
                i += 1;
                if raw.get(i) == Some(&b'%') {
                    i = line_end(raw, i);
                }
            }
            b' ' | b'\t' | b'\r' | b'.' | b'!' | b'?' => i += 1,
            b'{' => match raw.get(i..).unwrap_or_default().iter().position(|&b| b == b'}') {
                Some(n) => {
                    line += newlines(raw.get(i..i + n).unwrap_or_default());
                    i += n + 1;
                }
                None => {
                    out.problem(|| format!("line {line}: comment without its closing '}}'"));
                    break;
                }
            },
            b';' => i = line_end(raw, i),
            b'(' | b')' => {
                out.item(line);
                out.depth += if byte == b'(' { 1 } else { -1 };
                i += 1;
            }
            b'*' => {
                out.result();
                i += 1;
            }
            b'}' => {
                out.movetext = true;
                out.problem(|| format!("line {line}: unexpected character '}}'"));
                i += 1;
            }
            _ => {
                let nag = byte == b'$';
                let start = i + usize::from(nag);
                let end = raw
                    .get(start..)
                    .unwrap_or_default()
                    .iter()
                    .position(|&b| is_token_end(b))
                    .map_or(raw.len(), |n| start + n);
                let word = raw.get(start..end).unwrap_or_default();
                i = end.max(i + 1);
                out.movetext = true;
                if word.iter().all(u8::is_ascii_digit) {
                    // A move number, or a NAG's.
                    continue;
                }
                if nag {
                    out.problem(|| {
                        format!("line {line}: NAG {} is not a number", quote(&String::from_utf8_lossy(word)))
                    });
                    continue;
                }
                if is_san(word) {
                    out.item(line);
                    if let Some(part) = out.parts.last_mut() {
                        part.sans += 1;
                    }
                    continue;
                }
                if word == b"e" && raw.get(end..).is_some_and(|rest| rest.starts_with(b".p.")) {
                    // "e.p." after an en passant capture, which pgn-reader passes over too (as "ep").
                    i = end + 3;
                    continue;
                }
                // pgn-reader takes a result at the start of a word (the rest of the word is a problem of the game
                // it ends, here).
                let result = result_prefix(word);
                if result != Some(word.len()) && word != b"ep" {
                    let word = quote(&String::from_utf8_lossy(word));
                    if out.ended {
                        // Before the next game's first move, or after the last result.
                        out.problem(|| format!("line {line}: {word} is not SAN"));
                    } else {
                        let before = if out.parts.len() == 1 { sans_before } else { 0 };
                        let number = before + out.parts.last().map_or(0, |p| p.sans) + 1;
                        out.problem(|| format!("move {number} {word} is not SAN"));
                    }
                }
                if result.is_some() {
                    out.result();
                }
            }
        }
    }
    // A problem after the last result goes with that game.
    if let (Some(problem), Some(part)) = (out.pending.take(), out.parts.last_mut()) {
        part.problem.get_or_insert(problem);
    }
    out
}

/// A move in SAN as `pgn-reader` reads it (castling with zeros too).
fn is_san(word: &[u8]) -> bool {
    if word.starts_with(b"0-0") {
        let letters: Vec<u8> = word.iter().map(|&b| if b == b'0' { b'O' } else { b }).collect();
        return SanPlus::from_ascii(&letters).is_ok();
    }
    SanPlus::from_ascii(word).is_ok()
}

/// The length of the result that `word` starts with, as `pgn-reader` reads one: `1-0`, `0-1`, `1/2-1/2` or
/// `½-½`, with any of its dashes.
fn result_prefix(word: &[u8]) -> Option<usize> {
    let dash = |rest: &[u8]| ["-", "–", "—"].into_iter().find(|d| rest.starts_with(d.as_bytes())).map(str::len);
    let then =
        |at: usize, what: &[u8]| word.get(at..).is_some_and(|rest| rest.starts_with(what)).then_some(at + what.len());
    let half = "½".as_bytes();
    match word {
        [b'0', rest @ ..] => then(1 + dash(rest)?, b"1"),
        [b'1', b'/', b'2', rest @ ..] => then(3 + dash(rest)?, b"1/2"),
        [b'1', rest @ ..] => then(1 + dash(rest)?, b"0"),
        _ if word.starts_with(half) => then(half.len() + dash(word.get(half.len()..)?)?, half),
        _ => None,
    }
}

/// Skips blanks and escape lines (a `%` at the start of a line) from `i`, counting lines.
fn skip_blanks(raw: &[u8], mut i: usize, line: &mut u64) -> usize {
    let mut line_start = i == 0 || raw.get(i - 1) == Some(&b'\n');
    while let Some(&b) = raw.get(i) {
        match b {
            b'\n' => {
                *line += 1;
                line_start = true;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'%' if line_start => i = line_end(raw, i),
            _ => break,
        }
    }
    i
}

/// Where the line that `i` is on ends (its `\n`, or the end of the text).
fn line_end(raw: &[u8], i: usize) -> usize {
    raw.get(i..).unwrap_or_default().iter().position(|&b| b == b'\n').map_or(raw.len(), |n| i + n)
}

pub(super) fn newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// The tag pair at `raw[i]` (a `[`): where it ends and the ranges of its name and value, or what is wrong with it.
fn tag_at(raw: &[u8], i: usize) -> Result<(usize, Range<usize>, Range<usize>), &'static str> {
    let after = raw.get(i + 1..).unwrap_or_default();
    let Some(quote) = after.iter().position(|&b| matches!(b, b'"' | b'\n' | b']')).map(|n| i + 1 + n) else {
        return Err("malformed tag");
    };
    let name = raw.get(i + 1..quote).unwrap_or_default().trim_ascii();
    let name_ok = |b: &u8| b.is_ascii_alphanumeric() || b"_+#=:-".contains(b);
    if raw.get(quote) != Some(&b'"') || name.is_empty() || !name.iter().all(name_ok) {
        return Err("malformed tag");
    }
    let mut k = quote + 1;
    loop {
        match raw.get(k) {
            Some(b'"') => break,
            Some(b'\\') if raw.get(k + 1).is_some_and(|&b| b != b'\n') => k += 2,
            None | Some(b'\n' | b'\\') => return Err("tag value without its closing quote"),
            Some(_) => k += 1,
        }
    }
    let value = quote + 1..k;
    let mut end = k + 1;
    while matches!(raw.get(end), Some(b' ' | b'\t' | b'\r')) {
        end += 1;
    }
    if raw.get(end) != Some(&b']') {
        return Err("tag without its closing ']'");
    }
    let name_start =
        i + 1 + raw.get(i + 1..quote).unwrap_or_default().iter().take_while(|b| b.is_ascii_whitespace()).count();
    Ok((end + 1, name_start..name_start + name.len(), value))
}
