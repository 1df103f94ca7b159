//! Errors of deployment: what failed, where, and how to fix it.

use std::path::PathBuf;

use crate::codegen::CodegenError;
use crate::db::DbError;
use crate::schedule::StepError;
use crate::tir::LowerError;

/// Why a deployment step failed.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// Reading or writing a file or folder failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The schedules folder does not exist.
    #[error(
        "no schedules folder at {0} (run `tessera deploy --out {0}` after tuning, or pass the folder that holds the <device>/ folders)"
    )]
    NoLibrary(PathBuf),
    /// The tuning database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// An artifact or index file is not what tessera writes.
    #[error("{path}: {reason}")]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A workload selector named nothing in the database.
    #[error("--workload '{0}' names no workload tuned on this device (see `tessera cache list`)")]
    UnknownWorkload(String),
    /// A schedule does not replay on its DAG.
    #[error("schedule does not apply: {0}")]
    Replay(#[from] StepError),
    /// Lowering failed.
    #[error("lowering failed: {0}")]
    Lower(#[from] LowerError),
    /// Compiling failed.
    #[error("compiling failed: {0}")]
    Codegen(#[from] CodegenError),
    /// Ahead-of-time compilation failed.
    #[error(transparent)]
    Aot(#[from] super::aot::AotError),
    /// The measurer could not work (verifying artifacts needs it).
    #[error(transparent)]
    Measure(#[from] crate::measure::MeasureError),
}

impl DeployError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> DeployError {
        let path = path.into();
        move |source| DeployError::Io { path, source }
    }
}
