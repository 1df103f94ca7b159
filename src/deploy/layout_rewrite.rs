//! The ahead-of-time layout rewrite of constant inputs (as Ansor and
//! MetaSchedule do for inference): when a schedule reads an input only
//! through one `cache_read` copy (a packing, often transposing), and the
//! input is a constant weight, the copy can be made once ahead of time. The
//! rewritten kernel then takes the input already in the copy's layout, and
//! the copy stage and its steps disappear — unless it packs panels inside a
//! loop, where it stays as a plain contiguous copy of the laid-out input.

use serde::{Deserialize, Serialize};

use crate::schedule::{ComputeAt, State, Step};
use crate::te::ComputeDag;

use super::error::DeployError;
use super::permute::permute_inputs;

/// One input a schedule lets be laid out ahead of time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutRewrite {
    /// The input (placeholder) name.
    pub input: String,
    /// Dimension `d` of the packed input is dimension `layout[d]` of the
    /// original (see [`pack_input`](super::pack_input)).
    pub layout: Vec<usize>,
}

/// The one copy an input is read through.
struct Copy {
    /// Position of the input among the DAG's inputs.
    input: usize,
    /// Position of the `cache_read` step.
    step: usize,
    /// The copy stage's name.
    stage: String,
    layout: Vec<usize>,
}

/// Per input of the DAG: its copy, or why it has none that can be removed.
type Analysis = Vec<(String, Result<Copy, String>)>;

/// Per constant asked for: its rewrite, or why it has none.
pub(crate) type ConstantPlan = Vec<(String, Result<LayoutRewrite, String>)>;

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
    for (n, step) in steps.iter().enumerate() {
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
                input,
                step: n,
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

/// Why each of `constants` can or cannot be laid out ahead of time under
/// `steps`: `Ok` with its rewrite, or `Err` with the reason. A name that is
/// not an input of `dag` is an error ([`DeployError::NotAnInput`]).
pub(crate) fn plan_constants(
    dag: &ComputeDag,
    steps: &[Step],
    constants: &[&str],
) -> Result<ConstantPlan, DeployError> {
    check_inputs(dag, constants)?;
    let analysis = analyse(dag, steps)?;
    let mut out: ConstantPlan = Vec::new();
    for &name in constants {
        if out.iter().any(|(n, _)| n == name) {
            continue;
        }
        let verdict = analysis
            .iter()
            .find(|(input, _)| input == name)
            .map_or_else(
                || Err("it is not an input".to_string()),
                |(input, verdict)| match verdict {
                    Ok(copy) => Ok(LayoutRewrite {
                        input: input.clone(),
                        layout: copy.layout.clone(),
                    }),
                    Err(reason) => Err(reason.clone()),
                },
            );
        out.push((name.to_string(), verdict));
    }
    Ok(out)
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

/// The schedule `steps` of `dag` with each of `constants` (input names)
/// laid out ahead of time: a DAG whose placeholder of that name has the
/// copy's (permuted) shape, read accordingly, and the steps without the
/// `cache_read` of that input and without every step on its copy stage.
/// The result replays (it is checked) and computes the same function given
/// the inputs packed with [`pack_input`](super::pack_input) and the
/// returned layouts.
///
/// Errors: a name that is not an input ([`DeployError::NotAnInput`]), an
/// input the schedule reads other than through one copy
/// ([`DeployError::NoLayoutRewrite`]), or steps that do not replay.
pub fn rewrite_layouts(
    dag: &ComputeDag,
    steps: &[Step],
    constants: &[&str],
) -> Result<(ComputeDag, Vec<Step>, Vec<LayoutRewrite>), DeployError> {
    check_inputs(dag, constants)?;
    let analysis = analyse(dag, steps)?;
    let mut chosen: Vec<&Copy> = Vec::new();
    for &name in constants {
        let Some((_, verdict)) = analysis.iter().find(|(input, _)| input == name) else {
            continue;
        };
        match verdict {
            Ok(copy) if !chosen.iter().any(|c| c.input == copy.input) => chosen.push(copy),
            Ok(_) => {}
            Err(reason) => {
                return Err(DeployError::NoLayoutRewrite {
                    input: name.to_string(),
                    reason: reason.clone(),
                });
            }
        }
    }
    chosen.sort_by_key(|c| c.input);
    let layouts: Vec<(usize, Vec<usize>)> =
        chosen.iter().map(|c| (c.input, c.layout.clone())).collect();
    let new_dag = permute_inputs(dag, &layouts)?;
    // A transposing copy computed inside a loop packs panels for a
    // micro-kernel: reading the laid-out input in place instead would walk
    // it with a row stride the size of the whole input (a page a row), so
    // the panel copy stays, now a plain contiguous copy.
    let state = State::replay(dag, steps)?;
    let keeps_panels = |c: &Copy| {
        c.layout.iter().enumerate().any(|(d, &l)| d != l)
            && state
                .stages()
                .iter()
                .find(|s| s.name == c.stage)
                .is_some_and(|s| matches!(s.compute_at, ComputeAt::At { .. }))
    };
    let new_steps: Vec<Step> = steps
        .iter()
        .enumerate()
        .filter_map(|(n, step)| {
            match chosen
                .iter()
                .find(|c| c.step == n || step.stage() == c.stage)
            {
                None => Some(step.clone()),
                Some(c) if keeps_panels(c) => Some(match step {
                    Step::CacheRead { stage, readers, .. } if c.step == n => Step::CacheRead {
                        stage: stage.clone(),
                        readers: readers.clone(),
                        layout: None,
                    },
                    other => other.clone(),
                }),
                Some(_) => None,
            }
        })
        .collect();
    State::replay(&new_dag, &new_steps)?;
    let rewrites = chosen
        .iter()
        .map(|c| LayoutRewrite {
            input: dag.inputs()[c.input].name().to_string(),
            layout: c.layout.clone(),
        })
        .collect();
    Ok((new_dag, new_steps, rewrites))
}
