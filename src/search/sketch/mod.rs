//! Sketch generation: derivation rules over the DAG's stages, as in Ansor
//! for CPU. A sketch fixes the structure of a schedule (which stages are
//! inlined, which are tiled and how deep, cache-write stages, fusion of a
//! consumer, rfactor) and leaves the numbers — tile sizes, how many loops
//! run in parallel, vectorization, unrolling — to annotation.
//!
//! Each rule says of a stage whether it is skipped, applies, or applies and
//! ends the stage's list; applied, it gives the stage's alternatives
//! (variants). `RULES` holds them in the order they are tried, top to
//! bottom (see [`rule_names`]); the sketches are the product of the stages'
//! alternatives.

mod cache_write;
mod combine;
mod definition;
mod inline;
mod pack;
mod rfactor;
mod row_fusion;
mod row_math;
mod simple;
mod stage;
mod stencil;
mod tensorize;
#[cfg(test)]
mod tests;
mod tiling;
mod vector_reduce;

use crate::runtime::Target;
use std::fmt;

use crate::te::ComputeDag;

pub use definition::{AnnotationSite, Sketch, SketchStep, TileRole};

use cache_write::{MultiLevelTilingWithCacheWrite, MultiLevelTilingWithPacking};
use definition::{padding_site, site, tile_consumer_site};
use inline::{AlwaysInline, InlinePadding, PaddingAtConsumer};
use rfactor::Rfactor;
use row_fusion::RowFusion;
use simple::Simple;
use stage::{Stage, stages_of};
use stencil::StencilRows;
use tensorize::{PackHow, Packing, Tensorize, TensorizeInto};
use tiling::{MultiLevelTiling, MultiLevelTilingWithFusion};
use vector_reduce::VectorReduce;

/// Most sketches generated for one DAG.
pub const MAX_SKETCHES: usize = 64;

/// What a rule does with a stage (Ansor's `ConditionKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Condition {
    /// The rule does not apply; the next one is tried.
    Skip,
    /// The rule adds its alternatives; the next one is tried.
    Apply,
    /// The rule adds its alternatives, and the stage's list ends here.
    ApplyAndSkipRest,
}

impl Condition {
    /// This condition when `holds`, else [`Condition::Skip`].
    fn when(self, holds: bool) -> Condition {
        if holds { self } else { Condition::Skip }
    }
}

/// A derivation rule (Ansor's `SketchGenerationRule`): when it applies to a
/// stage, and the alternatives it then gives the stage.
trait SketchRule: Sync {
    /// The rule's name (snake case), as [`rule_names`] lists it.
    fn name(&self) -> &'static str;
    /// Whether the rule applies to `stage`, and whether the rules after it
    /// are still tried.
    fn condition(&self, stage: &Stage) -> Condition;
    /// The stage's alternatives from this rule for `target` (possibly
    /// none: no micro-kernel the target allows, no loop to tile).
    fn apply(&self, stage: &Stage, target: &Target) -> Vec<Variant>;
}

/// The rules, in the order they are tried on each stage.
static RULES: &[&dyn SketchRule] = &[
    // Elementwise, no select: inlined, nothing else.
    &AlwaysInline,
    // Padding: inlined, computed in its window consumer's plane or row
    // loop, or at the root by a later rule.
    &InlinePadding,
    &PaddingAtConsumer,
    // A windowed product whose weights stay put along the output row (a
    // depthwise convolution): each row one stencil call, in place or in
    // its fused consumer's rows; the rules below add their own sketches.
    &StencilRows,
    // A reduction with data reuse whose only consumer is elementwise:
    // tiled inside the consumer's tiles, or tensorized there (the
    // consumer then has no variants of its own)...
    &MultiLevelTilingWithFusion,
    &Tensorize {
        into: TensorizeInto::FusedConsumer,
    },
    // ...and any reduction with data reuse: tiled in a cache-write stage
    // (with a reused input packed, or not), tensorized there, or tiled at
    // the root, the consumer scheduled on its own; nothing else.
    &MultiLevelTilingWithPacking,
    &MultiLevelTilingWithCacheWrite,
    &Tensorize {
        into: TensorizeInto::CacheWrite,
    },
    &MultiLevelTiling,
    // A reduction with little parallelism and a long reduction: rfactor.
    &Rfactor,
    // A reduction along consecutive elements: that axis innermost, to be
    // vectorized lane-wise, at the root or in its consumer's row loop.
    &VectorReduce,
    // The last stage of a row normalisation: also with its row reductions
    // and per-row producers computed in its row loop, one row at a time.
    &RowFusion,
    // Every stage left: at the root, innermost axis split for vectors.
    &Simple,
];

