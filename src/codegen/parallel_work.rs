//! Parallelism that pays: a parallel loop whose whole work is too small to
//! repay the fork cost of the runtime's pool (waking workers and joining
//! them, see [`crate::runtime::parallel::fork_cost`]) runs serially. The
//! decision is made per loop nest, by its work — the stores it executes —
//! before translation, so that the code and the decisions report agree.

use std::borrow::Cow;

use crate::tir::passes::store_count;
use crate::tir::{ForKind, PrimFunc, Stmt};

/// A parallel loop runs in parallel only when it executes at least this
/// many stores, all iterations together. Measured on the 2-core EPYC (AVX2)
/// machine (`cargo run --release --example fork_cost`, load average 6) with
/// the rayon pool of the time: forking 2 threads cost a median 12 µs; a
/// vectorized store costs about 0.3–1 ns, so below some 32k stores (16k per
/// thread, 5–16 µs) a fork cost about as much as it saved. The spinning
/// pool forks in under 1 µs while its workers spin (up to 40 µs when they
/// have slept); a bound of 4k stores ran the three benchmark models no
/// faster on 2 threads (MobileNet 2.81 → 2.85 ms, BERT 6.16 → 6.13,
/// ResNet-50 42–44 → 42.0), so this one stays.
pub const MIN_PARALLEL_STORES: u64 = 1 << 15;

/// Whether the parallel loop `for _ in 0..extent { body }` forks threads.
fn pays(extent: i64, body: &Stmt) -> bool {
    (extent.max(0) as u64).saturating_mul(store_count(body)) >= MIN_PARALLEL_STORES
}

/// `func` with every outermost parallel loop that does not pay made serial
/// (borrowed when there is none).
pub(crate) fn serialise_small_parallel_loops(func: &PrimFunc) -> Cow<'_, PrimFunc> {
    let mut small = false;
    visit_outer_parallel(&func.body, &mut |extent, body| small |= !pays(extent, body));
    if !small {
        return Cow::Borrowed(func);
    }
    let mut owned = func.clone();
    serialise(&mut owned.body, false);
    Cow::Owned(owned)
}

/// Calls `f` on each parallel loop not inside another one.
fn visit_outer_parallel(s: &Stmt, f: &mut dyn FnMut(i64, &Stmt)) {
    match s {
        Stmt::For {
            kind: ForKind::Parallel,
            extent,
            body,
            ..
        } => f(*extent, body),
        Stmt::For { body, .. } | Stmt::Allocate { body, .. } | Stmt::Let { body, .. } => {
            visit_outer_parallel(body, f)
        }
        Stmt::Seq(items) => items.iter().for_each(|i| visit_outer_parallel(i, f)),
        Stmt::IfThenElse {
            then, otherwise, ..
        } => {
            visit_outer_parallel(then, f);
            if let Some(o) = otherwise {
                visit_outer_parallel(o, f);
            }
        }
        Stmt::Store { .. }
        | Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::PackCall(_)
        | Stmt::StencilCall(_) => {}
    }
}

/// Makes each outermost parallel loop of `s` that does not pay serial, and
/// (with `all`, inside one made serial) every parallel loop: those nested
/// in it would otherwise fork now that no outer loop is parallel.
fn serialise(s: &mut Stmt, all: bool) {
    match s {
        Stmt::For {
            kind, extent, body, ..
        } if *kind == ForKind::Parallel => {
            if all || !pays(*extent, body) {
                *kind = ForKind::Serial;
                serialise(body, true);
            }
        }
        Stmt::For { body, .. } | Stmt::Allocate { body, .. } | Stmt::Let { body, .. } => {
            serialise(body, all)
        }
        Stmt::Seq(items) => items.iter_mut().for_each(|i| serialise(i, all)),
        Stmt::IfThenElse {
            then, otherwise, ..
        } => {
            serialise(then, all);
            if let Some(o) = otherwise {
                serialise(o, all);
            }
        }
        Stmt::Store { .. }
        | Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::PackCall(_)
        | Stmt::StencilCall(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use crate::schedule::{State, steps_from_json};

    fn parallel_relu(rows: i64, columns: i64) -> PrimFunc {
        let op = ops::find("relu").unwrap_or_else(|e| panic!("{e}"));
        let shape = op
            .parse_shape(&format!("M={rows},N={columns}"))
            .unwrap_or_else(|e| panic!("{e}"));
        let dag = op.build(&shape).unwrap_or_else(|e| panic!("{e}"));
        let steps = steps_from_json(
            r#"[{"kind": "annotate", "stage": "relu", "iter": "i0", "annotation": "parallel"}]"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{e}"));
        crate::tir::lower(&state).unwrap_or_else(|e| panic!("{e}"))
    }

    fn parallel_loops(func: &PrimFunc) -> usize {
        let mut n = 0;
        func.body.visit(&mut |s| {
            n += usize::from(matches!(
                s,
                Stmt::For {
                    kind: ForKind::Parallel,
                    ..
                }
            ))
        });
        n
    }

    #[test]
    fn a_loop_too_small_to_repay_a_fork_runs_serially_and_a_large_one_does_not() {
        let small = parallel_relu(16, 64);
        assert_eq!(parallel_loops(&small), 1);
        assert_eq!(parallel_loops(&serialise_small_parallel_loops(&small)), 0);
        let large = parallel_relu(256, 256);
        assert!(matches!(
            serialise_small_parallel_loops(&large),
            Cow::Borrowed(_)
        ));
    }
}
