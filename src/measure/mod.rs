//! Measurement: candidates are built and run in worker processes, timed
//! with a TVM-style protocol and verified against a trusted result.
//!
//! ```text
//! Measurer ──Setup/Build/Run──▶ worker process (`tessera measure-worker`)
//!    │   ◀── Built / Ran + output bytes ──
//!    └── verify against Reference → MeasureResult
//! ```
//!
//! A crash, an abort or a hang costs one candidate and one worker (which is
//! replaced); a wrong answer is a [`MeasureErrorKind::WrongResult`], never a
//! time.

mod builder;
pub mod ceilings;
mod error;
mod flush;
mod measurer;
mod options;
mod process;
mod protocol;
mod result;
mod task;
pub mod timing;
mod verify;
mod worker;

pub use builder::{BuildFailure, BuiltCandidate, build, build_with_constants};
pub use error::MeasureError;
pub use flush::flush_buffers;
pub use measurer::Measurer;
pub use options::MeasureOptions;
pub use protocol::Fault;
pub use result::{MeasureErrorKind, MeasureResult};
pub use task::{Task, TaskSource};
pub use timing::{CacheFlush, Timing, TimingOptions, time_runs};
pub use verify::{
    INTERPRETER_FLOP_LIMIT, Reference, SAMPLED_POINTS, Verdict, relative_error, rounding_tolerance,
    tolerance,
};
pub use worker::worker_main;
