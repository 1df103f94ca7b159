//! The model artifact's file format: `schedules/<device>/models/<stem>/`
//! holds `model.json` (this type) and `graph.onnx` (the graph after the
//! passes, with its weights).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::deploy::device_dir;
use crate::runtime::DeviceKey;

use super::error::ModelArtifactError;

/// The model artifact format's version; loading refuses other ones.
pub const MODEL_FORMAT: i64 = 1;

/// The model artifact's description file.
pub const MODEL_FILE: &str = "model.json";

/// The graph after the passes, in ONNX.
pub const GRAPH_FILE: &str = "graph.onnx";

/// The folder of the model artifacts of a device folder.
pub const MODELS_DIR: &str = "models";

/// `model.json`: what was deployed for one model on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelArtifact {
    /// The format's version ([`MODEL_FORMAT`]).
    pub format: i64,
    /// The tessera version that deployed it.
    pub tessera_version: String,
    /// The device it was deployed for.
    pub device: DeviceRef,
    /// The ONNX file it was deployed from.
    pub source: SourceRef,
    /// The graph passes run on the source, in order (the stored graph is
    /// their result: loading runs none).
    pub passes: Vec<String>,
    /// The stored graph: its file in this folder and its SHA-256.
    pub graph: FileRef,
    /// One entry per distinct kernel, in order of first use.
    pub tasks: Vec<TaskEntry>,
    /// The memory plan of the stored graph.
    pub memory: MemorySummary,
}

/// A device, as in a schedules index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceRef {
    /// Its key hash.
    pub key: String,
    /// Its readable name.
    pub readable: String,
}

/// The source model file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    /// Its file name (no folder).
    pub file: String,
    /// The SHA-256 of its bytes, 64 lowercase hex digits.
    pub sha256: String,
}

/// A file of the artifact folder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRef {
    /// Its name in the folder.
    pub file: String,
    /// The SHA-256 of its bytes.
    pub sha256: String,
}

/// Where a task's schedule comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TaskSchedule {
    /// A tuned artifact, by file name in the device folder.
    Artifact(String),
    /// The default schedule, and why.
    Default(String),
}

/// One kernel of the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskEntry {
    /// The workload key hash.
    pub workload_key: String,
    /// Its readable form.
    pub readable: String,
    /// The nodes of the stored graph that run it.
    pub nodes: Vec<String>,
    /// Its schedule.
    pub schedule: TaskSchedule,
    /// Its inputs that are the model's constants.
    pub constant_inputs: Vec<String>,
    /// Those of them the schedule reads through one packing copy: loading
    /// lays them out once instead of on every run.
    pub prepacked: Vec<String>,
}

/// The memory plan's figures, in bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySummary {
    /// The arena of intermediates and outputs.
    pub arena_bytes: usize,
    /// The intermediates' and outputs' bytes without reuse.
    pub all_intermediate_bytes: usize,
    /// The largest set of tensors alive at once: no plan does better.
    pub lower_bound_bytes: usize,
}

impl ModelArtifact {
    /// Parses and checks `model.json` at `path`.
    pub fn read(path: &Path) -> Result<ModelArtifact, ModelArtifactError> {
        let text = std::fs::read_to_string(path).map_err(|source| ModelArtifactError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let bad = |reason: String| ModelArtifactError::BadFile {
            path: path.to_path_buf(),
            reason,
        };
        let artifact: ModelArtifact = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not a tessera model artifact: {e}")))?;
        if artifact.format != MODEL_FORMAT {
            return Err(bad(format!(
                "model artifact format {} is not the one this tessera reads ({MODEL_FORMAT})",
                artifact.format
            )));
        }
        Ok(artifact)
    }
}

/// The SHA-256 of `bytes`, 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The model name of an ONNX file: its file stem.
pub fn model_stem(model: &Path) -> String {
    model
        .file_stem()
        .map_or_else(|| "model".to_string(), |s| s.to_string_lossy().into_owned())
}

/// The artifact folder of `model` for `device` under the schedules root:
/// `<root>/<device>/models/<stem>/`.
pub fn model_dir(root: &Path, device: &DeviceKey, model: &Path) -> PathBuf {
    device_dir(root, device)
        .join(MODELS_DIR)
        .join(model_stem(model))
}
