//! The tuning loop: rounds of search → measure a batch → record it in the
//! cache → update the model, until the trial budget, early stopping or a
//! stop request. Earlier records of the same workload on the same device
//! are loaded first, so a second run continues where the first stopped.
//! At the end, the best few candidates are re-measured in fresh workers
//! (`remeasure.rs`); those runs are not trials.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use thiserror::Error;

use crate::cost::{CostError, CostModel};
use crate::db::{DbError, TuningDb};
use crate::measure::{MeasureError, MeasureResult, Measurer, Task};
use crate::runtime::{Target, host_device};
use crate::schedule::{State, Step};

use super::evolution::{Candidate, SearchOptions, SearchPolicy};
use super::infer::infer_candidate;
use super::remeasure::{MAX_REMEASURE, RemeasureOptions, RemeasureReport, remeasure_candidates};
use super::sketch::generate_sketches_for;

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
    /// The re-measurement of the best candidates at the end.
    pub remeasure: RemeasureOptions,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            trials: 200,
            batch_size: 32,
            seed: 0,
            early_stopping: None,
            search: SearchOptions::default(),
            remeasure: RemeasureOptions::default(),
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
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CurvePoint {
    /// Candidates measured so far in this run.
    pub trials: usize,
    /// Seconds since the run started.
    pub secs: f64,
    /// Best GFLOP/s so far (0 before any success).
    pub best_gflops: f64,
}

impl CurvePoint {
    /// `curve` with the best known before the run (`start`, at trial 0) in front.
    pub fn with_start(start: Option<f64>, curve: &[CurvePoint]) -> Vec<CurvePoint> {
        let first = start.map(|best_gflops| CurvePoint {
            trials: 0,
            secs: 0.0,
            best_gflops,
        });
        first.into_iter().chain(curve.iter().cloned()).collect()
    }
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
    /// GFLOP/s of the best schedule known (this run or earlier ones), by
    /// its tuning figure (the best of many measurements).
    pub best_gflops: Option<f64>,
    /// The best schedule's steps.
    pub best_steps: Vec<Step>,
    /// Candidates measured in this run.
    pub trials: usize,
    /// Records of this workload and device loaded from the cache first.
    pub prior_records: usize,
    /// Wall time of the run's tuning (the re-measurement's is `remeasure.secs`).
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
    /// The best candidates measured again at the end; `None` when
    /// re-measurement was off.
    pub remeasure: Option<RemeasureReport>,
}

impl TuneReport {
    /// Best over default GFLOP/s.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.best_gflops? / self.default_gflops?)
    }

    /// The re-measurement of the best schedule (by its tuning figure), if
    /// it was re-measured.
    pub fn best_remeasured(&self) -> Option<&super::RemeasuredCandidate> {
        self.remeasure
            .as_ref()?
            .candidates
            .iter()
            .find(|c| c.steps == self.best_steps)
    }
}

/// What a tuning run reports as it goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TuneEvent<'a> {
    /// A batch was measured (and, at the start, `trials` 0: nothing yet).
    Batch {
        /// Candidates measured so far.
        trials: usize,
        /// The trial budget.
        budget: usize,
        /// The task just tuned (its label in a suite, else its readable
        /// workload key); empty at the start of a suite.
        task: &'a str,
        /// That task's best GFLOP/s so far.
        best_gflops: f64,
    },
    /// A pass of the re-measurement at the end was measured (not trials).
    Remeasure {
        /// Runs done (a run: one candidate timed once).
        done: usize,
        /// Runs in all.
        total: usize,
        /// The task being re-measured.
        task: &'a str,
    },
}

/// Progress of a tuning run.
pub type Progress<'a> = &'a (dyn Fn(TuneEvent) + Sync);

pub(super) fn gflops(task: &Task, cost: f64) -> f64 {
    task.dag().flop_count() as f64 / cost / 1e9
}

