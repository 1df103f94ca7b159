//! The row-math rule: a site whose stage computes an f32 transcendental
//! (in its own rule or in an inlined producer's, once the sketch's inlining
//! is done) may run those calls through the row primitives of each
//! row-math ISA the target allows. The sketch only lists the ISAs;
//! annotation decides, per candidate, whether and with which one (a
//! `row_math` step on the vectorised innermost loop), so the search picks
//! by measurement. A target without one (`TESSERA_ISA=sse`) gets none.

use crate::runtime::Target;
use crate::runtime::row_math::allowed_isas;
use crate::schedule::{State, Step};
use crate::te::ComputeDag;

use super::{Sketch, SketchStep};

/// Marks the sites of `sketch` that may use row math on `target`.
pub(super) fn mark_row_math_sites(sketch: &mut Sketch, dag: &ComputeDag, target: &Target) {
    let isas = allowed_isas(target);
    if isas.is_empty() {
        return;
    }
    let mut inlined = State::new(dag);
    for step in &sketch.steps {
        if let SketchStep::Fixed(step @ Step::ComputeInline { .. }) = step {
            // A sketch's inlining applies; if one does not, that stage
            // simply keeps its rule here.
            let _ = inlined.apply(step.clone());
        }
    }
    for site in &mut sketch.sites {
        let computes = inlined
            .stage_index(&site.stage)
            .is_some_and(|index| inlined.computes_transcendental(index));
        if site.vectorize && computes {
            site.row_math = isas.clone();
        }
    }
}
