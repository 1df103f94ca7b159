//! The job's tuning stage: how much of the budget earlier runs already
//! spent (read back from the database), then the task scheduler over this
//! shard's workloads for the rest of it, stopped by the time budget or
//! Ctrl-C after the batch in flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::cost::CostModel;
use crate::db::TuningDb;
use crate::measure::Measurer;
use crate::search::{Progress, SuiteOptions, SuiteReport, SuiteTask, tune_suite};

use super::budget::trials_spent;
use super::error::CiError;
use super::job::{CiOptions, Stage};

/// What the tuning stage did.
pub(super) struct Tuning {
    /// Candidates each task had on this device before the run.
    pub spent_before: Vec<usize>,
    /// The scheduler's report, when it ran.
    pub report: Option<SuiteReport>,
    /// Why nothing was tuned, when nothing was.
    pub note: Option<String>,
    /// Seconds of tuning.
    pub secs: f64,
}

/// The tuning stage's inputs: the shard and where its records go.
pub(super) struct TuningRun<'a> {
    pub tasks: &'a [SuiteTask],
    pub options: &'a CiOptions,
    pub device_hash: &'a str,
    pub measurer: &'a mut Measurer,
    pub db: &'a mut TuningDb,
    pub model: &'a mut dyn CostModel,
    pub progress: Progress<'a>,
    pub stop: &'a AtomicBool,
}

impl TuningRun<'_> {
    /// Tunes what the budget leaves after earlier runs (nothing when they
    /// spent it all, with a note saying so).
    pub fn run(self, stage: Stage) -> Result<Tuning, CiError> {
        let options = self.options;
        let spent_before: Vec<usize> = self
            .tasks
            .iter()
            .map(|t| trials_spent(self.db, &t.task, self.device_hash))
            .collect::<Result<_, _>>()?;
        let trials_left = options.budget.trials_left(&spent_before);
        let start = Instant::now();
        let (report, note) = match trials_left {
            Some(0) => (
                None,
                Some(format!(
                    "the budget ({}) was already spent by earlier runs; nothing tuned (raise it to continue)",
                    options.budget.describe()
                )),
            ),
            _ => {
                stage(&format!(
                    "tuning {} workloads (shard {}) for {}",
                    self.tasks.len(),
                    options.shard,
                    options.budget.describe()
                ));
                (Some(self.tune_with_budget(trials_left)?), None)
            }
        };
        Ok(Tuning {
            spent_before,
            report,
            note,
            secs: start.elapsed().as_secs_f64(),
        })
    }

    /// Tunes for at most `trials` candidates (`None`: unlimited) and at
    /// most the time budget; `stop` (Ctrl-C) ends it after the batch in flight.
    fn tune_with_budget(self, trials: Option<usize>) -> Result<SuiteReport, CiError> {
        let options = self.options;
        let suite_options = SuiteOptions {
            // Without a trial budget the time budget ends the run.
            total_trials: trials.unwrap_or(usize::MAX / 4),
            batch_size: options.batch_size,
            seed: options.seed,
            early_stopping: None,
            search: options.search.clone(),
            remeasure: options.remeasure,
            ..SuiteOptions::default()
        };
        let deadline = options.budget.time.map(|t| Instant::now() + t);
        let local_stop = AtomicBool::new(false);
        let finished = AtomicBool::new(false);
        let stop = self.stop;
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !finished.load(Ordering::Relaxed) {
                    let late = deadline.is_some_and(|d| Instant::now() >= d);
                    if late || stop.load(Ordering::Relaxed) {
                        local_stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            });
            let result = tune_suite(
                self.tasks,
                self.measurer,
                Some(self.db),
                self.model,
                &suite_options,
                self.progress,
                &local_stop,
            );
            finished.store(true, Ordering::Relaxed);
            result.map_err(CiError::from)
        })
    }
}
