//! Sketch generation: derivation rules over the DAG's stages, as in Ansor
//! for CPU. A sketch fixes the structure of a schedule (which stages are
//! inlined, which are tiled and how deep, cache-write stages, fusion of a
//! consumer, rfactor) and leaves the numbers — tile sizes, how many loops
//! run in parallel, vectorization, unrolling — to annotation.
//!
//! Rules, applied per stage:
//! - **inline**: an elementwise stage that is not an output and calls no
//!   math intrinsic is substituted into its consumers (padding stages are
//!   also tried at the root, since inlined padding puts a select in the
//!   innermost loop);
//! - **multi-level tiling** (`SSRSRS`): a reduction with data reuse (an
//!   input read that ignores some output axis, as in matmul and conv) has
//!   each spatial axis split into four levels and each reduction axis into
//!   two, ordered S₀S₁R₀S₂R₁S₃;
//! - **fusion of a consumer**: when the tiled stage's only consumer is an
//!   elementwise output over the same axes (bias + ReLU after dense), the
//!   consumer is tiled to match and the tiled stage is computed inside its
//!   outer tile loop;
//! - **cache write**: otherwise the tiled stage is also tried with a local
//!   cache stage, computed inside the outer tile loop of the original stage,
//!   which copies it out;
//! - **tensorize**: a GEMM-shaped reduction of two inputs is also tried with
//!   its register tile computed by a micro-kernel (see `sketch_tensorize`);
//! - **rfactor**: a reduction with little spatial parallelism (fewer
//!   output elements than 4 per core… or a long reduction) is also tried
//!   with its innermost reduction axis split and the outer part factored
//!   into a parallel stage;
//! - **simple**: every other stage is computed at the root, its innermost
//!   spatial axis split for vectorization.

use crate::runtime::Target;
use crate::schedule::Step;
use crate::te::{ComputeDag, ComputeOp, ExprKind, Tensor};

use super::sketch_tensorize::{Host, tensorize_variants};

/// One step of a sketch: fixed, or a split whose factors annotation chooses.
#[derive(Clone, Debug, PartialEq)]
pub enum SketchStep {
    /// A step as it is.
    Fixed(Step),
    /// Split `iter` of `stage` (of extent `extent`) by `parts` sampled factors.
    Tile {
        /// The stage.
        stage: String,
        /// The loop.
        iter: String,
        /// Its extent.
        extent: i64,
        /// Inner factors to sample.
        parts: usize,
        /// What the loop is to the tiling (guides sampling).
        role: TileRole,
    },
    /// A sampled factor that no split of its own uses (a [`SketchStep::Follow`]
    /// takes it); `extent` bounds it.
    Factor {
        /// The extent the factor divides.
        extent: i64,
    },
    /// Split `iter` of `stage` by two factors: the `outer`-th tile's one
    /// factor (a [`SketchStep::Factor`]), then the product of the factors
    /// of the `tile`-th tile — a consumer whose inner loops cover exactly
    /// one tile of its producer, and whose middle loops block for the cache.
    Follow {
        /// The stage.
        stage: String,
        /// The loop.
        iter: String,
        /// Index of the tile followed, among the sketch's tiles.
        tile: usize,
        /// Index of the free factor, among the sketch's tiles.
        outer: usize,
    },
}

/// What a tiled loop is, so that annotation can sample register-sized tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileRole {
    /// A spatial axis of a multi-level tiling; `vector` for the innermost
    /// one, which annotation vectorizes.
    Spatial {
        /// The innermost spatial axis.
        vector: bool,
    },
    /// A reduction axis of a multi-level tiling.
    Reduce,
    /// Any other split (vectorization of a simple stage, rfactor).
    Plain,
    /// A free factor taken by a [`SketchStep::Follow`].
    Free,
    /// The depth (kc) of a tensorized block: a divisor of the extent in the
    /// range a micro-kernel call amortises well.
    KernelDepth,
}

/// How annotation may treat a stage's loops once the sketch is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnnotationSite {
    /// The stage.
    pub stage: String,
    /// Its leading spatial loops may be fused into one parallel loop.
    pub parallel: bool,
    /// Its innermost loop may be vectorized (when spatial).
    pub vectorize: bool,
    /// It may get an `auto_unroll_max_step` pragma.
    pub unroll: bool,
    /// Its loops inside the deepest stage computed at it (one tile of a
    /// cache-write or fused producer) are unrolled when that tile is small
    /// enough to live in registers: register promotion needs every access
    /// to the tile at a constant index.
    pub unroll_tile: bool,
}

