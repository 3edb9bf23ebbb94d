//! The trace of an analysis: one line per decision, written to a file, so a user can tell why a position was or was
//! not analysed.

use std::{
    fmt,
    fs::File,
    io::{BufWriter, Write},
    path::Path,
    sync::Arc,
};

use super::AnalysisError;

/// One line per decision, so a user can tell why a position was or was not analysed.
///
/// A clone writes to the same file: growth writes its choices there, and the analysis of each step its decisions.
#[derive(Clone)]
pub struct Trace {
    out: Option<Arc<parking_lot::Mutex<Option<BufWriter<File>>>>>,
}

impl Trace {
    pub fn off() -> Trace {
        Trace { out: None }
    }

    pub fn to_file(path: &Path) -> Result<Trace, AnalysisError> {
        let file = BufWriter::new(File::create(path).map_err(AnalysisError::Trace)?);
        Ok(Trace { out: Some(Arc::new(parking_lot::Mutex::new(Some(file)))) })
    }

    /// Whether lines are written.
    pub fn enabled(&self) -> bool {
        self.out.as_ref().is_some_and(|out| out.lock().is_some())
    }

    /// Writes one line.
    pub fn line(&mut self, args: fmt::Arguments) {
        if let Some(out) = &self.out {
            let mut out = out.lock();
            if let Some(file) = out.as_mut()
                && writeln!(file, "{args}").is_err()
            {
                log::warn!("the trace file could not be written; tracing stops");
                *out = None;
            }
        }
    }

    /// Writes what is buffered.
    pub fn flush(&mut self) {
        if let Some(out) = &self.out
            && let Some(file) = out.lock().as_mut()
        {
            let _ = file.flush();
        }
    }
}
