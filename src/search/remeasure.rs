//! Re-measuring the best candidates at the end of a tuning run. The tuner
//! keeps the best of many noisy measurements, so its figure for the winner
//! is flattered by luck (the winner's curse); the best few candidates of
//! each task are therefore timed again, in fresh worker processes, with the
//! normal timing protocol, in interleaved passes (A B C, A B C, …) so that
//! drift hits all of them alike. Their median is stored with their records,
//! and `deploy` chooses by it. Re-measurement runs are not trials.

use serde::Serialize;

use crate::db::{Remeasurement, TuningDb};
use crate::measure::{Measurer, Task};
use crate::runtime::host_device;
use crate::schedule::{State, Step};

use super::tuner::TuneError;

/// The most candidates of a task that can be re-measured.
pub const MAX_REMEASURE: usize = 16;

/// How the best candidates are re-measured at the end of a tuning run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RemeasureOptions {
    /// Best candidates of each task (by their tuning figure) to measure
    /// again, at most [`MAX_REMEASURE`]; 0 turns re-measurement off.
    pub candidates: usize,
    /// Interleaved passes: each times every candidate once with the
    /// normal timing protocol.
    pub passes: usize,
}

impl Default for RemeasureOptions {
    /// The best 3 candidates, 3 passes.
    fn default() -> Self {
        RemeasureOptions {
            candidates: 3,
            passes: 3,
        }
    }
}

impl RemeasureOptions {
    /// No re-measurement.
    pub fn off() -> Self {
        RemeasureOptions {
            candidates: 0,
            ..RemeasureOptions::default()
        }
    }

    /// Whether anything is re-measured.
    pub fn enabled(&self) -> bool {
        self.candidates > 0 && self.passes > 0
    }
}

/// One candidate measured again.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RemeasuredCandidate {
    /// Its schedule.
    pub steps: Vec<Step>,
    /// GFLOP/s of its record while tuning.
    pub tuned_gflops: f64,
    /// GFLOP/s of the median of every timed repeat of every pass; `None`
    /// when a pass failed (see `error`).
    pub remeasured_gflops: Option<f64>,
    /// Why it has no re-measured figure.
    pub error: Option<String>,
}

/// What re-measuring one task found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RemeasureReport {
    /// The candidates, best tuning figure first.
    pub candidates: Vec<RemeasuredCandidate>,
    /// Passes over them.
    pub passes: usize,
    /// Seconds spent re-measuring this task (not part of the tuning time).
    pub secs: f64,
    /// The fresh worker processes that re-measured.
    pub worker_pids: Vec<u32>,
}

impl RemeasureReport {
    /// The candidate with the best re-measured figure: the one `deploy`
    /// chooses (when the database holds no better re-measured record).
    pub fn pick(&self) -> Option<&RemeasuredCandidate> {
        self.candidates
            .iter()
            .filter_map(|c| Some((c, c.remeasured_gflops?)))
            .max_by(|(_, a), (_, b)| a.total_cmp(b))
            .map(|(c, _)| c)
    }
}

/// Measures `leaders` (tuning cost in seconds, steps) of `task` again on
/// `measurer`'s current workers, `options.passes` passes over all of them,
/// and stores each median with its records in `db`. `progress` is called
/// after each pass with the runs done so far.
pub(crate) fn remeasure_candidates(
    task: &Task,
    leaders: &[(f64, Vec<Step>)],
    measurer: &mut Measurer,
    mut db: Option<&mut TuningDb>,
    passes: usize,
    progress: &dyn Fn(usize),
) -> Result<RemeasureReport, TuneError> {
    let start = std::time::Instant::now();
    let flops = task.dag().flop_count() as f64;
    // Every leader was measured, so it replays; one that does not is left out.
    let (leaders, states): (Vec<&(f64, Vec<Step>)>, Vec<State>) = leaders
        .iter()
        .filter_map(|leader| Some((leader, State::replay(task.dag(), &leader.1).ok()?)))
        .unzip();
    let mut costs: Vec<Vec<f64>> = vec![Vec::new(); leaders.len()];
    let mut errors: Vec<Option<String>> = vec![None; leaders.len()];
    let mut timestamp = 0.0;
    for pass in 0..passes {
        let results = measurer.measure(task, &states)?;
        for (n, result) in results.iter().enumerate() {
            timestamp = f64::max(timestamp, result.timestamp);
            if result.is_ok() {
                costs[n].extend(&result.costs);
            } else if errors[n].is_none() {
                errors[n] = Some(format!(
                    "pass {} of {passes}: {}: {}",
                    pass + 1,
                    result.error_kind,
                    result.error_msg
                ));
            }
        }
        progress((pass + 1) * leaders.len());
    }
    let mut candidates = Vec::with_capacity(leaders.len());
    for ((tuned_cost, steps), (costs, error)) in
        leaders.into_iter().zip(costs.into_iter().zip(errors))
    {
        let again = Remeasurement { costs, timestamp };
        let median = again.median().filter(|_| error.is_none());
        if median.is_some()
            && let Some(db) = db.as_deref_mut()
        {
            db.record_remeasurement(task, host_device(), steps, &again)?;
        }
        candidates.push(RemeasuredCandidate {
            steps: steps.clone(),
            tuned_gflops: flops / tuned_cost / 1e9,
            remeasured_gflops: median.map(|m| flops / m / 1e9),
            error,
        });
    }
    Ok(RemeasureReport {
        candidates,
        passes,
        secs: start.elapsed().as_secs_f64(),
        worker_pids: measurer.worker_pids(),
    })
}