/// The tuning state of one task across rounds (the task scheduler
/// interleaves several).
pub struct TaskTuner {
    task: Task,
    policy: SearchPolicy,
    /// The best candidates so far (cost, steps), fastest first, distinct
    /// steps, at most [`MAX_REMEASURE`].
    leaders: Vec<(f64, Vec<Step>)>,
    default_cost: Option<f64>,
    prior: usize,
    trials: usize,
    curve: Vec<CurvePoint>,
    errors: Vec<(String, usize)>,
    since_improvement: usize,
    start: Instant,
    remeasure: Option<RemeasureReport>,
}

impl TaskTuner {
    /// Prepares tuning `task`: sketches for `target` (the one its
    /// measurer compiles for, [`Measurer::target`]), and the earlier records
    /// of this workload on this device in `db` (never measured again; they
    /// teach `model` and seed the search).
    pub fn new(
        task: &Task,
        target: &Target,
        search: &SearchOptions,
        seed: u64,
        db: Option<&TuningDb>,
        model: &mut dyn CostModel,
    ) -> Result<TaskTuner, TuneError> {
        let sketches: Vec<_> = generate_sketches_for(task.dag(), target, task.constants())
            .into_iter()
            .filter(|s| search.tensorize || !s.is_tensorized())
            .collect();
        if sketches.is_empty() {
            return Err(TuneError::NoSketch(task.key().to_string()));
        }
        let mut tuner = TaskTuner {
            task: task.clone(),
            policy: SearchPolicy::new(task.clone(), sketches, search.clone(), seed),
            leaders: Vec::new(),
            default_cost: None,
            prior: 0,
            trials: 0,
            curve: Vec::new(),
            errors: Vec::new(),
            since_improvement: 0,
            start: Instant::now(),
            remeasure: None,
        };
        let Some(db) = db else {
            return Ok(tuner);
        };
        let records = db.records(&task.key().hash, &host_device().key().hash)?;
        let mut states = Vec::new();
        let mut results = Vec::new();
        for r in records {
            if !search.tensorize && crate::schedule::calls_micro_kernel(&r.steps) {
                continue;
            }
            let Ok(state) = State::replay(task.dag(), &r.steps) else {
                continue;
            };
            tuner.prior += 1;
            tuner.policy.mark_measured(&r.steps);
            let cost = r.result.median();
            if r.steps.is_empty() {
                tuner.default_cost = tuner.default_cost.or(cost);
            }
            tuner.consider(cost, &r.steps);
            if let Some(candidate) = infer_candidate(task.dag(), tuner.policy.sketches(), &r.steps)
            {
                tuner.policy.add_measured(candidate, cost);
            }
            states.push(state);
            results.push(r.result);
        }
        if !states.is_empty() {
            model.update(task, &states, &results)?;
        }
        Ok(tuner)
    }

    /// Takes a measured candidate into the leaders; true when it is the new best.
    fn consider(&mut self, cost: Option<f64>, steps: &[Step]) -> bool {
        let Some(cost) = cost else {
            return false;
        };
        let improved = self.best_cost().is_none_or(|best| cost < best);
        if let Some(known) = self.leaders.iter().position(|(_, s)| s == steps) {
            if self.leaders[known].0 <= cost {
                return false;
            }
            self.leaders.remove(known);
        }
        let at = self.leaders.partition_point(|(c, _)| *c <= cost);
        if at < MAX_REMEASURE {
            self.leaders.insert(at, (cost, steps.to_vec()));
            self.leaders.truncate(MAX_REMEASURE);
        }
        improved
    }

    /// The task.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// Candidates measured by this tuner.
    pub fn trials(&self) -> usize {
        self.trials
    }

    /// Trials since the best last improved.
    pub fn since_improvement(&self) -> usize {
        self.since_improvement
    }

    /// The best cost in seconds known for the task.
    pub fn best_cost(&self) -> Option<f64> {
        self.leaders.first().map(|(c, _)| *c)
    }

