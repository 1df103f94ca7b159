//! Unit tests of the simplifier on the shapes lowering produces.

use std::time::Instant;

use super::{cache, node_count, rules, simplify};
use crate::te::{
    DType, Expr, IterKind, Var, cast, exp, floordiv, floormod, max, min, placeholder, select,
};

fn var(name: &str, extent: i64) -> Expr {
    Var::new(name, extent, IterKind::Spatial).expr()
}

fn simplified_is(e: &Expr, expected: &Expr) {
    let got = simplify(e);
    assert!(
        got == *expected,
        "simplify({e:?})\n  = {got:?}\n  expected {expected:?}"
    );
}

#[test]
fn all_rules_build() {
    let built = rules::build().expect("every rule pattern parses");
    assert!(built.len() > 60, "only {} rules", built.len());
}

#[test]
fn floordiv_of_split_index_is_the_outer_variable() {
    let (i, j) = (var("i", 10), var("j", 4));
    simplified_is(&floordiv(&i * 4 + &j, 4), &i);
    // Operands in the other order.
    simplified_is(&floordiv(&j + 4 * &i, 4), &i);
}

#[test]
fn floormod_of_split_index_is_the_inner_variable() {
    let (i, j) = (var("i", 10), var("j", 4));
    simplified_is(&floormod(&i * 4 + &j, 4), &j);
}

#[test]
fn truncating_division_of_non_negative_index() {
    let (i, j) = (var("i", 10), var("j", 4));
    simplified_is(&((&i * 4 + &j) / 4), &i);
}

#[test]
fn fused_loop_decomposition_round_trips() {
    let f = var("f", 96);
    simplified_is(&(floordiv(&f, 8) * 8 + floormod(&f, 8)), &f);
    simplified_is(&(floormod(&f, 8) + 8 * floordiv(&f, 8)), &f);
}

#[test]
fn nested_tiles_divide_through() {
    let (a, b, c) = (var("a", 4), var("b", 8), var("c", 4));
    let idx = (&a * 8 + &b) * 4 + &c;
    simplified_is(&floordiv(&idx, 4), &(&a * 8 + &b));
    simplified_is(&floordiv(&idx, 32), &a);
    simplified_is(&floormod(&idx, 4), &c);
    // floormod(idx, 32) = b*4 + c (any operand order).
    let m = simplify(&floormod(&idx, 32));
    assert_eq!(node_count(&m), 5, "{m:?}");
}

#[test]
fn low_bits_below_a_divisor_factor_are_dropped() {
    let (f0, f1) = (var("f0", 100), var("f1", 8));
    simplified_is(&floordiv(&f0 * 8 + &f1, 56), &floordiv(&f0, 7));
}

#[test]
fn guards_decided_by_ranges() {
    let (i0, i1) = (var("i0", 8), var("i1", 8));
    let x = var("x", 5);
    simplified_is(&(&i0 * 8 + &i1).lt(64), &Expr::bool(true));
    simplified_is(&(&i0 * 8 + &i1).ge(64), &Expr::bool(false));
    simplified_is(&x.ge(0), &Expr::bool(true));
    let undecided = (&i0 * 8 + &i1).lt(63);
    let got = simplify(&undecided);
    assert_eq!(got.dtype(), DType::Bool);
    assert!(
        matches!(got.kind(), crate::te::ExprKind::Cmp(..)),
        "stays a comparison: {got:?}"
    );
}

#[test]
fn guard_conjunction_keeps_the_undecided_half() {
    let (x, r) = (var("x", 4), var("r", 3));
    let h = &x * 2 + &r;
    let guard = h.ge(1) & h.lt(9);
    simplified_is(&guard, &h.ge(1));
}

#[test]
fn guard_constants_move_and_divide_out() {
    let i = var("i", 10);
    simplified_is(&(&i * 4 + 3).lt(20), &i.lt(5));
}

#[test]
fn split_guards_become_bounds_on_the_outer_variable() {
    let (i0, i1) = (var("i0", 20), var("i1", 8));
    let i = &i0 * 8 + &i1;
    // 96 = 12*8: i < 96 exactly when i0 < 12.
    simplified_is(&i.lt(96), &i0.lt(12));
    // 99 = 12*8 + 3 with i1 up to 7: stays.
    let got = simplify(&i.lt(99));
    assert_eq!(node_count(&got), node_count(&i.lt(99)), "{got:?}");
    // Lower bounds too: j0*2 + j1 >= 10 exactly when j0 >= 5.
    let (j0, j1) = (var("j0", 20), var("j1", 2));
    simplified_is(&(&j0 * 2 + &j1).ge(10), &j0.ge(5));
    // Nested tiles: ((a*8 + b)*4 + c) < 100 exactly when a*8 + b < 25.
    let (a, b, c) = (var("a", 8), var("b", 8), var("c", 4));
    let inner = &a * 8 + &b;
    simplified_is(&((&inner * 4 + &c).lt(100)), &inner.lt(25));
}

