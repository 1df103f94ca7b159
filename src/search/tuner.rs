//! The tuning loop: rounds of search → measure a batch → record it in the
//! cache → update the model, until the trial budget, early stopping or a
//! stop request. Earlier records of the same workload on the same device
//! are loaded first, so a second run continues where the first stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use thiserror::Error;

use crate::cost::{CostError, CostModel};
use crate::db::{DbError, TuningDb};
use crate::measure::{MeasureError, MeasureResult, Measurer, Task};
use crate::runtime::host_device;
use crate::schedule::{State, Step};

use super::evolution::{Candidate, SearchOptions, SearchPolicy};
use super::infer::infer_candidate;
use super::sketch::generate_sketches;

/// Options of one tuning run.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Candidates to measure (not counting the default schedule).
    pub trials: usize,
    /// Candidates measured per round.
    pub batch_size: usize,
    /// Seed of every random choice (same seed and budget ⇒ same proposals
    /// with a model that does not learn from timings).
    pub seed: u64,
    /// Stop after this many trials without improvement.
    pub early_stopping: Option<usize>,
    /// The evolutionary search.
    pub search: SearchOptions,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            trials: 200,
            batch_size: 32,
            seed: 0,
            early_stopping: None,
            search: SearchOptions::default(),
        }
    }
}

/// Tuning failed (not a bad candidate: those are results).
#[derive(Debug, Error)]
pub enum TuneError {
    /// Measurement machinery.
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// The tuning cache.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The cost model.
    #[error(transparent)]
    Cost(#[from] CostError),
    /// No sketch applies (a bug in the sketch rules for this DAG).
    #[error("no schedule sketch applies to {0}")]
    NoSketch(String),
}

/// One point of the tuning curve.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CurvePoint {
    /// Candidates measured so far in this run.
    pub trials: usize,
    /// Seconds since the run started.
    pub secs: f64,
    /// Best GFLOP/s so far (0 before any success).
    pub best_gflops: f64,
}

/// What a tuning run found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TuneReport {
    /// The workload key (readable#hash).
    pub workload_key: String,
    /// The device key (readable#hash).
    pub device_key: String,
    /// GFLOP/s of the default schedule.
    pub default_gflops: Option<f64>,
    /// GFLOP/s of the best schedule known (this run or earlier ones).
    pub best_gflops: Option<f64>,
    /// The best schedule's steps.
    pub best_steps: Vec<Step>,
    /// Candidates measured in this run.
    pub trials: usize,
    /// Records of this workload and device loaded from the cache first.
    pub prior_records: usize,
    /// Wall time of the run.
    pub wall_s: f64,
    /// Candidates measured per second.
    pub candidates_per_s: f64,
    /// Seconds until the best GFLOP/s first reached 90% of its final value.
    pub time_to_90_s: Option<f64>,
    /// Best GFLOP/s after each batch.
    pub curve: Vec<CurvePoint>,
    /// Failed candidates by error kind.
    pub errors: Vec<(String, usize)>,
    /// Whether the run stopped early (early stopping or a stop request).
    pub stopped_early: bool,
}

impl TuneReport {
    /// Best over default GFLOP/s.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.best_gflops? / self.default_gflops?)
    }
}

/// Progress after each batch: trials done, the budget, best GFLOP/s so far.
pub type Progress<'a> = &'a (dyn Fn(usize, usize, f64) + Sync);

fn gflops(task: &Task, cost: f64) -> f64 {
    task.dag().flop_count() as f64 / cost / 1e9
}

