//! Errors of the CI job: which step failed and why.

use std::path::PathBuf;

use thiserror::Error;

/// Why the CI job could not run to the end.
#[derive(Debug, Error)]
pub enum CiError {
    /// Options that do not make sense (no budget, an empty shard, …).
    #[error("{0}")]
    Usage(String),
    /// A file or folder could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The suite file or one of its workloads.
    #[error(transparent)]
    Suite(#[from] crate::search::SuiteError),
    /// The tuning database.
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
    /// Tuning.
    #[error(transparent)]
    Tune(#[from] crate::search::TuneError),
    /// Measurement could not run.
    #[error(transparent)]
    Measure(#[from] crate::measure::MeasureError),
    /// Deployment.
    #[error(transparent)]
    Deploy(#[from] crate::deploy::DeployError),
    /// The model (`--onnx`): import, passes, compiling, running.
    #[error(transparent)]
    Graph(#[from] crate::graph::GraphError),
    /// Deploying the model artifact (`--onnx`).
    #[error(transparent)]
    ModelArtifact(#[from] crate::graph::deployed::ModelArtifactError),
    /// Retraining the cost model.
    #[error(transparent)]
    Cost(#[from] crate::cost::CostError),
    /// Drawing the tuning curves.
    #[cfg(feature = "cli")]
    #[error(transparent)]
    Plot(#[from] crate::search::PlotError),
}

impl CiError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> CiError {
        let path = path.into();
        move |source| CiError::Io { path, source }
    }
}
