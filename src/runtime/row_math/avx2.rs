//! AVX2 + FMA row primitives (8 f32 lanes): the vector operations the
//! shared algorithms ([`row_math_algorithms!`]) are written in, on ymm
//! registers, with all-ones lane masks in float vectors.

use std::arch::x86_64::{
    __m256, __m256i, _CMP_EQ_OQ, _CMP_LT_OQ, _CMP_NGE_UQ, _mm256_add_epi32, _mm256_add_ps,
    _mm256_and_ps, _mm256_and_si256, _mm256_andnot_ps, _mm256_blendv_ps, _mm256_castps_si256,
    _mm256_castsi256_ps, _mm256_cmp_ps, _mm256_cvtepi32_ps, _mm256_div_ps, _mm256_fmadd_ps,
    _mm256_loadu_ps, _mm256_min_ps, _mm256_mul_ps, _mm256_or_ps, _mm256_or_si256,
    _mm256_set1_epi32, _mm256_set1_ps, _mm256_slli_epi32, _mm256_srai_epi32, _mm256_srli_epi32,
    _mm256_storeu_ps, _mm256_sub_epi32, _mm256_sub_ps, _mm256_xor_ps,
};

use super::algorithms::{row_math_algorithms, vector_ops};

type V = __m256;
type I = __m256i;
/// A lane mask: all ones where the condition holds.
type M = __m256;

vector_ops! {
    features: "avx2,fma",
    fn splat(c: f32) -> V => _mm256_set1_ps(c);
    fn splat_i(c: i32) -> I => _mm256_set1_epi32(c);
    fn add(a: V, b: V) -> V => _mm256_add_ps(a, b);
    fn sub(a: V, b: V) -> V => _mm256_sub_ps(a, b);
    fn mul(a: V, b: V) -> V => _mm256_mul_ps(a, b);
    fn div(a: V, b: V) -> V => _mm256_div_ps(a, b);
    fn fma(a: V, b: V, c: V) -> V => _mm256_fmadd_ps(a, b, c);
    /// `a < b ? a : b` (`minps`: NaN in `b` passes through).
    fn min(a: V, b: V) -> V => _mm256_min_ps(a, b);
    fn abs(x: V) -> V => _mm256_andnot_ps(_mm256_set1_ps(-0.0), x);
    fn neg(x: V) -> V => _mm256_xor_ps(x, _mm256_set1_ps(-0.0));
    fn or(a: V, b: V) -> V => _mm256_or_ps(a, b);
    fn and(a: V, b: V) -> V => _mm256_and_ps(a, b);
    fn lt(a: V, b: V) -> M => _mm256_cmp_ps::<_CMP_LT_OQ>(a, b);
    fn eq(a: V, b: V) -> M => _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b);
    /// Not `a ≥ b`: `a < b` or either is NaN.
    fn nge(a: V, b: V) -> M => _mm256_cmp_ps::<_CMP_NGE_UQ>(a, b);
    fn select(m: M, t: V, f: V) -> V => _mm256_blendv_ps(f, t, m);
    fn keep(m: M, x: V) -> V => _mm256_and_ps(m, x);
    fn clear(m: M, x: V) -> V => _mm256_andnot_ps(m, x);
    fn to_bits(x: V) -> I => _mm256_castps_si256(x);
    fn from_bits(x: I) -> V => _mm256_castsi256_ps(x);
    fn iadd(a: I, b: I) -> I => _mm256_add_epi32(a, b);
    fn isub(a: I, b: I) -> I => _mm256_sub_epi32(a, b);
    fn iand(a: I, b: I) -> I => _mm256_and_si256(a, b);
    fn ior(a: I, b: I) -> I => _mm256_or_si256(a, b);
    fn sra1(a: I) -> I => _mm256_srai_epi32::<1>(a);
    fn shl23(a: I) -> I => _mm256_slli_epi32::<23>(a);
    fn shr23(a: I) -> I => _mm256_srli_epi32::<23>(a);
    fn i2f(a: I) -> V => _mm256_cvtepi32_ps(a);
}

/// # Safety
/// `p` is valid for reading 8 floats.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn load(p: *const f32) -> V {
    // SAFETY: the caller's contract.
    unsafe { _mm256_loadu_ps(p) }
}
/// # Safety
/// `p` is valid for writing 8 floats.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn store(p: *mut f32, v: V) {
    // SAFETY: the caller's contract.
    unsafe { _mm256_storeu_ps(p, v) }
}

row_math_algorithms! {
    isa: Avx2Fma,
    features: "avx2,fma",
    lanes: 8,
    primitives: {
        avx2_exp: Exp => exp_v,
        avx2_log: Log => log_v,
        avx2_tanh: Tanh => tanh_v,
        avx2_sigmoid: Sigmoid => sigmoid_v,
        avx2_erf: Erf => erf_v,
    },
}
