//! Recovering a candidate (sketch and decisions) from a recorded step list,
//! so that records from the cache seed the evolutionary search.

use crate::runtime::micro_kernels::Isa;
use crate::schedule::{Annotation, Step};
use crate::te::ComputeDag;

use super::annotate::{Decisions, materialize};
use super::evolution::Candidate;
use super::sketch::{Sketch, SketchStep};

/// The decisions of `sketch` that `steps` were made from, if any.
fn infer(sketch: &Sketch, steps: &[Step]) -> Option<Decisions> {
    let templates = sketch
        .steps
        .iter()
        .filter(|s| !matches!(s, SketchStep::Factor { .. }))
        .count();
    if steps.len() < templates {
        return None;
    }
    // Slots in sketch order; a factor slot is filled by the Follow that uses it.
    let mut tiles: Vec<Vec<i64>> = sketch.tiles().iter().map(|_| Vec::new()).collect();
    let mut slot = 0;
    let mut template_steps = sketch.steps.iter();
    for step in &steps[..templates] {
        let template = loop {
            match template_steps.next()? {
                SketchStep::Factor { .. } => slot += 1,
                t => break t,
            }
        };
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
                tiles[slot] = factors.clone();
                slot += 1;
            }
            (
                SketchStep::Follow {
                    stage, iter, outer, ..
                },
                Step::Split {
                    stage: s,
                    iter: i,
                    factors,
                },
            ) if stage == s && iter == i && factors.len() == 2 => {
                *tiles.get_mut(*outer)? = vec![factors[0]];
            }
            _ => return None,
        }
    }
    let rest = &steps[templates..];
    let n = sketch.sites.len();
    let mut decisions = Decisions {
        tiles,
        parallel: vec![0; n],
        vectorize: vec![false; n],
        unroll: vec![0; n],
        row_math: vec![None; n],
        pack: vec![None; n],
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
            Step::Annotate {
                annotation: Annotation::Unroll,
                ..
            } if sketch.sites[site].unroll_tile => {}
            Step::Pragma {
                auto_unroll_max_step,
                ..
            } => decisions.unroll[site] = *auto_unroll_max_step,
            Step::RowMath { isa, .. } => decisions.row_math[site] = Some(Isa::from_name(isa)?),
            Step::Pack { isa, .. } => decisions.pack[site] = Some(Isa::from_name(isa)?),
            _ => return None,
        }
    }
    Some(decisions)
}

/// The candidate `steps` came from, among `sketches` (checked by
/// materialising it again).
pub fn infer_candidate(dag: &ComputeDag, sketches: &[Sketch], steps: &[Step]) -> Option<Candidate> {
    sketches.iter().enumerate().find_map(|(i, sketch)| {
        let fused = infer(sketch, steps)?;
        // A fuse names every loop it takes, but the parallel decision counts
        // only loops of extent > 1: try the counts a fuse of that size allows.
        parallel_guesses(&fused.parallel).find_map(|parallel| {
            let decisions = Decisions {
                parallel,
                ..fused.clone()
            };
            let state = materialize(dag, sketch, &decisions).ok()?;
            (state.steps() == steps).then(|| Candidate::new(i, decisions, state))
        })
    })
}

/// Every parallel decision with each site's count between 1 and its
/// number of fused loops (a site without a parallel loop stays at 0).
fn parallel_guesses(fused: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    let total: usize = fused.iter().map(|&n| n.max(1)).product();
    (0..total).map(move |mut code| {
        fused
            .iter()
            .map(|&n| {
                if n == 0 {
                    return 0;
                }
                let guess = n - code % n;
                code /= n;
                guess
            })
            .collect()
    })
}
