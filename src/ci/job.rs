//! The CI job: tune a suite (or one shard of it) under a budget, resuming
//! from the database, then publish what deployment needs into one folder
//! and compare the result with the artifacts the run started from. This
//! file holds the job's options and report and [`run_ci`], the list of its
//! stages: tuning (`tuning.rs`), the log, the artifacts and the model
//! (`publish.rs`), the comparison (`compare.rs`); the report files are
//! `report.rs`'s.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::Serialize;

use crate::cost::CostModel;
use crate::db::TuningDb;
use crate::deploy::device_dir;
use crate::measure::Measurer;
use crate::runtime::host_device;
use crate::search::{CurvePoint, Progress, RemeasureOptions, SearchOptions, Suite, SuiteTask};

use super::baseline::{Baseline, Comparison};
use super::budget::Budget;
use super::compare::Comparing;
use super::error::CiError;
use super::publish;
use super::shard::Shard;
use super::tuning::TuningRun;

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
    /// The re-measurement of each workload's best candidates after tuning
    /// (the deployed schedule is chosen by it).
    pub remeasure: RemeasureOptions,
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
    /// What it measured when re-measured after tuning, if it was.
    pub remeasured_gflops: Option<f64>,
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

/// What a CI run tunes: a suite file's workloads, or a model's fused tasks.
#[derive(Clone, Debug)]
pub struct CiTasks {
    /// The suite's (or model's) name, in the report.
    pub name: String,
    /// The tasks, in tuning (warm-up) order.
    pub tasks: Vec<SuiteTask>,
}

impl CiTasks {
    /// The workloads of `suite`.
    pub fn of_suite(suite: &Suite) -> Result<CiTasks, CiError> {
        Ok(CiTasks {
            name: suite.name.clone(),
            tasks: suite.tasks()?,
        })
    }
}

/// Runs the job on `suite` (see the [module docs](super)): tune this
/// shard's workloads under the budget, resuming from the database; write
/// the log, the artifacts and the retrained model into `options.out`;
/// measure the default, deployed and baseline schedules one after another
/// and flag regressions. The report files are written by
/// [`write_report`](super::write_report).
pub fn run_ci(
    suite: &CiTasks,
    options: &CiOptions,
    measurer: &mut Measurer,
    model: &mut dyn CostModel,
    progress: Progress,
    stage: Stage,
    stop: &AtomicBool,
) -> Result<CiReport, CiError> {
    let start = Instant::now();
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    check_options(options)?;
    let all = &suite.tasks;
    let tasks = select_shard(options, all)?;
    std::fs::create_dir_all(&options.out).map_err(CiError::io(&options.out))?;
    let device = host_device();
    let device_key = device.key();
    let device_folder = device_dir(Path::new(""), &device_key);
    let schedules_root = options.out.join(SCHEDULES_DIR);
    let baseline_root = options.baseline.clone().unwrap_or(schedules_root.clone());
    let baseline = Baseline::load(&baseline_root, &device_key);
    let db_path = options
        .db
        .clone()
        .unwrap_or_else(|| options.out.join(DB_FILE));
    let mut db = TuningDb::open(&db_path)?;

    let tuning = TuningRun {
        tasks: &tasks,
        options,
        device_hash: &device_key.hash,
        measurer,
        db: &mut db,
        model,
        progress,
        stop,
    }
    .run(stage)?;

    stage("exporting the log");
    let log = publish::export_log(&db, &options.out, &device_folder, &device_key)?;

    stage("deploying");
    let deployed = publish::deploy_tuned(&db, device, &tasks, &schedules_root)?;

    stage("measuring default, deployed and baseline schedules");
    let workloads = Comparing {
        db: &db,
        device_hash: &device_key.hash,
        deployed: &deployed,
        baseline: &baseline,
        tuned: tuning.report.as_ref(),
        spent_before: &tuning.spent_before,
        regression_tolerance: options.regression_tolerance,
    }
    .workloads(&tasks, measurer)?;

    stage("retraining the cost model");
    let model_file = publish::retrain_model(&db, options, &device_folder, &device_key)?;

    let db_copy = publish::copy_db(&db, &db_path, &options.out)?;
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
        tuning_s: tuning.secs,
        wall_s: start.elapsed().as_secs_f64(),
        trials_this_run: workloads.iter().map(|w| w.trials_this_run).sum(),
        tuning_note: tuning.note,
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

/// This shard's tasks of the suite's `all`; an empty shard is a usage error.
fn select_shard(options: &CiOptions, all: &[SuiteTask]) -> Result<Vec<SuiteTask>, CiError> {
    let tasks: Vec<SuiteTask> = options.shard.select(all);
    if tasks.is_empty() {
        return Err(CiError::Usage(format!(
            "shard {} of suite {} ({} workloads) is empty; use at most {} shards",
            options.shard,
            options.suite_file.display(),
            all.len(),
            all.len()
        )));
    }
    Ok(tasks)
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
