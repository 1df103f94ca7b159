//! The artifact file format: one JSON file per tuned workload in
//! `schedules/<device>/`, plus an `index.json` per device folder.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::db::{DeviceInfo, TuningRecord, WorkloadInfo};
use crate::runtime::DeviceKey;
use crate::schedule::Step;

use super::error::DeployError;
use super::layout_rewrite::{LayoutRewrite, plan_layout_rewrites};

/// The artifact format's version; loading refuses newer ones.
pub const ARTIFACT_SCHEMA: i64 = 1;

/// The index file of a device folder.
pub const INDEX_FILE: &str = "index.json";

/// One deployable tuned schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    /// The artifact format's version.
    pub schema: i64,
    /// The tessera version that deployed it.
    pub tessera_version: String,
    /// The workload it was tuned for (key, readable form, canonical DAG).
    pub workload: WorkloadInfo,
    /// The device it was tuned on.
    pub device: DeviceInfo,
    /// The schedule.
    pub steps: Vec<Step>,
    /// GFLOP/s of the schedule's median measured cost while tuning (the
    /// tuning figure: the best of many noisy measurements flatters it).
    pub gflops: f64,
    /// The median measured cost in seconds, while tuning.
    pub median_secs: f64,
    /// GFLOP/s of the re-measured median: the schedule measured again in
    /// fresh workers at the end of a tuning run, interleaved with the run's
    /// other best candidates. Absent when it was not re-measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remeasured_gflops: Option<f64>,
    /// The re-measured median in seconds, with `remeasured_gflops`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remeasured_median_secs: Option<f64>,
    /// Candidates measured for this workload on this device when deployed.
    pub trials: usize,
    /// When the schedule was measured (Unix seconds).
    pub measured_at: f64,
    /// When the artifact was written (RFC 3339, UTC).
    pub deployed_at: String,
    /// The micro-kernels the schedule calls (its `tensorize` steps); absent
    /// when it calls none.
    /// (The file says `intrinsics`, the name this field had when artifacts
    /// were first written.)
    #[serde(rename = "intrinsics", default, skip_serializing_if = "Vec::is_empty")]
    pub micro_kernels: Vec<String>,
    /// The widest vector ISA the schedule needs (`avx512`, `avx2`, …): that of
    /// its micro-kernels and stencils, of its `row_math` steps' row primitives and of its
    /// `pack` steps' packing routines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isa: Option<String>,
    /// The inputs the schedule reads only through one packing copy: when
    /// such an input is a constant (a weight), it can be laid out ahead of
    /// time and the copy disappears (see
    /// [`Library::kernel_with_constants`](super::Library::kernel_with_constants));
    /// absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layout_rewrites: Vec<LayoutRewrite>,
}

/// The layout rewrites the schedule of a workload allows (empty when the
/// workload cannot be rebuilt).
fn layout_rewrites_of(workload: &WorkloadInfo, steps: &[Step]) -> Vec<LayoutRewrite> {
    workload
        .task()
        .map(|task| plan_layout_rewrites(task.dag(), steps))
        .unwrap_or_default()
}

/// The micro-kernels and stencil primitives (the `tensorize` intrinsics)
/// `steps` call, in step order, each once.
pub fn micro_kernels_of(steps: &[Step]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for step in steps {
        if let Step::Tensorize { kernel, .. } = step
            && !out.contains(kernel)
        {
            out.push(kernel.clone());
        }
    }
    out
}

impl Artifact {
    /// The artifact of `record`, the best of `trials` measured candidates.
    pub fn from_record(record: &TuningRecord, trials: usize) -> Option<Artifact> {
        let median_secs = record.result.median()?;
        let micro_kernels = micro_kernels_of(&record.steps);
        let row_math_isas = crate::schedule::row_math_isas_of(&record.steps)
            .into_iter()
            .chain(crate::schedule::pack_isas_of(&record.steps))
            .filter_map(|name| crate::runtime::micro_kernels::Isa::from_name(&name));
        let isa = micro_kernels
            .iter()
            .filter_map(|name| crate::runtime::intrinsic_isa(name))
            .chain(row_math_isas)
            .max()
            .map(|isa| isa.name().to_string());
        Some(Artifact {
            schema: ARTIFACT_SCHEMA,
            tessera_version: env!("CARGO_PKG_VERSION").to_string(),
            workload: record.workload.clone(),
            device: record.device.clone(),
            steps: record.steps.clone(),
            gflops: record.gflops()?,
            median_secs,
            remeasured_gflops: record.remeasured_gflops(),
            remeasured_median_secs: record
                .remeasured
                .as_ref()
                .and_then(crate::db::Remeasurement::median),
            trials,
            measured_at: record.result.timestamp,
            deployed_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                .to_string(),
            micro_kernels,
            isa,
            layout_rewrites: layout_rewrites_of(&record.workload, &record.steps),
        })
    }

    /// Reads and checks an artifact file.
    pub fn read(path: &Path) -> Result<Artifact, DeployError> {
        let text = std::fs::read_to_string(path).map_err(DeployError::io(path))?;
        let bad = |reason: String| DeployError::BadFile {
            path: path.to_path_buf(),
            reason,
        };
        let artifact: Artifact =
            serde_json::from_str(&text).map_err(|e| bad(format!("not a tessera artifact: {e}")))?;
        if artifact.schema < 1 || artifact.schema > ARTIFACT_SCHEMA {
            return Err(bad(format!(
                "artifact schema {} is not one this tessera reads (1..={ARTIFACT_SCHEMA})",
                artifact.schema
            )));
        }
        if !(artifact.gflops.is_finite() && artifact.median_secs > 0.0) {
            return Err(bad("measured cost is not a positive number".into()));
        }
        let remeasured = (artifact.remeasured_gflops, artifact.remeasured_median_secs);
        if let (Some(g), Some(m)) = remeasured
            && !(g.is_finite() && m > 0.0)
        {
            return Err(bad("re-measured cost is not a positive number".into()));
        }
        if remeasured.0.is_some() != remeasured.1.is_some() {
            return Err(bad(
                "remeasured_gflops and remeasured_median_secs come together".into(),
            ));
        }
        Ok(artifact)
    }

