//! The evolutionary search: a population of annotated sketches evolves
//! under mutation and crossover with the cost model as fitness; each round
//! proposes the best predicted candidates never measured, mixed ε-greedily
//! with random ones.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cost::{CostError, CostModel};
use crate::measure::Task;
use crate::schedule::{State, Step};

use super::annotate::{
    Decisions, UNROLL_CHOICES, blocks, materialize, random_decisions, random_pack, random_row_math,
    resample_follow_factors,
};
use super::factor::mutate_factors;
use super::sketch::Sketch;

/// Options of the evolutionary search (defaults scaled down from Ansor's
/// for a 2-core machine; all exposed on the command line).
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOptions {
    /// Candidates per generation.
    pub population: usize,
    /// Generations per round.
    pub generations: usize,
    /// Probability that a child is a mutation (else a crossover).
    pub mutation_prob: f64,
    /// Fraction of each batch drawn at random instead of by predicted score.
    pub eps_greedy: f64,
    /// Most of each batch given to the best predicted candidate of each
    /// sketch the greedy picks left out, so that no sketch goes unmeasured
    /// because the model has not seen its kind yet.
    pub sketch_share: f64,
    /// Best measured candidates that seed each round's population.
    pub seeds: usize,
    /// Whether sketches that call micro-kernels (`tensorize`) are searched;
    /// off, the search is over code Cranelift generates alone.
    pub tensorize: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            population: 256,
            generations: 4,
            mutation_prob: 0.85,
            eps_greedy: 0.05,
            sketch_share: 0.25,
            seeds: 32,
            tensorize: true,
        }
    }
}

/// A complete candidate: which sketch, its decisions, the schedule.
#[derive(Clone)]
pub struct Candidate {
    /// Index of the sketch.
    pub sketch: usize,
    /// The decisions.
    pub decisions: Decisions,
    /// The schedule they make.
    pub state: State,
    /// [`steps_key`] of the schedule's steps.
    pub key: u64,
}

impl Candidate {
    /// A candidate, its key computed once.
    pub fn new(sketch: usize, decisions: Decisions, state: State) -> Candidate {
        let key = steps_key(state.steps());
        Candidate {
            sketch,
            decisions,
            state,
            key,
        }
    }
}

/// A stable fingerprint of a step list (no candidate is measured twice).
pub fn steps_key(steps: &[Step]) -> u64 {
    let mut h = DefaultHasher::new();
    steps.hash(&mut h);
    h.finish()
}

/// The search's state across rounds.
pub struct SearchPolicy {
    task: Task,
    sketches: Vec<Sketch>,
    options: SearchOptions,
    rng: StdRng,
    measured: HashSet<u64>,
    /// Measured candidates with their cost in seconds (best first).
    elite: Vec<(f64, Candidate)>,
}

impl SearchPolicy {
    /// A search over `sketches` of `task`.
    pub fn new(
        task: Task,
        sketches: Vec<Sketch>,
        options: SearchOptions,
        seed: u64,
    ) -> SearchPolicy {
        SearchPolicy {
            task,
            sketches,
            options,
            rng: StdRng::seed_from_u64(seed),
            measured: HashSet::new(),
            elite: Vec::new(),
        }
    }

    /// The sketches.
    pub fn sketches(&self) -> &[Sketch] {
        &self.sketches
    }

    /// Marks a step list as measured (so it is never proposed).
    pub fn mark_measured(&mut self, steps: &[Step]) {
        self.measured.insert(steps_key(steps));
    }

    /// Whether a step list was measured.
    pub fn was_measured(&self, steps: &[Step]) -> bool {
        self.measured.contains(&steps_key(steps))
    }

    /// Remembers a measured candidate's cost (seeds later populations).
    pub fn add_measured(&mut self, candidate: Candidate, cost: Option<f64>) {
        self.measured.insert(candidate.key);
        if let Some(c) = cost {
            self.elite.push((c, candidate));
            self.elite.sort_by(|a, b| a.0.total_cmp(&b.0));
            self.elite.truncate(self.options.seeds.max(1));
        }
    }

    fn make(&self, sketch: usize, decisions: Decisions) -> Option<Candidate> {
        let state = materialize(self.task.dag(), &self.sketches[sketch], &decisions).ok()?;
        Some(Candidate::new(sketch, decisions, state))
    }