/// The names of the sketch rules, in the order they are tried on each stage.
pub fn rule_names() -> Vec<&'static str> {
    RULES.iter().map(|rule| rule.name()).collect()
}

/// One alternative of one stage: the steps it adds to a sketch and the
/// sites it gives annotation.
#[derive(Clone, Debug, PartialEq)]
struct Variant {
    /// The stage the rule scheduled.
    stage: String,
    /// What the rule made of it.
    kind: VariantKind,
    /// The steps.
    steps: Vec<SketchStep>,
    /// Where annotation decides parallel / vectorize / unroll.
    sites: Vec<AnnotationSite>,
}

/// What a variant makes of its stage; printed as the part of a sketch's
/// name after `<stage>:` (e.g. `tile+cache_write`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum VariantKind {
    /// Computed in its consumers.
    Inline,
    /// Tiled inside the tiles of its elementwise consumer `consumer`.
    TileWithFusion {
        /// The fused consumer.
        consumer: String,
    },
    /// Tiled in a cache-write stage.
    TileWithCacheWrite,
    /// Tiled in a cache-write stage, `input` packed into a local buffer.
    TileWithPacking {
        /// The packed input.
        input: String,
    },
    /// Tiled at the root.
    Tile,
    /// Its register tile computed by the micro-kernel `kernel`.
    Tensorize {
        /// The micro-kernel's name.
        kernel: &'static str,
        /// Whether its tiles are computed in the stage's own output (no
        /// cache write, no copy out).
        in_place: bool,
        /// Whether its tiles are accumulated with another output axis
        /// innermost and transposed on the way out.
        transposed_accumulator: bool,
        /// Whether its A operand is gathered into a panel at the root.
        a_panel: bool,
        /// Whether its reduction loops run outside the kernel tiles of one
        /// n tile (all accumulated in a block at the n loop), so that each
        /// chunk of the operands is reused by every tile while in L1, and
        /// weights read from memory stream at the pace of the arithmetic.
        reduction_outer: bool,
        /// How its B operand is packed, if it is.
        packing: Option<Packing>,
    },
    /// Its reduction factored into a parallel stage.
    Rfactor,
    /// Its contiguous reduction axis innermost (to be vectorized lane-wise),
    /// at the root or computed at the row loop of consumer `at`.
    VectorReduce {
        /// The consumer it is computed in, if not at the root.
        at: Option<String>,
    },
    /// At the root, innermost axis split for vectorization, with the
    /// stages `members` computed in its row loop.
    RowFusion {
        /// The stages computed there, consumers first.
        members: Vec<String>,
    },
    /// At the root, innermost axis split for vectorization.
    Simple,
    /// Computed at loop `iter` of consumer `consumer`.
    At {
        /// The consumer.
        consumer: String,
        /// Its loop.
        iter: String,
    },
}

