//! `tanh` and `sigmoid` on `f32x4`, inline and branch-free, built on
//! [`exp_f32x4`](super::exp_log::exp_f32x4).

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::consts::{abs, f32s, horner, mask, select, with_sign_of};
use super::exp_log::exp_f32x4;
use crate::runtime::row_math::constants::{TANH_POLY, TANH_SMALL};

/// Hyperbolic tangent per lane of an `f32x4`.
///
/// Algorithm (Cephes `tanhf`): on a = |x|, for a < 0.625 the odd polynomial
/// a + a³·P(a²) (degree 4 in a²); otherwise 1 − 2/(exp(2a) + 1), which
/// saturates to exactly 1 once exp(2a) is large (and +inf for a > 44.5 gives
/// 2/inf = 0); the sign of x is put back last, so tanh(−0) = −0 and
/// tanh(−x) = −tanh(x) exactly. Both branches are computed and blended.
///
/// Specials: tanh(±inf) = ±1, tanh(NaN) = NaN, subnormal x → x.
///
/// Error (all 2^32 inputs, `exhaustive_f32_accuracy` in `tests.rs`): max
/// 1.349 ulp (at |x| ≈ 0.6254, just into the exp formula); asserted ≤ 1.5 ulp.
pub(super) fn tanh_f32x4(builder: &mut FunctionBuilder<'_>, x: Value) -> Value {
    let a = abs(builder, x);

    // Small: a + a·(a²·P(a²)).
    let z = builder.ins().fmul(a, a);
    let p = horner(builder, z, &TANH_POLY);
    let pz = builder.ins().fmul(p, z);
    let small = builder.ins().fma(pz, a, a);

    // Large: 1 − 2/(exp(2a) + 1).
    let two_a = builder.ins().fadd(a, a);
    let e = exp_f32x4(builder, two_a);
    let one = f32s(builder, 1.0);
    let two = f32s(builder, 2.0);
    let d = builder.ins().fadd(e, one);
    let q = builder.ins().fdiv(two, d);
    let large = builder.ins().fsub(one, q);

    let limit = f32s(builder, TANH_SMALL);
    let is_small = mask(builder, FloatCC::LessThan, a, limit);
    let magnitude = select(builder, is_small, small, large);
    with_sign_of(builder, magnitude, x)
}

/// Logistic sigmoid 1/(1 + e^−x) per lane of an `f32x4`.
///
/// Algorithm: e = exp(−|x|) ∈ [0, 1] never overflows; the result is
/// 1/(1 + e) for x ≥ 0 and e/(1 + e) = e^x/(1 + e^x) for x < 0 (one division
/// with a selected numerator), so both tails are accurate: sigmoid(x) → 1 for
/// large x, and for very negative x it follows e^x down through the
/// subnormals to 0 (rather than 1/inf).
///
/// Specials: sigmoid(+inf) = 1, sigmoid(−inf) = 0, sigmoid(NaN) = NaN,
/// sigmoid(±0) = 0.5.
///
/// Error (all 2^32 inputs, `exhaustive_f32_accuracy` in `tests.rs`): max
/// 2.402 ulp (at x ≈ −4.157: for x < 0 the error of e^−|x| carries over
/// nearly in full, plus the roundings of 1 + e and the division); asserted
/// ≤ 2.5 ulp. (Correcting the rounding of 1 + e brings it to 1.97 ulp at
/// ~15% more time; not worth it for an activation function.)
pub(super) fn sigmoid_f32x4(builder: &mut FunctionBuilder<'_>, x: Value) -> Value {
    let a = abs(builder, x);
    let neg_a = builder.ins().fneg(a);
    let e = exp_f32x4(builder, neg_a);
    let one = f32s(builder, 1.0);
    let d = builder.ins().fadd(one, e);
    let zero = f32s(builder, 0.0);
    let negative = mask(builder, FloatCC::LessThan, x, zero);
    let numerator = select(builder, negative, e, one);
    builder.ins().fdiv(numerator, d)
}
