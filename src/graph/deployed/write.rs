//! `tessera deploy m.onnx`: a model's tuned kernels out of the tuning cache
//! into ordinary artifacts of `schedules/<device>/`, and the model artifact
//! (`models/<stem>/model.json` + `graph.onnx`) beside them. Everything is
//! checked and rendered in memory first; files are written atomically.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use crate::db::{TuningDb, TuningRecord};
use crate::deploy::{
    Artifact, INDEX_FILE, Index, IndexEntry, artifact_file_name, device_dir, plan_layout_rewrites,
    translate_steps, write_atomic,
};
use crate::graph::Model;
use crate::graph::fusion::fuse;
use crate::graph::ir::Graph;
use crate::graph::kernels::{KernelDag, kernel_dags};
use crate::graph::memory::MemoryPlan;
use crate::graph::onnx::{ImportOptions, encode, export, import_bytes};
use crate::measure::Task;
use crate::runtime::DeviceKey;
use crate::schedule::{State, Step};

use super::error::ModelArtifactError;
use super::format::{
    DeviceRef, FileRef, GRAPH_FILE, MODEL_FILE, MODEL_FORMAT, MemorySummary, ModelArtifact,
    SourceRef, TaskEntry, TaskSchedule, model_dir, sha256_hex,
};

/// Records of a workload looked at for one that replays.
const CANDIDATES: usize = 64;

/// What `deploy_model` does.
#[derive(Clone, Debug, Default)]
pub struct ModelDeployOptions {
    /// The schedules root (its `<device>/` folder is written).
    pub out: PathBuf,
    /// The shapes of the model's dynamic inputs.
    pub import: ImportOptions,
    /// Replace an existing artifact even when it is faster.
    pub force: bool,
}

/// What happened to one task.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskOutcome {
    /// Its artifact was written.
    Written(String),
    /// Its artifact already held this schedule.
    Unchanged(String),
    /// The existing artifact is faster than the database's best and was kept.
    KeptFaster(String),
    /// The default schedule, and why.
    Default(String),
}

/// What `deploy_model` did.
#[derive(Clone, Debug)]
pub struct ModelDeployReport {
    /// The model artifact's folder.
    pub dir: PathBuf,
    /// The model artifact written.
    pub artifact: ModelArtifact,
    /// Per task (as in `artifact.tasks`), what happened.
    pub outcomes: Vec<TaskOutcome>,
}

