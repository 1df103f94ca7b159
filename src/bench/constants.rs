//! The benched schedule with some inputs taken as constants (`--constants
//! weight`): compiled with them laid out ahead of time (the packing copies
//! the schedule makes of them removed, the inputs packed once before
//! timing), as a deployed inference kernel runs with constant weights. A
//! constant the schedule reads where it is has nothing to lay out: as
//! `Library::kernel_with_constants`, it stays as it is.

use crate::deploy::{check_inputs, pack_input, rewrite_layouts};
use crate::schedule::State;
use crate::schedule::Step;
use crate::te::{ComputeDag, HostTensor};

use super::error::BenchError;

/// The rewritten kernel's state and its inputs (the named ones packed), or
/// `None` when no constant named can be laid out ahead (none named, or the
/// schedule reads each where it is: the deployed kernel is the plain one).
pub(super) fn prepacked(
    dag: &ComputeDag,
    state: &State,
    constants: &[String],
    inputs: &[HostTensor],
) -> Result<Option<(State, Vec<HostTensor>)>, BenchError> {
    if constants.is_empty() {
        return Ok(None);
    }
    let asked: Vec<&str> = constants.iter().map(String::as_str).collect();
    check_inputs(dag, &asked).map_err(BenchError::Constants)?;
    // Those the schedule copies; a copy that cannot be made ahead is an error.
    let copied = |name: &&str| {
        state
            .steps()
            .iter()
            .any(|s| matches!(s, Step::CacheRead { stage, .. } if stage == name))
    };
    let names: Vec<&str> = asked.iter().copied().filter(copied).collect();
    if names.is_empty() {
        return Ok(None);
    }
    let (new_dag, steps, rewrites) =
        rewrite_layouts(dag, state.steps(), &names).map_err(BenchError::Constants)?;
    let rewritten = State::replay(&new_dag, &steps).map_err(BenchError::RewrittenSchedule)?;
    let packed = dag
        .inputs()
        .iter()
        .zip(inputs)
        .map(
            |(t, tensor)| match rewrites.iter().find(|r| r.input == t.name()) {
                Some(r) => pack_input(tensor, &r.layout).map_err(BenchError::Constants),
                None => Ok(tensor.clone()),
            },
        )
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some((rewritten, packed)))
}
