//! The rfactor rule: a reduction with little spatial parallelism and a long
//! reduction has its innermost reduction axis split, and the outer part
//! factored into a parallel stage `<stage>.rf`.

use crate::runtime::Target;
use crate::schedule::Step;

use super::stage::Stage;
use super::{Condition, SketchRule, SketchStep, TileRole, Variant, VariantKind, site};

/// Rfactor, as one alternative to the simple schedule.
pub(super) struct Rfactor;

/// The reduction axis rfactor splits, (name, extent), when the stage has at
/// most 64 output elements, at least 256 reduced per element, and an
/// innermost reduction axis of at least 8.
fn factored_axis(stage: &Stage) -> Option<(String, i64)> {
    let spatial: i64 = stage.op.axes.iter().map(|a| a.extent()).product();
    let reduce = stage.reduce_axes();
    let total: i64 = reduce.iter().map(|(_, e)| e).product();
    let (last, extent) = reduce.last()?.clone();
    (spatial <= 64 && total >= 256 && extent >= 8).then_some((last, extent))
}

impl SketchRule for Rfactor {
    fn name(&self) -> &'static str {
        "rfactor"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(factored_axis(stage).is_some())
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        let Some((last, extent)) = factored_axis(stage) else {
            return Vec::new();
        };
        let rf = format!("{}.rf", stage.name);
        let steps = vec![
            SketchStep::Tile {
                stage: stage.name.clone(),
                iter: last.clone(),
                extent,
                parts: 1,
                role: TileRole::Plain,
            },
            SketchStep::Fixed(Step::Rfactor {
                stage: stage.name.clone(),
                iter: format!("{last}.0"),
            }),
        ];
        vec![Variant {
            stage: stage.name.clone(),
            kind: VariantKind::Rfactor,
            steps,
            sites: vec![
                site(&rf, true, false, true),
                site(&stage.name, true, false, true),
            ],
        }]
    }
}
