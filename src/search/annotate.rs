//! Annotation: the numbers a sketch leaves open ([`Decisions`]), sampled at
//! random, and turned into a complete, replayable schedule.

use std::collections::HashMap;

use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, RngExt};

use crate::runtime::micro_kernels::Isa;
use crate::schedule::{Annotation, State, Step};
use crate::te::{ComputeDag, IterKind};

use super::factor::{
    sample_block, sample_factors, sample_kernel_chunk, sample_kernel_depth, sample_register_tile,
};
use super::sketch::{AnnotationSite, Sketch, SketchStep, TileRole};

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
    /// Per site: the ISA whose row primitives run the stage's
    /// transcendental calls (a `row_math` step), or none (inline f32x4).
    pub row_math: Vec<Option<Isa>>,
    /// Per site: the ISA whose packing routine runs the stage's copy (a
    /// `pack` step), or none (the copy's loops as Cranelift code).
    pub pack: Vec<Option<Isa>>,
}

/// Probability that a site that may pack with a routine does.
pub const PACK_PRIOR: f64 = 0.5;

/// A random packing choice for `site`: none, or one of its ISAs, the
/// widest twice as likely as the others together.
pub fn random_pack<R: Rng>(site: &AnnotationSite, rng: &mut R) -> Option<Isa> {
    if site.pack.is_empty() || !rng.random_bool(PACK_PRIOR) {
        return None;
    }
    if rng.random_bool(2.0 / 3.0) {
        return site.pack.last().copied();
    }
    site.pack.choose(rng).copied()
}

/// Probability that a site that may use row math does.
pub const ROW_MATH_PRIOR: f64 = 0.5;

/// A random row-math choice for `site`: none, or one of its ISAs.
pub fn random_row_math<R: Rng>(site: &AnnotationSite, rng: &mut R) -> Option<Isa> {
    if site.row_math.is_empty() || !rng.random_bool(ROW_MATH_PRIOR) {
        return None;
    }
    site.row_math.choose(rng).copied()
}

/// Probability that a candidate's multi-level tilings get register tiles
/// (innermost level only, vector-wide on the vectorized axis): uniform
/// factorisations almost never produce one, yet they are what makes a
/// contraction fast.
pub const REGISTER_TILE_PRIOR: f64 = 0.5;

/// Most accumulator elements in a register tile: 16 vectors of 4 lanes,
/// the x86-64 SSE register file.
pub const REGISTER_TILE_ELEMENTS: i64 = 64;

/// Widest register tile along a non-vectorized axis.
const MAX_REGISTER_ROWS: i64 = 8;

/// Longest reduction step inside a register tile (the `R₁` level).
const MAX_REGISTER_REDUCE: i64 = 4;

/// Probability that a consumer's cache block is one tile, and that it is
/// every tile (its outer loop runs once): a packed panel is best one tile
/// wide along the axes it depends on and reused across all tiles of the
/// others.
pub const EXTREME_BLOCK_PRIOR: f64 = 0.25;

/// Random decisions for `sketch`.
pub fn random_decisions<R: Rng>(sketch: &Sketch, rng: &mut R) -> Decisions {
    let mut tiles: Vec<Vec<i64>> = if rng.random_bool(REGISTER_TILE_PRIOR) {
        register_tiles(sketch, rng)
    } else {
        sketch
            .tiles()
            .into_iter()
            .zip(sketch.tile_roles())
            .map(|((extent, parts), role)| match role {
                TileRole::KernelDepth => vec![sample_kernel_depth(extent, rng)],
                TileRole::KernelChunk => vec![sample_kernel_chunk(extent, rng)],
                _ => sample_factors(extent, parts, rng),
            })
            .collect()
    };
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
        row_math: sketch
            .sites
            .iter()
            .map(|s| random_row_math(s, rng))
            .collect(),
        pack: sketch.sites.iter().map(|s| random_pack(s, rng)).collect(),
    }
}

