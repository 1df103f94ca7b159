//! Training a model file from a tuning database: what `tessera cost-model
//! train` and the CI job's retrained model share.

use std::path::Path;
use std::time::Instant;

use super::dataset::TrainingSet;
use super::error::CostError;
use super::features::FEATURE_LEN;
use super::file::{ModelHeader, save_model};
use super::records::WorkloadRows;
use super::registry::new_learner;

/// What [`train_model_file`] trained.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainSummary {
    /// Rows (measured candidates) trained on.
    pub rows: usize,
    /// Readable keys of the workloads trained on.
    pub workloads: Vec<String>,
    /// Seconds the fit took.
    pub fit_secs: f64,
}

/// Trains `learner` on the rows of every workload in `data` (from
/// [`workload_rows`](super::workload_rows)) and writes the model to `out`,
/// whole or not at all. `device_name` and `made_with` go into the file's
/// header.
pub fn train_model_file(
    data: &[WorkloadRows],
    device_name: &str,
    learner: &str,
    made_with: &str,
    out: &Path,
) -> Result<TrainSummary, CostError> {
    if data.is_empty() {
        return Err(CostError::NoRecords(out.display().to_string()));
    }
    let mut set = TrainingSet::new(FEATURE_LEN);
    for w in data {
        set.push_group(&w.rows, &w.costs);
    }
    let mut model = new_learner(learner)?;
    let start = Instant::now();
    model.fit(&set)?;
    let fit_secs = start.elapsed().as_secs_f64();
    let header = ModelHeader {
        format: String::new(),
        learner: learner.to_string(),
        feature_version: 0,
        feature_len: 0,
        rows: set.len(),
        workloads: data.iter().map(|w| w.readable.clone()).collect(),
        device: device_name.to_string(),
        made_with: made_with.to_string(),
        compression: None,
    };
    save_model(out, &header, model.as_ref())?;
    Ok(TrainSummary {
        rows: set.len(),
        workloads: header.workloads,
        fit_secs,
    })
}
