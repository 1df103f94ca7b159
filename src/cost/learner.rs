//! The interface every learned model implements: fit rows to labels,
//! predict scores, serialise. [`LearnedModel`](super::LearnedModel) turns a
//! learner into a [`CostModel`](super::CostModel).

use super::dataset::TrainingSet;
use super::error::CostError;

/// A regression or ranking learner over fixed-length feature rows.
pub trait Learner: Send {
    /// The learner's name in model files and on the command line.
    fn name(&self) -> &'static str;

    /// Fits the learner to `data` from scratch (callers retrain on all the
    /// data they have as records arrive).
    fn fit(&mut self, data: &TrainingSet) -> Result<(), CostError>;

    /// Scores `rows` (row-major, `n_cols` each); higher means faster. An
    /// unfitted learner returns zeros.
    fn predict(&self, rows: &[f32], n_cols: usize) -> Result<Vec<f32>, CostError>;

    /// The fitted state as bytes (for model files).
    fn to_bytes(&self) -> Result<Vec<u8>, CostError>;

    /// Restores a learner from [`to_bytes`](Self::to_bytes).
    fn from_bytes(bytes: &[u8]) -> Result<Self, CostError>
    where
        Self: Sized;
}
