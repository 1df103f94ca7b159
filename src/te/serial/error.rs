//! Why a [`DagSpec`](super::DagSpec) does not rebuild into a DAG.

use thiserror::Error;

use crate::te::{DType, DagError};

/// A [`DagSpec`](super::DagSpec) that cannot be rebuilt. Every message names
/// the tensor (or stage) at fault and what would fix it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SpecError {
    /// The text is not JSON of the spec format.
    #[error(
        "not a DAG spec: {reason} (expected {{\"label\", \"tensors\": [{{\"kind\": \"placeholder\" | \"compute\", …}}], \"outputs\"}})"
    )]
    Parse {
        /// The JSON error, with line and column.
        reason: String,
    },
    /// A variable that is neither a spatial axis of the stage nor a
    /// reduction axis of the enclosing reduce.
    #[error(
        "stage '{stage}': unknown variable `{name}`; the variables in scope there are {available}"
    )]
    UnknownVariable {
        /// The stage.
        stage: String,
        /// The name used.
        name: String,
        /// The names in scope, comma-separated.
        available: String,
    },
    /// Two axes of one stage have the same name.
    #[error(
        "stage '{stage}': axis name `{name}` is used twice; axes of a stage need distinct names"
    )]
    DuplicateAxis {
        /// The stage.
        stage: String,
        /// The repeated name.
        name: String,
    },
    /// The number of spatial axes is not the stage's rank.
    #[error(
        "stage '{stage}': {axes} axis names for a tensor of rank {rank}; give one per dimension"
    )]
    AxisCount {
        /// The stage.
        stage: String,
        /// Axis names given.
        axes: usize,
        /// The rank of its shape.
        rank: usize,
    },
    /// A read of a tensor that is not before the reading stage.
    #[error(
        "stage '{stage}' (tensor #{position}) reads tensor #{tensor}; a stage can read only the tensors before it (#0 to #{last})"
    )]
    BadRead {
        /// The stage.
        stage: String,
        /// Its position.
        position: usize,
        /// The position read.
        tensor: usize,
        /// The last readable position (`position - 1`).
        last: String,
    },
    /// An intrinsic called with the wrong number of arguments.
    #[error("stage '{stage}': {func} takes {expected} argument(s), the spec gives {got}")]
    Arity {
        /// The stage.
        stage: String,
        /// The intrinsic.
        func: &'static str,
        /// Its arity.
        expected: usize,
        /// Arguments given.
        got: usize,
    },
    /// A constant whose value does not fit its dtype.
    #[error(
        "stage '{stage}': constant {value} cannot have dtype {dtype}; write an integer for i32/i64, a number or \"inf\"/\"-inf\"/\"nan\" for f32/f64, true/false for bool"
    )]
    BadConstant {
        /// The stage.
        stage: String,
        /// The dtype given.
        dtype: DType,
        /// The value, as written.
        value: String,
    },
    /// The declared dtype of a stage is not its body's.
    #[error(
        "stage '{stage}': declared dtype {declared}, but its body computes {body}; fix the dtype or add a cast"
    )]
    StageDtype {
        /// The stage.
        stage: String,
        /// The dtype declared.
        declared: DType,
        /// The body's dtype.
        body: DType,
    },
    /// An output position outside the tensor list.
    #[error("output #{output} is tensor #{position}, but there are only {count} tensors")]
    BadOutput {
        /// Which output.
        output: usize,
        /// The position given.
        position: usize,
        /// How many tensors there are.
        count: usize,
    },
    /// The tensors are not in the order the DAG puts them (inputs first,
    /// then each stage after what it reads, depth-first from the outputs),
    /// or a stage does not contribute to any output.
    #[error(
        "tensor #{position} '{name}' is out of DAG order (the rebuilt DAG has {found} there); list the placeholders first, then the stages in the order te::ComputeDag puts them, and only stages the outputs need"
    )]
    Order {
        /// The position in the spec.
        position: usize,
        /// The tensor's name in the spec.
        name: String,
        /// What the rebuilt DAG has at that position.
        found: String,
    },
    /// What the DAG check rejects (shapes, dtypes, bounds, scoping).
    #[error(transparent)]
    Dag(#[from] DagError),
}
