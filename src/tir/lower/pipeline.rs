//! Lowering as one readable list of named passes ([`LOWERING_PASSES`]), and
//! the ways to run it: to the end ([`lower`]), without the simplification
//! ([`lower_unsimplified`]), or keeping the IR after every pass
//! ([`lower_traced`], what `tessera show --passes` prints).

use crate::schedule::State;

use super::super::ir::{PrimFunc, Stmt};
use super::super::passes;
use super::{LowerError, Lowering};

/// What a pass needs to run.
#[derive(Clone, Copy)]
enum Run {
    /// The schedule: it reads the state and the lowering context.
    Schedule(fn(&mut Lowering<'_>) -> Result<(), LowerError>),
    /// The statement tree alone: a simplification, which any function can
    /// go through again.
    Body(fn(Stmt) -> Stmt),
}

/// One named step of lowering.
pub struct Pass {
    /// Its name, as `tessera show --passes` prints it.
    pub name: &'static str,
    /// What it does, in one line.
    pub description: &'static str,
    run: Run,
}

impl Pass {
    const fn schedule(
        name: &'static str,
        description: &'static str,
        run: fn(&mut Lowering<'_>) -> Result<(), LowerError>,
    ) -> Pass {
        Pass {
            name,
            description,
            run: Run::Schedule(run),
        }
    }

    const fn body(name: &'static str, description: &'static str, run: fn(Stmt) -> Stmt) -> Pass {
        Pass {
            name,
            description,
            run: Run::Body(run),
        }
    }

    /// Whether the pass only simplifies the statement tree (it needs no
    /// schedule; [`lower_unsimplified`] stops before the first one).
    pub fn simplifies(&self) -> bool {
        matches!(self.run, Run::Body(_))
    }

    fn apply(&self, cx: &mut Lowering<'_>) -> Result<(), LowerError> {
        match self.run {
            Run::Schedule(run) => run(cx),
            Run::Body(run) => {
                cx.body = run(std::mem::replace(&mut cx.body, Stmt::nop()));
                Ok(())
            }
        }
    }
}

/// The passes of [`lower`], in order.
pub const LOWERING_PASSES: &[Pass] = &[
    Pass::schedule(
        "bound_inference",
        "a buffer per stage; a stage computed at a loop gets the region its consumer reads",
        |cx| {
            cx.compute_layouts();
            cx.bind_params()
        },
    ),
    Pass::schedule(
        "emit",
        "loop nests in schedule order: guards, reduction init/update, inlined and attached stages, micro-kernel calls",
        |cx| cx.emit_body(),
    ),
    Pass::schedule(
        "row_math",
        "row_math loops fissioned: transcendental arguments into a scratch row, one row-primitive call, the rest of the body",
        |cx| cx.row_math_loops(),
    ),
    Pass::schedule(
        "auto_unroll",
        "serial loops of stages with auto_unroll_max_step whose nest is that short become unrolled",
        |cx| {
            passes::mark_auto_unroll(&mut cx.body, &cx.auto_unroll);
            Ok(())
        },
    ),
    Pass::body(
        "remove_unit_loops",
        "loops of extent 1 replaced by their body at 0",
        passes::remove_unit_loops,
    ),
    Pass::body(
        "simplify",
        "every expression through the egg simplifier",
        passes::simplify_exprs,
    ),
    Pass::body(
        "partition_loops",
        "loops whose selects test their own variable against constants (padding borders) cut there into pieces, each simplified",
        super::super::partition_loops,
    ),
    Pass::body(
        "remove_decided_branches",
        "conditionals with a constant condition replaced by the branch taken",
        passes::remove_decided_branches,
    ),
    Pass::body(
        "coalesce_kernel_reductions",
        "serial loops that only step a micro-kernel call one block along its reduction merged into the call (one call over the whole window of an im2col panel)",
        super::super::coalesce_kernel_reductions,
    ),
    Pass::schedule(
        "fuse_kernel_epilogues",
        "an elementwise consumer of a micro-kernel tile or a stencil row (addends per row or along it, a max and min with constants) fused into the call, which stores the output through it",
        |cx| {
            cx.fuse_kernel_epilogues();
            Ok(())
        },
    ),
    Pass::body(
        "coalesce_stencil_rows",
        "serial loops that only step a one-row stencil call from row to row merged into the call (one call per plane of a depthwise convolution)",
        super::super::coalesce_stencil_rows,
    ),
];

/// The function after one pass.
pub struct AfterPass {
    /// The pass.
    pub pass: &'static Pass,
    /// The function as that pass left it.
    pub func: PrimFunc,
}

/// Runs `passes` on `state`, calling `observe` after each.
fn run_passes<'p>(
    state: &State,
    passes: impl Iterator<Item = &'p Pass>,
    observe: &mut dyn FnMut(&'p Pass, &Lowering<'_>),
) -> Result<PrimFunc, LowerError> {
    let mut cx = Lowering::new(state);
    for pass in passes {
        pass.apply(&mut cx)?;
        observe(pass, &cx);
    }
    Ok(cx.into_func())
}

/// Lowers `state` to the loop IR, simplified: every pass of [`LOWERING_PASSES`].
pub fn lower(state: &State) -> Result<PrimFunc, LowerError> {
    run_passes(state, LOWERING_PASSES.iter(), &mut |_, _| {})
}

/// Lowers `state` without the simplification passes (for measuring them).
pub fn lower_unsimplified(state: &State) -> Result<PrimFunc, LowerError> {
    let passes = LOWERING_PASSES.iter().take_while(|p| !p.simplifies());
    run_passes(state, passes, &mut |_, _| {})
}

/// Lowers `state` keeping the function after every pass of
/// [`LOWERING_PASSES`]; the last is what [`lower`] returns.
pub fn lower_traced(state: &State) -> Result<Vec<AfterPass>, LowerError> {
    let mut trace = Vec::new();
    run_passes(state, LOWERING_PASSES.iter(), &mut |pass, cx| {
        trace.push(AfterPass {
            pass,
            func: cx.snapshot(),
        })
    })?;
    Ok(trace)
}

/// `body` through the simplification passes of [`LOWERING_PASSES`], in order.
pub(crate) fn simplify_body(body: Stmt) -> Stmt {
    LOWERING_PASSES
        .iter()
        .filter_map(|pass| match pass.run {
            Run::Body(run) => Some(run),
            Run::Schedule(_) => None,
        })
        .fold(body, |body, run| run(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    fn matmul_state() -> State {
        let op = ops::find("matmul").unwrap_or_else(|e| panic!("{e}"));
        let shape = op
            .parse_shape("M=8,N=8,K=8")
            .unwrap_or_else(|e| panic!("{e}"));
        let dag = op.build(&shape).unwrap_or_else(|e| panic!("{e}"));
        State::new(&dag)
    }

    #[test]
    fn the_passes_in_order() {
        let names: Vec<&str> = LOWERING_PASSES.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "bound_inference",
                "emit",
                "row_math",
                "auto_unroll",
                "remove_unit_loops",
                "simplify",
                "partition_loops",
                "remove_decided_branches",
                "coalesce_kernel_reductions",
                "fuse_kernel_epilogues",
                "coalesce_stencil_rows",
            ]
        );
        let simplifying: Vec<&str> = LOWERING_PASSES
            .iter()
            .filter(|p| p.simplifies())
            .map(|p| p.name)
            .collect();
        assert_eq!(
            simplifying,
            [
                "remove_unit_loops",
                "simplify",
                "partition_loops",
                "remove_decided_branches",
                "coalesce_kernel_reductions",
                "coalesce_stencil_rows"
            ]
        );
    }

    #[test]
    fn the_trace_ends_with_the_lowered_function() {
        let state = matmul_state();
        let trace = lower_traced(&state).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = trace.iter().map(|a| a.pass.name).collect();
        let all: Vec<&str> = LOWERING_PASSES.iter().map(|p| p.name).collect();
        assert_eq!(names, all);
        let lowered = lower(&state).unwrap_or_else(|e| panic!("{e}"));
        let last = trace.last().map(|a| a.func.to_string());
        assert_eq!(last, Some(lowered.to_string()));
        // Bound inference makes the buffers; emit makes the loops.
        assert_eq!(trace[0].func.buffers.len(), lowered.buffers.len());
        assert!(matches!(&trace[0].func.body, Stmt::Seq(items) if items.is_empty()));
        assert!(trace[1].func.to_string().contains("for "));
    }

    #[test]
    fn unsimplified_is_the_trace_before_the_first_simplification() {
        let state = matmul_state();
        let trace = lower_traced(&state).unwrap_or_else(|e| panic!("{e}"));
        let raw = lower_unsimplified(&state).unwrap_or_else(|e| panic!("{e}"));
        let before = trace.iter().take_while(|a| !a.pass.simplifies()).last();
        assert_eq!(before.map(|a| a.func.to_string()), Some(raw.to_string()));
        let simplified = passes::simplify_func(raw);
        assert_eq!(
            trace.last().map(|a| a.func.to_string()),
            Some(simplified.to_string())
        );
    }
}
