//! Errors found while assembling tensors into a [`ComputeDag`](super::ComputeDag).

use thiserror::Error;

use super::dtype::DType;

/// Why a set of tensors does not form a valid DAG. Every message names the
/// stage (or tensor) at fault and says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DagError {
    /// No output tensors were given.
    #[error("the DAG has no outputs: pass at least one computed tensor as an output")]
    NoOutputs,
    /// A dimension extent is zero or negative.
    #[error("tensor '{tensor}': dimension {dim} has extent {extent}; extents must be at least 1")]
    InvalidExtent {
        /// The tensor.
        tensor: String,
        /// The dimension.
        dim: usize,
        /// The bad extent.
        extent: i64,
    },
    /// A tensor has too many elements to be buffered.
    #[error(
        "tensor '{tensor}' has {elements} elements, over the limit of {limit}; use smaller shapes"
    )]
    TensorTooLarge {
        /// The tensor.
        tensor: String,
        /// Its element count (saturated).
        elements: i64,
        /// The limit.
        limit: i64,
    },
    /// The operands of an operator have different dtypes.
    #[error(
        "stage '{stage}': dtype mismatch in `{expr}`: {left} vs {right}; convert one side with te::cast"
    )]
    DtypeMismatch {
        /// The stage whose rule holds the expression.
        stage: String,
        /// The offending expression.
        expr: String,
        /// The left operand's dtype.
        left: DType,
        /// The right operand's dtype.
        right: DType,
    },
    /// An operator is applied to a dtype it does not accept.
    #[error("stage '{stage}': `{expr}` needs {expected} operands, got {got}")]
    InvalidOperandType {
        /// The stage.
        stage: String,
        /// The offending expression.
        expr: String,
        /// What the operator accepts.
        expected: &'static str,
        /// What it got.
        got: DType,
    },
    /// The condition of a select or a logical operator is not boolean.
    #[error(
        "stage '{stage}': the condition of `{expr}` has dtype {got}; it must be bool (write a comparison)"
    )]
    NonBoolCondition {
        /// The stage.
        stage: String,
        /// The select expression.
        expr: String,
        /// The condition's dtype.
        got: DType,
    },
    /// A tensor is read with the wrong number of indices.
    #[error(
        "stage '{stage}': `{read}` reads tensor '{tensor}' with {got} indices, but it has rank {expected}"
    )]
    RankMismatch {
        /// The reading stage.
        stage: String,
        /// The tensor read.
        tensor: String,
        /// The read expression.
        read: String,
        /// The tensor's rank.
        expected: usize,
        /// Indices given.
        got: usize,
    },
    /// An index is not an integer.
    #[error(
        "stage '{stage}': index {dim} of `{read}` has dtype {got}; indices must be integers (convert with te::cast)"
    )]
    NonIntegerIndex {
        /// The reading stage.
        stage: String,
        /// The read expression.
        read: String,
        /// The dimension.
        dim: usize,
        /// The index dtype.
        got: DType,
    },
    /// A read can leave the bounds of the tensor for some loop values.
    #[error("{0}")]
    IndexOutOfBounds(Box<OutOfBoundsRead>),
    /// A reduction appears below the top of a compute rule.
    #[error(
        "stage '{stage}': a reduction must be the whole rule of a compute stage, found one inside `{expr}`; \
         compute the reduction in a stage of its own"
    )]
    NestedReduce {
        /// The stage.
        stage: String,
        /// The enclosing expression.
        expr: String,
    },
    /// A reduction is over something that is not a reduction axis.
    #[error(
        "stage '{stage}': `{axis}` is not a reduction axis; create reduction axes with te::reduce_axis"
    )]
    NotAReduceAxis {
        /// The stage.
        stage: String,
        /// The offending axis.
        axis: String,
    },
    /// A reduction axis appears twice in one reduction.
    #[error("stage '{stage}': reduction axis `{axis}` is listed twice")]
    DuplicateReduceAxis {
        /// The stage.
        stage: String,
        /// The repeated axis.
        axis: String,
    },
    /// A reduction axis has extent below 1.
    #[error(
        "stage '{stage}': reduction axis `{axis}` has extent {extent}; extents must be at least 1"
    )]
    InvalidReduceExtent {
        /// The stage.
        stage: String,
        /// The axis.
        axis: String,
        /// The bad extent.
        extent: i64,
    },
    /// A reduction over booleans.
    #[error("stage '{stage}': cannot reduce values of dtype bool; cast them to a number first")]
    BoolReduction {
        /// The stage.
        stage: String,
    },
    /// A rule uses a variable that is neither its index nor a reduction axis it reduces over.
    #[error(
        "stage '{stage}': variable `{var}` is not an index of this stage nor an axis of its reduction; \
         a rule may use only its own indices and the reduction axes it sums over"
    )]
    UnboundVar {
        /// The stage.
        stage: String,
        /// The stray variable.
        var: String,
    },
    /// A computed tensor is listed as an input.
    #[error("'{name}' is listed as an input but is computed; inputs must be placeholders")]
    InputNotPlaceholder {
        /// The tensor.
        name: String,
    },
    /// A placeholder is listed as an output.
    #[error("output '{name}' is a placeholder; outputs must be computed tensors")]
    OutputIsPlaceholder {
        /// The tensor.
        name: String,
    },
    /// A tensor appears twice among the inputs and outputs.
    #[error("'{name}' is listed twice among the inputs and outputs")]
    DuplicateArgument {
        /// The tensor.
        name: String,
    },
    /// A placeholder is read but not listed among the inputs.
    #[error(
        "placeholder '{name}' is read by stage '{stage}' but not listed among the DAG's inputs; add it to the inputs"
    )]
    MissingInput {
        /// The placeholder.
        name: String,
        /// A stage that reads it.
        stage: String,
    },
}

/// The details of [`DagError::IndexOutOfBounds`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "stage '{stage}': `{read}` can read outside tensor '{tensor}': index `{index}` of dimension {dim} \
     ranges over {range}, but the extent is {extent}; guard the read with te::select or shrink the loop"
)]
pub struct OutOfBoundsRead {
    /// The reading stage.
    pub stage: String,
    /// The tensor read.
    pub tensor: String,
    /// The read expression.
    pub read: String,
    /// The dimension.
    pub dim: usize,
    /// The index expression.
    pub index: String,
    /// The range the index can take, as text (`[1, 64]`, `(-inf, 3]`).
    pub range: String,
    /// The extent of that dimension.
    pub extent: i64,
}
