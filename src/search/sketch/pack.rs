//! The packing rule: a site whose stage is a copy made by the sketch (a
//! `cache_read` panel of a tensorized GEMM operand, or a `pack_panel`
//! gather of a windowed or strided read) may run its two innermost loops
//! as one call of the packing routine of each ISA the target allows
//! (`runtime::pack`). The sketch only lists the ISAs; annotation decides,
//! per candidate, whether and with which one (a `pack` step), so the search
//! picks by measurement.

use crate::runtime::Target;
use crate::runtime::pack::allowed_isas;
use crate::schedule::Step;

use super::{Sketch, SketchStep};

/// Marks the sites of `sketch` whose stage is one of its `cache_read`
/// copies or `pack_panel` gathers with the packing ISAs `target` allows.
pub(super) fn mark_pack_sites(sketch: &mut Sketch, target: &Target) {
    let copies: Vec<String> = sketch
        .steps
        .iter()
        .filter_map(|s| match s {
            SketchStep::Fixed(Step::CacheRead { stage, .. }) => Some(format!("{stage}.local")),
            SketchStep::Fixed(Step::PackPanel { stage, .. }) => Some(format!("{stage}.panel")),
            _ => None,
        })
        .collect();
    let isas = allowed_isas(target);
    for site in &mut sketch.sites {
        if copies.contains(&site.stage) {
            site.pack = isas.clone();
        }
    }
}
