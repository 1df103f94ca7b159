//! The runtime of compiled kernels: aligned host buffers, the thread pool
//! that runs parallel loops, and the description of the host device.

mod buffer;
mod device;
pub mod parallel;
pub mod ukernels;

pub use buffer::{BUFFER_ALIGN, BufferError, NdBuffer};
pub use device::{CacheLevel, DeviceDescription, DeviceKey, host_device};
pub use parallel::{num_threads, set_num_threads};
