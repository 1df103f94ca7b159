//! Measuring a cost model's quality on held-out records: pairwise ranking
//! accuracy and top-k recall, per workload.

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::dataset::TrainingSet;
use super::error::CostError;
use super::features::FEATURE_LEN;
use super::records::WorkloadRows;
use super::registry::new_learner;

/// Fraction of pairs (within one group, with different labels) that
/// `scores` orders like `labels`; ties in score count half.
pub fn pairwise_accuracy(scores: &[f32], labels: &[f32]) -> f64 {
    let (mut right, mut total) = (0.0, 0.0);
    for i in 0..labels.len() {
        for j in i + 1..labels.len() {
            if labels[i] == labels[j] {
                continue;
            }
            total += 1.0;
            let agree = (scores[i] - scores[j]) * (labels[i] - labels[j]);
            right += if agree > 0.0 {
                1.0
            } else if agree == 0.0 {
                0.5
            } else {
                0.0
            };
        }
    }
    if total == 0.0 {
        f64::NAN
    } else {
        right / total
    }
}

/// Indices of the `k` largest values (ties broken by index).
fn top(values: &[f32], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    order.truncate(k);
    order
}

/// The fraction of the true top `k` (by label) found in the predicted top
/// `within` (by score).
pub fn top_k_recall(scores: &[f32], labels: &[f32], k: usize, within: usize) -> f64 {
    let truth = top(labels, k);
    if truth.is_empty() {
        return f64::NAN;
    }
    let predicted = top(scores, within);
    truth.iter().filter(|i| predicted.contains(i)).count() as f64 / truth.len() as f64
}

/// Quality of one model on one workload's held-out records.
#[derive(Clone, Debug)]
pub struct WorkloadScore {
    /// The workload's readable form.
    pub workload: String,
    /// Records trained on (all workloads) and tested on (this one).
    pub train_rows: usize,
    /// Held-out records of this workload.
    pub test_rows: usize,
    /// Pairwise ranking accuracy on the held-out records.
    pub pairwise: f64,
    /// Recall of the true top 10 in the predicted top 50.
    pub top10_in_50: f64,
}

/// Quality of one model over every workload.
#[derive(Clone, Debug)]
pub struct ModelScore {
    /// The learner (or `random`).
    pub model: String,
    /// Seconds to fit on the training records.
    pub fit_secs: f64,
    /// Per workload.
    pub workloads: Vec<WorkloadScore>,
}

/// Splits every workload's records (deterministically, `test_fraction`
/// held out), trains each learner of `models` on the training part of all
/// workloads and scores it on each workload's held-out part. `random` is
/// the baseline of uniformly random scores.
pub fn evaluate(
    data: &[WorkloadRows],
    models: &[&str],
    test_fraction: f64,
    seed: u64,
) -> Result<Vec<ModelScore>, CostError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut train = TrainingSet::new(FEATURE_LEN);
    let mut tests = Vec::new();
    for w in data {
        let held: Vec<bool> = (0..w.rows.len())
            .map(|_| rng.random_bool(test_fraction))
            .collect();
        let pick = |test: bool| -> (Vec<Vec<f32>>, Vec<Option<f64>>) {
            let idx: Vec<usize> = (0..w.rows.len()).filter(|&i| held[i] == test).collect();
            (
                idx.iter().map(|&i| w.rows[i].clone()).collect(),
                idx.iter().map(|&i| w.costs[i]).collect(),
            )
        };
        let (rows, costs) = pick(false);
        train.push_group(&rows, &costs);
        let (rows, costs) = pick(true);
        let mut test = TrainingSet::new(FEATURE_LEN);
        test.push_group(&rows, &costs);
        tests.push((w.readable.clone(), test));
    }
    let mut out = Vec::new();
    for &name in models {
        let start = Instant::now();
        let learner = if name == "random" {
            None
        } else {
            let mut l = new_learner(name)?;
            l.fit(&train)?;
            Some(l)
        };
        let fit_secs = start.elapsed().as_secs_f64();
        let mut workloads = Vec::new();
        for (workload, test) in &tests {
            let scores = match &learner {
                Some(l) => l.predict(&test.features, FEATURE_LEN)?,
                None => (0..test.len())
                    .map(|_| rng.random_range(0.0..1.0))
                    .collect(),
            };
            workloads.push(WorkloadScore {
                workload: workload.clone(),
                train_rows: train.len(),
                test_rows: test.len(),
                pairwise: pairwise_accuracy(&scores, &test.labels),
                top10_in_50: top_k_recall(&scores, &test.labels, 10, 50),
            });
        }
        out.push(ModelScore {
            model: name.to_string(),
            fit_secs,
            workloads,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_on_known_orders() {
        let labels = [0.1, 0.5, 1.0, 0.0];
        assert_eq!(pairwise_accuracy(&[1.0, 5.0, 10.0, 0.0], &labels), 1.0);
        assert_eq!(pairwise_accuracy(&[10.0, 5.0, 1.0, 20.0], &labels), 0.0);
        assert_eq!(pairwise_accuracy(&[1.0, 1.0, 1.0, 1.0], &labels), 0.5);
        assert_eq!(top_k_recall(&[0.0, 1.0, 2.0, 3.0], &labels, 2, 2), 0.5);
        assert_eq!(top_k_recall(&[0.0, 1.0, 2.0, 3.0], &labels, 2, 3), 1.0);
    }
}