    /// The cost in seconds of the default schedule (measured, or from an
    /// earlier record), if it ran.
    pub fn default_cost(&self) -> Option<f64> {
        self.default_cost
    }

    /// The `n` best candidates known (cost in seconds, steps), fastest
    /// first; at most [`MAX_REMEASURE`].
    pub fn leaders(&self, n: usize) -> &[(f64, Vec<Step>)] {
        &self.leaders[..n.min(self.leaders.len())]
    }

    /// Measures the best `options.candidates` candidates again on
    /// `measurer`'s workers (which the caller has restarted: see
    /// [`remeasure_best`]), stores the medians in `db` and keeps the report.
    /// `progress` gets the runs done.
    pub fn remeasure(
        &mut self,
        measurer: &mut Measurer,
        db: Option<&mut TuningDb>,
        options: &RemeasureOptions,
        progress: &dyn Fn(usize),
    ) -> Result<(), TuneError> {
        let leaders = self.leaders(options.candidates).to_vec();
        self.remeasure = Some(remeasure_candidates(
            &self.task,
            &leaders,
            measurer,
            db,
            options.passes,
            progress,
        )?);
        Ok(())
    }

    /// The best GFLOP/s known (0 before any success).
    pub fn best_gflops(&self) -> f64 {
        self.best_cost().map_or(0.0, |c| gflops(&self.task, c))
    }

    /// Measures (and records) the default schedule unless it is known.
    pub fn measure_default(
        &mut self,
        measurer: &mut Measurer,
        db: Option<&mut TuningDb>,
    ) -> Result<(), TuneError> {
        if self.default_cost.is_some() {
            return Ok(());
        }
        let default_steps: Vec<Step> = Vec::new();
        let results = measurer.measure(&self.task, &[State::new(self.task.dag())])?;
        if let Some(db) = db {
            db.record_batch(&self.task, host_device(), &[(&default_steps, &results[0])])?;
        }
        self.default_cost = results[0].median();
        self.policy.mark_measured(&default_steps);
        self.consider(self.default_cost, &default_steps);
        Ok(())
    }

    /// One round: up to `n` new candidates proposed, measured, recorded and
    /// learned from. Returns how many were measured (0: the search has
    /// nothing new to propose).
    pub fn round(
        &mut self,
        measurer: &mut Measurer,
        db: Option<&mut TuningDb>,
        model: &mut dyn CostModel,
        n: usize,
    ) -> Result<usize, TuneError> {
        let batch: Vec<Candidate> = self.policy.next_batch(model, n)?;
        if batch.is_empty() {
            return Ok(0);
        }
        let states: Vec<State> = batch.iter().map(|c| c.state.clone()).collect();
        let results: Vec<MeasureResult> = measurer.measure(&self.task, &states)?;
        if let Some(db) = db {
            let rows: Vec<(&[Step], &MeasureResult)> =
                states.iter().map(State::steps).zip(&results).collect();
            db.record_batch(&self.task, host_device(), &rows)?;
        }
        model.update(&self.task, &states, &results)?;
        let measured = batch.len();
        self.trials += measured;
        let mut improved = false;
        for (candidate, result) in batch.into_iter().zip(&results) {
            if !result.is_ok() {
                match self
                    .errors
                    .iter_mut()
                    .find(|(k, _)| k == result.error_kind.name())
                {
                    Some((_, count)) => *count += 1,
                    None => self.errors.push((result.error_kind.name().to_string(), 1)),
                }
            }
            let cost = result.median();
            improved |= self.consider(cost, candidate.state.steps());
            self.policy.add_measured(candidate, cost);
        }
        self.since_improvement = if improved {
            0
        } else {
            self.since_improvement + measured
        };
        self.curve.push(CurvePoint {
            trials: self.trials,
            secs: self.start.elapsed().as_secs_f64(),
            best_gflops: self.best_gflops(),
        });
        Ok(measured)
    }

