//! The builder: a candidate's steps → a compiled kernel, with failures
//! classified. It runs inside worker processes, so a candidate that crashes
//! or hangs the compiler takes down only its worker.

use std::time::Instant;

use crate::codegen::{self, CodegenOptions, Kernel};
use crate::schedule::{State, Step};
use crate::te::ComputeDag;
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
    let start = Instant::now();
    let fail = |kind, msg: String| (BuildFailure { kind, msg }, start.elapsed().as_secs_f64());
    let state = State::replay(dag, steps)
        .map_err(|e| fail(MeasureErrorKind::InstantiationError, e.to_string()))?;
    let func =
        tir::lower(&state).map_err(|e| fail(MeasureErrorKind::CompileError, e.to_string()))?;
    let kernel = codegen::compile(&func, options)
        .map_err(|e| fail(MeasureErrorKind::CompileError, e.to_string()))?;
    Ok((kernel, start.elapsed().as_secs_f64()))
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
