//! Schedules as data: a [`State`] is a DAG plus the loop structure and
//! placement of each stage, reached by replaying a list of [`Step`]s.
//! Invalid steps are typed errors ([`StepError`]) naming the step.

mod apply;
mod cache;
mod error;
mod loops;
mod placement;
pub mod random;
mod relations;
mod rfactor;
mod state;
mod step;
mod tensorize;

pub use error::{StepError, StepErrorKind};
pub use loops::{MAX_AUTO_UNROLL, MAX_SPLIT_PRODUCT};
pub use relations::{derive_extents, derive_values};
pub use state::{ComputeAt, IterId, IterNode, Relation, Scope, Stage, State, Tensorized};
pub use step::{Annotation, Step, StepParseError, calls_micro_kernel, steps_from_json};
pub use tensorize::TENSORIZE_BLOCK;
