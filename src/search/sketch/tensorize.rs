//! The tensorize rule: a GEMM-shaped reduction (`C[…, m, n] += A[…m…k…] ·
//! B[…k…n…]`) gets sketches whose register tile is a micro-kernel call —
//! the accumulator tile computed per (n block, m block) of the output (in a
//! cache-write stage, per tile of a fused elementwise consumer, in a
//! cache-write stage whose copy out that consumer does, or in place in the
//! output itself when no consumer hosts it), the
//! block of its innermost loops `k.1 m n` tensorized, and the B operand
//! packed into a panel per n block: optionally when B is contiguous along
//! n, always (transposed) when it is not, as for `dense`'s `W[n, k]`.
//! Operands computed by other stages (padding) are computed at the root.
//! Which kernel (and so the tile shape) and whether to pack are the
//! sketch's choice; the k blocking is sampled. Convolutions are implicit
//! GEMMs here: n runs along the output row, k along the input channels,
//! and the kernel window's loops stay outside the block.

use crate::arith::{Affine, Decompose};
use crate::runtime::Target;
use crate::runtime::micro_kernels::MicroKernel;
use crate::schedule::Step;
use crate::te::{ComputeOp, Var};

use super::stage::{Stage, sum_of_product, uses};
use crate::search::factor::MAX_KERNEL_CHUNK;

use super::{Condition, SketchRule, SketchStep, TileRole, Variant, VariantKind, site};

/// Kernels offered per stage (the best fitting ones).
pub const KERNELS_PER_STAGE: usize = 3;

/// The GEMM roles of a stage's axes and operands.
struct GemmShape {
    /// Spatial axis of the output rows (A varies along it, B does not).
    m: Var,
    /// Spatial axis along which the output is contiguous (innermost).
    n: Var,
    /// The reduction axis of the kernel's inner product.
    k: Var,
    /// The operand read along n.
    b_operand: String,
    /// Its size in bytes.
    b_bytes: u64,
    /// Whether the kernel can read B where it is (or through a packing
    /// copy): B's n dimension is read with stride 1.
    b_direct: bool,
    /// When B is not contiguous along n: the permutation of its dimensions
    /// that makes it so (n's dimension last), applied by a packing copy.
    b_layout: Option<Vec<usize>>,
    /// The axes of a `pack_panel` of B (k then n innermost), where one pays:
    /// B read with a stride or a window along n.
    b_panel: Option<Vec<String>>,
    /// The operand read along m.
    a_operand: String,
    /// The axes of a `pack_panel` of A (k then m innermost, so the kernel
    /// reads it with `a_rs = 1`), where one pays: A read with a stride or
    /// a window along m (a convolution's input, accumulated channel-innermost).
    a_panel: Option<Vec<String>>,
    /// Operands computed by other stages, which must be buffers (at the
    /// root), not inlined, for the kernel to read them.
    materialize: Vec<String>,
}

