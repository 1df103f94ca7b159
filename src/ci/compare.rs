//! The job's comparison stage: each workload's line of the report, with
//! the default, deployed and baseline schedules measured one after another
//! (same workers, same inputs, each verified against the reference) and a
//! slowdown beyond the tolerance flagged as a regression.

use crate::deploy::{self, DeployOutcome, DeployedWorkload};
use crate::measure::{Measurer, Task};
use crate::schedule::State;
use crate::search::{CurvePoint, SuiteReport, SuiteTask};

use super::baseline::{Baseline, Comparison};
use super::budget::trials_spent;
use super::error::CiError;
use super::job::CiWorkload;

/// What the comparison of a shard needs besides the measurer.
pub(super) struct Comparing<'a> {
    pub db: &'a crate::db::TuningDb,
    pub device_hash: &'a str,
    pub deployed: &'a [DeployedWorkload],
    pub baseline: &'a Baseline,
    /// The tuning stage's report, for the curves.
    pub tuned: Option<&'a SuiteReport>,
    /// Candidates each task had before the run.
    pub spent_before: &'a [usize],
    pub regression_tolerance: f64,
}

impl Comparing<'_> {
    /// The report's line of each of `tasks`, in order.
    pub fn workloads(
        &self,
        tasks: &[SuiteTask],
        measurer: &mut Measurer,
    ) -> Result<Vec<CiWorkload>, CiError> {
        let mut workloads = Vec::with_capacity(tasks.len());
        for (n, t) in tasks.iter().enumerate() {
            let mut workload = self.workload(n, t)?;
            measure_final(&t.task, self.baseline, &mut workload, measurer)?;
            workload.regressed = workload.comparison.regressed(self.regression_tolerance);
            workloads.push(workload);
        }
        Ok(workloads)
    }

    /// Task `n`'s line before measurement: trials, curve, artifact.
    fn workload(&self, n: usize, t: &SuiteTask) -> Result<CiWorkload, CiError> {
        let key = t.task.key();
        let line = self.deployed.iter().find(|d| d.key == key.hash);
        let trials = trials_spent(self.db, &t.task, self.device_hash)?;
        let curve = self
            .tuned
            .and_then(|r| r.tasks.get(n))
            .map(|r| CurvePoint::with_start(r.start_gflops, &r.report.curve))
            .unwrap_or_default();
        Ok(CiWorkload {
            label: t.label.clone(),
            workload: key.to_string(),
            key_hash: key.hash.clone(),
            trials,
            trials_this_run: trials.saturating_sub(self.spent_before[n]),
            default_gflops: None,
            tuned_gflops: None,
            recorded_gflops: line.and_then(|l| l.gflops),
            remeasured_gflops: line.and_then(|l| l.remeasured_gflops),
            artifact: line.and_then(|l| l.file.clone()),
            comparison: Comparison::NoBaseline,
            regressed: false,
            note: match line.map(|l| &l.outcome) {
                Some(DeployOutcome::Skipped(why)) => Some(why.clone()),
                None => Some("no successful measurement".into()),
                _ => None,
            },
            curve,
        })
    }
}

/// Measures the default schedule, the deployed one and (when it differs and
/// still replays) the baseline's, in one batch: same workers, same inputs,
/// each verified against the reference. Fills the GFLOP/s and the comparison.
fn measure_final(
    task: &Task,
    baseline: &Baseline,
    workload: &mut CiWorkload,
    measurer: &mut Measurer,
) -> Result<(), CiError> {
    let key = task.key();
    let flops = task.dag().flop_count() as f64;
    let gflops = |secs: Option<f64>| secs.filter(|s| *s > 0.0).map(|s| flops / s / 1e9);
    let deployed_steps = match &workload.artifact {
        Some(path) => Some(deploy::Artifact::read(path)?.steps),
        None => None,
    };
    let base = baseline.find(&key.hash, &key.readable);
    let base_state = base.and_then(|(artifact, stale)| {
        (!stale)
            .then(|| State::replay(task.dag(), &artifact.steps).ok())
            .flatten()
    });
    let mut states = vec![State::new(task.dag())];
    let deployed_state = match &deployed_steps {
        Some(steps) => Some(State::replay(task.dag(), steps).map_err(deploy::DeployError::from)?),
        None => None,
    };
    states.extend(deployed_state.clone());
    let same =
        matches!((&deployed_steps, base), (Some(steps), Some((a, false))) if a.steps == *steps);
    let measure_base = base_state.is_some() && !same && deployed_state.is_some();
    if measure_base {
        states.extend(base_state.clone());
    }
    let results = measurer.measure(task, &states)?;
    workload.default_gflops = gflops(results[0].median());
    if deployed_state.is_some() {
        let tuned = &results[1];
        workload.tuned_gflops = gflops(tuned.median());
        if !tuned.is_ok() {
            workload.note = Some(format!(
                "the deployed schedule failed its check: {}",
                tuned.error_msg
            ));
        }
    }
    workload.comparison = match base {
        None => Comparison::NoBaseline,
        Some((artifact, _)) if deployed_state.is_none() || workload.tuned_gflops.is_none() => {
            Comparison::Missing {
                baseline_gflops: artifact.gflops,
                why: workload
                    .note
                    .clone()
                    .unwrap_or_else(|| "no valid schedule".into()),
            }
        }
        Some(_) if same => Comparison::Same,
        Some((artifact, stale)) => {
            let tuned = workload.tuned_gflops.unwrap_or(0.0);
            match measure_base.then(|| gflops(results[2].median())).flatten() {
                Some(now) if tuned < now => {
                    // Confirm a slowdown in reverse order before calling
                    // it one; each schedule keeps its better measurement.
                    let again = measurer.measure(task, &[states[2].clone(), states[1].clone()])?;
                    let base_best = gflops(again[0].median()).map_or(now, |g| g.max(now));
                    let tuned_best = gflops(again[1].median()).map_or(tuned, |g| g.max(tuned));
                    Comparison::Measured {
                        baseline_gflops: base_best,
                        ratio: tuned_best / base_best,
                    }
                }
                Some(now) => Comparison::Measured {
                    baseline_gflops: now,
                    ratio: tuned / now,
                },
                None => Comparison::Recorded {
                    baseline_gflops: artifact.gflops,
                    ratio: tuned / artifact.gflops,
                    why: if stale {
                        "the operator changed since the baseline was tuned".into()
                    } else if base_state.is_none() {
                        "the baseline schedule no longer replays".into()
                    } else {
                        "the baseline schedule failed its check".into()
                    },
                },
            }
        }
    };
    Ok(())
}
