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
use super::verify::WrongAnswer;

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
/// compiled for `target`; with `wrong_answer` (a [`WrongAnswer::Prepacked`],
/// a test hook) the kernel's first output element is moved before the
/// check. `Err` is one line saying what failed.
pub(super) fn verify_prepacked(
    task: &Task,
    steps: &[Step],
    rewrites: &[LayoutRewrite],
    target: &Target,
    wrong_answer: Option<WrongAnswer>,
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
    let mut outputs = kernel
        .run_host(&packed)
        .map_err(|e| format!("running it failed: {e}"))?;
    if let Some(WrongAnswer::Prepacked { relative_error }) = wrong_answer {
        move_first_element(&mut outputs, relative_error)?;
    }
    match reference.check(task, &bytes_of(&outputs)?) {
        Verdict::Match(_) => Ok(()),
        Verdict::Mismatch(_, why) => Err(format!("wrong result: {why}")),
    }
}

/// Moves the first element `x` of the first output to
/// `x + relative_error · max(1, |x|)` (the [`WrongAnswer::Prepacked`] hook).
fn move_first_element(outputs: &mut [HostTensor], relative_error: f64) -> Result<(), String> {
    let Some(first) = outputs
        .first_mut()
        .and_then(HostTensor::as_f32_mut)
        .and_then(<[f32]>::first_mut)
    else {
        return Err("the injected wrong answer needs a first output of f32 elements".into());
    };
    let x = f64::from(*first);
    *first = (x + relative_error * x.abs().max(1.0)) as f32;
    Ok(())
}
