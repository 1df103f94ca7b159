//! The task scheduler (Ansor §6): tunes several workloads under one trial
//! budget, giving each round to the task expected to lower the end-to-end
//! objective the most.
//!
//! The objective is `f = Σᵢ wᵢ·gᵢ`, with `gᵢ` the best latency of task `i`
//! and `wᵢ` its weight (occurrences in the model). Time is counted in rounds
//! of `tᵢ` (one batch of candidates each). After a round-robin warm-up (one
//! round per task, in suite order), each round goes to the task with the
//! most negative estimated gradient
//!
//! ```text
//! ∂f/∂tᵢ ≈ wᵢ · ( α · (gᵢ(tᵢ) − gᵢ(tᵢ−Δt)) / Δt
//!               + (1−α) · ( min(gᵢ(tᵢ) − gᵢ(tᵢ)/tᵢ,  β·Cᵢ / maxₖ∈N(i) Vₖ) − gᵢ(tᵢ) ) )
//! ```
//!
//! — a backward term (the improvement rate over the last `Δt` rounds; 0
//! before `Δt + 1` rounds) and an optimistic forward term: the latency could
//! keep falling at its average rate so far (`gᵢ/tᵢ` per round), or reach `β`
//! times the latency it would have at the best throughput `Vₖ` (FLOP/s)
//! reached by a similar task (`N(i)`: the tasks of the same op, `Cᵢ` the
//! task's FLOPs; the bound applies only when there are such tasks).
//! Defaults are the paper's: `α = 0.2`, `β = 2`, `Δt = 3`, and with
//! probability `ε = 0.05` a round goes to a random live task instead.
//! When every gradient is equal the choice is random; otherwise ties go to
//! the first task. A task is retired when its search has nothing new, after
//! `early_stopping` trials without improvement, or when it still has no valid
//! schedule after `Δt` rounds. A task tuned more than
//! [`DISSIMILAR_AFTER_ROUNDS`] rounds beyond every other task of its group
//! and still below `1/β` of the group's best throughput leaves the group
//! ([`leave_dissimilar_group`]): it was not similar after all. As in TVM,
//! every round measures `min(batch_size, total_trials / tasks)` candidates, so that the warm-up
//! fits in the budget.
//!
//! At the end, the best candidates of every task are re-measured in fresh
//! workers (see [`remeasure_best`]); those runs are not trials.
//!
//! [`gradient`] and [`pick_task`] are pure functions of the per-task
//! [`TaskHistory`], so the policy is testable without measuring anything;
//! with the same seed and the same histories the choices are the same.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, RngExt, SeedableRng};
use serde::Serialize;

use crate::cost::CostModel;
use crate::db::TuningDb;
use crate::measure::Measurer;

use super::evolution::SearchOptions;
use super::remeasure::RemeasureOptions;
use super::suite::SuiteTask;
use super::tuner::{Progress, TaskTuner, TuneError, TuneEvent, TuneReport, remeasure_best};

/// Parameters of the gradient-based allocation (Ansor's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SchedulerParams {
    /// Weight of the backward (observed) term against the forward (optimistic) one.
    pub alpha: f64,
    /// How far behind its similar tasks' best throughput a task may expect to get.
    pub beta: f64,
    /// Rounds over which the backward improvement rate is measured (`Δt`).
    pub backward_window: usize,
    /// Probability that a round goes to a random live task.
    pub eps_greedy: f64,
}

impl Default for SchedulerParams {
    fn default() -> Self {
        SchedulerParams {
            alpha: 0.2,
            beta: 2.0,
            backward_window: 3,
            eps_greedy: 0.05,
        }
    }
}

/// What the scheduler knows of one task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskHistory {
    /// Occurrences in the model (`wᵢ`).
    pub weight: f64,
    /// FLOPs of one run (`Cᵢ`).
    pub flops: f64,
    /// Tasks of one group are similar (here: the same
    /// [`Task::family`](crate::measure::Task::family): the registry op, or
    /// a DAG task's label up to its first `[`); `None` once it left its
    /// group ([`leave_dissimilar_group`]).
    pub group: Option<String>,
    /// The best latency in seconds after each of the task's rounds (`None`:
    /// no valid schedule yet). Its length is `tᵢ`.
    pub best_costs: Vec<Option<f64>>,
    /// Retired: never picked again.
    pub dead: bool,
}

