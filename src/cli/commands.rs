//! The commands: each returns the text to print, or the error to report.

use std::fmt::Write;
use std::path::Path;

use super::error::CliError;
use crate::codegen;
use crate::ops;
use crate::schedule::{State, Step, steps_from_json};
use crate::te::ComputeDag;
use crate::tir;

/// `tessera ops`: one line per op — name, parameters with defaults (`?`
/// for a required one), description, and where a registered op is defined.
pub(crate) fn ops() -> Result<String, CliError> {
    let rows: Vec<(String, String, String)> = ops::registry()
        .iter()
        .map(|op| {
            let params: Vec<String> = op
                .params
                .iter()
                .map(|p| match p.default {
                    Some(v) => format!("{}={v}", p.name),
                    None => format!("{}=?", p.name),
                })
                .collect();
            let description = match op.origin {
                ops::Origin::BuiltIn => op.description.to_string(),
                origin => format!("{}  [{origin}]", op.description),
            };
            (op.name.to_string(), params.join(","), description)
        })
        .collect();
    let name_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let params_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, params, description) in rows {
        let _ = writeln!(
            out,
            "{name:<name_width$}  {params:<params_width$}  {description}"
        );
    }
    Ok(out)
}

/// `tessera show OP --shape … [--schedule FILE] [--passes]`: the DAG in
/// readable and canonical form, its key, and the loop IR of the schedule (or
/// the default one); with `--passes`, the IR after each lowering pass and
/// code generation's decisions.
pub(crate) fn show(
    op_name: &str,
    shape_text: &str,
    schedule: Option<&Path>,
    passes: bool,
) -> Result<String, CliError> {
    let op = ops::find(op_name)?;
    let shape = op.parse_shape(shape_text)?;
    let dag = op.build(&shape)?;
    let state = load_state(&dag, schedule)?;
    let loop_ir = if passes {
        pass_by_pass(&state)?
    } else {
        format!("loop IR:\n{}", tir::lower(&state)?)
    };
    let key = dag.workload_key();
    let describe = |tensors: Vec<&crate::te::Tensor>| -> String {
        tensors
            .iter()
            .map(|t| format!("{} {}{:?}", t.name(), t.dtype(), t.shape()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    let _ = writeln!(out, "op:        {}", op.name);
    let _ = writeln!(out, "shape:     {}", shape.to_text());
    let _ = writeln!(out, "workload:  {key}");
    let _ = writeln!(out, "hash:      {}", key.hash);
    let _ = writeln!(out, "flops:     {}", dag.flop_count());
    let _ = writeln!(
        out,
        "inputs:    {}",
        describe(dag.inputs().iter().collect())
    );
    let _ = writeln!(out, "outputs:   {}", describe(dag.outputs()));
    let _ = writeln!(out, "\nstages:\n{dag}");
    let _ = writeln!(out, "canonical form:\n{}", dag.canonical_text());
    let _ = writeln!(out, "schedule:\n{}", state.to_text());
    out.push_str(&loop_ir);
    Ok(out)
}

/// The loop IR after each pass of [`tir::LOWERING_PASSES`] (with the buffers
/// a pass adds), then what code generation decides for the result.
fn pass_by_pass(state: &State) -> Result<String, CliError> {
    let trace = tir::lower_traced(state)?;
    let mut out = String::from("loop IR after each pass:\n");
    let mut known_buffers = 0;
    let mut previous = String::new();
    for (n, after) in trace.iter().enumerate() {
        let func = &after.func;
        let ir = func.to_string();
        let unchanged = if ir == previous { ", unchanged" } else { "" };
        let _ = writeln!(
            out,
            "\n== pass {}/{}: {} ({}){unchanged} ==",
            n + 1,
            trace.len(),
            after.pass.name,
            after.pass.description
        );
        for buffer in &func.buffers[known_buffers.min(func.buffers.len())..] {
            let _ = writeln!(out, "buffer {buffer}");
        }
        known_buffers = func.buffers.len();
        out.push_str(&ir);
        previous = ir;
    }
    if let Some(last) = trace.last() {
        let _ = write!(
            out,
            "\ncodegen decisions:\n{}",
            codegen::decisions(&last.func)
        );
    }
    Ok(out)
}

/// The state of `schedule` (a JSON step file) on `dag`, or the default one.
pub(crate) fn load_state(dag: &ComputeDag, schedule: Option<&Path>) -> Result<State, CliError> {
    let Some(path) = schedule else {
        return Ok(State::new(dag));
    };
    let steps = read_steps(path)?;
    State::replay(dag, &steps).map_err(|source| CliError::ScheduleApply {
        path: path.into(),
        source,
    })
}

/// The steps of a JSON step file.
pub(crate) fn read_steps(path: &Path) -> Result<Vec<Step>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::Read {
        path: path.into(),
        source,
    })?;
    steps_from_json(&text).map_err(|source| CliError::ScheduleParse {
        path: path.into(),
        source,
    })
}
