//! How much the egg simplifier shrinks the index arithmetic of tiled
//! schedules (printed with `--nocapture`), and that it never changes results.

use crate::common;

use common::{assert_close, build, random_inputs, reduction_length, reference};
use tessera::schedule::{State, steps_from_json};
use tessera::te::{Expr, ExprKind};
use tessera::tir::{self, PrimFunc, Stmt};

/// Nodes of every index and condition expression: store indices, read
/// indices inside values, and conditions.
fn index_nodes(func: &PrimFunc) -> usize {
    let mut total = 0;
    let mut count_reads = |e: &Expr| {
        e.visit(&mut |x| {
            if let ExprKind::Read(_, idx) = x.kind() {
                total += idx.iter().map(tir::simplify::node_count).sum::<usize>();
            }
        });
    };
    let mut direct = 0;
    func.body.visit(&mut |s| match s {
        Stmt::Store { indices, value, .. } => {
            direct += indices.iter().map(tir::simplify::node_count).sum::<usize>();
            count_reads(value);
        }
        Stmt::IfThenElse { cond, .. } => direct += tir::simplify::node_count(cond),
        _ => {}
    });
    total + direct
}

fn report(op: &str, params: &[(&str, i64)], schedule: &str) -> (usize, usize) {
    let text = std::fs::read_to_string(schedule).unwrap_or_else(|e| panic!("{e}"));
    let steps = steps_from_json(&text).unwrap_or_else(|e| panic!("{e}"));
    let dag = build(op, params);
    let state = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{e}"));
    let raw = tir::lower_unsimplified(&state).unwrap_or_else(|e| panic!("{e}"));
    // The simplifying passes alone: loop partitioning, which copies loop
    // bodies into pieces, is not counted here.
    let mut simplified = raw.clone();
    simplified.body = [
        tir::passes::remove_unit_loops,
        tir::passes::simplify_exprs,
        tir::passes::remove_decided_branches,
    ]
    .iter()
    .fold(simplified.body, |body, pass| pass(body));
    let lowered = tir::lower(&state).unwrap_or_else(|e| panic!("{e}"));
    let (before, after) = (index_nodes(&raw), index_nodes(&simplified));
    println!(
        "{op} {schedule}: index/condition nodes {before} -> {after} ({:.0}% smaller)",
        100.0 * (before - after) as f64 / before as f64
    );
    let inputs = random_inputs(&dag, 3);
    let want = reference(&dag, &inputs);
    for func in [&raw, &simplified, &lowered] {
        let got = tir::run(func, &inputs).unwrap_or_else(|e| panic!("{e}"));
        assert_close(op, &got, &want, reduction_length(&dag));
    }
    (before, after)
}

#[test]
fn simplification_shrinks_tiled_matmul_and_conv2d() {
    let (before, after) = report(
        "matmul",
        &[("M", 64), ("N", 64), ("K", 64)],
        "examples/schedules/matmul_tiled.json",
    );
    assert!(after * 10 <= before * 8, "matmul: {before} -> {after}");
    let (before, after) = report(
        "conv2d",
        &[("C", 8), ("H", 14), ("W", 14), ("K", 8)],
        "examples/schedules/conv2d_tiled.json",
    );
    assert!(after * 10 <= before * 8, "conv2d: {before} -> {after}");
}