impl TaskHistory {
    /// A task not tuned yet.
    pub fn new(weight: f64, flops: f64, group: impl Into<String>) -> TaskHistory {
        TaskHistory {
            weight,
            flops,
            group: Some(group.into()),
            best_costs: Vec::new(),
            dead: false,
        }
    }

    /// The latest best latency.
    pub fn best(&self) -> Option<f64> {
        self.best_costs.last().copied().flatten()
    }

    /// Rounds so far (`tᵢ`).
    pub fn rounds(&self) -> usize {
        self.best_costs.len()
    }
}

/// The estimated `∂f/∂tᵢ` of task `i` (≤ 0; more negative is more
/// promising). `-∞` for a task without rounds or without a valid schedule:
/// it is tuned first.
pub fn gradient(histories: &[TaskHistory], i: usize, params: &SchedulerParams) -> f64 {
    let h = &histories[i];
    let t = h.rounds();
    let Some(g) = h.best() else {
        return f64::NEG_INFINITY;
    };
    let window = params.backward_window.max(1);
    let backward = match t.checked_sub(window + 1).map(|k| h.best_costs[k]) {
        Some(Some(old)) => (g - old) / window as f64,
        _ => 0.0,
    };
    let linear = g - g / t as f64;
    let in_group = |o: &&TaskHistory| h.group.is_some() && o.group == h.group;
    let peers = histories.iter().filter(in_group).count();
    let best_rate = histories
        .iter()
        .filter(in_group)
        .filter_map(|o| o.best().map(|c| o.flops / c))
        .fold(0.0, f64::max);
    let similar = if peers > 1 && best_rate > 0.0 {
        params.beta * h.flops / best_rate
    } else {
        f64::INFINITY
    };
    let forward = linear.min(similar) - g;
    h.weight * (params.alpha * backward + (1.0 - params.alpha) * forward)
}

/// Rounds beyond every peer's after which a task still short of its
/// group's best throughput leaves the group (TVM's
/// `_adjust_similarity_group`).
pub const DISSIMILAR_AFTER_ROUNDS: usize = 5;

/// Takes task `i` out of its similarity group when it is not similar after
/// all: tuned more than [`DISSIMILAR_AFTER_ROUNDS`] rounds beyond every
/// other task of the group, its throughput is still below `1/β` of the
/// group's best. Its forward term then no longer expects that throughput
/// (an RGB stem convolution with 3 input channels never reaches a 1×1
/// convolution's, and without this took most of a model's rounds). Returns
/// whether it left.
pub fn leave_dissimilar_group(
    histories: &mut [TaskHistory],
    i: usize,
    params: &SchedulerParams,
) -> bool {
    let Some(group) = &histories[i].group else {
        return false;
    };
    let peers: Vec<usize> = (0..histories.len())
        .filter(|&j| j != i && histories[j].group.as_ref() == Some(group))
        .collect();
    let rate = |h: &TaskHistory| h.best().map_or(0.0, |c| h.flops / c);
    let Some(most_peer_rounds) = peers.iter().map(|&j| histories[j].rounds()).max() else {
        return false;
    };
    let best_rate = peers
        .iter()
        .map(|&j| rate(&histories[j]))
        .fold(rate(&histories[i]), f64::max);
    let dissimilar = rate(&histories[i]) < best_rate / params.beta
        && histories[i].rounds() > most_peer_rounds + DISSIMILAR_AFTER_ROUNDS;
    if dissimilar {
        histories[i].group = None;
    }
    dissimilar
}