    /// A random annotated sketch (sketches taken in turn).
    pub fn random_candidate(&mut self) -> Option<Candidate> {
        if self.sketches.is_empty() {
            return None;
        }
        for _ in 0..16 {
            let sketch = self.rng.random_range(0..self.sketches.len());
            let decisions = random_decisions(&self.sketches[sketch], &mut self.rng);
            if let Some(c) = self.make(sketch, decisions) {
                return Some(c);
            }
        }
        None
    }

    fn mutate(&mut self, parent: &Candidate) -> Option<Candidate> {
        let sketch = &self.sketches[parent.sketch];
        let mut d = parent.decisions.clone();
        let tiles = sketch.tiles();
        let roll: f64 = self.rng.random_range(0.0..1.0);
        if roll < 0.6 && !tiles.is_empty() {
            let t = self.rng.random_range(0..tiles.len());
            let room = sketch
                .follow_links()
                .iter()
                .find(|(outer, _, _)| *outer == t)
                .map(|(_, tile, extent)| blocks(*extent, &d.tiles[*tile]));
            d.tiles[t] = mutate_factors(room.unwrap_or(tiles[t].0), &d.tiles[t], &mut self.rng);
            resample_follow_factors(sketch, &mut d.tiles, &mut self.rng, false);
        } else if !d.parallel.is_empty() {
            let s = self.rng.random_range(0..d.parallel.len());
            let site = &sketch.sites[s];
            match self.rng.random_range(0..5) {
                3 if !site.row_math.is_empty() => {
                    d.row_math[s] = random_row_math(site, &mut self.rng);
                }
                4 if !site.pack.is_empty() => d.pack[s] = random_pack(site, &mut self.rng),
                0 if site.parallel => {
                    let p = d.parallel[s] as i64 + if self.rng.random_bool(0.5) { 1 } else { -1 };
                    d.parallel[s] = p.clamp(0, 4) as usize;
                }
                1 if site.unroll => {
                    d.unroll[s] = UNROLL_CHOICES[self.rng.random_range(0..UNROLL_CHOICES.len())];
                }
                _ if site.vectorize => d.vectorize[s] = !d.vectorize[s],
                _ => {}
            }
        }
        self.make(parent.sketch, d)
    }

    fn crossover(&mut self, a: &Candidate, b: &Candidate) -> Option<Candidate> {
        if a.sketch != b.sketch {
            return None;
        }
        let mut d = a.decisions.clone();
        for (i, t) in d.tiles.iter_mut().enumerate() {
            if self.rng.random_bool(0.5) {
                *t = b.decisions.tiles[i].clone();
            }
        }
        for i in 0..d.parallel.len() {
            if self.rng.random_bool(0.5) {
                d.parallel[i] = b.decisions.parallel[i];
                d.vectorize[i] = b.decisions.vectorize[i];
                d.unroll[i] = b.decisions.unroll[i];
                d.row_math[i] = b.decisions.row_math[i];
                d.pack[i] = b.decisions.pack[i];
            }
        }
        self.make(a.sketch, d)
    }

    fn tournament(&mut self, scores: &[f32]) -> usize {
        let a = self.rng.random_range(0..scores.len());
        let b = self.rng.random_range(0..scores.len());
        if scores[a] >= scores[b] { a } else { b }
    }

