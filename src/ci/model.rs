//! `tessera ci --onnx m.onnx`: the CI job on a model. Its tasks (the fused
//! groups of the graph after the passes, one task per distinct workload)
//! are what the job tunes and publishes as usual; then the model artifact is
//! deployed into `OUT/schedules/<device>/models/<stem>/`, and the model's
//! end-to-end latency is measured through the executor before (the
//! schedules the run started from, or the defaults) and after (the model
//! artifact just deployed).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::db::TuningDb;
use crate::deploy::Library;
use crate::graph::bench::time_model;
use crate::graph::deployed::{ModelDeployOptions, deploy_model, model_stem};
use crate::graph::onnx::ImportOptions;
use crate::graph::tasks::model_tasks;
use crate::graph::{CompileOptions, CompiledModel, Model};
use crate::runtime::DeviceKey;
use crate::te::{DType, HostTensor};

use super::error::CiError;
use super::job::CiTasks;

/// The model's report file in the output folder.
pub const MODEL_REPORT_JSON: &str = "model_report.json";

/// Timed runs of each latency measurement (the median is reported).
const RUNS: usize = 10;

/// The end-to-end figures of a model's CI run.
#[derive(Clone, Debug, Serialize)]
pub struct ModelCiReport {
    /// The ONNX file.
    pub model: PathBuf,
    /// The model artifact's folder.
    pub artifact: PathBuf,
    /// Kernels run tuned / on the default schedule, after.
    pub tuned_kernels: usize,
    /// Kernels on the default schedule after.
    pub default_kernels: usize,
    /// The median latency before the run, in milliseconds, and what it ran.
    pub before_ms: f64,
    /// What "before" ran: `schedules` (the folder the run started from) or
    /// `default`.
    pub before_from: String,
    /// The median latency with the model artifact, in milliseconds.
    pub after_ms: f64,
    /// Timed runs per figure.
    pub runs: usize,
}

impl ModelCiReport {
    /// before / after (above 1: faster after).
    pub fn speedup(&self) -> f64 {
        self.before_ms / self.after_ms.max(1e-12)
    }
}

/// The model's tasks as `tessera ci` tunes them (the fused tasks of the
/// graph after the passes).
pub fn model_suite(model: &Path) -> Result<CiTasks, CiError> {
    let loaded = Model::load(model)?;
    let (graph, _) = loaded.optimized()?;
    // Measured as `tessera tune m.onnx` measures by default: the weights
    // laid out ahead of time, as the deployed model runs them.
    let tasks = model_tasks(&graph, &model_stem(model))?;
    if tasks.tasks.is_empty() {
        return Err(CiError::Usage(format!(
            "model {} has no kernel to tune (every node is an alias)",
            model.display()
        )));
    }
    Ok(CiTasks {
        name: tasks.name.clone(),
        tasks: tasks.suite_tasks(),
    })
}

/// The median latency of `model` compiled through the library in
/// `schedules` when it is a folder (the model artifact when it fits), else
/// with the default schedules; and which of the two it was. Constant
/// weights are laid out at load, as a deployed model runs.
pub fn model_latency(model: &Path, schedules: &Path) -> Result<(Duration, String), CiError> {
    let (mut compiled, from) = if schedules.is_dir() {
        let library = Library::open(schedules)?;
        let deployed = Model::load_deployed(schedules, model)?;
        (deployed.compile(&library, Vec::new(), true)?, "schedules")
    } else {
        let compiled = Model::load(model)?.compile(&CompileOptions::default())?;
        (compiled, "default")
    };
    Ok((time(&mut compiled)?, from.to_string()))
}

/// The median latency of `compiled` on random inputs.
fn time(compiled: &mut CompiledModel) -> Result<Duration, CiError> {
    let graph = compiled.graph().clone();
    let inputs: Vec<(String, HostTensor)> = graph
        .inputs
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let shape = graph.shape(name).to_vec();
            (
                name.clone(),
                HostTensor::random(&shape, DType::F32, i as u64 + 1),
            )
        })
        .collect();
    compiled.set_inputs(&inputs)?;
    Ok(time_model(compiled, RUNS, 2).latency)
}

/// After the job: deploys the model artifact of `model` from `db` into
/// `schedules` and measures the latency with it; writes
/// `out/model_report.json`.
pub fn finish_model(
    model: &Path,
    db: &Path,
    device: &DeviceKey,
    schedules: &Path,
    out: &Path,
    before: (Duration, String),
) -> Result<ModelCiReport, CiError> {
    let database = TuningDb::open_existing(db)?;
    let options = ModelDeployOptions {
        out: schedules.to_path_buf(),
        import: ImportOptions::default(),
        force: false,
    };
    let deployed = deploy_model(&database, device, model, &options)?;
    let library = Library::open(schedules)?;
    let loaded = Model::load_deployed(schedules, model)?;
    let mut compiled = loaded.compile(&library, Vec::new(), true)?;
    let tuned = compiled
        .sources()
        .iter()
        .filter(|(_, _, s)| s.label() == "tuned")
        .count();
    let default = compiled
        .sources()
        .iter()
        .filter(|(_, _, s)| s.label() == "default")
        .count();
    let after = time(&mut compiled)?;
    let report = ModelCiReport {
        model: model.to_path_buf(),
        artifact: deployed.dir,
        tuned_kernels: tuned,
        default_kernels: default,
        before_ms: before.0.as_secs_f64() * 1e3,
        before_from: before.1,
        after_ms: after.as_secs_f64() * 1e3,
        runs: RUNS,
    };
    let path = out.join(MODEL_REPORT_JSON);
    let text = serde_json::to_string_pretty(&report)
        .map_err(|e| CiError::Usage(format!("cannot write {}: {e}", path.display())))?;
    crate::deploy::write_atomic(&path, format!("{text}\n").as_bytes())?;
    Ok(report)
}
