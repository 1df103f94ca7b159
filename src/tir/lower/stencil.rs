//! Lowering a block tensorized with a stencil intrinsic: the stage's three
//! innermost loops, the output row and the window's rows and columns,
//! become one [`StencilCall`]. The access pattern is checked here, where
//! the buffers are known: the output must be contiguous along the row and
//! not depend on the window, one operand (the input) must move along the
//! row, the other (the weights) must not, and every index must be affine in
//! the block's loops with nonnegative strides.

use crate::schedule::{IterId, TENSORIZE_BLOCK};
use crate::te::{Expr, IterKind, Var};

use super::super::ir::{BufferId, StencilCall, StencilOperand, Stmt};
use super::tensorize::{BlockForm, accumulate_from, guarded_by};
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
        let err = |reason: String| self.tensorize_error(index, reason);
        let name = self.intrinsic_name(index);
        let primitive = crate::runtime::stencil::find(&name)
            .ok_or_else(|| err(format!("no stencil primitive '{name}'")))?;
        let vars = self.block_vars(index, block);
        // Block positions: the output row, then the window's two loops in
        // block order.
        let row = (0..TENSORIZE_BLOCK)
            .find(|&p| stage.iters[block[p]].kind == IterKind::Spatial)
            .ok_or_else(|| err("the block has no spatial loop".into()))?;
        let window: Vec<usize> = (0..TENSORIZE_BLOCK).filter(|&p| p != row).collect();
        let order = [row, window[0], window[1]];
        let (counts, outside) = self.block_counts(index, &vars, predicates)?;
        let (out, [(xb, xf), (yb, yf)]) =
            self.product_operands(index, &vars, buffer, store_index, value)?;
        let operand = |id: BufferId, f: BlockForm| {
            let [j, r, s] = order.map(|p| f.coefs[p]);
            StencilOperand {
                buffer: id,
                offset: f.residual.clone(),
                strides: [j, r, s, 0],
            }
        };
        let out = operand(buffer, out);
        if out.strides[..3] != [1, 0, 0] {
            return Err(err(format!(
                "the output '{}' must be contiguous along the row '{}' and not move with the window (strides {:?} over {})",
                self.buffers[buffer].name,
                vars[row].name(),
                out.strides,
                order.map(|p| vars[p].name().to_string()).join(", ")
            )));
        }
        let (xo, yo) = (operand(xb, xf), operand(yb, yf));
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
        let accumulate = accumulate_from(&outside, reductions);
        let from_zero = accumulate.is_some();
        let call = StencilCall {
            isa: primitive.isa,
            extents: order.map(|p| vars[p].extent()),
            counts: order.map(|p| counts[p].clone()),
            rows: 1,
            out,
            input,
            weight,
            accumulate: accumulate.unwrap_or_else(|| Expr::i64(1)),
            epilogue: None,
        };
        Ok((
            guarded_by(outside, Stmt::StencilCall(Box::new(call))),
            from_zero,
        ))
    }
}
