//! A pure-Rust gradient-boosting learner ([`GbdtLearner`], `gbdt`) on the
//! `gbdt` crate, for builds without XGBoost.

use ::gbdt::config::{Config, Loss};
use ::gbdt::decision_tree::{Data, DataVec};
use ::gbdt::gradient_boost::GBDT;
use serde::{Deserialize, Serialize};

use super::dataset::TrainingSet;
use super::error::CostError;
use super::learner::Learner;
use super::learner_support::{
    clean_features, guarded, learner_error, load_json, predict_rows, save_json, training_rows,
};

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
        let data = training_rows(NAME, data, self.config.max_rows)?;
        let n_cols = data.n_cols;
        let mut rows = data_vec(&data.features, n_cols, Some(&data.labels));
        let mut gbdt = GBDT::new(&self.crate_config(n_cols));
        guarded(NAME, || gbdt.fit(&mut rows))?;
        self.model = Some(Fitted { n_cols, gbdt });
        Ok(())
    }

    fn predict(&self, rows: &[f32], n_cols: usize) -> Result<Vec<f32>, CostError> {
        let fitted = self.model.as_ref().map(|m| (m, m.n_cols));
        predict_rows(NAME, fitted, rows, n_cols, |model, _| {
            let rows = data_vec(rows, n_cols, None);
            guarded(NAME, || model.gbdt.predict(&rows))
        })
    }

    fn to_bytes(&self) -> Result<Vec<u8>, CostError> {
        save_json(FORMAT_VERSION, self.model.as_ref())
            .map_err(|e| self.error(format!("cannot serialise the model: {e}")))
    }

    fn from_bytes(bytes: &[u8]) -> Result<GbdtLearner, CostError> {
        let model: Option<Fitted> = load_json(NAME, FORMAT_VERSION, bytes)?;
        if model.as_ref().is_some_and(|m| m.n_cols == 0) {
            return Err(learner_error(NAME, "a fitted gbdt model without columns"));
        }
        Ok(GbdtLearner {
            config: GbdtConfig::default(),
            model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{check_broken_model_is_an_error, check_learner_contract};
    use super::*;

    #[test]
    fn gbdt_keeps_the_learner_contract() {
        check_learner_contract(|| Box::new(GbdtLearner::new()));
    }

    #[test]
    fn gbdt_turns_a_panic_on_a_bad_model_into_an_error() {
        // Trees that split on columns the rows do not have: the crate
        // indexes out of bounds.
        check_broken_model_is_an_error(
            || Box::new(GbdtLearner::new()),
            "\"n_cols\":4",
            "\"n_cols\":1",
            &[0.5; 10],
            1,
        );
    }
}