/// A schedule with its numbers left open.
#[derive(Clone, Debug, PartialEq)]
pub struct Sketch {
    /// The rules that made it, e.g. `C:tile+cache_write`.
    pub name: String,
    /// The steps.
    pub steps: Vec<SketchStep>,
    /// Where annotation decides parallel / vectorize / unroll.
    pub sites: Vec<AnnotationSite>,
}

impl Sketch {
    /// Whether the sketch calls a micro-kernel (has a `tensorize` step).
    pub fn is_tensorized(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, SketchStep::Fixed(Step::Tensorize { .. })))
    }

    /// The tile and factor steps, in order: (extent, factors) of each
    /// (annotation samples one factor list each).
    pub fn tiles(&self) -> Vec<(i64, usize)> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                SketchStep::Tile { extent, parts, .. } => Some((*extent, *parts)),
                SketchStep::Factor { extent } => Some((*extent, 1)),
                _ => None,
            })
            .collect()
    }
}

impl Sketch {
    /// The role of each tile and factor step, in the order of [`Sketch::tiles`].
    pub fn tile_roles(&self) -> Vec<TileRole> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                SketchStep::Tile { role, .. } => Some(*role),
                SketchStep::Factor { .. } => Some(TileRole::Free),
                _ => None,
            })
            .collect()
    }

    /// For each [`SketchStep::Follow`]: (its free factor's slot, the slot of
    /// the tile it follows, the loop extent), slots indexing [`Sketch::tiles`].
    pub fn follow_links(&self) -> Vec<(usize, usize, i64)> {
        let extents = self.tiles();
        self.steps
            .iter()
            .filter_map(|s| match s {
                SketchStep::Follow { tile, outer, .. } => {
                    Some((*outer, *tile, extents.get(*outer).map_or(1, |e| e.0)))
                }
                _ => None,
            })
            .collect()
    }
}

/// Analysis of one compute stage.
struct StageInfo {
    name: String,
    op: ComputeOp,
    shape: Vec<i64>,
    is_output: bool,
    consumers: Vec<usize>,
}

fn reads_of(op: &ComputeOp) -> Vec<(Tensor, Vec<crate::te::Expr>)> {
    let mut out = Vec::new();
    op.body.visit(&mut |e| {
        if let ExprKind::Read(t, idx) = e.kind() {
            out.push((t.clone(), idx.clone()));
        }
    });
    out
}

fn calls_intrinsic(op: &ComputeOp) -> bool {
    op.body.any(&mut |e| matches!(e.kind(), ExprKind::Call(..)))
}

fn has_select(op: &ComputeOp) -> bool {
    op.body
        .any(&mut |e| matches!(e.kind(), ExprKind::Select { .. }))
}

/// Whether the indices `idx` ignore one of `op`'s spatial axes (of extent
/// > 1): every element read is then reused across that axis.
fn misses_an_axis(op: &ComputeOp, idx: &[crate::te::Expr]) -> bool {
    op.axes.iter().filter(|a| a.extent() > 1).any(|axis| {
        !idx.iter()
            .any(|i| i.any(&mut |e| matches!(e.kind(), ExprKind::Var(v) if v.id() == axis.id())))
    })
}

/// A reduction some of whose reads ignore an output axis: tiling reuses them.
fn has_data_reuse(op: &ComputeOp) -> bool {
    op.reduction().is_some() && reads_of(op).iter().any(|(_, idx)| misses_an_axis(op, idx))
}

/// Inputs (placeholders) that `op` reads at indices missing one of its
/// spatial axes (each element is reused, so packing them pays), with the
/// spatial axes their indices do use.
fn packable_inputs(op: &ComputeOp) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (t, idx) in reads_of(op) {
        if t.compute_op().is_none()
            && misses_an_axis(op, &idx)
            && !out.iter().any(|(n, _)| n == t.name())
        {
            let used = op
                .axes
                .iter()
                .filter(|axis| {
                    idx.iter().any(|i| {
                        i.any(&mut |e| matches!(e.kind(), ExprKind::Var(v) if v.id() == axis.id()))
                    })
                })
                .map(|axis| axis.name().to_string())
                .collect();
            out.push((t.name().to_string(), used));
        }
    }
    out
}