/// The task the next round goes to, `None` when every task is retired:
/// the first task without a round (warm-up), else with probability ε a
/// random live task, else the live task with the most negative [`gradient`].
pub fn pick_task<R: Rng>(
    histories: &[TaskHistory],
    params: &SchedulerParams,
    rng: &mut R,
) -> Option<usize> {
    let alive: Vec<usize> = (0..histories.len())
        .filter(|&i| !histories[i].dead)
        .collect();
    if alive.is_empty() {
        return None;
    }
    if let Some(&fresh) = alive.iter().find(|&&i| histories[i].rounds() == 0) {
        return Some(fresh);
    }
    if rng.random_range(0.0..1.0) < params.eps_greedy {
        return Some(alive[rng.random_range(0..alive.len())]);
    }
    let grads: Vec<f64> = alive
        .iter()
        .map(|&i| gradient(histories, i, params))
        .collect();
    let min = grads.iter().copied().fold(f64::INFINITY, f64::min);
    let max = grads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if min == max {
        return Some(alive[rng.random_range(0..alive.len())]);
    }
    grads.iter().position(|&g| g == min).map(|k| alive[k])
}

/// Options of a suite run.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// Candidates to measure over all tasks (defaults not counted).
    pub total_trials: usize,
    /// Candidates per round (at most `total_trials / tasks`).
    pub batch_size: usize,
    /// Seed of the scheduler and (plus the task's index) of each task's search.
    pub seed: u64,
    /// Retire a task after this many trials without improvement.
    pub early_stopping: Option<usize>,
    /// The evolutionary search of every task.
    pub search: SearchOptions,
    /// The allocation policy.
    pub scheduler: SchedulerParams,
    /// The re-measurement of each task's best candidates at the end.
    pub remeasure: RemeasureOptions,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions {
            total_trials: 1000,
            batch_size: 32,
            seed: 0,
            early_stopping: None,
            search: SearchOptions::default(),
            scheduler: SchedulerParams::default(),
            remeasure: RemeasureOptions::default(),
        }
    }
}

/// What a suite run did for one task.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteTaskReport {
    /// The workload's label.
    pub label: String,
    /// The registry op, or for a DAG task its family (see
    /// [`Task::family`](crate::measure::Task::family)).
    pub op: String,
    /// The full shape of a registry op (empty for a DAG task: its label
    /// holds its shapes).
    pub shape: String,
    /// Its weight in the objective.
    pub weight: f64,
    /// Rounds it got.
    pub rounds: usize,
    /// Why it was retired before the budget ran out (`early stopping`,
    /// `search exhausted`, `no valid schedule`); `None` if it was not.
    pub retired: Option<String>,
    /// Best GFLOP/s before its first round (default schedule or earlier records).
    pub start_gflops: Option<f64>,
    /// FLOPs of one run.
    pub flops: u64,
    /// Latency of the default schedule, in seconds.
    pub default_latency_s: Option<f64>,
    /// Latency of the best schedule, in seconds.
    pub best_latency_s: Option<f64>,
    /// The task's tuning report.
    #[serde(flatten)]
    pub report: TuneReport,
}

/// What a suite run found.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// One report per task, in suite order.
    pub tasks: Vec<SuiteTaskReport>,
    /// The task (index into `tasks`) each round went to, in order.
    pub allocation: Vec<usize>,
    /// Candidates per round.
    pub per_round: usize,
    /// Candidates measured over all tasks.
    pub trials: usize,
    /// The budget.
    pub total_trials: usize,
    /// Wall time of the run's tuning (re-measurement not included).
    pub wall_s: f64,
    /// Seconds spent re-measuring the best candidates at the end.
    pub remeasure_s: f64,
    /// Stopped before the budget was spent (every task retired, or a stop request).
    pub stopped_early: bool,
    /// `Σ weight · latency` of the default schedules, in seconds (when all are known).
    pub default_latency_s: Option<f64>,
    /// `Σ weight · latency` of the best schedules, in seconds (when all are known).
    pub best_latency_s: Option<f64>,
    /// The objective before the first round: every task's best after its
    /// default schedule (and earlier records) was measured.
    pub start_latency_s: Option<f64>,
    /// The objective after each round, one point per entry of `allocation`;
    /// the last equals `best_latency_s`.
    pub latency_curve: Vec<LatencyPoint>,
}

