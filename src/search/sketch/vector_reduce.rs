//! The vector-reduce rule: a float reduction that reads consecutive
//! elements along its innermost reduction axis keeps that axis innermost,
//! where annotation may vectorize it (lane-wise partial results, one
//! horizontal step: see `codegen`'s vectorized reduction loops) — at the
//! root, and, when its only consumer reads it at its own leading axes
//! (`row_max[i]` in `exp[i, j]`), also computed at that consumer's row
//! loop, so that each row is reduced and consumed while it is in cache.

use crate::runtime::Target;
use crate::schedule::Step;

use super::stage::{Stage, reduces_contiguously};
use super::{Condition, SketchRule, SketchStep, Variant, VariantKind, site};

/// Reduction along the contiguous axis, innermost; one or two alternatives
/// to the simple schedule (which vectorizes a spatial axis instead).
pub(super) struct VectorReduce;

impl SketchRule for VectorReduce {
    fn name(&self) -> &'static str {
        "vector_reduce"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(reduces_contiguously(&stage.op))
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        let mut variants = vec![Variant {
            stage: stage.name.clone(),
            kind: VariantKind::VectorReduce { at: None },
            steps: Vec::new(),
            sites: vec![site(&stage.name, true, true, true)],
        }];
        if let Some(consumer) = &stage.row_consumer {
            variants.push(Variant {
                stage: stage.name.clone(),
                kind: VariantKind::VectorReduce {
                    at: Some(consumer.name.clone()),
                },
                steps: vec![SketchStep::Fixed(Step::ComputeAt {
                    stage: stage.name.clone(),
                    target: consumer.name.clone(),
                    iter: consumer.row_loop.clone(),
                })],
                sites: vec![site(&stage.name, false, true, true)],
            });
        }
        variants
    }
}