/// Reads `producer` at exactly its own axes, in order (an elementwise use).
fn reads_identity(consumer: &ComputeOp, producer: &Tensor) -> bool {
    let reads: Vec<_> = reads_of(consumer)
        .into_iter()
        .filter(|(t, _)| t == producer)
        .collect();
    !reads.is_empty()
        && reads.iter().all(|(_, idx)| {
            idx.len() == consumer.axes.len()
                && idx
                    .iter()
                    .zip(&consumer.axes)
                    .all(|(i, a)| matches!(i.kind(), ExprKind::Var(v) if v.id() == a.id()))
        })
}

fn spatial_names(op: &ComputeOp) -> Vec<(String, i64)> {
    op.axes
        .iter()
        .map(|a| (a.name().to_string(), a.extent()))
        .collect()
}

fn reduce_names(op: &ComputeOp) -> Vec<(String, i64)> {
    op.reduction()
        .map(|r| {
            r.axes
                .iter()
                .map(|a| (a.name().to_string(), a.extent()))
                .collect()
        })
        .unwrap_or_default()
}

/// Multi-level tiling of `stage` (axes as given): the tile steps and the
/// SSRSRS reorder. Axes of extent 1 are left alone, outermost.
fn tile_ssrsrs(
    stage: &str,
    spatial: &[(String, i64)],
    reduce: &[(String, i64)],
    steps: &mut Vec<SketchStep>,
) {
    let mut order: Vec<String> = Vec::new();
    let mut levels: Vec<Vec<String>> = vec![Vec::new(); 6];
    let innermost = spatial.iter().rposition(|(_, extent)| *extent > 1);
    for (axis, (name, extent)) in spatial.iter().enumerate() {
        if *extent == 1 {
            order.push(name.clone());
            continue;
        }
        steps.push(SketchStep::Tile {
            stage: stage.into(),
            iter: name.clone(),
            extent: *extent,
            parts: 3,
            role: TileRole::Spatial {
                vector: Some(axis) == innermost,
            },
        });
        for (level, part) in [(0, 0), (1, 1), (3, 2), (5, 3)] {
            levels[level].push(format!("{name}.{part}"));
        }
    }
    for (name, extent) in reduce {
        if *extent == 1 {
            levels[2].push(name.clone());
            continue;
        }
        steps.push(SketchStep::Tile {
            stage: stage.into(),
            iter: name.clone(),
            extent: *extent,
            parts: 1,
            role: TileRole::Reduce,
        });
        levels[2].push(format!("{name}.0"));
        levels[4].push(format!("{name}.1"));
    }
    order.extend(levels.into_iter().flatten());
    steps.push(SketchStep::Fixed(Step::Reorder {
        stage: stage.into(),
        order,
    }));
}

/// `consumer` split in three levels per axis — outer, a sampled cache
/// block, then exactly one tile of `producer` (whose tiles are the
/// sketch's tiles from `first_tile` on, one per axis of extent > 1) — and
/// `producer` computed inside the consumer's last middle loop. The outer
/// loops of the axes named in `first` come before all others. Returns the
/// last of those (or the last outer loop when `first` is empty): where a
/// packed operand that depends only on those axes is computed.
fn fuse_into(
    producer: &str,
    consumer: &str,
    spatial: &[(String, i64)],
    first_tile: usize,
    first: &[String],
    steps: &mut Vec<SketchStep>,
) -> Option<String> {
    let slots = |steps: &Vec<SketchStep>| {
        steps
            .iter()
            .filter(|s| matches!(s, SketchStep::Tile { .. } | SketchStep::Factor { .. }))
            .count()
    };
    // Outer loops of the `first` axes, the other outer loops, middle, inner.
    let mut levels: Vec<Vec<String>> = vec![Vec::new(); 4];
    let mut tile = first_tile;
    for (name, extent) in spatial {
        let outer_level = if first.contains(name) { 0 } else { 1 };
        if *extent == 1 {
            levels[outer_level].push(name.clone());
            continue;
        }
        let outer = slots(steps);
        steps.push(SketchStep::Factor { extent: *extent });
        steps.push(SketchStep::Follow {
            stage: consumer.into(),
            iter: name.clone(),
            tile,
            outer,
        });
        tile += 1;
        levels[outer_level].push(format!("{name}.0"));
        levels[2].push(format!("{name}.1"));
        levels[3].push(format!("{name}.2"));
    }
    let pack_at = if first.is_empty() {
        levels[1].last().cloned()
    } else {
        levels[0].last().cloned()
    };
    let (Some(pack_at), Some(attach)) = (pack_at, levels[2].last().cloned()) else {
        return None;
    };
    steps.push(SketchStep::Fixed(Step::Reorder {
        stage: consumer.into(),
        order: levels.into_iter().flatten().collect(),
    }));
    steps.push(SketchStep::Fixed(Step::ComputeAt {
        stage: producer.into(),
        target: consumer.into(),
        iter: attach,
    }));
    Some(pack_at)
}

