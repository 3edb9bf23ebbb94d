//! `deeptree export`: the tree below a root as PGN, a Polyglot book, EPD or an HTML page, to a file (written beside it
//! and renamed over it), a stream or standard output.

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use super::report;
use crate::{
    game::Line,
    interop::{InteropError, epd, html, pgn_export, polyglot, walk::Scope},
    store::Store,
};

/// What to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One game with the tree as nested variations, best first, each move commented with its scores.
    Pgn,
    /// A Polyglot opening book whose heaviest move in every position is the tree's best.
    Polyglot,
    /// One line per position with ce, acd, bm and pv.
    Epd,
    /// A self-contained page to browse the tree.
    Html,
}

/// `deeptree export pgn|polyglot|epd|html FILE [--fen FEN] [--moves "..."] [--depth K]`
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    #[arg(value_enum)]
    pub format: ExportFormat,
    /// Output file (`-` for standard output).
    pub file: PathBuf,
    /// Start position (default: the standard start position).
    #[arg(long)]
    pub fen: Option<String>,
    /// Moves played from the start position, in UCI notation: the last position is the root.
    #[arg(long, default_value = "")]
    pub moves: String,
    /// Plies below the root (default: 12 for pgn and html; for polyglot and epd every position reachable from the
    /// root, or every stored position when no root is given either).
    #[arg(long, value_name = "K")]
    pub depth: Option<u8>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Chess960 (a Shredder-FEN implies it).
    #[arg(long)]
    pub chess960: bool,
}

/// Default plies of a PGN or HTML export.
pub const DEFAULT_TREE_DEPTH: u8 = 12;

/// Where an export goes, once the path given is followed to what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Destination {
    /// This process's standard output: `-`, `/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`.
    Stdout,
    /// Another descriptor this process holds (`/dev/stderr`, `/dev/fd/N`): written through a copy of it, so that
    /// it keeps its offset and its append mode.
    Descriptor(i32),
    /// A FIFO, a device or anything else that is not a regular file: opened and written straight into.
    Stream(PathBuf),
    /// A regular file, or no file yet: written beside it and renamed over it.
    Replace(PathBuf),
}

/// Most symbolic links followed from the path given (as the kernel's own limit).
const MAX_LINKS: usize = 40;

/// The descriptor `path` names when it is one of this process's (`/proc/self/fd/N`, `/proc/<own pid>/fd/N`;
/// `/dev/fd` and `/dev/stdout` lead there), given its parent directory already followed to the end.
fn descriptor_of(dir: &Path, name: &std::ffi::OsStr) -> Option<i32> {
    let fd: i32 = name.to_str()?.parse().ok()?;
    let own = Path::new("/proc").join(std::process::id().to_string()).join("fd");
    let thread = Path::new("/proc").join(std::process::id().to_string()).join("task");
    let ours = dir == own
        || dir == Path::new("/proc/self/fd")
        || dir == Path::new("/proc/thread-self/fd")
        || (dir.starts_with(&thread) && dir.ends_with("fd"));
    ours.then_some(fd)
}

/// Follows `path` through its symbolic links to what it names. A link's own parent directories are followed too,
/// so that a relative target is read from where the link is.
fn destination(path: &Path) -> Result<Destination, InteropError> {
    if path == Path::new("-") {
        return Ok(Destination::Stdout);
    }
    let mut current = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        // The directory it is in, followed to the end (when there is one; a missing one fails at the write).
        let (Some(name), parent) = (current.file_name().map(ToOwned::to_owned), current.parent()) else {
            // `/`, `..` and the like: a directory, or nothing that can be written.
            return Err(InteropError::Invalid(format!("{}: not a file that can be written", path.display())));
        };
        let parent = if parent.is_some_and(|p| p.as_os_str().is_empty()) {
            Path::new(".")
        } else {
            parent.unwrap_or(Path::new("/"))
        };
        let Ok(dir) = std::fs::canonicalize(parent) else { return Ok(Destination::Replace(current)) };
        if let Some(fd) = descriptor_of(&dir, &name) {
            return Ok(if fd == 1 { Destination::Stdout } else { Destination::Descriptor(fd) });
        }
        let full = dir.join(&name);
        let meta = match std::fs::symlink_metadata(&full) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Destination::Replace(full)),
            Err(e) => return Err(InteropError::io(path, e)),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(&full).map_err(|e| InteropError::io(&full, e))?;
            current = dir.join(target);
        } else if kind.is_file() {
            return Ok(Destination::Replace(full));
        } else if kind.is_dir() {
            return Err(InteropError::Invalid(format!("{}: is a directory", path.display())));
        } else {
            return Ok(Destination::Stream(full));
        }
    }
    Err(InteropError::Invalid(format!("{}: more than {MAX_LINKS} symbolic links to follow", path.display())))
}

