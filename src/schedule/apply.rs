//! Applying steps to a state: name resolution, dispatch, validation, replay.

use crate::te::ComputeDag;

use super::error::{StepError, StepErrorKind};
use super::state::{ComputeAt, IterId, State};
use super::step::Step;

impl State {
    fn resolve_stage(&self, name: &str) -> Result<usize, StepErrorKind> {
        self.stage_index(name)
            .ok_or_else(|| StepErrorKind::UnknownStage {
                name: name.into(),
                available: self.stage_names(),
            })
    }

    /// A stage whose loops can be transformed (computed, not inlined).
    fn resolve_loop_stage(&self, name: &str) -> Result<usize, StepErrorKind> {
        let index = self.resolve_stage(name)?;
        let stage = &self.stages[index];
        let why = if stage.compute.is_none() {
            Some("it is an input")
        } else if stage.compute_at == ComputeAt::Inline {
            Some("it is inlined")
        } else {
            None
        };
        match why {
            Some(why) => Err(StepErrorKind::NoLoops {
                stage: stage.name.clone(),
                why,
            }),
            None => Ok(index),
        }
    }

    fn resolve_iter(&self, stage: usize, name: &str) -> Result<IterId, StepErrorKind> {
        let s = &self.stages[stage];
        s.leaf_named(name)
            .ok_or_else(|| StepErrorKind::UnknownIter {
                stage: s.name.clone(),
                iter: name.into(),
                available: s.leaf_names(),
            })
    }

    fn resolve_iters(&self, stage: usize, names: &[String]) -> Result<Vec<IterId>, StepErrorKind> {
        names.iter().map(|n| self.resolve_iter(stage, n)).collect()
    }

    fn apply_step(&mut self, step: &Step) -> Result<(), StepErrorKind> {
        match step {
            Step::Split {
                stage,
                iter,
                factors,
            } => {
                let s = self.resolve_loop_stage(stage)?;
                let it = self.resolve_iter(s, iter)?;
                self.split(s, it, factors)
            }
            Step::Fuse { stage, iters } => {
                let s = self.resolve_loop_stage(stage)?;
                let ids = self.resolve_iters(s, iters)?;
                self.fuse(s, &ids)
            }
            Step::Reorder { stage, order } => {
                let s = self.resolve_loop_stage(stage)?;
                let ids = self.resolve_iters(s, order)?;
                self.reorder(s, &ids)
            }
            Step::Annotate {
                stage,
                iter,
                annotation,
            } => {
                let s = self.resolve_loop_stage(stage)?;
                let it = self.resolve_iter(s, iter)?;
                self.annotate(s, it, *annotation)
            }
            Step::Pragma {
                stage,
                auto_unroll_max_step,
            } => {
                let s = self.resolve_loop_stage(stage)?;
                self.pragma(s, *auto_unroll_max_step)
            }
            Step::ComputeAt {
                stage,
                target,
                iter,
            } => {
                let s = self.resolve_stage(stage)?;
                let t = self.resolve_loop_stage(target)?;
                let it = self.resolve_iter(t, iter)?;
                self.compute_at(s, t, it)
            }
            Step::ComputeInline { stage } => {
                let s = self.resolve_stage(stage)?;
                self.compute_inline(s)
            }
            Step::ComputeRoot { stage } => {
                let s = self.resolve_stage(stage)?;
                self.compute_root(s)
            }
            Step::CacheWrite { stage, layout } => {
                let s = self.resolve_stage(stage)?;
                self.cache_write(s, layout.as_deref())
            }
            Step::CacheRead {
                stage,
                readers,
                layout,
            } => {
                let s = self.resolve_stage(stage)?;
                if self.stages[s].compute_at == ComputeAt::Inline {
                    return Err(StepErrorKind::NoLoops {
                        stage: stage.clone(),
                        why: "it is inlined",
                    });
                }
                let readers: Vec<usize> = readers
                    .iter()
                    .map(|r| self.resolve_stage(r))
                    .collect::<Result<_, _>>()?;
                self.cache_read(s, &readers, layout.as_deref())
            }
            Step::PackPanel {
                stage,
                reader,
                axes,
            } => {
                let s = self.resolve_stage(stage)?;
                let r = self.resolve_loop_stage(reader)?;
                self.pack_panel(s, r, axes)
            }
            Step::Rfactor { stage, iter } => {
                let s = self.resolve_loop_stage(stage)?;
                let it = self.resolve_iter(s, iter)?;
                self.rfactor(s, it)
            }
            Step::Tensorize {
                stage,
                iter,
                kernel,
            } => {
                let s = self.resolve_loop_stage(stage)?;
                let it = self.resolve_iter(s, iter)?;
                self.tensorize(s, it, kernel)
            }
            Step::RowMath { stage, iter, isa } => {
                let s = self.resolve_loop_stage(stage)?;
                let it = self.resolve_iter(s, iter)?;
                self.row_math(s, it, isa)
            }
            Step::Pack { stage, iter, isa } => {
                let s = self.resolve_loop_stage(stage)?;
                let it = self.resolve_iter(s, iter)?;
                self.pack(s, it, isa)
            }
        }
    }

    /// Applies `step`, validating it first; on error the state is unchanged
    /// and the error names the step and its position.
    pub fn apply(&mut self, step: Step) -> Result<(), StepError> {
        let mut next = self.clone();
        match next
            .apply_step(&step)
            .and_then(|()| next.check_invariants())
        {
            Ok(()) => {
                next.steps.push(step);
                *self = next;
                Ok(())
            }
            Err(kind) => Err(StepError {
                index: self.steps.len(),
                step: Box::new(step),
                kind,
            }),
        }
    }

    /// The state reached by applying `steps` to the initial state of `dag`.
    pub fn replay(dag: &ComputeDag, steps: &[Step]) -> Result<State, StepError> {
        let mut state = State::new(dag);
        for step in steps {
            state.apply(step.clone())?;
        }
        Ok(state)
    }
}