#[test]
fn bounds_on_quotients_are_bounds_on_dividends() {
    let (a, b) = (var("a", 60), var("b", 7));
    let s = &a * 7 + &b;
    simplified_is(&floordiv(&s, 58).ge(1), &s.ge(58));
    simplified_is(&floordiv(&s, 58).lt(3), &s.lt(174));
}

#[test]
fn fused_digits_join() {
    let f = var("f", 1000);
    simplified_is(
        &(floormod(floordiv(&f, 3), 9) * 3 + floormod(&f, 3)),
        &floormod(&f, 27),
    );
}

/// The e-graph rules on their own, without the pre-pass and the linear
/// normalisation that usually get there first. (Distributing constants over
/// sums, as in `(i + 2)*3 - i*3`, is the linear normalisation's job only.)
#[test]
fn egg_rules_alone() {
    let (i, j) = (var("i", 10), var("j", 4));
    let f = var("f", 1000);
    let cases = [
        (floordiv(&f, 8) * 8 + floormod(&f, 8), f.clone()),
        (
            floormod(floordiv(&f, 3), 9) * 3 + floormod(&f, 3),
            floormod(&f, 27),
        ),
        ((&i * 4 + &j) - &i * 4, j.clone()),
        (floordiv(&i * 4 + &j, 4), i.clone()),
        (floormod(&j + &i * 4, 4), j.clone()),
        ((&i * 4 + 3).lt(20), i.lt(5)),
    ];
    for (e, want) in cases {
        let got = super::saturate::run(&e);
        assert!(
            got.as_ref() == Some(&want),
            "{e:?}: got {got:?}, want {want:?}"
        );
    }
}

#[test]
fn identities_and_cancellation() {
    let (i, j) = (var("i", 10), var("j", 4));
    simplified_is(&((&i * 4 + &j) - &i * 4), &j);
    simplified_is(&(&i * 1 + 0), &i);
    simplified_is(&((&i + 2) * 3 - 6), &(&i * 3));
    simplified_is(&(&i - &i), &Expr::i64(0));
}

#[test]
fn min_max_select_decided_by_ranges() {
    let i = var("i", 10);
    simplified_is(&min(&i, 100), &i);
    simplified_is(&max(&i, 0), &i);
    simplified_is(&select(i.lt(100), &i, 0), &i);
    simplified_is(&select(i.lt(5), &i, &i), &i);
}

#[test]
fn extent_one_variables_are_zero() {
    let (i, u) = (var("i", 10), var("u", 1));
    simplified_is(&(&i * 4 + &u), &(&i * 4));
}

#[test]
fn read_indices_inside_float_expressions_are_simplified() {
    let a = placeholder("A", &[10, 4], DType::F32);
    let (i, j) = (var("i", 10), var("j", 4));
    let e = exp(a.at([floordiv(&i * 4 + &j, 4), floormod(&i * 4 + &j, 4)])) * 2.0;
    let expected = exp(a.at([&i, &j])) * 2.0;
    simplified_is(&e, &expected);
}

#[test]
fn opaque_leaves_are_kept() {
    let a = placeholder("A", &[10], DType::F32);
    let i = var("i", 10);
    // A float comparison inside a guard: the read stays, the rest folds.
    let g = a.at([&i]).gt(0.0) & i.lt(10);
    simplified_is(&g, &a.at([&i]).gt(0.0));
    // i32 arithmetic wraps at 32 bits: left alone.
    let narrow = cast(DType::I32, &i) * 1 + 0;
    simplified_is(&narrow, &narrow);
}

#[test]
fn short_circuit_operands_are_not_reordered_when_they_may_fault() {
    let a = placeholder("A", &[8], DType::I64);
    let h = var("h", 10);
    // The read is only in bounds when the first operand holds.
    let g = h.lt(8) & a.at([&h]).gt(0);
    let got = simplify(&g);
    assert_eq!(got, g, "{got:?}");
}

