//! `tessera deploy`: the best schedule of each workload tuned on this
//! device, out of the tuning cache into `schedules/<device>/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::db::TuningDb;
use crate::runtime::{DeviceDescription, DeviceKey};

use super::artifact::{
    Artifact, INDEX_FILE, Index, IndexEntry, artifact_file_name, device_dir, write_atomic,
};
use super::error::DeployError;

/// What `deploy` writes.
#[derive(Clone, Debug, Default)]
pub struct DeployOptions {
    /// The schedules root (its `<device>/` folder is written).
    pub out: PathBuf,
    /// Workload selectors (`readable#hash`, readable form, or a key-hash
    /// prefix of at least 6 digits); empty for every tuned workload.
    pub workloads: Vec<String>,
    /// Replace an existing artifact even when it is faster.
    pub force: bool,
}

/// What happened to one workload.
#[derive(Clone, Debug, PartialEq)]
pub enum DeployOutcome {
    /// A new or better artifact was written.
    Written,
    /// The artifact already held this schedule.
    Unchanged,
    /// The existing artifact is faster than the database's best, and was
    /// kept (`--force` replaces it). Re-measured figures are compared when
    /// both have one, else tuning figures.
    KeptFaster {
        /// The existing artifact's GFLOP/s (re-measured when compared so).
        existing_gflops: f64,
    },
    /// Nothing deployable: why.
    Skipped(String),
}

/// One workload's line of the deploy report.
#[derive(Clone, Debug, PartialEq)]
pub struct DeployedWorkload {
    /// Its readable form.
    pub readable: String,
    /// Its key hash.
    pub key: String,
    /// The artifact file (when there is one).
    pub file: Option<PathBuf>,
    /// The deployed schedule's GFLOP/s while tuning (the artifact's).
    pub gflops: Option<f64>,
    /// Its re-measured GFLOP/s (the artifact's), when it was re-measured.
    pub remeasured_gflops: Option<f64>,
    /// Candidates measured for it.
    pub trials: usize,
    /// What happened.
    pub outcome: DeployOutcome,
}

/// What `deploy` did.
#[derive(Clone, Debug, PartialEq)]
pub struct DeployReport {
    /// The device folder written.
    pub device_dir: PathBuf,
    /// One line per workload, in readable order.
    pub workloads: Vec<DeployedWorkload>,
}

/// Deploys the best valid schedule of each workload tuned on `device` in
/// `db` (or of the selected ones) into `<out>/<device>/`, with its index.
/// Other devices' folders are not touched. Selectors that name nothing are
/// an error before anything is written.
pub fn deploy(
    db: &TuningDb,
    device: &DeviceDescription,
    options: &DeployOptions,
) -> Result<DeployReport, DeployError> {
    deploy_device(db, &device.key(), options)
}

