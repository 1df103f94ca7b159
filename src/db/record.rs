//! A tuning record: one measurement with everything needed to know where it
//! is valid. It is both a database row (joined with its workload and
//! device) and one line of a JSON-lines log.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::measure::{MeasureResult, Task, TaskSource};
use crate::runtime::DeviceDescription;
use crate::schedule::Step;
use crate::te::DagSpec;

/// The workload a record was measured on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// The workload key's hash (64 hex digits).
    pub key: String,
    /// The readable form, e.g. `matmul[M=512,N=512,K=512,f32]`.
    pub readable: String,
    /// The registry operator it was built from, when it came from the registry.
    pub op: Option<String>,
    /// Its full shape (`M=512,N=512,K=512`), with `op`.
    pub shape: Option<String>,
    /// FLOPs of one run.
    pub flops: u64,
    /// The canonical DAG text the key hashes.
    pub canonical: String,
    /// The DAG itself when the workload is no registry operator (a model's
    /// fused group), so that it can be rebuilt; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dag: Option<DagSpec>,
}

impl WorkloadInfo {
    /// The task this workload was measured on, rebuilt: from the registry
    /// operator and shape, or from the stored DAG; checked to have the
    /// workload's key.
    pub fn task(&self) -> Result<Task, RebuildError> {
        let task = match (&self.op, &self.shape, &self.dag) {
            (Some(op), Some(shape), _) => Task::from_registry(op, shape),
            (_, _, Some(spec)) => Task::from_source(TaskSource::Dag { spec: spec.clone() }),
            _ => return Err(RebuildError::NoDefinition),
        }
        .map_err(|e| RebuildError::Build(e.to_string()))?;
        if task.key().hash != self.key {
            return Err(RebuildError::Changed {
                then: self.key.chars().take(12).collect(),
                now: task.key().short_hash().to_string(),
            });
        }
        Ok(task)
    }
}

/// Why a workload cannot be rebuilt into its task.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RebuildError {
    /// No registry operator and no stored DAG (a record of an older tessera
    /// for a workload not built from the registry).
    #[error(
        "neither a registry operator nor a stored DAG (a record of an older tessera), so it cannot be rebuilt"
    )]
    NoDefinition,
    /// The registry operator or the DAG does not build.
    #[error("cannot rebuild the workload: {0}")]
    Build(String),
    /// It builds, with another workload key: its definition changed.
    #[error("the operator changed since it was tuned (workload key {then} then, {now} now)")]
    Changed {
        /// The first 12 hex digits of the key it was tuned with.
        then: String,
        /// Those of the key it has now.
        now: String,
    },
}

/// The device a record was measured on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// The device key's hash (64 hex digits).
    pub key: String,
    /// The readable name, e.g. `x86_64-amd-epyc-2c-avx512`.
    pub readable: String,
    /// What the key was made from.
    pub description: DeviceDescription,
}

/// One measurement and where it is valid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuningRecord {
    /// The record format's schema version.
    pub schema: i64,
    /// The tessera version that measured it.
    pub tessera_version: String,
    /// Where it was measured: the workload…
    pub workload: WorkloadInfo,
    /// …and the device.
    pub device: DeviceInfo,
    /// The schedule.
    pub steps: Vec<Step>,
    /// The measurement.
    pub result: MeasureResult,
    /// The schedule measured again at the end of a tuning run, when it was
    /// one of the run's best candidates; absent otherwise (and in records
    /// written before schema 2). Not part of the [fingerprint](Self::fingerprint):
    /// it is a later figure of the same measurement's schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remeasured: Option<Remeasurement>,
}

/// A schedule measured again at the end of a tuning run: in fresh worker
/// processes, with the normal timing protocol, in passes interleaved with
/// the run's other best candidates so that drift hits all of them alike.
/// Its median is an honest figure where the tuning figure is the best of
/// many noisy measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remeasurement {
    /// Seconds per run: every timed repeat of every pass.
    pub costs: Vec<f64>,
    /// When the last pass finished (Unix seconds).
    pub timestamp: f64,
}

impl Remeasurement {
    /// The median of the costs (seconds per run); `None` without costs.
    pub fn median(&self) -> Option<f64> {
        (!self.costs.is_empty()).then(|| crate::measure::timing::median(&self.costs))
    }
}

impl TuningRecord {
    /// A hash of what makes this record this record (keys, versions, steps,
    /// result): two copies of one measurement have the same fingerprint, so
    /// importing or merging them twice stores them once.
    pub fn fingerprint(&self) -> String {
        let identity = serde_json::json!([
            self.schema,
            self.tessera_version,
            self.workload.key,
            self.device.key,
            self.steps,
            self.result,
        ]);
        let digest = Sha256::digest(identity.to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// GFLOP/s of the median cost, for successful records (the tuning figure).
    pub fn gflops(&self) -> Option<f64> {
        self.result
            .median()
            .map(|m| self.workload.flops as f64 / m / 1e9)
    }

    /// GFLOP/s of the re-measured median, when the record was re-measured.
    pub fn remeasured_gflops(&self) -> Option<f64> {
        self.remeasured
            .as_ref()
            .and_then(Remeasurement::median)
            .map(|m| self.workload.flops as f64 / m / 1e9)
    }

    /// Checks what serde cannot: keys are 64 hex digits, costs are finite
    /// and non-negative and present exactly when the measurement succeeded,
    /// the schema is not newer than this build's.
    pub fn validate(&self) -> Result<(), String> {
        let hex64 = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if self.schema > super::SCHEMA_VERSION || self.schema < 1 {
            return Err(format!(
                "record schema {} is not one this tessera reads (1..={})",
                self.schema,
                super::SCHEMA_VERSION
            ));
        }
        if !hex64(&self.workload.key) {
            return Err(format!(
                "workload key '{}' is not 64 hex digits",
                self.workload.key
            ));
        }
        if !hex64(&self.device.key) {
            return Err(format!(
                "device key '{}' is not 64 hex digits",
                self.device.key
            ));
        }
        if self.device.description.key().hash != self.device.key {
            return Err(format!(
                "device key '{}' does not match its description",
                self.device.key
            ));
        }
        let r = &self.result;
        if r.costs.iter().any(|c| !c.is_finite() || *c < 0.0) {
            return Err("costs must be finite, non-negative seconds".into());
        }
        if r.is_ok() == r.costs.is_empty() {
            return Err(format!(
                "a '{}' record must {}have costs",
                r.error_kind,
                if r.is_ok() { "" } else { "not " }
            ));
        }
        if let Some(again) = &self.remeasured {
            if !r.is_ok() {
                return Err("a failed measurement cannot have been re-measured".into());
            }
            if again.costs.is_empty() || again.costs.iter().any(|c| !c.is_finite() || *c < 0.0) {
                return Err(
                    "re-measured costs must be at least one finite, non-negative number of seconds"
                        .into(),
                );
            }
        }
        Ok(())
    }
}
