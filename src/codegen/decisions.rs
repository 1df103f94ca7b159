//! What code generation decides that the loop IR does not say, as a report
//! (`tessera show --passes` prints it): how each vectorized loop runs, and
//! where each allocated buffer lives (register promotion, stack or heap).
//! The decisions come from the same functions the translation calls.

use std::fmt;

use crate::te::DType;
use crate::tir::{ForKind, PrimFunc, Stmt};

use super::parallel_work::serialise_small_parallel_loops;
use super::translate::copy_call::contiguous_copy;
use super::translate::memory::{StoragePlan, allocations, storage_plan};
use super::translate::vector::{VectorPlan, vector_plan};

/// One vectorized loop of the function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorLoop {
    /// Its variable's name.
    pub var: String,
    /// Its extent.
    pub extent: i64,
    /// How it runs; none when it runs as a serial loop (its stores have no
    /// common vector width, or lanes would race on one element).
    pub plan: Option<VectorPlan>,
    /// Whether it runs as one `tessera_copy` call instead (a contiguous
    /// copy between buffers longer than an unrolled vector loop).
    pub copy: bool,
}

/// Where one allocated buffer lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferStorage {
    /// The buffer's name.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its extents.
    pub shape: Vec<i64>,
    /// Whether it is allocated inside a parallel loop's outlined body.
    pub in_parallel_body: bool,
    /// Where its elements are kept.
    pub storage: StoragePlan,
}

/// Code generation's decisions for one function, in program order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodegenDecisions {
    /// Every vectorized loop.
    pub vector_loops: Vec<VectorLoop>,
    /// Every allocated buffer (arguments are not allocated).
    pub buffers: Vec<BufferStorage>,
}

/// The bodies of the parallel loops that become outlined functions (those
/// not inside another parallel loop, which run serially).
fn outlined_bodies<'s>(s: &'s Stmt, out: &mut Vec<&'s Stmt>) {
    match s {
        Stmt::For {
            kind: ForKind::Parallel,
            body,
            ..
        } => out.push(body),
        Stmt::For { body, .. } | Stmt::Allocate { body, .. } | Stmt::Let { body, .. } => {
            outlined_bodies(body, out)
        }
        Stmt::Seq(items) => items.iter().for_each(|i| outlined_bodies(i, out)),
        Stmt::IfThenElse {
            then, otherwise, ..
        } => {
            outlined_bodies(then, out);
            if let Some(o) = otherwise {
                outlined_bodies(o, out);
            }
        }
        Stmt::Store { .. }
        | Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::PackCall(_)
        | Stmt::StencilCall(_) => {}
    }
}

/// What code generation decides for `func`.
pub fn decisions(func: &PrimFunc) -> CodegenDecisions {
    let func = &*serialise_small_parallel_loops(func);
    let handles = func.handle_map();
    let buffer_of = |t: &crate::te::Tensor| handles.get(&t.id()).copied();
    let mut vector_loops = Vec::new();
    func.body.visit(&mut |s| {
        if let Stmt::For {
            var,
            extent,
            kind: ForKind::Vectorized,
            body,
        } = s
        {
            vector_loops.push(VectorLoop {
                var: var.name().to_string(),
                extent: *extent,
                plan: vector_plan(var.id(), *extent, body, func, false),
                copy: contiguous_copy(var.id(), *extent, body, func, buffer_of).is_some(),
            });
        }
    });
    let mut bodies = Vec::new();
    outlined_bodies(&func.body, &mut bodies);
    let functions =
        std::iter::once((&func.body, false)).chain(bodies.into_iter().map(|b| (b, true)));
    let mut buffers = Vec::new();
    for (body, in_parallel) in functions {
        let mut found = Vec::new();
        allocations(body, in_parallel, &mut found);
        for (id, scope) in found {
            let buffer = &func.buffers[id];
            buffers.push(BufferStorage {
                name: buffer.name.clone(),
                dtype: buffer.dtype,
                shape: buffer.shape.clone(),
                in_parallel_body: in_parallel,
                storage: storage_plan(func, id, &scope, in_parallel),
            });
        }
    }
    CodegenDecisions {
        vector_loops,
        buffers,
    }
}

impl fmt::Display for VectorLoop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in 0..{}: ", self.var, self.extent)?;
        if self.copy {
            return f.write_str("one contiguous copy (a tessera_copy call: memmove)");
        }
        let Some(plan) = self.plan else {
            return f.write_str(
                "serial (its stores have no common vector width, or its lanes would race on one element)",
            );
        };
        if plan.accumulators > 0 {
            write!(
                f,
                "lane-wise reduction in {} accumulators of {} lanes, one horizontal step, ",
                plan.accumulators, plan.lanes
            )?;
        }
        if plan.chunks > 0 {
            let how = if plan.unrolled {
                "unrolled"
            } else {
                "in a loop"
            };
            write!(f, "{} chunks of {} lanes, {how}", plan.chunks, plan.lanes)?;
        } else {
            write!(f, "shorter than one vector of {} lanes", plan.lanes)?;
        }
        if plan.remainder > 0 {
            write!(f, ", then {} scalar iterations", plan.remainder)?;
        }
        Ok(())
    }
}

impl fmt::Display for BufferStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.shape.iter().map(i64::to_string).collect();
        write!(f, "{}: {}[{}]", self.name, self.dtype, dims.join(", "))?;
        if self.in_parallel_body {
            f.write_str(" (in a parallel body)")?;
        }
        let elements: i64 = self.shape.iter().product();
        match self.storage {
            StoragePlan::Registers { lanes } if lanes > 1 => write!(
                f,
                ": registers, {} vectors of {lanes} lanes",
                elements / lanes
            ),
            StoragePlan::Registers { .. } => write!(f, ": registers, {elements} scalars"),
            StoragePlan::Stack { bytes } => write!(f, ": stack, {bytes} bytes"),
            StoragePlan::Heap { bytes } => write!(f, ": heap, {bytes} bytes"),
        }
    }
}

