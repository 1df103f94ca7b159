//! Errors of a benchmark: which step failed and why (one line each).

use std::path::PathBuf;

use thiserror::Error;

use crate::deploy::DeployError;
use crate::schedule::StepError;

/// Why a workload could not be benched.
#[derive(Debug, Error)]
pub enum BenchError {
    /// Unknown op or bad shape.
    #[error(transparent)]
    Op(#[from] crate::ops::OpError),
    /// The workload's task could not be made.
    #[error(transparent)]
    Measure(#[from] crate::measure::MeasureError),
    /// A schedules folder that cannot be opened.
    #[error(transparent)]
    Deploy(#[from] DeployError),
    /// The tuning database failed.
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
    /// Steps (of a file or a record) that do not apply to the workload.
    #[error("schedule {path}: {source}")]
    ScheduleApply {
        /// The file the steps come from.
        path: PathBuf,
        /// Which step and why.
        source: StepError,
    },
    /// Constant inputs whose layout cannot be rewritten.
    #[error("--constants: {0}")]
    Constants(DeployError),
    /// The schedule with its constants laid out ahead of time does not replay.
    #[error("--constants: the rewritten schedule: {0}")]
    RewrittenSchedule(StepError),
    /// Lowering failed.
    #[error(transparent)]
    Lower(#[from] crate::tir::LowerError),
    /// Code generation failed.
    #[error(transparent)]
    Codegen(#[from] crate::codegen::CodegenError),
    /// A compiled kernel could not be run.
    #[error(transparent)]
    Kernel(#[from] crate::codegen::KernelError),
    /// The compiled schedule does not compute what the default one computes.
    #[error("verification failed: max relative error {error:.3e} exceeds {tolerance:.1e}")]
    Verification {
        /// The largest relative error.
        error: f64,
        /// The tolerance.
        tolerance: f64,
    },
    /// The machine's ceilings could not be measured.
    #[error(transparent)]
    Ceilings(#[from] crate::measure::ceilings::CeilingError),
    /// `--save-io`: a file or folder that cannot be written.
    #[error("--save-io: cannot write {path}: {source}")]
    SaveIo {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A suite file that cannot be used (names the file and the workload).
    #[error(transparent)]
    Suite(#[from] crate::search::SuiteError),
}
