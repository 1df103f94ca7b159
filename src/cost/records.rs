//! Training rows from the tuning cache: each record's steps are replayed on
//! its workload's DAG (rebuilt from the registry or the stored DAG and
//! checked against the record's key) and featurised.

use std::collections::BTreeMap;

use crate::db::{TuningDb, TuningRecord};
use crate::measure::Task;
use crate::schedule::State;

use super::error::CostError;
use super::features::func_features;

/// The featurised records of one workload.
#[derive(Clone, Debug)]
pub struct WorkloadRows {
    /// The workload key's hash.
    pub key: String,
    /// Its readable form.
    pub readable: String,
    /// Its operator's registry name.
    pub op: String,
    /// One feature row per usable record, oldest first.
    pub rows: Vec<Vec<f32>>,
    /// The record's median cost in seconds (`None`: the candidate failed).
    pub costs: Vec<Option<f64>>,
}

/// What could not be used, and why (one line per workload or record).
pub type Skipped = Vec<String>;

fn rebuild(record: &TuningRecord) -> Result<Task, String> {
    record.workload.task().map_err(|e| e.to_string())
}

/// Featurised records of `db` measured on `device` (a key hash; all devices
/// if `None`), grouped by workload.
pub fn workload_rows(
    db: &TuningDb,
    device: Option<&str>,
) -> Result<(Vec<WorkloadRows>, Skipped), CostError> {
    let records = db
        .all_records()
        .map_err(|e| CostError::Features(e.to_string()))?;
    let mut groups: BTreeMap<String, (Result<Task, String>, WorkloadRows)> = BTreeMap::new();
    let mut skipped = Vec::new();
    for record in records {
        if device.is_some_and(|d| d != record.device.key) {
            continue;
        }
        let (task, rows) = groups
            .entry(record.workload.key.clone())
            .or_insert_with(|| {
                (
                    rebuild(&record),
                    WorkloadRows {
                        key: record.workload.key.clone(),
                        readable: record.workload.readable.clone(),
                        op: record.workload.op.clone().unwrap_or_default(),
                        rows: Vec::new(),
                        costs: Vec::new(),
                    },
                )
            });
        let Ok(task) = task else { continue };
        match State::replay(task.dag(), &record.steps)
            .map_err(|e| e.to_string())
            .and_then(|s| crate::tir::lower(&s).map_err(|e| e.to_string()))
        {
            Ok(func) => {
                rows.rows.push(func_features(&func));
                rows.costs.push(record.result.median());
            }
            Err(e) => skipped.push(format!("a record of {}: {e}", record.workload.readable)),
        }
    }
    let mut out = Vec::new();
    for (_, (task, rows)) in groups {
        match task {
            Ok(_) if !rows.rows.is_empty() => out.push(rows),
            Ok(_) => {}
            Err(e) => skipped.push(format!("workload {}: {e}", rows.readable)),
        }
    }
    Ok((out, skipped))
}
