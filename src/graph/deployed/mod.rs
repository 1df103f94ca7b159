//! Deployed models: `tessera deploy m.onnx` writes the model's tuned
//! kernels as ordinary artifacts of `schedules/<device>/` and a model
//! artifact (`models/<stem>/model.json` + `graph.onnx`, the graph after the
//! passes); [`Model::load_deployed`](crate::graph::Model::load_deployed)
//! loads it back without passes, search or database.

mod error;
mod format;
mod load;
mod write;

pub use error::ModelArtifactError;
pub use format::{
    DeviceRef, FileRef, GRAPH_FILE, MODEL_FILE, MODEL_FORMAT, MODELS_DIR, MemorySummary,
    ModelArtifact, SourceRef, TaskEntry, TaskSchedule, model_dir, model_stem, sha256_hex,
};
pub use load::{DeployedModel, ModelOrigin};
pub use write::{ModelDeployOptions, ModelDeployReport, TaskOutcome, deploy_model};
