//! Random valid step lists, for property tests and fuzzing: each proposed
//! step is drawn from what the current state offers and kept only if it
//! applies, so invalid proposals also exercise the validation paths. A
//! [`RandomScheduleStats`] tallies, per kind of step, how many were proposed
//! and how many applied, so that a test notices when some kind stops
//! landing and its schedules quietly thin out.

use std::collections::BTreeMap;
use std::fmt;

use rand::seq::SliceRandom;
use rand::{Rng, RngExt};

use crate::te::{ComputeDag, IterKind};

use super::state::{ComputeAt, State};
use super::step::{Annotation, Step};

/// A random schedule of `dag` with up to `steps` applied steps (at most
/// `8 × steps` proposals).
pub fn random_schedule<R: Rng>(dag: &ComputeDag, rng: &mut R, steps: usize) -> State {
    random_schedule_tallied(dag, rng, steps, &mut RandomScheduleStats::default())
}

/// [`random_schedule`], adding each proposal and whether it applied to `stats`.
pub fn random_schedule_tallied<R: Rng>(
    dag: &ComputeDag,
    rng: &mut R,
    steps: usize,
    stats: &mut RandomScheduleStats,
) -> State {
    let mut state = State::new(dag);
    let mut applied = 0;
    for _ in 0..steps * 8 {
        if applied == steps {
            break;
        }
        if let Some(step) = propose(&state, rng) {
            let kind = step_kind(&step);
            let landed = state.apply(step).is_ok();
            stats.record(kind, landed);
            applied += usize::from(landed);
        }
    }
    state
}

/// Every kind of step [`propose`] draws, as [`step_kind`] names them:
/// annotations by what they mark, cache reads by whether they transpose.
pub const PROPOSED_KINDS: [&str; 16] = [
    "split",
    "reorder",
    "fuse",
    "annotate parallel",
    "annotate unroll",
    "annotate none",
    "annotate vectorize",
    "compute_at",
    "compute_inline",
    "compute_root",
    "cache_write",
    "cache_read",
    "cache_read transposed",
    "rfactor",
    "pragma",
    "row_math",
];

/// The kind of `step`, as [`RandomScheduleStats`] counts it.
pub fn step_kind(step: &Step) -> &'static str {
    match step {
        Step::Split { .. } => "split",
        Step::Reorder { .. } => "reorder",
        Step::Fuse { .. } => "fuse",
        Step::Annotate { annotation, .. } => match annotation {
            Annotation::Parallel => "annotate parallel",
            Annotation::Unroll => "annotate unroll",
            Annotation::None => "annotate none",
            Annotation::Vectorize => "annotate vectorize",
        },
        Step::ComputeAt { .. } => "compute_at",
        Step::ComputeInline { .. } => "compute_inline",
        Step::ComputeRoot { .. } => "compute_root",
        Step::CacheWrite { .. } => "cache_write",
        Step::CacheRead { layout: None, .. } => "cache_read",
        Step::CacheRead {
            layout: Some(_), ..
        } => "cache_read transposed",
        Step::PackPanel { .. } => "pack_panel",
        Step::Rfactor { .. } => "rfactor",
        Step::Pragma { .. } => "pragma",
        Step::Tensorize { .. } => "tensorize",
        Step::RowMath { .. } => "row_math",
        Step::Pack { .. } => "pack",
    }
}

/// Proposals and applied steps of one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindTally {
    /// Steps of this kind proposed.
    pub proposed: usize,
    /// Those that applied and are in a schedule.
    pub applied: usize,
}

/// What random schedules were made of: per kind of step (see
/// [`step_kind`]), how many were proposed and how many applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RandomScheduleStats {
    /// The tally of each kind seen.
    pub by_kind: BTreeMap<&'static str, KindTally>,
}

impl RandomScheduleStats {
    /// Counts one proposal of `kind`, applied or not.
    pub fn record(&mut self, kind: &'static str, applied: bool) {
        let tally = self.by_kind.entry(kind).or_default();
        tally.proposed += 1;
        tally.applied += usize::from(applied);
    }

    /// Steps of `kind` that applied.
    pub fn applied(&self, kind: &str) -> usize {
        self.by_kind.get(kind).map_or(0, |t| t.applied)
    }

    /// The kinds of [`PROPOSED_KINDS`] that applied fewer than `minimum`
    /// times, with their tallies: empty when every kind landed enough.
    /// A kind this host cannot propose (`row_math` where the target allows
    /// no row-math ISA, e.g. under `TESSERA_ISA=sse`) is not held to it.
    pub fn kinds_below(&self, minimum: usize) -> Vec<(&'static str, KindTally)> {
        let no_row_math =
            crate::runtime::row_math::allowed_isas(&crate::runtime::Target::from_env()).is_empty();
        PROPOSED_KINDS
            .iter()
            .filter(|&&kind| !(no_row_math && kind == "row_math"))
            .map(|&kind| (kind, self.by_kind.get(kind).copied().unwrap_or_default()))
            .filter(|(_, tally)| tally.applied < minimum)
            .collect()
    }
}

