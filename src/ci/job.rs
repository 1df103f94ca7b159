//! The CI job: tune a suite (or one shard of it) under a budget, resuming
//! from the database, then publish what deployment needs into one folder
//! and compare the result with the artifacts the run started from.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cost::{self, CostModel};
use crate::db::TuningDb;
use crate::deploy::{self, DeployOptions, DeployOutcome, device_dir};
use crate::measure::{Measurer, Task};
use crate::runtime::host_device;
use crate::schedule::State;
use crate::search::{
    CurvePoint, SearchOptions, Suite, SuiteOptions, SuiteProgress, SuiteReport, SuiteTask,
    tune_suite,
};

use super::baseline::{Baseline, Comparison};
use super::budget::{Budget, trials_spent};
use super::error::CiError;
use super::shard::Shard;

/// The database file inside the output folder.
pub const DB_FILE: &str = "tuning.db";
/// The deployed artifacts inside the output folder.
pub const SCHEDULES_DIR: &str = "schedules";
/// The JSON-lines logs inside the output folder.
pub const LOGS_DIR: &str = "tuning_logs";
/// The retrained cost model inside the output folder.
pub const MODEL_DIR: &str = "cost_model";

/// What the job does and where it writes.
#[derive(Clone, Debug)]
pub struct CiOptions {
    /// The suite file (for the report).
    pub suite_file: PathBuf,
    /// The output folder (created if missing).
    pub out: PathBuf,
    /// The database to resume from and record into (default `out/tuning.db`;
    /// another path is copied there at the end).
    pub db: Option<PathBuf>,
    /// How much to tune.
    pub budget: Budget,
    /// Seed of the scheduler and the searches.
    pub seed: u64,
    /// The share of the suite to tune.
    pub shard: Shard,
    /// The schedules folder to compare with (default: `out/schedules` as
    /// the run finds it).
    pub baseline: Option<PathBuf>,
    /// A workload regresses when its new schedule is slower than the
    /// baseline's by more than this fraction.
    pub regression_tolerance: f64,
    /// The learner of the retrained cost model.
    pub learner: String,
    /// Candidates per scheduler round.
    pub batch_size: usize,
    /// The evolutionary search.
    pub search: SearchOptions,
    /// The command line, for the report and the model file.
    pub command: String,
}

/// One workload's line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct CiWorkload {
    /// The suite's label.
    pub label: String,
    /// The workload key (readable#hash).
    pub workload: String,
    /// The key hash.
    #[serde(skip)]
    pub key_hash: String,
    /// Candidates measured for it on this device, over all runs.
    pub trials: usize,
    /// Of which by this run.
    pub trials_this_run: usize,
    /// The default schedule's GFLOP/s, measured at the end of this run.
    pub default_gflops: Option<f64>,
    /// The deployed schedule's GFLOP/s, measured right after the default's.
    pub tuned_gflops: Option<f64>,
    /// What the deployed schedule's record measured while tuning.
    pub recorded_gflops: Option<f64>,
    /// The artifact written, if any.
    pub artifact: Option<PathBuf>,
    /// Against the baseline.
    pub comparison: Comparison,
    /// Slower than the baseline beyond the tolerance, or lost.
    pub regressed: bool,
    /// Why something is missing (no valid schedule, a failed check).
    pub note: Option<String>,
    /// Best GFLOP/s over this run's trials, from its best before the run.
    #[serde(skip)]
    pub curve: Vec<CurvePoint>,
}

impl CiWorkload {
    /// Tuned over default GFLOP/s, both measured by this run.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.tuned_gflops? / self.default_gflops?)
    }

    /// The baseline's GFLOP/s (the tuned one when it is the same schedule).
    pub fn baseline_gflops(&self) -> Option<f64> {
        match self.comparison {
            Comparison::Same => self.tuned_gflops,
            ref other => other.baseline_gflops(),
        }
    }
}

/// Where the job wrote what.
#[derive(Clone, Debug, Serialize)]
pub struct CiOutputs {
    /// The output folder.
    pub dir: PathBuf,
    /// The database (a copy when `--db` is elsewhere).
    pub db: PathBuf,
    /// This device's JSON-lines log.
    pub log: PathBuf,
    /// This device's artifact folder.
    pub schedules: PathBuf,
    /// The retrained cost model, when there were records to train on.
    pub model: Option<PathBuf>,
}

