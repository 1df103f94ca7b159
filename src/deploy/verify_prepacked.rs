//! `tessera deploy --verify` for an artifact with layout rewrites: the
//! kernel with those inputs laid out ahead of time, compiled, run on the
//! packed inputs and checked against the reference like the plain one.

use crate::codegen::{self, CodegenOptions, Kernel};
use crate::measure::{INTERPRETER_FLOP_LIMIT, Reference, Task, Verdict};
use crate::runtime::{NdBuffer, Target};
use crate::schedule::{State, Step};
use crate::te::HostTensor;

use super::layout_rewrite::{LayoutRewrite, rewrite_layouts};
use super::permute::pack_input;

/// Lowers and compiles `state` for `target`.
fn compile(state: &State, target: &Target) -> Result<Kernel, String> {
    let func = crate::tir::lower(state).map_err(|e| format!("lowering failed: {e}"))?;
    codegen::compile(&func, &CodegenOptions::for_target(*target))
        .map_err(|e| format!("compiling failed: {e}"))
}

/// The raw bytes of `outputs`, as a measurement worker returns them.
fn bytes_of(outputs: &[HostTensor]) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    for output in outputs {
        let buffer = NdBuffer::from_host(output).map_err(|e| e.to_string())?;
        bytes.extend_from_slice(buffer.as_bytes());
    }
    Ok(bytes)
}

/// Checks the kernel of `steps` with `rewrites` applied against the
/// reference of `task` (the interpreter for small tasks; else the plain
/// kernel, checked at sampled points against the interpreter), both
/// compiled for `target`. `Err` is one line saying what failed.
pub(super) fn verify_prepacked(
    task: &Task,
    steps: &[Step],
    rewrites: &[LayoutRewrite],
    target: &Target,
) -> Result<(), String> {
    let names: Vec<&str> = rewrites.iter().map(|r| r.input.as_str()).collect();
    let (dag, new_steps, planned) =
        rewrite_layouts(task.dag(), steps, &names).map_err(|e| e.to_string())?;
    if planned != rewrites {
        return Err(format!(
            "the artifact lists layout rewrites {rewrites:?}, its schedule allows {planned:?}"
        ));
    }
    let state = State::replay(&dag, &new_steps).map_err(|e| e.to_string())?;
    let kernel = compile(&state, target)?;
    let inputs = task.inputs();
    let reference = if task.dag().flop_count() <= INTERPRETER_FLOP_LIMIT {
        Reference::from_interpreter(task)
    } else {
        let plain = State::replay(task.dag(), steps).map_err(|e| e.to_string())?;
        let outputs = compile(&plain, target)?
            .run_host(&inputs)
            .map_err(|e| format!("the plain kernel failed: {e}"))?;
        Reference::from_checked_kernel(task, &bytes_of(&outputs)?)
    }
    .map_err(|e| format!("no reference: {e}"))?;
    let packed = inputs
        .iter()
        .zip(task.dag().inputs())
        .map(
            |(tensor, input)| match rewrites.iter().find(|r| r.input == input.name()) {
                Some(r) => pack_input(tensor, &r.layout).map_err(|e| e.to_string()),
                None => Ok(tensor.clone()),
            },
        )
        .collect::<Result<Vec<_>, String>>()?;
    let outputs = kernel
        .run_host(&packed)
        .map_err(|e| format!("running it failed: {e}"))?;
    match reference.check(task, &bytes_of(&outputs)?) {
        Verdict::Match(_) => Ok(()),
        Verdict::Mismatch(_, why) => Err(format!("wrong result: {why}")),
    }
}