/// Deploys the model at `model` for `device` from `db` into `options.out`.
///
/// Nothing is written when the model cannot be imported, passed, lowered,
/// exported or read back the same; when `out` is not a folder; or when the
/// device folder's index belongs to another device.
pub fn deploy_model(
    db: &TuningDb,
    device: &DeviceKey,
    model: &Path,
    options: &ModelDeployOptions,
) -> Result<ModelDeployReport, ModelArtifactError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ModelArtifactError::Io { path, source }
    };
    if options.out.exists() && !options.out.is_dir() {
        return Err(ModelArtifactError::OutNotADir(options.out.clone()));
    }
    let source_bytes = std::fs::read(model).map_err(io(model))?;
    let loaded = Model::load_with(model, &options.import)?;
    let (graph, reports) = loaded.optimized()?;
    let graph_bytes = encode(&export(&graph)?);
    let back = import_bytes(
        Path::new(GRAPH_FILE),
        &graph_bytes,
        &ImportOptions::default(),
    )?;
    same_graph(&graph, &back).map_err(ModelArtifactError::RoundTrip)?;
    let kernels = kernel_dags(&back)?;
    // The plan the executor makes: over the fused graph.
    let fused = fuse(&back, &[])?;
    let plan = MemoryPlan::new(&fused.graph, &fused.lowered, &[])?;

    let dir = device_dir(&options.out, device);
    let index_path = dir.join(INDEX_FILE);
    let mut index = if index_path.is_file() {
        Index::read(&index_path)?
    } else {
        Index::new(device)
    };
    if index.device_key != device.hash {
        return Err(ModelArtifactError::BadFile {
            path: index_path,
            reason: format!(
                "it is the index of device {}, not of {device}; remove the folder or deploy into another --out",
                index.device
            ),
        });
    }
    let mut to_write: Vec<(PathBuf, Artifact)> = Vec::new();
    let mut tasks = Vec::with_capacity(kernels.len());
    let mut outcomes = Vec::with_capacity(kernels.len());
    for kernel in &kernels {
        let (outcome, steps) = match best_artifact(db, device, kernel)? {
            Err(reason) => (TaskOutcome::Default(reason), None),
            Ok((artifact, steps)) => {
                let file = artifact_file_name(&artifact.workload);
                let path = dir.join(&file);
                let existing = Artifact::read(&path)
                    .ok()
                    .filter(|a| a.workload.key == artifact.workload.key);
                match existing {
                    Some(old) if old.steps == artifact.steps => {
                        (TaskOutcome::Unchanged(file), Some(steps))
                    }
                    Some(old) if old.faster_than(&artifact) && !options.force => {
                        let steps = steps_on(kernel, &old).unwrap_or(steps);
                        (TaskOutcome::KeptFaster(file), Some(steps))
                    }
                    _ => {
                        to_write.push((path, artifact));
                        (TaskOutcome::Written(file), Some(steps))
                    }
                }
            }
        };
        let prepacked: Vec<String> = steps
            .map(|s| plan_layout_rewrites(&kernel.dag, &s))
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.input)
            .filter(|i| kernel.constant_inputs.contains(i))
            .collect();
        tasks.push(TaskEntry {
            workload_key: kernel.key.hash.clone(),
            readable: kernel.key.readable.clone(),
            nodes: kernel.nodes.clone(),
            schedule: match &outcome {
                TaskOutcome::Default(why) => TaskSchedule::Default(why.clone()),
                TaskOutcome::Written(f)
                | TaskOutcome::Unchanged(f)
                | TaskOutcome::KeptFaster(f) => TaskSchedule::Artifact(f.clone()),
            },
            constant_inputs: kernel.constant_inputs.clone(),
            prepacked,
        });
        outcomes.push(outcome);
    }
    let artifact = ModelArtifact {
        format: MODEL_FORMAT,
        tessera_version: env!("CARGO_PKG_VERSION").to_string(),
        device: DeviceRef {
            key: device.hash.clone(),
            readable: device.readable.clone(),
        },
        source: SourceRef {
            file: model
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            sha256: sha256_hex(&source_bytes),
        },
        passes: reports.iter().map(|r| r.pass.to_string()).collect(),
        graph: FileRef {
            file: GRAPH_FILE.to_string(),
            sha256: sha256_hex(&graph_bytes),
        },
        tasks,
        memory: MemorySummary {
            arena_bytes: plan.arena_bytes,
            all_intermediate_bytes: plan.all_intermediate_bytes,
            lower_bound_bytes: plan.lower_bound_bytes,
        },
    };
    let model_folder = model_dir(&options.out, device, model);
    let model_json = pretty(&artifact, &model_folder.join(MODEL_FILE))?;
    let mut rendered: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for (path, a) in &to_write {
        rendered.push((path.clone(), pretty(a, path)?));
        index.upsert(IndexEntry {
            workload_key: a.workload.key.clone(),
            readable: a.workload.readable.clone(),
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            gflops: a.gflops,
        });
    }
    let index_bytes = pretty(&index, &index_path)?;

    // Everything is rendered: write the artifacts, then the index, then
    // swap the model folder in whole.
    let models = model_folder.parent().unwrap_or(&dir).to_path_buf();
    std::fs::create_dir_all(&models).map_err(io(&models))?;
    let mut created: Vec<PathBuf> = Vec::new();
    let written = (|| -> Result<(), ModelArtifactError> {
        for (path, bytes) in &rendered {
            if !path.exists() {
                created.push(path.clone());
            }
            write_atomic(path, bytes)?;
        }
        write_atomic(&index_path, &index_bytes)?;
        Ok(())
    })();
    if let Err(e) = written {
        for path in &created {
            let _ = std::fs::remove_file(path);
        }
        return Err(e);
    }
    swap_in(
        &model_folder,
        &[(GRAPH_FILE, &graph_bytes), (MODEL_FILE, &model_json)],
    )?;
    Ok(ModelDeployReport {
        dir: model_folder,
        artifact,
        outcomes,
    })
}

