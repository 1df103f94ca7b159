//! A pure-Rust gradient-boosting learner ([`GbdtLearner`], `gbdt`) on the
//! `gbdt` crate, for builds without XGBoost.

use ::gbdt::config::{Config, Loss};
use ::gbdt::decision_tree::{Data, DataVec};
use ::gbdt::gradient_boost::GBDT;
use serde::{Deserialize, Serialize};

use super::dataset::TrainingSet;
use super::error::CostError;
use super::forest::{
    check_training_set, clean_features, count_rows, guarded, learner_error, subsample,
};
use super::learner::Learner;

/// The learner's name in model files and on the command line.
const NAME: &str = "gbdt";

/// Version of the byte format of [`GbdtLearner::to_bytes`].
const FORMAT_VERSION: u32 = 1;

/// How a [`GbdtLearner`] trains: squared-error boosting of the labels.
///
/// The defaults were chosen by measurement: release build, the 2-core x86-64
/// development machine (busy with other builds, so wall times are upper
/// bounds), synthetic 40-column data from the unit tests' generator,
/// accuracy = pairwise ranking accuracy on a held-out quarter. With the
/// defaults, 2,000 training rows fit in 0.5–0.9 s (accuracy 0.974) and
/// 10,000 rows in 2.9–4.5 s (0.986); predicting 2,000 rows takes ~10 ms.
/// See each field for the alternatives tried (at 2,000 rows).
#[derive(Clone, Debug, PartialEq)]
pub struct GbdtConfig {
    /// Boosting rounds, one tree each (default 100). 50 rounds ranked the
    /// same on the synthetic data (0.975) and 200 no better (0.974); 100
    /// leaves room for the harder real data at twice the fit time of 50.
    pub trees: usize,
    /// Depth of each tree (default 6; the root is depth 0): depth 4 ranked
    /// the same (0.974), depth 8 worse (0.966) and 3× larger.
    pub max_depth: u32,
    /// Learning rate: each tree's contribution is scaled by it (default
    /// 0.1); 0.3 ranked worse (0.967).
    pub shrinkage: f32,
    /// Fewest rows in a leaf (default 5): 1 and 20 ranked the same (0.975);
    /// a few rows per leaf keeps late trees from fitting single noisy rows.
    pub min_leaf_size: usize,
    /// Most training rows (default [`GBDT_MAX_ROWS`]); larger sets are
    /// subsampled like the forest's, keeping each workload's best rows.
    pub max_rows: usize,
}

/// Default for [`GbdtConfig::max_rows`], the same as the forest's so the two
/// compare on equal data. The crate's exact greedy splitter is
/// single-threaded and fit time is linear in the rows: ~0.4 s per 1,000.
pub const GBDT_MAX_ROWS: usize = 10_000;

impl Default for GbdtConfig {
    fn default() -> GbdtConfig {
        GbdtConfig {
            trees: 100,
            max_depth: 6,
            shrinkage: 0.1,
            min_leaf_size: 5,
            max_rows: GBDT_MAX_ROWS,
        }
    }
}

/// The fitted state, as serialised by [`GbdtLearner::to_bytes`].
#[derive(Serialize, Deserialize)]
struct Saved {
    format: u32,
    /// `None` while unfitted.
    model: Option<Fitted>,
}

#[derive(Serialize, Deserialize)]
struct Fitted {
    /// Columns per row the model was trained on.
    n_cols: usize,
    /// The boosted trees (with the crate's config and bias).
    gbdt: GBDT,
}

/// Gradient-boosted regression trees (the `gbdt` crate) on normalised
/// throughput, scoring candidates by the predicted label. Training is
/// deterministic: no row or column sampling (the crate samples with an
/// unseeded thread RNG). Model bytes are JSON (floats round-trip exactly),
/// about 1.2 MB for the default 100 trees.
/// [`from_bytes`](Learner::from_bytes) restores the fitted model with the
/// default config (the config only matters for the next `fit`).
#[derive(Default)]
pub struct GbdtLearner {
    config: GbdtConfig,
    model: Option<Fitted>,
}

