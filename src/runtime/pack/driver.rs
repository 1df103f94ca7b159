//! The shape of every packing routine, shared by the instruction sets: pick
//! the fast path from the strides (plain rows, in-register transposes,
//! deinterleaving shuffles) and finish the edges with the scalar copy. Each
//! ISA supplies three block functions ([`pack_routine!`]).

/// `dst[r*dst_rs + c] = src[r*src_rs + c*src_cs]` for `r` in `rows`, `c` in
/// `cols`, one element at a time (the edges of every fast path, and the
/// whole copy for any other stride).
///
/// # Safety
///
/// Every element the ranges name is valid to read (src) and write (dst).
#[inline(always)]
pub(super) unsafe fn scalar(
    src: *const f32,
    src_rs: isize,
    src_cs: isize,
    dst: *mut f32,
    dst_rs: isize,
    rows: std::ops::Range<isize>,
    cols: std::ops::Range<isize>,
) {
    for r in rows {
        for c in cols.clone() {
            // SAFETY: forwarded contract.
            unsafe { *dst.offset(r * dst_rs + c) = *src.offset(r * src_rs + c * src_cs) };
        }
    }
}

/// How many leading columns of a row read with column stride `s` (2 to 4)
/// the deinterleaving groups of `lanes` columns cover: a group loads the
/// `s·lanes` contiguous elements from its first column, so the last group
/// must end at or before the row's last element, `(cols-1)·s`.
#[inline(always)]
pub(super) fn strided_columns(cols: isize, s: isize, lanes: isize) -> isize {
    // Group g loads elements `g·s·lanes .. (g+1)·s·lanes` of the row, which
    // has `(cols-1)·s + 1` elements in reach.
    ((cols - 1) * s + 1) / (s * lanes) * lanes
}

/// Defines `unsafe extern "C" fn $name(src, src_rs, src_cs, dst, dst_rs,
/// rows, cols)` (see [`super::PackFn`]) from an ISA's block functions, all
/// `#[target_feature(enable = $features)]`:
///
/// - `$row(src, dst, n)`: copies `n` contiguous elements.
/// - `$transpose(src, src_cs, dst, dst_rs)`: a `$block × $block` block,
///   `dst[i*dst_rs + j] = src[i + j*src_cs]`.
/// - `$strided(src, s, dst)`: `$lanes` elements `dst[j] = src[j*s]` for
///   `s` in 2..=4, reading exactly `src[0 .. s·$lanes]`.
/// - `$strided_tail(src, s, dst, n)` (optional): the same for the first
///   `n ≤ $lanes` elements, reading only `src[0 ..= (n-1)·s]` (masked
///   loads); without it a strided row's last columns are copied one by one.
macro_rules! pack_routine {
    (
        name: $name:ident,
        features: $features:literal,
        lanes: $lanes:expr,
        block: $block:expr,
        row: $row:path,
        transpose: $transpose:path,
        strided: $strided:path
        $(, strided_tail: $strided_tail:path)? $(,)?
    ) => {
        /// The packing routine of this instruction set; see
        /// [`super::PackFn`] for the contract.
        ///
        /// # Safety
        ///
        /// As [`super::PackFn`], and the CPU supports this module's ISA.
        pub(super) unsafe extern "C" fn $name(
            src: *const f32,
            src_rs: i64,
            src_cs: i64,
            dst: *mut f32,
            dst_rs: i64,
            rows: i64,
            cols: i64,
        ) {
            // SAFETY: forwarded contract (the ISA is the caller's promise).
            unsafe { body(src, src_rs, src_cs, dst, dst_rs, rows, cols) }
        }

        #[target_feature(enable = $features)]
        unsafe fn body(
            src: *const f32,
            src_rs: i64,
            src_cs: i64,
            dst: *mut f32,
            dst_rs: i64,
            rows: i64,
            cols: i64,
        ) {
            use super::driver::{scalar, strided_columns};
            const L: isize = $lanes;
            const B: isize = $block;
            let (rows, cols) = (rows.max(0) as isize, cols.max(0) as isize);
            if rows == 0 || cols == 0 {
                return;
            }
            let (src_rs, src_cs, dst_rs) = (src_rs as isize, src_cs as isize, dst_rs as isize);
            // SAFETY (every call below): the caller guarantees the whole
            // rows×cols region of src and dst; each fast path reads and
            // writes only inside it (see the block functions' contracts).
            unsafe {
                if src_cs == 1 {
                    for r in 0..rows {
                        $row(src.offset(r * src_rs), dst.offset(r * dst_rs), cols);
                    }
                } else if src_rs == 1 && rows >= B && cols >= B {
                    let (full_r, full_c) = (rows - rows % B, cols - cols % B);
                    for r in (0..full_r).step_by(B as usize) {
                        for c in (0..full_c).step_by(B as usize) {
                            $transpose(
                                src.offset(r + c * src_cs),
                                src_cs,
                                dst.offset(r * dst_rs + c),
                                dst_rs,
                            );
                        }
                    }
                    scalar(src, src_rs, src_cs, dst, dst_rs, 0..full_r, full_c..cols);
                    scalar(src, src_rs, src_cs, dst, dst_rs, full_r..rows, 0..cols);
                } else if (2..=4).contains(&src_cs) {
                    let vector = strided_columns(cols, src_cs, L);
                    #[allow(unused_mut)]
                    let mut copied = vector;
                    for r in 0..rows {
                        let (s, d) = (src.offset(r * src_rs), dst.offset(r * dst_rs));
                        for c in (0..vector).step_by(L as usize) {
                            $strided(s.offset(c * src_cs), src_cs, d.offset(c));
                        }
                        $(
                            // The rest is at most one group (see strided_columns).
                            $strided_tail(s.offset(vector * src_cs), src_cs, d.offset(vector), cols - vector);
                            copied = cols;
                        )?
                    }
                    scalar(src, src_rs, src_cs, dst, dst_rs, 0..rows, copied..cols);
                } else {
                    scalar(src, src_rs, src_cs, dst, dst_rs, 0..rows, 0..cols);
                }
            }
        }
    };
}

pub(super) use pack_routine;