/// Tile factors that make each multi-level tiling a register tile: the
/// vectorized axis takes a multiple of 4 lanes from 8 to 64, the other
/// spatial axes (in random order) what is left of
/// [`REGISTER_TILE_ELEMENTS`], the inner reduction a short step; every
/// other tile is sampled as usual.
fn register_tiles<R: Rng>(sketch: &Sketch, rng: &mut R) -> Vec<Vec<i64>> {
    let specs: Vec<(Option<&str>, i64, usize, TileRole)> = sketch
        .steps
        .iter()
        .filter_map(|s| match s {
            SketchStep::Tile {
                stage,
                extent,
                parts,
                role,
                ..
            } => Some((Some(stage.as_str()), *extent, *parts, *role)),
            SketchStep::Factor { extent } => Some((None, *extent, 1, TileRole::Free)),
            _ => None,
        })
        .collect();
    let mut tiles: Vec<Vec<i64>> = vec![Vec::new(); specs.len()];
    let mut budget: HashMap<&str, i64> = HashMap::new();
    for (i, (stage, extent, parts, role)) in specs.iter().enumerate() {
        if let (Some(stage), TileRole::Spatial { vector: true }) = (stage, role) {
            tiles[i] = sample_register_tile(*extent, *parts, |d| d % 4 == 0 && d >= 8, rng);
            let lanes = tiles[i].last().copied().unwrap_or(1).max(1);
            budget.insert(stage, (REGISTER_TILE_ELEMENTS / lanes).max(1));
        }
    }
    let mut rows: Vec<usize> = (0..specs.len())
        .filter(|&i| specs[i].3 == TileRole::Spatial { vector: false })
        .collect();
    rows.shuffle(rng);
    for i in rows {
        let (stage, extent, parts, _) = specs[i];
        let left = stage
            .and_then(|s| budget.get_mut(s))
            .map_or(MAX_REGISTER_ROWS, |b| *b);
        let cap = left.min(MAX_REGISTER_ROWS);
        tiles[i] = sample_register_tile(extent, parts, |d| d <= cap, rng);
        if let Some(b) = stage.and_then(|s| budget.get_mut(s)) {
            *b = (*b / tiles[i].last().copied().unwrap_or(1).max(1)).max(1);
        }
    }
    for (i, (_, extent, parts, role)) in specs.iter().enumerate() {
        match role {
            TileRole::Spatial { .. } => {}
            TileRole::Reduce => {
                tiles[i] = sample_register_tile(*extent, *parts, |d| d <= MAX_REGISTER_REDUCE, rng)
            }
            TileRole::Plain | TileRole::Free => tiles[i] = sample_factors(*extent, *parts, rng),
            TileRole::KernelDepth => tiles[i] = vec![sample_kernel_depth(*extent, rng)],
            TileRole::KernelChunk => tiles[i] = vec![sample_kernel_chunk(*extent, rng)],
        }
    }
    tiles
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
            tiles[outer] = vec![sample_block(room, EXTREME_BLOCK_PRIOR, rng)];
        }
    }
}

/// Positions, among the leaf loops of stage `index`, of the loops other
/// stages are computed at.
fn attach_positions(state: &State, index: usize) -> Vec<usize> {
    let leaves = &state.stages()[index].leaves;
    state
        .stages()
        .iter()
        .filter_map(|s| match s.compute_at {
            crate::schedule::ComputeAt::At { stage: host, iter } if host == index => {
                leaves.iter().position(|&l| l == iter)
            }
            _ => None,
        })
        .collect()
}