impl fmt::Display for VariantKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VariantKind::Inline => write!(f, "inline"),
            VariantKind::TileWithFusion { consumer } => write!(f, "tile+fuse({consumer})"),
            VariantKind::TileWithCacheWrite => write!(f, "tile+cache_write"),
            VariantKind::TileWithPacking { input } => write!(f, "tile+cache_write+pack({input})"),
            VariantKind::Tile => write!(f, "tile"),
            VariantKind::Tensorize {
                kernel,
                in_place,
                transposed_accumulator,
                a_panel,
                reduction_outer,
                packing,
            } => {
                write!(f, "tensorize({kernel})")?;
                if *in_place {
                    write!(f, "+in_place")?;
                }
                if *transposed_accumulator {
                    write!(f, "+transposed_accumulator")?;
                }
                if *a_panel {
                    write!(f, "+a_panel")?;
                }
                if *reduction_outer {
                    write!(f, "+reduction_outer")?;
                }
                match packing {
                    Some(Packing { operand, how }) => match how {
                        PackHow::None => Ok(()),
                        PackHow::Copy => write!(f, "+pack({operand})"),
                        PackHow::Transposed => write!(f, "+pack_transposed({operand})"),
                        PackHow::Panel => write!(f, "+pack_panel({operand})"),
                    },
                    None => Ok(()),
                }
            }
            VariantKind::Rfactor => write!(f, "rfactor"),
            VariantKind::VectorReduce { at: None } => write!(f, "vector_reduce"),
            VariantKind::VectorReduce { at: Some(consumer) } => {
                write!(f, "vector_reduce@{consumer}")
            }
            VariantKind::RowFusion { members } => {
                write!(f, "row_fusion({})", members.join(","))
            }
            VariantKind::Simple => write!(f, "simple"),
            VariantKind::At { consumer, iter } => write!(f, "at({consumer}.{iter})"),
        }
    }
}

impl Variant {
    /// Its part of a sketch's name: `<stage>:<kind>`.
    fn name(&self) -> String {
        format!("{}:{}", self.stage, self.kind)
    }

    /// The consumer this variant schedules along with its own stage (its
    /// tiles host the stage's), which then takes none of its own variants.
    fn fused_consumer(&self) -> Option<&str> {
        match &self.kind {
            VariantKind::TileWithFusion { consumer } => Some(consumer),
            VariantKind::Tensorize { .. } => self.steps.iter().find_map(|step| match step {
                SketchStep::Fixed(crate::schedule::Step::ComputeAt { target, .. })
                    if *target != self.stage =>
                {
                    Some(target.as_str())
                }
                _ => None,
            }),
            _ => None,
        }
    }
}

/// The alternatives `rules` give `stage`, walking them in order.
fn variants_of(stage: &Stage, rules: &[&dyn SketchRule], target: &Target) -> Vec<Variant> {
    let mut variants = Vec::new();
    for rule in rules {
        let condition = rule.condition(stage);
        if condition != Condition::Skip {
            variants.extend(rule.apply(stage, target));
        }
        if condition == Condition::ApplyAndSkipRest {
            break;
        }
    }
    variants
}

/// The sketches of `dag` for `target` (whose micro-kernels tensorized
/// sketches may call), every input read on every run.
pub fn generate_sketches(dag: &ComputeDag, target: &Target) -> Vec<Sketch> {
    generate_sketches_for(dag, target, &[])
}

/// The sketches of `dag` for `target` where the inputs named in
/// `constants` are weights laid out ahead of time (a task's
/// [`constants`](crate::measure::Task::constants)).
pub fn generate_sketches_for(
    dag: &ComputeDag,
    target: &Target,
    constants: &[String],
) -> Vec<Sketch> {
    let mut stages = stages_of(dag);
    for stage in &mut stages {
        stage.constant_inputs = constants.to_vec();
    }
    let per_stage: Vec<Vec<Variant>> = stages
        .iter()
        .map(|stage| variants_of(stage, RULES, target))
        .collect();
    let mut sketches = combine::combine(per_stage);
    for sketch in &mut sketches {
        row_math::mark_row_math_sites(sketch, dag, target);
        pack::mark_pack_sites(sketch, target);
    }
    sketches
}