/// What the job did.
#[derive(Clone, Debug, Serialize)]
pub struct CiReport {
    /// The suite's name.
    pub suite: String,
    /// The suite file.
    pub suite_file: PathBuf,
    /// The share tuned.
    pub shard: String,
    /// Workloads in the whole suite.
    pub suite_workloads: usize,
    /// The device key (readable#hash).
    pub device: String,
    /// The budget, in words.
    pub budget: String,
    /// The seed.
    pub seed: u64,
    /// The command that ran.
    pub command: String,
    /// tessera's version.
    pub tessera_version: String,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// Seconds of tuning.
    pub tuning_s: f64,
    /// Seconds of the whole job.
    pub wall_s: f64,
    /// Candidates measured by this run.
    pub trials_this_run: usize,
    /// Why tuning did nothing, if it did not (budget already spent).
    pub tuning_note: Option<String>,
    /// The baseline folder compared with.
    pub baseline: PathBuf,
    /// Baseline entries that could not be read.
    pub baseline_unreadable: Vec<String>,
    /// The tolerance of the regression check.
    pub regression_tolerance: f64,
    /// The workloads, in suite order.
    pub workloads: Vec<CiWorkload>,
    /// The files written.
    pub outputs: CiOutputs,
}

impl CiReport {
    /// The workloads that regressed.
    pub fn regressions(&self) -> Vec<&CiWorkload> {
        self.workloads.iter().filter(|w| w.regressed).collect()
    }
}

/// Called with a line saying which step starts.
pub type Stage<'a> = &'a dyn Fn(&str);

/// Runs the job on `suite` (see the [module docs](super)): tune this
/// shard's workloads under the budget, resuming from the database; write
/// the log, the artifacts and the retrained model into `options.out`;
/// measure the default, deployed and baseline schedules one after another
/// and flag regressions. The report files are written by
/// [`write_report`](super::write_report).
pub fn run_ci(
    suite: &Suite,
    options: &CiOptions,
    measurer: &mut Measurer,
    model: &mut dyn CostModel,
    progress: SuiteProgress,
    stage: Stage,
    stop: &AtomicBool,
) -> Result<CiReport, CiError> {
    let start = Instant::now();
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    check_options(options)?;
    let all = suite.tasks()?;
    let tasks: Vec<SuiteTask> = options.shard.select(&all);
    if tasks.is_empty() {
        return Err(CiError::Usage(format!(
            "shard {} of suite {} ({} workloads) is empty; use at most {} shards",
            options.shard,
            options.suite_file.display(),
            all.len(),
            all.len()
        )));
    }
    std::fs::create_dir_all(&options.out).map_err(CiError::io(&options.out))?;
    let device = host_device();
    let device_key = device.key();
    let schedules_root = options.out.join(SCHEDULES_DIR);
    let baseline_root = options.baseline.clone().unwrap_or(schedules_root.clone());
    let baseline = Baseline::load(&baseline_root, &device_key);
    let db_path = options
        .db
        .clone()
        .unwrap_or_else(|| options.out.join(DB_FILE));
    let mut db = TuningDb::open(&db_path)?;

    let spent_before: Vec<usize> = tasks
        .iter()
        .map(|t| trials_spent(&db, &t.task, &device_key.hash))
        .collect::<Result<_, _>>()?;
    let trials_left = options.budget.trials_left(&spent_before);
    let tuning_start = Instant::now();
    let (suite_report, tuning_note) = match trials_left {
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
                tasks.len(),
                options.shard,
                options.budget.describe()
            ));
            let report = tune_with_budget(
                &tasks,
                options,
                trials_left,
                measurer,
                &mut db,
                model,
                progress,
                stop,
            )?;
            (Some(report), None)
        }
    };
    let tuning_s = tuning_start.elapsed().as_secs_f64();

    stage("exporting the log");
    let device_folder = device_dir(Path::new(""), &device_key);
    let log = options
        .out
        .join(LOGS_DIR)
        .join(device_folder.with_extension("jsonl"));
    if let Some(parent) = log.parent() {
        std::fs::create_dir_all(parent).map_err(CiError::io(parent))?;
    }
    db.export_jsonl(&log, Some(&device_key.hash), None)?;

    stage("deploying");
    let tuned_keys: Vec<String> = {
        let tuned = db.list()?;
        tasks
            .iter()
            .map(|t| t.task.key().hash.clone())
            .filter(|k| {
                tuned
                    .iter()
                    .any(|s| s.device.1 == device_key.hash && s.workload.1 == *k && s.successes > 0)
            })
            .collect()
    };
    let deployed = if tuned_keys.is_empty() {
        Vec::new()
    } else {
        deploy::deploy(
            &db,
            device,
            &DeployOptions {
                out: schedules_root.clone(),
                workloads: tuned_keys,
                force: true,
            },
        )?
        .workloads
    };

    stage("measuring default, deployed and baseline schedules");
    let mut workloads = Vec::with_capacity(tasks.len());
    for (n, t) in tasks.iter().enumerate() {
        let key = t.task.key();
        let line = deployed.iter().find(|d| d.key == key.hash);
        let trials = trials_spent(&db, &t.task, &device_key.hash)?;
        let curve = suite_report
            .as_ref()
            .and_then(|r| r.tasks.get(n))
            .map(|r| CurvePoint::with_start(r.start_gflops, &r.report.curve))
            .unwrap_or_default();
        let mut workload = CiWorkload {
            label: t.label.clone(),
            workload: key.to_string(),
            key_hash: key.hash.clone(),
            trials,
            trials_this_run: trials.saturating_sub(spent_before[n]),
            default_gflops: None,
            tuned_gflops: None,
            recorded_gflops: line.and_then(|l| l.gflops),
            artifact: line.and_then(|l| l.file.clone()),
            comparison: Comparison::NoBaseline,
            regressed: false,
            note: match line.map(|l| &l.outcome) {
                Some(DeployOutcome::Skipped(why)) => Some(why.clone()),
                None => Some("no successful measurement".into()),
                _ => None,
            },
            curve,
        };
        measure_final(&t.task, &baseline, &mut workload, measurer)?;
        workload.regressed = workload.comparison.regressed(options.regression_tolerance);
        workloads.push(workload);
    }

    stage("retraining the cost model");
    let model_path = options
        .out
        .join(MODEL_DIR)
        .join(device_folder.with_extension("model"));
    let (rows, _skipped) = cost::workload_rows(&db, Some(&device_key.hash))?;
    let model_file = if rows.is_empty() {
        None
    } else {
        if let Some(parent) = model_path.parent() {
            std::fs::create_dir_all(parent).map_err(CiError::io(parent))?;
        }
        cost::train_model_file(
            &rows,
            &device_key.to_string(),
            &options.learner,
            &options.command,
            &model_path,
        )?;
        Some(model_path)
    };

    let db_copy = options.out.join(DB_FILE);
    if db_path != db_copy {
        db.snapshot(&db_copy)?;
    }
    Ok(CiReport {
        suite: suite.name.clone(),
        suite_file: options.suite_file.clone(),
        shard: options.shard.to_string(),
        suite_workloads: all.len(),
        device: device_key.to_string(),
        budget: options.budget.describe(),
        seed: options.seed,
        command: options.command.clone(),
        tessera_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        tuning_s,
        wall_s: start.elapsed().as_secs_f64(),
        trials_this_run: workloads.iter().map(|w| w.trials_this_run).sum(),
        tuning_note,
        baseline: baseline.dir.clone(),
        baseline_unreadable: baseline.unreadable.clone(),
        regression_tolerance: options.regression_tolerance,
        workloads,
        outputs: CiOutputs {
            dir: options.out.clone(),
            db: db_copy,
            log,
            schedules: schedules_root.join(device_folder),
            model: model_file,
        },
    })
}