/// The GEMM roles of `op`, when it is an f32 sum of a product of two tensor
/// reads with an m, an n and a k axis: n the innermost output axis, read
/// by B in one dimension only; m an output axis A reads and B does not; k
/// the longest reduction axis both read.
fn gemm_shape(op: &ComputeOp) -> Option<GemmShape> {
    let reduction = op.reduction()?;
    let [x, y] = sum_of_product(op)?;
    let n = op.axes.iter().rev().find(|a| a.extent() > 1)?.clone();
    let ((a_t, a_idx), (b_t, b_idx)) = match (uses(&x.1, &n), uses(&y.1, &n)) {
        (false, true) => (x, y),
        (true, false) => (y, x),
        _ => return None,
    };
    let n_dims: Vec<usize> = (0..b_idx.len())
        .filter(|&d| uses(std::slice::from_ref(&b_idx[d]), &n))
        .collect();
    // B as a panel of its own (contiguous along n), or only through a
    // pack_panel gather (a strided read, a convolution with stride 2).
    let b_direct = match n_dims.as_slice() {
        [n_dim] if Affine::of(&b_idx[*n_dim]).coefficient(n.id()) == Some(1) => Some(*n_dim),
        _ => None,
    };
    let b_layout = b_direct.and_then(|n_dim| {
        (n_dim + 1 != b_idx.len()).then(|| {
            let mut layout: Vec<usize> = (0..b_idx.len()).filter(|&d| d != n_dim).collect();
            layout.push(n_dim);
            layout
        })
    });
    let k = reduction
        .axes
        .iter()
        .filter(|r| r.extent() > 1 && uses(&a_idx, r) && uses(&b_idx, r))
        .max_by_key(|r| r.extent())?
        .clone();
    // The kernel steps through B along k by one stride, which a transposing
    // copy can break: a window's column and channel fused into one k are a
    // contiguous run only in B's own layout. Then B goes through a panel.
    let (b_direct, b_layout) = match &b_layout {
        Some(layout) if !linear_in(&k, b_t.shape(), &b_idx, layout) => (None, None),
        _ => (b_direct, b_layout),
    };
    let m = op
        .axes
        .iter()
        .rev()
        .find(|a| a.id() != n.id() && a.extent() > 1 && uses(&a_idx, a) && !uses(&b_idx, a))?
        .clone();
    let materialize = [&a_t, &b_t]
        .into_iter()
        .filter(|t| t.compute_op().is_some())
        .map(|t| t.name().to_string())
        .collect();
    let b_panel = panel_axes(op, &b_idx, &m, &n, &k);
    // The panel pays where B's read along n is strided or slides with a
    // window (a convolution); for a plain `B[k, n]` it is the packing copy.
    let windowed = n_dims.iter().any(|&d| {
        let form = Affine::of(&b_idx[d]);
        op.reduction()
            .is_some_and(|r| r.axes.iter().any(|a| form.coefficient(a.id()) != Some(0)))
    });
    let b_panel = (b_direct.is_none() || windowed).then_some(b_panel);
    let a_gathers = a_idx.iter().any(|index| {
        let form = Affine::of(index);
        let along_m = form.coefficient(m.id()).unwrap_or(0);
        along_m != 0
            && (along_m != 1
                || op.reduction().is_some_and(|r| {
                    r.axes
                        .iter()
                        .any(|a| a.id() != k.id() && form.coefficient(a.id()) != Some(0))
                }))
    });
    let a_panel = a_gathers.then(|| panel_axes(op, &a_idx, &n, &m, &k));
    Some(GemmShape {
        m,
        n,
        k,
        b_operand: b_t.name().to_string(),
        b_bytes: (b_t.num_elements() as u64).saturating_mul(b_t.dtype().size_bytes() as u64),
        a_operand: a_t.name().to_string(),
        a_panel,
        b_direct: b_direct.is_some(),
        b_layout,
        b_panel,
        materialize,
    })
}

/// Whether a read `index` of a tensor of `shape`, its dimensions stored in
/// the order `layout`, moves by one fixed stride per step of `k`.
fn linear_in(k: &Var, shape: &[i64], index: &[crate::te::Expr], layout: &[usize]) -> bool {
    let (index, shape): (Vec<_>, Vec<_>) =
        layout.iter().map(|&d| (index[d].clone(), shape[d])).unzip();
    Affine::flat(&index, &shape, Decompose::default())
        .coefficient(k.id())
        .is_some()
}

/// The stage's axes B's index uses, in the panel order that makes the
/// kernel's B operand a contiguous `kc × n` block: the spatial axes outside
/// the tile, the other reduction axes, then k, then n.
fn panel_axes(op: &ComputeOp, b_idx: &[crate::te::Expr], m: &Var, n: &Var, k: &Var) -> Vec<String> {
    let reduction: &[Var] = op.reduction().map(|r| r.axes.as_slice()).unwrap_or(&[]);
    let outside = op
        .axes
        .iter()
        .filter(|a| a.id() != m.id() && a.id() != n.id());
    let others = reduction.iter().filter(|a| a.id() != k.id());
    outside
        .chain(others)
        .chain([k, n])
        .filter(|a| uses(b_idx, a))
        .map(|a| a.name().to_string())
        .collect()
}

