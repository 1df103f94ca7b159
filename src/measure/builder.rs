//! The builder: a candidate's steps → a compiled kernel, with failures
//! classified. It runs inside worker processes, so a candidate that crashes
//! or hangs the compiler takes down only its worker.

use std::borrow::Cow;
use std::time::Instant;

use crate::codegen::{self, CodegenOptions, Kernel};
use crate::schedule::{State, Step};
use crate::te::{ComputeDag, HostTensor};
use crate::tir;

use super::result::MeasureErrorKind;

/// Why a candidate did not build.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildFailure {
    /// [`MeasureErrorKind::InstantiationError`] or [`MeasureErrorKind::CompileError`].
    pub kind: MeasureErrorKind,
    /// The error, for people.
    pub msg: String,
}

/// Replays `steps` on `dag`, lowers and compiles the result; returns the
/// kernel and the seconds it took.
pub fn build(
    dag: &ComputeDag,
    steps: &[Step],
    options: &CodegenOptions,
) -> Result<(Kernel, f64), (BuildFailure, f64)> {
    build_with_constants(dag, steps, &[], options).map(|(built, secs)| (built.kernel, secs))
}

/// A candidate built with some constant inputs laid out ahead of time.
pub struct BuiltCandidate {
    /// The kernel: each input of [`packers`](Self::packers) packed, the
    /// others as the DAG takes them.
    pub kernel: Kernel,
    /// The packer of each input laid out ahead of time, with the input's
    /// position among the DAG's inputs.
    pub packers: Vec<(usize, Kernel)>,
}

impl BuiltCandidate {
    /// `inputs` (the DAG's) with those the packers lay out packed: what
    /// [`kernel`](Self::kernel) takes (`inputs` themselves when nothing is
    /// laid out, without a copy).
    pub fn pack<'a>(&self, inputs: &'a [HostTensor]) -> Result<Cow<'a, [HostTensor]>, String> {
        if self.packers.is_empty() {
            return Ok(Cow::Borrowed(inputs));
        }
        let mut packed = inputs.to_vec();
        for (index, packer) in &self.packers {
            let input = inputs
                .get(*index)
                .ok_or_else(|| format!("no input {index} to pack"))?;
            let mut out = packer
                .run_host(std::slice::from_ref(input))
                .map_err(|e| format!("packing input {index}: {e}"))?;
            packed[*index] = out.remove(0);
        }
        Ok(Cow::Owned(packed))
    }
}

/// [`build`] with each input of `dag` named in `constants` laid out ahead
/// of time where the lowered kernel reads it only through one copy
/// ([`tir::hoist_constant_copies`]), as a deployed kernel with constant
/// weights runs; an input that cannot be is read as it is.
pub fn build_with_constants(
    dag: &ComputeDag,
    steps: &[Step],
    constants: &[String],
    options: &CodegenOptions,
) -> Result<(BuiltCandidate, f64), (BuildFailure, f64)> {
    let start = Instant::now();
    let fail = |kind, msg: String| (BuildFailure { kind, msg }, start.elapsed().as_secs_f64());
    let compile_error =
        |e: &dyn std::fmt::Display| fail(MeasureErrorKind::CompileError, e.to_string());
    let state = State::replay(dag, steps)
        .map_err(|e| fail(MeasureErrorKind::InstantiationError, e.to_string()))?;
    let func = tir::lower(&state).map_err(|e| compile_error(&e))?;
    let names: Vec<&str> = constants.iter().map(String::as_str).collect();
    let hoisted = tir::hoist_constant_copies(func, &names);
    let kernel = codegen::compile(&hoisted.kernel, options).map_err(|e| compile_error(&e))?;
    let mut packers = Vec::new();
    for (name, packer) in &hoisted.packers {
        let index = dag
            .inputs()
            .iter()
            .position(|t| t.name() == name)
            .ok_or_else(|| compile_error(&format!("'{name}' is not an input of the DAG")))?;
        packers.push((
            index,
            codegen::compile(packer, options).map_err(|e| compile_error(&e))?,
        ));
    }
    Ok((
        BuiltCandidate { kernel, packers },
        start.elapsed().as_secs_f64(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    #[test]
    fn steps_that_do_not_replay_are_instantiation_errors() {
        let op = ops::find("matmul").expect("registered");
        let dag = op
            .build(&op.parse_shape("M=8,N=8,K=8").expect("shape"))
            .expect("dag");
        let steps: Vec<Step> =
            serde_json::from_str(r#"[{"kind":"split","stage":"C","iter":"nope","factors":[2]}]"#)
                .expect("parses");
        let (failure, _) = build(&dag, &steps, &CodegenOptions::default())
            .err()
            .expect("fails");
        assert_eq!(failure.kind, MeasureErrorKind::InstantiationError);
        assert!(failure.msg.contains("nope"), "{}", failure.msg);
        let (kernel, secs) = build(&dag, &[], &CodegenOptions::default()).expect("builds");
        assert_eq!(kernel.num_inputs(), 2);
        assert!(secs > 0.0);
    }
}
