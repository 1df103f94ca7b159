//! Recovering a candidate (sketch and decisions) from a recorded step list,
//! so that records from the cache seed the evolutionary search.

use crate::schedule::{Annotation, Step};
use crate::te::ComputeDag;

use super::annotate::{Decisions, materialize};
use super::evolution::Candidate;
use super::sketch::{Sketch, SketchStep};

/// The decisions of `sketch` that `steps` were made from, if any.
fn infer(sketch: &Sketch, steps: &[Step]) -> Option<Decisions> {
    if steps.len() < sketch.steps.len() {
        return None;
    }
    let mut tiles = Vec::new();
    for (template, step) in sketch.steps.iter().zip(steps) {
        match (template, step) {
            (SketchStep::Fixed(s), t) if s == t => {}
            (
                SketchStep::Tile {
                    stage, iter, parts, ..
                },
                Step::Split {
                    stage: s,
                    iter: i,
                    factors,
                },
            ) if stage == s && iter == i && factors.len() == *parts => {
                tiles.push(factors.clone());
            }
            (
                SketchStep::Follow { stage, iter, .. },
                Step::Split {
                    stage: s, iter: i, ..
                },
            ) if stage == s && iter == i => {}
            _ => return None,
        }
    }
    let rest = &steps[sketch.steps.len()..];
    let n = sketch.sites.len();
    let mut decisions = Decisions {
        tiles,
        parallel: vec![0; n],
        vectorize: vec![false; n],
        unroll: vec![0; n],
    };
    for step in rest {
        let site = sketch.sites.iter().position(|s| s.stage == step.stage())?;
        match step {
            Step::Fuse { iters, .. } => decisions.parallel[site] = iters.len(),
            Step::Annotate {
                annotation: Annotation::Parallel,
                ..
            } if decisions.parallel[site] == 0 => {
                decisions.parallel[site] = 1;
            }
            Step::Annotate {
                annotation: Annotation::Parallel,
                ..
            } => {}
            Step::Annotate {
                annotation: Annotation::Vectorize,
                ..
            } => decisions.vectorize[site] = true,
            Step::Pragma {
                auto_unroll_max_step,
                ..
            } => decisions.unroll[site] = *auto_unroll_max_step,
            _ => return None,
        }
    }
    Some(decisions)
}

/// The candidate `steps` came from, among `sketches` (checked by
/// materialising it again).
pub fn infer_candidate(dag: &ComputeDag, sketches: &[Sketch], steps: &[Step]) -> Option<Candidate> {
    sketches.iter().enumerate().find_map(|(i, sketch)| {
        let decisions = infer(sketch, steps)?;
        let state = materialize(dag, sketch, &decisions).ok()?;
        (state.steps() == steps).then_some(Candidate {
            sketch: i,
            decisions,
            state,
        })
    })
}
