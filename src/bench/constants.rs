//! `tessera bench --constants weight`: the benched schedule also compiled
//! with those inputs laid out ahead of time (the packing copies the
//! schedule makes of them removed, the inputs packed once before timing),
//! as a deployed inference kernel would run with constant weights.

use super::error::CliError;
use crate::deploy::{pack_input, rewrite_layouts};
use crate::schedule::State;
use crate::te::{ComputeDag, HostTensor};

/// The rewritten kernel's state and its inputs (the named ones packed), or
/// `None` when no constants are named.
pub(super) fn prepacked(
    dag: &ComputeDag,
    state: &State,
    constants: &[String],
    inputs: &[HostTensor],
) -> Result<Option<(State, Vec<HostTensor>)>, CliError> {
    if constants.is_empty() {
        return Ok(None);
    }
    let names: Vec<&str> = constants.iter().map(String::as_str).collect();
    let usage = |e: crate::deploy::DeployError| CliError::Usage(format!("--constants: {e}"));
    let (new_dag, steps, rewrites) = rewrite_layouts(dag, state.steps(), &names).map_err(usage)?;
    let rewritten = State::replay(&new_dag, &steps)
        .map_err(|e| CliError::Usage(format!("--constants: the rewritten schedule: {e}")))?;
    let packed = dag
        .inputs()
        .iter()
        .zip(inputs)
        .map(
            |(t, tensor)| match rewrites.iter().find(|r| r.input == t.name()) {
                Some(r) => pack_input(tensor, &r.layout).map_err(usage),
                None => Ok(tensor.clone()),
            },
        )
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some((rewritten, packed)))
}
