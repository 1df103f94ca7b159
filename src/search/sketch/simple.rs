//! The simple rule, last in the list: a stage is computed at the root, its
//! innermost spatial axis split for vectorization, its reductions between
//! the two parts.

use crate::runtime::Target;
use crate::schedule::Step;

use super::stage::Stage;
use super::{Condition, SketchRule, SketchStep, TileRole, Variant, VariantKind, site};

/// The simple schedule of a root stage; applies to every stage that reaches it.
pub(super) struct Simple;

impl SketchRule for Simple {
    fn name(&self) -> &'static str {
        "simple"
    }

    fn condition(&self, _stage: &Stage) -> Condition {
        Condition::Apply
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        let spatial = stage.spatial_axes();
        let mut steps = Vec::new();
        if let Some((last, extent)) = spatial.last().filter(|(_, e)| *e > 1) {
            steps.push(SketchStep::Tile {
                stage: stage.name.clone(),
                iter: last.clone(),
                extent: *extent,
                parts: 1,
                role: TileRole::Plain,
            });
            let mut order: Vec<String> = spatial[..spatial.len() - 1]
                .iter()
                .map(|(n, _)| n.clone())
                .collect();
            order.push(format!("{last}.0"));
            order.extend(stage.reduce_axes().into_iter().map(|(n, _)| n));
            order.push(format!("{last}.1"));
            steps.push(SketchStep::Fixed(Step::Reorder {
                stage: stage.name.clone(),
                order,
            }));
        }
        vec![Variant {
            stage: stage.name.clone(),
            kind: VariantKind::Simple,
            steps,
            sites: vec![site(&stage.name, true, true, true)],
        }]
    }
}
