//! Combining the stages' variants into sketches: the cartesian product of
//! each stage's alternatives, always-inlined stages first, at most
//! [`MAX_SKETCHES`] sketches. A consumer that a sketch's variant already
//! schedules (tiling with fusion) takes none of its own variants there,
//! and all of them in the sketches that leave it alone (a cache write).

use crate::schedule::Step;

use super::{MAX_SKETCHES, Sketch, SketchStep, Variant, VariantKind};

/// The cartesian product of the stages' alternatives (at most [`MAX_SKETCHES`]).
pub(super) fn combine(per_stage: Vec<Vec<Variant>>) -> Vec<Sketch> {
    // Each sketch with the consumers its variants fused.
    let mut sketches: Vec<(Sketch, Vec<String>)> = vec![(
        Sketch {
            name: String::new(),
            steps: Vec::new(),
            sites: Vec::new(),
        },
        Vec::new(),
    )];
    // Stages that may be inlined or not: a variant that computes one at the
    // root (a tensorized reader) is only combined with the other choice.
    let optional_inlines: Vec<String> = per_stage
        .iter()
        .filter(|variants| variants.len() > 1)
        .flatten()
        .filter(|variant| variant.kind == VariantKind::Inline)
        .map(|variant| variant.stage.clone())
        .collect();
    // A stage is placed once: a variant computing a stage somewhere (row
    // fusion) is not combined with another that already placed it.
    let conflicts = |sketch: &Sketch, steps: &[SketchStep]| {
        steps.iter().any(|step| match step {
            SketchStep::Fixed(Step::ComputeRoot { stage }) => {
                optional_inlines.contains(stage)
                    && sketch.steps.iter().any(|s| {
                        matches!(s, SketchStep::Fixed(Step::ComputeInline { stage: x }) if x == stage)
                    })
            }
            SketchStep::Fixed(Step::ComputeAt { stage, .. }) => sketch.steps.iter().any(|s| {
                matches!(s, SketchStep::Fixed(Step::ComputeAt { stage: x, .. }) if x == stage)
            }),
            _ => false,
        })
    };
    // Inlining first, so that later steps see the final stage structure.
    let (inlines, others): (Vec<_>, Vec<_>) = per_stage
        .into_iter()
        .filter(|v| !v.is_empty())
        .partition(|v| v.len() == 1 && v[0].kind == VariantKind::Inline);
    for variants in inlines.into_iter().chain(others) {
        let mut next: Vec<(Sketch, Vec<String>)> = Vec::new();
        for (sketch, fused) in &sketches {
            if variants.iter().any(|v| fused.contains(&v.stage)) {
                if next.len() < MAX_SKETCHES {
                    next.push((sketch.clone(), fused.clone()));
                }
                continue;
            }
            for variant in &variants {
                if next.len() == MAX_SKETCHES {
                    break;
                }
                if conflicts(sketch, &variant.steps) {
                    continue;
                }
                let mut fused = fused.clone();
                fused.extend(variant.fused_consumer().map(str::to_string));
                let mut s = sketch.clone();
                if !s.name.is_empty() {
                    s.name.push(' ');
                }
                s.name.push_str(&variant.name());
                // Tile indices are the variant's own; shift them past the
                // tiles already in the sketch.
                let offset = s.tiles().len();
                s.steps.extend(variant.steps.iter().map(|step| match step {
                    SketchStep::Follow {
                        stage,
                        iter,
                        tile,
                        outer,
                    } => SketchStep::Follow {
                        stage: stage.clone(),
                        iter: iter.clone(),
                        tile: tile + offset,
                        outer: outer + offset,
                    },
                    other => other.clone(),
                }));
                s.sites.extend(variant.sites.iter().cloned());
                next.push((s, fused));
            }
        }
        sketches = next;
    }
    sketches.into_iter().map(|(sketch, _)| sketch).collect()
}
