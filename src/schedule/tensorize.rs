//! The `tensorize` step: the structural checks on the block a micro-kernel
//! or stencil call replaces. The access pattern (which operand is A, which
//! is B, the strides) is checked when lowering, where the buffers are known.

use super::error::StepErrorKind;
use super::state::{ComputeAt, IterId, State, Tensorized};
use super::step::Annotation;
use crate::te::{DType, IterKind, ReduceOp};

/// Loops in a tensorized block: two spatial (m, n) and one reduction (k)
/// for a GEMM micro-kernel; one spatial (the output row) and two
/// reductions (the window's rows and columns) for a stencil primitive.
pub const TENSORIZE_BLOCK: usize = 3;

/// Whether `intrinsic` names a stencil primitive (`runtime::stencil`), not
/// a GEMM micro-kernel.
pub fn is_stencil_intrinsic(intrinsic: &str) -> bool {
    crate::runtime::stencil::find(intrinsic).is_some()
}

/// The reduction loops a block calling `intrinsic` has.
fn block_reductions(intrinsic: &str) -> usize {
    if is_stencil_intrinsic(intrinsic) {
        2
    } else {
        1
    }
}

impl State {
    /// Where the tensorized block of `stage`, starting at loop `iter`,
    /// begins among its loops, or what makes it not one for `intrinsic`:
    /// the block must be the stage's three innermost loops, two spatial and
    /// one reduction (a micro-kernel) or one spatial and two reductions (a
    /// stencil), unannotated, with no stage computed inside it. Checked when
    /// the step is applied and again when lowering (later steps may change
    /// loops).
    pub fn tensorize_block(
        &self,
        stage: usize,
        iter: IterId,
        intrinsic: &str,
    ) -> Result<usize, String> {
        let s = &self.stages[stage];
        let position = s.leaves.iter().position(|&l| l == iter);
        let Some(start) = position.filter(|&p| p + TENSORIZE_BLOCK == s.leaves.len()) else {
            return Err(format!(
                "the block must be the stage's {TENSORIZE_BLOCK} innermost loops (now {}); reorder first",
                s.leaf_names()
            ));
        };
        let block = &s.leaves[start..];
        let reductions = block
            .iter()
            .filter(|&&l| s.iters[l].kind == IterKind::Reduce)
            .count();
        let wanted = block_reductions(intrinsic);
        if reductions != wanted {
            let what = if wanted == 1 {
                "exactly one reduction loop and two spatial loops (a micro-kernel)"
            } else {
                "one spatial loop and two reduction loops (a stencil)"
            };
            return Err(format!(
                "the block needs {what}, it has {reductions} reduction loop(s)"
            ));
        }
        if let Some(&l) = block
            .iter()
            .find(|&&l| s.iters[l].annotation != Annotation::None)
        {
            return Err(format!(
                "loop '{}' is annotated {}; the micro-kernel runs the whole block",
                s.iters[l].name,
                s.iters[l].annotation.name()
            ));
        }
        let attached = self.attached_to(stage).into_iter().find(|&a| {
            matches!(self.stages[a].compute_at, ComputeAt::At { iter: at, .. } if block.contains(&at))
        });
        if let Some(a) = attached {
            return Err(format!(
                "stage '{}' is computed inside the block",
                self.stages[a].name
            ));
        }
        Ok(start)
    }

    pub(crate) fn tensorize(
        &mut self,
        stage: usize,
        iter: IterId,
        kernel: &str,
    ) -> Result<(), StepErrorKind> {
        let s = &self.stages[stage];
        let error = |reason: String| StepErrorKind::Tensorize {
            stage: s.name.clone(),
            iter: s.iters[iter].name.clone(),
            reason,
        };
        let is_sum = s
            .compute
            .as_ref()
            .and_then(|c| c.reduction())
            .is_some_and(|r| r.op == ReduceOp::Sum);
        if !is_sum {
            return Err(error("the stage is not a sum reduction".into()));
        }
        if s.tensor.dtype() != DType::F32 {
            return Err(error(format!(
                "the micro-kernels compute f32, the stage is {}",
                s.tensor.dtype()
            )));
        }
        if s.compute_at == ComputeAt::Inline {
            return Err(error("the stage is inlined".into()));
        }
        if kernel.is_empty() {
            return Err(error("no micro-kernel named".into()));
        }
        self.tensorize_block(stage, iter, kernel).map_err(error)?;
        self.stages[stage].tensorize = Some(Tensorized {
            iter,
            kernel: kernel.to_string(),
        });
        Ok(())
    }
}