impl fmt::Display for RandomScheduleStats {
    /// One `kind: applied/proposed` line per kind.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (kind, tally) in &self.by_kind {
            writeln!(
                f,
                "{kind:>22}: {:>5} applied of {:>5} proposed",
                tally.applied, tally.proposed
            )?;
        }
        Ok(())
    }
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
        // Row math takes part of split's share where a stage computes a
        // transcendental (elsewhere the draws are as they were without it).
        draw @ 0..30
            if draw >= 22
                && let Some(step) = propose_row_math(state, rng) =>
        {
            step
        }
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
            // Its consumers, and the stages they are computed at.
            let consumers = state.effective_consumers(s);
            let mut hosts = consumers.clone();
            for &c in &consumers {
                if let ComputeAt::At { stage: up, .. } = stages[c].compute_at
                    && !hosts.contains(&up)
                {
                    hosts.push(up);
                }
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
        84..89 => Step::CacheWrite {
            stage: name,
            layout: None,
        },
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

/// A `row_math` step on the innermost loop of a stage that computes a
/// transcendental, with a random row-math ISA; where that loop is not
/// vectorised yet, the vectorize annotation it needs instead.
fn propose_row_math<R: Rng>(state: &State, rng: &mut R) -> Option<Step> {
    let stages = state.stages();
    let candidates: Vec<usize> = (0..stages.len())
        .filter(|&s| {
            stages[s].compute.is_some()
                && stages[s].compute_at != ComputeAt::Inline
                && state.computes_transcendental(s)
        })
        .collect();
    // A stage whose innermost loop is vectorised already, when there is one.
    let ready: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&s| {
            let stage = &stages[s];
            stage
                .leaves
                .last()
                .is_some_and(|&l| stage.iters[l].annotation == Annotation::Vectorize)
        })
        .collect();
    let from = if ready.is_empty() {
        &candidates
    } else {
        &ready
    };
    let stage = &stages[*pick(from, rng)?];
    let innermost = &stage.iters[*stage.leaves.last()?];
    if innermost.annotation != Annotation::Vectorize {
        return Some(Step::Annotate {
            stage: stage.name.clone(),
            iter: innermost.name.clone(),
            annotation: Annotation::Vectorize,
        });
    }
    let isas = crate::runtime::row_math::allowed_isas(&crate::runtime::Target::from_env());
    Some(Step::RowMath {
        stage: stage.name.clone(),
        iter: innermost.name.clone(),
        isa: pick(&isas, rng)?.name().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::ops;

    /// `PROPOSED_KINDS` is what the property tests hold to a minimum: a kind
    /// `propose` learns to draw must be listed there, or its thinning out
    /// would go unnoticed.
    #[test]
    fn every_kind_proposed_is_listed_and_every_listed_kind_is_proposed() {
        let mut stats = RandomScheduleStats::default();
        for (op, shape) in [("conv2d", "C=2,H=6,W=6,K=3"), ("softmax", "M=4,N=9")] {
            let spec = ops::find(op).expect("registered");
            let dag = spec
                .build(&spec.parse_shape(shape).expect("shape"))
                .expect("dag");
            let mut rng = StdRng::seed_from_u64(3);
            for _ in 0..40 {
                random_schedule_tallied(&dag, &mut rng, 12, &mut stats);
            }
        }
        let unlisted: Vec<_> = stats
            .by_kind
            .keys()
            .filter(|k| !PROPOSED_KINDS.contains(k))
            .collect();
        assert!(unlisted.is_empty(), "not in PROPOSED_KINDS: {unlisted:?}");
        assert_eq!(stats.kinds_below(1), vec![], "{stats}");
    }

    #[test]
    fn the_tally_counts_proposals_and_applied_steps_apart() {
        let mut stats = RandomScheduleStats::default();
        stats.record("rfactor", false);
        stats.record("rfactor", true);
        stats.record("split", true);
        assert_eq!(stats.applied("rfactor"), 1);
        assert_eq!(stats.by_kind["rfactor"].proposed, 2);
        assert_eq!(stats.applied("compute_at"), 0);
        let below: Vec<&str> = stats.kinds_below(1).iter().map(|(k, _)| *k).collect();
        assert!(below.contains(&"compute_at") && !below.contains(&"rfactor"));
        assert!(!below.contains(&"split"));
    }
}
