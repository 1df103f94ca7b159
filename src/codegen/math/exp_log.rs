//! `exp` and `log` on `f32x4`, inline and branch-free (Cephes `expf`/`logf`
//! polynomials with fused multiply-adds).

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};
use cranelift_frontend::FunctionBuilder;

use super::consts::{clamp_above, f32s, from_bits, horner, i32s, mask, select, to_bits};
use crate::runtime::row_math::constants::{
    EXP_HI, EXP_LO, EXP_POLY, LN2_HI, LN2_LO, LOG_C1, LOG_C2, LOG_POLY, LOG2_E, MIN_NORMAL,
    ROUND_SHIFTER, SQRT_HALF, TWO_POW_23,
};

/// `e^x` per lane of an `f32x4`.
///
/// Algorithm: clamp x to [-104, 89] (NaN passes through); n = round(x·log2 e)
/// by the 1.5·2^23 shifter trick (one fma, round-to-nearest-even); r = x − n·ln2
/// by a two-constant Cody–Waite reduction with fmas (the first step is exact);
/// exp(r) by the Cephes degree-7 polynomial 1 + r + r²·P(r), with 1 + r kept
/// exactly as a pair so only the last addition rounds at full size; the
/// result is scaled by 2^n as two multiplications by 2^⌊n/2⌋ and
/// 2^(n−⌊n/2⌋), built from exponent bits, so that overflow gives +inf and the
/// subnormal range is rounded once, correctly. Lanes below −104 are scaled by
/// an exact 0 instead: no underflowing multiply, so −inf/−1e9 inputs (masked
/// softmax) run at full speed; subnormal results (x ∈ [−104, −87.3]) take
/// the CPU's slow subnormal path (~3x slower).
///
/// Specials: exp(+inf) = +inf, exp(−inf) = 0, exp(NaN) = NaN, results above
/// f32::MAX are +inf, below half the smallest subnormal 0, subnormal results
/// are correctly scaled (one rounding).
///
/// Error (all 2^32 inputs, `exhaustive_f32_accuracy` in `tests.rs`): max
/// 0.794 ulp (at x ≈ −5.8586); asserted ≤ 1 ulp.
pub(super) fn exp_f32x4(builder: &mut FunctionBuilder<'_>, x: Value) -> Value {
    let x = clamp_above(builder, x, EXP_HI);
    // Lanes below EXP_LO give exactly 0 through a zero scale factor below
    // (no underflowing multiply: those take a slow microcode assist on x86,
    // and masked softmax feeds exp with -inf or -1e9 all the time).
    let lo = f32s(builder, EXP_LO);
    let below = mask(builder, FloatCC::LessThan, x, lo);
    let x = select(builder, below, lo, x);

    // t = x·log2e + 1.5·2^23, rounded once: its low mantissa bits hold n.
    let log2e = f32s(builder, LOG2_E);
    let shifter = f32s(builder, ROUND_SHIFTER);
    let t = builder.ins().fma(x, log2e, shifter);
    let n_float = builder.ins().fsub(t, shifter);
    let t_bits = to_bits(builder, t);
    let shifter_bits = i32s(builder, ROUND_SHIFTER.to_bits() as i32);
    let n = builder.ins().isub(t_bits, shifter_bits);

    // r = x − n·ln2 (Cody–Waite; fma makes the first step exact).
    let neg_ln2_hi = f32s(builder, -LN2_HI);
    let neg_ln2_lo = f32s(builder, -LN2_LO);
    let r = builder.ins().fma(n_float, neg_ln2_hi, x);
    let r = builder.ins().fma(n_float, neg_ln2_lo, r);

    // exp(r) ≈ 1 + r + r²·P(r), with 1 + r = hi + lo exactly (Fast2Sum,
    // |r| < 1) so that the only large rounding is the final addition.
    let p = horner(builder, r, &EXP_POLY);
    let r2 = builder.ins().fmul(r, r);
    let one = f32s(builder, 1.0);
    let hi = builder.ins().fadd(one, r);
    let lost = builder.ins().fsub(one, hi);
    let lo = builder.ins().fadd(lost, r);
    let tail = builder.ins().fma(p, r2, lo);
    let y = builder.ins().fadd(hi, tail);

    // y · 2^n1 · 2^n2 with n1 = n >> 1, n2 = n − n1 (each in [-75, 65]).
    let n1 = builder.ins().sshr_imm_u(n, 1);
    let n2 = builder.ins().isub(n, n1);
    let s1 = pow2(builder, n1);
    let s2 = pow2(builder, n2);
    let s2 = builder.ins().band_not(s2, below);
    let y = builder.ins().fmul(y, s1);
    builder.ins().fmul(y, s2)
}

