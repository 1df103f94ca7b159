//! The loop-nest IR: lowering from schedules as a list of named passes,
//! simplification (egg), a printer and an interpreter.

mod coalesce;
mod coalesce_rows;
mod constant_copies;
pub mod interp;
mod ir;
mod lower;
mod partition;
pub mod passes;
mod printer;
pub mod simplify;

pub use coalesce::coalesce_kernel_reductions;
pub use coalesce_rows::coalesce_stencil_rows;
pub use constant_copies::{
    ConstantCopyError, HoistedConstants, HoistedCopy, hoist_constant_copies, hoist_constant_copy,
};
pub use interp::{TirInterpError, run};
pub use ir::{
    Buffer, BufferId, ForKind, KernelEpilogue, MemScope, MicroKernelCall, MicroKernelOperand,
    PackCall, PrimFunc, RowMathCall, StencilCall, StencilOperand, Stmt,
};
pub use lower::{
    AfterPass, LOWERING_PASSES, LowerError, Pass, lower, lower_traced, lower_unsimplified,
};
pub use partition::partition_loops;
