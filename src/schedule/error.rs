//! Errors of applying a step to a state.

use thiserror::Error;

use super::step::Step;

/// A step that does not fit the state it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("step {index} ({step}): {kind}")]
pub struct StepError {
    /// Position of the step in the step list (from 0).
    pub index: usize,
    /// The step.
    pub step: Box<Step>,
    /// What is wrong.
    pub kind: StepErrorKind,
}

/// What is wrong with a step.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StepErrorKind {
    /// A block that tensorize cannot replace by a micro-kernel call.
    #[error("cannot tensorize stage '{stage}' at '{iter}': {reason}")]
    Tensorize {
        /// The stage.
        stage: String,
        /// The block's outer loop.
        iter: String,
        /// What does not match, and how to fix it.
        reason: String,
    },
    /// A loop whose transcendental calls cannot run through row primitives.
    #[error("cannot use row math in stage '{stage}' at '{iter}': {reason}")]
    RowMath {
        /// The stage.
        stage: String,
        /// The loop.
        iter: String,
        /// What does not fit, and what exists.
        reason: String,
    },
    /// Loops that cannot become one packing call.
    #[error("cannot pack stage '{stage}' at '{iter}': {reason}")]
    Pack {
        /// The stage.
        stage: String,
        /// The outer of the two loops.
        iter: String,
        /// What does not fit, and what exists.
        reason: String,
    },
    /// No stage of that name.
    #[error("no stage '{name}'; the stages are {available}")]
    UnknownStage {
        /// The name given.
        name: String,
        /// The stage names, comma-separated.
        available: String,
    },
    /// No loop of that name in the stage.
    #[error("stage '{stage}' has no loop '{iter}'; its loops are {available}")]
    UnknownIter {
        /// The stage.
        stage: String,
        /// The name given.
        iter: String,
        /// The stage's current loops, comma-separated.
        available: String,
    },
    /// Loops of an input or of an inlined stage cannot be transformed.
    #[error("stage '{stage}' has no loops to transform ({why})")]
    NoLoops {
        /// The stage.
        stage: String,
        /// Why: an input, or inlined.
        why: &'static str,
    },
    /// A split without factors.
    #[error("split needs at least one factor")]
    NoFactors,
    /// A split factor below 1.
    #[error("split factor {factor} must be at least 1")]
    InvalidFactor {
        /// The factor.
        factor: i64,
    },
    /// A split factor product beyond any sensible loop.
    #[error("split factors multiply to more than {limit}")]
    FactorsTooLarge {
        /// The limit.
        limit: i64,
    },
    /// Fuse of fewer than two loops.
    #[error("fuse needs at least two loops")]
    FuseTooFew,
    /// Fuse of loops that are not adjacent in the current order.
    #[error("fuse needs loops that are adjacent and in order; the current order is {order}")]
    NotConsecutive {
        /// The stage's current loops.
        order: String,
    },
    /// Fuse of a spatial with a reduction loop.
    #[error("cannot fuse spatial loop '{spatial}' with reduction loop '{reduce}'")]
    FuseMixedKinds {
        /// A spatial loop.
        spatial: String,
        /// A reduction loop.
        reduce: String,
    },
    /// A reorder that is not a permutation of the current loops.
    #[error("reorder must list every loop of '{stage}' exactly once: {expected}")]
    NotAPermutation {
        /// The stage.
        stage: String,
        /// The current loops.
        expected: String,
    },
    /// An annotation that cannot apply to a reduction loop.
    #[error("loop '{iter}' is a reduction loop and cannot be {annotation}")]
    AnnotateReduction {
        /// The loop.
        iter: String,
        /// What it cannot be (`parallelized`).
        annotation: &'static str,
    },
    /// A vectorized loop that is not innermost.
    #[error(
        "only the innermost loop of a stage can be vectorized; '{iter}' has '{inner}' inside it"
    )]
    VectorizeNotInnermost {
        /// The vectorized loop.
        iter: String,
        /// A loop inside it.
        inner: String,
    },
    /// A stage computed at a vectorized loop.
    #[error("stage '{stage}' is computed at loop '{iter}', which cannot then be vectorized")]
    AttachedAtVectorized {
        /// The attached stage.
        stage: String,
        /// The loop.
        iter: String,
    },
    /// An auto-unroll limit beyond reason.
    #[error("auto_unroll_max_step {value} is larger than {limit}")]
    UnrollTooLarge {
        /// The value.
        value: u32,
        /// The limit.
        limit: u32,
    },
    /// Outputs must be computed at the root.
    #[error("stage '{stage}' is an output; it must stay at the root")]
    OutputPlacement {
        /// The stage.
        stage: String,
    },
    /// Inlining a reduction.
    #[error("stage '{stage}' is a reduction and cannot be inlined")]
    InlineReduction {
        /// The stage.
        stage: String,
    },
    /// A stage other stages are computed at cannot move or change shape.
    #[error("stage '{attached}' is computed at a loop of '{stage}'; move it to the root first")]
    HasAttachedStages {
        /// The host stage.
        stage: String,
        /// A stage computed at it.
        attached: String,
    },
    /// compute_at at a loop that not every consumer of the producer is
    /// computed within.
    #[error(
        "'{stage}' can only be computed at a loop that each of its consumers is, or is computed inside (at that loop or deeper); it is read by {consumers}, and {outside}"
    )]
    NotTheConsumer {
        /// The producer.
        stage: String,
        /// Its consumers (after inlining), comma-separated.
        consumers: String,
        /// The consumers not computed within the loop, and the loop: "x is
        /// not inside 'host.iter'".
        outside: String,
    },
    /// compute_at into an inlined stage.
    #[error("target '{target}' is inlined and has no loops")]
    TargetInlined {
        /// The target.
        target: String,
    },
    /// cache_write after loop transforms.
    #[error(
        "cache_write must come before the loops of '{stage}' are transformed or placed (it resets them)"
    )]
    CacheWriteAfterTransform {
        /// The stage.
        stage: String,
    },
    /// cache_read with a reader that does not read the stage.
    #[error("'{reader}' does not read '{stage}'")]
    NotAReader {
        /// The supposed reader.
        reader: String,
        /// The stage.
        stage: String,
    },
    /// cache_read with a layout that is not a permutation of the dimensions.
    #[error(
        "layout {layout:?} is not a permutation of the {rank} dimensions of '{stage}' (give each of 0..{rank} once)"
    )]
    BadLayout {
        /// The stage.
        stage: String,
        /// The layout given.
        layout: Vec<usize>,
        /// The stage's number of dimensions.
        rank: usize,
    },
    /// pack_panel whose reader, read or axes do not make a panel.
    #[error("cannot pack '{stage}' into a panel for '{reader}': {reason}")]
    PackPanel {
        /// The stage read.
        stage: String,
        /// The reader.
        reader: String,
        /// What does not fit, and what exists.
        reason: String,
    },
    /// cache_read without readers.
    #[error("cache_read needs at least one reader")]
    NoReaders,
    /// rfactor of a stage without reduction.
    #[error("stage '{stage}' has no reduction to factor")]
    NotAReduction {
        /// The stage.
        stage: String,
    },
    /// rfactor of a loop that is not (a split part of) one reduction axis.
    #[error(
        "loop '{iter}' is not a reduction axis or a split part of one (fused loops cannot be factored)"
    )]
    NotAReductionLoop {
        /// The loop.
        iter: String,
    },
    /// Placement or creation steps on a stage that cannot have them.
    #[error("stage '{stage}' is an input; {what}")]
    InputStage {
        /// The stage.
        stage: String,
        /// What cannot be done.
        what: &'static str,
    },
}
