//! The `pack` step: the two innermost loops of a copy stage (a
//! `cache_read` panel, `B.local[k, n] = B[…]`) become one call of the
//! `std::arch` packing routine of a named ISA (`runtime::pack`). The checks
//! here are structural (the loops, the copy, the ISA); lowering computes
//! the strides (`tir::lower::pack`) and checks the access again.

use super::error::StepErrorKind;
use super::state::{ComputeAt, IterId, Packed, State};
use super::step::Annotation;
use crate::runtime::micro_kernels::Isa;
use crate::runtime::pack::pack_isas;
use crate::te::{DType, ExprKind, IterKind};

/// Loops a packing call replaces: the copy's rows and columns.
pub const PACK_BLOCK: usize = 2;

/// The ISA of a `pack` step's `isa` field, or why it names none.
pub fn pack_isa(name: &str) -> Result<Isa, String> {
    Isa::from_name(name)
        .filter(|isa| pack_isas().contains(isa))
        .ok_or_else(|| {
            let names: Vec<&str> = pack_isas().iter().map(|isa| isa.name()).collect();
            format!(
                "no packing routine for ISA '{name}'; they exist for {}",
                names.join(", ")
            )
        })
}

impl State {
    /// What keeps loop `iter` of stage `index` (and the loop inside it) from
    /// becoming one packing call, if anything: they must be the stage's two
    /// innermost loops, spatial and unannotated, with no stage computed
    /// inside them, and the stage an f32 copy of one tensor read (a
    /// `cache_read` copy, no arithmetic). Checked when the step is applied
    /// and again by every later step.
    pub fn pack_loops(&self, index: usize, iter: IterId) -> Result<(), String> {
        let s = &self.stages[index];
        let is_copy = s.compute.as_ref().is_some_and(|c| {
            c.reduction().is_none() && matches!(c.body.kind(), ExprKind::Read(..))
        });
        if !is_copy {
            return Err("the stage is not a plain copy of one tensor (a cache_read stage)".into());
        }
        let inlined_source = s.compute.as_ref().and_then(|c| match c.body.kind() {
            ExprKind::Read(t, _) => self
                .stage_index(t.name())
                .filter(|&i| self.stages[i].compute_at == ComputeAt::Inline),
            _ => None,
        });
        if let Some(source) = inlined_source {
            return Err(format!(
                "the copy reads stage '{}', which is inlined into it (its expression, not a \
                 tensor read, is what the copy stores); compute it at the root instead",
                self.stages[source].name
            ));
        }
        if s.tensor.dtype() != DType::F32 {
            return Err(format!(
                "the packing routines copy f32, the stage is {}",
                s.tensor.dtype()
            ));
        }
        let position = s.leaves.iter().position(|&l| l == iter);
        let Some(start) = position.filter(|&p| p + PACK_BLOCK == s.leaves.len()) else {
            return Err(format!(
                "the loop must be the second innermost, its inner loop the innermost (the loops are {}); reorder first",
                s.leaf_names()
            ));
        };
        let block = &s.leaves[start..];
        let roots: Vec<Option<IterId>> = block.iter().map(|&l| s.split_root(l)).collect();
        if roots.iter().any(Option::is_none) || roots[0] == roots[1] {
            return Err(format!(
                "the two loops must be (split parts of) two different axes of the copy, not fused loops; they are {}",
                block
                    .iter()
                    .map(|&l| s.iters[l].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(&l) = block.iter().find(|&&l| {
            s.iters[l].annotation != Annotation::None || s.iters[l].kind != IterKind::Spatial
        }) {
            return Err(format!(
                "loop '{}' is {}; the packing call runs both loops whole",
                s.iters[l].name,
                match s.iters[l].annotation {
                    Annotation::None => "a reduction loop",
                    other => other.name(),
                }
            ));
        }
        let attached = self.attached_to(index).into_iter().find(|&a| {
            matches!(self.stages[a].compute_at, ComputeAt::At { iter: at, .. } if block.contains(&at))
        });
        if let Some(a) = attached {
            return Err(format!(
                "stage '{}' is computed inside the loops",
                self.stages[a].name
            ));
        }
        Ok(())
    }

    /// A stage's packed loops must stay what the step found: a later step
    /// that changes them is refused, so every valid state lowers.
    pub(crate) fn check_pack(&self, index: usize) -> Result<(), StepErrorKind> {
        let Some(p) = self.stages[index].pack else {
            return Ok(());
        };
        match self.step_loop_misfit(index, p.iter, State::pack_loops) {
            Some((iter, reason)) => Err(StepErrorKind::Pack {
                stage: self.stages[index].name.clone(),
                iter,
                reason: format!("a pack step runs these loops, so they must stay so: {reason}"),
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn pack(
        &mut self,
        index: usize,
        iter: IterId,
        isa: &str,
    ) -> Result<(), StepErrorKind> {
        let s = &self.stages[index];
        let error = |reason: String| StepErrorKind::Pack {
            stage: s.name.clone(),
            iter: s.iters[iter].name.clone(),
            reason,
        };
        let isa = pack_isa(isa).map_err(error)?;
        if s.compute_at == ComputeAt::Inline {
            return Err(error("the stage is inlined".into()));
        }
        self.pack_loops(index, iter).map_err(error)?;
        self.stages[index].pack = Some(Packed { iter, isa });
        Ok(())
    }
}
