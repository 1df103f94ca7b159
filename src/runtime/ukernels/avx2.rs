//! AVX2 + FMA micro-kernels (8 f32 lanes): full tiles keep the
//! `MR × NR/16` accumulators in ymm registers across the whole kc loop; edge
//! tiles use `vmaskmovps` masked loads and stores, so nothing outside the region is
//! touched.

use std::arch::asm;
use std::arch::x86_64::{
    __m256, __m256i, _mm256_cmpgt_epi32, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_maskload_ps,
    _mm256_maskstore_ps, _mm256_set1_epi32, _mm256_set1_ps, _mm256_setr_epi32, _mm256_setzero_ps,
    _mm256_setzero_si256, _mm256_storeu_ps,
};

use super::{Isa, MicroKernel};

/// f32 lanes of a ymm register.
const L: usize = 8;

macro_rules! kernels {
    ($($name:ident: $mr:literal x $nr:literal),* $(,)?) => {
        $(
            #[doc = concat!("The ", stringify!($mr), "×", stringify!($nr),
                " AVX2+FMA micro-kernel; see [`super::GemmFn`].")]
            ///
            /// # Safety
            ///
            /// As [`super::GemmFn`]; the CPU must support AVX2 and FMA.
            #[allow(clippy::too_many_arguments)]
            unsafe extern "C" fn $name(
                kc: i64, a: *const f32, a_rs: i64, a_cs: i64, b: *const f32, b_rs: i64,
                c: *mut f32, c_rs: i64, m: i64, n: i64, accumulate: i64,
            ) {
                // SAFETY: forwarded contract (including AVX2 and FMA support).
                unsafe {
                    tile::<$mr, { $nr / L }>(kc, a, a_rs, a_cs, b, b_rs, c, c_rs, m, n, accumulate)
                }
            }
        )*

        /// The AVX2+FMA kernels.
        pub(super) fn kernels() -> Vec<MicroKernel> {
            vec![$(MicroKernel {
                name: stringify!($name),
                isa: Isa::Avx2Fma,
                mr: $mr,
                nr: $nr,
                func: $name,
            }),*]
        }
    };
}

kernels! {
    avx2_6x16: 6 x 16,
    avx2_4x24: 4 x 24,
    avx2_8x8: 8 x 8,
}

/// Clamps the tile, then picks the full-tile body (packed A or strided A)
/// or the masked edge body.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
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
#[target_feature(enable = "avx2,fma")]
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
    let mut masks: [__m256i; NV] = [_mm256_setzero_si256(); NV];
    if MASKED {
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for (v, mask) in masks.iter_mut().enumerate() {
            let left = n.saturating_sub(v * L).min(L) as i32;
            *mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);
        }
    }
    let mut arow = [0isize; MR];
    for (i, off) in arow.iter_mut().enumerate() {
        *off = i.min(m - 1) as isize * a_rs;
    }
    let mut accs = [[_mm256_setzero_ps(); NV]; MR];
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
                        _mm256_maskload_ps(row.wrapping_add(v * L), masks[v])
                    } else {
                        _mm256_loadu_ps(row.add(v * L))
                    };
                }
            }
        }
        // The full 4×24 tile runs its k loop in assembly: its 12 accumulators,
        // 3 B vectors and the broadcast fill all 16 ymm registers, and LLVM's
        // allocator spills there (~40% of peak instead of ~97%).
        let asm_loop = MR == 4 && NV == 3 && !MASKED;
        if asm_loop {
            // SAFETY: MR = 4 and NV = 3, so the array has that type.
            let accs = &mut *((&mut accs) as *mut [[__m256; NV]; MR] as *mut [[__m256; 3]; 4]);
            kloop_4x24(kc, a, a_rs, a_cs, b, b_rs, accs);
        }
        let kc = if asm_loop { 0 } else { kc };
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            let mut bv = [_mm256_setzero_ps(); NV];
            for v in 0..NV {
                bv[v] = if MASKED {
                    _mm256_maskload_ps(bp.wrapping_add(v * L), masks[v])
                } else {
                    _mm256_loadu_ps(bp.add(v * L))
                };
            }
            for i in 0..MR {
                let off = if PACKED { i as isize } else { arow[i] };
                let av = _mm256_set1_ps(*ap.offset(off));
                for v in 0..NV {
                    accs[i][v] = _mm256_fmadd_ps(av, bv[v], accs[i][v]);
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
                    _mm256_maskstore_ps(row.wrapping_add(v * L), masks[v], accs[i][v]);
                } else {
                    _mm256_storeu_ps(row.add(v * L), accs[i][v]);
                }
            }
        }
    }
}

