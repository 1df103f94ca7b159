//! AVX2 + FMA micro-kernels (8 f32 lanes): the shared vector kernels
//! ([`vector_micro_kernels!`]) over ymm registers, with `vmaskmovps` masked
//! loads and stores for edge tiles; the full 4×24 tile runs its k loop in
//! assembly (`asm_kloop`).

use std::arch::asm;
use std::arch::x86_64::{
    __m256, __m256i, _mm256_add_ps, _mm256_cmpgt_epi32, _mm256_fmadd_ps, _mm256_loadu_ps,
    _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_max_ps, _mm256_min_ps, _mm256_set1_epi32,
    _mm256_set1_ps, _mm256_setr_epi32, _mm256_setzero_ps, _mm256_storeu_ps,
};

use super::vector_kernels::vector_micro_kernels;

vector_micro_kernels! {
    isa: Avx2Fma,
    isa_name: "AVX2+FMA",
    safety: "the CPU must support AVX2 and FMA.",
    features: "avx2,fma",
    vector: __m256,
    lanes: 8,
    mask: __m256i,
    zero: _mm256_setzero_ps(),
    splat(x) => _mm256_set1_ps(x),
    load(p) => _mm256_loadu_ps(p),
    store(p, v) => _mm256_storeu_ps(p, v),
    mul_add(a, b, c) => _mm256_fmadd_ps(a, b, c),
    lane_mask(left) => _mm256_cmpgt_epi32(
        _mm256_set1_epi32(left as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    ),
    load_masked(p, mask) => _mm256_maskload_ps(p, mask),
    store_masked(p, mask, v) => _mm256_maskstore_ps(p, mask, v),
    add(a, b) => _mm256_add_ps(a, b),
    max(a, b) => _mm256_max_ps(a, b),
    min(a, b) => _mm256_min_ps(a, b),
    full_tile_kloop: asm_kloop,
    kernels: {
        avx2_6x16: 6 x 16 edge_rows [1, 2, 4],
        avx2_4x24: 4 x 24 edge_rows [1, 2],
        avx2_8x8: 8 x 8 edge_rows [1, 2, 4],
    }
}

/// The k loop of a full 4×24 tile in assembly; other shapes return `false`
/// at once and keep the shared loop. The 12 accumulators, the 3 B vectors of
/// a row and the A broadcast take exactly the 16 ymm registers, which LLVM's
/// allocator does not manage without a spill (~40% of peak instead of
/// ~97%). A element `(i, k)` at `a + i*a_rs + k*a_cs`, B row `k` at
/// `b + k*b_rs` (elements).
///
/// # Safety
///
/// AVX2 and FMA are available, and the full `MR×kc` A and `kc×NV·8` B
/// regions are valid to read.
#[target_feature(enable = "avx2,fma")]
unsafe fn asm_kloop<const MR: usize, const NV: usize>(
    kc: usize,
    a: *const f32,
    a_rs: isize,
    a_cs: isize,
    b: *const f32,
    b_rs: isize,
    accs: &mut [[__m256; NV]; MR],
) -> bool {
    if MR != 4 || NV != 3 {
        return false;
    }
    // SAFETY: MR = 4 and NV = 3, so the array has that type.
    let acc = unsafe { &mut *(accs as *mut [[__m256; NV]; MR] as *mut [[__m256; 3]; 4]) };
    if kc == 0 {
        return true;
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
    true
}
