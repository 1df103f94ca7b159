//! Float `min` / `max` with the reference's semantics (Rust's `f32::max`:
//! a NaN operand gives the other one), as a compare and a select.
//! Cranelift's `fmin`/`fmax` propagate NaN and order ±0, which costs eight
//! instructions per vector on x86-64 and disagrees with the reference.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{Endianness, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

/// `max(x, y)` (or `min` when `max` is false) of two floats or two float
/// vectors of the same type: `x` where it is greater (smaller) or `y` is
/// NaN, else `y`.
pub(super) fn float_min_max(
    builder: &mut FunctionBuilder<'_>,
    max: bool,
    x: Value,
    y: Value,
) -> Value {
    let cc = if max {
        FloatCC::GreaterThan
    } else {
        FloatCC::LessThan
    };
    let wins = builder.ins().fcmp(cc, x, y);
    let y_is_nan = builder.ins().fcmp(FloatCC::Unordered, y, y);
    let pick_x = builder.ins().bor(wins, y_is_nan);
    let ty = builder.func.dfg.value_type(x);
    if ty.is_vector() {
        let flags = MemFlagsData::new().with_endianness(Endianness::Little);
        let mask = builder.ins().bitcast(ty, flags, pick_x);
        builder.ins().bitselect(mask, x, y)
    } else {
        builder.ins().select(pick_x, x, y)
    }
}
