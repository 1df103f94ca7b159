//! Where stages are computed: compute_at, compute_inline, compute_root, and
//! the invariants every state keeps.

use super::error::StepErrorKind;
use super::state::{ComputeAt, IterId, State};
use super::step::Annotation;

impl State {
    fn require_compute(&self, stage: usize, what: &'static str) -> Result<(), StepErrorKind> {
        if self.stages[stage].compute.is_none() {
            return Err(StepErrorKind::InputStage {
                stage: self.stages[stage].name.clone(),
                what,
            });
        }
        Ok(())
    }

    fn require_movable(&self, stage: usize) -> Result<(), StepErrorKind> {
        self.require_compute(stage, "inputs are not computed anywhere")?;
        if self.stages[stage].is_output {
            return Err(StepErrorKind::OutputPlacement {
                stage: self.stages[stage].name.clone(),
            });
        }
        Ok(())
    }

    pub(crate) fn compute_at(
        &mut self,
        stage: usize,
        target: usize,
        iter: IterId,
    ) -> Result<(), StepErrorKind> {
        self.require_movable(stage)?;
        self.stages[stage].compute_at = ComputeAt::At {
            stage: target,
            iter,
        };
        Ok(())
    }

    pub(crate) fn compute_inline(&mut self, stage: usize) -> Result<(), StepErrorKind> {
        self.require_movable(stage)?;
        if self.stages[stage].is_reduction() {
            return Err(StepErrorKind::InlineReduction {
                stage: self.stages[stage].name.clone(),
            });
        }
        self.stages[stage].compute_at = ComputeAt::Inline;
        Ok(())
    }

    pub(crate) fn compute_root(&mut self, stage: usize) -> Result<(), StepErrorKind> {
        self.require_compute(stage, "inputs are not computed anywhere")?;
        self.stages[stage].compute_at = ComputeAt::Root;
        Ok(())
    }

    /// Whether stage `stage` is `host` or is computed (directly or through
    /// other stages) at loop `iter` of `host` or at a loop inside it.
    pub(crate) fn computed_within(&self, stage: usize, host: usize, iter: IterId) -> bool {
        if stage == host {
            return true;
        }
        let position = |s: usize, it: IterId| self.stages[s].leaves.iter().position(|&l| l == it);
        let Some(limit) = position(host, iter) else {
            return false;
        };
        let mut current = stage;
        // A step under validation may have made a cycle of placements; a
        // walk longer than the stage count is in one and never reaches `host`.
        for _ in 0..self.stages.len() {
            let ComputeAt::At {
                stage: up,
                iter: at,
            } = self.stages[current].compute_at
            else {
                return false;
            };
            if up == host {
                return position(host, at).is_some_and(|p| p >= limit);
            }
            current = up;
        }
        false
    }

    /// The invariants every state keeps; checked after each step.
    ///
    /// - A stage computed at a loop is computed at a current, non-vectorized
    ///   loop of a stage that is not inlined, and every one of its
    ///   (effective) consumers is that stage or is computed within that loop
    ///   (at it or deeper, directly or through other stages): each iteration
    ///   of the loop computes the region all of them read before they read it.
    /// - A vectorized loop is the innermost loop of its stage.
    pub(crate) fn check_invariants(&self) -> Result<(), StepErrorKind> {
        for (index, stage) in self.stages.iter().enumerate() {
            if let ComputeAt::At { stage: host, iter } = stage.compute_at {
                let host_stage = &self.stages[host];
                if host_stage.compute_at == ComputeAt::Inline || host_stage.compute.is_none() {
                    return Err(StepErrorKind::TargetInlined {
                        target: host_stage.name.clone(),
                    });
                }
                let consumers = self.effective_consumers(index);
                let outside: Vec<usize> = consumers
                    .iter()
                    .copied()
                    .filter(|&c| !self.computed_within(c, host, iter))
                    .collect();
                if host == index || consumers.is_empty() || !outside.is_empty() {
                    let names = |list: &[usize]| -> Vec<&str> {
                        list.iter().map(|&c| self.stages[c].name.as_str()).collect()
                    };
                    let who = match names(&outside).as_slice() {
                        [] if host == index => format!("'{}' itself is", stage.name),
                        [] => "none of them is".to_string(),
                        [one] => format!("{one} is"),
                        many => format!("{} are", many.join(", ")),
                    };
                    return Err(StepErrorKind::NotTheConsumer {
                        stage: stage.name.clone(),
                        consumers: if consumers.is_empty() {
                            "no stage".into()
                        } else {
                            names(&consumers).join(", ")
                        },
                        outside: format!(
                            "{who} not inside '{}.{}'",
                            host_stage.name, host_stage.iters[iter].name
                        ),
                    });
                }
                if host_stage.iters[iter].annotation == Annotation::Vectorize {
                    return Err(StepErrorKind::AttachedAtVectorized {
                        stage: stage.name.clone(),
                        iter: host_stage.iters[iter].name.clone(),
                    });
                }
            }
            let vectorized = stage
                .leaves
                .iter()
                .position(|&l| stage.iters[l].annotation == Annotation::Vectorize);
            if let Some(p) = vectorized
                && p + 1 < stage.leaves.len()
            {
                return Err(StepErrorKind::VectorizeNotInnermost {
                    iter: stage.iters[stage.leaves[p]].name.clone(),
                    inner: stage.iters[stage.leaves[p + 1]].name.clone(),
                });
            }
            self.check_row_math(index)?;
            self.check_pack(index)?;
        }
        Ok(())
    }
}
