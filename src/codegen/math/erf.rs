//! The error function on `f32x4`, inline and branch-free.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::consts::{abs, clamp_above, f32s, horner, mask, select, with_sign_of};
use super::exp_log::exp_f32x4;
use crate::runtime::row_math::constants::{
    ERF_CLAMP, ERF_LARGE_A, ERF_LARGE_B, ERF_LARGE_C, ERF_SMALL, ERF_SPLIT,
};

/// The error function per lane of an `f32x4`.
///
/// Algorithm (Norbert Juffa's faithfully rounded `erff`, as also used by MLX
/// and PyTorch's Metal backend), both branches computed and blended: for
/// |x| ≤ 475/512, erf(x) = x + x·P(x²) (degree 5 in x²); above, with t = |x|
/// clamped to 4, erf(x) = ±(1 − exp(R(t))), R a degree-8 polynomial
/// (R(t) ≈ −t² − 0.13t − …), exp being [`exp_f32x4`].
///
/// Specials: erf(±inf) = ±1, erf(NaN) = NaN, erf(±0) = ±0, subnormal x →
/// 2x/√π.
///
/// Error (all 2^32 inputs, `exhaustive_f32_accuracy` in `tests.rs`): max
/// 0.995 ulp (at x ≈ 1.0609); asserted ≤ 1 ulp.
/// (The cheaper Eigen/XLA rational approximation x·P(x²)/Q(x²) measured
/// 5.1 ulp near |x| = 3.8 against an exact reference, hence this one.)
pub(super) fn erf_f32x4(builder: &mut FunctionBuilder<'_>, x: Value) -> Value {
    // |x| ≤ 475/512: x + x·P(x²).
    let s = builder.ins().fmul(x, x);
    let p = horner(builder, s, &ERF_SMALL);
    let small = builder.ins().fma(p, x, x);

    // |x| > 475/512: 1 − exp(R(t)), sign of x.
    let t = abs(builder, x);
    let t = clamp_above(builder, t, ERF_CLAMP);
    let ts = builder.ins().fmul(t, t);
    let a = horner(builder, t, &ERF_LARGE_A);
    let b = horner(builder, t, &ERF_LARGE_B);
    let mut r = builder.ins().fma(a, ts, b);
    for c in ERF_LARGE_C {
        let c = f32s(builder, c);
        r = builder.ins().fma(r, t, c);
    }
    let neg_t = builder.ins().fneg(t);
    let r = builder.ins().fma(r, t, neg_t);
    let e = exp_f32x4(builder, r);
    let one = f32s(builder, 1.0);
    let large = builder.ins().fsub(one, e);
    let large = with_sign_of(builder, large, x);

    let split = f32s(builder, ERF_SPLIT);
    let is_large = mask(builder, FloatCC::LessThan, split, t);
    select(builder, is_large, large, small)
}
