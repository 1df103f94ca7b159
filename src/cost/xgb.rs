//! The XGBoost learner ([`XgbLearner`]; cargo feature `xgboost`): gradient
//! boosted trees from the XGBoost C++ library through the `xgboost-rs`
//! binding, either regressing the labels (`xgboost`) or learning to rank
//! the rows of each workload (`xgboost-rank`), with parameters in the spirit
//! of Ansor's XGBoost cost model.

use std::collections::HashMap;
use std::fmt;

use xgboost_rs::{Booster, DMatrix};

use super::dataset::TrainingSet;
use super::error::CostError;
use super::learner::Learner;

/// Version of the byte format of [`XgbLearner::to_bytes`].
const FORMAT_VERSION: u8 = 1;

/// Bytes before the XGBoost model in [`XgbLearner::to_bytes`]: format
/// version, objective tag, column count (`u64`, little endian).
const HEADER_LEN: usize = 10;

/// What an [`XgbLearner`] optimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XgbObjective {
    /// Squared error on the labels (`reg:squarederror`); learner `xgboost`.
    Regression,
    /// Pairwise ranking within each workload (`rank:pairwise`, one query
    /// group per workload); learner `xgboost-rank`.
    PairwiseRank,
}

impl XgbObjective {
    /// The learner's name for this objective (`xgboost` or `xgboost-rank`).
    pub fn learner_name(self) -> &'static str {
        match self {
            XgbObjective::Regression => "xgboost",
            XgbObjective::PairwiseRank => "xgboost-rank",
        }
    }

    /// XGBoost's name of the objective.
    fn xgboost_name(self) -> &'static str {
        match self {
            XgbObjective::Regression => "reg:squarederror",
            XgbObjective::PairwiseRank => "rank:pairwise",
        }
    }

    /// The objective's byte in [`XgbLearner::to_bytes`].
    fn tag(self) -> u8 {
        match self {
            XgbObjective::Regression => 0,
            XgbObjective::PairwiseRank => 1,
        }
    }

    /// The objective of a tag byte.
    fn from_tag(tag: u8) -> Option<XgbObjective> {
        match tag {
            0 => Some(XgbObjective::Regression),
            1 => Some(XgbObjective::PairwiseRank),
            _ => None,
        }
    }
}

/// How XGBoost finds splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XgbTreeMethod {
    /// Exact greedy over every value (`exact`): what XGBoost's `auto`
    /// picks for data of this size, so what Ansor's model uses.
    Exact,
    /// Histograms of 256 bins (`hist`): regression fitted about 3x faster
    /// on 2,000 rows with the same held-out accuracy, but pairwise ranking
    /// about 3x slower than exact.
    Hist,
}

impl XgbTreeMethod {
    /// XGBoost's name of the tree method.
    fn xgboost_name(self) -> &'static str {
        match self {
            XgbTreeMethod::Exact => "exact",
            XgbTreeMethod::Hist => "hist",
        }
    }
}

/// How an [`XgbLearner`] trains: the parameters of Ansor's XGBoost cost
/// model, except the number of rounds (Ansor stops early; here it is
/// fixed) and the threads. The defaults were measured on 2,000 rows of 40
/// columns of the unit tests' synthetic data (2-core x86-64 machine): see
/// each field.
#[derive(Clone, Debug, PartialEq)]
pub struct XgbConfig {
    /// Boosting rounds, i.e. trees (default 100). Held-out accuracy did not
    /// change from 50 to 200 rounds; fit time and model size grow linearly.
    pub rounds: u32,
    /// Deepest a tree may grow (default 10, as Ansor).
    pub max_depth: u32,
    /// Learning rate (default 0.2, as Ansor).
    pub eta: f32,
    /// Least loss reduction a split must bring (default 0.001, as Ansor).
    pub gamma: f32,
    /// Least hessian weight in a child (default 0, as Ansor).
    pub min_child_weight: f32,
    /// How splits are found (default [`XgbTreeMethod::Exact`]).
    pub tree_method: XgbTreeMethod,
    /// Threads XGBoost trains and predicts with; 0 means all cores
    /// (default 1: with all cores fitting took several times longer on a
    /// busy 2-core machine, where measurements and other tests compete).
    pub nthread: u32,
    /// Random seed (default 43, as Ansor; XGBoost draws nothing with these
    /// parameters, but the seed is fixed so that equal data gives an equal
    /// model).
    pub seed: u64,
}

impl Default for XgbConfig {
    fn default() -> XgbConfig {
        XgbConfig {
            rounds: 100,
            max_depth: 10,
            eta: 0.2,
            gamma: 0.001,
            min_child_weight: 0.0,
            tree_method: XgbTreeMethod::Exact,
            nthread: 1,
            seed: 43,
        }
    }
}