    /// Runs the evolution and returns up to `n` unmeasured candidates:
    /// the best predicted, with a fraction `eps_greedy` of random ones.
    pub fn next_batch(
        &mut self,
        model: &mut dyn CostModel,
        n: usize,
    ) -> Result<Vec<Candidate>, CostError> {
        let mut population: Vec<Candidate> = self.elite.iter().map(|(_, c)| c.clone()).collect();
        while population.len() < self.options.population {
            match self.random_candidate() {
                Some(c) => population.push(c),
                None => break,
            }
        }
        if population.is_empty() {
            return Ok(Vec::new());
        }
        let mut seen: HashSet<u64> = HashSet::new();
        let mut pool: Vec<(f32, Candidate)> = Vec::new();
        for generation in 0..=self.options.generations {
            let states: Vec<State> = population.iter().map(|c| c.state.clone()).collect();
            let scores = model.predict(&self.task, &states)?;
            for (c, &s) in population.iter().zip(&scores) {
                let key = c.key;
                if !self.measured.contains(&key) && seen.insert(key) {
                    pool.push((s, c.clone()));
                }
            }
            if generation == self.options.generations {
                break;
            }
            let mut next = Vec::with_capacity(population.len());
            let mut order: Vec<usize> = (0..population.len()).collect();
            order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
            next.extend(
                order
                    .iter()
                    .take(population.len() / 10)
                    .map(|&i| population[i].clone()),
            );
            let mut attempts = 0;
            while next.len() < population.len() && attempts < population.len() * 4 {
                attempts += 1;
                let p = self.tournament(&scores);
                let child = if self.rng.random_bool(self.options.mutation_prob) {
                    let parent = population[p].clone();
                    self.mutate(&parent)
                } else {
                    let q = self.tournament(&scores);
                    let (a, b) = (population[p].clone(), population[q].clone());
                    self.crossover(&a, &b)
                };
                if let Some(c) = child {
                    next.push(c);
                }
            }
            population = next;
        }
        pool.sort_by(|a, b| b.0.total_cmp(&a.0));
        let random_share = ((n as f64) * self.options.eps_greedy).round() as usize;
        let sketch_share = ((n as f64) * self.options.sketch_share).round() as usize;
        let greedy = n.saturating_sub(random_share + sketch_share);
        let mut batch: Vec<Candidate> = Vec::with_capacity(n);
        let mut chosen: HashSet<u64> = HashSet::new();
        let mut take = |c: &Candidate, batch: &mut Vec<Candidate>| {
            if chosen.insert(c.key) {
                batch.push(c.clone());
            }
        };
        for (_, c) in &pool {
            if batch.len() >= greedy {
                break;
            }
            take(c, &mut batch);
        }
        // The best of each sketch not yet in the batch (the pool is sorted,
        // so the first candidate of a sketch is its best).
        let mut represented: HashSet<usize> = batch.iter().map(|c| c.sketch).collect();
        for (_, c) in &pool {
            if batch.len() >= greedy + sketch_share {
                break;
            }
            if represented.insert(c.sketch) {
                take(c, &mut batch);
            }
        }
        for (_, c) in &pool {
            if batch.len() + random_share >= n {
                break;
            }
            take(c, &mut batch);
        }
        let mut attempts = 0;
        while batch.len() < n && attempts < n * 20 {
            attempts += 1;
            let Some(c) = self.random_candidate() else {
                break;
            };
            let key = c.key;
            if !self.measured.contains(&key) && chosen.insert(key) {
                batch.push(c);
            }
        }
        for c in &batch {
            self.measured.insert(c.key);
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::MeasureResult;
    use crate::search::generate_sketches;

    /// Scores every candidate that packs an operand above every other one.
    struct PrefersPacking;

    impl CostModel for PrefersPacking {
        fn name(&self) -> String {
            "prefers-packing".into()
        }

        fn update(&mut self, _: &Task, _: &[State], _: &[MeasureResult]) -> Result<(), CostError> {
            Ok(())
        }

        fn predict(&mut self, _: &Task, states: &[State]) -> Result<Vec<f32>, CostError> {
            Ok(states
                .iter()
                .map(|s| {
                    let packs = s
                        .steps()
                        .iter()
                        .any(|step| matches!(step, Step::CacheRead { .. }));
                    if packs { 1.0 } else { 0.0 }
                })
                .collect())
        }
    }

    fn sketches_in_first_batch(sketch_share: f64) -> HashSet<usize> {
        let task = Task::from_registry("matmul", "M=64,N=64,K=64").expect("task");
        let sketches = generate_sketches(task.dag(), &crate::runtime::Target::from_env());
        let options = SearchOptions {
            population: 64,
            generations: 1,
            eps_greedy: 0.0,
            sketch_share,
            ..SearchOptions::default()
        };
        let mut policy = SearchPolicy::new(task, sketches, options, 11);
        let batch = policy.next_batch(&mut PrefersPacking, 32).expect("batch");
        assert_eq!(batch.len(), 32);
        batch.iter().map(|c| c.sketch).collect()
    }

    #[test]
    fn every_sketch_gets_a_share_of_the_batch_whatever_the_model_prefers() {
        let task = Task::from_registry("matmul", "M=64,N=64,K=64").expect("task");
        let count = generate_sketches(task.dag(), &crate::runtime::Target::from_env()).len();
        assert_eq!(sketches_in_first_batch(0.25).len(), count);
        assert!(sketches_in_first_batch(0.0).len() < count);
    }
}
