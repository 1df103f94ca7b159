//! Lowering a block tensorized with a stencil intrinsic: the stage's three
//! innermost loops, the output row and the window's rows and columns,
//! become one [`StencilCall`]. The access pattern is checked here, where
//! the buffers are known: the output must be contiguous along the row and
//! not depend on the window, one operand (the input) must move along the
//! row, the other (the weights) must not, and every index must be affine in
//! the block's loops with nonnegative strides.

use crate::schedule::{IterId, TENSORIZE_BLOCK};
use crate::te::{BinOp, DType, Expr, ExprKind, IterKind, Var};

use super::super::ir::{BufferId, StencilCall, StencilOperand, Stmt};
use super::tensorize::{BlockForm, block_counts, block_form, flat, reads_any};
use super::{LowerError, Lowering};

impl Lowering<'_> {
    /// The stencil call replacing the block `block` of stage `index`, whose
    /// update is `buffer[store_index] += value` under `predicates`, and
    /// whether it starts its row from zero (no init needed); `reductions`
    /// as for [`gemm_call`](Self::gemm_call).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stencil_call(
        &self,
        index: usize,
        block: &[IterId],
        buffer: BufferId,
        store_index: &[Expr],
        value: &Expr,
        predicates: Vec<Expr>,
        reductions: &[Var],
    ) -> Result<(Stmt, bool), LowerError> {
        let stage = &self.state.stages()[index];
        let err = |reason: String| LowerError::Tensorize {
            stage: stage.name.clone(),
            reason,
        };
        let name = stage
            .tensorize
            .as_ref()
            .map(|t| t.kernel.clone())
            .unwrap_or_default();
        let primitive = crate::runtime::stencil::find(&name)
            .ok_or_else(|| err(format!("no stencil primitive '{name}'")))?;
        let vars: Vec<Var> = block
            .iter()
            .map(|l| self.layouts[index].leaf_vars[l].clone())
            .collect();
        // Block positions: the output row, then the window's two loops in
        // block order.
        let row = (0..TENSORIZE_BLOCK)
            .find(|&p| stage.iters[block[p]].kind == IterKind::Spatial)
            .ok_or_else(|| err("the block has no spatial loop".into()))?;
        let window: Vec<usize> = (0..TENSORIZE_BLOCK).filter(|&p| p != row).collect();
        let order = [row, window[0], window[1]];
        let (counts, outside) = block_counts::<TENSORIZE_BLOCK>(&vars, predicates).map_err(|p| {
            err(format!(
                "a loop of the block has a guard ({p}) that is not an upper bound on one of its loops"
            ))
        })?;
        let ExprKind::Binary(BinOp::Mul, x, y) = value.kind() else {
            return Err(err(format!(
                "the reduction body must be a product of two tensor reads, not {value}"
            )));
        };
        let read = |e: &Expr| -> Result<(BufferId, Vec<Expr>), LowerError> {
            match e.kind() {
                ExprKind::Read(t, idx) if e.dtype() == DType::F32 => {
                    let id = self
                        .buffers
                        .iter()
                        .position(|b| b.handle.id() == t.id())
                        .ok_or_else(|| err(format!("'{}' is not a buffer", t.name())))?;
                    Ok((id, idx.clone()))
                }
                _ => Err(err(format!(
                    "the reduction body must be a product of two f32 tensor reads; '{e}' is not one (inline nothing into it)"
                ))),
            }
        };
        let form = |id: BufferId, idx: &[Expr]| -> Result<BlockForm, LowerError> {
            block_form(&flat(idx, &self.buffers[id].shape), &vars).ok_or_else(|| {
                err(format!(
                    "'{}' is indexed non-linearly in the block's loops",
                    self.buffers[id].name
                ))
            })
        };
        let operand = |id: BufferId, f: BlockForm| StencilOperand {
            buffer: id,
            offset: f.residual.clone(),
            strides: order.map(|p| f.coefs[p]),
        };
        let out = operand(buffer, form(buffer, store_index)?);
        if out.strides != [1, 0, 0] {
            return Err(err(format!(
                "the output '{}' must be contiguous along the row '{}' and not move with the window (strides {:?} over {})",
                self.buffers[buffer].name,
                vars[row].name(),
                out.strides,
                order.map(|p| vars[p].name().to_string()).join(", ")
            )));
        }
        let (xb, xi) = read(x)?;
        let (yb, yi) = read(y)?;
        let (xo, yo) = (operand(xb, form(xb, &xi)?), operand(yb, form(yb, &yi)?));
        let (input, weight) = match (xo.strides[0], yo.strides[0]) {
            (0, s) if s > 0 => (yo, xo),
            (s, 0) if s > 0 => (xo, yo),
            _ => {
                return Err(err(format!(
                    "one operand (the input) must move forward along the row '{}' and the other (the weights) must not; '{}' has strides {:?} and '{}' {:?}",
                    vars[row].name(),
                    self.buffers[xb].name,
                    xo.strides,
                    self.buffers[yb].name,
                    yo.strides
                )));
            }
        };
        if input.strides.iter().chain(&weight.strides).any(|&s| s < 0) {
            return Err(err(format!(
                "negative strides (input {:?}, weights {:?}) are not supported",
                input.strides, weight.strides
            )));
        }
        let accumulate = (!outside.iter().any(|p| reads_any(p, reductions))).then(|| {
            reductions
                .iter()
                .map(|v| v.expr())
                .reduce(|a, b| a + b)
                .unwrap_or_else(|| Expr::i64(0))
        });
        let from_zero = accumulate.is_some();
        let call = StencilCall {
            isa: primitive.isa,
            extents: order.map(|p| vars[p].extent()),
            counts: order.map(|p| counts[p].clone()),
            out,
            input,
            weight,
            accumulate: accumulate.unwrap_or_else(|| Expr::i64(1)),
        };
        let stmt = Stmt::StencilCall(Box::new(call));
        let stmt = match outside.into_iter().reduce(|a, b| a & b) {
            Some(cond) => Stmt::IfThenElse {
                cond,
                then: Box::new(stmt),
                otherwise: None,
            },
            None => stmt,
        };
        Ok((stmt, from_zero))
    }
}
