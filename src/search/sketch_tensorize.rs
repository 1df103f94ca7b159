//! The tensorize rule: a GEMM-shaped reduction (`C[…, m, n] += A[…m…k…] ·
//! B[…k…n…]`, both operands inputs) gets sketches whose register tile is a
//! micro-kernel call — the accumulator tile in a cache-write stage computed
//! per (n block, m block) of the output, the block of its innermost loops
//! `k.1 m n` tensorized, and optionally the B operand packed into a panel
//! per n block. Which kernel (and so the tile shape) and whether to pack
//! are the sketch's choice; the k blocking is sampled.

use crate::runtime::ukernels::{self, MicroKernel};
use crate::schedule::Step;
use crate::te::{BinOp, ComputeOp, DType, ExprKind, Var};

use super::sketch::{AnnotationSite, SketchStep, TileRole};

/// Kernels offered per stage (the best fitting ones).
pub const KERNELS_PER_STAGE: usize = 2;

/// The GEMM roles of a stage's axes and operands.
struct GemmShape {
    /// Spatial axis of the output rows (A varies along it, B does not).
    m: Var,
    /// Spatial axis along which the output and B are contiguous (innermost).
    n: Var,
    /// The reduction axis of the kernel's inner product.
    k: Var,
    /// The operand read along n.
    b_operand: String,
}

fn uses(idx: &[crate::te::Expr], axis: &Var) -> bool {
    idx.iter()
        .any(|i| i.any(&mut |e| matches!(e.kind(), ExprKind::Var(v) if v.id() == axis.id())))
}

/// The GEMM roles of `op`, when it is an f32 sum of a product of two input
/// reads with an m, an n and a k axis.
fn gemm_shape(op: &ComputeOp) -> Option<GemmShape> {
    let reduction = op.reduction()?;
    if reduction.op != crate::te::ReduceOp::Sum || reduction.source.dtype() != DType::F32 {
        return None;
    }
    let ExprKind::Binary(BinOp::Mul, x, y) = reduction.source.kind() else {
        return None;
    };
    let read = |e: &crate::te::Expr| match e.kind() {
        ExprKind::Read(t, idx) if t.compute_op().is_none() => Some((t.clone(), idx.clone())),
        _ => None,
    };
    let (x, y) = (read(x)?, read(y)?);
    let n = op.axes.iter().rev().find(|a| a.extent() > 1)?.clone();
    let ((_, a_idx), (b_t, b_idx)) = match (uses(&x.1, &n), uses(&y.1, &n)) {
        (false, true) => (x, y),
        (true, false) => (y, x),
        _ => return None,
    };
    // B is contiguous along n only if n indexes its last dimension alone.
    let (last, outer) = b_idx.split_last()?;
    if !uses(std::slice::from_ref(last), &n) || uses(outer, &n) {
        return None;
    }
    let m = op
        .axes
        .iter()
        .rev()
        .find(|a| a.id() != n.id() && a.extent() > 1 && uses(&a_idx, a) && !uses(&b_idx, a))?
        .clone();
    let k = reduction
        .axes
        .iter()
        .rev()
        .find(|r| r.extent() > 1 && uses(&a_idx, r) && uses(&b_idx, r))?
        .clone();
    Some(GemmShape {
        m,
        n,
        k,
        b_operand: b_t.name().to_string(),
    })
}

/// The kernels this CPU runs that suit an `m × n` output best, with the
/// tile each gets (the kernel's full tile, or the whole axis when shorter;
/// the remainders are the kernel's edge tiles): the widest ISA first, then
/// the most useful work per tile.
fn fitting_kernels(m: i64, n: i64) -> Vec<(&'static MicroKernel, i64, i64)> {
    let useful = |extent: i64, tile: i64| {
        let tiles = (extent + tile - 1) / tile;
        extent as f64 / (tiles * tile) as f64
    };
    let mut fits: Vec<(&'static MicroKernel, i64, i64, f64)> = ukernels::available_kernels()
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

/// A variant: (rule name, steps, annotation sites).
pub(super) type Variant = (String, Vec<SketchStep>, Vec<AnnotationSite>);

/// The tensorized sketches of stage `stage` computing `op` (none when it is
/// not GEMM-shaped or no kernel runs here).
pub(super) fn tensorize_variants(
    stage: &str,
    op: &ComputeOp,
    site: &dyn Fn(&str, bool, bool, bool) -> AnnotationSite,
) -> Vec<Variant> {
    let Some(g) = gemm_shape(op) else {
        return Vec::new();
    };
    let local = format!("{stage}.local");
    let (m, n, k) = (
        g.m.name().to_string(),
        g.n.name().to_string(),
        g.k.name().to_string(),
    );
    // The spatial axes outside the tile, outermost in both stages.
    let others: Vec<String> = op
        .axes
        .iter()
        .filter(|a| a.id() != g.m.id() && a.id() != g.n.id())
        .map(|a| a.name().to_string())
        .collect();
    let mut variants = Vec::new();
    for (kernel, m_t, n_t) in fitting_kernels(g.m.extent(), g.n.extent()) {
        for pack in [false, true] {
            let mut steps = vec![
                SketchStep::Fixed(Step::CacheWrite {
                    stage: stage.into(),
                }),
                SketchStep::Fixed(Step::Split {
                    stage: stage.into(),
                    iter: m.clone(),
                    factors: vec![m_t],
                }),
                SketchStep::Fixed(Step::Split {
                    stage: stage.into(),
                    iter: n.clone(),
                    factors: vec![n_t],
                }),
            ];
            let mut order = others.clone();
            order.extend([
                format!("{n}.0"),
                format!("{m}.0"),
                format!("{m}.1"),
                format!("{n}.1"),
            ]);
            steps.push(SketchStep::Fixed(Step::Reorder {
                stage: stage.into(),
                order,
            }));
            steps.push(SketchStep::Fixed(Step::ComputeAt {
                stage: local.clone(),
                target: stage.into(),
                iter: format!("{m}.0"),
            }));
            steps.push(SketchStep::Tile {
                stage: local.clone(),
                iter: k.clone(),
                extent: g.k.extent(),
                parts: 1,
                role: TileRole::KernelDepth,
            });
            // The local stage: every other loop outside the block k.1 m n.
            let mut local_order = others.clone();
            if let Some(r) = op.reduction() {
                local_order.extend(
                    r.axes
                        .iter()
                        .filter(|a| a.id() != g.k.id())
                        .map(|a| a.name().to_string()),
                );
            }
            local_order.extend([format!("{k}.0"), format!("{k}.1"), m.clone(), n.clone()]);
            steps.push(SketchStep::Fixed(Step::Reorder {
                stage: local.clone(),
                order: local_order,
            }));
            steps.push(SketchStep::Fixed(Step::Tensorize {
                stage: local.clone(),
                iter: format!("{k}.1"),
                intrinsic: kernel.name.to_string(),
            }));
            let mut sites = vec![site(stage, true, true, false)];
            let mut name = format!("{stage}:tensorize({})", kernel.name);
            if pack {
                let packed = format!("{}.local", g.b_operand);
                steps.push(SketchStep::Fixed(Step::CacheRead {
                    stage: g.b_operand.clone(),
                    readers: vec![local.clone()],
                }));
                steps.push(SketchStep::Fixed(Step::ComputeAt {
                    stage: packed.clone(),
                    target: stage.into(),
                    iter: format!("{n}.0"),
                }));
                sites.push(site(&packed, false, true, false));
                name.push_str(&format!("+pack({})", g.b_operand));
            }
            variants.push((name, steps, sites));
        }
    }
    variants
}