/// As [`deploy`], for the device with key `key` (which need not be this
/// machine: the merge step of a sharded CI run deploys the records of the
/// machines that tuned them).
pub fn deploy_device(
    db: &TuningDb,
    key: &DeviceKey,
    options: &DeployOptions,
) -> Result<DeployReport, DeployError> {
    let key = key.clone();
    let tuned: Vec<_> = db
        .list()?
        .into_iter()
        .filter(|s| s.device.1 == key.hash && s.successes > 0)
        .collect();
    let mut selected: BTreeSet<String> = BTreeSet::new();
    for selector in &options.workloads {
        let hits: Vec<String> = db
            .find_workloads(selector)?
            .into_iter()
            .filter(|h| tuned.iter().any(|s| s.workload.1 == *h))
            .collect();
        if hits.is_empty() {
            return Err(DeployError::UnknownWorkload(selector.clone()));
        }
        selected.extend(hits);
    }
    let dir = device_dir(&options.out, &key);
    let index_path = dir.join(INDEX_FILE);
    let mut index = if index_path.is_file() {
        Index::read(&index_path)?
    } else {
        Index::new(&key)
    };
    let mut report = DeployReport {
        device_dir: dir.clone(),
        workloads: Vec::new(),
    };
    let mut to_write: Vec<(PathBuf, Artifact)> = Vec::new();
    for summary in &tuned {
        if !selected.is_empty() && !selected.contains(&summary.workload.1) {
            continue;
        }
        let mut line = DeployedWorkload {
            readable: summary.workload.0.clone(),
            key: summary.workload.1.clone(),
            file: None,
            gflops: None,
            remeasured_gflops: None,
            trials: summary.records,
            outcome: DeployOutcome::Written,
        };
        match best_artifact(db, &key, &summary.workload.1, summary.records)? {
            Err(reason) => line.outcome = DeployOutcome::Skipped(reason),
            Ok(artifact) => {
                let path = dir.join(artifact_file_name(&artifact.workload));
                let existing = Artifact::read(&path)
                    .ok()
                    .filter(|a| a.workload.key == artifact.workload.key);
                line.file = Some(path.clone());
                line.gflops = Some(artifact.gflops);
                line.remeasured_gflops = artifact.remeasured_gflops;
                match existing {
                    Some(old)
                        if old.steps == artifact.steps
                            && old.trials == artifact.trials
                            && old.remeasured_median_secs == artifact.remeasured_median_secs =>
                    {
                        line.outcome = DeployOutcome::Unchanged;
                        line.gflops = Some(old.gflops);
                        line.remeasured_gflops = old.remeasured_gflops;
                    }
                    Some(old) if old.faster_than(&artifact) && !options.force => {
                        line.outcome = DeployOutcome::KeptFaster {
                            existing_gflops: old
                                .remeasured_gflops
                                .filter(|_| artifact.remeasured_gflops.is_some())
                                .unwrap_or(old.gflops),
                        };
                        line.gflops = Some(old.gflops);
                        line.remeasured_gflops = old.remeasured_gflops;
                    }
                    _ => to_write.push((path, artifact)),
                }
            }
        }
        report.workloads.push(line);
    }
    if !to_write.is_empty() {
        std::fs::create_dir_all(&dir).map_err(DeployError::io(&dir))?;
    }
    for (path, artifact) in &to_write {
        let text = serde_json::to_string_pretty(artifact).map_err(|e| DeployError::BadFile {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        write_atomic(path, format!("{text}\n").as_bytes())?;
        index.upsert(IndexEntry {
            workload_key: artifact.workload.key.clone(),
            readable: artifact.workload.readable.clone(),
            file: file_name(path),
            gflops: artifact.gflops,
        });
    }
    if !to_write.is_empty() {
        let text = serde_json::to_string_pretty(&index).map_err(|e| DeployError::BadFile {
            path: index_path.clone(),
            reason: e.to_string(),
        })?;
        write_atomic(&index_path, format!("{text}\n").as_bytes())?;
    }
    report.workloads.sort_by(|a, b| a.readable.cmp(&b.readable));
    Ok(report)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The artifact of the best record of `workload` on `device` that replays
/// on the operator's current DAG, or why there is none. Best: by the
/// re-measured median among the records re-measured at the end of a tuning
/// run when there are any, else by the tuning figure (see
/// [`TuningDb::best_valid`]).
fn best_artifact(
    db: &TuningDb,
    device: &crate::runtime::DeviceKey,
    workload: &str,
    trials: usize,
) -> Result<Result<Artifact, String>, DeployError> {
    let Some(first) = db.best(workload, &device.hash, 1)?.into_iter().next() else {
        return Ok(Err("no successful measurement".into()));
    };
    let task = match first.workload.task() {
        Ok(task) => task,
        Err(why) => return Ok(Err(format!("{why}; tune it again"))),
    };
    if task.key().hash != workload {
        return Ok(Err(format!(
            "the workload changed since it was tuned (its key is now {}); tune it again",
            task.key().short_hash()
        )));
    }
    let found = db.best_valid(&task, device, 1)?;
    match found.records.first() {
        Some(record) => Ok(Artifact::from_record(record, trials)
            .ok_or_else(|| "the best record has no cost".to_string())),
        None => Ok(Err(format!(
            "no recorded schedule replays on the current operator ({})",
            found
                .skipped
                .first()
                .map_or("none stored", |s| s.reason.as_str())
        ))),
    }
}