#[test]
fn never_larger_and_deterministic() {
    let (i, j, k) = (var("i", 7), var("j", 5), var("k", 3));
    let exprs = [
        (&i * 5 + &j) * 3 + &k,
        floordiv(&i * 15 + &j * 3 + &k, 3),
        select((&i * 5 + &j).lt(30), floormod(&i * 5 + &j, 7), &k),
        min(&i * 5 + &j, 33) + max(&k - 1, 0),
    ];
    for e in &exprs {
        let once = simplify(e);
        assert!(node_count(&once) <= node_count(e), "{e:?} grew to {once:?}");
        assert_eq!(simplify(e), once, "not deterministic on {e:?}");
        assert_eq!(simplify(&once), once, "not idempotent on {e:?}");
    }
}

#[test]
fn node_count_counts_every_node() {
    let (i, j) = (var("i", 10), var("j", 4));
    assert_eq!(node_count(&i), 1);
    assert_eq!(node_count(&(&i * 4 + &j)), 5);
    let a = placeholder("A", &[10], DType::F32);
    // (*) (read A (+ i 1)) 2.0
    assert_eq!(node_count(&(a.at([&i + 1]) * 2.0)), 6);
}

/// Index expressions as the lowering of tiled matmul and conv2d produces them.
fn typical_index_expressions() -> Vec<Expr> {
    let (i0, i1, i2) = (var("i0.0", 8), var("i0.1", 8), var("i0.2", 4));
    let (j0, j1) = (var("j0", 16), var("j1", 8));
    let (k0, k1) = (var("k0", 32), var("k1", 4));
    let f = var("f", 56 * 56);
    let (x, r) = (var("x", 28), var("r", 3));
    let i = (&i0 * 8 + &i1) * 4 + &i2;
    let j = &j0 * 8 + &j1;
    let k = &k0 * 4 + &k1;
    let h = &x * 2 + &r;
    vec![
        i.clone(),
        &i * 128 + &j,
        &i * 512 + &k,
        i.lt(100),
        (&i * 4 + 1).lt(1000),
        floordiv(&f, 56),
        floormod(&f, 56),
        floordiv(&f, 56) * 56 + floormod(&f, 56),
        floordiv(&i, 4),
        floormod(&i, 4),
        floordiv(&j, 8) * 8 + floormod(&j, 8),
        (&h - 1) * 56 + floormod(&f, 56),
        h.ge(1) & h.lt(57),
        h.ge(1) & h.lt(56) & k.lt(128),
        select(i.lt(200), &i * 2, 0),
        min(&j, 127) + floordiv(&k, 4) * 4,
    ]
}

/// Average seconds per `simplify` call over `rounds` passes on `exprs`,
/// with the per-thread memo emptied before every call when `cold`.
fn time_per_call(exprs: &[Expr], rounds: usize, cold: bool) -> f64 {
    let mut total = std::time::Duration::ZERO;
    for _ in 0..rounds {
        for e in exprs {
            if cold {
                cache::clear();
            }
            let start = Instant::now();
            std::hint::black_box(simplify(std::hint::black_box(e)));
            total += start.elapsed();
        }
    }
    total.as_secs_f64() / (rounds * exprs.len()) as f64
}

#[test]
fn timing_of_typical_index_expressions() {
    let exprs = typical_index_expressions();
    let rounds = if cfg!(debug_assertions) { 3 } else { 100 };
    let (mut before, mut after) = (0, 0);
    let mut lines = Vec::new();
    for e in &exprs {
        let s = simplify(e);
        let (b, a) = (node_count(e), node_count(&s));
        assert!(a <= b, "{e:?} grew to {s:?}");
        before += b;
        after += a;
        cache::clear();
        let cold = time_per_call(std::slice::from_ref(e), rounds, true);
        lines.push(format!(
            "  {:8.1} us  {b:2} -> {a:2} nodes  {e:?}  =>  {s:?}",
            cold * 1e6
        ));
    }
    assert!(after < before, "nothing simplified: {before} nodes");
    let cold = time_per_call(&exprs, rounds, true);
    cache::clear();
    let warm = time_per_call(&exprs, rounds, false);
    println!(
        "simplify ({} build), {} typical index expressions, nodes {before} -> {after}:\n\
         cold (memo emptied before each call): {:.1} us per call\n\
         warm (memo reused, as in tuning):     {:.1} us per call\n\
         cold per expression:\n{}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        exprs.len(),
        cold * 1e6,
        warm * 1e6,
        lines.join("\n"),
    );
}
