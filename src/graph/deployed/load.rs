//! Loading a deployed model: [`Model::load_deployed`] takes the graph after
//! the passes from `DIR/<this device>/models/<stem>/` when its `model.json`
//! was deployed from exactly the given `.onnx` (SHA-256), and otherwise says
//! why in one line and imports the `.onnx` as usual (the passes then run
//! when compiling). Either way the kernels come from the library of `DIR`
//! (tuned artifact or default with the reason), with weights laid out once
//! when asked.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::deploy::Library;
use crate::graph::error::GraphError;
use crate::graph::exec::{CompileOptions, CompiledModel, Model};
use crate::graph::onnx::ImportOptions;
use crate::runtime::host_device;

use super::format::{MODEL_FILE, MODELS_DIR, ModelArtifact, model_dir, model_stem, sha256_hex};

/// Where a deployed model's graph came from.
#[derive(Clone, Debug)]
pub enum ModelOrigin {
    /// The model artifact: the graph after the passes, no passes to run.
    Artifact {
        /// The artifact's folder.
        dir: PathBuf,
        /// Its `model.json`.
        artifact: Box<ModelArtifact>,
    },
    /// The `.onnx` itself, and why not the model artifact.
    Source {
        /// Why the model artifact was not used.
        reason: String,
    },
}

impl fmt::Display for ModelOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelOrigin::Artifact { dir, artifact } => write!(
                f,
                "model artifact {} (graph after the passes {}; no passes run)",
                dir.display(),
                artifact.passes.join(", ")
            ),
            ModelOrigin::Source { reason } => write!(
                f,
                "no model artifact used: {reason}; importing the .onnx and running the passes"
            ),
        }
    }
}

/// A model to run with a deployed library.
#[derive(Clone, Debug)]
pub struct DeployedModel {
    /// The graph: the artifact's (after the passes) or the source's.
    pub model: Model,
    /// Which, and why.
    pub origin: ModelOrigin,
}

impl DeployedModel {
    /// Whether the graph comes from the model artifact.
    pub fn from_artifact(&self) -> bool {
        matches!(self.origin, ModelOrigin::Artifact { .. })
    }

    /// Compiles every kernel through `library` (no search, no database),
    /// running the passes only when the graph is the source's; with
    /// `prepack`, constant inputs that tuned schedules read through one
    /// packing copy are laid out once here. `keep`: as
    /// [`CompileOptions::keep`].
    pub fn compile(
        &self,
        library: &Library,
        keep: Vec<String>,
        prepack: bool,
    ) -> Result<CompiledModel, GraphError> {
        self.model.compile(&CompileOptions {
            library: Some(library),
            db: None,
            keep,
            passes: !self.from_artifact(),
            fuse: true,
            prepack,
        })
    }
}

impl Model {
    /// The model `model` (an `.onnx` file) as deployed in the schedules
    /// folder `dir` for this machine (see [`DeployedModel`]).
    pub fn load_deployed(dir: &Path, model: &Path) -> Result<DeployedModel, GraphError> {
        Model::load_deployed_with(dir, model, &ImportOptions::default())
    }

    /// As [`load_deployed`](Model::load_deployed), with the shapes of
    /// dynamic inputs: a model artifact deployed for other shapes is not
    /// used.
    ///
    /// Errors: the `.onnx` cannot be read, or (when the artifact is not
    /// used) imported.
    pub fn load_deployed_with(
        dir: &Path,
        model: &Path,
        options: &ImportOptions,
    ) -> Result<DeployedModel, GraphError> {
        let bytes = std::fs::read(model).map_err(|source| GraphError::Read {
            path: model.to_path_buf(),
            source,
        })?;
        let folder = model_dir(dir, &host_device().key(), model);
        match from_artifact(dir, &folder, model, &bytes, options) {
            Ok((loaded, artifact)) => Ok(DeployedModel {
                model: loaded,
                origin: ModelOrigin::Artifact {
                    dir: folder,
                    artifact: Box::new(artifact),
                },
            }),
            Err(reason) => Ok(DeployedModel {
                model: Model::load_with(model, options)?,
                origin: ModelOrigin::Source { reason },
            }),
        }
    }
}

/// The artifact's graph, or why it cannot be used.
fn from_artifact(
    root: &Path,
    folder: &Path,
    model: &Path,
    bytes: &[u8],
    options: &ImportOptions,
) -> Result<(Model, ModelArtifact), String> {
    let redeploy = format!("redeploy with `tessera deploy {}`", model.display());
    let json = folder.join(MODEL_FILE);
    if !json.is_file() {
        let others = other_devices(root, &model_stem(model));
        let elsewhere = if others.is_empty() {
            String::new()
        } else {
            format!(" (it has one for: {})", others.join(", "))
        };
        return Err(format!(
            "{} has no model artifact of {} for this device ({}){elsewhere}",
            root.display(),
            model_stem(model),
            host_device().key()
        ));
    }
    let artifact = ModelArtifact::read(&json).map_err(|e| format!("{e}; {redeploy}"))?;
    let here = host_device().key();
    if artifact.device.key != here.hash {
        return Err(format!(
            "{} was deployed for device {}, not this one ({here}); {redeploy}",
            json.display(),
            artifact.device.readable
        ));
    }
    let sha = sha256_hex(bytes);
    if artifact.source.sha256 != sha {
        return Err(format!(
            "{} is not the file deployed as {} (SHA-256 {} here, {} deployed); {redeploy}",
            model.display(),
            artifact.source.file,
            &sha[..12],
            artifact
                .source
                .sha256
                .get(..12)
                .unwrap_or(&artifact.source.sha256)
        ));
    }
    let graph_path = folder.join(&artifact.graph.file);
    let graph_bytes = std::fs::read(&graph_path)
        .map_err(|e| format!("cannot read {}: {e}; {redeploy}", graph_path.display()))?;
    if sha256_hex(&graph_bytes) != artifact.graph.sha256 {
        return Err(format!(
            "{} does not have the SHA-256 {} records; {redeploy}",
            graph_path.display(),
            json.display()
        ));
    }
    let loaded = Model::load(&graph_path).map_err(|e| format!("{e}; {redeploy}"))?;
    for (input, shape) in &options.input_shapes {
        if loaded.graph().shape(input) != shape.as_slice() {
            return Err(format!(
                "it was deployed with input {input} of shape {:?}, not {shape:?}",
                loaded.graph().shape(input)
            ));
        }
    }
    Ok((loaded, artifact))
}

/// The device folders of `root` with a model artifact named `stem`.
fn other_devices(root: &Path, stem: &str) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.path()
                .join(MODELS_DIR)
                .join(stem)
                .join(MODEL_FILE)
                .is_file()
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found
}
