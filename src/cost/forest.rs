//! A pure-Rust random-forest learner ([`ForestLearner`], `forest`) on
//! smartcore's `RandomForestRegressor`, for builds without XGBoost.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use smartcore::ensemble::random_forest_regressor::{
    RandomForestRegressor, RandomForestRegressorParameters,
};
use smartcore::linalg::basic::matrix::DenseMatrix;

use super::dataset::TrainingSet;
use super::error::CostError;
use super::learner::Learner;
use super::learner_support::{
    clean_features, guarded, learner_error, load_json, predict_rows, save_json, training_rows,
};

/// The learner's name in model files and on the command line.
const NAME: &str = "forest";

/// Version of the byte format of [`ForestLearner::to_bytes`].
const FORMAT_VERSION: u32 = 1;

/// One smartcore forest: `f32` features, `f64` labels.
type Forest = RandomForestRegressor<f32, f64, DenseMatrix<f32>, Vec<f64>>;

/// How a [`ForestLearner`] trains.
///
/// The defaults were chosen by measurement: release build, the 2-core x86-64
/// development machine (busy with other builds, so wall times are upper
/// bounds), synthetic 40-column data from the unit tests' generator (3
/// informative columns, ~500 rows per group), accuracy = pairwise ranking
/// accuracy on a held-out quarter. With the defaults, 2,000 training rows
/// fit in 0.1–0.2 s (accuracy 0.938) and 10,000 rows in 0.8–1.4 s (0.955);
/// predicting 2,000 rows takes 15–25 ms. See each field for the
/// alternatives tried (at 2,000 rows unless said).
#[derive(Clone, Debug, PartialEq)]
pub struct ForestConfig {
    /// Trees in the whole ensemble (default 50). Fit time and model size
    /// are linear in it; 100 trees ranked only 0.005 better (0.944 vs 0.939).
    pub trees: usize,
    /// Independent sub-forests the trees are split into, fitted in parallel
    /// on the rayon pool (default 1). smartcore fits one forest on one core;
    /// equal-sized sub-forests with distinct seeds average to the same kind
    /// of model, deterministically whatever the thread count. On the busy
    /// 2-core machine 5 shards fitted *slower* (10,000 rows: 0.9–1.4 s vs
    /// 0.8 s; each sub-forest re-sorts every column, ~20% more CPU in total),
    /// so it only pays on idle machines with more cores.
    pub shards: usize,
    /// Deepest a tree may grow (default 12): depth 8 ranked worse (0.923),
    /// depth 16 no better (0.940) with 1.7× the model size.
    pub max_depth: u16,
    /// Fewest rows in a leaf (default 5): as accurate as 1 or 2 (0.938 vs
    /// 0.940) with 40% smaller models, and it averages out measurement noise.
    pub min_samples_leaf: usize,
    /// Columns tried at each split: `None` (default) means a third of the
    /// columns (at least 1), the usual choice for regression forests;
    /// √columns ranked clearly worse (0.888) when most columns are
    /// uninformative.
    pub features_per_split: Option<usize>,
    /// Most training rows (default [`FOREST_MAX_ROWS`]); larger sets are
    /// subsampled, keeping each group's best rows (see
    /// `TrainingSet::subsample`).
    pub max_rows: usize,
    /// Seed of the bootstrap samples and column draws; fixed, so equal data
    /// gives an equal model.
    pub seed: u64,
}

/// Default for [`ForestConfig::max_rows`]. A cap of 4,000 rows fitted
/// 10,000 rows' worth of data in 0.3 s but ranked worse (0.947) than all
/// 10,000 rows (0.955, 0.8–1.4 s); 20,000 rows cut to 10,000 fit in 1.1 s.
/// Model size grows with the rows (≈3.4 MB of JSON at 2,000 rows, 8–9 MB at
/// 10,000).
pub const FOREST_MAX_ROWS: usize = 10_000;

impl Default for ForestConfig {
    fn default() -> ForestConfig {
        ForestConfig {
            trees: 50,
            shards: 1,
            max_depth: 12,
            min_samples_leaf: 5,
            features_per_split: None,
            max_rows: FOREST_MAX_ROWS,
            seed: 0x5eed,
        }
    }
}

/// The fitted state, as serialised by [`ForestLearner::to_bytes`].
#[derive(Serialize, Deserialize)]
struct Fitted {
    /// Columns per row the forests were trained on.
    n_cols: usize,
    /// Sub-forests of equal size; the prediction is the mean of theirs.
    forests: Vec<Forest>,
}

