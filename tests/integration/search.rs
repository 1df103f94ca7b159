//! The auto-scheduler: every sketch of every op, randomly annotated, lowers,
//! compiles and computes what the reference computes; the tuner measures
//! what its cost model ranks first, teaches it every measurement, and
//! reports the fastest record and the default's.

use crate::common;

use common::{assert_close, build, random_inputs, reduction_length, reference, small_cases};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{self, CodegenOptions};
use tessera::runtime::Target;
use tessera::search::{generate_sketches, materialize, random_decisions};
use tessera::tir;

#[test]
fn every_sketch_of_every_op_annotated_at_random_equals_the_reference() {
    let seeds: u64 = std::env::var("TESSERA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let mut checked = 0;
    for (n, (op, params)) in small_cases().iter().enumerate() {
        let dag = build(op, params);
        let sketches = generate_sketches(&dag, &Target::from_env());
        assert!(!sketches.is_empty(), "{op}: no sketch");
        for sketch in &sketches {
            for seed in 0..seeds {
                let mut rng = StdRng::seed_from_u64(seed * 7919 + n as u64);
                let decisions = random_decisions(sketch, &mut rng);
                let state = materialize(&dag, sketch, &decisions)
                    .unwrap_or_else(|e| panic!("{op}: {e}\n{decisions:?}"));
                let label = format!("{op} [{}] {decisions:?}", sketch.name);
                let func = tir::lower(&state).unwrap_or_else(|e| panic!("{label}: lowering: {e}"));
                let kernel = codegen::compile(&func, &CodegenOptions::default())
                    .unwrap_or_else(|e| panic!("{label}: compile: {e}"));
                let inputs = random_inputs(&dag, seed);
                let got = kernel
                    .run_host(&inputs)
                    .unwrap_or_else(|e| panic!("{label}: run: {e}"));
                let steps = serde_json::to_string(state.steps()).unwrap_or_default();
                assert_close(
                    &format!("{label} steps={steps}"),
                    &got,
                    &reference(&dag, &inputs),
                    reduction_length(&dag),
                );
                checked += 1;
            }
        }
    }
    println!("{checked} annotated sketches checked");
}

mod tuning {
    use std::collections::{HashMap, HashSet};
    use std::sync::atomic::AtomicBool;

    use super::common::Scratch;
    use tessera::cost::{CostError, CostModel, LearnedModel, RandomModel, new_learner};
    use tessera::db::TuningDb;
    use tessera::measure::{MeasureResult, Task};
    use tessera::runtime::host_device;
    use tessera::schedule::{State, Step};
    use tessera::search::{
        RemeasureOptions, SearchOptions, SearchPolicy, TuneOptions, TuneReport, steps_key, tune,
    };

    fn options(trials: usize, seed: u64) -> TuneOptions {
        TuneOptions {
            trials,
            batch_size: 4,
            seed,
            early_stopping: None,
            search: SearchOptions {
                population: 32,
                generations: 2,
                ..SearchOptions::default()
            },
            remeasure: RemeasureOptions::off(),
        }
    }

    fn run(db: &mut TuningDb, task: &Task, trials: usize, seed: u64) -> TuneReport {
        let mut model = RandomModel::new(seed);
        tune(
            task,
            &mut crate::common::fast_measurer(),
            Some(db),
            &mut model,
            &options(trials, seed),
            &|_| {},
            &AtomicBool::new(false),
        )
        .expect("tunes")
    }

    /// Checks `report` against what `db` holds of `task` on this device: the
    /// best is the fastest measured record (one of them on a tie), at that
    /// record's speed, and the default is the measurement of the empty step
    /// list. Returns how many records there are.
    fn assert_report_is_the_records(task: &Task, report: &TuneReport, db: &TuningDb) -> usize {
        let records = db
            .records(&task.key().hash, &host_device().key().hash)
            .expect("records");
        let gflops = |cost: f64| task.dag().flop_count() as f64 / cost / 1e9;
        let fastest = records
            .iter()
            .filter_map(|r| r.result.median())
            .min_by(f64::total_cmp)
            .expect("a record measured");
        let best = report.best_gflops.expect("a best");
        assert!(
            (best - gflops(fastest)).abs() <= 1e-9 * best,
            "best {best} GFLOP/s, the fastest record {} GFLOP/s",
            gflops(fastest)
        );
        assert!(
            records
                .iter()
                .any(|r| r.result.median() == Some(fastest) && r.steps == report.best_steps),
            "the best steps {:?} are not a fastest record",
            report.best_steps
        );
        let defaults: Vec<f64> = records
            .iter()
            .filter(|r| r.steps.is_empty())
            .map(|r| r.result.median().expect("the default runs"))
            .collect();
        assert_eq!(defaults.len(), 1, "the default is measured once");
        assert_eq!(
            report.default_gflops,
            Some(gflops(defaults[0])),
            "the default's speed is its record's"
        );
        records.len()
    }

    /// Proposals of a search fed fake costs (a function of the steps), so
    /// that nothing depends on timings.
    fn proposals(seed: u64, rounds: usize) -> Vec<Vec<tessera::schedule::Step>> {
        let task = Task::from_registry("dense_bias_relu", "M=8,N=16,K=12").expect("task");
        let sketches =
            tessera::search::generate_sketches(task.dag(), &tessera::runtime::Target::from_env());
        let mut policy = SearchPolicy::new(task.clone(), sketches, options(0, seed).search, seed);
        let mut model = RandomModel::new(seed);
        let mut out = Vec::new();
        for _ in 0..rounds {
            for c in policy.next_batch(&mut model, 4).expect("proposes") {
                let cost = (steps_key(c.state.steps()) % 1000) as f64 * 1e-6 + 1e-6;
                out.push(c.state.steps().to_vec());
                policy.add_measured(c, Some(cost));
            }
        }
        out
    }

    #[test]
    fn same_seed_and_measurements_propose_the_same_candidates() {
        let a = proposals(5, 4);
        assert_eq!(a.len(), 16);
        assert_eq!(a, proposals(5, 4));
        assert_ne!(a, proposals(6, 4), "another seed, other candidates");
        let keys: HashSet<u64> = a.iter().map(|s| steps_key(s)).collect();
        assert_eq!(keys.len(), a.len(), "never the same candidate twice");
    }

    #[test]
    fn the_budget_is_respected_and_nothing_is_measured_twice() {
        let task = Task::from_registry("dense_bias_relu", "M=8,N=16,K=12").expect("task");
        let mut db = TuningDb::open_in_memory().expect("db");
        let report = run(&mut db, &task, 10, 5);
        assert_eq!(report.trials, 10);
        let records = db.all_records().expect("records");
        assert_eq!(records.len(), 11, "10 candidates and the default");
        let keys: HashSet<u64> = records.iter().map(|r| steps_key(&r.steps)).collect();
        assert_eq!(keys.len(), records.len(), "no candidate measured twice");
        assert_report_is_the_records(&task, &report, &db);
        assert_eq!(report.curve.len(), 3, "batches of 4, 4 and 2");
    }

    #[test]
    fn a_second_run_continues_from_the_database() {
        let task = Task::from_registry("matmul", "M=16,N=16,K=16").expect("task");
        let dir = Scratch::new("search-resume");
        let path = dir.join("t.db");
        let mut db = TuningDb::open(&path).expect("db");
        let first = run(&mut db, &task, 8, 1);
        assert_report_is_the_records(&task, &first, &db);
        drop(db);
        let mut db = TuningDb::open(&path).expect("db");
        let second = run(&mut db, &task, 8, 1);
        assert_eq!(second.prior_records, 9, "8 candidates and the default");
        assert_eq!(second.trials, 8);
        let records = db.all_records().expect("records");
        assert_eq!(records.len(), 17, "the default is not measured again");
        let keys: HashSet<u64> = records.iter().map(|r| steps_key(&r.steps)).collect();
        assert_eq!(
            keys.len(),
            17,
            "the second run proposes only new candidates"
        );
        assert_eq!(
            assert_report_is_the_records(&task, &second, &db),
            17,
            "the best and the default are over both runs"
        );
        assert_eq!(second.default_gflops, first.default_gflops);
    }

    /// A cost model with a fixed, arbitrary opinion (a hash of the steps) that
    /// remembers what it was asked before it was first taught, and what it
    /// was taught.
    #[derive(Default)]
    struct Opinionated {
        /// Steps scored before the first update, with their scores.
        asked: Vec<(f32, Vec<Step>)>,
        /// Steps of each update, in order.
        taught: Vec<Vec<Vec<Step>>>,
    }

    impl Opinionated {
        fn score(steps: &[Step]) -> f32 {
            // 24 bits: every score is exact in an f32, so ties are real ties.
            (steps_key(steps) >> 40) as f32
        }
    }

    impl CostModel for Opinionated {
        fn name(&self) -> String {
            "opinionated".into()
        }

        fn update(
            &mut self,
            _: &Task,
            states: &[State],
            results: &[MeasureResult],
        ) -> Result<(), CostError> {
            assert_eq!(states.len(), results.len());
            self.taught
                .push(states.iter().map(|s| s.steps().to_vec()).collect());
            Ok(())
        }

        fn predict(&mut self, _: &Task, states: &[State]) -> Result<Vec<f32>, CostError> {
            let scores: Vec<f32> = states.iter().map(|s| Self::score(s.steps())).collect();
            if self.taught.is_empty() {
                for (state, &score) in states.iter().zip(&scores) {
                    self.asked.push((score, state.steps().to_vec()));
                }
            }
            Ok(scores)
        }
    }

    #[test]
    fn the_cost_model_picks_the_first_batch_and_learns_every_measurement() {
        let task = Task::from_registry("matmul", "M=32,N=32,K=32").expect("task");
        let mut db = TuningDb::open_in_memory().expect("db");
        let mut model = Opinionated::default();
        // Batches are the model's best guesses only: no random candidates
        // and no share kept for sketches the greedy picks leave out.
        let mut options = options(8, 2);
        options.search.eps_greedy = 0.0;
        options.search.sketch_share = 0.0;
        let report = tune(
            &task,
            &mut crate::common::fast_measurer(),
            Some(&mut db),
            &mut model,
            &options,
            &|_| {},
            &AtomicBool::new(false),
        )
        .expect("tunes");
        assert_eq!(report.trials, 8);
        // The model's four favourites among the distinct candidates it was
        // shown (the default was measured before and is never proposed).
        let distinct: HashMap<u64, f32> = model
            .asked
            .iter()
            .filter(|(_, steps)| !steps.is_empty())
            .map(|(score, steps)| (steps_key(steps), *score))
            .collect();
        let mut asked: Vec<(f32, u64)> = distinct.into_iter().map(|(k, s)| (s, k)).collect();
        asked.sort_by(|a, b| b.0.total_cmp(&a.0));
        assert!(asked.len() > 16, "{} candidates scored", asked.len());
        assert!(asked[3].0 > asked[4].0, "no tie at the cut");
        let favourites: HashSet<u64> = asked[..4].iter().map(|&(_, key)| key).collect();
        assert_eq!(model.taught.len(), 2, "batches of 4 and 4");
        let first: HashSet<u64> = model.taught[0].iter().map(|s| steps_key(s)).collect();
        assert_eq!(first, favourites, "the first batch is the model's top 4");
        // Every measured candidate, and only those, taught the model.
        let records = db
            .records(&task.key().hash, &host_device().key().hash)
            .expect("records");
        let measured: HashSet<u64> = records
            .iter()
            .filter(|r| !r.steps.is_empty())
            .map(|r| steps_key(&r.steps))
            .collect();
        let taught: HashSet<u64> = model.taught.concat().iter().map(|s| steps_key(s)).collect();
        assert_eq!(taught, measured);
        assert_report_is_the_records(&task, &report, &db);
    }

    #[test]
    fn the_learned_model_trains_on_every_candidate_it_saw_measured() {
        let task = Task::from_registry("matmul", "M=32,N=32,K=32").expect("task");
        let mut db = TuningDb::open_in_memory().expect("db");
        let mut model =
            LearnedModel::new(new_learner(tessera::cost::DEFAULT_LEARNER).expect("learner"));
        let report = tune(
            &task,
            &mut crate::common::fast_measurer(),
            Some(&mut db),
            &mut model,
            &options(12, 2),
            &|_| {},
            &AtomicBool::new(false),
        )
        .expect("tunes");
        assert_eq!(report.trials, 12);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(model.training_set().len(), 12, "one row per trial");
        assert_report_is_the_records(&task, &report, &db);
    }
}

#[test]
fn recorded_steps_map_back_to_their_sketch_and_decisions() {
    for (n, (op, params)) in small_cases().iter().enumerate() {
        let dag = build(op, params);
        let sketches = generate_sketches(&dag, &Target::from_env());
        for seed in 0..4 {
            let mut rng = StdRng::seed_from_u64(seed + 100 * n as u64);
            let k = (seed as usize) % sketches.len();
            let decisions = random_decisions(&sketches[k], &mut rng);
            let state = materialize(&dag, &sketches[k], &decisions).expect("materializes");
            let found = tessera::search::infer_candidate(&dag, &sketches, state.steps())
                .unwrap_or_else(|| panic!("{op}: {} not recovered", sketches[k].name));
            assert_eq!(found.state.steps(), state.steps(), "{op}");
        }
    }
}
