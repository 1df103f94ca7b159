//! Floating-point operation counts of a DAG, for GFLOP/s reports.

use super::dag::ComputeDag;
use super::expr::{BinOp, Expr, ExprKind};

/// Float operations one evaluation of `e` performs (index arithmetic, casts,
/// comparisons and selects are free; each intrinsic counts as one).
fn flops_per_point(e: &Expr) -> u64 {
    let mut count = 0;
    e.visit(&mut |x| {
        let float_op = match x.kind() {
            ExprKind::Binary(op, ..) => !matches!(op, BinOp::And | BinOp::Or),
            ExprKind::Neg(_) | ExprKind::Call(..) => true,
            _ => false,
        };
        if float_op && x.dtype().is_float() {
            count += 1;
        }
    });
    count
}

impl ComputeDag {
    /// Floating-point operations of one run: for each stage, the operations of
    /// its rule (plus one to combine, for reductions) times the points of its
    /// iteration domain. A multiply-add counts as two.
    pub fn flop_count(&self) -> u64 {
        let mut total: u64 = 0;
        for stage in self.stages() {
            let Some(op) = stage.compute_op() else {
                continue;
            };
            let points = stage.num_elements() as u64;
            let stage_flops = match op.body.kind() {
                ExprKind::Reduce(r) => {
                    let domain: u64 = r.axes.iter().map(|a| a.extent() as u64).product();
                    let combine = u64::from(r.source.dtype().is_float());
                    points * domain * (flops_per_point(&r.source) + combine)
                }
                _ => points * flops_per_point(&op.body),
            };
            total = total.saturating_add(stage_flops);
        }
        total
    }
}
