//! The logger: `env_logger`, writing every record to stderr, since stdout belongs to the UCI protocol.
//!
//! The level comes from the settings (`log_level`) and the `-v` flags; `DEEPTREE_LOG` takes `env_logger`'s filter
//! syntax on top, for example `DEEPTREE_LOG=deeptree::engine=debug` to follow the inner engines alone: every line
//! to and from each of them, with its time. At debug level, or with `DEEPTREE_LOG`, every record carries its time in
//! seconds since the logger started, to the millisecond.
//!
//! Beside the log, a command may show one live status line on stderr ([`StatusLine`]): the command makes it, where
//! stderr is a terminal, and hands it to the search as a [`Progress`]; the search says what the line holds, never how
//! it is drawn.

use std::io::IsTerminal;

use log::LevelFilter;

/// Installs the stderr logger. `verbosity` counts `-v` flags on top of `base`.
pub fn init(base: LevelFilter, verbosity: u8) {
    let levels = [
        LevelFilter::Off,
        LevelFilter::Error,
        LevelFilter::Warn,
        LevelFilter::Info,
        LevelFilter::Debug,
        LevelFilter::Trace,
    ];
    let start = levels.iter().position(|l| *l == base).unwrap_or(3);
    let level = levels[(start + usize::from(verbosity)).min(levels.len() - 1)];
    let mut builder = env_logger::Builder::new();
    builder.target(env_logger::Target::Stderr).format_timestamp(None).filter_level(level);
    if let Ok(filters) = std::env::var("DEEPTREE_LOG") {
        builder.parse_filters(&filters);
    }
    // Following what happens when (debug and trace, or a filter of one's own): each record with its time to the
    // millisecond, the inner engines' lines among them, both ways.
    if level >= LevelFilter::Debug || std::env::var_os("DEEPTREE_LOG").is_some() {
        let started = std::time::Instant::now();
        builder.format(move |out, record| {
            use std::io::Write;
            let seconds = started.elapsed().as_secs_f64();
            writeln!(out, "[{seconds:>10.3} {} {}] {}", record.level(), record.target(), record.args())
        });
    }
    // Only the first logger of a process is installed (tests may call this more than once).
    let _ = builder.try_init();
}

/// Where a long search shows how far it is: one line, written over in place.
pub trait Progress: Send + Sync {
    /// Shows `line` in place of the line shown before.
    fn show(&self, line: &str);
    /// Clears the line shown: before other output is written, and at the end.
    fn clear(&self);
}

/// The status line on stderr, drawn with the terminal's escape codes (carriage return, erase the line): made only
/// where stderr is a terminal.
#[derive(Debug)]
pub struct StatusLine(());

/// Back to the start of the line, and the line erased.
const ERASE_LINE: &str = "\r\x1b[2K";

impl StatusLine {
    /// The status line on stderr; `None` where stderr is not a terminal (a file or a pipe is shown no progress).
    pub fn on_stderr() -> Option<StatusLine> {
        std::io::stderr().is_terminal().then_some(StatusLine(()))
    }
}

impl Progress for StatusLine {
    fn show(&self, line: &str) {
        eprint!("{ERASE_LINE}{line}");
    }

    fn clear(&self) {
        eprint!("{ERASE_LINE}");
    }
}
