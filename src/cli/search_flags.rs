//! The flags `tessera tune` and `tessera ci` share: the search's cost model,
//! how candidates are measured, and how the best are measured again at the end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::CliError;
use crate::codegen::CodegenOptions;
use crate::cost::{self, CostModel, LearnedModel, RandomModel};
use crate::measure::{CacheFlush, MeasureOptions, Measurer, TimingOptions};
use crate::runtime::Target;
use crate::search::{MAX_REMEASURE, RemeasureOptions};

/// The pretrained model used when `--pretrained` is not given.
const DEFAULT_PRETRAINED: &str = "cost_model/pretrained.model";

/// `--flush`: [`CacheFlush`] on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FlushFlag {
    /// Every run warm.
    Off,
    /// The task's constant weights evicted before every run.
    Weights,
    /// Every input evicted before every run.
    Inputs,
}

impl From<FlushFlag> for CacheFlush {
    fn from(flag: FlushFlag) -> CacheFlush {
        match flag {
            FlushFlag::Off => CacheFlush::Off,
            FlushFlag::Weights => CacheFlush::Weights,
            FlushFlag::Inputs => CacheFlush::Inputs,
        }
    }
}

/// Cost-model and measurement flags.
#[derive(Debug, clap::Args)]
pub(crate) struct SearchFlags {
    /// Cost model: `random`, a learner (`tessera cost-model learners`).
    #[arg(long, default_value = cost::DEFAULT_LEARNER)]
    model: String,
    /// A pretrained model file used while a workload has few records
    /// (default: cost_model/pretrained.model when it exists).
    #[arg(long)]
    pretrained: Option<PathBuf>,
    /// Start from an untrained model even when a pretrained file exists.
    #[arg(long, conflicts_with = "pretrained")]
    no_pretrained: bool,
    /// Threads the kernel may use (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Worker processes for building and running candidates (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Seconds a candidate may run before it is stopped.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Timed repeats per candidate.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Shortest duration of a timed repeat, in milliseconds.
    #[arg(long, default_value_t = 20.0)]
    min_repeat_ms: f64,
    /// Which inputs every timed run finds evicted from the CPU caches
    /// (the eviction is not timed): `weights` (a model's tasks, whose
    /// weights come from memory when the model runs), `inputs` or `off`.
    #[arg(long, value_enum, default_value_t = FlushFlag::Off)]
    flush: FlushFlag,
    /// At the end, measure the best N candidates of each workload again in
    /// fresh worker processes (interleaved passes, not counted as trials);
    /// `deploy` chooses by their median. 0 turns it off.
    #[arg(long, value_name = "N", default_value_t = RemeasureOptions::default().candidates)]
    remeasure: usize,
    /// Interleaved passes of the re-measurement (each times every candidate once).
    #[arg(long, value_name = "N", default_value_t = RemeasureOptions::default().passes)]
    remeasure_passes: usize,
}

impl SearchFlags {
    /// `--flush weights` where no task has constant weights to flush
    /// (`fix` says how to give them) is an error: it would time warm.
    pub(crate) fn check_flush(&self, has_constants: bool, fix: &str) -> Result<(), CliError> {
        if self.flush == FlushFlag::Weights && !has_constants {
            return Err(CliError::Usage(format!(
                "--flush weights: no task has constant weights, so nothing would be flushed; {fix}"
            )));
        }
        Ok(())
    }

    /// `--remeasure` and `--remeasure-passes`, checked.
    pub(crate) fn remeasure(&self) -> Result<RemeasureOptions, CliError> {
        if self.remeasure > MAX_REMEASURE {
            return Err(CliError::Usage(format!(
                "--remeasure {}: at most {MAX_REMEASURE} candidates can be re-measured",
                self.remeasure
            )));
        }
        if self.remeasure_passes == 0 {
            return Err(CliError::Usage(
                "--remeasure-passes must be at least 1 (--remeasure 0 turns re-measurement off)"
                    .into(),
            ));
        }
        Ok(RemeasureOptions {
            candidates: self.remeasure,
            passes: self.remeasure_passes,
        })
    }

    /// `--timeout` as a duration (positive).
    pub(crate) fn timeout(&self) -> Result<Duration, CliError> {
        super::measure::seconds("timeout", self.timeout)
    }

    /// The search's cost model: `random`, or a learner warm-started from
    /// the pretrained file (unless `--no-pretrained`).
    pub(crate) fn model(&self, seed: u64) -> Result<Box<dyn CostModel>, CliError> {
        if self.model == "random" {
            return Ok(Box::new(RandomModel::new(seed)));
        }
        let mut model = LearnedModel::new(cost::new_learner(&self.model)?);
        let default = Path::new(DEFAULT_PRETRAINED);
        let pretrained = match &self.pretrained {
            Some(p) => Some(p.as_path()),
            None if self.no_pretrained => None,
            None => default.is_file().then_some(default),
        };
        // A stale default file (other features) only costs the warm start;
        // a file asked for by name must load.
        if let Some(path) = pretrained {
            match cost::load_model(path) {
                Ok((_, learner)) => model = model.with_pretrained(learner),
                Err(e) if self.pretrained.is_none() => eprintln!(
                    "warning: {e}; searching without a warm start (--no-pretrained silences this)"
                ),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Box::new(model))
    }

    /// Measurement workers with these flags (`timeout` from [`Self::timeout`]),
    /// compiling for `target`.
    pub(crate) fn measurer(
        &self,
        timeout: Duration,
        target: &Target,
    ) -> Result<Measurer, CliError> {
        if self.repeat == 0 {
            return Err(CliError::Usage("--repeat must be at least 1".into()));
        }
        let defaults = MeasureOptions::default();
        Ok(Measurer::new(MeasureOptions {
            workers: self.workers.unwrap_or(defaults.workers),
            kernel_threads: self.threads.unwrap_or(defaults.kernel_threads),
            run_timeout: timeout,
            timing: TimingOptions {
                repeat: self.repeat,
                min_repeat_ms: self.min_repeat_ms,
                flush: self.flush.into(),
                ..TimingOptions::default()
            },
            codegen: CodegenOptions::for_target(*target),
            ..defaults
        })?)
    }
}
