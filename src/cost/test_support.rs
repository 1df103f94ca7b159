//! Test helpers shared by the learners' unit tests: a synthetic ranking
//! problem with known structure, a held-out split, the ranking metric the
//! cost models are judged by, and the contract every [`Learner`] keeps.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::dataset::TrainingSet;
use super::learner::Learner;
use super::registry::learner_from_bytes;

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

/// Checks the behaviour every [`Learner`] promises, on fresh unfitted
/// learners from `make` (restored ones come from [`learner_from_bytes`]
/// under the learner's own name, as model files restore them):
///
/// - it learns the [`synthetic`] ranking: held-out pairwise accuracy > 0.8;
/// - a fitted learner round-trips bit-identically: the restored one predicts
///   the same bits and saves the same bytes;
/// - fitting is deterministic: equal data gives equal bytes;
/// - an unfitted learner predicts zeros and round-trips unfitted;
/// - bad input is an error, not a panic: an empty training set, rows that
///   are not whole, the wrong column count, garbage or truncated bytes;
/// - non-finite features are cleaned, not fatal: the scores stay finite.
///
/// Panics (with the learner's name) on the first broken promise.
pub fn check_learner_contract(make: impl Fn() -> Box<dyn Learner>) {
    learns_a_synthetic_ranking(&make);
    round_trips_bit_identically(&make);
    fit_is_deterministic(&make);
    unfitted_predicts_zeros_and_round_trips(&make);
    rejects_bad_input(&make);
    cleans_non_finite_features(&make);
}

/// Checks that a model file the learning crate panics on (rather than
/// returning an error) makes a prediction fail instead: fits a learner from
/// `make` on 100 rows of 4 [`synthetic`] columns, replaces the first `from`
/// in its saved bytes (JSON) by `to`, restores it through the registry, and
/// predicts `rows` of `n_cols` columns.
pub fn check_broken_model_is_an_error(
    make: impl Fn() -> Box<dyn Learner>,
    from: &str,
    to: &str,
    rows: &[f32],
    n_cols: usize,
) {
    let mut learner = make();
    learner.fit(&synthetic(100, 4, 1, 6)).expect("fit");
    let name = learner.name();
    let text = String::from_utf8(learner.to_bytes().expect("save")).expect("utf-8");
    let broken = text.replacen(from, to, 1);
    assert_ne!(broken, text, "{name}: the model has no {from}");
    let loaded = learner_from_bytes(name, broken.as_bytes()).expect("load");
    assert!(
        loaded.predict(rows, n_cols).is_err(),
        "{name}: predicting with a broken model"
    );
}

/// `learner` saved and restored through the registry.
fn reload(learner: &dyn Learner) -> Box<dyn Learner> {
    let bytes = learner.to_bytes().expect("save");
    learner_from_bytes(learner.name(), &bytes).expect("load")
}

/// The bit patterns of `scores`, to compare them exactly.
fn bits(scores: &[f32]) -> Vec<u32> {
    scores.iter().map(|x| x.to_bits()).collect()
}

fn learns_a_synthetic_ranking(make: &impl Fn() -> Box<dyn Learner>) {
    let (train, test) = holdout(&synthetic(400, 12, 4, 1), 4);
    let mut learner = make();
    learner.fit(&train).expect("fit");
    let scores = learner
        .predict(&test.features, test.n_cols)
        .expect("predict");
    assert_eq!(
        scores.len(),
        test.len(),
        "{}: one score per row",
        learner.name()
    );
    let accuracy = pairwise_accuracy(&scores, &test.labels, &test.groups);
    assert!(
        accuracy > 0.8,
        "{}: held-out pairwise accuracy {accuracy}",
        learner.name()
    );
}

fn round_trips_bit_identically(make: &impl Fn() -> Box<dyn Learner>) {
    let set = synthetic(200, 12, 2, 2);
    let mut learner = make();
    learner.fit(&set).expect("fit");
    let loaded = reload(learner.as_ref());
    let before = learner.predict(&set.features, set.n_cols).expect("predict");
    let after = loaded
        .predict(&set.features, set.n_cols)
        .expect("predict loaded");
    let name = learner.name();
    assert_eq!(bits(&before), bits(&after), "{name}: restored predictions");
    assert!(
        loaded.to_bytes().expect("save again") == learner.to_bytes().expect("save"),
        "{name}: the restored learner saves different bytes"
    );
}

fn fit_is_deterministic(make: &impl Fn() -> Box<dyn Learner>) {
    let set = synthetic(200, 12, 2, 3);
    let (mut a, mut b) = (make(), make());
    a.fit(&set).expect("fit a");
    b.fit(&set).expect("fit b");
    assert!(
        a.to_bytes().expect("a") == b.to_bytes().expect("b"),
        "{}: two fits on equal data differ",
        a.name()
    );
}

fn unfitted_predicts_zeros_and_round_trips(make: &impl Fn() -> Box<dyn Learner>) {
    let learner = make();
    let name = learner.name();
    assert_eq!(
        learner.predict(&[1.0; 6], 3).expect("predict"),
        vec![0.0, 0.0],
        "{name}: unfitted scores"
    );
    let loaded = reload(learner.as_ref());
    assert_eq!(loaded.name(), name);
    assert!(
        loaded.to_bytes().expect("save again") == learner.to_bytes().expect("save"),
        "{name}: an unfitted learner's bytes change on a round trip"
    );
    assert_eq!(
        loaded.predict(&[1.0; 6], 3).expect("predict loaded"),
        vec![0.0, 0.0],
        "{name}: restored unfitted scores"
    );
    assert_eq!(
        loaded.predict(&[], 3).expect("predict no rows"),
        Vec::<f32>::new()
    );
}

fn rejects_bad_input(make: &impl Fn() -> Box<dyn Learner>) {
    let mut learner = make();
    let name = learner.name();
    assert!(
        learner.fit(&TrainingSet::new(3)).is_err(),
        "{name}: fit on no rows"
    );
    assert!(
        learner.predict(&[1.0; 5], 3).is_err(),
        "{name}: unfitted, not whole rows"
    );
    learner.fit(&synthetic(50, 4, 1, 4)).expect("fit");
    assert!(
        learner.predict(&[1.0; 5], 4).is_err(),
        "{name}: not whole rows"
    );
    assert!(
        learner.predict(&[1.0; 6], 3).is_err(),
        "{name}: wrong column count"
    );
    assert!(learner.predict(&[], 0).is_err(), "{name}: no columns");
    assert_eq!(
        learner.predict(&[], 4).expect("predict no rows"),
        Vec::<f32>::new()
    );
    let mut truncated = learner.to_bytes().expect("save");
    truncated.truncate(truncated.len() / 2);
    for bytes in [
        &[][..],
        &b"not json"[..],
        &b"{\"format\":1,\"model\":{}}"[..],
        &truncated[..],
    ] {
        assert!(
            learner_from_bytes(name, bytes).is_err(),
            "{name}: loaded garbage {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(40)])
        );
    }
}

fn cleans_non_finite_features(make: &impl Fn() -> Box<dyn Learner>) {
    let mut learner = make();
    learner.fit(&synthetic(50, 4, 1, 4)).expect("fit");
    let scores = learner
        .predict(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.5], 4)
        .expect("non-finite features are cleaned, not fatal");
    assert!(
        scores.len() == 1 && scores[0].is_finite(),
        "{}: scores {scores:?} of a non-finite row",
        learner.name()
    );
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
