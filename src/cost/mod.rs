//! Cost models: program features of lowered candidates, the [`CostModel`]
//! trait the search ranks with, learned models behind a [`Learner`]
//! interface (XGBoost with the `xgboost` feature, a pure-Rust tree ensemble
//! otherwise), and a random baseline.

mod dataset;
mod error;
pub mod eval;
pub mod features;
mod file;
mod forest;
mod gbdt;
mod learner;
mod learner_support;
mod model;
mod records;
mod registry;
#[cfg(test)]
mod test_support;
mod train;
#[cfg(feature = "xgboost")]
mod xgb;

pub use self::gbdt::{GBDT_MAX_ROWS, GbdtConfig, GbdtLearner};
pub use dataset::TrainingSet;
pub use error::CostError;
pub use file::{ModelHeader, load_model, save_model};
pub use forest::{FOREST_MAX_ROWS, ForestConfig, ForestLearner};
pub use learner::Learner;
pub use model::{
    CostModel, LearnedModel, MAX_TRAINING_ROWS, MIN_RECORDS_OF_OWN, RandomModel, feature_rows,
};
pub use records::{Skipped, WorkloadRows, workload_rows};
pub use registry::DEFAULT_LEARNER;
pub use registry::{learner_from_bytes, learner_names, new_learner};
pub use train::{TrainSummary, train_model_file};
#[cfg(feature = "xgboost")]
pub use xgb::{XgbConfig, XgbLearner, XgbObjective, XgbTreeMethod};
