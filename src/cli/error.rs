//! Errors the commands report (one line; exit code 2, 1 for a lookup
//! without match, 3 for a failed check).

use std::path::PathBuf;

use thiserror::Error;

use crate::ops::OpError;
use crate::schedule::{StepError, StepParseError};
use crate::tir::LowerError;

/// A command that failed on its input.
#[derive(Debug, Error)]
pub enum CliError {
    /// Unknown op or bad shape.
    #[error(transparent)]
    Op(#[from] OpError),
    /// A file that cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A schedule file that does not parse.
    #[error("schedule {path}: {source}")]
    ScheduleParse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: StepParseError,
    },
    /// A step that does not apply to the op.
    #[error("schedule {path}: {source}")]
    ScheduleApply {
        /// The file.
        path: PathBuf,
        /// Which step and why.
        source: StepError,
    },
    /// A model could not be read, compiled or run.
    #[error(transparent)]
    Graph(#[from] crate::graph::GraphError),
    /// A model artifact could not be deployed.
    #[error(transparent)]
    ModelArtifact(#[from] crate::graph::deployed::ModelArtifactError),
    /// Lowering failed.
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// Code generation failed.
    #[error(transparent)]
    Codegen(#[from] crate::codegen::CodegenError),
    /// A compiled kernel could not be run.
    #[error(transparent)]
    Kernel(#[from] crate::codegen::KernelError),
    /// Measurement could not run.
    #[error(transparent)]
    Measure(#[from] crate::measure::MeasureError),
    /// The tuning database failed.
    #[error(transparent)]
    Db(#[from] crate::db::DbError),
    /// Tuning failed.
    #[error(transparent)]
    Tune(#[from] crate::search::TuneError),
    /// A suite file that cannot be used (names the file and the workload).
    #[error(transparent)]
    Suite(#[from] crate::search::SuiteError),
    /// A tuning-curve plot that cannot be written.
    #[error(transparent)]
    Plot(#[from] crate::search::PlotError),
    /// A cost model failed.
    #[error(transparent)]
    Cost(#[from] crate::cost::CostError),
    /// The CI job failed.
    #[error(transparent)]
    Ci(#[from] crate::ci::CiError),
    /// A lookup found no exact match (exit code 1); the text says what exists instead.
    #[error("{0}")]
    NotFound(String),
    /// A check the command exists for failed (exit code 3): artifacts that
    /// do not verify, workloads that regressed. `report` is printed to
    /// stdout as on success, `summary` as the error line.
    #[error("{summary}")]
    CheckFailed {
        /// The command's full output.
        report: String,
        /// One line: what failed.
        summary: String,
    },
    /// Options that do not make sense together.
    #[error("{0}")]
    Usage(String),
    /// A benchmark failed (`tessera bench`).
    #[error(transparent)]
    Bench(#[from] crate::bench::BenchError),
}
