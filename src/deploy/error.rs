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
    /// A constant named for the layout rewrite is not an input of the DAG.
    #[error(
        "'{name}' is not an input of {workload} (its inputs: {}); name only inputs as constants",
        inputs.join(", ")
    )]
    NotAnInput {
        /// The name given.
        name: String,
        /// The workload's label.
        workload: String,
        /// The DAG's input names.
        inputs: Vec<String>,
    },
    /// A constant input the schedule does not let be laid out ahead of time.
    #[error(
        "input '{input}' cannot be laid out ahead of time: {reason}; name only the inputs an artifact lists in its layout_rewrites (the schedule must read the input only through one cache_read copy)"
    )]
    NoLayoutRewrite {
        /// The input.
        input: String,
        /// Why not.
        reason: String,
    },
    /// A packer failed on the tensor given for its input.
    #[error("laying out input '{input}' ahead of time failed: {reason}")]
    Pack {
        /// The input.
        input: String,
        /// What failed (a shape or type mismatch names both).
        reason: String,
    },
    /// A layout that is not a permutation of a tensor's dimensions.
    #[error(
        "layout {layout:?} of {input} is not a permutation of its {rank} dimensions; use the layout of the artifact's layout_rewrites"
    )]
    BadLayout {
        /// The input (or tensor) it was meant for.
        input: String,
        /// The layout given.
        layout: Vec<usize>,
        /// The tensor's rank.
        rank: usize,
    },
    /// Inputs given to a prepacked kernel do not fit it.
    #[error("{0}; pass one tensor per input of the DAG, in argument order")]
    BadInputs(String),
    /// The layout rewrite produced something that does not check (a bug).
    #[error("the layout rewrite failed: {reason} (please report it)")]
    Rewrite {
        /// What failed.
        reason: String,
    },
    /// `TESSERA_VERIFY_WRONG_ANSWER` (a test hook) is not what it must be.
    #[error(
        "TESSERA_VERIFY_WRONG_ANSWER={0} is not a list of KIND:WORKLOAD (KIND plain or prepacked=RELATIVE_ERROR, separated by ';'); unset it"
    )]
    BadWrongAnswerHook(String),
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
