//! Finding the record to use for a workload on a device — and saying
//! plainly when there is none, instead of borrowing another device's or
//! another shape's. Every record returned replays on the workload's DAG.

use rusqlite::params;

use crate::measure::Task;
use crate::runtime::DeviceKey;
use crate::schedule::State;

use super::error::DbError;
use super::record::TuningRecord;
use super::store::{BEST_FIRST, RECORD_FROM, TuningDb};

/// A stored record passed over because it cannot be used.
#[derive(Clone, Debug, PartialEq)]
pub struct SkippedRecord {
    /// The record's fingerprint, or its row id when it could not be read.
    pub record: String,
    /// Why it was skipped (e.g. the step that no longer applies).
    pub reason: String,
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    /// The best record of this workload on this device that replays (by its
    /// re-measured median when any record of it was re-measured).
    Exact(Box<TuningRecord>),
    /// Nothing usable for this device; these devices (readable name, key
    /// hash, successful records) have records for this workload.
    OtherDevices(Vec<(String, String, usize)>),
    /// No record of this workload on any device; these are the stored
    /// workloads (readable forms) of the same operator at other shapes.
    Nothing(Vec<String>),
}

/// The best records that replay, and the ones passed over on the way.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ValidRecords {
    /// Best first; each replays on the task's DAG.
    pub records: Vec<TuningRecord>,
    /// Records ranked before the last one returned that cannot be used.
    pub skipped: Vec<SkippedRecord>,
}

impl TuningDb {
    /// The `k` best successful records of `task` on `device` whose steps
    /// replay on the task's DAG; those that do not are reported and skipped.
    /// Best first: records re-measured at the end of a tuning run by their
    /// re-measured median, then the others by their tuning figure (the
    /// order of [`best`](TuningDb::best)).
    pub fn best_valid(
        &self,
        task: &Task,
        device: &DeviceKey,
        k: usize,
    ) -> Result<ValidRecords, DbError> {
        let rows = self.query_rows(
            &format!(
                "SELECT {} FROM {RECORD_FROM} WHERE w.key = ?1 AND d.key = ?2 \
                 AND r.cost IS NOT NULL ORDER BY {BEST_FIRST}",
                self.record_columns()
            ),
            params![task.key().hash, device.hash],
        )?;
        let mut found = ValidRecords::default();
        for row in rows {
            if found.records.len() == k {
                break;
            }
            let record = match row {
                Ok(record) => record,
                Err(DbError::BadRow { id, reason, .. }) => {
                    found.skipped.push(SkippedRecord {
                        record: format!("row {id}"),
                        reason,
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            match State::replay(task.dag(), &record.steps) {
                Ok(_) => found.records.push(record),
                Err(e) => found.skipped.push(SkippedRecord {
                    record: record.fingerprint(),
                    reason: format!("its steps no longer replay: {e}"),
                }),
            }
        }
        Ok(found)
    }

    /// The record to use for `task` on `device`, or what exists instead;
    /// plus the records skipped because they no longer replay.
    pub fn lookup(
        &self,
        task: &Task,
        device: &DeviceKey,
    ) -> Result<(Lookup, Vec<SkippedRecord>), DbError> {
        let valid = self.best_valid(task, device, 1)?;
        if let Some(best) = valid.records.into_iter().next() {
            return Ok((Lookup::Exact(Box::new(best)), valid.skipped));
        }
        let sql = |e| self.sql_error(e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT d.readable, d.key, COUNT(*) FROM records r \
                 JOIN workloads w ON r.workload_id = w.id JOIN devices d ON r.device_id = d.id \
                 WHERE w.key = ?1 AND d.key != ?2 AND r.cost IS NOT NULL \
                 GROUP BY d.id ORDER BY d.readable",
            )
            .map_err(sql)?;
        let others: Vec<(String, String, usize)> = stmt
            .query_map(params![task.key().hash, device.hash], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as usize))
            })
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        if !others.is_empty() {
            return Ok((Lookup::OtherDevices(others), valid.skipped));
        }
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT DISTINCT w.readable FROM workloads w JOIN records r ON r.workload_id = w.id \
                 WHERE w.op = ?1 AND w.key != ?2 ORDER BY w.readable",
            )
            .map_err(sql)?;
        let shapes: Vec<String> = stmt
            .query_map(
                params![task.registry_op().map(|(op, _)| op), task.key().hash],
                |r| r.get(0),
            )
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        Ok((Lookup::Nothing(shapes), valid.skipped))
    }
}
