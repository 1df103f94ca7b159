//! Evicting buffers from the CPU caches before a timed repeat.

use crate::runtime::NdBuffer;

/// Evicts every cache line of `buffers` from all cache levels (x86-64:
/// `clflush` on each 64-byte line, then a fence; elsewhere: streams through
/// a scratch area larger than any last-level cache).
pub fn flush_buffers(buffers: &[&NdBuffer]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_clflush, _mm_mfence};
        for buffer in buffers {
            for line in buffer.as_bytes().chunks(64) {
                // SAFETY: `line` points into a live allocation; clflush (SSE2,
                // part of the x86-64 baseline) only evicts, it does not write.
                unsafe { _mm_clflush(line.as_ptr()) };
            }
        }
        // SAFETY: a fence has no memory-safety preconditions.
        unsafe { _mm_mfence() };
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = buffers;
        stream_scratch();
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn stream_scratch() {
    use std::sync::Mutex;
    const SCRATCH_BYTES: usize = 256 << 20;
    static SCRATCH: Mutex<Vec<u8>> = Mutex::new(Vec::new());
    if let Ok(mut scratch) = SCRATCH.lock() {
        scratch.resize(SCRATCH_BYTES, 0);
        for line in scratch.chunks_mut(64) {
            line[0] = line[0].wrapping_add(1);
        }
        std::hint::black_box(&*scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::DType;

    #[test]
    fn flushing_keeps_the_data() {
        let t = crate::te::HostTensor::random(&[1000], DType::F32, 3);
        let b = NdBuffer::from_host(&t).expect("allocates");
        flush_buffers(&[&b]);
        assert_eq!(b.to_host(), t);
    }
}
