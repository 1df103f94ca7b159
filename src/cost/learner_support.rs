//! What the pure-Rust tree learners ([`ForestLearner`] and [`GbdtLearner`])
//! share: their errors, the checked and subsampled training rows, the
//! checks and bookkeeping around a prediction, feature cleaning, panic
//! containment and the JSON envelope of their model bytes.
//!
//! [`ForestLearner`]: super::ForestLearner
//! [`GbdtLearner`]: super::GbdtLearner

use std::borrow::Cow;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::dataset::TrainingSet;
use super::error::CostError;

/// The error of learner `learner` saying `message`.
pub(crate) fn learner_error(learner: &'static str, message: impl Into<String>) -> CostError {
    CostError::Learner {
        learner,
        message: message.into(),
    }
}

/// Runs `f`, turning a panic inside the learning crate (both crates panic on
/// some malformed inputs or model files instead of returning errors) into a
/// [`CostError::Learner`].
pub(crate) fn guarded<T>(learner: &'static str, f: impl FnOnce() -> T) -> Result<T, CostError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        learner_error(learner, format!("panicked: {what}"))
    })
}

/// The rows learner `learner` fits on `data` with: `data` checked (see
/// [`check_training_set`]) and cut to about `max_rows` rows by
/// [`TrainingSet::subsample`].
pub(crate) fn training_rows<'a>(
    learner: &'static str,
    data: &'a TrainingSet,
    max_rows: usize,
) -> Result<Cow<'a, TrainingSet>, CostError> {
    check_training_set(learner, data)?;
    Ok(data.subsample(max_rows))
}

/// Checks that `data` is something a learner can fit: rows, columns,
/// consistent lengths, finite labels.
fn check_training_set(learner: &'static str, data: &TrainingSet) -> Result<(), CostError> {
    if data.is_empty() || data.n_cols == 0 {
        return Err(learner_error(learner, "no training rows or no columns"));
    }
    if data.features.len() != data.len() * data.n_cols || data.groups.len() != data.len() {
        return Err(learner_error(
            learner,
            format!(
                "inconsistent training set: {} features, {} labels, {} groups, {} columns",
                data.features.len(),
                data.len(),
                data.groups.len(),
                data.n_cols
            ),
        ));
    }
    if data.labels.iter().any(|l| !l.is_finite()) {
        return Err(learner_error(learner, "a training label is not finite"));
    }
    Ok(())
}

/// Predicts `rows` (row-major, `n_cols` each) for learner `learner`:
/// checks that they are whole rows, returns zeros while `fitted` is `None`,
/// checks that the rows have the `(model, columns)` the model was trained
/// on, and otherwise (with at least one row) returns `score(model, n_rows)`,
/// checking that it scored every row.
pub(crate) fn predict_rows<M>(
    learner: &'static str,
    fitted: Option<(&M, usize)>,
    rows: &[f32],
    n_cols: usize,
    score: impl FnOnce(&M, usize) -> Result<Vec<f32>, CostError>,
) -> Result<Vec<f32>, CostError> {
    let n_rows = count_rows(learner, rows, n_cols)?;
    let Some((model, model_cols)) = fitted else {
        return Ok(vec![0.0; n_rows]);
    };
    if n_cols != model_cols {
        return Err(learner_error(
            learner,
            format!("rows have {n_cols} columns, the model was trained on {model_cols}"),
        ));
    }
    if n_rows == 0 {
        return Ok(Vec::new());
    }
    let scores = score(model, n_rows)?;
    if scores.len() != n_rows {
        return Err(learner_error(
            learner,
            format!("{} scores for {n_rows} rows", scores.len()),
        ));
    }
    Ok(scores)
}

/// Rows in `rows` of `n_cols` columns each, or an error if it does not divide.
fn count_rows(learner: &'static str, rows: &[f32], n_cols: usize) -> Result<usize, CostError> {
    match rows.len().checked_div(n_cols) {
        Some(n) if n * n_cols == rows.len() => Ok(n),
        None if rows.is_empty() => Ok(0),
        _ => Err(learner_error(
            learner,
            format!(
                "{} values are not whole rows of {n_cols} columns",
                rows.len()
            ),
        )),
    }
}

/// Largest magnitude a feature keeps: bigger ones (and infinities) are
/// clamped, NaN becomes 0. Keeps split thresholds finite (so model files
/// stay valid JSON) and clear of `f32::MIN`, which `gbdt` reads as "missing".
const FEATURE_LIMIT: f32 = 1e30;

/// `features` with NaN → 0 and values clamped to ±[`FEATURE_LIMIT`].
pub(crate) fn clean_features(features: &[f32]) -> Vec<f32> {
    features
        .iter()
        .map(|&v| {
            if v.is_nan() {
                0.0
            } else {
                v.clamp(-FEATURE_LIMIT, FEATURE_LIMIT)
            }
        })
        .collect()
}

/// The model bytes of a tree learner: JSON of the format version and the
/// fitted state (`null` while unfitted). JSON floats round-trip exactly.
#[derive(Serialize, Deserialize)]
struct Saved<M> {
    format: u32,
    /// `None` while unfitted.
    model: Option<M>,
}

/// The bytes of `model` (`None`: unfitted) in format `format`.
pub(crate) fn save_json<M: Serialize>(
    format: u32,
    model: Option<&M>,
) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&Saved { format, model })
}

/// The fitted state (`None`: unfitted) in bytes from [`save_json`], which
/// must be of format `format`, for learner `learner`.
pub(crate) fn load_json<M: DeserializeOwned>(
    learner: &'static str,
    format: u32,
    bytes: &[u8],
) -> Result<Option<M>, CostError> {
    let saved: Saved<M> = serde_json::from_slice(bytes)
        .map_err(|e| learner_error(learner, format!("not a {learner} model: {e}")))?;
    if saved.format != format {
        return Err(learner_error(
            learner,
            format!("model format {} (this build reads {format})", saved.format),
        ));
    }
    Ok(saved.model)
}