fn check_options(options: &CiOptions) -> Result<(), CiError> {
    if options.budget.trials_per_task.is_none() && options.budget.time.is_none() {
        return Err(CiError::Usage(
            "give a budget: --trials-per-task N, --time-budget DURATION, or both".into(),
        ));
    }
    if options.budget.trials_per_task == Some(0) {
        return Err(CiError::Usage(
            "--trials-per-task must be at least 1".into(),
        ));
    }
    if options.budget.time.is_some_and(|t| t.is_zero()) {
        return Err(CiError::Usage("--time-budget must be longer than 0".into()));
    }
    if !(0.0..1.0).contains(&options.regression_tolerance) {
        return Err(CiError::Usage(
            "--regression-tolerance must be at least 0 and below 1".into(),
        ));
    }
    if options.out.is_file() {
        return Err(CiError::Usage(format!(
            "--out {}: a file, not a folder",
            options.out.display()
        )));
    }
    Ok(())
}

/// Tunes `tasks` for at most `trials` candidates (`None`: unlimited) and at
/// most the time budget; `stop` (Ctrl-C) ends it after the batch in flight.
#[allow(clippy::too_many_arguments)]
fn tune_with_budget(
    tasks: &[SuiteTask],
    options: &CiOptions,
    trials: Option<usize>,
    measurer: &mut Measurer,
    db: &mut TuningDb,
    model: &mut dyn CostModel,
    progress: SuiteProgress,
    stop: &AtomicBool,
) -> Result<SuiteReport, CiError> {
    let suite_options = SuiteOptions {
        // Without a trial budget the time budget ends the run.
        total_trials: trials.unwrap_or(usize::MAX / 4),
        batch_size: options.batch_size,
        seed: options.seed,
        early_stopping: None,
        search: options.search.clone(),
        ..SuiteOptions::default()
    };
    let deadline = options.budget.time.map(|t| Instant::now() + t);
    let local_stop = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
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
            tasks,
            measurer,
            Some(db),
            model,
            &suite_options,
            progress,
            &local_stop,
        );
        finished.store(true, Ordering::Relaxed);
        result.map_err(CiError::from)
    })
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