    /// What the tuner found so far.
    pub fn report(&self, stopped_early: bool) -> TuneReport {
        let remeasure_s = self.remeasure.as_ref().map_or(0.0, |r| r.secs);
        let wall_s = self.start.elapsed().as_secs_f64() - remeasure_s;
        let final_best = self.best_gflops();
        let time_to_90_s = self
            .curve
            .iter()
            .find(|p| final_best > 0.0 && p.best_gflops >= 0.9 * final_best)
            .map(|p| p.secs);
        TuneReport {
            workload_key: self.task.key().to_string(),
            device_key: host_device().key().to_string(),
            default_gflops: self.default_cost.map(|c| gflops(&self.task, c)),
            best_gflops: self.best_cost().map(|c| gflops(&self.task, c)),
            best_steps: self
                .leaders
                .first()
                .map(|(_, s)| s.clone())
                .unwrap_or_default(),
            trials: self.trials,
            prior_records: self.prior,
            wall_s,
            candidates_per_s: self.trials as f64 / wall_s.max(1e-9),
            time_to_90_s,
            curve: self.curve.clone(),
            errors: self.errors.clone(),
            stopped_early,
            remeasure: self.remeasure.clone(),
        }
    }
}

/// The end of a tuning run: the workers of `measurer` are replaced by fresh
/// processes, then the best `options.candidates` of each of `tuners`
/// (with its label) are re-measured and their medians stored in `db`. Not
/// trials: `progress` gets [`TuneEvent::Remeasure`] events. Nothing happens
/// when `options` is off.
pub fn remeasure_best(
    tuners: &mut [(&str, &mut TaskTuner)],
    measurer: &mut Measurer,
    mut db: Option<&mut TuningDb>,
    options: &RemeasureOptions,
    progress: Progress,
) -> Result<(), TuneError> {
    if !options.enabled() {
        return Ok(());
    }
    let runs = |t: &TaskTuner| t.leaders(options.candidates).len() * options.passes;
    let total: usize = tuners.iter().map(|(_, t)| runs(t)).sum();
    if total == 0 {
        return Ok(());
    }
    measurer.restart_workers()?;
    let mut before = 0;
    for (label, tuner) in tuners.iter_mut() {
        if tuner.leaders.is_empty() {
            continue;
        }
        let report_pass = |done: usize| {
            progress(TuneEvent::Remeasure {
                done: before + done,
                total,
                task: label,
            })
        };
        tuner.remeasure(measurer, db.as_deref_mut(), options, &report_pass)?;
        before += runs(tuner);
    }
    Ok(())
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
    let mut tuner = TaskTuner::new(
        task,
        measurer.target(),
        &options.search,
        options.seed,
        db.as_deref(),
        model,
    )?;
    tuner.measure_default(measurer, db.as_deref_mut())?;
    let label = task.key().readable.clone();
    let batch = |tuner: &TaskTuner| {
        progress(TuneEvent::Batch {
            trials: tuner.trials(),
            budget: options.trials,
            task: &label,
            best_gflops: tuner.best_gflops(),
        })
    };
    batch(&tuner);
    let mut stopped_early = false;
    while tuner.trials() < options.trials {
        if stop.load(Ordering::Relaxed) {
            stopped_early = true;
            break;
        }
        let n = options
            .batch_size
            .max(1)
            .min(options.trials - tuner.trials());
        if tuner.round(measurer, db.as_deref_mut(), model, n)? == 0 {
            stopped_early = true;
            break;
        }
        batch(&tuner);
        if options
            .early_stopping
            .is_some_and(|limit| tuner.since_improvement() >= limit)
        {
            stopped_early = true;
            break;
        }
    }
    remeasure_best(
        &mut [(&label, &mut tuner)],
        measurer,
        db,
        &options.remeasure,
        progress,
    )?;
    Ok(tuner.report(stopped_early))
}
