//! Random valid step lists, for property tests and fuzzing: each proposed
//! step is drawn from what the current state offers and kept only if it
//! applies, so invalid proposals also exercise the validation paths.

use rand::seq::SliceRandom;
use rand::{Rng, RngExt};

use crate::te::{ComputeDag, IterKind};

use super::state::{ComputeAt, State};
use super::step::{Annotation, Step};

/// A random schedule of `dag` with up to `steps` applied steps (at most
/// `8 × steps` proposals).
pub fn random_schedule<R: Rng>(dag: &ComputeDag, rng: &mut R, steps: usize) -> State {
    let mut state = State::new(dag);
    let mut applied = 0;
    for _ in 0..steps * 8 {
        if applied == steps {
            break;
        }
        if let Some(step) = propose(&state, rng)
            && state.apply(step).is_ok()
        {
            applied += 1;
        }
    }
    state
}

fn pick<'a, T, R: Rng>(items: &'a [T], rng: &mut R) -> Option<&'a T> {
    if items.is_empty() {
        None
    } else {
        Some(&items[rng.random_range(0..items.len())])
    }
}

/// One step that may or may not apply to `state`.
pub fn propose<R: Rng>(state: &State, rng: &mut R) -> Option<Step> {
    let stages = state.stages();
    let computed: Vec<usize> = (0..stages.len())
        .filter(|&s| stages[s].compute.is_some())
        .collect();
    let with_loops: Vec<usize> = computed
        .iter()
        .copied()
        .filter(|&s| stages[s].compute_at != ComputeAt::Inline)
        .collect();
    let s = *pick(&with_loops, rng)?;
    let stage = &stages[s];
    let name = stage.name.clone();
    let leaf_names: Vec<String> = stage
        .leaves
        .iter()
        .map(|&l| stage.iters[l].name.clone())
        .collect();
    let leaf = pick(&leaf_names, rng)?.clone();
    let step = match rng.random_range(0..100) {
        0..30 => {
            let id = stage.leaf_named(&leaf)?;
            let extent = stage.iters[id].extent.max(1);
            let count = rng.random_range(1..=2);
            let factors = (0..count)
                .map(|_| rng.random_range(1..=extent.min(8) + 1))
                .collect();
            Step::Split {
                stage: name,
                iter: leaf,
                factors,
            }
        }
        30..40 => {
            let mut order = leaf_names.clone();
            order.shuffle(rng);
            Step::Reorder { stage: name, order }
        }
        40..48 => {
            let start = rng.random_range(0..leaf_names.len());
            let len = rng.random_range(2..=3);
            let iters = leaf_names.iter().skip(start).take(len).cloned().collect();
            Step::Fuse { stage: name, iters }
        }
        48..63 => {
            let annotation = match rng.random_range(0..4) {
                0 => Annotation::Parallel,
                1 => Annotation::Unroll,
                2 => Annotation::None,
                _ => Annotation::Vectorize,
            };
            // Vectorize mostly the innermost spatial loop, where it is legal.
            let iter = match (annotation, leaf_names.last()) {
                (Annotation::Vectorize, Some(last)) if rng.random_bool(0.8) => last.clone(),
                _ => leaf,
            };
            Step::Annotate {
                stage: name,
                iter,
                annotation,
            }
        }
        63..75 => {
            let mut hosts = state.effective_consumers(s);
            if let [c] = hosts.as_slice()
                && let ComputeAt::At { stage: up, .. } = stages[*c].compute_at
            {
                hosts.push(up);
            }
            let target = *pick(&hosts, rng)?;
            let t = &stages[target];
            let t_leaves: Vec<String> = t.leaves.iter().map(|&l| t.iters[l].name.clone()).collect();
            Step::ComputeAt {
                stage: name,
                target: t.name.clone(),
                iter: pick(&t_leaves, rng)?.clone(),
            }
        }
        75..81 => Step::ComputeInline { stage: name },
        81..84 => Step::ComputeRoot { stage: name },
        84..89 => Step::CacheWrite { stage: name },
        89..92 => {
            let producer = *pick(&(0..stages.len()).collect::<Vec<_>>(), rng)?;
            let readers = state.direct_consumers(producer);
            let reader = *pick(&readers, rng)?;
            // Half the copies transpose: a random permutation of the dimensions.
            let rank = stages[producer].tensor.shape().len();
            let layout = (rank > 1 && rng.random_bool(0.5)).then(|| {
                let mut dims: Vec<usize> = (0..rank).collect();
                dims.shuffle(rng);
                dims
            });
            Step::CacheRead {
                stage: stages[producer].name.clone(),
                readers: vec![stages[reader].name.clone()],
                layout,
            }
        }
        92..96 => {
            let reduce: Vec<String> = stage
                .leaves
                .iter()
                .filter(|&&l| stage.iters[l].kind == IterKind::Reduce)
                .map(|&l| stage.iters[l].name.clone())
                .collect();
            Step::Rfactor {
                stage: name,
                iter: pick(&reduce, rng)?.clone(),
            }
        }
        _ => Step::Pragma {
            stage: name,
            auto_unroll_max_step: *pick(&[0, 16, 64, 512], rng)?,
        },
    };
    Some(step)
}
