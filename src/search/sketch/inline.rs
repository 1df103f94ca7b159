//! The inline rules: an elementwise stage that is not an output and calls
//! no math intrinsic is substituted into its consumers — always
//! ([`AlwaysInline`]), or, for a padding stage, as one alternative
//! ([`InlinePadding`]): inlined padding puts a select in the innermost
//! loop, so the later rules also schedule it at the root. A stage read
//! across an axis of its consumer (a per-row reciprocal) is not inlined:
//! it would be recomputed for every element of the row.

use crate::runtime::Target;
use crate::schedule::Step;

use super::stage::Stage;
use super::{Condition, SketchRule, SketchStep, Variant, VariantKind};

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