impl fmt::Display for CodegenDecisions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("vectorized loops:")?;
        if self.vector_loops.is_empty() {
            f.write_str(" none")?;
        }
        for l in &self.vector_loops {
            write!(f, "\n  {l}")?;
        }
        f.write_str("\nallocated buffers:")?;
        if self.buffers.is_empty() {
            f.write_str(" none")?;
        }
        for b in &self.buffers {
            write!(f, "\n  {b}")?;
        }
        writeln!(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use crate::schedule::{State, steps_from_json};

    fn lowered(op: &str, shape: &str, steps: &str) -> PrimFunc {
        let op = ops::find(op).unwrap_or_else(|e| panic!("{e}"));
        let shape = op.parse_shape(shape).unwrap_or_else(|e| panic!("{e}"));
        let dag = op.build(&shape).unwrap_or_else(|e| panic!("{e}"));
        let steps = steps_from_json(steps).unwrap_or_else(|e| panic!("{e}"));
        let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{e}"));
        crate::tir::lower(&state).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_tiled_matmul_runs_vectors_and_keeps_its_tile_in_registers() {
        let func = lowered(
            "matmul",
            "M=64,N=64,K=64",
            include_str!("../../examples/schedules/matmul_tiled.json"),
        );
        let report = decisions(&func);
        let four_unrolled = Some(VectorPlan {
            lanes: 4,
            chunks: 4,
            unrolled: true,
            remainder: 0,
            accumulators: 0,
        });
        let loops: Vec<(&str, Option<VectorPlan>)> = report
            .vector_loops
            .iter()
            .map(|l| (l.var.as_str(), l.plan))
            .collect();
        assert_eq!(
            loops,
            [
                ("B.local.i1", four_unrolled),
                ("i1.init", four_unrolled),
                ("i1", four_unrolled),
                ("i1.1", four_unrolled),
            ]
        );
        let buffers: Vec<(&str, bool, StoragePlan)> = report
            .buffers
            .iter()
            .map(|b| (b.name.as_str(), b.in_parallel_body, b.storage))
            .collect();
        assert_eq!(
            buffers,
            [
                ("B.local", true, StoragePlan::Stack { bytes: 4096 }),
                ("C.local", true, StoragePlan::Registers { lanes: 4 }),
            ]
        );
        let text = report.to_string();
        assert!(
            text.contains("i1.1 in 0..16: 4 chunks of 4 lanes, unrolled"),
            "{text}"
        );
        assert!(
            text.contains(
                "C.local: f32[2, 16] (in a parallel body): registers, 8 vectors of 4 lanes"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_vectorized_reduction_loop_is_reported_lane_wise() {
        let func = lowered(
            "softmax",
            "M=2,N=37",
            r#"[{"kind": "annotate", "stage": "row_sum", "iter": "k", "annotation": "vectorize"}]"#,
        );
        let text = decisions(&func).to_string();
        assert!(
            text.contains(
                "k in 0..37: lane-wise reduction in 4 accumulators of 4 lanes, one horizontal step, \
                 9 chunks of 4 lanes, in a loop, then 1 scalar iterations"
            ),
            "{text}"
        );
    }

    #[test]
    fn long_and_ragged_vector_loops() {
        // 70 columns: 17 looped chunks and 2 scalar iterations.
        let func = lowered(
            "bias_add",
            "M=2,N=70",
            r#"[{"kind": "annotate", "stage": "bias_add", "iter": "i1", "annotation": "vectorize"}]"#,
        );
        let report = decisions(&func);
        let ragged = Some(VectorPlan {
            lanes: 4,
            chunks: 17,
            unrolled: false,
            remainder: 2,
            accumulators: 0,
        });
        assert_eq!(report.vector_loops.len(), 1, "{report}");
        assert_eq!(report.vector_loops[0].plan, ragged);
        assert!(!report.vector_loops[0].copy, "{report}");
        assert!(
            report
                .to_string()
                .contains("17 chunks of 4 lanes, in a loop, then 2 scalar iterations"),
            "{report}"
        );
    }

    #[test]
    fn long_copies_are_calls_and_large_buffers_live_on_the_stack() {
        // The copy out of a 70x70 cache: one call per row; the cache is too
        // large for registers and lives on the stack.
        let func = lowered(
            "matmul",
            "M=70,N=70,K=3",
            r#"[
              {"kind": "cache_write", "stage": "C"},
              {"kind": "annotate", "stage": "C", "iter": "i1", "annotation": "vectorize"}
            ]"#,
        );
        let report = decisions(&func);
        assert_eq!(report.vector_loops.len(), 1, "{report}");
        assert!(report.vector_loops[0].copy, "{report}");
        assert_eq!(
            report.buffers.iter().map(|b| b.storage).collect::<Vec<_>>(),
            [StoragePlan::Stack { bytes: 70 * 70 * 4 }]
        );
        assert!(
            report
                .to_string()
                .contains("i1 in 0..70: one contiguous copy (a tessera_copy call: memmove)"),
            "{report}"
        );
        // As short as an unrolled loop (32 elements): vector code.
        let report = decisions(&lowered(
            "matmul",
            "M=32,N=32,K=3",
            r#"[{"kind": "cache_write", "stage": "C"},
                {"kind": "annotate", "stage": "C", "iter": "i1", "annotation": "vectorize"}]"#,
        ));
        assert_eq!(report.vector_loops.len(), 1, "{report}");
        assert!(!report.vector_loops[0].copy, "{report}");
    }
}