/// The kernels `target` allows that suit an `m × n` output best, with the
/// tile each gets (the kernel's full tile, or the whole axis when shorter;
/// the remainders are the kernel's edge tiles): the widest ISA first, then
/// the most useful work per tile.
fn fitting_kernels(target: &Target, m: i64, n: i64) -> Vec<(&'static MicroKernel, i64, i64)> {
    let useful = |extent: i64, tile: i64| {
        let tiles = (extent + tile - 1) / tile;
        extent as f64 / (tiles * tile) as f64
    };
    let mut fits: Vec<(&'static MicroKernel, i64, i64, f64)> = target
        .kernels()
        .into_iter()
        .map(|k| {
            let (mt, nt) = ((k.mr as i64).min(m), (k.nr as i64).min(n));
            let score = useful(m, mt) * useful(n, nt) * (mt * nt) as f64;
            (k, mt, nt, score)
        })
        .collect();
    fits.sort_by(|a, b| b.0.isa.cmp(&a.0.isa).then(b.3.total_cmp(&a.3)));
    fits.truncate(KERNELS_PER_STAGE);
    fits.into_iter().map(|(k, mt, nt, _)| (k, mt, nt)).collect()
}

/// Where the tensorized stage's tiles are computed.
enum Host<'a> {
    /// In the stage's own output, tile by tile: no local buffer and no copy
    /// out (a stage no consumer hosts).
    InPlace,
    /// In a cache-write stage `<stage>.local`, computed per tile of the
    /// stage; with `layout`, accumulated with the stage's dimensions in that
    /// order (another output axis innermost: the kernel's n) and transposed
    /// by the copy out.
    CacheWrite {
        /// The local buffer's dimension order, when not the stage's.
        layout: Option<Vec<usize>>,
        /// The elementwise consumer (name, axis names in the stage's axis
        /// order) whose tiles host the local buffer instead of the stage's
        /// copy out, which is then inlined into it: the epilogue reads each
        /// tile while it is in cache.
        consumer: Option<(&'a str, Vec<String>)>,
    },
    /// Directly, per tile of its elementwise consumer `name`, whose axes
    /// `axes` correspond one to one to the stage's (bias + ReLU after dense).
    Consumer {
        /// The consumer.
        name: &'a str,
        /// The consumer's axis names, in the stage's axis order.
        axes: Vec<String>,
    },
}

/// The tensorized sketches of stage `stage` computing `op` (none when it is
/// not GEMM-shaped or `target` allows no kernel), the DAG's inputs named
/// in `constants` laid out ahead of time.
fn tensorize_variants(
    target: &Target,
    stage: &str,
    op: &ComputeOp,
    host: &Host,
    constants: &[String],
) -> Vec<Variant> {
    let Some(g) = gemm_shape(op) else {
        return Vec::new();
    };
    let stage_axes: Vec<String> = op.axes.iter().map(|a| a.name().to_string()).collect();
    // The stage whose block is tensorized, the stage whose tiles host it,
    // and the host's names of the stage's axes.
    let (computed, host_stage, host_axes) = match host {
        Host::CacheWrite {
            consumer: Some((name, axes)),
            layout,
        } => {
            // The consumer's names of `op`'s axes, in the layout's order.
            let axes = match layout {
                Some(order) => order.iter().filter_map(|&d| axes.get(d).cloned()).collect(),
                None => axes.clone(),
            };
            (format!("{stage}.local"), name.to_string(), axes)
        }
        Host::CacheWrite { consumer: None, .. } => {
            (format!("{stage}.local"), stage.to_string(), stage_axes)
        }
        Host::Consumer { name, axes } => (stage.to_string(), name.to_string(), axes.clone()),
        Host::InPlace => (stage.to_string(), stage.to_string(), stage_axes),
    };
    let in_place = matches!(host, Host::InPlace);
    let position = |axis: &Var| op.axes.iter().position(|a| a.id() == axis.id());
    let host_name = |axis: &Var| position(axis).and_then(|p| host_axes.get(p)).cloned();
    let (Some(hm), Some(hn)) = (host_name(&g.m), host_name(&g.n)) else {
        return Vec::new();
    };
    let (m, n, k) = (
        g.m.name().to_string(),
        g.n.name().to_string(),
        g.k.name().to_string(),
    );
    // The spatial axes outside the tile, outermost in both stages.
    let outside = |names: &[String]| -> Vec<String> {
        op.axes
            .iter()
            .zip(names)
            .filter(|(a, _)| a.id() != g.m.id() && a.id() != g.n.id())
            .map(|(_, name)| name.clone())
            .collect()
    };
    let stage_names: Vec<String> = op.axes.iter().map(|a| a.name().to_string()).collect();
    // A constant weight B larger than L2 streams from memory: read in
    // place, the kernel walks it a row of n at a time at its full row
    // stride (a weight's `[R, S, C, K]`); packed, each n block's panel
    // streams contiguously, and the packing copy is laid out ahead of time.
    // A measurement that repeats the kernel keeps B in L3 and cannot tell
    // the two apart, so only the packed read is offered. Any other B (an
    // activation, just written by its producer) pays its copy on every
    // run, which the packed panel does not repay when the m blocks reading
    // it are few: both are offered.
    let constant_b = constants.contains(&g.b_operand);
    let streamed = constant_b && target.data_cache_bytes(2).is_some_and(|l2| g.b_bytes > l2);
    let mut packs = match (g.b_direct, &g.b_layout) {
        (false, _) => vec![],
        (true, Some(_)) => vec![PackHow::Transposed],
        (true, None) if streamed => vec![PackHow::Copy],
        (true, None) => vec![PackHow::None, PackHow::Copy],
    };
    if g.b_panel.is_some() {
        packs.push(PackHow::Panel);
    }
    // A transposed accumulator: the n blocks outermost, so that each
    // block's B panel is packed once, and the copy out writes along the
    // output's contiguous axis, m.
    let transposed = matches!(
        host,
        Host::CacheWrite {
            layout: Some(_),
            ..
        }
    );
    // The extents the reduction-outside variant is offered by (see
    // `VariantKind::Tensorize::reduction_outer`).
    let outside_extent: i64 = op
        .axes
        .iter()
        .filter(|a| a.id() != g.m.id() && a.id() != g.n.id())
        .map(|a| a.extent())
        .product();
    let reduction_extent: i64 = op
        .reduction()
        .map(|r| r.axes.iter().map(|a| a.extent()).product())
        .unwrap_or(1);
    let mut variants = Vec::new();
    for (kernel, m_t, n_t) in fitting_kernels(target, g.m.extent(), g.n.extent()) {
        let a_panels: &[bool] = if g.a_panel.is_some() {
            &[false, true]
        } else {
            &[false]
        };
        // The reduction outside the tiles: offered where the block it
        // accumulates (one n tile, every m tile) holds more than one tile.
        let outer_block = g.m.extent() * n_t * if transposed { outside_extent } else { 1 };
        let reduction_outers: &[bool] = if !in_place
            && outer_block > m_t * n_t
            && outer_block <= MAX_OUTER_BLOCK
            && reduction_extent > MAX_KERNEL_CHUNK
        {
            &[false, true]
        } else {
            &[false]
        };
        for ((&pack, &a_panel), &reduction_outer) in packs
            .iter()
            .flat_map(|p| a_panels.iter().map(move |a| (p, a)))
            .flat_map(|pa| reduction_outers.iter().map(move |r| (pa, r)))
        {
            // A panel reads its operand wherever it is (padding inlined into it).
            let mut steps: Vec<SketchStep> = g
                .materialize
                .iter()
                .filter(|t| pack != PackHow::Panel || **t != g.b_operand)
                .filter(|t| !a_panel || **t != g.a_operand)
                .map(|t| SketchStep::Fixed(Step::ComputeRoot { stage: t.clone() }))
                .collect();
            if let Host::CacheWrite { layout, consumer } = host {
                steps.push(SketchStep::Fixed(Step::CacheWrite {
                    stage: stage.into(),
                    layout: layout.clone(),
                }));
                if consumer.is_some() {
                    steps.push(SketchStep::Fixed(Step::ComputeInline {
                        stage: stage.into(),
                    }));
                }
            }
            for (axis, tile) in [(&hm, m_t), (&hn, n_t)] {
                steps.push(SketchStep::Fixed(Step::Split {
                    stage: host_stage.clone(),
                    iter: axis.clone(),
                    factors: vec![tile],
                }));
            }
            // In place, the stage is its own host: no loops to order there.
            if !in_place {
                let mut order = if transposed {
                    vec![format!("{hn}.0")]
                } else {
                    Vec::new()
                };
                order.extend(outside(&host_axes));
                if transposed {
                    order.extend([format!("{hm}.0"), format!("{hn}.1"), format!("{hm}.1")]);
                } else {
                    order.extend([
                        format!("{hn}.0"),
                        format!("{hm}.0"),
                        format!("{hm}.1"),
                        format!("{hn}.1"),
                    ]);
                }
                steps.push(SketchStep::Fixed(Step::Reorder {
                    stage: host_stage.clone(),
                    order,
                }));
                // Reduction outside: the whole block of the n tile (every m
                // tile, every outside axis) accumulated at the n loop.
                let at = if reduction_outer { &hn } else { &hm };
                steps.push(SketchStep::Fixed(Step::ComputeAt {
                    stage: computed.clone(),
                    target: host_stage.clone(),
                    iter: format!("{at}.0"),
                }));
            }
            if reduction_outer {
                steps.push(SketchStep::Fixed(Step::Split {
                    stage: computed.clone(),
                    iter: m.clone(),
                    factors: vec![m_t],
                }));
            }
            steps.push(SketchStep::Tile {
                stage: computed.clone(),
                iter: k.clone(),
                extent: g.k.extent(),
                parts: 1,
                role: if reduction_outer {
                    TileRole::KernelChunk
                } else {
                    TileRole::KernelDepth
                },
            });
            // The computed stage: every other loop outside the block k.1 m n
            // (in place: inside its own tile loops, the block the tile's).
            let (tile_loops, block) = if in_place {
                (
                    vec![format!("{n}.0"), format!("{m}.0")],
                    [format!("{m}.1"), format!("{n}.1")],
                )
            } else {
                (Vec::new(), [m.clone(), n.clone()])
            };
            let other_reductions: Vec<String> = op
                .reduction()
                .map(|r| {
                    r.axes
                        .iter()
                        .filter(|a| a.id() != g.k.id())
                        .map(|a| a.name().to_string())
                        .collect()
                })
                .unwrap_or_default();
            let local_order: Vec<String> = if reduction_outer {
                // Every reduction loop outside the block's tiles: each chunk
                // of the operands is used by all of them while in cache.
                let mut order = other_reductions;
                order.push(format!("{k}.0"));
                order.extend(outside(&stage_names));
                order.extend([
                    format!("{m}.0"),
                    format!("{k}.1"),
                    format!("{m}.1"),
                    n.clone(),
                ]);
                order
            } else {
                let mut order = outside(&stage_names);
                order.extend(tile_loops);
                order.extend(other_reductions);
                order.extend([format!("{k}.0"), format!("{k}.1")]);
                order.extend(block);
                order
            };
            steps.push(SketchStep::Fixed(Step::Reorder {
                stage: computed.clone(),
                order: local_order,
            }));
            steps.push(SketchStep::Fixed(Step::Tensorize {
                stage: computed.clone(),
                iter: format!("{k}.1"),
                kernel: kernel.name.to_string(),
            }));
            // In place, the host's innermost loop is the block's n: not
            // for annotation to vectorize.
            let mut sites = vec![site(&host_stage, true, !in_place, false)];
            let packed = match pack {
                PackHow::None => None,
                PackHow::Copy | PackHow::Transposed => {
                    steps.push(SketchStep::Fixed(Step::CacheRead {
                        stage: g.b_operand.clone(),
                        readers: vec![computed.clone()],
                        layout: g.b_layout.clone(),
                    }));
                    Some(format!("{}.local", g.b_operand))
                }
                PackHow::Panel => {
                    steps.push(SketchStep::Fixed(Step::PackPanel {
                        stage: g.b_operand.clone(),
                        reader: computed.clone(),
                        axes: g.b_panel.clone().unwrap_or_default(),
                    }));
                    Some(format!("{}.panel", g.b_operand))
                }
            };
            if let Some(packed) = &packed {
                steps.push(SketchStep::Fixed(Step::ComputeAt {
                    stage: packed.clone(),
                    target: host_stage.clone(),
                    iter: format!("{hn}.0"),
                }));
                sites.push(site(packed, false, true, false));
            }
            if a_panel {
                let panel = format!("{}.panel", g.a_operand);
                steps.push(SketchStep::Fixed(Step::PackPanel {
                    stage: g.a_operand.clone(),
                    reader: computed.clone(),
                    axes: g.a_panel.clone().unwrap_or_default(),
                }));
                sites.push(site(&panel, true, true, false));
            }
            let packing = packed.map(|_| Packing {
                operand: g.b_operand.clone(),
                how: pack,
            });
            variants.push(Variant {
                stage: stage.to_string(),
                kind: VariantKind::Tensorize {
                    kernel: kernel.name,
                    in_place,
                    transposed_accumulator: transposed,
                    a_panel,
                    reduction_outer,
                    packing,
                },
                steps,
                sites,
            });
        }
    }
    variants
}

/// The layouts that put another output axis of `op` innermost where that
/// makes a GEMM whose B is read directly along the new innermost axis (a
/// convolution's output channels, B its weight), each with `op` over its
/// axes in that order. Offered where the innermost axis is short for a
/// micro-kernel's n tile (a convolution's output row) and the other
/// longer.
fn transposed_accumulators(op: &ComputeOp) -> Vec<(Vec<usize>, ComputeOp)> {
    let rank = op.axes.len();
    let Some(last) = op.axes.last() else {
        return Vec::new();
    };
    (0..rank.saturating_sub(1))
        .rev()
        .filter(|&d| op.axes[d].extent() > last.extent() && last.extent() < SHORT_N)
        .filter_map(|d| {
            let mut layout: Vec<usize> = (0..rank).filter(|&x| x != d).collect();
            layout.push(d);
            let permuted = ComputeOp {
                axes: layout.iter().map(|&x| op.axes[x].clone()).collect(),
                body: op.body.clone(),
            };
            let g = gemm_shape(&permuted)?;
            (g.n.id() == op.axes[d].id() && g.b_direct).then_some((layout, permuted))
        })
        .take(1)
        .collect()
}

/// The largest block (in accumulator elements: every m tile and outside
/// axis of one n tile) offered the reduction outside its tiles: beyond it
/// the accumulators leave L2.
const MAX_OUTER_BLOCK: i64 = 1 << 16;

/// An innermost output axis shorter than this leaves a micro-kernel's n
/// tiles mostly edges (a convolution's 7-, 14-, 28- or 56-wide rows).
const SHORT_N: i64 = 64;

/// How a tensorized sketch packs its B operand into panels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Packing {
    /// The packed operand.
    pub operand: String,
    /// How ([`PackHow::None`] does not occur here).
    pub how: PackHow,
}

