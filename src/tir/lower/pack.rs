//! Lowering a packed copy (the `pack` step): the copy stage's two innermost
//! loops and their store become one [`PackCall`]. The access is checked
//! here, where the buffers are known: the stored value must be one f32
//! read, both indices affine in the two loops, the panel contiguous along
//! one of them (the columns) and every stride non-negative.

use crate::schedule::{IterId, PACK_BLOCK, Packed};
use crate::te::{DType, Expr, ExprKind, Var};

use super::super::ir::{BufferId, MicroKernelOperand, PackCall, Stmt};
use super::tensorize::{BlockForm, block_counts, block_form, flat};
use super::{LowerError, Lowering};

impl Lowering<'_> {
    fn pack_error(&self, index: usize, reason: String) -> LowerError {
        LowerError::Pack {
            stage: self.state.stages()[index].name.clone(),
            reason,
        }
    }

    /// Where the packed loops of stage `index` start among its loops,
    /// checked again (later steps may have changed them).
    pub(super) fn packed_loops(&self, index: usize, p: &Packed) -> Result<usize, LowerError> {
        self.state
            .pack_loops(index, p.iter)
            .map_err(|reason| self.pack_error(index, reason))?;
        Ok(self.state.stages()[index].leaves.len() - PACK_BLOCK)
    }

    /// The packing call replacing the two innermost loops of stage `index`
    /// (checked by [`Self::packed_loops`]), whose body is
    /// `buffer[store_index] = value` under `predicates`.
    pub(super) fn pack_call(
        &self,
        index: usize,
        p: &Packed,
        buffer: BufferId,
        store_index: &[Expr],
        value: &Expr,
        predicates: Vec<Expr>,
    ) -> Result<Stmt, LowerError> {
        let err = |reason: String| self.pack_error(index, reason);
        let leaves = &self.state.stages()[index].leaves;
        let block: &[IterId] = &leaves[leaves.len().saturating_sub(PACK_BLOCK)..];
        let vars: Vec<Var> = block
            .iter()
            .map(|l| self.layouts[index].leaf_vars[l].clone())
            .collect();
        let (counts, outside) = block_counts::<PACK_BLOCK>(&vars, predicates).map_err(|p| {
            err(format!(
                "a packed loop has a guard ({p}) that is not an upper bound on one of them"
            ))
        })?;
        let ExprKind::Read(t, src_index) = value.kind() else {
            return Err(err(format!(
                "the copy must store one tensor read, not {value} (inline nothing into it)"
            )));
        };
        if value.dtype() != DType::F32 {
            return Err(err(format!(
                "the packing routines copy f32, not {}",
                value.dtype()
            )));
        }
        let src = self
            .buffers
            .iter()
            .position(|b| b.handle.id() == t.id())
            .ok_or_else(|| err(format!("'{}' is not a buffer", t.name())))?;
        let form = |id: BufferId, idx: &[Expr]| -> Result<BlockForm<PACK_BLOCK>, LowerError> {
            block_form(&flat(idx, &self.buffers[id].shape), &vars).ok_or_else(|| {
                err(format!(
                    "'{}' is indexed non-linearly in the packed loops",
                    self.buffers[id].name
                ))
            })
        };
        let d = form(buffer, store_index)?;
        let s = form(src, src_index)?;
        // The columns: the loop the panel is contiguous along (the inner
        // one when both are, as with an extent-1 loop).
        let cols = (0..PACK_BLOCK)
            .rev()
            .find(|&v| d.coefs[v] == 1)
            .ok_or_else(|| {
                err(format!(
                    "the panel '{}' is contiguous along neither packed loop (strides {:?})",
                    self.buffers[buffer].name, d.coefs
                ))
            })?;
        let rows = 1 - cols;
        let extents = [vars[rows].extent(), vars[cols].extent()];
        let strides = [s.coefs[rows], s.coefs[cols], d.coefs[rows]];
        if strides.iter().any(|&x| x < 0) {
            return Err(err(format!(
                "negative strides {strides:?} are not supported"
            )));
        }
        if extents[0] > 1 && d.coefs[rows] < extents[1] {
            return Err(err(format!(
                "the panel's rows overlap (row stride {} < {} columns)",
                d.coefs[rows], extents[1]
            )));
        }
        let operand = |buffer: BufferId, f: &BlockForm<PACK_BLOCK>| MicroKernelOperand {
            buffer,
            offset: f.residual.clone(),
            row_stride: f.coefs[rows],
            col_stride: f.coefs[cols],
        };
        let call = PackCall {
            isa: p.isa,
            extents,
            counts: [counts[rows].clone(), counts[cols].clone()],
            src: operand(src, &s),
            dst: operand(buffer, &d),
        };
        let stmt = Stmt::PackCall(Box::new(call));
        Ok(match outside.into_iter().reduce(|a, b| a & b) {
            Some(cond) => Stmt::IfThenElse {
                cond,
                then: Box::new(stmt),
                otherwise: None,
            },
            None => stmt,
        })
    }
}
