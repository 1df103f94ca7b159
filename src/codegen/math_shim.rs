//! Temporary stand-in for `math` while it is being written: every intrinsic
//! is a call to an `f64` host function (sqrt and abs are native).

use cranelift_codegen::ir::{FuncRef, InstBuilder, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

use crate::te::Intrinsic;

/// Imports a host function into the function being built.
pub(crate) trait Imports {
    fn import(
        &mut self,
        builder: &mut FunctionBuilder,
        symbol: &'static str,
        params: &[Type],
        ret: Type,
    ) -> FuncRef;
}

extern "C" fn exp64(x: f64) -> f64 {
    x.exp()
}
extern "C" fn log64(x: f64) -> f64 {
    x.ln()
}
extern "C" fn tanh64(x: f64) -> f64 {
    x.tanh()
}
extern "C" fn sigmoid64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
extern "C" fn erf64(x: f64) -> f64 {
    libm::erf(x)
}
extern "C" fn pow64(x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// The host functions the emitted code may call.
pub(crate) fn host_symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        ("shim_exp", exp64 as *const u8),
        ("shim_log", log64 as *const u8),
        ("shim_tanh", tanh64 as *const u8),
        ("shim_sigmoid", sigmoid64 as *const u8),
        ("shim_erf", erf64 as *const u8),
        ("shim_pow", pow64 as *const u8),
    ]
}

/// Emits `f(args)` for scalar `f32`/`f64` (and integer abs).
pub(crate) fn emit_intrinsic(
    b: &mut FunctionBuilder,
    imports: &mut dyn Imports,
    f: Intrinsic,
    args: &[Value],
) -> Value {
    let ty = b.func.dfg.value_type(args[0]);
    match f {
        Intrinsic::Abs if ty.is_int() => return b.ins().iabs(args[0]),
        Intrinsic::Abs => return b.ins().fabs(args[0]),
        Intrinsic::Sqrt => return b.ins().sqrt(args[0]),
        _ => {}
    }
    let wide: Vec<Value> = args
        .iter()
        .map(|&a| {
            if ty == types::F32 {
                b.ins().fpromote(types::F64, a)
            } else {
                a
            }
        })
        .collect();
    let symbol = match f {
        Intrinsic::Exp => "shim_exp",
        Intrinsic::Log => "shim_log",
        Intrinsic::Tanh => "shim_tanh",
        Intrinsic::Sigmoid => "shim_sigmoid",
        Intrinsic::Erf => "shim_erf",
        _ => "shim_pow",
    };
    let params = vec![types::F64; wide.len()];
    let callee = imports.import(b, symbol, &params, types::F64);
    let call = b.ins().call(callee, &wide);
    let r = b.inst_results(call)[0];
    if ty == types::F32 {
        b.ins().fdemote(types::F32, r)
    } else {
        r
    }
}
