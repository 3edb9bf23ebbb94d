//! The logger: `env_logger`, writing every record to stderr, since stdout belongs to the UCI protocol.
//!
//! The level comes from the settings (`log_level`) and the `-v` flags; `DEEPTREE_LOG` takes `env_logger`'s filter
//! syntax on top, for example `DEEPTREE_LOG=deeptree::engine=debug` to follow the inner engines alone.

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
    // Only the first logger of a process is installed (tests may call this more than once).
    let _ = builder.try_init();
}