/// One point of a suite run's end-to-end latency curve.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyPoint {
    /// Candidates measured so far over all tasks.
    pub trials: usize,
    /// Seconds since the run started.
    pub secs: f64,
    /// The objective `Σ wᵢ · (best latency of task i so far)`, in seconds;
    /// a task's best so far is its default schedule's before it finds a
    /// faster one. `None` while some task has no valid schedule at all.
    pub latency_s: Option<f64>,
}

/// `Σ weight · latency` over `(weight, latency)` pairs; `None` if any
/// latency is unknown.
pub fn weighted_latency(parts: impl IntoIterator<Item = (f64, Option<f64>)>) -> Option<f64> {
    parts.into_iter().map(|(w, l)| l.map(|l| w * l)).sum()
}

impl SuiteReport {
    /// Weighted default latency over weighted best latency.
    pub fn speedup(&self) -> Option<f64> {
        Some(self.default_latency_s? / self.best_latency_s?)
    }
}

/// Why a task is retired after its latest round, if it is.
fn retirement(
    tuner: &TaskTuner,
    history: &TaskHistory,
    measured: usize,
    options: &SuiteOptions,
) -> Option<&'static str> {
    if measured == 0 {
        Some("search exhausted")
    } else if options
        .early_stopping
        .is_some_and(|limit| tuner.since_improvement() >= limit)
    {
        Some("early stopping")
    } else if history.best().is_none()
        && history.rounds() >= options.scheduler.backward_window.max(1)
    {
        Some("no valid schedule")
    } else {
        None
    }
}

