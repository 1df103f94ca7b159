//! Schedules as data: a [`State`] is a DAG plus the loop structure and
//! placement of each stage, reached by replaying a list of [`Step`]s.
//! Invalid steps are typed errors ([`StepError`]) naming the step.

mod apply;
mod cache;
mod error;
mod loops;
mod pack;
mod pack_panel;
mod placement;
pub mod random;
mod relations;
mod rfactor;
mod row_math;
mod state;
mod step;
mod tensorize;

pub use error::{StepError, StepErrorKind};
pub use loops::{MAX_AUTO_UNROLL, MAX_SPLIT_PRODUCT};
pub use pack::{PACK_BLOCK, pack_isa};
pub use relations::{derive_extents, derive_values};
pub(crate) use row_math::is_row_math_call;
pub use row_math::row_math_isa;
pub use state::{
    ComputeAt, IterId, IterNode, Packed, Relation, RowMath, Scope, Stage, State, Tensorized,
};
pub use step::{
    Annotation, Step, StepParseError, calls_micro_kernel, pack_isas_of, row_math_isas_of,
    steps_from_json,
};
pub use tensorize::{TENSORIZE_BLOCK, is_stencil_intrinsic};
