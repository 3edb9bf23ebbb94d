//! A minimal logger: every record goes to stderr, since stdout belongs to the UCI protocol.

use std::io::Write;

use log::{LevelFilter, Log, Metadata, Record};

struct StderrLogger {
    level: LevelFilter,
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "[{} {}] {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

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
    if log::set_boxed_logger(Box::new(StderrLogger { level })).is_ok() {
        log::set_max_level(level);
    }
}