/// The k loop of the full 4×24 tile in assembly: the 12 accumulators, the 3
/// B vectors of a row and the A broadcast take exactly the 16 ymm registers,
/// which the compiler's allocator does not manage without a spill. A element
/// `(i, k)` at `a + i*a_rs + k*a_cs`, B row `k` at `b + k*b_rs` (elements).
///
/// # Safety
///
/// AVX2 and FMA are available, and the full 4×kc A and kc×24 B regions are
/// valid to read.
#[target_feature(enable = "avx2,fma")]
unsafe fn kloop_4x24(
    kc: usize,
    a: *const f32,
    a_rs: isize,
    a_cs: isize,
    b: *const f32,
    b_rs: isize,
    acc: &mut [[__m256; 3]; 4],
) {
    if kc == 0 {
        return;
    }
    let [
        [mut c00, mut c01, mut c02],
        [mut c10, mut c11, mut c12],
        [mut c20, mut c21, mut c22],
        [mut c30, mut c31, mut c32],
    ] = *acc;
    let f = size_of::<f32>() as isize;
    // Byte strides; a stride the region never uses (a_cs, b_rs when kc = 1)
    // may be anything, so the products wrap rather than overflow.
    // SAFETY: reads only A(i, k) and B(k, 0..24) for k < kc, i < 4, which
    // the caller guarantees are valid; writes only the named registers.
    unsafe {
        asm!(
            "2:",
            "vmovups {b0}, ymmword ptr [{bp}]",
            "vmovups {b1}, ymmword ptr [{bp} + 32]",
            "vmovups {b2}, ymmword ptr [{bp} + 64]",
            "vbroadcastss {t}, dword ptr [{ap}]",
            "vfmadd231ps {c00}, {t}, {b0}",
            "vfmadd231ps {c01}, {t}, {b1}",
            "vfmadd231ps {c02}, {t}, {b2}",
            "vbroadcastss {t}, dword ptr [{ap} + {r1}]",
            "vfmadd231ps {c10}, {t}, {b0}",
            "vfmadd231ps {c11}, {t}, {b1}",
            "vfmadd231ps {c12}, {t}, {b2}",
            "vbroadcastss {t}, dword ptr [{ap} + {r2}]",
            "vfmadd231ps {c20}, {t}, {b0}",
            "vfmadd231ps {c21}, {t}, {b1}",
            "vfmadd231ps {c22}, {t}, {b2}",
            "vbroadcastss {t}, dword ptr [{ap} + {r3}]",
            "vfmadd231ps {c30}, {t}, {b0}",
            "vfmadd231ps {c31}, {t}, {b1}",
            "vfmadd231ps {c32}, {t}, {b2}",
            "add {ap}, {acs}",
            "add {bp}, {brs}",
            "dec {k}",
            "jnz 2b",
            ap = inout(reg) a => _,
            bp = inout(reg) b => _,
            k = inout(reg) kc => _,
            r1 = in(reg) a_rs.wrapping_mul(f),
            r2 = in(reg) a_rs.wrapping_mul(2 * f),
            r3 = in(reg) a_rs.wrapping_mul(3 * f),
            acs = in(reg) a_cs.wrapping_mul(f),
            brs = in(reg) b_rs.wrapping_mul(f),
            b0 = out(ymm_reg) _,
            b1 = out(ymm_reg) _,
            b2 = out(ymm_reg) _,
            t = out(ymm_reg) _,
            c00 = inout(ymm_reg) c00,
            c01 = inout(ymm_reg) c01,
            c02 = inout(ymm_reg) c02,
            c10 = inout(ymm_reg) c10,
            c11 = inout(ymm_reg) c11,
            c12 = inout(ymm_reg) c12,
            c20 = inout(ymm_reg) c20,
            c21 = inout(ymm_reg) c21,
            c22 = inout(ymm_reg) c22,
            c30 = inout(ymm_reg) c30,
            c31 = inout(ymm_reg) c31,
            c32 = inout(ymm_reg) c32,
            options(nostack, readonly),
        );
    }
    *acc = [
        [c00, c01, c02],
        [c10, c11, c12],
        [c20, c21, c22],
        [c30, c31, c32],
    ];
}
