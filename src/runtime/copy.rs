//! `tessera_copy`: the contiguous copy JIT code calls for a vectorized loop
//! that only moves a run of elements from one buffer to another (the
//! interior rows of a padded copy), so that it runs through the C
//! library's `memmove` at the machine's full width instead of Cranelift's
//! 128-bit loop.

/// Copies `bytes` bytes from `src` to `dst` (nothing when `bytes ≤ 0`);
/// the regions may overlap (`memmove`).
///
/// # Safety
///
/// `src[0..bytes]` is readable and `dst[0..bytes]` writable.
pub unsafe extern "C" fn tessera_copy(dst: *mut u8, src: *const u8, bytes: i64) {
    if let Ok(count) = usize::try_from(bytes) {
        // SAFETY: the caller's contract; `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, count) };
    }
}

#[cfg(test)]
mod tests {
    use super::tessera_copy;

    #[test]
    fn copies_exactly_the_bytes_asked_and_allows_overlap() {
        let src: Vec<u8> = (0..100).collect();
        let mut dst = vec![0xAAu8; 100];
        // SAFETY: 37 bytes from offset 3 of both buffers.
        unsafe { tessera_copy(dst.as_mut_ptr().add(5), src.as_ptr().add(3), 37) };
        assert!(dst[..5].iter().all(|&b| b == 0xAA));
        assert_eq!(&dst[5..42], &src[3..40]);
        assert!(dst[42..].iter().all(|&b| b == 0xAA));
        // Overlapping, forwards: memmove semantics.
        let mut buf: Vec<u8> = (0..64).collect();
        let p = buf.as_mut_ptr();
        // SAFETY: both regions lie in `buf`.
        unsafe { tessera_copy(p.add(8), p, 32) };
        assert_eq!(&buf[8..40], &(0..32).collect::<Vec<u8>>()[..]);
        // Nothing for a count of zero or below.
        let before = buf.clone();
        // SAFETY: nothing is touched.
        unsafe { tessera_copy(p, p.add(1), 0) };
        unsafe { tessera_copy(p, p.add(1), -4) };
        assert_eq!(buf, before);
    }
}