/// How a tensorized sketch gives the micro-kernel its B operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PackHow {
    /// B read where it is.
    None,
    /// A `cache_read` copy per n block.
    Copy,
    /// A transposing `cache_read` copy per n block (B not contiguous along n).
    Transposed,
    /// A `pack_panel` gather per n block: B as the kernel reads it, k then
    /// n, whatever its stride or window (an im2col panel).
    Panel,
}

/// Where the [`Tensorize`] rule computes the micro-kernel's tiles.
pub(super) enum TensorizeInto {
    /// Per tile of the stage's fusible elementwise consumer: directly, or
    /// accumulated transposed and copied out by the consumer.
    FusedConsumer,
    /// Per tile of a cache-write stage `<stage>.local`.
    CacheWrite,
}

/// The tensorize rule: micro-kernel sketches of a GEMM-shaped reduction
/// with data reuse (none when no kernel runs here).
pub(super) struct Tensorize {
    /// The stage that hosts the tensorized tiles.
    pub into: TensorizeInto,
}

impl SketchRule for Tensorize {
    fn name(&self) -> &'static str {
        match self.into {
            TensorizeInto::FusedConsumer => "tensorize_into_fused_consumer",
            TensorizeInto::CacheWrite => "tensorize_into_cache_write",
        }
    }

    fn condition(&self, stage: &Stage) -> Condition {
        match self.into {
            TensorizeInto::FusedConsumer => Condition::Apply.when(stage.fusible_consumer.is_some()),
            TensorizeInto::CacheWrite => {
                Condition::Apply.when(stage.has_data_reuse() && gemm_shape(&stage.op).is_some())
            }
        }
    }

    fn apply(&self, stage: &Stage, target: &Target) -> Vec<Variant> {
        let consumer = match (&self.into, &stage.fusible_consumer) {
            (TensorizeInto::CacheWrite, _) => None,
            (TensorizeInto::FusedConsumer, Some(c)) => Some((c.name.as_str(), c.axes.clone())),
            (TensorizeInto::FusedConsumer, None) => return Vec::new(),
        };
        // In the stage's own layout: in a cache-write stage, or directly
        // per tile of the consumer.
        let direct = match &consumer {
            None => Host::CacheWrite {
                layout: None,
                consumer: None,
            },
            Some((name, axes)) => Host::Consumer {
                name,
                axes: axes.clone(),
            },
        };
        let constants = &stage.constant_inputs;
        let mut variants = tensorize_variants(target, &stage.name, &stage.op, &direct, constants);
        // A stage no consumer hosts: also in its own output, without a copy.
        if consumer.is_none() && stage.fusible_consumer.is_none() {
            variants.extend(tensorize_variants(
                target,
                &stage.name,
                &stage.op,
                &Host::InPlace,
                constants,
            ));
        }
        // Channel-innermost: copied out by the copy stage, or by the consumer.
        for (layout, op) in transposed_accumulators(&stage.op) {
            let host = Host::CacheWrite {
                layout: Some(layout),
                consumer: consumer.clone(),
            };
            variants.extend(tensorize_variants(
                target,
                &stage.name,
                &op,
                &host,
                constants,
            ));
        }
        variants
    }
}