    /// Whether this artifact's schedule measured faster than `other`'s,
    /// comparing like with like: the re-measured figures when both have
    /// one, else the tuning figures.
    pub fn faster_than(&self, other: &Artifact) -> bool {
        match (self.remeasured_gflops, other.remeasured_gflops) {
            (Some(mine), Some(theirs)) => mine > theirs,
            _ => self.gflops > other.gflops,
        }
    }
}

/// One line of a device folder's index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexEntry {
    /// The workload key's hash.
    pub workload_key: String,
    /// Its readable form.
    pub readable: String,
    /// The artifact's file name inside the device folder.
    pub file: String,
    /// The artifact's GFLOP/s.
    pub gflops: f64,
}

/// A device folder's `index.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    /// The artifact format's version.
    pub schema: i64,
    /// The device key's hash.
    pub device_key: String,
    /// The device's readable name.
    pub device: String,
    /// The artifacts, sorted by readable workload name.
    pub artifacts: Vec<IndexEntry>,
}

impl Index {
    /// An empty index for `device`.
    pub fn new(device: &DeviceKey) -> Index {
        Index {
            schema: ARTIFACT_SCHEMA,
            device_key: device.hash.clone(),
            device: device.readable.clone(),
            artifacts: Vec::new(),
        }
    }

    /// Reads and checks an index file.
    pub fn read(path: &Path) -> Result<Index, DeployError> {
        let text = std::fs::read_to_string(path).map_err(DeployError::io(path))?;
        let index: Index = serde_json::from_str(&text).map_err(|e| DeployError::BadFile {
            path: path.to_path_buf(),
            reason: format!("not a tessera schedules index: {e}"),
        })?;
        if index.schema < 1 || index.schema > ARTIFACT_SCHEMA {
            return Err(DeployError::BadFile {
                path: path.to_path_buf(),
                reason: format!(
                    "index schema {} is not one this tessera reads (1..={ARTIFACT_SCHEMA})",
                    index.schema
                ),
            });
        }
        Ok(index)
    }

    /// The entry of a workload key hash.
    pub fn entry(&self, workload_key: &str) -> Option<&IndexEntry> {
        self.artifacts
            .iter()
            .find(|e| e.workload_key == workload_key)
    }

    /// Adds or replaces the entry of its workload, keeping the order.
    pub fn upsert(&mut self, entry: IndexEntry) {
        self.artifacts
            .retain(|e| e.workload_key != entry.workload_key);
        self.artifacts.push(entry);
        self.artifacts
            .sort_by(|a, b| (&a.readable, &a.workload_key).cmp(&(&b.readable, &b.workload_key)));
    }
}

/// The folder of `device` under the schedules root: `<readable>-<hash12>`.
pub fn device_dir(root: &Path, device: &DeviceKey) -> PathBuf {
    root.join(format!("{}-{}", device.readable, device.short_hash()))
}

/// The artifact file name of a workload: its readable form made
/// filesystem-safe (at most 80 characters; `workload` when nothing of it
/// is left), then 12 hex digits of its key.
pub fn artifact_file_name(workload: &WorkloadInfo) -> String {
    let mut safe = String::new();
    for c in workload.readable.chars() {
        match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => safe.push(c),
            '=' => {}
            _ if !safe.ends_with('_') => safe.push('_'),
            _ => {}
        }
    }
    // A DAG's label (no registry operator) can be long: the key tells
    // workloads apart, the name only has to be readable.
    let safe: String = safe.trim_matches('_').chars().take(80).collect();
    let safe = match safe.trim_end_matches('_') {
        "" => "workload",
        s => s,
    };
    let short = workload.key.get(..12).unwrap_or(&workload.key);
    format!("{safe}-{short}.json")
}

/// Writes `bytes` to `path` through a temporary file in the same folder,
/// so that readers see the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DeployError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(DeployError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        DeployError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_file_names_are_readable_and_safe() {
        let workload = WorkloadInfo {
            key: "1aece7e786b4ffff".into(),
            readable: "matmul[M=512,N=512,K=512,f32]".into(),
            op: Some("matmul".into()),
            shape: Some("M=512,N=512,K=512".into()),
            flops: 1,
            canonical: String::new(),
            dag: None,
        };
        assert_eq!(
            artifact_file_name(&workload),
            "matmul_M512_N512_K512_f32-1aece7e786b4.json"
        );
    }

    #[test]
    fn artifact_file_names_of_dag_labels_are_safe_and_bounded() {
        let mut workload = WorkloadInfo {
            key: "0123456789abcdef".into(),
            readable: format!("Relu[{}→out]", "x".repeat(200)),
            op: None,
            shape: None,
            flops: 1,
            canonical: String::new(),
            dag: None,
        };
        let name = artifact_file_name(&workload);
        assert!(name.starts_with("Relu_xxx"), "{name}");
        assert!(name.ends_with("-0123456789ab.json"), "{name}");
        assert!(name.len() <= 80 + "-0123456789ab.json".len(), "{name}");
        workload.readable = "→→".into();
        assert_eq!(artifact_file_name(&workload), "workload-0123456789ab.json");
    }
}
