//! Errors of deploying a model artifact: each names the file at fault and
//! what would fix it.

use std::path::PathBuf;

use thiserror::Error;

use crate::graph::GraphError;

/// What went wrong deploying or reading a model artifact.
#[derive(Debug, Error)]
pub enum ModelArtifactError {
    /// The model could not be imported, passed, lowered or exported.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The tuning database failed.
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
    /// Writing the schedules folder failed.
    #[error(transparent)]
    Deploy(#[from] crate::deploy::DeployError),
    /// A file that cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file that is not what it should be.
    #[error("{path}: {reason}")]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, and how to fix it.
        reason: String,
    },
    /// `--out` names something that is not a folder.
    #[error("--out {0}: not a folder (give the schedules folder, e.g. `schedules`)")]
    OutNotADir(PathBuf),
    /// The graph after the passes does not come back the same from its
    /// ONNX bytes: deploying it would change the model.
    #[error(
        "the graph after the passes does not survive being written as ONNX and read back ({0}); please report this with the model"
    )]
    RoundTrip(String),
}
