//! Errors of the measurement machinery itself. A bad candidate is never one
//! of these: it is a [`MeasureResult`](super::MeasureResult) with an error kind.

use std::path::PathBuf;

use thiserror::Error;

use crate::ops::OpError;
use crate::te::InterpError;

/// The measurer could not do its job.
#[derive(Debug, Error)]
pub enum MeasureError {
    /// The task's operator or shape is not valid.
    #[error(transparent)]
    Task(#[from] OpError),
    /// A worker process could not be started or did not answer as one.
    #[error(
        "could not start a measurement worker '{program}': {reason}; \
         the worker is the tessera binary run as `tessera measure-worker` \
         (set TESSERA_WORKER or MeasureOptions::worker_program to its path)"
    )]
    WorkerStart {
        /// The program that was run.
        program: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A worker refused the task (e.g. its build of the DAG has another key:
    /// the worker is a different tessera version).
    #[error("a measurement worker refused task {task}: {reason}")]
    Setup {
        /// The task's readable key.
        task: String,
        /// The worker's answer.
        reason: String,
    },
    /// The reference interpreter failed on the task's inputs.
    #[error("the reference interpreter failed: {0}")]
    Interp(#[from] InterpError),
    /// The trusted result for a large task could not be made or checked.
    #[error("no trusted result for task {task}: {reason}")]
    Reference {
        /// The task's readable key.
        task: String,
        /// What went wrong.
        reason: String,
    },
    /// A DAG task's spec does not rebuild into its DAG.
    #[error("cannot build the task's DAG from its spec: {0}")]
    Spec(String),
    /// Invalid measurement options.
    #[error("invalid measurement option: {0}")]
    Options(String),
}
