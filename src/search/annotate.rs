//! Annotation: the numbers a sketch leaves open ([`Decisions`]), sampled at
//! random, and turned into a complete, replayable schedule.

use rand::{Rng, RngExt};

use crate::schedule::{Annotation, State, Step};
use crate::te::{ComputeDag, IterKind};

use super::factor::sample_factors;
use super::sketch::{Sketch, SketchStep};

/// `auto_unroll_max_step` values annotation chooses from (Ansor's CPU set).
pub const UNROLL_CHOICES: [u32; 4] = [0, 16, 64, 512];

/// Longest innermost loop annotation vectorizes.
pub const MAX_VECTOR_EXTENT: i64 = 64;

/// Everything annotation decides for one sketch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Decisions {
    /// Factors of each tile step, in sketch order.
    pub tiles: Vec<Vec<i64>>,
    /// Per annotation site: how many leading spatial loops run in parallel
    /// (fused into one); 0 for none.
    pub parallel: Vec<usize>,
    /// Per site: vectorize the innermost loop.
    pub vectorize: Vec<bool>,
    /// Per site: the `auto_unroll_max_step` pragma (0: none).
    pub unroll: Vec<u32>,
}

/// Random decisions for `sketch`.
pub fn random_decisions<R: Rng>(sketch: &Sketch, rng: &mut R) -> Decisions {
    let mut tiles: Vec<Vec<i64>> = sketch
        .tiles()
        .into_iter()
        .map(|(extent, parts)| sample_factors(extent, parts, rng))
        .collect();
    resample_follow_factors(sketch, &mut tiles, rng, true);
    let n = sketch.sites.len();
    Decisions {
        tiles,
        parallel: sketch
            .sites
            .iter()
            .map(|s| {
                if s.parallel {
                    rng.random_range(1..=3)
                } else {
                    0
                }
            })
            .collect(),
        vectorize: sketch
            .sites
            .iter()
            .map(|s| s.vectorize && rng.random_bool(0.9))
            .collect(),
        unroll: (0..n)
            .map(|i| {
                if sketch.sites[i].unroll {
                    UNROLL_CHOICES[rng.random_range(0..UNROLL_CHOICES.len())]
                } else {
                    0
                }
            })
            .collect(),
    }
}

/// The number of consumer tiles per extent, given the tile a consumer follows.
pub(crate) fn blocks(extent: i64, tile: &[i64]) -> i64 {
    let t: i64 = tile.iter().product::<i64>().max(1);
    (extent + t - 1) / t
}

/// Samples the free factor of each follow split within what its tile leaves
/// (all of them, or with `all == false` only those that no longer fit).
pub(crate) fn resample_follow_factors<R: Rng>(
    sketch: &Sketch,
    tiles: &mut [Vec<i64>],
    rng: &mut R,
    all: bool,
) {
    for (outer, tile, extent) in sketch.follow_links() {
        let room = blocks(extent, &tiles[tile]);
        if all || tiles[outer].first().is_none_or(|&h| h > room) {
            tiles[outer] = sample_factors(room, 1, rng);
        }
    }
}

/// Why decisions did not make a schedule (a sketch bug, or decisions for
/// another sketch).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sketch '{sketch}': {reason}")]
pub struct MaterializeError {
    /// The sketch.
    pub sketch: String,
    /// What failed.
    pub reason: String,
}

fn apply(state: &mut State, step: Step, sketch: &Sketch) -> Result<(), MaterializeError> {
    state.apply(step).map_err(|e| MaterializeError {
        sketch: sketch.name.clone(),
        reason: e.to_string(),
    })
}