/// `value` as pretty JSON with a final newline (`path`: for the error).
fn pretty<T: serde::Serialize>(value: &T, path: &Path) -> Result<Vec<u8>, ModelArtifactError> {
    serde_json::to_string_pretty(value)
        .map(|t| format!("{t}\n").into_bytes())
        .map_err(|e| ModelArtifactError::BadFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

/// Writes `files` into a staging folder beside `folder`, then replaces
/// `folder` with it: a reader sees the old artifact or the new one.
fn swap_in(folder: &Path, files: &[(&str, &[u8])]) -> Result<(), ModelArtifactError> {
    let name = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let sibling =
        |what: &str| folder.with_file_name(format!(".{name}.{what}-{}", std::process::id()));
    let (staging, old) = (sibling("staging"), sibling("old"));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ModelArtifactError::Io { path, source }
    };
    let staged = (|| -> Result<(), ModelArtifactError> {
        std::fs::create_dir_all(&staging).map_err(io(&staging))?;
        for (file, bytes) in files {
            let path = staging.join(file);
            std::fs::write(&path, bytes).map_err(io(&path))?;
        }
        if folder.exists() {
            std::fs::rename(folder, &old).map_err(io(folder))?;
        }
        std::fs::rename(&staging, folder).map_err(io(folder))
    })();
    if let Err(e) = staged {
        if old.exists() && !folder.exists() {
            let _ = std::fs::rename(&old, folder);
        }
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// The steps of `artifact` as they apply to `kernel`'s DAG (recorded on
/// the registry operator's DAG, whose names may differ), if they do.
fn steps_on(kernel: &KernelDag, artifact: &Artifact) -> Option<Vec<Step>> {
    replayable(
        kernel,
        &artifact.workload.op,
        &artifact.workload.shape,
        &artifact.steps,
    )
}

fn replayable(
    kernel: &KernelDag,
    op: &Option<String>,
    shape: &Option<String>,
    steps: &[Step],
) -> Option<Vec<Step>> {
    if State::replay(&kernel.dag, steps).is_ok() {
        return Some(steps.to_vec());
    }
    let (op, shape) = op.as_deref().zip(shape.as_deref())?;
    let task = Task::from_registry(op, shape).ok()?;
    let translated = translate_steps(task.dag(), &kernel.dag, steps)?;
    State::replay(&kernel.dag, &translated).ok()?;
    Some(translated)
}

/// The artifact of the best record of `kernel`'s workload on `device` whose
/// steps replay on its DAG (with those steps in the DAG's names), or why
/// it keeps the default schedule. Looked up by workload key hash, so tasks
/// that are no registry operator work alike.
fn best_artifact(
    db: &TuningDb,
    device: &DeviceKey,
    kernel: &KernelDag,
) -> Result<Result<(Artifact, Vec<Step>), String>, ModelArtifactError> {
    let records: Vec<TuningRecord> = db.best(&kernel.key.hash, &device.hash, CANDIDATES)?;
    if records.is_empty() {
        return Ok(Err(format!(
            "not tuned on this device ({device}): no successful record in the database"
        )));
    }
    let mut first_failure: Option<String> = None;
    for record in &records {
        let Some(steps) = replayable(
            kernel,
            &record.workload.op,
            &record.workload.shape,
            &record.steps,
        ) else {
            first_failure.get_or_insert_with(|| record.fingerprint());
            continue;
        };
        let trials = db.records(&kernel.key.hash, &device.hash)?.len();
        return Ok(match Artifact::from_record(record, trials) {
            Some(artifact) => Ok((artifact, steps)),
            None => Err("its best record has no measured cost".to_string()),
        });
    }
    Ok(Err(format!(
        "none of its {} best records replays on its DAG (first: {}); tune it again",
        records.len(),
        first_failure.unwrap_or_default()
    )))
}

/// Whether `a` and `b` are the same model: inputs, outputs, nodes, the
/// constants and tensor types they use. The reason when not.
fn same_graph(a: &Graph, b: &Graph) -> Result<(), String> {
    if a.inputs != b.inputs || a.outputs != b.outputs {
        return Err(format!(
            "inputs/outputs {:?}/{:?} came back as {:?}/{:?}",
            a.inputs, a.outputs, b.inputs, b.outputs
        ));
    }
    if a.nodes.len() != b.nodes.len() {
        return Err(format!(
            "{} nodes came back as {}",
            a.nodes.len(),
            b.nodes.len()
        ));
    }
    if let Some((x, y)) = a.nodes.iter().zip(&b.nodes).find(|(x, y)| x != y) {
        return Err(format!("node {x:?} came back as {y:?}"));
    }
    let used: BTreeSet<&String> = a
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter().chain(&n.outputs))
        .chain(&a.inputs)
        .chain(&a.outputs)
        .collect();
    let constants = |g: &Graph| -> HashSet<String> {
        g.constants
            .keys()
            .filter(|k| used.contains(k))
            .cloned()
            .collect()
    };
    if constants(a) != constants(b) {
        return Err("the set of constants differs".to_string());
    }
    for name in used {
        if a.info(name) != b.info(name) {
            return Err(format!(
                "tensor '{name}' is {:?}, came back as {:?}",
                a.info(name),
                b.info(name)
            ));
        }
        if a.constant(name) != b.constant(name) {
            return Err(format!("the value of constant '{name}' differs"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ir::{BinaryOp, Node, Op, TensorInfo};
    use crate::te::HostTensor;

    fn graph(w: Vec<f32>) -> Graph {
        let mut g = Graph {
            name: "g".into(),
            opset: 13,
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            ..Graph::default()
        };
        for t in ["x", "w", "y"] {
            g.tensors.insert(t.into(), TensorInfo::f32(&[2]));
        }
        g.constants
            .insert("w".into(), HostTensor::from_f32(&[2], w).expect("2 values"));
        g.nodes.push(Node {
            name: "add".into(),
            op: Op::Binary(BinaryOp::Add),
            inputs: vec!["x".into(), "w".into()],
            outputs: vec!["y".into()],
        });
        g
    }

    #[test]
    fn the_round_trip_guard_sees_a_changed_weight_shape_or_node() {
        assert_eq!(
            same_graph(&graph(vec![1.0, 2.0]), &graph(vec![1.0, 2.0])),
            Ok(())
        );
        let changed = same_graph(&graph(vec![1.0, 2.0]), &graph(vec![1.0, 3.0]));
        assert!(changed.is_err_and(|e| e.contains("'w'")));
        let mut other = graph(vec![1.0, 2.0]);
        other.tensors.insert("y".into(), TensorInfo::f32(&[1, 2]));
        let shape = same_graph(&graph(vec![1.0, 2.0]), &other);
        assert!(shape.is_err_and(|e| e.contains("'y'")));
        let mut other = graph(vec![1.0, 2.0]);
        other.nodes[0].op = Op::Binary(BinaryOp::Mul);
        assert!(same_graph(&graph(vec![1.0, 2.0]), &other).is_err());
    }
}
