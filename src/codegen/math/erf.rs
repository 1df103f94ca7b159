//! The error function on `f32x4`, inline and branch-free.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::consts::{abs, f32s, horner, mask, select, with_sign_of};

/// erfinv(1 − 2^-23): from here on erf(x) rounds to ±1 in f32.
const ERF_SATURATION: f32 = 3.832_506_856_900_711;
/// Odd numerator: erf(x) ≈ x·P(x²)/Q(x²); coefficients of P, highest first.
const ERF_P: [f32; 5] = [
    2.290_506_586_135_064_6e-4,
    3.408_291_010_710_950_6e-3,
    5.095_569_506_238_086_1e-2,
    1.852_083_223_997_614_5e-1,
    1.128_379_143_519_084,
];
/// Even denominator Q, highest degree first.
const ERF_Q: [f32; 7] = [
    -1.179_160_295_436_169_7e-7,
    2.354_796_647_131_318_5e-5,
    1.017_962_527_891_488_5e-3,
    1.407_047_017_116_766_7e-2,
    1.109_850_517_828_536_2e-1,
    4.974_692_511_006_753_8e-1,
    1.0,
];

/// The error function per lane of an `f32x4`.
///
/// Algorithm (the rational approximation used by Eigen and XLA for f32):
/// erf(x) ≈ x·P(x²)/Q(x²) with P of degree 4 and Q of degree 6 in x², for
/// |x| < 3.8325 (= erfinv(1 − 2^-23)); at and beyond it the result is ±1.
///
/// Specials: erf(±inf) = ±1, erf(NaN) = NaN, erf(±0) = ±0, subnormal x →
/// 2x/√π correctly rounded up to the subnormal spacing.
///
/// Error (measured over all 2^32 inputs, see `tests.rs`): at most 3 ulp.
pub(super) fn erf_f32x4(builder: &mut FunctionBuilder<'_>, x: Value) -> Value {
    let x2 = builder.ins().fmul(x, x);
    let p = horner(builder, x2, &ERF_P);
    let p = builder.ins().fmul(x, p);
    let q = horner(builder, x2, &ERF_Q);
    let r = builder.ins().fdiv(p, q);

    let a = abs(builder, x);
    let limit = f32s(builder, ERF_SATURATION);
    let saturated = mask(builder, FloatCC::LessThanOrEqual, limit, a);
    let one = f32s(builder, 1.0);
    let signed_one = with_sign_of(builder, one, x);
    select(builder, saturated, signed_one, r)
}