/// Writes an export where `path` sends it, then flushes: to standard output for `-` (and for `/dev/stdout` and the
/// like); straight into a FIFO or a device; into a regular file (or a new one) by writing `NAME.partial` beside it
/// and renaming it over the file, so that a failed export never leaves half a file. A symbolic link is followed:
/// what it points to is written, the link stays. No temporary file is made anywhere but beside a regular file.
fn write_output<T>(
    path: &Path,
    destination: &Destination,
    write: impl FnOnce(&mut dyn Write) -> Result<T, InteropError>,
) -> Result<T, InteropError> {
    match destination {
        Destination::Stdout => {
            let mut out = std::io::stdout().lock();
            let value = write(&mut out)?;
            out.flush().map_err(|e| InteropError::io(path, e))?;
            Ok(value)
        }
        Destination::Descriptor(fd) => {
            // SAFETY: fcntl only reads `fd` (failing on one that is not open) and returns a new descriptor, which
            // the File below then owns alone.
            let copy = unsafe { libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3) };
            if copy < 0 {
                return Err(InteropError::io(path, std::io::Error::last_os_error()));
            }
            // SAFETY: `copy` is a descriptor just made for this File and owned by nothing else.
            let file = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(copy) };
            stream(path, BufWriter::new(file), write)
        }
        Destination::Stream(target) => {
            let file = std::fs::OpenOptions::new().write(true).open(target).map_err(|e| InteropError::io(path, e))?;
            stream(path, BufWriter::new(file), write)
        }
        Destination::Replace(target) => replace(target, write),
    }
}

/// Writes straight into `out` (a FIFO, a device, a descriptor) and flushes it.
fn stream<T>(
    path: &Path,
    mut out: BufWriter<File>,
    write: impl FnOnce(&mut dyn Write) -> Result<T, InteropError>,
) -> Result<T, InteropError> {
    let value = write(&mut out)?;
    out.flush().map_err(|e| InteropError::io(path, e))?;
    Ok(value)
}

/// Writes `target.partial` beside the regular file `target` (or where it is to be), then renames it over `target`.
/// The new file keeps the permissions of the one it replaces.
fn replace<T>(target: &Path, write: impl FnOnce(&mut dyn Write) -> Result<T, InteropError>) -> Result<T, InteropError> {
    let mut name = target.file_name().map(ToOwned::to_owned).unwrap_or_default();
    name.push(".partial");
    let tmp = target.with_file_name(name);
    // Errors name the file asked for: the one beside it is this function's own.
    let file = File::create(&tmp).map_err(|e| InteropError::io(target, e))?;
    let mut out = BufWriter::new(file);
    let written = write(&mut out).and_then(|value| {
        out.flush().map_err(|e| InteropError::io(target, e))?;
        if let Ok(meta) = std::fs::metadata(target) {
            std::fs::set_permissions(&tmp, meta.permissions()).map_err(|e| InteropError::io(target, e))?;
        }
        Ok(value)
    });
    drop(out);
    let renamed = written
        .and_then(|value| std::fs::rename(&tmp, target).map(|()| value).map_err(|e| InteropError::io(target, e)));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

/// Runs `deeptree export`.
pub fn export(store: &Store, args: &ExportArgs) -> Result<(), InteropError> {
    let line = Line::parse_in(args.fen.as_deref(), &args.moves, args.chess960)?;
    let view = store.read()?;
    let rooted = args.fen.is_some() || !args.moves.trim().is_empty() || args.depth.is_some();
    let scope = if rooted { Scope::From { line: line.clone(), depth: args.depth } } else { Scope::All };
    let depth = args.depth.unwrap_or(DEFAULT_TREE_DEPTH);
    let destination = destination(&args.file)?;
    let to_stdout = destination == Destination::Stdout;
    let file = crate::game::printable_path(&args.file);
    let (value, text) = match args.format {
        ExportFormat::Pgn => {
            let s = write_output(&args.file, &destination, |out| {
                pgn_export::export_pgn(&view, &line, depth, &mut WriteRef(out))
            })?;
            let text = format!("{file}: one game, {} moves, {} plies deep", s.moves, s.plies);
            (serde_json::to_value(s), text)
        }
        ExportFormat::Html => {
            let s = write_output(&args.file, &destination, |out| {
                html::export_html(&view, &line, depth, &mut WriteRef(out))
            })?;
            let text = format!("{file}: {} moves, {} plies deep", s.moves, s.plies);
            (serde_json::to_value(s), text)
        }
        ExportFormat::Polyglot => {
            let s = write_output(&args.file, &destination, |out| {
                polyglot::export_polyglot(&view, &scope, &mut WriteRef(out))
            })?;
            let text = format!("{file}: {} positions, {} entries", s.positions, s.entries);
            (serde_json::to_value(s), text)
        }
        ExportFormat::Epd => {
            let s = write_output(&args.file, &destination, |out| epd::export_epd(&view, &scope, &mut WriteRef(out)))?;
            let text = format!("{file}: {} positions", s.positions);
            (serde_json::to_value(s), text)
        }
    };
    let value = value.map_err(|e| InteropError::Invalid(e.to_string()))?;
    if to_stdout {
        // Standard output holds the export itself: the summary goes to stderr.
        eprintln!("{text}");
        return Ok(());
    }
    report(args.json, &value, text)
}

/// A `Write` over a `&mut dyn Write`, so that the exporters' `impl Write` parameters accept it.
struct WriteRef<'a>(&'a mut dyn Write);

impl Write for WriteRef<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
