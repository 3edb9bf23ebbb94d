//! The inner engines of a growth run: checked before anything starts, then started in groups.

use crate::{
    config::Config,
    engine::{EngineConfig, EnginePool, spec::EngineSpec},
    game::quote,
    search::evaluator::PoolEvaluator,
};

/// Most inner-engine workers per core of this machine that `analyze` starts without `--insist-workers`.
pub const MAX_WORKERS_PER_CORE: usize = 4;

/// The engines of a run: the kinds of `--engines` (or the settings' list), else `workers` of the one engine.
pub(super) struct Engines {
    specs: Vec<EngineSpec>,
    workers: usize,
}

impl Engines {
    /// The engines the settings name, refused before anything starts (the store included): more workers (each
    /// counted with its engine's threads) than [`MAX_WORKERS_PER_CORE`] per core without `insist`, or a program that
    /// is not there.
    pub(super) fn check(config: &Config, insist: bool) -> Result<Engines, Box<dyn std::error::Error>> {
        let specs = EngineSpec::parse_list(&config.engines).map_err(|e| format!("--engines: {e}"))?;
        let workers = if config.workers > 0 { config.workers } else { crate::engine::default_workers() };
        // Each worker runs its engine's threads (one where the settings' single engine runs): the bound is on those.
        let total =
            if specs.is_empty() { workers } else { specs.iter().map(|s| s.workers).fold(0, usize::saturating_add) };
        let threads = if specs.is_empty() { workers as u64 } else { EngineSpec::threads_in_all(&specs) };
        let cores = crate::engine::default_workers();
        let most = MAX_WORKERS_PER_CORE * cores;
        if threads > most as u64 && !insist {
            let what = if threads == total as u64 {
                format!("{total} workers")
            } else {
                format!("{threads} engine threads in all (each worker times its engine's threads)")
            };
            return Err(format!(
                "{what}: more than {MAX_WORKERS_PER_CORE} per core of this machine ({cores} cores, at most {most}); \
                 --insist-workers runs them anyway"
            )
            .into());
        }
        // An engine that cannot start is refused before the store is created.
        let commands: Vec<&str> = if specs.is_empty() {
            vec![config.engine.as_str()]
        } else {
            specs.iter().map(|s| s.command.as_str()).collect()
        };
        if let Some(missing) = commands.iter().find(|c| !crate::engine::program_exists(c)) {
            return Err(format!("cannot start the inner engine {}: no such program", quote(missing)).into());
        }
        Ok(Engines { specs, workers })
    }

    /// The configuration of every worker, each kind's options over `base`.
    pub(super) fn configs(&self, base: &EngineConfig) -> Vec<EngineConfig> {
        if self.specs.is_empty() {
            vec![base.clone(); self.workers.max(1)]
        } else {
            EngineSpec::configs(&self.specs, base)
        }
    }

    /// Starts them all, in one pool.
    pub(super) fn start(&self, base: &EngineConfig) -> Result<EnginePool, String> {
        if self.specs.is_empty() {
            EnginePool::uniform(base, self.workers)
                .map_err(|e| format!("cannot start the inner engine {}: {e}", quote(&base.command)))
        } else {
            EnginePool::start(EngineSpec::configs(&self.specs, base))
                .map_err(|e| format!("cannot start the inner engines: {e}"))
        }
    }
}

/// The engines' settings; for Chess960 they read and write castling as king takes rook.
pub(super) fn engine_config_of(config: &Config, chess960: bool) -> EngineConfig {
    let engine_config = EngineConfig::from(config);
    if chess960 { engine_config.with_option("UCI_Chess960", "true") } else { engine_config }
}

/// The engines of `configs` started in `groups` groups (at most one per engine), dealt out in turn.
pub(super) fn start_groups(configs: Vec<EngineConfig>, groups: usize) -> Result<Vec<PoolEvaluator>, String> {
    let groups = configs.len().min(groups).max(1);
    let mut split: Vec<Vec<EngineConfig>> = vec![Vec::new(); groups];
    for (i, config) in configs.into_iter().enumerate() {
        split[i % groups].push(config);
    }
    let mut pools = Vec::with_capacity(groups);
    for configs in split {
        let command = configs.first().map(|c| c.command.clone()).unwrap_or_default();
        let pool = EnginePool::start(configs)
            .map_err(|e| format!("cannot start the inner engine {}: {e}", quote(&command)))?;
        pools.push(PoolEvaluator::new(pool));
    }
    Ok(pools)
}
