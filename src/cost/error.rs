//! Errors of the cost models.

use std::path::PathBuf;

use thiserror::Error;

/// A cost model could not train, predict, save or load.
#[derive(Debug, Error)]
pub enum CostError {
    /// A candidate could not be lowered for feature extraction.
    #[error("cannot extract features: {0}")]
    Features(String),
    /// The learner failed.
    #[error("{learner}: {message}")]
    Learner {
        /// Which learner.
        learner: &'static str,
        /// What it said.
        message: String,
    },
    /// A model file could not be read or written.
    #[error("cost model file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A model file that is not one, or was made for other features.
    #[error("cost model file {path}: {reason}")]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// No learner of this name is built in (e.g. `xgboost` without the feature).
    #[error("unknown cost model '{name}' (available: {available})")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The names this build has.
        available: String,
    },
    /// Nothing to train on.
    #[error("no usable records to train {0} on (measure or tune something first)")]
    NoRecords(String),
}
