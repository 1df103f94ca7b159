//! The multi-level tiling rules: a reduction with data reuse is tiled
//! `SSRSRS` — each spatial axis split into four levels, each reduction axis
//! into two, ordered S₀S₁R₀S₂R₁S₃ — on its own ([`MultiLevelTiling`]) or
//! computed per tile of its elementwise consumer ([`MultiLevelTilingWithFusion`]);
//! and the two layouts these and the cache-write rules share.

use crate::runtime::Target;
use crate::schedule::Step;

use super::stage::Stage;
use super::{
    Condition, SketchRule, SketchStep, TileRole, Variant, VariantKind, site, tile_consumer_site,
};

/// Fusion of a consumer: when the tiled stage's only consumer is an
/// elementwise output over the same axes (bias + ReLU after dense), the
/// consumer is tiled to match and the tiled stage is computed inside its
/// outer tile loop.
pub(super) struct MultiLevelTilingWithFusion;

impl SketchRule for MultiLevelTilingWithFusion {
    fn name(&self) -> &'static str {
        "multi_level_tiling_with_fusion"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(stage.fusible_consumer.is_some())
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        let Some(consumer) = &stage.fusible_consumer else {
            return Vec::new();
        };
        let spatial = stage.spatial_axes();
        let mut steps = Vec::new();
        tile_ssrsrs(&stage.name, &spatial, &stage.reduce_axes(), &mut steps);
        let _ = fuse_into(&stage.name, &consumer.name, &spatial, 0, &[], &mut steps);
        vec![Variant {
            stage: stage.name.clone(),
            kind: VariantKind::TileWithFusion {
                consumer: consumer.name.clone(),
            },
            steps,
            sites: vec![
                tile_consumer_site(&consumer.name),
                site(&stage.name, false, true, true),
            ],
        }]
    }
}

/// Multi-level tiling of the stage itself, at the root; the last rule of a
/// stage with data reuse, except a matrix-vector product, which also gets
/// the later rules (rfactor, a vectorized reduction).
pub(super) struct MultiLevelTiling;

impl SketchRule for MultiLevelTiling {
    fn name(&self) -> &'static str {
        "multi_level_tiling"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        match stage.is_matrix_vector() {
            false => Condition::ApplyAndSkipRest.when(stage.has_data_reuse()),
            true => Condition::Apply.when(stage.has_data_reuse()),
        }
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        let mut steps = Vec::new();
        tile_ssrsrs(
            &stage.name,
            &stage.spatial_axes(),
            &stage.reduce_axes(),
            &mut steps,
        );
        vec![Variant {
            stage: stage.name.clone(),
            kind: VariantKind::Tile,
            steps,
            sites: vec![site(&stage.name, true, true, true)],
        }]
    }
}

/// Multi-level tiling of `stage` (axes as given): the tile steps and the
/// SSRSRS reorder. Axes of extent 1 are left alone, outermost.
pub(super) fn tile_ssrsrs(
    stage: &str,
    spatial: &[(String, i64)],
    reduce: &[(String, i64)],
    steps: &mut Vec<SketchStep>,
) {
    let mut order: Vec<String> = Vec::new();
    let mut levels: Vec<Vec<String>> = vec![Vec::new(); 6];
    let innermost = spatial.iter().rposition(|(_, extent)| *extent > 1);
    for (axis, (name, extent)) in spatial.iter().enumerate() {
        if *extent == 1 {
            order.push(name.clone());
            continue;
        }
        steps.push(SketchStep::Tile {
            stage: stage.into(),
            iter: name.clone(),
            extent: *extent,
            parts: 3,
            role: TileRole::Spatial {
                vector: Some(axis) == innermost,
            },
        });
        for (level, part) in [(0, 0), (1, 1), (3, 2), (5, 3)] {
            levels[level].push(format!("{name}.{part}"));
        }
    }
    for (name, extent) in reduce {
        if *extent == 1 {
            levels[2].push(name.clone());
            continue;
        }
        steps.push(SketchStep::Tile {
            stage: stage.into(),
            iter: name.clone(),
            extent: *extent,
            parts: 1,
            role: TileRole::Reduce,
        });
        levels[2].push(format!("{name}.0"));
        levels[4].push(format!("{name}.1"));
    }
    order.extend(levels.into_iter().flatten());
    steps.push(SketchStep::Fixed(Step::Reorder {
        stage: stage.into(),
        order,
    }));
}

/// `consumer` split in three levels per axis — outer, a sampled cache
/// block, then exactly one tile of `producer` (whose tiles are the
/// sketch's tiles from `first_tile` on, one per axis of extent > 1) — and
/// `producer` computed inside the consumer's last middle loop. The outer
/// loops of the axes named in `first` come before all others. Returns the
/// last of those (or the last outer loop when `first` is empty): where a
/// packed operand that depends only on those axes is computed.
pub(super) fn fuse_into(
    producer: &str,
    consumer: &str,
    spatial: &[(String, i64)],
    first_tile: usize,
    first: &[String],
    steps: &mut Vec<SketchStep>,
) -> Option<String> {
    let slots = |steps: &Vec<SketchStep>| {
        steps
            .iter()
            .filter(|s| matches!(s, SketchStep::Tile { .. } | SketchStep::Factor { .. }))
            .count()
    };
    // Outer loops of the `first` axes, the other outer loops, middle, inner.
    let mut levels: Vec<Vec<String>> = vec![Vec::new(); 4];
    let mut tile = first_tile;
    for (name, extent) in spatial {
        let outer_level = if first.contains(name) { 0 } else { 1 };
        if *extent == 1 {
            levels[outer_level].push(name.clone());
            continue;
        }
        let outer = slots(steps);
        steps.push(SketchStep::Factor { extent: *extent });
        steps.push(SketchStep::Follow {
            stage: consumer.into(),
            iter: name.clone(),
            tile,
            outer,
        });
        tile += 1;
        levels[outer_level].push(format!("{name}.0"));
        levels[2].push(format!("{name}.1"));
        levels[3].push(format!("{name}.2"));
    }
    let pack_at = if first.is_empty() {
        levels[1].last().cloned()
    } else {
        levels[0].last().cloned()
    };
    let (Some(pack_at), Some(attach)) = (pack_at, levels[2].last().cloned()) else {
        return None;
    };
    steps.push(SketchStep::Fixed(Step::Reorder {
        stage: consumer.into(),
        order: levels.into_iter().flatten().collect(),
    }));
    steps.push(SketchStep::Fixed(Step::ComputeAt {
        stage: producer.into(),
        target: consumer.into(),
        iter: attach,
    }));
    Some(pack_at)
}