impl XgbConfig {
    /// The booster parameters for `objective`, as XGBoost spells them.
    fn booster_params(&self, objective: XgbObjective) -> HashMap<String, String> {
        let pairs = [
            ("booster", "gbtree".to_string()),
            ("objective", objective.xgboost_name().to_string()),
            ("max_depth", self.max_depth.to_string()),
            ("eta", self.eta.to_string()),
            ("gamma", self.gamma.to_string()),
            ("min_child_weight", self.min_child_weight.to_string()),
            ("nthread", self.nthread.to_string()),
            ("seed", self.seed.to_string()),
            ("verbosity", "0".to_string()),
            ("tree_method", self.tree_method.xgboost_name().to_string()),
        ];
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

/// Gradient boosted trees from XGBoost (learners `xgboost` and
/// `xgboost-rank`, see [`XgbObjective`]).
pub struct XgbLearner {
    objective: XgbObjective,
    config: XgbConfig,
    /// The fitted booster and the number of columns it was fitted on.
    fitted: Option<(Booster, usize)>,
}

impl fmt::Debug for XgbLearner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XgbLearner")
            .field("objective", &self.objective)
            .field("config", &self.config)
            .field("fitted_columns", &self.fitted.as_ref().map(|(_, n)| *n))
            .finish()
    }
}

impl XgbLearner {
    /// An unfitted learner for `objective` with the default [`XgbConfig`].
    pub fn new(objective: XgbObjective) -> XgbLearner {
        XgbLearner::with_config(objective, XgbConfig::default())
    }

    /// An unfitted learner for `objective` training with `config`.
    pub fn with_config(objective: XgbObjective, config: XgbConfig) -> XgbLearner {
        XgbLearner {
            objective,
            config,
            fitted: None,
        }
    }

    /// What the learner optimises.
    pub fn objective(&self) -> XgbObjective {
        self.objective
    }

    /// How the learner trains.
    pub fn config(&self) -> &XgbConfig {
        &self.config
    }

    /// Whether the learner has been fitted (or restored fitted).
    pub fn is_fitted(&self) -> bool {
        self.fitted.is_some()
    }

    /// Restores a learner from [`to_bytes`](Learner::to_bytes), checking
    /// that the bytes were saved by the learner called `name` (a model file
    /// names its learner; the bytes name the objective too).
    pub fn from_named_bytes(name: &str, bytes: &[u8]) -> Result<XgbLearner, CostError> {
        let learner = XgbLearner::from_bytes(bytes)?;
        if learner.name() != name {
            return Err(learner.error(format!(
                "the model was saved by '{}', not '{name}'",
                learner.name()
            )));
        }
        Ok(learner)
    }

    fn error(&self, message: impl fmt::Display) -> CostError {
        CostError::Learner {
            learner: self.name(),
            message: message.to_string(),
        }
    }

    /// An XGBoost matrix of `rows` (row-major, `n_cols` each, `n_rows`
    /// rows). NaN marks a missing value; zeros are values.
    fn matrix(&self, rows: &[f32], n_rows: usize, n_cols: usize) -> Result<DMatrix, CostError> {
        let f32_size = std::mem::size_of::<f32>();
        let nthread = i32::try_from(self.config.nthread).map_err(|e| self.error(e))?;
        DMatrix::from_col_major_f32(
            rows,
            n_cols * f32_size,
            f32_size,
            n_rows,
            n_cols,
            nthread,
            f32::NAN,
        )
        .map_err(|e| self.error(format!("cannot build a feature matrix: {e}")))
    }
}

/// Number of rows in `len` values of `n_cols` columns, if that is whole.
fn row_count(len: usize, n_cols: usize) -> Option<usize> {
    if n_cols == 0 || !len.is_multiple_of(n_cols) {
        None
    } else {
        Some(len / n_cols)
    }
}

