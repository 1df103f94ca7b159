//! `tessera deploy --verify` for an artifact with layout rewrites: the
//! kernel with those inputs laid out ahead of time (their packing copies
//! hoisted into packers), compiled, run on the packed inputs and checked
//! against the reference like the plain one.

use crate::codegen::{self, CodegenOptions, Kernel};
use crate::measure::{INTERPRETER_FLOP_LIMIT, Reference, Task, Verdict};
use crate::runtime::{NdBuffer, Target};
use crate::schedule::{State, Step};
use crate::te::HostTensor;

use super::constant_inputs::{compile_with_constants, pack_inputs};
use super::layout_rewrite::{LayoutRewrite, plan_layout_rewrites};
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
    let planned: Vec<LayoutRewrite> = plan_layout_rewrites(task.dag(), steps)
        .into_iter()
        .filter(|p| names.contains(&p.input.as_str()))
        .collect();
    if planned != rewrites {
        return Err(format!(
            "the artifact lists layout rewrites {rewrites:?}, its schedule allows {planned:?}"
        ));
    }
    let options = CodegenOptions::for_target(*target);
    let compiled =
        compile_with_constants(task.dag(), steps, &names, &options).map_err(|e| e.to_string())?;
    if let Some((input, reason)) = compiled.not_laid_out.first() {
        return Err(format!(
            "the artifact lists '{input}' in its layout_rewrites, but it cannot be laid out ahead of time: {reason}"
        ));
    }
    let kernel = compiled.kernel;
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
    let input_names: Vec<String> = task
        .dag()
        .inputs()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    let packed =
        pack_inputs(&compiled.packers, &input_names, &inputs).map_err(|e| e.to_string())?;
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
