//! AVX-512F micro-kernels (16 f32 lanes, FMA): full tiles keep the
//! `MR × NR/16` accumulators in zmm registers across the whole kc loop; edge
//! tiles use masked loads and stores, so nothing outside the region is
//! touched.

use std::arch::x86_64::{
    __mmask16, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps,
    _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
};

use super::{Isa, MicroKernel};

/// f32 lanes of a zmm register.
const L: usize = 16;

macro_rules! kernels {
    ($($name:ident: $mr:literal x $nr:literal),* $(,)?) => {
        $(
            #[doc = concat!("The ", stringify!($mr), "×", stringify!($nr),
                " AVX-512F micro-kernel; see [`super::GemmFn`].")]
            ///
            /// # Safety
            ///
            /// As [`super::GemmFn`]; the CPU must support AVX-512F.
            #[allow(clippy::too_many_arguments)]
            unsafe extern "C" fn $name(
                kc: i64, a: *const f32, a_rs: i64, a_cs: i64, b: *const f32, b_rs: i64,
                c: *mut f32, c_rs: i64, m: i64, n: i64, accumulate: i64,
            ) {
                // SAFETY: forwarded contract (including AVX-512F support).
                unsafe {
                    tile::<$mr, { $nr / L }>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, accumulate)
                }
            }
        )*

        /// The AVX-512F kernels.
        pub(super) fn kernels() -> Vec<MicroKernel> {
            vec![$(MicroKernel {
                name: stringify!($name),
                isa: Isa::Avx512,
                mr: $mr,
                nr: $nr,
                func: $name,
            }),*]
        }
    };
}

kernels! {
    avx512_6x32: 6 x 32,
    avx512_8x32: 8 x 32,
    avx512_12x32: 12 x 32,
    avx512_14x32: 14 x 32,
    avx512_12x16: 12 x 16,
    avx512_4x64: 4 x 64,
}

/// Clamps the tile, then picks the full-tile body (packed A or strided A)
/// or the masked edge body.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn tile<const MR: usize, const NV: usize>(
    kc: i64,
    a: *const f32,
    a_rs: i64,
    a_cs: i64,
    b: *const f32,
    b_rs: i64,
    c: *mut f32,
    c_rs: i64,
    m: i64,
    n: i64,
    accumulate: i64,
) {
    let m = m.clamp(0, MR as i64) as usize;
    let n = n.clamp(0, (NV * L) as i64) as usize;
    if m == 0 || n == 0 {
        return;
    }
    let kc = kc.max(0) as usize;
    let (a_rs, a_cs, b_rs, c_rs) = (a_rs as isize, a_cs as isize, b_rs as isize, c_rs as isize);
    let acc = accumulate != 0;
    // SAFETY: forwarded contract; m ≤ MR, n ≤ NR.
    unsafe {
        if m == MR && n == NV * L {
            if a_rs == 1 {
                body::<MR, NV, true, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc)
            } else {
                body::<MR, NV, false, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc)
            }
        } else {
            body::<MR, NV, false, true>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc)
        }
    }
}

/// The kernel proper. `PACKED`: A's row stride is 1 (rows at constant
/// offsets from the column pointer). `MASKED`: an edge tile — B and C are
/// loaded and stored under lane masks for `n`, rows past `m` recompute row
/// `m-1` of A (valid memory) and are never stored.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[target_feature(enable = "avx512f")]
unsafe fn body<const MR: usize, const NV: usize, const PACKED: bool, const MASKED: bool>(
    kc: usize,
    a: *const f32,
    a_rs: isize,
    a_cs: isize,
    b: *const f32,
    b_rs: isize,
    c: *mut f32,
    c_rs: isize,
    m: usize,
    n: usize,
    accumulate: bool,
) {
    let mut masks: [__mmask16; NV] = [0xffff; NV];
    if MASKED {
        for (v, mask) in masks.iter_mut().enumerate() {
            let left = n.saturating_sub(v * L).min(L);
            *mask = ((1u32 << left) - 1) as __mmask16;
        }
    }
    let mut arow = [0isize; MR];
    for (i, off) in arow.iter_mut().enumerate() {
        *off = i.min(m - 1) as isize * a_rs;
    }
    let mut accs = [[_mm512_setzero_ps(); NV]; MR];
    // SAFETY (all accesses): the caller guarantees the m×n / kc region is
    // valid; unmasked accesses happen only on full tiles, masked-out lanes
    // are not accessed, and A rows are clamped to m-1.
    unsafe {
        if accumulate {
            for i in 0..MR {
                if MASKED && i >= m {
                    continue;
                }
                let row = c.offset(i as isize * c_rs);
                for v in 0..NV {
                    accs[i][v] = if MASKED {
                        _mm512_maskz_loadu_ps(masks[v], row.wrapping_add(v * L))
                    } else {
                        _mm512_loadu_ps(row.add(v * L))
                    };
                }
            }
        }
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            let mut bv = [_mm512_setzero_ps(); NV];
            for v in 0..NV {
                bv[v] = if MASKED {
                    _mm512_maskz_loadu_ps(masks[v], bp.wrapping_add(v * L))
                } else {
                    _mm512_loadu_ps(bp.add(v * L))
                };
            }
            for i in 0..MR {
                let off = if PACKED { i as isize } else { arow[i] };
                let av = _mm512_set1_ps(*ap.offset(off));
                for v in 0..NV {
                    accs[i][v] = _mm512_fmadd_ps(av, bv[v], accs[i][v]);
                }
            }
            ap = ap.wrapping_offset(a_cs);
            bp = bp.wrapping_offset(b_rs);
        }
        for i in 0..MR {
            if MASKED && i >= m {
                continue;
            }
            let row = c.offset(i as isize * c_rs);
            for v in 0..NV {
                if MASKED {
                    _mm512_mask_storeu_ps(row.wrapping_add(v * L), masks[v], accs[i][v]);
                } else {
                    _mm512_storeu_ps(row.add(v * L), accs[i][v]);
                }
            }
        }
    }
}
