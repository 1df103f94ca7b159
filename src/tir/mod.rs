//! The loop-nest IR: lowering from schedules, simplification (egg),
//! passes, a printer and an interpreter.

pub mod interp;
mod ir;
mod lower;
pub mod passes;
mod printer;
pub mod simplify;

pub use interp::{TirInterpError, run};
pub use ir::{Buffer, BufferId, ForKind, GemmCall, GemmOperand, MemScope, PrimFunc, Stmt};
pub use lower::{LowerError, lower, lower_unsimplified};