fn site(stage: &str, parallel: bool, vectorize: bool, unroll: bool) -> AnnotationSite {
    AnnotationSite {
        stage: stage.into(),
        parallel,
        vectorize,
        unroll,
        unroll_tile: false,
    }
}

/// The site of a consumer that copies out (or finishes) one producer tile
/// per iteration of its inner loops.
fn tile_consumer_site(stage: &str) -> AnnotationSite {
    AnnotationSite {
        unroll_tile: true,
        ..site(stage, true, true, false)
    }
}

/// The simple schedule of a root stage: its innermost spatial axis split
/// for vectorization, reductions between the two parts.
fn simple(info: &StageInfo, steps: &mut Vec<SketchStep>, sites: &mut Vec<AnnotationSite>) {
    let spatial = spatial_names(&info.op);
    let reduce = reduce_names(&info.op);
    if let Some((last, extent)) = spatial.last().filter(|(_, e)| *e > 1) {
        steps.push(SketchStep::Tile {
            stage: info.name.clone(),
            iter: last.clone(),
            extent: *extent,
            parts: 1,
            role: TileRole::Plain,
        });
        let mut order: Vec<String> = spatial[..spatial.len() - 1]
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        order.push(format!("{last}.0"));
        order.extend(reduce.iter().map(|(n, _)| n.clone()));
        order.push(format!("{last}.1"));
        steps.push(SketchStep::Fixed(Step::Reorder {
            stage: info.name.clone(),
            order,
        }));
    }
    sites.push(site(&info.name, true, true, true));
}

use super::sketch_tensorize::Variant;

/// Most sketches generated for one DAG.
pub const MAX_SKETCHES: usize = 16;

