//! The runtime of compiled kernels: aligned host buffers and the thread pool
//! that runs parallel loops.

mod buffer;
pub mod parallel;

pub use buffer::{BUFFER_ALIGN, BufferError, NdBuffer};
pub use parallel::{num_threads, set_num_threads};
