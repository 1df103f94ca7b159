//! The AVX-512F packing routine (16 f32 lanes): 512-bit row copies with a
//! masked tail, the AVX2 8×8 in-register transposes, and deinterleaving
//! for column strides 2 to 4 (`vpermps` of each loaded vector under a
//! lane mask; a row's last columns under load and store masks).

use std::arch::x86_64::{
    __m512i, __mmask16, _mm512_loadu_epi32, _mm512_loadu_ps, _mm512_mask_permutexvar_ps,
    _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_permutexvar_ps, _mm512_storeu_ps,
};

use super::avx2::transpose8;
use super::driver::pack_routine;
use super::{Isa, PackRoutine};

/// The AVX-512 routine.
pub(super) fn routine() -> PackRoutine {
    PackRoutine {
        name: "avx512_pack",
        isa: Isa::Avx512,
        func: avx512_pack,
    }
}

pack_routine! {
    name: avx512_pack,
    features: "avx512f,avx2,fma",
    lanes: 16,
    block: 8,
    row: row,
    transpose: transpose8,
    strided: strided,
    strided_tail: strided_tail,
}

/// Copies `n` contiguous elements, 64 then 16 at a time, the rest under a
/// lane mask (masked-off lanes are neither read nor written).
///
/// # Safety
///
/// AVX-512F is available; `src[0..n]` is readable, `dst[0..n]` writable.
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn row(src: *const f32, dst: *mut f32, n: isize) {
    let mut j = 0;
    // SAFETY: every unmasked access is at an index below n.
    unsafe {
        while j + 64 <= n {
            // Four loads, then four stores, named one by one: written as an
            // array, the copy went through the stack in some builds.
            let v0 = _mm512_loadu_ps(src.offset(j));
            let v1 = _mm512_loadu_ps(src.offset(j + 16));
            let v2 = _mm512_loadu_ps(src.offset(j + 32));
            let v3 = _mm512_loadu_ps(src.offset(j + 48));
            _mm512_storeu_ps(dst.offset(j), v0);
            _mm512_storeu_ps(dst.offset(j + 16), v1);
            _mm512_storeu_ps(dst.offset(j + 32), v2);
            _mm512_storeu_ps(dst.offset(j + 48), v3);
            j += 64;
        }
        while j + 16 <= n {
            _mm512_storeu_ps(dst.offset(j), _mm512_loadu_ps(src.offset(j)));
            j += 16;
        }
        if j < n {
            let mask = ((1u32 << (n - j)) - 1) as __mmask16;
            let v = _mm512_maskz_loadu_ps(mask, src.offset(j));
            _mm512_mask_storeu_ps(dst.offset(j), mask, v);
        }
    }
}

/// Per stride 2, 3, 4: lane `i` takes element `s·i`, lane `(s·i) mod 16`
/// of loaded vector `(s·i) / 16`; the masks say which lanes each of the
/// `s` vectors fills.
const TABLES: [([i32; 16], [u16; 4]); 3] = {
    let mut out = [([0; 16], [0; 4]); 3];
    let mut s = 2;
    while s <= 4 {
        let mut i = 0;
        while i < 16 {
            out[s - 2].0[i] = ((s * i) % 16) as i32;
            out[s - 2].1[(s * i) / 16] |= 1 << i;
            i += 1;
        }
        s += 1;
    }
    out
};

/// `dst[j] = src[j*s]` for `j < 16`, `s` in 2..=4, from the `16·s`
/// contiguous elements at src.
///
/// # Safety
///
/// AVX-512F is available; `src[0 .. 16·s]` is readable, `dst[0..16]`
/// writable.
#[allow(clippy::needless_range_loop)] // see the loop
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn strided(src: *const f32, s: isize, dst: *mut f32) {
    let s = s.clamp(2, 4) as usize;
    let (permutation, masks) = &TABLES[s - 2];
    // SAFETY: s loads of 16 cover exactly src[0 .. 16·s]; the table is
    // 16 i32.
    unsafe {
        let index: __m512i = _mm512_loadu_epi32(permutation.as_ptr());
        let mut out = _mm512_permutexvar_ps(index, _mm512_loadu_ps(src));
        // An index loop: iterator adaptors here are not inlined into the
        // `target_feature` function (measured: a 48-wide stride-2 row took
        // 53 ns, 5x the AVX2 routine).
        for q in 1..s {
            let v = _mm512_loadu_ps(src.add(16 * q));
            out = _mm512_mask_permutexvar_ps(out, masks[q], index, v);
        }
        _mm512_storeu_ps(dst, out);
    }
}

/// `dst[j] = src[j*s]` for `j < n ≤ 16`, `s` in 2..=4, reading only
/// `src[0 ..= (n-1)·s]`: the loads of [`strided`] under masks of the
/// elements in reach, the store under the mask of `n` lanes.
///
/// # Safety
///
/// AVX-512F is available; `src[0 ..= (n-1)·s]` is readable, `dst[0..n]`
/// writable.
#[allow(clippy::needless_range_loop)] // as in `strided`
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn strided_tail(src: *const f32, s: isize, dst: *mut f32, n: isize) {
    let n = n.clamp(0, 16) as usize;
    if n == 0 {
        return;
    }
    let s = s.clamp(2, 4) as usize;
    let (permutation, masks) = &TABLES[s - 2];
    let reach = (n - 1) * s + 1;
    let in_reach = |q: usize| -> __mmask16 {
        let left = reach.saturating_sub(16 * q).min(16);
        ((1u32 << left) - 1) as __mmask16
    };
    // SAFETY: every load is masked to elements below `reach`, the store to
    // the first n lanes; the table is 16 i32.
    unsafe {
        let index: __m512i = _mm512_loadu_epi32(permutation.as_ptr());
        let mut out = _mm512_permutexvar_ps(index, _mm512_maskz_loadu_ps(in_reach(0), src));
        for q in 1..s {
            if 16 * q >= reach {
                break;
            }
            let v = _mm512_maskz_loadu_ps(in_reach(q), src.add(16 * q));
            out = _mm512_mask_permutexvar_ps(out, masks[q], index, v);
        }
        _mm512_mask_storeu_ps(dst, ((1u32 << n) - 1) as __mmask16, out);
    }
}
