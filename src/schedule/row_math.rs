//! The `row_math` step: the f32 transcendental calls of a stage's
//! innermost vectorised loop run through `std::arch` row primitives
//! (`runtime::row_math`) of a named ISA. The checks here are structural
//! (the loop, the calls, the ISA); lowering fissions the loop
//! (`tir::lower::row_math`) and checks again, since later steps may
//! change the loops.

use super::error::StepErrorKind;
use super::state::{ComputeAt, IterId, RowMath, State};
use super::step::Annotation;
use crate::runtime::micro_kernels::Isa;
use crate::runtime::row_math::{has_row_primitive, row_math_isas};
use crate::te::{DType, Expr, ExprKind, Intrinsic};

/// The ISA names a `row_math` step accepts, comma-separated.
fn isa_names() -> String {
    let names: Vec<&str> = row_math_isas().iter().map(|isa| isa.name()).collect();
    if names.is_empty() {
        "none (no row primitives are compiled into this build)".to_string()
    } else {
        names.join(", ")
    }
}

/// The ISA of a `row_math` step's `isa` field, or why it names none.
pub fn row_math_isa(name: &str) -> Result<Isa, String> {
    Isa::from_name(name)
        .filter(|isa| row_math_isas().contains(isa))
        .ok_or_else(|| {
            format!(
                "no row primitives for ISA '{name}'; they exist for {}",
                isa_names()
            )
        })
}

/// `f` when `e` is an f32 call of a function with row primitives.
pub(crate) fn is_row_math_call(e: &Expr) -> Option<Intrinsic> {
    match e.kind() {
        ExprKind::Call(f, _) if e.dtype() == DType::F32 && has_row_primitive(*f) => Some(*f),
        _ => None,
    }
}

impl State {
    /// Whether the rule of stage `index`, with the rules of the inlined
    /// stages it reads substituted, calls an f32 transcendental.
    pub fn computes_transcendental(&self, index: usize) -> bool {
        let Some(rule) = &self.stages[index].compute else {
            return false;
        };
        let mut found = false;
        rule.body.visit(&mut |x| match x.kind() {
            _ if is_row_math_call(x).is_some() => found = true,
            ExprKind::Read(t, _) => {
                found |= self
                    .stages
                    .iter()
                    .position(|s| &s.tensor == t)
                    .is_some_and(|p| {
                        self.stages[p].compute_at == ComputeAt::Inline
                            && self.computes_transcendental(p)
                    });
            }
            _ => {}
        });
        found
    }

    /// What keeps loop `iter` of stage `index` from running its
    /// transcendental calls through row primitives, if anything: it must
    /// be the stage's innermost loop, vectorised, and the stage must call
    /// an f32 transcendental. Checked when the step is applied and again
    /// when lowering.
    pub fn row_math_loop(&self, index: usize, iter: IterId) -> Result<(), String> {
        let s = &self.stages[index];
        if s.leaves.last() != Some(&iter) {
            return Err(format!(
                "the loop must be the stage's innermost (its loops are {})",
                s.leaf_names()
            ));
        }
        if s.iters[iter].annotation != Annotation::Vectorize {
            return Err(format!(
                "the loop is {}, not vectorized; annotate it vectorize first",
                match s.iters[iter].annotation {
                    Annotation::None => "serial",
                    other => other.name(),
                }
            ));
        }
        if !self.computes_transcendental(index) {
            return Err(
                "the stage (with its inlined producers) calls no f32 exp, log, tanh, sigmoid or erf"
                    .into(),
            );
        }
        Ok(())
    }

    /// A stage's `row_math` loop must stay what the step found (its
    /// innermost loop, vectorised, computing a transcendental): a later step
    /// that changes that is refused, so every valid state lowers.
    pub(crate) fn check_row_math(&self, index: usize) -> Result<(), StepErrorKind> {
        let Some(r) = self.stages[index].row_math else {
            return Ok(());
        };
        match self.step_loop_misfit(index, r.iter, State::row_math_loop) {
            Some((iter, reason)) => Err(StepErrorKind::RowMath {
                stage: self.stages[index].name.clone(),
                iter,
                reason: format!("a row_math step runs this loop, so it must stay so: {reason}"),
            }),
            None => Ok(()),
        }
    }

    /// When loop `iter` of stage `index`, which a step (row_math, pack)
    /// runs through a routine, no longer fits it — the stage is inlined, or
    /// `fits` refuses — the loop's name and why.
    pub(crate) fn step_loop_misfit(
        &self,
        index: usize,
        iter: IterId,
        fits: impl Fn(&State, usize, IterId) -> Result<(), String>,
    ) -> Option<(String, String)> {
        let s = &self.stages[index];
        let reason = if s.compute_at == ComputeAt::Inline {
            Some("the stage would be inlined".to_string())
        } else {
            fits(self, index, iter).err()
        }?;
        let name = s
            .iters
            .get(iter)
            .map_or_else(|| format!("#{iter}"), |it| it.name.clone());
        Some((name, reason))
    }

    pub(crate) fn row_math(
        &mut self,
        index: usize,
        iter: IterId,
        isa: &str,
    ) -> Result<(), StepErrorKind> {
        let s = &self.stages[index];
        let error = |reason: String| StepErrorKind::RowMath {
            stage: s.name.clone(),
            iter: s.iters[iter].name.clone(),
            reason,
        };
        let isa = row_math_isa(isa).map_err(error)?;
        self.row_math_loop(index, iter).map_err(error)?;
        self.stages[index].row_math = Some(RowMath { iter, isa });
        Ok(())
    }
}