/// The sketches of `dag` for `target` (whose micro-kernels tensorized
/// sketches may call).
pub fn generate_sketches(dag: &ComputeDag, target: &Target) -> Vec<Sketch> {
    let stages: Vec<StageInfo> = dag
        .stages()
        .iter()
        .filter_map(|t| {
            let op = t.compute_op()?.clone();
            Some(StageInfo {
                name: t.name().to_string(),
                shape: t.shape().to_vec(),
                is_output: dag.outputs().contains(&t),
                consumers: Vec::new(),
                op,
            })
        })
        .collect();
    let mut stages = stages;
    let tensors: Vec<Tensor> = dag
        .stages()
        .iter()
        .filter(|t| t.compute_op().is_some())
        .cloned()
        .collect();
    for i in 0..stages.len() {
        stages[i].consumers = (0..stages.len())
            .filter(|&j| {
                j != i
                    && reads_of(&stages[j].op)
                        .iter()
                        .any(|(t, _)| *t == tensors[i])
            })
            .collect();
    }
    // Which stages are inlined (always, or as an alternative for padding).
    let inlinable =
        |s: &StageInfo| s.op.reduction().is_none() && !s.is_output && !calls_intrinsic(&s.op);
    // Consumers through always-inlined stages: the effective readers of
    // each stage, and whether every link reads its producer elementwise.
    let effective_consumers = |i: usize| -> Vec<(usize, bool)> {
        let mut out: Vec<(usize, bool)> = Vec::new();
        let mut stack: Vec<(usize, usize, bool)> =
            stages[i].consumers.iter().map(|&c| (i, c, true)).collect();
        while let Some((from, c, identity)) = stack.pop() {
            let identity = identity
                && stages[c].shape == stages[from].shape
                && reads_identity(&stages[c].op, &tensors[from]);
            if inlinable(&stages[c]) && !has_select(&stages[c].op) {
                stack.extend(stages[c].consumers.iter().map(|&n| (c, n, identity)));
            } else if !out.iter().any(|(o, _)| *o == c) {
                out.push((c, identity));
            }
        }
        out
    };
    // Per stage, its alternatives; a fused consumer is scheduled by its producer.
    let mut fused_consumers = Vec::new();
    let mut per_stage: Vec<Vec<Variant>> = Vec::new();
    for (i, s) in stages.iter().enumerate() {
        let mut variants: Vec<Variant> = Vec::new();
        if inlinable(s) {
            let inline = (
                format!("{}:inline", s.name),
                vec![SketchStep::Fixed(Step::ComputeInline {
                    stage: s.name.clone(),
                })],
                Vec::new(),
            );
            if !has_select(&s.op) {
                per_stage.push(vec![inline]);
                continue;
            }
            variants.push(inline);
        }
        if has_data_reuse(&s.op) {
            let spatial = spatial_names(&s.op);
            let reduce = reduce_names(&s.op);
            let fusible = match effective_consumers(i).as_slice() {
                [(c, true)] if stages[*c].is_output && stages[*c].op.reduction().is_none() => {
                    Some(stages[*c].name.clone())
                }
                _ => None,
            };
            if let Some(consumer) = fusible {
                let mut steps = Vec::new();
                tile_ssrsrs(&s.name, &spatial, &reduce, &mut steps);
                let _ = fuse_into(&s.name, &consumer, &spatial, 0, &[], &mut steps);
                fused_consumers.push(consumer.clone());
                variants.push((
                    format!("{}:tile+fuse({consumer})", s.name),
                    steps,
                    vec![
                        tile_consumer_site(&consumer),
                        site(&s.name, false, true, true),
                    ],
                ));
                let consumer_axes = stages
                    .iter()
                    .find(|c| c.name == consumer)
                    .map(|c| c.op.axes.iter().map(|a| a.name().to_string()).collect())
                    .unwrap_or_default();
                let host = Host::Consumer {
                    name: &consumer,
                    axes: consumer_axes,
                };
                variants.extend(tensorize_variants(target, &s.name, &s.op, &host, &site));
            } else {
                let local = format!("{}.local", s.name);
                let cache_write = |first: &[String]| {
                    let mut steps = vec![SketchStep::Fixed(Step::CacheWrite {
                        stage: s.name.clone(),
                    })];
                    tile_ssrsrs(&local, &spatial, &reduce, &mut steps);
                    let pack_at = fuse_into(&local, &s.name, &spatial, 0, first, &mut steps);
                    (steps, pack_at)
                };
                let (steps, _) = cache_write(&[]);
                let sites = vec![tile_consumer_site(&s.name), site(&local, false, true, true)];
                // Packing: an input the tile reuses is copied into a local
                // buffer read contiguously by the tile, once per block of
                // the axes it depends on, whose loops go outermost (the
                // panel of B per column block, as in a hand-written GEMM).
                for (input, axes) in packable_inputs(&s.op) {
                    let (mut packing, Some(pack_at)) = cache_write(&axes) else {
                        continue;
                    };
                    let packed = format!("{input}.local");
                    packing.push(SketchStep::Fixed(Step::CacheRead {
                        stage: input.clone(),
                        readers: vec![local.clone()],
                        layout: None,
                    }));
                    packing.push(SketchStep::Fixed(Step::ComputeAt {
                        stage: packed.clone(),
                        target: s.name.clone(),
                        iter: pack_at,
                    }));
                    let mut packing_sites = sites.clone();
                    packing_sites.push(site(&packed, false, true, false));
                    variants.push((
                        format!("{}:tile+cache_write+pack({input})", s.name),
                        packing,
                        packing_sites,
                    ));
                }
                variants.push((format!("{}:tile+cache_write", s.name), steps, sites));
                variants.extend(tensorize_variants(
                    target,
                    &s.name,
                    &s.op,
                    &Host::CacheWrite,
                    &site,
                ));
                let mut steps = Vec::new();
                tile_ssrsrs(&s.name, &spatial, &reduce, &mut steps);
                variants.push((
                    format!("{}:tile", s.name),
                    steps,
                    vec![site(&s.name, true, true, true)],
                ));
            }
        } else if let Some(variant) = rfactor_variant(s) {
            variants.push(variant);
            let mut steps = Vec::new();
            let mut sites = Vec::new();
            simple(s, &mut steps, &mut sites);
            variants.push((format!("{}:simple", s.name), steps, sites));
        } else {
            let mut steps = Vec::new();
            let mut sites = Vec::new();
            simple(s, &mut steps, &mut sites);
            variants.push((format!("{}:simple", s.name), steps, sites));
        }
        per_stage.push(variants);
    }
    // A consumer fused by its producer keeps only that role.
    for (s, variants) in stages.iter().zip(per_stage.iter_mut()) {
        if fused_consumers.contains(&s.name) {
            variants.clear();
        }
    }
    combine(per_stage)
}