/// Tunes `task`: see the module docs.
pub fn tune(
    task: &Task,
    measurer: &mut Measurer,
    mut db: Option<&mut TuningDb>,
    model: &mut dyn CostModel,
    options: &TuneOptions,
    progress: Progress,
    stop: &AtomicBool,
) -> Result<TuneReport, TuneError> {
    let start = Instant::now();
    let device = host_device();
    let device_key = device.key();
    let sketches = generate_sketches(task.dag());
    if sketches.is_empty() {
        return Err(TuneError::NoSketch(task.key().to_string()));
    }
    let mut policy =
        SearchPolicy::new(task.clone(), sketches, options.search.clone(), options.seed);
    let mut best: Option<(f64, Vec<Step>)> = None;
    let mut default_cost = None;
    let default_steps: Vec<Step> = Vec::new();
    // Earlier records: never measured again, teach the model, seed the search.
    let mut prior = 0;
    if let Some(db) = db.as_deref() {
        let records = db.records(&task.key().hash, &device_key.hash)?;
        let mut states = Vec::new();
        let mut results = Vec::new();
        for r in records {
            let Ok(state) = State::replay(task.dag(), &r.steps) else {
                continue;
            };
            prior += 1;
            policy.mark_measured(&r.steps);
            let cost = r.result.median();
            if r.steps.is_empty() {
                default_cost = default_cost.or(cost);
            }
            if let Some(c) = cost
                && best.as_ref().is_none_or(|(b, _)| c < *b)
            {
                best = Some((c, r.steps.clone()));
            }
            if let Some(candidate) = infer_candidate(task.dag(), policy.sketches(), &r.steps) {
                policy.add_measured(candidate, cost);
            }
            states.push(state);
            results.push(r.result);
        }
        if !states.is_empty() {
            model.update(task, &states, &results)?;
        }
    }
    if default_cost.is_none() {
        let results = measurer.measure(task, &[State::new(task.dag())])?;
        if let Some(db) = db.as_deref_mut() {
            db.record_batch(task, device, &[(&default_steps, &results[0])])?;
        }
        default_cost = results[0].median();
        policy.mark_measured(&default_steps);
        if let Some(c) = default_cost
            && best.as_ref().is_none_or(|(b, _)| c < *b)
        {
            best = Some((c, Vec::new()));
        }
    }
    let mut trials = 0;
    let mut curve = Vec::new();
    let mut errors: Vec<(String, usize)> = Vec::new();
    let mut since_improvement = 0;
    let mut stopped_early = false;
    let best_gflops =
        |best: &Option<(f64, Vec<Step>)>| best.as_ref().map_or(0.0, |(c, _)| gflops(task, *c));
    progress(0, options.trials, best_gflops(&best));
    while trials < options.trials {
        if stop.load(Ordering::Relaxed) {
            stopped_early = true;
            break;
        }
        let n = options.batch_size.max(1).min(options.trials - trials);
        let batch: Vec<Candidate> = policy.next_batch(model, n)?;
        if batch.is_empty() {
            stopped_early = true;
            break;
        }
        let states: Vec<State> = batch.iter().map(|c| c.state.clone()).collect();
        let results: Vec<MeasureResult> = measurer.measure(task, &states)?;
        if let Some(db) = db.as_deref_mut() {
            let rows: Vec<(&[Step], &MeasureResult)> =
                states.iter().map(State::steps).zip(&results).collect();
            db.record_batch(task, device, &rows)?;
        }
        model.update(task, &states, &results)?;
        trials += batch.len();
        let before = best.as_ref().map(|(c, _)| *c);
        for (candidate, result) in batch.into_iter().zip(&results) {
            if !result.is_ok() {
                match errors
                    .iter_mut()
                    .find(|(k, _)| k == result.error_kind.name())
                {
                    Some((_, n)) => *n += 1,
                    None => errors.push((result.error_kind.name().to_string(), 1)),
                }
            }
            let cost = result.median();
            if let Some(c) = cost
                && best.as_ref().is_none_or(|(b, _)| c < *b)
            {
                best = Some((c, candidate.state.steps().to_vec()));
            }
            policy.add_measured(candidate, cost);
        }
        let improved = best.as_ref().map(|(c, _)| *c) != before;
        since_improvement = if improved { 0 } else { since_improvement + n };
        curve.push(CurvePoint {
            trials,
            secs: start.elapsed().as_secs_f64(),
            best_gflops: best_gflops(&best),
        });
        progress(trials, options.trials, best_gflops(&best));
        if options
            .early_stopping
            .is_some_and(|limit| since_improvement >= limit)
        {
            stopped_early = true;
            break;
        }
    }
    let wall_s = start.elapsed().as_secs_f64();
    let final_best = best_gflops(&best);
    let time_to_90_s = curve
        .iter()
        .find(|p| p.best_gflops >= 0.9 * final_best && final_best > 0.0)
        .map(|p| p.secs);
    Ok(TuneReport {
        workload_key: task.key().to_string(),
        device_key: device_key.to_string(),
        default_gflops: default_cost.map(|c| gflops(task, c)),
        best_gflops: best.as_ref().map(|(c, _)| gflops(task, *c)),
        best_steps: best.map(|(_, s)| s).unwrap_or_default(),
        trials,
        prior_records: prior,
        wall_s,
        candidates_per_s: trials as f64 / wall_s.max(1e-9),
        time_to_90_s,
        curve,
        errors,
        stopped_early,
    })
}
