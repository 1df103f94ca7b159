//! AVX-512F micro-kernels (16 f32 lanes, FMA): the shared vector kernels
//! ([`vector_micro_kernels!`]) over zmm registers, with `__mmask16` masked
//! loads and stores for edge tiles.

use std::arch::x86_64::{
    __m512, __mmask16, _mm512_add_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mask_storeu_ps,
    _mm512_maskz_loadu_ps, _mm512_max_ps, _mm512_min_ps, _mm512_set1_ps, _mm512_setzero_ps,
    _mm512_storeu_ps,
};

use super::vector_kernels::vector_micro_kernels;

vector_micro_kernels! {
    isa: Avx512,
    isa_name: "AVX-512F",
    safety: "the CPU must support AVX-512F.",
    features: "avx512f",
    vector: __m512,
    lanes: 16,
    mask: __mmask16,
    zero: _mm512_setzero_ps(),
    splat(x) => _mm512_set1_ps(x),
    load(p) => _mm512_loadu_ps(p),
    store(p, v) => _mm512_storeu_ps(p, v),
    mul_add(a, b, c) => _mm512_fmadd_ps(a, b, c),
    lane_mask(left) => ((1u32 << left) - 1) as __mmask16,
    load_masked(p, mask) => _mm512_maskz_loadu_ps(mask, p),
    store_masked(p, mask, v) => _mm512_mask_storeu_ps(p, mask, v),
    add(a, b) => _mm512_add_ps(a, b),
    max(a, b) => _mm512_max_ps(a, b),
    min(a, b) => _mm512_min_ps(a, b),
    kernels: {
        avx512_6x32: 6 x 32 edge_rows [1, 2, 3, 4, 5],
        avx512_8x32: 8 x 32 edge_rows [1, 2, 3, 4, 5, 6, 7],
        avx512_12x32: 12 x 32 edge_rows [1, 2, 4, 6, 7, 8, 10],
        avx512_14x32: 14 x 32 edge_rows [1, 2, 4, 6, 7, 8, 10, 12],
        avx512_12x16: 12 x 16 edge_rows [1, 2, 4, 6, 7, 8, 10],
        avx512_4x64: 4 x 64 edge_rows [1, 2, 3],
    }
}
