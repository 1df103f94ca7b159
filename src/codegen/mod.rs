//! Code generation: the loop IR compiled to native code with Cranelift
//! (JIT, or a relocatable object file for ahead-of-time deployment), with register promotion of constant-indexed local buffers, FMA
//! contraction, unrolling and parallel loops on the runtime's thread pool;
//! [`decisions`] reports the vector and storage choices it makes.

mod decisions;
mod error;
mod jit;
mod kernel;
pub(crate) mod math;
mod micro_kernel_symbols;
mod object;
mod options;
mod pack_symbols;
mod parallel_work;
mod row_math_symbols;
mod stencil_symbols;
mod translate;

pub use decisions::{BufferStorage, CodegenDecisions, VectorLoop, decisions};
pub use error::{CodegenError, KernelError};
pub use jit::{compile, host_isa, kernel_params};
pub use kernel::{Kernel, KernelParam};
pub(crate) use object::is_c_identifier;
pub use object::{RUNTIME_IMPORTS, compile_object, object_target};
pub use options::{CodegenOptions, OptLevel};
pub use parallel_work::MIN_PARALLEL_STORES;
pub use translate::memory::StoragePlan;
pub use translate::vector::VectorPlan;

/// Register promotion is tried for local buffers up to this many elements
/// (every access must have a constant index once loops are expanded).
pub const PROMOTE_LIMIT: i64 = 256;