/// The schedule `decisions` make of `sketch` on `dag`.
pub fn materialize(
    dag: &ComputeDag,
    sketch: &Sketch,
    decisions: &Decisions,
) -> Result<State, MaterializeError> {
    let fail = |reason: String| MaterializeError {
        sketch: sketch.name.clone(),
        reason,
    };
    if decisions.tiles.len() != sketch.tiles().len()
        || decisions.parallel.len() != sketch.sites.len()
    {
        return Err(fail("decisions for another sketch".into()));
    }
    let extents = sketch.tiles();
    let mut state = State::new(dag);
    let mut tile = 0;
    for step in &sketch.steps {
        let step = match step {
            SketchStep::Fixed(s) => s.clone(),
            SketchStep::Tile { stage, iter, .. } => {
                tile += 1;
                Step::Split {
                    stage: stage.clone(),
                    iter: iter.clone(),
                    factors: decisions.tiles[tile - 1].clone(),
                }
            }
            SketchStep::Factor { .. } => {
                tile += 1;
                continue;
            }
            SketchStep::Follow {
                stage,
                iter,
                tile: t,
                outer,
            } => Step::Split {
                stage: stage.clone(),
                iter: iter.clone(),
                factors: {
                    let tile = decisions.tiles.get(*t).cloned().unwrap_or_default();
                    let extent = extents.get(*outer).map_or(1, |e| e.0);
                    let free = decisions
                        .tiles
                        .get(*outer)
                        .and_then(|f| f.first().copied())
                        .unwrap_or(1);
                    vec![
                        free.clamp(1, blocks(extent, &tile)),
                        tile.iter().product::<i64>().max(1),
                    ]
                },
            },
        };
        apply(&mut state, step, sketch)?;
    }
    for (i, site) in sketch.sites.iter().enumerate() {
        let Some(index) = state.stage_index(&site.stage) else {
            return Err(fail(format!("no stage '{}'", site.stage)));
        };
        let stage = &state.stages()[index];
        let loops: Vec<(String, IterKind, i64)> = stage
            .leaves
            .iter()
            .map(|&l| {
                let it = &stage.iters[l];
                (it.name.clone(), it.kind, it.extent)
            })
            .collect();
        let at_root = stage.compute_at == crate::schedule::ComputeAt::Root;
        if decisions.vectorize[i]
            && let Some((name, IterKind::Spatial, extent)) = loops.last()
            && *extent <= MAX_VECTOR_EXTENT
            && (loops.len() > 1 || !at_root || decisions.parallel[i] == 0)
        {
            apply(
                &mut state,
                Step::Annotate {
                    stage: site.stage.clone(),
                    iter: name.clone(),
                    annotation: Annotation::Vectorize,
                },
                sketch,
            )?;
        }
        if at_root && decisions.parallel[i] > 0 {
            // Leading spatial loops, not the vectorized innermost one, and
            // none inside a loop where another stage is computed: fusing
            // those would recompute that stage for every inner iteration.
            let stage = &state.stages()[index];
            let attach_depth = (0..state.stages().len())
                .filter_map(|s| match state.stages()[s].compute_at {
                    crate::schedule::ComputeAt::At { stage: host, iter } if host == index => {
                        stage.leaves.iter().position(|&l| l == iter)
                    }
                    _ => None,
                })
                .min()
                .map_or(usize::MAX, |p| p + 1);
            let leading: Vec<String> = loops
                .iter()
                .take(loops.len().saturating_sub(1).max(1))
                .take(attach_depth)
                .take_while(|(_, kind, _)| *kind == IterKind::Spatial)
                .take(decisions.parallel[i])
                .map(|(n, _, _)| n.clone())
                .collect();
            let target = match leading.len() {
                0 => None,
                1 => Some(leading[0].clone()),
                _ => {
                    apply(
                        &mut state,
                        Step::Fuse {
                            stage: site.stage.clone(),
                            iters: leading.clone(),
                        },
                        sketch,
                    )?;
                    let stage = &state.stages()[index];
                    stage.leaves.first().map(|&l| stage.iters[l].name.clone())
                }
            };
            if let Some(iter) = target {
                apply(
                    &mut state,
                    Step::Annotate {
                        stage: site.stage.clone(),
                        iter,
                        annotation: Annotation::Parallel,
                    },
                    sketch,
                )?;
            }
        }
        if decisions.unroll[i] > 0 {
            apply(
                &mut state,
                Step::Pragma {
                    stage: site.stage.clone(),
                    auto_unroll_max_step: decisions.unroll[i],
                },
                sketch,
            )?;
        }
    }
    Ok(state)
}
