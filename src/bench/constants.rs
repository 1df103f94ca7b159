//! The benched schedule with some inputs taken as constants (`--constants
//! weight`): compiled with them laid out ahead of time (the packing copies
//! the schedule makes of them removed, the inputs packed once before
//! timing), as a deployed inference kernel runs with constant weights.

use crate::deploy::{pack_input, rewrite_layouts};
use crate::schedule::State;
use crate::te::{ComputeDag, HostTensor};

use super::error::BenchError;

/// The rewritten kernel's state and its inputs (the named ones packed), or
/// `None` when no constants are named.
pub(super) fn prepacked(
    dag: &ComputeDag,
    state: &State,
    constants: &[String],
    inputs: &[HostTensor],
) -> Result<Option<(State, Vec<HostTensor>)>, BenchError> {
    if constants.is_empty() {
        return Ok(None);
    }
    let names: Vec<&str> = constants.iter().map(String::as_str).collect();
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
