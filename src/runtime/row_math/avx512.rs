//! AVX-512F row primitives (16 f32 lanes): the vector operations the
//! shared algorithms ([`row_math_algorithms!`]) are written in, on zmm
//! registers, with `__mmask16` lane masks (bitwise float operations go
//! through the integer forms, which AVX-512F has without DQ).

use std::arch::x86_64::{
    __m512, __m512i, __mmask16, _CMP_EQ_OQ, _CMP_LT_OQ, _CMP_NGE_UQ, _mm512_add_epi32,
    _mm512_add_ps, _mm512_and_epi32, _mm512_castps_si512, _mm512_castsi512_ps, _mm512_cmp_ps_mask,
    _mm512_cvtepi32_ps, _mm512_div_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mask_blend_ps,
    _mm512_maskz_mov_ps, _mm512_min_ps, _mm512_mul_ps, _mm512_or_epi32, _mm512_set1_epi32,
    _mm512_set1_ps, _mm512_slli_epi32, _mm512_srai_epi32, _mm512_srli_epi32, _mm512_storeu_ps,
    _mm512_sub_epi32, _mm512_sub_ps, _mm512_xor_epi32,
};

use super::algorithms::{row_math_algorithms, vector_ops};

type V = __m512;
type I = __m512i;
/// A lane mask: bit `l` set where the condition holds in lane `l`.
type M = __mmask16;

vector_ops! {
    features: "avx512f",
    fn splat(c: f32) -> V => _mm512_set1_ps(c);
    fn splat_i(c: i32) -> I => _mm512_set1_epi32(c);
    fn add(a: V, b: V) -> V => _mm512_add_ps(a, b);
    fn sub(a: V, b: V) -> V => _mm512_sub_ps(a, b);
    fn mul(a: V, b: V) -> V => _mm512_mul_ps(a, b);
    fn div(a: V, b: V) -> V => _mm512_div_ps(a, b);
    fn fma(a: V, b: V, c: V) -> V => _mm512_fmadd_ps(a, b, c);
    /// `a < b ? a : b` (`vminps`: NaN in `b` passes through).
    fn min(a: V, b: V) -> V => _mm512_min_ps(a, b);
    fn abs(x: V) -> V => from_bits(_mm512_and_epi32(to_bits(x), _mm512_set1_epi32(i32::MAX)));
    fn neg(x: V) -> V => from_bits(_mm512_xor_epi32(to_bits(x), _mm512_set1_epi32(i32::MIN)));
    fn or(a: V, b: V) -> V => from_bits(_mm512_or_epi32(to_bits(a), to_bits(b)));
    fn and(a: V, b: V) -> V => from_bits(_mm512_and_epi32(to_bits(a), to_bits(b)));
    fn lt(a: V, b: V) -> M => _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b);
    fn eq(a: V, b: V) -> M => _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b);
    /// Not `a ≥ b`: `a < b` or either is NaN.
    fn nge(a: V, b: V) -> M => _mm512_cmp_ps_mask::<_CMP_NGE_UQ>(a, b);
    fn select(m: M, t: V, f: V) -> V => _mm512_mask_blend_ps(m, f, t);
    fn keep(m: M, x: V) -> V => _mm512_maskz_mov_ps(m, x);
    fn clear(m: M, x: V) -> V => _mm512_maskz_mov_ps(!m, x);
    fn to_bits(x: V) -> I => _mm512_castps_si512(x);
    fn from_bits(x: I) -> V => _mm512_castsi512_ps(x);
    fn iadd(a: I, b: I) -> I => _mm512_add_epi32(a, b);
    fn isub(a: I, b: I) -> I => _mm512_sub_epi32(a, b);
    fn iand(a: I, b: I) -> I => _mm512_and_epi32(a, b);
    fn ior(a: I, b: I) -> I => _mm512_or_epi32(a, b);
    fn sra1(a: I) -> I => _mm512_srai_epi32::<1>(a);
    fn shl23(a: I) -> I => _mm512_slli_epi32::<23>(a);
    fn shr23(a: I) -> I => _mm512_srli_epi32::<23>(a);
    fn i2f(a: I) -> V => _mm512_cvtepi32_ps(a);
}

/// # Safety
/// `p` is valid for reading 16 floats.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn load(p: *const f32) -> V {
    // SAFETY: the caller's contract.
    unsafe { _mm512_loadu_ps(p) }
}
/// # Safety
/// `p` is valid for writing 16 floats.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store(p: *mut f32, v: V) {
    // SAFETY: the caller's contract.
    unsafe { _mm512_storeu_ps(p, v) }
}

row_math_algorithms! {
    isa: Avx512,
    features: "avx512f",
    lanes: 16,
    primitives: {
        avx512_exp: Exp => exp_v,
        avx512_log: Log => log_v,
        avx512_tanh: Tanh => tanh_v,
        avx512_sigmoid: Sigmoid => sigmoid_v,
        avx512_erf: Erf => erf_v,
    },
}
