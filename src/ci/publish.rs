//! The job's publishing stages, one function each: this device's records
//! exported as a JSON-lines log, the tuned workloads deployed as artifacts,
//! a cost model retrained on the records, and the database copied into the
//! output folder when it lives elsewhere.

use std::path::{Path, PathBuf};

use crate::cost;
use crate::db::TuningDb;
use crate::deploy::{self, DeployOptions, DeployedWorkload};
use crate::runtime::{DeviceDescription, DeviceKey};
use crate::search::SuiteTask;

use super::error::CiError;
use super::job::{CiOptions, DB_FILE, LOGS_DIR, MODEL_DIR};

/// Writes this device's records to `out/tuning_logs/<device>.jsonl`; returns the file.
pub(super) fn export_log(
    db: &TuningDb,
    out: &Path,
    device_folder: &Path,
    device: &DeviceKey,
) -> Result<PathBuf, CiError> {
    let log = out
        .join(LOGS_DIR)
        .join(device_folder.with_extension("jsonl"));
    if let Some(parent) = log.parent() {
        std::fs::create_dir_all(parent).map_err(CiError::io(parent))?;
    }
    db.export_jsonl(&log, Some(&device.hash), None)?;
    Ok(log)
}

/// Deploys the best schedule of each of `tasks` that has a successful
/// measurement on this device into `schedules_root` (replacing what is there).
pub(super) fn deploy_tuned(
    db: &TuningDb,
    device: &DeviceDescription,
    tasks: &[SuiteTask],
    schedules_root: &Path,
) -> Result<Vec<DeployedWorkload>, CiError> {
    let device_hash = device.key().hash;
    let tuned = db.list()?;
    let tuned_keys: Vec<String> = tasks
        .iter()
        .map(|t| t.task.key().hash.clone())
        .filter(|k| {
            tuned
                .iter()
                .any(|s| s.device.1 == device_hash && s.workload.1 == *k && s.successes > 0)
        })
        .collect();
    if tuned_keys.is_empty() {
        return Ok(Vec::new());
    }
    Ok(deploy::deploy(
        db,
        device,
        &DeployOptions {
            out: schedules_root.to_path_buf(),
            workloads: tuned_keys,
            force: true,
        },
    )?
    .workloads)
}

/// Trains a cost model on this device's records into
/// `out/cost_model/<device>.model`; `None` when there are no records.
pub(super) fn retrain_model(
    db: &TuningDb,
    options: &CiOptions,
    device_folder: &Path,
    device: &DeviceKey,
) -> Result<Option<PathBuf>, CiError> {
    let model_path = options
        .out
        .join(MODEL_DIR)
        .join(device_folder.with_extension("model"));
    let (rows, _skipped) = cost::workload_rows(db, Some(&device.hash))?;
    if rows.is_empty() {
        return Ok(None);
    }
    if let Some(parent) = model_path.parent() {
        std::fs::create_dir_all(parent).map_err(CiError::io(parent))?;
    }
    cost::train_model_file(
        &rows,
        &device.to_string(),
        &options.learner,
        &options.command,
        &model_path,
    )?;
    Ok(Some(model_path))
}

/// The database inside the output folder: `db` copied there when it was
/// opened elsewhere (`db_path`).
pub(super) fn copy_db(db: &TuningDb, db_path: &Path, out: &Path) -> Result<PathBuf, CiError> {
    let db_copy = out.join(DB_FILE);
    if db_path != db_copy {
        db.snapshot(&db_copy)?;
    }
    Ok(db_copy)
}
