//! Test helpers shared by the learners' unit tests: a synthetic ranking
//! problem with known structure, a held-out split and the ranking metric
//! the cost models are judged by.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::dataset::TrainingSet;

/// A synthetic training set of `rows` rows of `cols` uniform random features
/// in `[0, 1)`, split into `groups` contiguous groups of (nearly) equal size,
/// drawn from `seed`.
///
/// Each row gets a "cost" that depends only on columns 0, 1 and 2 (the rest
/// are noise), monotonically and nonlinearly:
/// `cost = g · exp(2.5·x0) · (1 + 3·x1²) / sqrt(0.25 + x2)`, where `g` is a
/// per-group scale that the labelling normalises away. Labels are then what
/// [`TrainingSet::push_group`] makes of the costs — normalised throughput,
/// best row of each group = 1 — exactly as for measured candidates.
///
/// Needs `cols >= 3` and `groups >= 1`.
pub fn synthetic(rows: usize, cols: usize, groups: usize, seed: u64) -> TrainingSet {
    assert!(cols >= 3, "synthetic data needs at least 3 columns");
    assert!(groups >= 1, "synthetic data needs at least 1 group");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut set = TrainingSet::new(cols);
    for g in 0..groups {
        let start = rows * g / groups;
        let end = rows * (g + 1) / groups;
        let scale = 1.0 + g as f64;
        let mut group_rows = Vec::with_capacity(end - start);
        let mut costs = Vec::with_capacity(end - start);
        for _ in start..end {
            let row: Vec<f32> = (0..cols).map(|_| rng.random_range(0.0f32..1.0)).collect();
            let (x0, x1, x2) = (f64::from(row[0]), f64::from(row[1]), f64::from(row[2]));
            let cost = scale * (2.5 * x0).exp() * (1.0 + 3.0 * x1 * x1) / (0.25 + x2).sqrt();
            group_rows.push(row);
            costs.push(Some(cost));
        }
        set.push_group(&group_rows, &costs);
    }
    set
}

/// Splits `set` into (training, held-out): every `every`-th row (index
/// `i % every == 0`) is held out. Groups stay contiguous in both parts.
pub fn holdout(set: &TrainingSet, every: usize) -> (TrainingSet, TrainingSet) {
    (
        set.filter(|i| i % every != 0),
        set.filter(|i| i % every == 0),
    )
}

/// Pairwise ranking accuracy: over all pairs of rows of the same group whose
/// labels differ, the fraction that `scores` order the same way as `labels`
/// (a tie in scores counts half). Groups need not be contiguous. With no
/// such pair it returns 0.5, the accuracy of chance, so that a degenerate
/// test set cannot pass a threshold.
pub fn pairwise_accuracy(scores: &[f32], labels: &[f32], groups: &[u32]) -> f64 {
    assert_eq!(scores.len(), labels.len(), "one score per label");
    assert_eq!(groups.len(), labels.len(), "one group per label");
    let mut by_group: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, &g) in groups.iter().enumerate() {
        by_group.entry(g).or_default().push(i);
    }
    let (mut pairs, mut correct) = (0u64, 0.0f64);
    for rows in by_group.values() {
        for (k, &i) in rows.iter().enumerate() {
            for &j in &rows[k + 1..] {
                if labels[i] == labels[j] {
                    continue;
                }
                pairs += 1;
                let want = labels[i] > labels[j];
                if scores[i] == scores[j] {
                    correct += 0.5;
                } else if (scores[i] > scores[j]) == want {
                    correct += 1.0;
                }
            }
        }
    }
    if pairs == 0 {
        0.5
    } else {
        correct / pairs as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_has_normalised_labels_in_contiguous_groups() {
        let set = synthetic(103, 5, 4, 7);
        assert_eq!(set.len(), 103);
        assert_eq!(set.features.len(), 103 * 5);
        assert_eq!(set.group_sizes(), vec![25, 26, 26, 26]);
        assert!(set.labels.iter().all(|&l| l > 0.0 && l <= 1.0));
        for g in 0..4 {
            let best = (0..set.len())
                .filter(|&i| set.groups[i] == g)
                .map(|i| set.labels[i])
                .fold(0.0f32, f32::max);
            assert_eq!(best, 1.0);
        }
        assert_eq!(synthetic(103, 5, 4, 7), set, "same seed, same data");
    }

    #[test]
    fn pairwise_accuracy_counts_pairs_within_groups() {
        let labels = [0.1, 0.5, 1.0, 0.2, 1.0];
        let groups = [0, 0, 0, 1, 1];
        assert_eq!(
            pairwise_accuracy(&[1.0, 2.0, 3.0, 0.0, 1.0], &labels, &groups),
            1.0
        );
        assert_eq!(
            pairwise_accuracy(&[3.0, 2.0, 1.0, 1.0, 0.0], &labels, &groups),
            0.0
        );
        // Ties count half; pairs across groups do not count.
        assert_eq!(pairwise_accuracy(&[0.0; 5], &labels, &groups), 0.5);
        assert_eq!(
            pairwise_accuracy(&[1.0, 2.0, 3.0, 9.0, -9.0], &labels, &groups),
            0.75
        );
        assert_eq!(pairwise_accuracy(&[1.0], &[1.0], &[0]), 0.5);
    }

    #[test]
    fn holdout_takes_every_nth_row() {
        let set = synthetic(40, 3, 2, 1);
        let (train, test) = holdout(&set, 4);
        assert_eq!((train.len(), test.len()), (30, 10));
        assert_eq!(test.row(1), set.row(4));
    }
}
