//! SSE2 micro-kernels (4 f32 lanes, separate multiply and add: no FMA).
//! Full tiles keep the `MR × NR/4` accumulators in xmm registers across the
//! whole kc loop; edge tiles stage each B row and the C tile through small
//! stack buffers (SSE2 has no masked loads), copying only the `n` valid
//! columns and `m` valid rows, so nothing outside the region is touched.

use std::arch::x86_64::{
    __m128, _mm_add_ps, _mm_loadu_ps, _mm_mul_ps, _mm_set1_ps, _mm_setzero_ps, _mm_storeu_ps,
};

use super::{Isa, MicroKernel};

/// f32 lanes of an xmm register.
const L: usize = 4;

macro_rules! kernels {
    ($($name:ident: $mr:literal x $nr:literal),* $(,)?) => {
        $(
            #[doc = concat!("The ", stringify!($mr), "×", stringify!($nr),
                " SSE2 micro-kernel; see [`super::GemmFn`].")]
            ///
            /// # Safety
            ///
            /// As [`super::GemmFn`] (SSE2 is part of x86-64).
            #[allow(clippy::too_many_arguments)]
            unsafe extern "C" fn $name(
                kc: i64, a: *const f32, a_rs: i64, a_cs: i64, b: *const f32, b_rs: i64,
                c: *mut f32, c_rs: i64, m: i64, n: i64, accumulate: i64,
            ) {
                // SAFETY: forwarded contract.
                unsafe {
                    tile::<$mr, { $nr / L }, $nr>(
                        kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, accumulate,
                    )
                }
            }
        )*

        /// The SSE2 kernels.
        pub(super) fn kernels() -> Vec<MicroKernel> {
            vec![$(MicroKernel {
                name: stringify!($name),
                isa: Isa::Sse,
                mr: $mr,
                nr: $nr,
                func: $name,
            }),*]
        }
    };
}

kernels! {
    sse_4x8: 4 x 8,
    sse_6x8: 6 x 8,
    sse_4x4: 4 x 4,
}

/// Clamps the tile, then picks the full-tile body (packed A or strided A)
/// or the staged edge body. `NR = NV * L` (a separate parameter, as stack
/// buffers need it as a constant).
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "sse2")]
unsafe fn tile<const MR: usize, const NV: usize, const NR: usize>(
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
    let n = n.clamp(0, NR as i64) as usize;
    if m == 0 || n == 0 {
        return;
    }
    let kc = kc.max(0) as usize;
    let (a_rs, a_cs, b_rs, c_rs) = (a_rs as isize, a_cs as isize, b_rs as isize, c_rs as isize);
    let acc = accumulate != 0;
    // SAFETY: forwarded contract; m ≤ MR, n ≤ NR.
    unsafe {
        if m == MR && n == NR {
            if a_rs == 1 {
                body::<MR, NV, NR, true, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc)
            } else {
                body::<MR, NV, NR, false, false>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc)
            }
        } else {
            body::<MR, NV, NR, false, true>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, acc)
        }
    }
}

/// The kernel proper. `PACKED`: A's row stride is 1. `STAGED`: an edge tile
/// — each B row's `n` columns are copied into a zero-padded stack row before
/// the vector loads, C goes through a stack tile, and rows past `m`
/// recompute row `m-1` of A (valid memory) and are never stored.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[target_feature(enable = "sse2")]
unsafe fn body<
    const MR: usize,
    const NV: usize,
    const NR: usize,
    const PACKED: bool,
    const STAGED: bool,
>(
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
    let mut arow = [0isize; MR];
    for (i, off) in arow.iter_mut().enumerate() {
        *off = i.min(m - 1) as isize * a_rs;
    }
    let mut accs = [[_mm_setzero_ps(); NV]; MR];
    let mut stage = [[0f32; NR]; MR];
    let mut brow = [0f32; NR];
    // SAFETY (all accesses): the caller guarantees the m×n / kc region is
    // valid; direct vector accesses happen only on full tiles, edge tiles
    // copy exactly the m×n / kc×n elements, and A rows are clamped to m-1.
    unsafe {
        if accumulate {
            if STAGED {
                for i in 0..m {
                    let row = c.offset(i as isize * c_rs);
                    std::ptr::copy_nonoverlapping(row, stage[i].as_mut_ptr(), n);
                }
            }
            for i in 0..MR {
                let row = if STAGED {
                    stage[i].as_ptr()
                } else {
                    c.offset(i as isize * c_rs)
                };
                for v in 0..NV {
                    accs[i][v] = _mm_loadu_ps(row.add(v * L));
                }
            }
        }
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            let src = if STAGED {
                std::ptr::copy_nonoverlapping(bp, brow.as_mut_ptr(), n);
                brow.as_ptr()
            } else {
                bp
            };
            let mut bv: [__m128; NV] = [_mm_setzero_ps(); NV];
            for v in 0..NV {
                bv[v] = _mm_loadu_ps(src.add(v * L));
            }
            for i in 0..MR {
                let off = if PACKED { i as isize } else { arow[i] };
                let av = _mm_set1_ps(*ap.offset(off));
                for v in 0..NV {
                    accs[i][v] = _mm_add_ps(accs[i][v], _mm_mul_ps(av, bv[v]));
                }
            }
            ap = ap.wrapping_offset(a_cs);
            bp = bp.wrapping_offset(b_rs);
        }
        if STAGED {
            for i in 0..MR {
                for v in 0..NV {
                    _mm_storeu_ps(stage[i].as_mut_ptr().add(v * L), accs[i][v]);
                }
            }
            for i in 0..m {
                let row = c.offset(i as isize * c_rs);
                std::ptr::copy_nonoverlapping(stage[i].as_ptr(), row, n);
            }
        } else {
            for i in 0..MR {
                let row = c.offset(i as isize * c_rs);
                for v in 0..NV {
                    _mm_storeu_ps(row.add(v * L), accs[i][v]);
                }
            }
        }
    }
}
