//! Which inputs a schedule lets be laid out ahead of time (as Ansor and
//! MetaSchedule do for inference): those it reads only through one
//! `cache_read` copy (a packing, often transposing). When such an input is a
//! constant weight, the copy can be made once, at load, for every panel the
//! kernel will read (see [`compile_with_constants`](super::compile_with_constants));
//! an artifact lists them in its `layout_rewrites`.

use serde::{Deserialize, Serialize};

use crate::schedule::{State, Step};
use crate::te::ComputeDag;

use super::error::DeployError;

/// One input a schedule lets be laid out ahead of time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutRewrite {
    /// The input (placeholder) name.
    pub input: String,
    /// The copy's permutation: dimension `d` of each panel is dimension
    /// `layout[d]` of the input (the panels are laid out in the order the
    /// kernel's loops visit them).
    pub layout: Vec<usize>,
}

/// The one copy an input is read through.
struct Copy {
    /// The copy stage's name.
    stage: String,
    layout: Vec<usize>,
}

/// Per input of the DAG: its copy, or why it has none that can be removed.
type Analysis = Vec<(String, Result<Copy, String>)>;

/// Whether `step` names `stage` other than as the stage it applies to (as a
/// `compute_at` target or a `cache_read` reader).
fn mentions(step: &Step, stage: &str) -> bool {
    match step {
        Step::ComputeAt { target, .. } => target == stage,
        Step::CacheRead { readers, .. } => readers.iter().any(|r| r == stage),
        Step::PackPanel { reader, .. } => reader == stage,
        _ => false,
    }
}

/// Replays `steps` step by step, noting the copies made of inputs.
fn analyse(dag: &ComputeDag, steps: &[Step]) -> Result<Analysis, DeployError> {
    let num_inputs = dag.inputs().len();
    let mut state = State::new(dag);
    let mut copies: Vec<Vec<Copy>> = (0..num_inputs).map(|_| Vec::new()).collect();
    for step in steps {
        let copied = match step {
            Step::CacheRead { stage, layout, .. } => state.stage_index(stage).and_then(|i| {
                let input = dag.position(&state.stages()[i].tensor)?;
                (input < num_inputs).then(|| (i, input, layout.clone()))
            }),
            _ => None,
        };
        state.apply(step.clone())?;
        // The copy is inserted right after the stage it copies.
        if let Some((at, input, layout)) = copied
            && let Some(copy) = state.stages().get(at + 1)
        {
            let rank = dag.inputs()[input].ndim();
            copies[input].push(Copy {
                stage: copy.name.clone(),
                layout: layout.unwrap_or_else(|| (0..rank).collect()),
            });
        }
    }
    let analysis = copies
        .into_iter()
        .enumerate()
        .map(|(i, mut list)| {
            let name = dag.inputs()[i].name().to_string();
            let verdict = match list.len() {
                0 => {
                    Err("the schedule reads it directly (it makes no cache_read copy of it)".into())
                }
                1 => {
                    let copy = list.remove(0);
                    let at = state
                        .stages()
                        .iter()
                        .position(|s| s.tensor == dag.inputs()[i]);
                    let readers: Vec<String> = at
                        .map(|at| state.direct_consumers(at))
                        .unwrap_or_default()
                        .into_iter()
                        .map(|s| state.stages()[s].name.clone())
                        .filter(|s| *s != copy.stage)
                        .collect();
                    if !readers.is_empty() {
                        Err(format!(
                            "stage(s) {} read it directly, not only through its copy {}",
                            readers.join(", "),
                            copy.stage
                        ))
                    } else if let Some(step) = steps.iter().find(|s| mentions(s, &copy.stage)) {
                        Err(format!(
                            "step '{step}' places or copies its copy {}, which would disappear",
                            copy.stage
                        ))
                    } else {
                        Ok(copy)
                    }
                }
                n => Err(format!("the schedule makes {n} copies of it")),
            };
            (name, verdict)
        })
        .collect();
    Ok(analysis)
}

/// The inputs of `dag` that `steps` read only through one `cache_read` copy
/// of the whole input (no other stage reads them): those whose copy can be
/// made ahead of time when they are constants, each with the copy's layout
/// (the identity when the `cache_read` gives none). Empty when the steps do
/// not replay on `dag`.
pub fn plan_layout_rewrites(dag: &ComputeDag, steps: &[Step]) -> Vec<LayoutRewrite> {
    analyse(dag, steps)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(input, verdict)| {
            verdict.ok().map(|copy| LayoutRewrite {
                input,
                layout: copy.layout,
            })
        })
        .collect()
}

/// Errors with [`DeployError::NotAnInput`] for the first of `names` that
/// is not an input of `dag`.
pub(crate) fn check_inputs(dag: &ComputeDag, names: &[&str]) -> Result<(), DeployError> {
    let inputs: Vec<String> = dag.inputs().iter().map(|t| t.name().to_string()).collect();
    match names.iter().find(|n| !inputs.iter().any(|i| i == *n)) {
        Some(name) => Err(DeployError::NotAnInput {
            name: name.to_string(),
            workload: dag.label().to_string(),
            inputs,
        }),
        None => Ok(()),
    }
}