/// Tunes `tasks` together: see the module docs. Every task's default
/// schedule is measured first (not counted as a trial); every measured batch
/// is recorded in `db`.
pub fn tune_suite(
    tasks: &[SuiteTask],
    measurer: &mut Measurer,
    mut db: Option<&mut TuningDb>,
    model: &mut dyn CostModel,
    options: &SuiteOptions,
    progress: Progress,
    stop: &AtomicBool,
) -> Result<SuiteReport, TuneError> {
    let start = Instant::now();
    let per_round = options
        .batch_size
        .max(1)
        .min((options.total_trials / tasks.len().max(1)).max(1));
    let mut tuners = Vec::with_capacity(tasks.len());
    let mut histories = Vec::with_capacity(tasks.len());
    for (i, t) in tasks.iter().enumerate() {
        let seed = options.seed.wrapping_add(i as u64);
        let mut tuner = TaskTuner::new(
            &t.task,
            measurer.target(),
            &options.search,
            seed,
            db.as_deref(),
            model,
        )?;
        tuner.measure_default(measurer, db.as_deref_mut())?;
        histories.push(TaskHistory::new(
            t.weight,
            t.task.dag().flop_count() as f64,
            t.task.family(),
        ));
        tuners.push(tuner);
    }
    let start_gflops: Vec<Option<f64>> = tuners
        .iter()
        .map(|t| t.best_cost().map(|_| t.best_gflops()))
        .collect();
    let objective = |tuners: &[TaskTuner]| {
        weighted_latency(
            tasks
                .iter()
                .zip(tuners)
                .map(|(t, u)| (t.weight, u.best_cost())),
        )
    };
    let start_latency_s = objective(&tuners);
    let mut latency_curve = Vec::new();
    let mut retired: Vec<Option<&str>> = vec![None; tasks.len()];
    let mut rng = StdRng::seed_from_u64(options.seed ^ 0x7a5c_5c4e_d01e_0001);
    let mut allocation = Vec::new();
    let mut trials = 0;
    let mut stopped = false;
    progress(TuneEvent::Batch {
        trials: 0,
        budget: options.total_trials,
        task: "",
        best_gflops: 0.0,
    });
    while trials < options.total_trials {
        if stop.load(Ordering::Relaxed) {
            stopped = true;
            break;
        }
        let Some(i) = pick_task(&histories, &options.scheduler, &mut rng) else {
            break;
        };
        let n = per_round.min(options.total_trials - trials);
        let measured = tuners[i].round(measurer, db.as_deref_mut(), model, n)?;
        if measured > 0 {
            trials += measured;
            allocation.push(i);
            histories[i].best_costs.push(tuners[i].best_cost());
            leave_dissimilar_group(&mut histories, i, &options.scheduler);
            latency_curve.push(LatencyPoint {
                trials,
                secs: start.elapsed().as_secs_f64(),
                latency_s: objective(&tuners),
            });
            progress(TuneEvent::Batch {
                trials,
                budget: options.total_trials,
                task: &tasks[i].label,
                best_gflops: tuners[i].best_gflops(),
            });
        }
        if let Some(why) = retirement(&tuners[i], &histories[i], measured, options) {
            histories[i].dead = true;
            retired[i] = Some(why);
        }
    }
    let stopped_early = stopped || trials < options.total_trials;
    let tuning_s = start.elapsed().as_secs_f64();
    let mut labelled: Vec<(&str, &mut TaskTuner)> = tasks
        .iter()
        .map(|t| t.label.as_str())
        .zip(tuners.iter_mut())
        .collect();
    remeasure_best(&mut labelled, measurer, db, &options.remeasure, progress)?;
    let mut reports = Vec::with_capacity(tasks.len());
    for (i, (t, tuner)) in tasks.iter().zip(&tuners).enumerate() {
        let report = tuner.report(stopped || retired[i].is_some());
        let flops = t.task.dag().flop_count();
        reports.push(SuiteTaskReport {
            label: t.label.clone(),
            op: t.task.family().to_string(),
            shape: t
                .task
                .registry_op()
                .map_or_else(String::new, |(_, shape)| shape.to_string()),
            weight: t.weight,
            rounds: histories[i].rounds(),
            retired: retired[i].map(str::to_string),
            start_gflops: start_gflops[i],
            flops,
            default_latency_s: tuner.default_cost(),
            best_latency_s: tuner.best_cost(),
            report,
        });
    }
    let weighted = |f: fn(&SuiteTaskReport) -> Option<f64>| -> Option<f64> {
        weighted_latency(reports.iter().map(|r| (r.weight, f(r))))
    };
    Ok(SuiteReport {
        default_latency_s: weighted(|r| r.default_latency_s),
        best_latency_s: weighted(|r| r.best_latency_s),
        start_latency_s,
        latency_curve,
        tasks: reports,
        allocation,
        per_round,
        trials,
        total_trials: options.total_trials,
        wall_s: tuning_s,
        remeasure_s: start.elapsed().as_secs_f64() - tuning_s,
        stopped_early,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(eps: f64) -> SchedulerParams {
        SchedulerParams {
            eps_greedy: eps,
            ..SchedulerParams::default()
        }
    }

    fn history(weight: f64, group: &str, costs: &[f64]) -> TaskHistory {
        TaskHistory {
            best_costs: costs.iter().map(|&c| Some(c)).collect(),
            ..TaskHistory::new(weight, 1e9, group)
        }
    }

    /// Runs `rounds` picks; task `i`'s best latency after its `t`-th round is `curves[i](t)`.
    fn simulate(
        weights: &[f64],
        curves: &[&dyn Fn(usize) -> f64],
        rounds: usize,
        params: &SchedulerParams,
        seed: u64,
    ) -> Vec<usize> {
        let mut histories: Vec<TaskHistory> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| TaskHistory::new(w, 1e9, format!("op{i}")))
            .collect();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut picks = Vec::new();
        for _ in 0..rounds {
            let i = pick_task(&histories, params, &mut rng).expect("a live task");
            let t = histories[i].rounds() + 1;
            histories[i].best_costs.push(Some(curves[i](t)));
            picks.push(i);
        }
        picks
    }

    fn count(picks: &[usize], i: usize) -> usize {
        picks.iter().filter(|&&p| p == i).count()
    }

    #[test]
    fn the_gradient_follows_the_papers_formula() {
        let p = SchedulerParams::default();
        // 5 rounds: backward over the last 3 = (0.5 - 0.8) / 3; forward = -g/t.
        let h = vec![history(2.0, "a", &[1.0, 0.8, 0.7, 0.6, 0.5])];
        let expected = 2.0 * (0.2 * (0.5 - 0.8) / 3.0 + 0.8 * (-0.5 / 5.0));
        assert!((gradient(&h, 0, &p) - expected).abs() < 1e-12);
        // Fewer than Δt + 1 rounds: no backward term.
        let h = vec![history(1.0, "a", &[1.0, 0.5])];
        assert!((gradient(&h, 0, &p) - 0.8 * (-0.25)).abs() < 1e-12);
        // A similar task 10x faster: task 0 may reach β·C/V = 2·0.1 s, so the
        // forward term is 0.2 - 1.0, not -1.0/2.
        let mut h = vec![
            history(1.0, "conv", &[1.0, 1.0]),
            history(1.0, "conv", &[0.1]),
        ];
        let with_peer = gradient(&h, 0, &p);
        assert!((with_peer - 0.8 * (0.2 - 1.0)).abs() < 1e-12, "{with_peer}");
        h[1].group = Some("other".into());
        assert!((gradient(&h, 0, &p) - 0.8 * (-0.5)).abs() < 1e-12);
        // No valid schedule yet: tuned first.
        let h = vec![TaskHistory {
            best_costs: vec![None],
            ..TaskHistory::new(1.0, 1e9, "a")
        }];
        assert_eq!(gradient(&h, 0, &p), f64::NEG_INFINITY);
    }

    #[test]
    fn a_task_far_below_its_group_leaves_it_after_five_rounds_more_than_its_peers() {
        let p = SchedulerParams::default();
        // Task 0 at a tenth of task 1's throughput (same FLOPs).
        let stuck = |rounds: usize| vec![1.0; rounds];
        let mut h = vec![
            history(1.0, "conv", &stuck(6)),
            history(1.0, "conv", &[0.1]),
        ];
        // 6 rounds against 1: not more than 5 beyond yet.
        assert!(!leave_dissimilar_group(&mut h, 0, &p));
        assert_eq!(h[0].group.as_deref(), Some("conv"));
        let before = gradient(&h, 0, &p);
        h[0].best_costs.push(Some(1.0));
        assert!(leave_dissimilar_group(&mut h, 0, &p));
        assert_eq!(h[0].group, None);
        // Once out, it leaves nothing again.
        h[0].best_costs.push(Some(1.0));
        assert!(!leave_dissimilar_group(&mut h, 0, &p));
        // Its forward term is its own rate again, no longer the peer's.
        let after = gradient(&h, 0, &p);
        assert!(after > before, "{before} -> {after}");
        // Within 1/β of the best, or with peers as tuned: stays.
        let mut h = vec![
            history(1.0, "conv", &stuck(9)),
            history(1.0, "conv", &[0.6]),
        ];
        assert!(!leave_dissimilar_group(&mut h, 0, &p));
        let mut h = vec![
            history(1.0, "conv", &stuck(9)),
            history(1.0, "conv", &stuck(4)),
            history(1.0, "conv", &[0.1]),
        ];
        assert!(!leave_dissimilar_group(&mut h, 0, &p));
        // Alone in its group: nothing to leave.
        let mut h = vec![history(1.0, "conv", &stuck(9))];
        assert!(!leave_dissimilar_group(&mut h, 0, &p));
    }

    #[test]
    fn warm_up_gives_every_task_one_round_in_order() {
        let flat = |_: usize| 1.0;
        let picks = simulate(
            &[1.0, 5.0, 1.0, 2.0],
            &[&flat, &flat, &flat, &flat],
            4,
            &params(1.0),
            3,
        );
        assert_eq!(
            picks,
            vec![0, 1, 2, 3],
            "even with ε = 1 the warm-up comes first"
        );
    }

    #[test]
    fn an_improving_task_gets_more_rounds_than_a_stalled_one() {
        // At equal latency and rounds, the task that got there by improving wins.
        let h = vec![
            history(1.0, "a", &[1.0, 1.0, 1.0, 1.0]),
            history(1.0, "b", &[2.0, 1.6, 1.3, 1.0]),
        ];
        let mut rng = StdRng::seed_from_u64(0);
        assert!(gradient(&h, 1, &params(0.0)) < gradient(&h, 0, &params(0.0)));
        assert_eq!(pick_task(&h, &params(0.0), &mut rng), Some(1));
        // Over a run: one task keeps improving (from twice the other's
        // latency to half of it), the other stalls after its first round.
        // The optimistic forward term favours the slower task, so the
        // stalled one keeps getting rounds too, but fewer.
        let improving = |t: usize| (1.2 - 0.03 * t as f64).max(0.3);
        let stalled = |_: usize| 0.6;
        let picks = simulate(&[1.0, 1.0], &[&improving, &stalled], 40, &params(0.0), 1);
        let (a, b) = (count(&picks, 0), count(&picks, 1));
        assert!(a > b, "improving {a} rounds, stalled {b}");
        assert!(b >= 1, "the stalled task still had its warm-up round");
    }

    #[test]
    fn heavier_tasks_get_proportionally_more_rounds() {
        // Stalled tasks: the gradient is -0.8·w·g/t, so rounds follow the weights.
        let flat = |_: usize| 1.0;
        let picks = simulate(&[3.0, 1.0], &[&flat, &flat], 40, &params(0.0), 2);
        let (heavy, light) = (count(&picks, 0), count(&picks, 1));
        assert!(
            heavy >= 2 * light,
            "weight 3: {heavy} rounds, weight 1: {light}"
        );
        let curve = |t: usize| 1.0 / t as f64;
        let picks = simulate(&[3.0, 1.0], &[&curve, &curve], 40, &params(0.0), 2);
        assert!(count(&picks, 0) > count(&picks, 1) + 5, "{picks:?}");
        let same = simulate(&[1.0, 1.0], &[&curve, &curve], 40, &params(0.0), 2);
        assert!(
            count(&same, 0).abs_diff(count(&same, 1)) <= 1,
            "equal weights share evenly"
        );
    }

    #[test]
    fn retired_tasks_are_never_picked() {
        let mut h = vec![history(1.0, "a", &[1.0]), history(100.0, "b", &[1.0])];
        h[1].dead = true;
        let mut rng = StdRng::seed_from_u64(0);
        for _ in 0..50 {
            assert_eq!(pick_task(&h, &params(0.5), &mut rng), Some(0));
        }
        h[0].dead = true;
        assert_eq!(pick_task(&h, &params(0.5), &mut rng), None);
        // A retired task without rounds is not a warm-up candidate either.
        let mut fresh = vec![TaskHistory::new(1.0, 1e9, "a"), history(1.0, "b", &[1.0])];
        fresh[0].dead = true;
        assert_eq!(pick_task(&fresh, &params(0.0), &mut rng), Some(1));
    }

    #[test]
    fn the_choices_are_deterministic_for_a_seed_and_epsilon_explores() {
        let a = |t: usize| 1.0 / t as f64;
        let b = |t: usize| 2.0 / (t as f64).sqrt();
        let c = |_: usize| 0.5;
        let curves: [&dyn Fn(usize) -> f64; 3] = [&a, &b, &c];
        let p = params(0.3);
        let one = simulate(&[1.0, 1.0, 1.0], &curves, 60, &p, 9);
        assert_eq!(one, simulate(&[1.0, 1.0, 1.0], &curves, 60, &p, 9));
        assert_ne!(
            one,
            simulate(&[1.0, 1.0, 1.0], &curves, 60, &p, 10),
            "ε-greedy draws differ"
        );
        // Pure exploitation would starve nobody here either, but ε = 1 is uniform.
        let uniform = simulate(&[1.0, 1000.0, 1.0], &curves, 300, &params(1.0), 4);
        for i in 0..3 {
            assert!(count(&uniform, i) > 60, "task {i}: {}", count(&uniform, i));
        }
    }

    #[test]
    fn equal_gradients_are_broken_at_random() {
        let h = vec![history(1.0, "a", &[1.0]), history(1.0, "b", &[1.0])];
        let mut rng = StdRng::seed_from_u64(5);
        let picks: Vec<usize> = (0..40)
            .map(|_| pick_task(&h, &params(0.0), &mut rng).expect("live"))
            .collect();
        assert!(count(&picks, 0) > 5 && count(&picks, 1) > 5, "{picks:?}");
    }
}
