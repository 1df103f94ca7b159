//! The row-fusion rule: a stage at the end of a row normalisation (softmax,
//! layer_norm, a user's rms_norm) computes its whole chain of row
//! reductions and per-row producers inside its row loop, one row per
//! iteration, so each row is read from memory once and stays in cache
//! across the passes. Which stages join is decided from the DAG's
//! structure (see `stage::row_fusion_members`), never from names.

use crate::runtime::Target;
use crate::schedule::Step;

use super::simple::Simple;
use super::stage::Stage;
use super::{Condition, SketchRule, SketchStep, Variant, VariantKind};

/// The stage's simple schedule with its row chain computed in its row
/// loop; one alternative besides the others.
pub(super) struct RowFusion;

impl SketchRule for RowFusion {
    fn name(&self) -> &'static str {
        "row_fusion"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(stage.row_fusion.is_some())
    }

    fn apply(&self, stage: &Stage, target: &Target) -> Vec<Variant> {
        let Some(fusion) = &stage.row_fusion else {
            return Vec::new();
        };
        // Its own loops as the simple rule makes them (the row loop is a
        // leading axis, which that rule leaves whole), then the members,
        // consumers first.
        let mut variants = Simple.apply(stage, target);
        for variant in &mut variants {
            variant.kind = VariantKind::RowFusion {
                members: fusion.members.clone(),
            };
            variant.steps.extend(fusion.members.iter().map(|member| {
                SketchStep::Fixed(Step::ComputeAt {
                    stage: member.clone(),
                    target: stage.name.clone(),
                    iter: fusion.row_loop.clone(),
                })
            }));
        }
        variants
    }
}
