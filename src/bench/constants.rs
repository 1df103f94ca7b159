//! The benched schedule with some inputs taken as constants (`--constants
//! weight`): compiled with them laid out ahead of time (the packing copies
//! the schedule makes of them removed, the inputs packed once before
//! timing), as a deployed inference kernel runs with constant weights. A
//! constant the schedule reads where it is has nothing to lay out: as
//! `Library::kernel_with_constants`, it stays as it is.

use crate::codegen::{CodegenOptions, Kernel};
use crate::deploy::{check_inputs, compile_with_constants, pack_inputs};
use crate::schedule::State;
use crate::te::{ComputeDag, HostTensor};

use super::error::BenchError;

/// The kernel with the named constants laid out ahead of time and its
/// inputs (those packed), or `None` when none named can be (none named,
/// or the schedule reads each where it is: the deployed kernel is the
/// plain one).
pub(super) fn prepacked(
    dag: &ComputeDag,
    state: &State,
    constants: &[String],
    inputs: &[HostTensor],
    options: &CodegenOptions,
) -> Result<Option<(Kernel, Vec<HostTensor>)>, BenchError> {
    if constants.is_empty() {
        return Ok(None);
    }
    let asked: Vec<&str> = constants.iter().map(String::as_str).collect();
    check_inputs(dag, &asked).map_err(BenchError::Constants)?;
    let compiled = compile_with_constants(dag, state.steps(), &asked, options)
        .map_err(BenchError::Constants)?;
    if compiled.packers.is_empty() {
        return Ok(None);
    }
    let names: Vec<String> = dag.inputs().iter().map(|t| t.name().to_string()).collect();
    let packed = pack_inputs(&compiled.packers, &names, inputs).map_err(BenchError::Constants)?;
    Ok(Some((compiled.kernel, packed)))
}
