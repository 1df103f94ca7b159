//! Loop partitioning (TVM's `LoopPartition`, Halide's boundary-condition
//! splitting): a loop whose body selects on its own variable against
//! constants (`v >= 1`, `v < 57`: the borders of a padded copy) is cut at
//! those thresholds into consecutive loops. Within each piece every such
//! condition has one value, which the simplifier then decides, so the
//! interior of a padded copy becomes a plain copy (vector loads and stores,
//! no select) and only the borders keep the zero branch.
//!
//! Cutting a loop into pieces that run its iterations in order never changes
//! what it computes; the rules below only decide where it pays: orderings of
//! the variable alone (a padded copy's; a window read's `x + rs >= 1`, which
//! would multiply the loops around, is left to the vector code's compares),
//! select conditions only (guards of edge tiles are left to the code
//! generator), few cuts,
//! small bodies without calls, no vector loop shorter than four vectors,
//! and no parallel loop (which would become several parallel regions).

use std::collections::{BTreeSet, HashMap};

use crate::arith::{Affine, Decompose, Interval, decide};
use crate::te::{CmpOp, Expr, ExprKind, Var, VarId};

use super::ir::{ForKind, Stmt};
use super::passes::{map_children, map_exprs};
use super::simplify::simplify;

/// Most cuts made in one loop (two per padded border pair, twice over).
const MAX_CUTS: usize = 4;
/// Most statements a partitioned loop's body may hold: each piece copies it.
const MAX_BODY_STATEMENTS: usize = 64;
/// Shortest vectorized loop that is cut (four chunks of four lanes).
const MIN_VECTOR_EXTENT: i64 = 16;

/// Every loop of `s` that tests its own variable against constants, cut at
/// the thresholds; inner loops first, so an outer loop sees the tests its
/// inner pieces left (the row test of a padded copy once its columns are
/// cut).
pub fn partition_loops(s: Stmt) -> Stmt {
    match s {
        Stmt::For {
            var,
            extent,
            kind,
            body,
        } => {
            let body = partition_loops(*body);
            let cuts = cuts(&var, extent, kind, &body);
            if cuts.is_empty() {
                return Stmt::For {
                    var,
                    extent,
                    kind,
                    body: Box::new(body),
                };
            }
            pieces(&var, extent, kind, &body, &cuts)
        }
        other => map_children(other, &mut partition_loops),
    }
}

/// The iterations `0 < t < extent` before which some select condition of
/// `var` alone in `body` changes value; none when the loop should stay whole.
fn cuts(var: &Var, extent: i64, kind: ForKind, body: &Stmt) -> Vec<i64> {
    // A short vector loop selects lane-wise for the price of a compare;
    // cut, it would leave pieces narrower than a vector.
    let short_vector = kind == ForKind::Vectorized && extent < MIN_VECTOR_EXTENT;
    if kind == ForKind::Parallel || short_vector || extent < 2 {
        return Vec::new();
    }
    let mut statements = 0;
    let mut opaque_call = false;
    body.visit(&mut |s| {
        statements += 1;
        // A row-math call keeps expressions that a substitution does not
        // reach; micro-kernel and packing calls handle their own edges, and
        // a constant's packing copy must stay one loop nest to be hoisted.
        opaque_call |= matches!(
            s,
            Stmt::RowMathCall(_)
                | Stmt::MicroKernelCall(_)
                | Stmt::PackCall(_)
                | Stmt::StencilCall(_)
        );
    });
    if statements > MAX_BODY_STATEMENTS || opaque_call {
        return Vec::new();
    }
    let mut tests: Vec<Test> = Vec::new();
    // The conditions of selects (padding), not guards: a guarded edge tile
    // already runs its full chunks as vectors.
    body.visit_exprs(&mut |e| {
        e.visit(&mut |x| {
            let ExprKind::Select { cond, .. } = x.kind() else {
                return;
            };
            cond.visit(&mut |c| {
                if let ExprKind::Cmp(op, a, b) = c.kind()
                    && let Some(test) = Test::of(var.id(), *op, a, b)
                    && !tests.contains(&test)
                {
                    tests.push(test);
                }
            })
        })
    });
    let cuts: BTreeSet<i64> = tests.iter().filter_map(|t| t.cut(extent)).collect();
    if cuts.len() > MAX_CUTS {
        return Vec::new();
    }
    cuts.into_iter().collect()
}