/// 2^k as f32x4 for integer lanes k in the normal exponent range [-126, 127].
fn pow2(builder: &mut FunctionBuilder<'_>, k: Value) -> Value {
    let bias = i32s(builder, 127);
    let biased = builder.ins().iadd(k, bias);
    let bits = builder.ins().ishl_imm_u(biased, 23);
    from_bits(builder, bits)
}

/// Natural logarithm per lane of an `f32x4`.
///
/// Algorithm (Cephes `logf`): subnormal inputs are first scaled by 2^23; the
/// exponent e and mantissa m ∈ [0.5, 1) are split off with integer ops on the
/// bits; if m < sqrt(1/2) then m is doubled and e decremented, so that
/// x = 2^e·(1+f) with f ∈ [sqrt(1/2)−1, sqrt(2)−1); log(1+f) ≈ f − f²/2 +
/// f³·P(f) (degree 8 P), and e·ln2 is added in two parts.
///
/// Specials: log(+0) = log(−0) = −inf, log(x<0) = NaN, log(+inf) = +inf,
/// log(NaN) = NaN, subnormal inputs are handled exactly.
///
/// Error (all 2^32 inputs, `exhaustive_f32_accuracy` in `tests.rs`): max
/// 0.827 ulp (at x ≈ 1.4136); asserted ≤ 1 ulp.
pub(super) fn log_f32x4(builder: &mut FunctionBuilder<'_>, x_in: Value) -> Value {
    // Subnormals (and ≤ 0, which are replaced below): x·2^23, e −= 23.
    let min_normal = f32s(builder, MIN_NORMAL);
    let is_sub = mask(builder, FloatCC::LessThan, x_in, min_normal);
    let two23 = f32s(builder, TWO_POW_23);
    let scaled = builder.ins().fmul(x_in, two23);
    let x = select(builder, is_sub, scaled, x_in);
    let is_sub_bits = to_bits(builder, is_sub);
    let k23 = i32s(builder, 23);
    let sub_adjust = builder.ins().band(is_sub_bits, k23);

    // x = 2^e · m with m ∈ [0.5, 1).
    let bits = to_bits(builder, x);
    let exp_field = builder.ins().ushr_imm_u(bits, 23);
    let exp_mask = i32s(builder, 0xff);
    let exp_field = builder.ins().band(exp_field, exp_mask);
    let bias = i32s(builder, 126);
    let e = builder.ins().isub(exp_field, bias);
    let e = builder.ins().isub(e, sub_adjust);
    let mant_mask = i32s(builder, 0x007f_ffff);
    let mant = builder.ins().band(bits, mant_mask);
    let half_bits = i32s(builder, 0.5f32.to_bits() as i32);
    let m_bits = builder.ins().bor(mant, half_bits);
    let m = from_bits(builder, m_bits);
    let e = builder.ins().fcvt_from_sint(types::F32X4, e);

    // if m < sqrt(1/2): e −= 1, f = 2m − 1; else f = m − 1.
    let sqrt_half = f32s(builder, SQRT_HALF);
    let small = mask(builder, FloatCC::LessThan, m, sqrt_half);
    let one = f32s(builder, 1.0);
    let one_if_small = builder.ins().band(small, one);
    let e = builder.ins().fsub(e, one_if_small);
    let m_if_small = builder.ins().band(small, m);
    let f = builder.ins().fsub(m, one);
    let f = builder.ins().fadd(f, m_if_small);

    // log(1+f) + e·ln2.
    let z = builder.ins().fmul(f, f);
    let p = horner(builder, f, &LOG_POLY);
    let p = builder.ins().fmul(p, f);
    let y = builder.ins().fmul(p, z);
    let c1 = f32s(builder, LOG_C1);
    let y = builder.ins().fma(e, c1, y);
    let minus_half = f32s(builder, -0.5);
    let y = builder.ins().fma(z, minus_half, y);
    let r = builder.ins().fadd(f, y);
    let c2 = f32s(builder, LOG_C2);
    let r = builder.ins().fma(e, c2, r);

    // Specials: +inf → +inf; ±0 → −inf; x < 0 or NaN → NaN.
    let inf = f32s(builder, f32::INFINITY);
    let is_inf = mask(builder, FloatCC::Equal, x_in, inf);
    let r = select(builder, is_inf, inf, r);
    let zero = f32s(builder, 0.0);
    let is_zero = mask(builder, FloatCC::Equal, x_in, zero);
    let neg_inf = f32s(builder, f32::NEG_INFINITY);
    let r = select(builder, is_zero, neg_inf, r);
    let invalid = mask(builder, FloatCC::UnorderedOrLessThan, x_in, zero);
    let nan = f32s(builder, f32::NAN);
    select(builder, invalid, nan, r)
}