impl GbdtLearner {
    /// An unfitted learner with the default [`GbdtConfig`].
    pub fn new() -> GbdtLearner {
        GbdtLearner::default()
    }

    /// An unfitted learner that trains with `config`.
    pub fn with_config(config: GbdtConfig) -> GbdtLearner {
        GbdtLearner {
            config,
            model: None,
        }
    }

    /// Whether the learner has been fitted (or loaded fitted).
    pub fn is_fitted(&self) -> bool {
        self.model.is_some()
    }

    fn error(&self, message: impl Into<String>) -> CostError {
        learner_error(NAME, message)
    }

    fn crate_config(&self, n_cols: usize) -> Config {
        let c = &self.config;
        let mut config = Config::new();
        config.set_feature_size(n_cols);
        config.set_iterations(c.trees.max(1));
        config.set_max_depth(c.max_depth);
        config.set_shrinkage(c.shrinkage);
        config.set_min_leaf_size(c.min_leaf_size.max(1));
        config.loss = Loss::SquaredError;
        config.set_feature_sample_ratio(1.0);
        config.set_data_sample_ratio(1.0);
        config
    }
}

/// The crate's rows: one `Data` per row of `features`, weight 1.
fn data_vec(features: &[f32], n_cols: usize, labels: Option<&[f32]>) -> DataVec {
    clean_features(features)
        .chunks_exact(n_cols)
        .enumerate()
        .map(|(i, row)| match labels {
            Some(labels) => Data::new_training_data(row.to_vec(), 1.0, labels[i], None),
            None => Data::new_test_data(row.to_vec(), None),
        })
        .collect()
}

