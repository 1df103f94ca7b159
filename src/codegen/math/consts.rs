//! Building blocks for the inline f32x4 kernels: splatted constants, bit
//! casts, lane masks, branch-free selects and fused polynomial evaluation.
//!
//! Every helper works on `f32x4` (or its integer twin `i32x4`) values. Scalar
//! `f32` intrinsics reuse the same kernels on a splatted vector, so the two
//! paths give bit-identical results.

use crate::runtime::row_math::constants::SIGN_BIT;
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{ConstantData, InstBuilder, MemFlagsData, Value, types};
use cranelift_frontend::FunctionBuilder;

/// A 16-byte constant with `lane` repeated four times, as a `vconst` of type
/// `ty` (on x86 a load from the function's constant pool).
fn splat_bits(builder: &mut FunctionBuilder<'_>, ty: types::Type, lane: u32) -> Value {
    let bytes: Vec<u8> = (0..4).flat_map(|_| lane.to_le_bytes()).collect();
    let handle = builder.func.dfg.constants.insert(ConstantData::from(bytes));
    builder.ins().vconst(ty, handle)
}

/// `c` in all four lanes of an `f32x4`.
pub(super) fn f32s(builder: &mut FunctionBuilder<'_>, c: f32) -> Value {
    splat_bits(builder, types::F32X4, c.to_bits())
}

/// The bit pattern `bits` in all four lanes of an `f32x4` (for masks).
pub(super) fn f32_bits(builder: &mut FunctionBuilder<'_>, bits: u32) -> Value {
    splat_bits(builder, types::F32X4, bits)
}

/// `c` in all four lanes of an `i32x4`.
pub(super) fn i32s(builder: &mut FunctionBuilder<'_>, c: i32) -> Value {
    splat_bits(builder, types::I32X4, u32::from_ne_bytes(c.to_ne_bytes()))
}

/// Reinterprets an `f32x4` as `i32x4` (no code).
pub(super) fn to_bits(builder: &mut FunctionBuilder<'_>, v: Value) -> Value {
    builder.ins().bitcast(types::I32X4, MemFlagsData::new(), v)
}

/// Reinterprets an `i32x4` as `f32x4` (no code).
pub(super) fn from_bits(builder: &mut FunctionBuilder<'_>, v: Value) -> Value {
    builder.ins().bitcast(types::F32X4, MemFlagsData::new(), v)
}

/// The lane mask of `a <cc> b` as an `f32x4` (all ones where it holds), the
/// form `bitselect` takes (its operands all have one type); x86 lowers a
/// `bitselect` on such a mask to a single blend instruction.
pub(super) fn mask(builder: &mut FunctionBuilder<'_>, cc: FloatCC, a: Value, b: Value) -> Value {
    let m = builder.ins().fcmp(cc, a, b);
    from_bits(builder, m)
}

/// Per lane `mask ? if_true : if_false`, branch-free.
pub(super) fn select(
    builder: &mut FunctionBuilder<'_>,
    mask: Value,
    if_true: Value,
    if_false: Value,
) -> Value {
    builder.ins().bitselect(mask, if_true, if_false)
}

/// Per lane `hi < x ? hi : x`: clamps `x` from above and keeps NaN lanes NaN.
/// Written in the exact shape that x86 lowers to a single `minps hi, x`.
pub(super) fn clamp_above(builder: &mut FunctionBuilder<'_>, x: Value, hi: f32) -> Value {
    let hi = f32s(builder, hi);
    let m = mask(builder, FloatCC::LessThan, hi, x);
    select(builder, m, hi, x)
}

/// `|x|` (clears the sign bits).
pub(super) fn abs(builder: &mut FunctionBuilder<'_>, x: Value) -> Value {
    builder.ins().fabs(x)
}

/// `magnitude` with the sign of `sign`, for a `magnitude` whose sign bits
/// are clear (x86 has no vector `fcopysign` lowering, so this is `and` + `or`).
pub(super) fn with_sign_of(
    builder: &mut FunctionBuilder<'_>,
    magnitude: Value,
    sign: Value,
) -> Value {
    let sign_mask = f32_bits(builder, SIGN_BIT);
    let s = builder.ins().band(sign, sign_mask);
    builder.ins().bor(magnitude, s)
}

/// Horner evaluation `((c[0]·x + c[1])·x + c[2])·x + …` with fused
/// multiply-adds; `coeffs` runs from the highest degree down and is non-empty.
pub(super) fn horner(builder: &mut FunctionBuilder<'_>, x: Value, coeffs: &[f32]) -> Value {
    let (&first, rest) = match coeffs.split_first() {
        Some(split) => split,
        None => return f32s(builder, 0.0),
    };
    let mut acc = f32s(builder, first);
    for &c in rest {
        let c = f32s(builder, c);
        acc = builder.ins().fma(acc, x, c);
    }
    acc
}