/// A random-forest regressor on normalised throughput (smartcore), scoring
/// candidates by the predicted label. See [`ForestConfig`] for the
/// parameters. Model bytes are JSON (floats round-trip exactly) and large:
/// every node of every tree, a few MB for thousands of rows.
/// [`from_bytes`](Learner::from_bytes) restores the fitted forest with the
/// default config (the config only matters for the next `fit`).
#[derive(Default)]
pub struct ForestLearner {
    config: ForestConfig,
    model: Option<Fitted>,
}

impl ForestLearner {
    /// An unfitted learner with the default [`ForestConfig`].
    pub fn new() -> ForestLearner {
        ForestLearner::default()
    }

    /// An unfitted learner that trains with `config`.
    pub fn with_config(config: ForestConfig) -> ForestLearner {
        ForestLearner {
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

    fn parameters(&self, n_cols: usize, shard: usize) -> RandomForestRegressorParameters {
        let c = &self.config;
        let m = c
            .features_per_split
            .unwrap_or(n_cols / 3)
            .clamp(1, n_cols.max(1));
        RandomForestRegressorParameters::default()
            .with_n_trees(c.trees.max(1).div_ceil(c.shards.max(1)))
            .with_max_depth(c.max_depth)
            .with_min_samples_leaf(c.min_samples_leaf.max(1))
            .with_min_samples_split(2 * c.min_samples_leaf.max(1))
            .with_m(m)
            // smartcore seeds tree `t` of a forest with `seed + t`: keep the
            // shards' ranges apart.
            .with_seed(c.seed.wrapping_add(shard as u64 * 1_000_003))
    }
}

impl Learner for ForestLearner {
    fn name(&self) -> &'static str {
        NAME
    }

    fn fit(&mut self, data: &TrainingSet) -> Result<(), CostError> {
        let data = training_rows(NAME, data, self.config.max_rows)?;
        let n_cols = data.n_cols;
        let x = DenseMatrix::new(data.len(), n_cols, clean_features(&data.features), false)
            .map_err(|e| self.error(e.to_string()))?;
        let y: Vec<f64> = data.labels.iter().map(|&l| f64::from(l)).collect();
        let forests = (0..self.config.shards.max(1))
            .into_par_iter()
            .map(|shard| {
                let parameters = self.parameters(n_cols, shard);
                guarded(NAME, || Forest::fit(&x, &y, parameters))?
                    .map_err(|e| self.error(e.to_string()))
            })
            .collect::<Result<Vec<Forest>, CostError>>()?;
        self.model = Some(Fitted { n_cols, forests });
        Ok(())
    }

    fn predict(&self, rows: &[f32], n_cols: usize) -> Result<Vec<f32>, CostError> {
        let fitted = self.model.as_ref().map(|m| (m, m.n_cols));
        predict_rows(NAME, fitted, rows, n_cols, |model, n_rows| {
            let x = DenseMatrix::new(n_rows, n_cols, clean_features(rows), false)
                .map_err(|e| self.error(e.to_string()))?;
            let mut sum = vec![0.0f64; n_rows];
            for forest in &model.forests {
                let scores =
                    guarded(NAME, || forest.predict(&x))?.map_err(|e| self.error(e.to_string()))?;
                if scores.len() != n_rows {
                    return Err(self.error(format!("{} scores for {n_rows} rows", scores.len())));
                }
                for (s, p) in sum.iter_mut().zip(scores) {
                    *s += p;
                }
            }
            let shards = model.forests.len().max(1) as f64;
            Ok(sum.into_iter().map(|s| (s / shards) as f32).collect())
        })
    }

    fn to_bytes(&self) -> Result<Vec<u8>, CostError> {
        save_json(FORMAT_VERSION, self.model.as_ref())
            .map_err(|e| self.error(format!("cannot serialise the forest: {e}")))
    }

    fn from_bytes(bytes: &[u8]) -> Result<ForestLearner, CostError> {
        let model: Option<Fitted> = load_json(NAME, FORMAT_VERSION, bytes)?;
        if let Some(model) = &model
            && (model.forests.is_empty() || model.n_cols == 0)
        {
            return Err(learner_error(
                NAME,
                "a fitted forest model without trees or columns",
            ));
        }
        Ok(ForestLearner {
            config: ForestConfig::default(),
            model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{
        check_broken_model_is_an_error, check_learner_contract, synthetic,
    };
    use super::*;

    #[test]
    fn forest_keeps_the_learner_contract() {
        check_learner_contract(|| Box::new(ForestLearner::new()));
    }

    #[test]
    fn forest_turns_a_panic_on_a_bad_model_into_an_error() {
        // A split node without its second child: smartcore unwraps it.
        let rows = synthetic(10, 4, 1, 7);
        check_broken_model_is_an_error(
            || Box::new(ForestLearner::new()),
            "\"false_child\":2",
            "\"false_child\":null",
            &rows.features,
            4,
        );
    }
}
