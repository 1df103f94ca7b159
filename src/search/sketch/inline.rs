//! The inline rules: an elementwise stage that is not an output and calls
//! no math intrinsic is substituted into its consumers — always
//! ([`AlwaysInline`]), or, for a padding stage, as one alternative
//! ([`InlinePadding`]): inlined padding puts a select in the innermost
//! loop, so the later rules also schedule it at the root, and
//! [`PaddingAtConsumer`] inside its window consumer's loops. A stage read
//! across an axis of its consumer (a per-row reciprocal) is not inlined:
//! it would be recomputed for every element of the row.

use crate::runtime::Target;
use crate::schedule::Step;

use super::stage::Stage;
use super::{Condition, SketchRule, SketchStep, Variant, VariantKind, padding_site};

/// Inlines an elementwise stage without a select that is read once per
/// element, and nothing else.
pub(super) struct AlwaysInline;

impl SketchRule for AlwaysInline {
    fn name(&self) -> &'static str {
        "always_inline"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::ApplyAndSkipRest.when(stage.always_inlined())
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        vec![inline(stage)]
    }
}

/// Inlines a padding stage, as one alternative among the later rules'.
pub(super) struct InlinePadding;

impl SketchRule for InlinePadding {
    fn name(&self) -> &'static str {
        "inline_padding"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(stage.inlinable() && stage.has_select())
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        vec![inline(stage)]
    }
}

/// Computes a padding stage inside the loops of the consumer that reads it
/// through a window: once per plane (no recomputation, the plane in cache
/// when read) and once per output row (the window's rows, recomputed where
/// windows overlap, in L1 when read).
pub(super) struct PaddingAtConsumer;

impl SketchRule for PaddingAtConsumer {
    fn name(&self) -> &'static str {
        "padding_at_consumer"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(stage.window_consumer.is_some())
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        let Some(consumer) = &stage.window_consumer else {
            return Vec::new();
        };
        std::iter::once(&consumer.plane_loop)
            .chain(&consumer.row_loop)
            .map(|iter| Variant {
                stage: stage.name.clone(),
                kind: VariantKind::At {
                    consumer: consumer.name.clone(),
                    iter: iter.clone(),
                },
                steps: vec![SketchStep::Fixed(Step::ComputeAt {
                    stage: stage.name.clone(),
                    target: consumer.name.clone(),
                    iter: iter.clone(),
                })],
                sites: vec![padding_site(&stage.name)],
            })
            .collect()
    }
}

fn inline(stage: &Stage) -> Variant {
    Variant {
        stage: stage.name.clone(),
        kind: VariantKind::Inline,
        steps: vec![SketchStep::Fixed(Step::ComputeInline {
            stage: stage.name.clone(),
        })],
        sites: Vec::new(),
    }
}