impl Learner for XgbLearner {
    fn name(&self) -> &'static str {
        self.objective.learner_name()
    }

    fn fit(&mut self, data: &TrainingSet) -> Result<(), CostError> {
        let n_rows = data.len();
        let n_cols = data.n_cols;
        if n_rows == 0 {
            return Err(self.error("cannot fit on no rows"));
        }
        if row_count(data.features.len(), n_cols) != Some(n_rows) || data.groups.len() != n_rows {
            return Err(self.error(format!(
                "malformed training set: {} labels, {} groups, {} values of {} columns",
                n_rows,
                data.groups.len(),
                data.features.len(),
                n_cols
            )));
        }
        let mut matrix = self.matrix(&data.features, n_rows, n_cols)?;
        matrix
            .set_labels(&data.labels)
            .map_err(|e| self.error(format!("cannot set labels: {e}")))?;
        if self.objective == XgbObjective::PairwiseRank {
            let sizes = data
                .group_sizes()
                .into_iter()
                .map(u32::try_from)
                .collect::<Result<Vec<u32>, _>>()
                .map_err(|e| self.error(format!("group too large: {e}")))?;
            matrix
                .set_group(&sizes)
                .map_err(|e| self.error(format!("cannot set groups: {e}")))?;
        }
        let params = self.config.booster_params(self.objective);
        let mut booster = Booster::new_with_json_config(&[&matrix], params)
            .map_err(|e| self.error(format!("cannot create a booster: {e}")))?;
        for round in 0..self.config.rounds {
            let round = i32::try_from(round).map_err(|e| self.error(e))?;
            booster
                .update(&matrix, round)
                .map_err(|e| self.error(format!("boosting round {round} failed: {e}")))?;
        }
        self.fitted = Some((booster, n_cols));
        Ok(())
    }

    fn predict(&self, rows: &[f32], n_cols: usize) -> Result<Vec<f32>, CostError> {
        let Some(n_rows) = row_count(rows.len(), n_cols) else {
            return Err(self.error(format!(
                "{} values are not whole rows of {n_cols} columns",
                rows.len()
            )));
        };
        let Some((booster, fitted_cols)) = &self.fitted else {
            return Ok(vec![0.0; n_rows]);
        };
        if n_cols != *fitted_cols {
            return Err(self.error(format!(
                "rows have {n_cols} columns, the model was fitted on {fitted_cols}"
            )));
        }
        if n_rows == 0 {
            return Ok(Vec::new());
        }
        let matrix = self.matrix(rows, n_rows, n_cols)?;
        let scores = booster
            .predict(&matrix)
            .map_err(|e| self.error(format!("prediction failed: {e}")))?;
        if scores.len() != n_rows {
            return Err(self.error(format!(
                "XGBoost returned {} scores for {n_rows} rows",
                scores.len()
            )));
        }
        Ok(scores)
    }

    /// Format: a version byte, the objective's byte, the fitted column count
    /// (`u64`, little endian; 0 when unfitted), then XGBoost's JSON model
    /// (nothing when unfitted). The [`XgbConfig`] is not saved: a restored
    /// learner refits with the defaults.
    fn to_bytes(&self) -> Result<Vec<u8>, CostError> {
        let mut bytes = Vec::with_capacity(HEADER_LEN);
        bytes.push(FORMAT_VERSION);
        bytes.push(self.objective.tag());
        match &self.fitted {
            None => bytes.extend_from_slice(&0u64.to_le_bytes()),
            Some((booster, n_cols)) => {
                let n_cols = u64::try_from(*n_cols).map_err(|e| self.error(e))?;
                bytes.extend_from_slice(&n_cols.to_le_bytes());
                let model = booster
                    .save_to_buffer("json".to_string())
                    .map_err(|e| self.error(format!("cannot save the booster: {e}")))?;
                bytes.extend_from_slice(model.as_bytes());
            }
        }
        Ok(bytes)
    }

    fn from_bytes(bytes: &[u8]) -> Result<XgbLearner, CostError> {
        let bad = |message: String| CostError::Learner {
            learner: XgbObjective::Regression.learner_name(),
            message,
        };
        let Some((header, model)) = bytes.split_at_checked(HEADER_LEN) else {
            return Err(bad(format!("model of {} bytes is truncated", bytes.len())));
        };
        if header[0] != FORMAT_VERSION {
            return Err(bad(format!(
                "model format {} (this build reads {FORMAT_VERSION})",
                header[0]
            )));
        }
        let objective = XgbObjective::from_tag(header[1])
            .ok_or_else(|| bad(format!("unknown objective {}", header[1])))?;
        let mut learner = XgbLearner::new(objective);
        let mut n_cols = [0u8; 8];
        n_cols.copy_from_slice(&header[2..HEADER_LEN]);
        let n_cols = usize::try_from(u64::from_le_bytes(n_cols)).map_err(|e| learner.error(e))?;
        match (n_cols, model.is_empty()) {
            (0, true) => {}
            (0, false) | (_, true) => {
                return Err(
                    learner.error("model has columns without trees or trees without columns")
                );
            }
            (n_cols, false) => {
                let booster = Booster::load_buffer(model)
                    .map_err(|e| learner.error(format!("cannot load the booster: {e}")))?;
                learner.fitted = Some((booster, n_cols));
            }
        }
        Ok(learner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::test_support::{holdout, pairwise_accuracy, synthetic};
    use super::*;

    fn held_out_accuracy(objective: XgbObjective) -> f64 {
        let set = synthetic(300, 12, 3, 42);
        let (train, test) = holdout(&set, 4);
        let mut learner = XgbLearner::new(objective);
        learner.fit(&train).expect("fit");
        let scores = learner
            .predict(&test.features, test.n_cols)
            .expect("predict");
        assert_eq!(scores.len(), test.len());
        pairwise_accuracy(&scores, &test.labels, &test.groups)
    }

    #[test]
    fn regression_learns_a_synthetic_ranking() {
        let acc = held_out_accuracy(XgbObjective::Regression);
        assert!(acc > 0.8, "held-out pairwise accuracy {acc}");
    }

    #[test]
    fn pairwise_rank_learns_a_synthetic_ranking() {
        let acc = held_out_accuracy(XgbObjective::PairwiseRank);
        assert!(acc > 0.8, "held-out pairwise accuracy {acc}");
    }

    #[test]
    fn names_follow_the_objective() {
        assert_eq!(XgbLearner::new(XgbObjective::Regression).name(), "xgboost");
        assert_eq!(
            XgbLearner::new(XgbObjective::PairwiseRank).name(),
            "xgboost-rank"
        );
    }

    #[test]
    fn saved_learner_predicts_bit_identically() {
        let set = synthetic(200, 12, 4, 3);
        for objective in [XgbObjective::Regression, XgbObjective::PairwiseRank] {
            let mut learner = XgbLearner::new(objective);
            learner.fit(&set).expect("fit");
            let bytes = learner.to_bytes().expect("to_bytes");
            let restored = XgbLearner::from_bytes(&bytes).expect("from_bytes");
            assert_eq!(restored.objective(), objective);
            assert!(restored.is_fitted());
            let before = learner.predict(&set.features, set.n_cols).expect("predict");
            let after = restored
                .predict(&set.features, set.n_cols)
                .expect("predict");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
            assert_eq!(bits(&before), bits(&after), "{objective:?}");
            assert_eq!(
                restored.to_bytes().expect("to_bytes"),
                bytes,
                "{objective:?}"
            );
        }
    }

    #[test]
    fn unfitted_learner_predicts_zeros_and_round_trips() {
        let learner = XgbLearner::new(XgbObjective::PairwiseRank);
        assert_eq!(
            learner.predict(&[0.5; 6], 3).expect("predict"),
            vec![0.0, 0.0]
        );
        let restored =
            XgbLearner::from_bytes(&learner.to_bytes().expect("to_bytes")).expect("from_bytes");
        assert_eq!(restored.objective(), XgbObjective::PairwiseRank);
        assert!(!restored.is_fitted());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let set = synthetic(40, 4, 2, 1);
        let mut learner = XgbLearner::new(XgbObjective::Regression);
        assert!(learner.fit(&TrainingSet::new(4)).is_err());
        learner.fit(&set).expect("fit");
        assert!(learner.predict(&[0.0; 5], 4).is_err(), "not whole rows");
        assert!(learner.predict(&[0.0; 6], 3).is_err(), "wrong column count");
        assert!(learner.predict(&[], 0).is_err(), "no columns");
        assert_eq!(learner.predict(&[], 4).expect("no rows"), Vec::<f32>::new());
        for bytes in [
            &[][..],
            &[9; 10][..],
            &[FORMAT_VERSION, 7, 0, 0, 0, 0, 0, 0, 0, 0][..],
        ] {
            assert!(XgbLearner::from_bytes(bytes).is_err());
        }
        let mut bytes = learner.to_bytes().expect("to_bytes");
        bytes.truncate(bytes.len() / 2);
        assert!(XgbLearner::from_bytes(&bytes).is_err(), "truncated model");
    }

    /// Fit and predict times on 2,000 rows of 40 columns (run with
    /// `--ignored --nocapture`, in release mode for meaningful numbers).
    #[test]
    #[ignore]
    fn timing() {
        let set = synthetic(2000 * 4 / 3, 40, 8, 11);
        let (train, test) = holdout(&set, 4);
        for objective in [XgbObjective::Regression, XgbObjective::PairwiseRank] {
            for (tree_method, nthread) in [
                (XgbTreeMethod::Exact, 1),
                (XgbTreeMethod::Exact, 0),
                (XgbTreeMethod::Hist, 1),
            ] {
                let config = XgbConfig {
                    tree_method,
                    nthread,
                    ..XgbConfig::default()
                };
                let mut learner = XgbLearner::with_config(objective, config);
                let t = Instant::now();
                learner.fit(&train).expect("fit");
                let fit = t.elapsed().as_secs_f64();
                let t = Instant::now();
                let scores = learner
                    .predict(&test.features, test.n_cols)
                    .expect("predict");
                let predict = t.elapsed().as_secs_f64();
                let acc = pairwise_accuracy(&scores, &test.labels, &test.groups);
                let bytes = learner.to_bytes().expect("to_bytes").len();
                println!(
                    "{:12} {tree_method:?} nthread {nthread}: fit {} rows {fit:.3}s, predict {} rows {predict:.4}s, \
                     held-out accuracy {acc:.4}, {bytes} bytes",
                    objective.learner_name(),
                    train.len(),
                    test.len()
                );
            }
        }
    }
}
