//! The [`CostModel`] trait the search ranks candidates with, the learned
//! model that wraps any [`Learner`], and the random baseline.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::measure::{MeasureResult, Task};
use crate::schedule::State;

use super::dataset::TrainingSet;
use super::error::CostError;
use super::features::{FEATURE_LEN, program_features};
use super::learner::Learner;

/// Ranks candidate schedules: higher scores are predicted to run faster.
pub trait CostModel {
    /// The model's name, for reports.
    fn name(&self) -> String;

    /// Learns from measured candidates of `task` (retraining as needed).
    fn update(
        &mut self,
        task: &Task,
        states: &[State],
        results: &[MeasureResult],
    ) -> Result<(), CostError>;

    /// Scores candidates of `task`; higher is predicted faster. Candidates
    /// that cannot be lowered score `f32::MIN`.
    fn predict(&mut self, task: &Task, states: &[State]) -> Result<Vec<f32>, CostError>;
}

/// The baseline every report compares with: uniformly random scores.
pub struct RandomModel {
    rng: StdRng,
}

impl RandomModel {
    /// A random model drawing from `seed`.
    pub fn new(seed: u64) -> RandomModel {
        RandomModel {
            rng: StdRng::seed_from_u64(seed),
        }
    }
}

impl CostModel for RandomModel {
    fn name(&self) -> String {
        "random".into()
    }

    fn update(&mut self, _: &Task, _: &[State], _: &[MeasureResult]) -> Result<(), CostError> {
        Ok(())
    }

    fn predict(&mut self, _: &Task, states: &[State]) -> Result<Vec<f32>, CostError> {
        Ok(states
            .iter()
            .map(|_| self.rng.random_range(0.0..1.0))
            .collect())
    }
}

/// Most rows a learned model trains on; beyond this, each workload keeps its
/// best rows and a sample of the rest.
pub const MAX_TRAINING_ROWS: usize = 20_000;

/// Workloads with fewer measured records than this are ranked by the
/// pretrained model, when there is one.
pub const MIN_RECORDS_OF_OWN: usize = 64;

/// Feature rows of one workload and their costs in seconds (`None`: failed).
type WorkloadRecords = (Vec<Vec<f32>>, Vec<Option<f64>>);

/// A learned cost model: program features → [`Learner`], retrained on all
/// records so far after each update; a pretrained learner (if given) ranks
/// workloads it has too few records of.
pub struct LearnedModel {
    learner: Box<dyn Learner>,
    pretrained: Option<Box<dyn Learner>>,
    trained: bool,
    /// Per workload key: feature rows and costs.
    records: BTreeMap<String, WorkloadRecords>,
}

impl LearnedModel {
    /// A model that trains `learner` on the records it is given.
    pub fn new(learner: Box<dyn Learner>) -> LearnedModel {
        LearnedModel {
            learner,
            pretrained: None,
            trained: false,
            records: BTreeMap::new(),
        }
    }

    /// Uses `pretrained` for workloads with fewer than [`MIN_RECORDS_OF_OWN`] records.
    pub fn with_pretrained(mut self, pretrained: Box<dyn Learner>) -> LearnedModel {
        self.pretrained = Some(pretrained);
        self
    }

    /// The learner being trained.
    pub fn learner(&self) -> &dyn Learner {
        self.learner.as_ref()
    }

    /// Adds rows without retraining (for bulk loading from a database).
    pub fn add_records(&mut self, workload: &str, rows: Vec<Vec<f32>>, costs: Vec<Option<f64>>) {
        let entry = self.records.entry(workload.to_string()).or_default();
        entry.0.extend(rows);
        entry.1.extend(costs);
    }

    /// The training set of every record so far.
    pub fn training_set(&self) -> TrainingSet {
        let total: usize = self.records.values().map(|(r, _)| r.len()).sum();
        let mut set = TrainingSet::new(FEATURE_LEN);
        for (rows, costs) in self.records.values() {
            if total <= MAX_TRAINING_ROWS {
                set.push_group(rows, costs);
                continue;
            }
            // Keep the group's share of the budget: its best rows first.
            let share = (MAX_TRAINING_ROWS * rows.len()).div_ceil(total).max(1);
            let mut order: Vec<usize> = (0..rows.len()).collect();
            order.sort_by(|&a, &b| {
                let cost = |i: usize| costs[i].unwrap_or(f64::INFINITY);
                cost(a).total_cmp(&cost(b))
            });
            let stride = (rows.len() / share).max(1);
            let picked: Vec<usize> = order
                .iter()
                .enumerate()
                .filter(|(rank, _)| *rank < share / 2 || rank % stride == 0)
                .map(|(_, &i)| i)
                .take(share)
                .collect();
            let rows: Vec<Vec<f32>> = picked.iter().map(|&i| rows[i].clone()).collect();
            let costs: Vec<Option<f64>> = picked.iter().map(|&i| costs[i]).collect();
            set.push_group(&rows, &costs);
        }
        set
    }

    /// Retrains the learner on every record so far.
    pub fn retrain(&mut self) -> Result<(), CostError> {
        let set = self.training_set();
        if set.is_empty() {
            return Ok(());
        }
        self.learner.fit(&set)?;
        self.trained = true;
        Ok(())
    }

    fn own_records(&self, task: &Task) -> usize {
        self.records
            .get(&task.key().hash)
            .map_or(0, |(r, _)| r.len())
    }
}

/// Feature rows of `states`; `None` for candidates that cannot be lowered.
pub fn feature_rows(states: &[State]) -> Vec<Option<Vec<f32>>> {
    states.iter().map(|s| program_features(s).ok()).collect()
}

impl CostModel for LearnedModel {
    fn name(&self) -> String {
        self.learner.name().to_string()
    }

    fn update(
        &mut self,
        task: &Task,
        states: &[State],
        results: &[MeasureResult],
    ) -> Result<(), CostError> {
        let mut rows = Vec::new();
        let mut costs = Vec::new();
        for (row, result) in feature_rows(states).into_iter().zip(results) {
            if let Some(row) = row {
                rows.push(row);
                costs.push(result.median());
            }
        }
        self.add_records(&task.key().hash, rows, costs);
        self.retrain()
    }

    fn predict(&mut self, task: &Task, states: &[State]) -> Result<Vec<f32>, CostError> {
        let rows = feature_rows(states);
        let learner: &dyn Learner = match &self.pretrained {
            Some(p) if !self.trained || self.own_records(task) < MIN_RECORDS_OF_OWN => p.as_ref(),
            _ => self.learner.as_ref(),
        };
        let mut dense: Vec<f32> = Vec::with_capacity(rows.len() * FEATURE_LEN);
        for row in &rows {
            match row {
                Some(r) => dense.extend_from_slice(r),
                None => dense.resize(dense.len() + FEATURE_LEN, 0.0),
            }
        }
        let scores = if self.trained || self.pretrained.is_some() {
            learner.predict(&dense, FEATURE_LEN)?
        } else {
            vec![0.0; rows.len()]
        };
        Ok(rows
            .iter()
            .zip(scores)
            .map(|(r, s)| if r.is_some() { s } else { f32::MIN })
            .collect())
    }
}
