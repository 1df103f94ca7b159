//! SSE2 micro-kernels (4 f32 lanes, separate multiply and add: no FMA): the
//! shared vector kernels ([`vector_micro_kernels!`]) over xmm registers.
//! SSE2 has no masked loads, so a mask is a lane count and edge tiles stage
//! each vector through a zero-padded 4-lane stack buffer, copying only the
//! valid lanes, so nothing outside the region is touched.

use std::arch::x86_64::{
    __m128, _mm_add_ps, _mm_loadu_ps, _mm_max_ps, _mm_min_ps, _mm_mul_ps, _mm_set1_ps,
    _mm_setzero_ps, _mm_storeu_ps,
};
use std::ptr::copy_nonoverlapping;

use super::vector_kernels::vector_micro_kernels;

vector_micro_kernels! {
    isa: Sse,
    isa_name: "SSE2",
    safety: "SSE2 is part of x86-64.",
    features: "sse2",
    vector: __m128,
    lanes: 4,
    mask: usize,
    zero: _mm_setzero_ps(),
    splat(x) => _mm_set1_ps(x),
    load(p) => _mm_loadu_ps(p),
    store(p, v) => _mm_storeu_ps(p, v),
    mul_add(a, b, c) => _mm_add_ps(c, _mm_mul_ps(a, b)),
    lane_mask(left) => left,
    load_masked(p, left) => {
        let mut lanes = [0f32; L];
        copy_nonoverlapping(p, lanes.as_mut_ptr(), left);
        _mm_loadu_ps(lanes.as_ptr())
    },
    store_masked(p, left, v) => {
        let mut lanes = [0f32; L];
        _mm_storeu_ps(lanes.as_mut_ptr(), v);
        copy_nonoverlapping(lanes.as_ptr(), p, left);
    },
    add(a, b) => _mm_add_ps(a, b),
    max(a, b) => _mm_max_ps(a, b),
    min(a, b) => _mm_min_ps(a, b),
    kernels: {
        sse_4x8: 4 x 8 edge_rows [1, 2],
        sse_6x8: 6 x 8 edge_rows [1, 2, 4],
        sse_4x4: 4 x 4 edge_rows [1, 2],
    }
}
