//! The AVX2 packing routine (8 f32 lanes): 256-bit row copies, 8×8
//! in-register transposes (`unpck`, `shufps`, `vperm2f128`) and
//! deinterleaving for column strides 2 to 4 (`vpermps` of each loaded
//! vector, blended).

use std::arch::x86_64::{
    __m256, __m256i, _mm256_blendv_ps, _mm256_castsi256_ps, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_permute2f128_ps, _mm256_permutevar8x32_ps, _mm256_shuffle_ps, _mm256_storeu_ps,
    _mm256_unpackhi_ps, _mm256_unpacklo_ps,
};

use super::driver::pack_routine;
use super::{Isa, PackRoutine};

/// The AVX2 routine.
pub(super) fn routine() -> PackRoutine {
    PackRoutine {
        name: "avx2_pack",
        isa: Isa::Avx2Fma,
        func: avx2_pack,
    }
}

pack_routine! {
    name: avx2_pack,
    features: "avx2,fma",
    lanes: 8,
    block: 8,
    row: row,
    transpose: transpose8,
    strided: strided,
}

/// Copies `n` contiguous elements, 32 then 8 at a time, the rest one by one.
///
/// # Safety
///
/// `src[0..n]` is readable, `dst[0..n]` writable.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn row(src: *const f32, dst: *mut f32, n: isize) {
    let mut j = 0;
    // SAFETY: every access is at an index below n.
    unsafe {
        while j + 32 <= n {
            // Four loads, then four stores, named one by one: written as an
            // array, the copy went through the stack in some builds.
            let v0 = _mm256_loadu_ps(src.offset(j));
            let v1 = _mm256_loadu_ps(src.offset(j + 8));
            let v2 = _mm256_loadu_ps(src.offset(j + 16));
            let v3 = _mm256_loadu_ps(src.offset(j + 24));
            _mm256_storeu_ps(dst.offset(j), v0);
            _mm256_storeu_ps(dst.offset(j + 8), v1);
            _mm256_storeu_ps(dst.offset(j + 16), v2);
            _mm256_storeu_ps(dst.offset(j + 24), v3);
            j += 32;
        }
        while j + 8 <= n {
            _mm256_storeu_ps(dst.offset(j), _mm256_loadu_ps(src.offset(j)));
            j += 8;
        }
        while j < n {
            *dst.offset(j) = *src.offset(j);
            j += 1;
        }
    }
}

/// `dst[i*dst_rs + j] = src[i + j*src_cs]` for an 8×8 block (also the
/// transpose of the AVX-512 routine).
///
/// # Safety
///
/// AVX2 is available; the 8×8 blocks of src and dst are valid.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) unsafe fn transpose8(src: *const f32, src_cs: isize, dst: *mut f32, dst_rs: isize) {
    // SAFETY: the eight columns of src and rows of dst are in the block.
    unsafe {
        let v: [__m256; 8] =
            std::array::from_fn(|j| _mm256_loadu_ps(src.offset(j as isize * src_cs)));
        // Pairs of rows interleaved: t0 = [a0 b0 a1 b1 | a4 b4 a5 b5], …
        let t0 = _mm256_unpacklo_ps(v[0], v[1]);
        let t1 = _mm256_unpackhi_ps(v[0], v[1]);
        let t2 = _mm256_unpacklo_ps(v[2], v[3]);
        let t3 = _mm256_unpackhi_ps(v[2], v[3]);
        let t4 = _mm256_unpacklo_ps(v[4], v[5]);
        let t5 = _mm256_unpackhi_ps(v[4], v[5]);
        let t6 = _mm256_unpacklo_ps(v[6], v[7]);
        let t7 = _mm256_unpackhi_ps(v[6], v[7]);
        // Quads: u0 = [a0 b0 c0 d0 | a4 b4 c4 d4], …
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        let w = [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ];
        for (i, w) in w.into_iter().enumerate() {
            _mm256_storeu_ps(dst.offset(i as isize * dst_rs), w);
        }
    }
}

/// Lane `i` of the deinterleave with stride `s`: element `s·i` is lane
/// `(s·i) mod 8` of loaded vector `(s·i) / 8`.
const fn permutation(s: usize) -> [i32; 8] {
    let mut t = [0; 8];
    let mut i = 0;
    while i < 8 {
        t[i] = ((s * i) % 8) as i32;
        i += 1;
    }
    t
}

/// The blend mask taking lane `i` from loaded vector `q` (all ones where
/// `(s·i) / 8 == q`).
const fn selection(s: usize, q: usize) -> [i32; 8] {
    let mut t = [0; 8];
    let mut i = 0;
    while i < 8 {
        t[i] = if (s * i) / 8 == q { -1 } else { 0 };
        i += 1;
    }
    t
}

/// Per stride 2, 3, 4: the permutation and the masks of vectors 1..s.
const TABLES: [([i32; 8], [[i32; 8]; 3]); 3] = {
    let mut out = [([0; 8], [[0; 8]; 3]); 3];
    let mut s = 2;
    while s <= 4 {
        out[s - 2].0 = permutation(s);
        let mut q = 1;
        while q < s {
            out[s - 2].1[q - 1] = selection(s, q);
            q += 1;
        }
        s += 1;
    }
    out
};

/// `dst[j] = src[j*s]` for `j < 8`, `s` in 2..=4, from the `8·s`
/// contiguous elements at src.
///
/// # Safety
///
/// AVX2 is available; `src[0 .. 8·s]` is readable, `dst[0..8]` writable.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn strided(src: *const f32, s: isize, dst: *mut f32) {
    let s = s.clamp(2, 4) as usize;
    let (permutation, masks) = &TABLES[s - 2];
    // SAFETY: s loads of 8 cover exactly src[0 .. 8·s]; the tables are
    // 8 i32 each.
    unsafe {
        let index: __m256i = _mm256_loadu_si256(permutation.as_ptr().cast());
        let mut out = _mm256_permutevar8x32_ps(_mm256_loadu_ps(src), index);
        for (q, mask) in masks.iter().enumerate().take(s - 1) {
            let v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(src.add(8 * (q + 1))), index);
            let mask = _mm256_castsi256_ps(_mm256_loadu_si256(mask.as_ptr().cast()));
            out = _mm256_blendv_ps(out, v, mask);
        }
        _mm256_storeu_ps(dst, out);
    }
}