impl Learner for GbdtLearner {
    fn name(&self) -> &'static str {
        NAME
    }

    fn fit(&mut self, data: &TrainingSet) -> Result<(), CostError> {
        check_training_set(NAME, data)?;
        let data = subsample(data, self.config.max_rows);
        let n_cols = data.n_cols;
        let mut rows = data_vec(&data.features, n_cols, Some(&data.labels));
        let mut gbdt = GBDT::new(&self.crate_config(n_cols));
        guarded(NAME, || gbdt.fit(&mut rows))?;
        self.model = Some(Fitted { n_cols, gbdt });
        Ok(())
    }

    fn predict(&self, rows: &[f32], n_cols: usize) -> Result<Vec<f32>, CostError> {
        let n_rows = count_rows(NAME, rows, n_cols)?;
        let Some(model) = &self.model else {
            return Ok(vec![0.0; n_rows]);
        };
        if n_cols != model.n_cols {
            return Err(self.error(format!(
                "rows have {n_cols} columns, the model was trained on {}",
                model.n_cols
            )));
        }
        if n_rows == 0 {
            return Ok(Vec::new());
        }
        let rows = data_vec(rows, n_cols, None);
        let scores = guarded(NAME, || model.gbdt.predict(&rows))?;
        if scores.len() != n_rows {
            return Err(self.error(format!("{} scores for {n_rows} rows", scores.len())));
        }
        Ok(scores)
    }

    fn to_bytes(&self) -> Result<Vec<u8>, CostError> {
        #[derive(Serialize)]
        struct SavedRef<'a> {
            format: u32,
            model: Option<&'a Fitted>,
        }
        let saved = SavedRef {
            format: FORMAT_VERSION,
            model: self.model.as_ref(),
        };
        serde_json::to_vec(&saved)
            .map_err(|e| self.error(format!("cannot serialise the model: {e}")))
    }

    fn from_bytes(bytes: &[u8]) -> Result<GbdtLearner, CostError> {
        let saved: Saved = serde_json::from_slice(bytes)
            .map_err(|e| learner_error(NAME, format!("not a gbdt model: {e}")))?;
        if saved.format != FORMAT_VERSION {
            return Err(learner_error(
                NAME,
                format!(
                    "model format {} (this build reads {FORMAT_VERSION})",
                    saved.format
                ),
            ));
        }
        if saved.model.as_ref().is_some_and(|m| m.n_cols == 0) {
            return Err(learner_error(NAME, "a fitted gbdt model without columns"));
        }
        Ok(GbdtLearner {
            config: GbdtConfig::default(),
            model: saved.model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{holdout, pairwise_accuracy, synthetic};
    use super::*;

    #[test]
    fn gbdt_learns_a_synthetic_ranking() {
        let (train, test) = holdout(&synthetic(400, 12, 4, 1), 4);
        let mut learner = GbdtLearner::new();
        learner.fit(&train).expect("fit");
        let scores = learner
            .predict(&test.features, test.n_cols)
            .expect("predict");
        assert_eq!(scores.len(), test.len());
        let accuracy = pairwise_accuracy(&scores, &test.labels, &test.groups);
        assert!(accuracy > 0.8, "held-out pairwise accuracy {accuracy}");
    }

    #[test]
    fn gbdt_round_trips_bit_identically() {
        let set = synthetic(200, 12, 2, 2);
        let mut learner = GbdtLearner::new();
        learner.fit(&set).expect("fit");
        let bytes = learner.to_bytes().expect("save");
        let loaded = GbdtLearner::from_bytes(&bytes).expect("load");
        let before = learner.predict(&set.features, set.n_cols).expect("predict");
        let after = loaded
            .predict(&set.features, set.n_cols)
            .expect("predict loaded");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&before), bits(&after));
        assert_eq!(loaded.to_bytes().expect("save again"), bytes);
    }

    #[test]
    fn gbdt_fit_is_deterministic() {
        let set = synthetic(200, 12, 2, 3);
        let (mut a, mut b) = (GbdtLearner::new(), GbdtLearner::new());
        a.fit(&set).expect("fit a");
        b.fit(&set).expect("fit b");
        assert_eq!(a.to_bytes().expect("a"), b.to_bytes().expect("b"));
    }

    #[test]
    fn unfitted_gbdt_predicts_zeros_and_round_trips() {
        let learner = GbdtLearner::new();
        assert_eq!(
            learner.predict(&[1.0; 6], 3).expect("predict"),
            vec![0.0, 0.0]
        );
        let loaded = GbdtLearner::from_bytes(&learner.to_bytes().expect("save")).expect("load");
        assert!(!loaded.is_fitted());
        assert_eq!(loaded.predict(&[], 3).expect("predict"), Vec::<f32>::new());
    }

    #[test]
    fn gbdt_rejects_bad_input() {
        let mut learner = GbdtLearner::new();
        assert!(learner.fit(&TrainingSet::new(3)).is_err());
        assert!(learner.predict(&[1.0; 5], 3).is_err());
        learner.fit(&synthetic(50, 4, 1, 4)).expect("fit");
        assert!(learner.predict(&[1.0; 6], 3).is_err(), "wrong column count");
        assert!(GbdtLearner::from_bytes(b"{\"format\":1,\"model\":{}}").is_err());
        assert!(GbdtLearner::from_bytes(b"not json").is_err());
        // Non-finite features are cleaned, not fatal.
        let scores = learner
            .predict(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.5], 4)
            .expect("predict");
        assert!(scores[0].is_finite());
    }

    #[test]
    fn gbdt_turns_a_panic_on_a_bad_model_into_an_error() {
        let mut learner = GbdtLearner::new();
        learner.fit(&synthetic(100, 4, 1, 6)).expect("fit");
        let text = String::from_utf8(learner.to_bytes().expect("save")).expect("utf-8");
        // Trees that split on columns the rows do not have: the crate indexes out of bounds.
        let broken = text.replacen("\"n_cols\":4", "\"n_cols\":1", 1);
        assert_ne!(broken, text);
        let loaded = GbdtLearner::from_bytes(broken.as_bytes()).expect("load");
        assert!(loaded.predict(&[0.5; 10], 1).is_err());
    }
}
