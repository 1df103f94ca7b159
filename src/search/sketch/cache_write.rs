//! The cache-write rules: a tiled reduction whose consumer is not fused is
//! computed in a local cache stage `<stage>.local`, tiled `SSRSRS` and
//! computed inside the outer tile loop of the original stage, which copies
//! it out ([`MultiLevelTilingWithCacheWrite`]); and the same with an input
//! the tile reuses packed into a local buffer ([`MultiLevelTilingWithPacking`]).

use crate::runtime::Target;
use crate::schedule::Step;

use super::stage::Stage;
use super::tiling::{fuse_into, tile_ssrsrs};
use super::{
    AnnotationSite, Condition, SketchRule, SketchStep, Variant, VariantKind, site,
    tile_consumer_site,
};

/// The cache-write sketch of `stage`, with the outer loops of the axes
/// `first` outermost, and where a packed operand depending only on those
/// axes is computed (none when no loop is tiled).
fn cache_write(stage: &Stage, first: &[String]) -> (Vec<SketchStep>, Option<String>) {
    let local = format!("{}.local", stage.name);
    let spatial = stage.spatial_axes();
    let mut steps = vec![SketchStep::Fixed(Step::CacheWrite {
        stage: stage.name.clone(),
        layout: None,
    })];
    tile_ssrsrs(&local, &spatial, &stage.reduce_axes(), &mut steps);
    let pack_at = fuse_into(&local, &stage.name, &spatial, 0, first, &mut steps);
    (steps, pack_at)
}

/// The sites of a cache-write sketch: the stage copies out, the local
/// stage computes the tiles.
fn cache_write_sites(stage: &Stage) -> Vec<AnnotationSite> {
    vec![
        tile_consumer_site(&stage.name),
        site(&format!("{}.local", stage.name), false, true, true),
    ]
}

/// Multi-level tiling in a local cache stage.
pub(super) struct MultiLevelTilingWithCacheWrite;

impl SketchRule for MultiLevelTilingWithCacheWrite {
    fn name(&self) -> &'static str {
        "multi_level_tiling_with_cache_write"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(stage.has_data_reuse())
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        let (steps, _) = cache_write(stage, &[]);
        vec![Variant {
            stage: stage.name.clone(),
            kind: VariantKind::TileWithCacheWrite,
            steps,
            sites: cache_write_sites(stage),
        }]
    }
}

/// Packing: an input the tile reuses is copied into a local buffer read
/// contiguously by the tile, once per block of the axes it depends on,
/// whose loops go outermost (the panel of B per column block, as in a
/// hand-written GEMM). One sketch per such input.
pub(super) struct MultiLevelTilingWithPacking;

impl SketchRule for MultiLevelTilingWithPacking {
    fn name(&self) -> &'static str {
        "multi_level_tiling_with_packing"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(stage.has_data_reuse() && !stage.packable_inputs().is_empty())
    }

    fn apply(&self, stage: &Stage, _target: &Target) -> Vec<Variant> {
        let local = format!("{}.local", stage.name);
        let mut variants = Vec::new();
        for (input, axes) in stage.packable_inputs() {
            let (mut steps, Some(pack_at)) = cache_write(stage, &axes) else {
                continue;
            };
            let packed = format!("{input}.local");
            steps.push(SketchStep::Fixed(Step::CacheRead {
                stage: input.clone(),
                readers: vec![local.clone()],
                layout: None,
            }));
            steps.push(SketchStep::Fixed(Step::ComputeAt {
                stage: packed.clone(),
                target: stage.name.clone(),
                iter: pack_at,
            }));
            let mut sites = cache_write_sites(stage);
            sites.push(site(&packed, false, true, false));
            variants.push(Variant {
                stage: stage.name.clone(),
                kind: VariantKind::TileWithPacking { input },
                steps,
                sites,
            });
        }
        variants
    }
}
