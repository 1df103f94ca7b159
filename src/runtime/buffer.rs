//! `NdBuffer`: a 64-byte aligned, zero-initialised host buffer with a shape
//! and a dtype — what compiled kernels read and write.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

use thiserror::Error;

use crate::te::{DType, HostData, HostTensor};

/// Alignment of every buffer, in bytes (a cache line; enough for any vector).
pub const BUFFER_ALIGN: usize = 64;

/// A buffer that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BufferError {
    /// The size overflows or the allocation failed.
    #[error("cannot allocate a buffer of shape {shape:?} ({dtype})")]
    Allocation {
        /// The requested shape.
        shape: Vec<usize>,
        /// The element type.
        dtype: DType,
    },
}

/// A dense row-major buffer, 64-byte aligned.
pub struct NdBuffer {
    ptr: NonNull<u8>,
    bytes: usize,
    shape: Vec<usize>,
    dtype: DType,
}

// The buffer owns its memory exclusively; moving it between threads is safe.
unsafe impl Send for NdBuffer {}

fn layout(bytes: usize) -> Option<Layout> {
    Layout::from_size_align(bytes.max(BUFFER_ALIGN), BUFFER_ALIGN).ok()
}

impl NdBuffer {
    /// A zero-filled buffer.
    pub fn zeros(shape: &[usize], dtype: DType) -> Result<NdBuffer, BufferError> {
        let fail = || BufferError::Allocation {
            shape: shape.to_vec(),
            dtype,
        };
        let bytes = shape
            .iter()
            .try_fold(dtype.size_bytes(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(fail)?;
        let layout = layout(bytes).ok_or_else(fail)?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(fail)?;
        Ok(NdBuffer {
            ptr,
            bytes,
            shape: shape.to_vec(),
            dtype,
        })
    }

    /// A copy of a host tensor.
    pub fn from_host(t: &HostTensor) -> Result<NdBuffer, BufferError> {
        let mut b = NdBuffer::zeros(t.shape(), t.dtype())?;
        match t.data() {
            HostData::F32(v) => b.typed_mut::<f32>().copy_from_slice(v),
            HostData::F64(v) => b.typed_mut::<f64>().copy_from_slice(v),
            HostData::I32(v) => b.typed_mut::<i32>().copy_from_slice(v),
            HostData::I64(v) => b.typed_mut::<i64>().copy_from_slice(v),
            HostData::Bool(v) => {
                for (dst, &src) in b.typed_mut::<u8>().iter_mut().zip(v) {
                    *dst = u8::from(src);
                }
            }
        }
        Ok(b)
    }

    /// A copy as a host tensor.
    pub fn to_host(&self) -> HostTensor {
        let data = match self.dtype {
            DType::F32 => HostData::F32(self.typed::<f32>().to_vec()),
            DType::F64 => HostData::F64(self.typed::<f64>().to_vec()),
            DType::I32 => HostData::I32(self.typed::<i32>().to_vec()),
            DType::I64 => HostData::I64(self.typed::<i64>().to_vec()),
            DType::Bool => HostData::Bool(self.typed::<u8>().iter().map(|&b| b != 0).collect()),
        };
        HostTensor::new(&self.shape, data)
            .unwrap_or_else(|_| HostTensor::zeros(&self.shape, self.dtype))
    }

    /// The extent of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as `f32`, if that is the dtype.
    pub fn as_f32(&self) -> Option<&[f32]> {
        (self.dtype == DType::F32).then(|| self.typed::<f32>())
    }

    /// The elements as `f32`, mutably, if that is the dtype.
    pub fn as_f32_mut(&mut self) -> Option<&mut [f32]> {
        (self.dtype == DType::F32).then(|| self.typed_mut::<f32>())
    }

    /// The start of the data, for compiled code.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The raw bytes, row-major in the native byte order.
    pub fn as_bytes(&self) -> &[u8] {
        self.typed::<u8>()
    }

    /// The raw bytes, mutably.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.typed_mut::<u8>()
    }

    /// Fills the buffer with a value no correct kernel leaves behind: NaN
    /// for floats, `0x5A` bytes for integers and booleans. A kernel that
    /// skips an element then fails verification instead of passing on a zero.
    pub fn poison(&mut self) {
        match self.dtype {
            DType::F32 => self.typed_mut::<f32>().fill(f32::NAN),
            DType::F64 => self.typed_mut::<f64>().fill(f64::NAN),
            _ => self.typed_mut::<u8>().fill(0x5A),
        }
    }

    fn typed<T>(&self) -> &[T] {
        let n = self.bytes / std::mem::size_of::<T>();
        // SAFETY: the allocation holds `bytes` initialised bytes, aligned to 64.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<T>(), n) }
    }

    fn typed_mut<T>(&mut self) -> &mut [T] {
        let n = self.bytes / std::mem::size_of::<T>();
        // SAFETY: as in `typed`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<T>(), n) }
    }
}

impl Drop for NdBuffer {
    fn drop(&mut self) {
        if let Some(layout) = layout(self.bytes) {
            // SAFETY: allocated in `zeros` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_host_tensors_and_is_aligned() {
        for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool] {
            let t = HostTensor::random(&[3, 5], dtype, 1);
            let mut b = NdBuffer::from_host(&t).expect("allocates");
            assert_eq!(b.as_mut_ptr() as usize % BUFFER_ALIGN, 0);
            assert_eq!(b.to_host(), t);
        }
    }
}
