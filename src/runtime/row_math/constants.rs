//! The constants of the f32 transcendental kernels, shared by the inline
//! f32x4 Cranelift kernels (`codegen::math`) and the `std::arch` row
//! primitives ([`super`]): one definition, so the two compute bit-identical
//! results.

/// Bit pattern of the sign of an `f32`.
pub const SIGN_BIT: u32 = 0x8000_0000;

/// exp: inputs above this overflow to +inf (ln(f32::MAX) ≈ 88.7228).
pub const EXP_HI: f32 = 89.0;
/// exp: inputs below this underflow to 0 (exp(-104) < half the smallest subnormal).
pub const EXP_LO: f32 = -104.0;
/// log2(e).
pub const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// ln 2 rounded to f32 ...
pub const LN2_HI: f32 = std::f32::consts::LN_2;
/// ... and the rest of ln 2.
pub const LN2_LO: f32 = (std::f64::consts::LN_2 - LN2_HI as f64) as f32;
/// 1.5·2^23: adding it rounds a float of magnitude < 2^22 to an integer that
/// then sits in the low mantissa bits.
pub const ROUND_SHIFTER: f32 = 12_582_912.0;
/// Cephes `expf` polynomial: exp(r) ≈ 1 + r + r²·P(r) on |r| ≤ ln2/2.
pub const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_6e-1,
    0.5,
];

/// log: the smallest normal f32 (2^-126).
pub const MIN_NORMAL: f32 = f32::MIN_POSITIVE;
/// log: 2^23, scales a subnormal into the normal range.
pub const TWO_POW_23: f32 = 8_388_608.0;
/// log: sqrt(1/2); the mantissa m is kept in [sqrt(1/2), sqrt(2)).
pub const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// Cephes `logf` polynomial: log(1+m) ≈ m − m²/2 + m³·P(m).
pub const LOG_POLY: [f32; 9] = [
    7.037_683_6e-2,
    -1.151_461e-1,
    1.167_699_84e-1,
    -1.242_014_1e-1,
    1.424_932_3e-1,
    -1.666_805_7e-1,
    2.000_071_4e-1,
    -2.499_999_4e-1,
    3.333_333e-1,
];
/// ln 2 = LOG_C2 + LOG_C1 (LOG_C2 has few bits so e·LOG_C2 is exact).
pub const LOG_C1: f32 = -2.121_944_4e-4;
/// See [`LOG_C1`].
pub const LOG_C2: f32 = 0.693_359_4; // 355/512 exactly

/// tanh: below this |x| the odd polynomial, above the exp formula.
pub const TANH_SMALL: f32 = 0.625;
/// Cephes `tanhf` polynomial: tanh(x) ≈ x + x³·P(x²) on |x| < 0.625.
pub const TANH_POLY: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_908_8e-2,
    -5.373_971_5e-2,
    1.333_144_2e-1,
    -3.333_328e-1,
];

/// erf: at or below this |x| the odd polynomial is used, above it 1 − exp(…).
pub const ERF_SPLIT: f32 = 0.927_734_4; // 475/512
/// erf: beyond this |x| erf rounds to ±1; clamping there keeps exp's
/// argument above −20, away from the (slow) subnormal range.
pub const ERF_CLAMP: f32 = 4.0;
/// erf, small |x|: erf(x) ≈ x + x·s·P(s), s = x², coefficients highest first.
pub const ERF_SMALL: [f32; 6] = [
    -5.967_617e-4,
    4.991_194_2e-3,
    -2.676_813_5e-2,
    1.128_199_25e-1,
    -3.761_253_4e-1,
    1.283_791_7e-1,
];
/// erf, large |x| = t: erf(t) = 1 − exp(R(t)), R of degree 8 with R(t) ≈ −t² …;
/// evaluated as ((A(t)·s + B(t))·t + C3)·t + C2)·t + C1)·t − t.
pub const ERF_LARGE_A: [f32; 2] = [-1.728_534_7e-5, 3.831_971_3e-4];
/// See [`ERF_LARGE_A`].
pub const ERF_LARGE_B: [f32; 2] = [-3.883_964_4e-3, 2.425_462_2e-2];
/// See [`ERF_LARGE_A`].
pub const ERF_LARGE_C: [f32; 3] = [-1.067_778_8e-1, -6.348_467e-1, -1.287_175_1e-1];
