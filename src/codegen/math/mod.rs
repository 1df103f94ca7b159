//! Math intrinsics ([`Intrinsic`]) emitted as Cranelift IR.
//!
//! | type            | exp, log, tanh, sigmoid, erf          | pow                     | sqrt, abs      |
//! |-----------------|---------------------------------------|-------------------------|----------------|
//! | `f32x4`         | inline, branch-free polynomials       | `powf` call per lane    | native         |
//! | `f32`           | the `f32x4` code on a splat, lane 0   | `powf` call             | native         |
//! | `f64`           | host call (std / `libm`)              | host call               | native         |
//! | `f64x2`, others | per lane, as for the lane type        | per lane                | native         |
//! | integers        | —                                     | —                       | `abs`: `iabs`  |
//!
//! The f32 kernels (the hot path) are in [`exp_log`], [`tanh_sigmoid`] and
//! [`erf`], with their error bounds; scalar f32 runs the very same kernel on a
//! splatted vector, so scalar and vector results are bit-identical. The
//! kernels use `fma`, which is one instruction when the ISA flag `has_fma` is
//! set (as `cranelift_native` sets it on FMA hardware) and a libcall
//! otherwise; the results are the same either way.
//!
//! `pow` on f32 calls the C library's `powf` per lane rather than inlining
//! exp(y·log x): the error of that identity grows with |y·log x| (an error of
//! 1 ulp in log x becomes |y·log x| ulp in the result, e.g. ~60 ulp for
//! results near 2^88), which is not acceptable for a general pow.
//!
//! Host functions are reached through [`Imports`]; register [`host_symbols`]
//! with the JIT (`JITBuilder::symbols`) or the linker.

mod consts;
mod erf;
mod exp_log;
mod host;
mod tanh_sigmoid;

#[cfg(test)]
mod tests;

use cranelift_codegen::ir::{FuncRef, InstBuilder, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

use crate::te::Intrinsic;

/// Imports a host function into the function being built.
pub(crate) trait Imports {
    /// Declares `symbol` in the module with `Linkage::Import` and the
    /// signature `(params) -> ret` in the ISA's default calling convention,
    /// and returns a [`FuncRef`] usable in `builder.ins().call`. Called at
    /// most once per emitted call; caching the reference per function is up
    /// to the implementor.
    fn import(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        symbol: &'static str,
        params: &[Type],
        ret: Type,
    ) -> FuncRef;
}

/// Emits `f(args)` and returns its value, of the type of `args[0]`.
///
/// Accepted types: `F32`, `F64`, `F32X4`, `F64X2` (any vector of f32/f64
/// lanes works, lanes other than `f32x4` being handled one by one), and for
/// [`Intrinsic::Abs`] also any integer scalar or vector type. `Pow` takes two
/// arguments of the same type. `imports` is used only for the host calls:
/// f64 exp/log/tanh/sigmoid/erf/pow and f32 pow (see [`host_symbols`]).
///
/// # Panics
/// If `args.len()` is not `f.arity()`, or the type is not one of the above
/// (the tensor-expression type checker rules these out).
pub(crate) fn emit_intrinsic(
    builder: &mut FunctionBuilder<'_>,
    imports: &mut dyn Imports,
    f: Intrinsic,
    args: &[Value],
) -> Value {
    assert_eq!(
        args.len(),
        f.arity(),
        "intrinsic {} takes {} argument(s)",
        f.name(),
        f.arity()
    );
    let x = args[0];
    let ty = builder.func.dfg.value_type(x);
    let lane = ty.lane_type();
    match f {
        Intrinsic::Abs if lane.is_int() => return builder.ins().iabs(x),
        Intrinsic::Abs if lane.is_float() => return builder.ins().fabs(x),
        Intrinsic::Sqrt if lane.is_float() => return builder.ins().sqrt(x),
        _ => {}
    }
    assert!(
        lane == types::F32 || lane == types::F64,
        "intrinsic {} is not defined on {ty}",
        f.name()
    );
    if lane == types::F32
        && let Some(kernel) = f32x4_kernel(f)
    {
        if ty == types::F32X4 {
            return kernel(builder, x);
        }
        if ty == types::F32 {
            let splat = builder.ins().splat(types::F32X4, x);
            let v = kernel(builder, splat);
            return builder.ins().extractlane(v, 0);
        }
    }
    if ty.is_vector() {
        return host::per_lane(builder, args, |b, lane_args| {
            emit_intrinsic(b, imports, f, lane_args)
        });
    }
    match host::symbol_for(f, ty) {
        Some(symbol) => host::emit_call(builder, imports, symbol, ty, args),
        None => panic!("intrinsic {} has no implementation for {ty}", f.name()),
    }
}

/// An inline f32x4 kernel: emits `f(x)` for an `f32x4` value `x`.
type Kernel = fn(&mut FunctionBuilder<'_>, Value) -> Value;

/// The inline f32x4 kernel for `f`, or `None` where `f` is a host call (pow)
/// or a native instruction (sqrt, abs).
fn f32x4_kernel(f: Intrinsic) -> Option<Kernel> {
    match f {
        Intrinsic::Exp => Some(exp_log::exp_f32x4),
        Intrinsic::Log => Some(exp_log::log_f32x4),
        Intrinsic::Tanh => Some(tanh_sigmoid::tanh_f32x4),
        Intrinsic::Sigmoid => Some(tanh_sigmoid::sigmoid_f32x4),
        Intrinsic::Erf => Some(erf::erf_f32x4),
        Intrinsic::Sqrt | Intrinsic::Abs | Intrinsic::Pow => None,
    }
}

/// The host functions the emitted code may call, as (symbol, address) pairs
/// to register with `JITBuilder::symbol` (or to resolve when linking an
/// object file): `tessera_{exp,log,tanh,sigmoid,erf,pow}_f64` and
/// `tessera_pow_f32`, all `extern "C"`.
pub(crate) fn host_symbols() -> Vec<(&'static str, *const u8)> {
    host::symbols()
}
