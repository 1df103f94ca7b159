//! The learners this build has, by name.

use super::error::CostError;
use super::forest::ForestLearner;
use super::gbdt::GbdtLearner;
use super::learner::Learner;
#[cfg(feature = "xgboost")]
use super::xgb::{XgbLearner, XgbObjective};

/// The learner `tessera cost-model train` and the tuner use unless told
/// otherwise: XGBoost with the pairwise-rank objective when built with the
/// `xgboost` feature (it ranked held-out records better than XGBoost's
/// regression objective: pairwise accuracy 0.776 vs 0.763), else the
/// random forest (0.787; gbdt 0.766). Measured with `tessera cost-model
/// eval` on 903 records of matmul, conv2d and softmax (docs/benchmarks.md).
#[cfg(feature = "xgboost")]
pub const DEFAULT_LEARNER: &str = "xgboost-rank";
/// See the `xgboost` variant.
#[cfg(not(feature = "xgboost"))]
pub const DEFAULT_LEARNER: &str = "forest";

/// Names of the learners this build has (`xgboost` and `xgboost-rank` only
/// with the cargo feature `xgboost`).
pub fn learner_names() -> Vec<&'static str> {
    let mut names = vec!["forest", "gbdt"];
    if cfg!(feature = "xgboost") {
        names.push("xgboost");
        names.push("xgboost-rank");
    }
    names
}

fn unknown(name: &str) -> CostError {
    CostError::UnknownModel {
        name: name.into(),
        available: learner_names().join(", "),
    }
}

/// A new, untrained learner called `name`.
pub fn new_learner(name: &str) -> Result<Box<dyn Learner>, CostError> {
    match name {
        "forest" => Ok(Box::new(ForestLearner::new())),
        "gbdt" => Ok(Box::new(GbdtLearner::new())),
        #[cfg(feature = "xgboost")]
        "xgboost" => Ok(Box::new(XgbLearner::new(XgbObjective::Regression))),
        #[cfg(feature = "xgboost")]
        "xgboost-rank" => Ok(Box::new(XgbLearner::new(XgbObjective::PairwiseRank))),
        _ => Err(unknown(name)),
    }
}

/// Restores the learner called `name` from its bytes.
pub fn learner_from_bytes(name: &str, bytes: &[u8]) -> Result<Box<dyn Learner>, CostError> {
    match name {
        "forest" => Ok(Box::new(ForestLearner::from_bytes(bytes)?)),
        "gbdt" => Ok(Box::new(GbdtLearner::from_bytes(bytes)?)),
        #[cfg(feature = "xgboost")]
        "xgboost" | "xgboost-rank" => Ok(Box::new(XgbLearner::from_named_bytes(name, bytes)?)),
        _ => Err(unknown(name)),
    }
}
