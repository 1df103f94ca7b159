//! The SSE2 packing routine (4 f32 lanes): 128-bit row copies, 4×4
//! in-register transposes (`unpck` + `movlhps`/`movhlps`) and
//! deinterleaving `shufps` for column strides 2 to 4.

use std::arch::x86_64::{
    __m128, _mm_loadu_ps, _mm_movehl_ps, _mm_movelh_ps, _mm_shuffle_ps, _mm_storeu_ps,
    _mm_unpackhi_ps, _mm_unpacklo_ps,
};

use super::driver::pack_routine;
use super::{Isa, PackRoutine};

/// The SSE routine.
pub(super) fn routine() -> PackRoutine {
    PackRoutine {
        name: "sse_pack",
        isa: Isa::Sse,
        func: sse_pack,
    }
}

pack_routine! {
    name: sse_pack,
    features: "sse2",
    lanes: 4,
    block: 4,
    row: row,
    transpose: transpose4,
    strided: strided,
}

/// Copies `n` contiguous elements, 16 then 4 at a time, the rest one by one.
///
/// # Safety
///
/// `src[0..n]` is readable, `dst[0..n]` writable.
#[target_feature(enable = "sse2")]
#[inline]
unsafe fn row(src: *const f32, dst: *mut f32, n: isize) {
    let mut j = 0;
    // SAFETY: every access is at an index below n.
    unsafe {
        while j + 16 <= n {
            // Four loads, then four stores, named one by one: written as an
            // array, the copy went through the stack in some builds.
            let v0 = _mm_loadu_ps(src.offset(j));
            let v1 = _mm_loadu_ps(src.offset(j + 4));
            let v2 = _mm_loadu_ps(src.offset(j + 8));
            let v3 = _mm_loadu_ps(src.offset(j + 12));
            _mm_storeu_ps(dst.offset(j), v0);
            _mm_storeu_ps(dst.offset(j + 4), v1);
            _mm_storeu_ps(dst.offset(j + 8), v2);
            _mm_storeu_ps(dst.offset(j + 12), v3);
            j += 16;
        }
        while j + 4 <= n {
            _mm_storeu_ps(dst.offset(j), _mm_loadu_ps(src.offset(j)));
            j += 4;
        }
        while j < n {
            *dst.offset(j) = *src.offset(j);
            j += 1;
        }
    }
}

/// `dst[i*dst_rs + j] = src[i + j*src_cs]` for a 4×4 block.
///
/// # Safety
///
/// The 4×4 blocks of src and dst are valid.
#[target_feature(enable = "sse2")]
#[inline]
unsafe fn transpose4(src: *const f32, src_cs: isize, dst: *mut f32, dst_rs: isize) {
    // SAFETY: the four columns of src and rows of dst are in the block.
    unsafe {
        let v: [__m128; 4] = std::array::from_fn(|j| _mm_loadu_ps(src.offset(j as isize * src_cs)));
        let t0 = _mm_unpacklo_ps(v[0], v[1]);
        let t1 = _mm_unpacklo_ps(v[2], v[3]);
        let t2 = _mm_unpackhi_ps(v[0], v[1]);
        let t3 = _mm_unpackhi_ps(v[2], v[3]);
        let w = [
            _mm_movelh_ps(t0, t1),
            _mm_movehl_ps(t1, t0),
            _mm_movelh_ps(t2, t3),
            _mm_movehl_ps(t3, t2),
        ];
        for (i, w) in w.into_iter().enumerate() {
            _mm_storeu_ps(dst.offset(i as isize * dst_rs), w);
        }
    }
}

/// `dst[j] = src[j*s]` for `j < 4`, `s` in 2..=4, from the `4·s`
/// contiguous elements at src.
///
/// # Safety
///
/// `src[0 .. 4·s]` is readable, `dst[0..4]` writable.
#[target_feature(enable = "sse2")]
#[inline]
unsafe fn strided(src: *const f32, s: isize, dst: *mut f32) {
    // SAFETY: s loads of 4 cover exactly src[0 .. 4·s].
    unsafe {
        let v = |q: isize| _mm_loadu_ps(src.offset(4 * q));
        let out = match s {
            // [a0 a2 b0 b2]
            2 => _mm_shuffle_ps::<0b10_00_10_00>(v(0), v(1)),
            // u = [v1₂ v1₂ v2₁ v2₁]; [v0₀ v0₃ u₀ u₂] = elements 0 3 6 9
            3 => {
                let u = _mm_shuffle_ps::<0b01_01_10_10>(v(1), v(2));
                _mm_shuffle_ps::<0b10_00_11_00>(v(0), u)
            }
            // lane 0 of each
            _ => _mm_movelh_ps(_mm_unpacklo_ps(v(0), v(1)), _mm_unpacklo_ps(v(2), v(3))),
        };
        _mm_storeu_ps(dst, out);
    }
}