/// Rfactor for a reduction with little spatial parallelism and a long
/// reduction: the innermost reduction axis is split and its outer part
/// becomes a parallel stage `<stage>.rf`.
fn rfactor_variant(s: &StageInfo) -> Option<Variant> {
    let spatial: i64 = s.op.axes.iter().map(|a| a.extent()).product();
    let reduce = reduce_names(&s.op);
    let (last, extent) = reduce.last()?;
    let total: i64 = reduce.iter().map(|(_, e)| e).product();
    if spatial > 64 || total < 256 || *extent < 8 {
        return None;
    }
    let rf = format!("{}.rf", s.name);
    let steps = vec![
        SketchStep::Tile {
            stage: s.name.clone(),
            iter: last.clone(),
            extent: *extent,
            parts: 1,
            role: TileRole::Plain,
        },
        SketchStep::Fixed(Step::Rfactor {
            stage: s.name.clone(),
            iter: format!("{last}.0"),
        }),
    ];
    Some((
        format!("{}:rfactor", s.name),
        steps,
        vec![
            site(&rf, true, false, true),
            site(&s.name, true, false, true),
        ],
    ))
}

/// The cartesian product of the stages' alternatives (at most [`MAX_SKETCHES`]).
fn combine(per_stage: Vec<Vec<Variant>>) -> Vec<Sketch> {
    let mut sketches = vec![Sketch {
        name: String::new(),
        steps: Vec::new(),
        sites: Vec::new(),
    }];
    // Stages that may be inlined or not: a variant that computes one at the
    // root (a tensorized reader) is only combined with the other choice.
    let optional_inlines: Vec<String> = per_stage
        .iter()
        .filter(|variants| variants.len() > 1)
        .flat_map(|variants| variants.iter().flat_map(|(_, steps, _)| steps))
        .filter_map(|step| match step {
            SketchStep::Fixed(Step::ComputeInline { stage }) => Some(stage.clone()),
            _ => None,
        })
        .collect();
    let conflicts = |sketch: &Sketch, steps: &[SketchStep]| {
        steps.iter().any(|step| {
            let SketchStep::Fixed(Step::ComputeRoot { stage }) = step else {
                return false;
            };
            optional_inlines.contains(stage)
                && sketch.steps.iter().any(|s| {
                    matches!(s, SketchStep::Fixed(Step::ComputeInline { stage: x }) if x == stage)
                })
        })
    };
    // Inlining first, so that later steps see the final stage structure.
    let (inlines, others): (Vec<_>, Vec<_>) = per_stage
        .into_iter()
        .filter(|v| !v.is_empty())
        .partition(|v| v.len() == 1 && v[0].0.ends_with(":inline"));
    for variants in inlines.into_iter().chain(others) {
        let mut next = Vec::new();
        for sketch in &sketches {
            for (name, steps, sites) in &variants {
                if next.len() == MAX_SKETCHES {
                    break;
                }
                if conflicts(sketch, steps) {
                    continue;
                }
                let mut s = sketch.clone();
                if !s.name.is_empty() {
                    s.name.push(' ');
                }
                s.name.push_str(name);
                // Tile indices are the variant's own; shift them past the
                // tiles already in the sketch.
                let offset = s.tiles().len();
                s.steps.extend(steps.iter().map(|step| match step {
                    SketchStep::Follow {
                        stage,
                        iter,
                        tile,
                        outer,
                    } => SketchStep::Follow {
                        stage: stage.clone(),
                        iter: iter.clone(),
                        tile: tile + offset,
                        outer: outer + offset,
                    },
                    other => other.clone(),
                }));
                s.sites.extend(sites.iter().cloned());
                next.push(s);
            }
        }
        sketches = next;
    }
    sketches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    fn matmul_sketches() -> Vec<Sketch> {
        let spec = ops::find("matmul").expect("matmul");
        let params = spec.parse_shape("M=64,N=64,K=64").expect("shape");
        generate_sketches(&spec.build(&params).expect("dag"), &Target::from_env())
    }

    fn fixed(sketch: &Sketch) -> Vec<&Step> {
        sketch
            .steps
            .iter()
            .filter_map(|s| match s {
                SketchStep::Fixed(step) => Some(step),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_packed_operand_is_computed_at_the_outermost_loops_it_depends_on() {
        let sketches = matmul_sketches();
        for (input, axis) in [("B", "i1.0"), ("A", "i0.0")] {
            let sketch = sketches
                .iter()
                .find(|s| s.name.ends_with(&format!("pack({input})")))
                .unwrap_or_else(|| panic!("no pack({input}) sketch"));
            let steps = fixed(sketch);
            let order = steps.iter().rev().find_map(|s| match s {
                Step::Reorder { stage, order } if stage == "C" => Some(order.clone()),
                _ => None,
            });
            assert_eq!(
                order.as_ref().and_then(|o| o.first()).map(String::as_str),
                Some(axis)
            );
            assert!(steps.iter().any(|s| matches!(s,
                Step::ComputeAt { stage, target, iter }
                    if *stage == format!("{input}.local") && target == "C" && iter == axis)));
        }
    }

    #[test]
    fn tile_roles_mark_the_vectorized_axis_and_the_reduction() {
        let sketches = matmul_sketches();
        let sketch = sketches
            .iter()
            .find(|s| s.name == "C:tile+cache_write")
            .expect("cache_write sketch");
        let roles = sketch.tile_roles();
        assert_eq!(roles.len(), sketch.tiles().len());
        assert_eq!(
            &roles[..3],
            &[
                TileRole::Spatial { vector: false },
                TileRole::Spatial { vector: true },
                TileRole::Reduce
            ]
        );
        assert!(roles[3..].iter().all(|r| *r == TileRole::Free));
        assert!(sketch.sites.iter().any(|s| s.stage == "C" && s.unroll_tile));
    }

    #[test]
    fn gemm_shaped_stages_get_tensorized_sketches_with_and_without_packing() {
        let build = |op: &str, shape: &str| {
            let spec = ops::find(op).expect("registered");
            generate_sketches(
                &spec
                    .build(&spec.parse_shape(shape).expect("shape"))
                    .expect("dag"),
                &Target::from_env(),
            )
        };
        let matmul = build("matmul", "M=64,N=64,K=64");
        let tensorized: Vec<&Sketch> = matmul
            .iter()
            .filter(|s| s.name.contains(":tensorize("))
            .collect();
        if Target::from_env().kernels().is_empty() {
            return;
        }
        assert!(tensorized.iter().any(|s| s.name.ends_with("+pack(B)")));
        assert!(tensorized.iter().any(|s| !s.name.contains("+pack")));
        for sketch in &tensorized {
            let steps = fixed(sketch);
            assert!(steps.iter().any(|s| matches!(s,
                Step::Tensorize { stage, iter, .. } if stage == "C.local" && iter == "k.1")));
        }
        // B stored transposed is not contiguous along n: always packed, transposed.
        let nt = build("matmul_nt", "M=64,N=64,K=64");
        let nt: Vec<&Sketch> = nt.iter().filter(|s| s.name.contains("tensorize")).collect();
        assert!(!nt.is_empty());
        for sketch in nt {
            assert!(
                sketch.name.ends_with("+pack_transposed(B)"),
                "{}",
                sketch.name
            );
            assert!(fixed(sketch).iter().any(|s| matches!(s,
                Step::CacheRead { stage, layout: Some(l), .. } if stage == "B" && l == &[1, 0])));
        }
        // A strided convolution reads no panel along n; a padded one is
        // only tensorized with its padding computed at the root.
        let strided = build("conv2d", "N=1,C=8,H=16,W=16,K=16,R=3,S=3,stride=2,pad=1");
        assert!(strided.iter().all(|s| !s.name.contains("tensorize")));
        let padded = build("conv2d", "N=1,C=8,H=16,W=16,K=16,R=3,S=3,stride=1,pad=1");
        let padded: Vec<&Sketch> = padded
            .iter()
            .filter(|s| s.name.contains("tensorize"))
            .collect();
        assert!(!padded.is_empty());
        assert!(padded.iter().all(|s| s.name.starts_with("pad:simple ")));
    }
}