/// A test `coefficient·var + constant op 0` of the partitioned loop's
/// variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Test {
    coefficient: i64,
    constant: i64,
    op: CmpOp,
}

impl Test {
    /// `a op b` as a test of `var`, when it is an ordering of `var` alone
    /// (every other atom cancels).
    fn of(var: VarId, op: CmpOp, a: &Expr, b: &Expr) -> Option<Test> {
        if !matches!(op, CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge) {
            return None;
        }
        let how = Decompose {
            only_i64: true,
            ..Decompose::default()
        };
        let difference = Affine::with(a, how).plus(&Affine::with(b, how).scaled(-1));
        let coefficient = difference.coefficient(var)?;
        let alone = difference
            .terms
            .iter()
            .all(|(atom, c)| *c == 0 || matches!(atom.kind(), ExprKind::Var(v) if v.id() == var));
        (coefficient != 0 && alone).then_some(Test {
            coefficient,
            constant: difference.constant,
            op,
        })
    }

    /// Whether the test holds at `v` (`None` if the form overflows).
    fn holds(&self, v: i64) -> Option<bool> {
        let at = self
            .coefficient
            .checked_mul(v)?
            .checked_add(self.constant)?;
        decide(self.op, Interval::point(at), Interval::point(0))
    }

    /// The first iteration in `1..extent` where the test's value differs
    /// from iteration 0's: an ordering of an affine form changes value at
    /// most once, so a binary search finds it.
    fn cut(&self, extent: i64) -> Option<i64> {
        let first = self.holds(0)?;
        let (mut low, mut high) = (1, extent);
        while low < high {
            let middle = low + (high - low) / 2;
            if self.holds(middle)? == first {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        (low < extent).then_some(low)
    }
}

/// The loop `for var in 0..extent { body }` as consecutive loops over the
/// ranges between `cuts`, each body simplified with its own range (a piece
/// of one iteration is its body at that iteration).
fn pieces(var: &Var, extent: i64, kind: ForKind, body: &Stmt, cuts: &[i64]) -> Stmt {
    let starts = std::iter::once(0).chain(cuts.iter().copied());
    let ends = cuts.iter().copied().chain(std::iter::once(extent));
    let pieces = starts
        .zip(ends)
        .map(|(start, end)| {
            let piece = Var::new(var.name(), end - start, var.kind());
            let at = if end - start == 1 {
                Expr::i64(start)
            } else {
                piece.expr() + Expr::i64(start)
            };
            let mut map = HashMap::from([(var.id(), at)]);
            // Every loop binds its own variables: the pieces' copies of the
            // loops inside get fresh ones.
            let body = fresh_variables(body.clone(), &mut map);
            let body = map_exprs(body, &mut |e| simplify(&e.substitute(&map)));
            if end - start == 1 {
                body
            } else {
                Stmt::For {
                    var: piece,
                    extent: end - start,
                    kind,
                    body: Box::new(body),
                }
            }
        })
        .collect();
    Stmt::Seq(pieces)
}

/// `s` with every variable it binds (loops, lets) replaced by a fresh one of
/// the same name and extent; `map` gains each replacement.
fn fresh_variables(s: Stmt, map: &mut HashMap<VarId, Expr>) -> Stmt {
    let fresh = |var: &Var, map: &mut HashMap<VarId, Expr>| {
        let new = Var::new(var.name(), var.extent(), var.kind());
        map.insert(var.id(), new.expr());
        new
    };
    match s {
        Stmt::For {
            var,
            extent,
            kind,
            body,
        } => Stmt::For {
            var: fresh(&var, map),
            extent,
            kind,
            body: Box::new(fresh_variables(*body, map)),
        },
        Stmt::Let { var, value, body } => Stmt::Let {
            var: fresh(&var, map),
            value,
            body: Box::new(fresh_variables(*body, map)),
        },
        other => map_children(other, &mut |child| fresh_variables(child, map)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{State, steps_from_json};
    use crate::te::{DType, HostTensor, evaluate};
    use crate::tir::{interp, lower, lower_unsimplified};

    /// A depthwise convolution whose padded copy is computed per channel
    /// with its columns vectorized, as the search writes it.
    fn padded_depthwise(pad_steps: &str) -> (crate::te::ComputeDag, State) {
        let spec = crate::ops::find("depthwise_conv2d").expect("op");
        let params = [("N", 1), ("C", 3), ("H", 9), ("W", 17), ("R", 3), ("S", 3)];
        let dag = spec
            .build(
                &spec
                    .shape(&[&params[..], &[("stride", 1), ("pad", 1)]].concat())
                    .expect("shape"),
            )
            .expect("dag");
        let steps = format!(
            r#"[{{"kind": "compute_at", "stage": "pad", "target": "depthwise_conv2d", "iter": "i1"}}
                {pad_steps}]"#
        );
        let steps = steps_from_json(&steps).expect("steps");
        let state = State::replay(&dag, &steps).expect("replay");
        (dag, state)
    }

    fn selects(s: &Stmt) -> usize {
        let mut n = 0;
        s.visit_exprs(&mut |e| {
            e.visit(&mut |x| n += usize::from(matches!(x.kind(), ExprKind::Select { .. })))
        });
        n
    }

    fn loops(s: &Stmt) -> Vec<i64> {
        let mut extents = Vec::new();
        s.visit(&mut |s| {
            if let Stmt::For { extent, .. } = s {
                extents.push(*extent);
            }
        });
        extents
    }

    #[test]
    fn a_padded_copy_becomes_a_plain_interior_copy_and_zero_borders() {
        for pad_steps in [
            "",
            r#", {"kind": "annotate", "stage": "pad", "iter": "i3", "annotation": "vectorize"}"#,
        ] {
            let (dag, state) = padded_depthwise(pad_steps);
            let func = lower(&state).expect("lower");
            // Rows 0 and 10 and columns 0 and 18 are the zero border: the
            // copy's 11 × 19 loops become 9 rows of 17 copied columns.
            assert_eq!(selects(&func.body), 0, "{pad_steps}: {func}");
            let text = func.to_string();
            assert!(text.contains("for pad.i2 in 0..9"), "{text}");
            assert!(text.contains("for pad.i3 in 0..17"), "{text}");
            let inputs: Vec<HostTensor> = dag
                .inputs()
                .iter()
                .enumerate()
                .map(|(n, t)| {
                    let shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
                    HostTensor::random(&shape, DType::F32, 5 + n as u64)
                })
                .collect();
            // Bit for bit what the unpartitioned loops compute, and the
            // reference up to the rounding of a 9-term sum.
            let got = interp::run(&func, &inputs).expect("interpreter");
            let whole = lower_unsimplified(&state).expect("lower");
            let before = interp::run(&whole, &inputs).expect("interpreter");
            assert_eq!(got[0].to_f64_vec(), before[0].to_f64_vec());
            let want = evaluate(&dag, &inputs).expect("reference");
            for (g, w) in got[0].to_f64_vec().iter().zip(want[0].to_f64_vec()) {
                assert!((g - w).abs() <= 9.0 * f64::from(f32::EPSILON) * w.abs().max(1.0));
            }
        }
    }

    #[test]
    fn tests_of_other_loops_and_parallel_loops_leave_a_loop_whole() {
        // Tiles of 4 over 9 rows: the guard `i2.0·4 + i2.1 < 9` tests two
        // variables, so neither loop is cut; the parallel channel loop is
        // never cut.
        let (_, state) = padded_depthwise(
            r#", {"kind": "split", "stage": "depthwise_conv2d", "iter": "i2", "factors": [4]},
                {"kind": "annotate", "stage": "depthwise_conv2d", "iter": "i1", "annotation": "parallel"}"#,
        );
        let func = lower(&state).expect("lower");
        let extents = loops(&func.body);
        assert!(extents.contains(&3), "the channel loop is whole: {func}");
        assert_eq!(
            extents.iter().filter(|&&e| e == 4).count(),
            1,
            "one guarded tile loop: {func}"
        );
        assert!(func.to_string().contains("< 9"), "the guard stays: {func}");
    }

    #[test]
    fn the_pass_is_idempotent() {
        let (_, state) = padded_depthwise("");
        let once = lower(&state).expect("lower");
        let mut twice = once.clone();
        twice.body = partition_loops(once.body.clone());
        assert_eq!(once.to_string(), twice.to_string());
    }
}
