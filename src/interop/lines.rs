//! Lines of text read with a bound on their length, so that a file with no line end (`/dev/zero`, a binary file, a
//! damaged download) is an error naming its line instead of a read that holds all of it in memory.
//!
//! ```
//! use deeptree::interop::lines::{BoundedLines, TextError};
//!
//! let mut lines = BoundedLines::new("1. e4\r\nabcdefg\n".as_bytes(), 6);
//! assert_eq!(lines.next().unwrap()?, (1, b"1. e4\r".to_vec()));
//! assert!(matches!(lines.next(), Some(Err(TextError::TooLong { line: 2, bound: 6 }))));
//! assert!(lines.next().is_none(), "nothing is read after an error");
//! # Ok::<_, TextError>(())
//! ```
//!
//! The bounds: 1 MiB a line for EPD files, `analyze --roots` files and the settings file
//! ([`MAX_LINE_BYTES`]); 16 MiB a line for PGN ([`MAX_PGN_LINE_BYTES`]), where some programs write a game's whole
//! movetext, comments and variations included, on one line. A reader holds at most one line (plus its own buffer).

use std::{
    fmt,
    io::{self, BufRead, Read},
};

/// The longest line of an EPD file, an `analyze --roots` file or the settings file, in bytes.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The longest line of a PGN file, in bytes.
pub const MAX_PGN_LINE_BYTES: usize = 16 << 20;

/// A line that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// A line longer than the bound (counted without its line end).
    #[error("line {line} is longer than {} (the most a line may hold here)", Bytes(*bound))]
    TooLong { line: u64, bound: usize },
    /// The input failed while this line was read.
    #[error("line {line}: {source}")]
    Io { line: u64, source: io::Error },
}

/// A size in bytes as people read it: `1 MiB`, `64 KiB`, `300 bytes`.
pub struct Bytes(pub usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            n if n >= 1 << 20 && n % (1 << 20) == 0 => write!(f, "{} MiB", n >> 20),
            n if n >= 1 << 10 && n % (1 << 10) == 0 => write!(f, "{} KiB", n >> 10),
            n => write!(f, "{n} bytes"),
        }
    }
}

/// The lines of `input`, each with its 1-based number and without its `\n` (a `\r` before it is kept); ends after
/// the first error.
pub struct BoundedLines<R> {
    input: R,
    bound: usize,
    line: u64,
    done: bool,
}

impl<R: BufRead> BoundedLines<R> {
    pub fn new(input: R, bound: usize) -> BoundedLines<R> {
        BoundedLines { input, bound, line: 0, done: false }
    }
}

impl<R: BufRead> Iterator for BoundedLines<R> {
    type Item = Result<(u64, Vec<u8>), TextError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        self.line += 1;
        let line = self.line;
        let mut bytes = Vec::new();
        // At most the bound and its line end: one byte more without a line end is a line too long.
        let limit = self.bound as u64 + 1;
        let read = loop {
            match (&mut self.input).take(limit).read_until(b'\n', &mut bytes) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        match read {
            Err(source) => {
                self.done = true;
                Some(Err(TextError::Io { line, source }))
            }
            Ok(0) => {
                self.done = true;
                None
            }
            Ok(_) if bytes.last() == Some(&b'\n') => {
                bytes.pop();
                Some(Ok((line, bytes)))
            }
            Ok(_) if bytes.len() > self.bound => {
                self.done = true;
                Some(Err(TextError::TooLong { line, bound: self.bound }))
            }
            // The last line, without its line end.
            Ok(_) => Some(Ok((line, bytes))),
        }
    }
}

/// Counts lines as bytes go by, and fails the read that takes a line past the bound: for readers that take their
/// input as a byte stream (the PGN reader), where lines are not read one by one.
#[derive(Debug, Clone)]
pub struct LineBound {
    bound: usize,
    /// The line being read, 1-based.
    line: u64,
    /// Bytes of it read so far.
    length: usize,
}

impl LineBound {
    pub fn new(bound: usize) -> LineBound {
        LineBound { bound, line: 1, length: 0 }
    }

    /// Takes the bytes just read; an error once a line is longer than the bound.
    pub fn pass(&mut self, bytes: &[u8]) -> Result<(), TextError> {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            if self.length + end > self.bound {
                return Err(TextError::TooLong { line: self.line, bound: self.bound });
            }
            self.line += 1;
            self.length = 0;
            rest = rest.get(end + 1..).unwrap_or_default();
        }
        self.length += rest.len();
        if self.length > self.bound {
            return Err(TextError::TooLong { line: self.line, bound: self.bound });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &[u8], bound: usize) -> Vec<Result<(u64, Vec<u8>), String>> {
        BoundedLines::new(text, bound).map(|r| r.map_err(|e| e.to_string())).collect()
    }

    #[test]
    fn lines_up_to_the_bound_are_read_and_the_first_longer_one_ends_the_reading() {
        let ok = |n: u64, s: &str| Ok((n, s.as_bytes().to_vec()));
        assert_eq!(read_all(b"abc\nabcd\n\nab", 4), [ok(1, "abc"), ok(2, "abcd"), ok(3, ""), ok(4, "ab")]);
        assert_eq!(read_all(b"abcd", 4), [ok(1, "abcd")]);
        assert_eq!(
            read_all(b"ab\nabcde\nab\n", 4),
            [ok(1, "ab"), Err("line 2 is longer than 4 bytes (the most a line may hold here)".to_owned())]
        );
        assert_eq!(read_all(b"", 4), []);
    }

    #[test]
    fn a_stream_of_bytes_is_bounded_line_by_line_across_reads() {
        let mut bound = LineBound::new(4);
        assert!(bound.pass(b"ab").is_ok());
        assert!(bound.pass(b"cd\nabcd").is_ok());
        assert!(bound.pass(b"\n\n").is_ok());
        assert!(matches!(bound.pass(b"abc\nab"), Ok(())));
        assert!(matches!(bound.pass(b"cde"), Err(TextError::TooLong { line: 5, bound: 4 })));
        let mut bound = LineBound::new(4);
        assert!(matches!(bound.pass(b"a\nabcde\n"), Err(TextError::TooLong { line: 2, .. })));
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(Bytes(MAX_LINE_BYTES).to_string(), "1 MiB");
        assert_eq!(Bytes(MAX_PGN_LINE_BYTES).to_string(), "16 MiB");
        assert_eq!(Bytes(64 << 10).to_string(), "64 KiB");
        assert_eq!(Bytes(300).to_string(), "300 bytes");
    }
}