/// Unrolls the loops of stage `index` inside the deepest stage computed at
/// it (one producer tile), when they are few enough for that tile to be
/// promoted to registers; a vectorized loop stays vectorized.
fn unroll_tile_loops(
    state: &mut State,
    index: usize,
    sketch: &Sketch,
) -> Result<(), MaterializeError> {
    let Some(deepest) = attach_positions(state, index).into_iter().max() else {
        return Ok(());
    };
    let stage = &state.stages()[index];
    let inner: Vec<_> = stage.leaves[deepest + 1..]
        .iter()
        .map(|&l| &stage.iters[l])
        .collect();
    let elements: i64 = inner.iter().map(|it| it.extent).product();
    if elements > crate::codegen::PROMOTE_LIMIT {
        return Ok(());
    }
    let to_unroll: Vec<String> = inner
        .iter()
        .filter(|it| {
            it.kind == IterKind::Spatial && it.extent > 1 && it.annotation == Annotation::None
        })
        .map(|it| it.name.clone())
        .collect();
    let stage_name = stage.name.clone();
    for iter in to_unroll {
        apply(
            state,
            Step::Annotate {
                stage: stage_name.clone(),
                iter,
                annotation: Annotation::Unroll,
            },
            sketch,
        )?;
    }
    Ok(())
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

/// A `row_math` step on the innermost loop of stage `index` when it is
/// vectorised (annotation may have left it serial: then nothing).
fn apply_row_math(
    state: &mut State,
    index: usize,
    isa: Isa,
    sketch: &Sketch,
) -> Result<(), MaterializeError> {
    let stage = &state.stages()[index];
    let Some(&innermost) = stage.leaves.last() else {
        return Ok(());
    };
    if state.row_math_loop(index, innermost).is_err() {
        return Ok(());
    }
    let step = Step::RowMath {
        stage: stage.name.clone(),
        iter: stage.iters[innermost].name.clone(),
        isa: isa.name().to_string(),
    };
    apply(state, step, sketch)
}

/// A `pack` step on the two innermost loops of stage `index` when they can
/// be one packing call (else nothing: the copy stays loops).
fn apply_pack(
    state: &mut State,
    index: usize,
    isa: Isa,
    sketch: &Sketch,
) -> Result<(), MaterializeError> {
    let stage = &state.stages()[index];
    let Some(start) = stage.leaves.len().checked_sub(crate::schedule::PACK_BLOCK) else {
        return Ok(());
    };
    let outer = stage.leaves[start];
    if state.pack_loops(index, outer).is_err() {
        return Ok(());
    }
    let step = Step::Pack {
        stage: stage.name.clone(),
        iter: stage.iters[outer].name.clone(),
        isa: isa.name().to_string(),
    };
    apply(state, step, sketch)
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
        // A spatial innermost loop is vectorized when short, or a copy's
        // at any length; a reduction loop (lane-wise partial results) at
        // any length.
        let vectorizable = match loops.last() {
            Some((name, IterKind::Spatial, extent))
                if *extent <= MAX_VECTOR_EXTENT || site.copy =>
            {
                Some(name)
            }
            Some((name, IterKind::Reduce, _)) => Some(name),
            _ => None,
        };
        let pack = decisions.pack.get(i).copied().flatten();
        if decisions.vectorize[i]
            && pack.is_none()
            && let Some(name) = vectorizable
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
        if site.unroll_tile {
            unroll_tile_loops(&mut state, index, sketch)?;
        }
        if at_root && decisions.parallel[i] > 0 {
            // Leading spatial loops, not the vectorized innermost one, and
            // none inside a loop where another stage is computed: fusing
            // those would recompute that stage for every inner iteration.
            let attach_depth = attach_positions(&state, index)
                .into_iter()
                .min()
                .map_or(usize::MAX, |p| p + 1);
            // Nor a loop of a tensorized block: the call runs it whole.
            let stage = &state.stages()[index];
            let block_start = stage
                .tensorize
                .as_ref()
                .and_then(|t| stage.leaves.iter().position(|&l| l == t.iter))
                .unwrap_or(usize::MAX);
            let leading: Vec<String> = loops
                .iter()
                .take(loops.len().saturating_sub(1).max(1))
                .take(attach_depth)
                .take(block_start)
                .take_while(|(_, kind, _)| *kind == IterKind::Spatial)
                .scan(0, |real, (name, _, extent)| {
                    // Loops of extent 1 ride along: they add no parallelism.
                    (*real < decisions.parallel[i]).then(|| {
                        *real += usize::from(*extent > 1);
                        name.clone()
                    })
                })
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
        if let Some(isa) = decisions.row_math.get(i).copied().flatten() {
            apply_row_math(&mut state, index, isa, sketch)?;
        }
        if let Some(isa) = pack {
            apply_pack(&mut state, index, isa, sketch)?;
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::ops;
    use crate::search::generate_sketches;

    fn matmul_cache_write_sketch() -> (ComputeDag, Sketch) {
        let spec = ops::find("matmul").expect("matmul");
        let params = spec.parse_shape("M=64,N=64,K=64").expect("shape");
        let dag = spec.build(&params).expect("dag");
        let sketch = generate_sketches(&dag, &crate::runtime::Target::from_env())
            .into_iter()
            .find(|s| s.name == "C:tile+cache_write")
            .expect("cache_write sketch");
        (dag, sketch)
    }

    #[test]
    fn register_tiles_fit_the_register_budget_and_their_copy_out_is_unrolled() {
        let (dag, sketch) = matmul_cache_write_sketch();
        let mut rng = StdRng::seed_from_u64(3);
        let mut unrolled = 0;
        for _ in 0..50 {
            let tiles = register_tiles(&sketch, &mut rng);
            let (rows, cols) = (tiles[0].clone(), tiles[1].clone());
            assert_eq!(&rows[..2], &[1, 1]);
            assert_eq!(&cols[..2], &[1, 1]);
            assert_eq!(cols[2] % 4, 0, "{cols:?}");
            assert!(rows[2] * cols[2] <= REGISTER_TILE_ELEMENTS, "{tiles:?}");
            assert!(tiles[2][0] <= MAX_REGISTER_REDUCE);
            let mut decisions = random_decisions(&sketch, &mut rng);
            decisions.tiles = tiles;
            resample_follow_factors(&sketch, &mut decisions.tiles, &mut rng, true);
            let state = materialize(&dag, &sketch, &decisions).expect("materialize");
            let copy_out_rows = state.steps().iter().any(|s| {
                matches!(s, Step::Annotate { stage, iter, annotation: Annotation::Unroll }
                    if stage == "C" && iter == "i0.2")
            });
            assert_eq!(copy_out_rows, rows[2] > 1, "{:?}", state.steps());
            unrolled += usize::from(copy_out_rows);
        }
        assert!(unrolled > 0);
    }

    #[test]
    fn a_padded_copy_is_vectorized_at_any_length_and_other_long_loops_are_not() {
        // A 112-wide pooling plane: its padded rows (computed per plane) and
        // its output rows are longer than MAX_VECTOR_EXTENT.
        let spec = ops::find("max_pool2d").expect("max_pool2d");
        let params = spec
            .parse_shape("N=1,C=4,H=112,W=112,R=3,S=3,stride=1,pad=1")
            .expect("shape");
        let dag = spec.build(&params).expect("dag");
        let sketch = generate_sketches(&dag, &crate::runtime::Target::from_env())
            .into_iter()
            .find(|s| s.name.contains("pad:at(max_pool2d.i1)") && s.name.contains("simple"))
            .expect("padding at the plane loop of a simple pooling");
        let pad = sketch
            .sites
            .iter()
            .position(|s| s.stage == "pad")
            .expect("a site for the padding");
        assert!(sketch.sites[pad].copy);
        let mut rng = StdRng::seed_from_u64(7);
        let mut decisions = random_decisions(&sketch, &mut rng);
        decisions.vectorize = vec![true; sketch.sites.len()];
        // Every split's innermost part the whole axis: the pooling's row
        // stays 112 long.
        decisions.tiles = sketch
            .tiles()
            .into_iter()
            .map(|(extent, parts)| {
                let mut factors = vec![1; parts];
                factors[parts - 1] = extent;
                factors
            })
            .collect();
        let state = materialize(&dag, &sketch, &decisions).expect("materialize");
        let vectorized = |stage: &str| {
            state.steps().iter().any(|s| {
                matches!(s, Step::Annotate { stage: st, annotation: Annotation::Vectorize, .. }
                    if st == stage)
            })
        };
        assert!(vectorized("pad"), "{:?}", state.steps());
        // The pooling's own 112-long row is no copy: not vectorized.
        assert!(!vectorized("max_pool2d"), "{:?}", state.steps());
    }

    #[test]
    fn a_tile_too_large_for_registers_is_not_unrolled() {
        let (dag, sketch) = matmul_cache_write_sketch();
        let mut rng = StdRng::seed_from_u64(5);
        let mut decisions = random_decisions(&sketch, &mut rng);
        decisions.tiles[0] = vec![1, 2, 16];
        decisions.tiles[1] = vec![1, 2, 16];
        resample_follow_factors(&sketch, &mut decisions.tiles, &mut rng, true);
        let state = materialize(&dag, &sketch, &decisions).expect("materialize");
        assert!(!state.steps().iter().any(|s| matches!(
            s,
            Step::Annotate {
                annotation: Annotation::Unroll,
                ..
            }
        )));
    }
}
