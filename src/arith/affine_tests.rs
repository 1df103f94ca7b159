//! Unit tests of [`Affine`]: building, coefficients and strides, flat
//! offsets, substitution, bounds, the compact expression and overflow.

use super::*;
use crate::te::{IterKind, Var, cast, floordiv, floormod, select};

fn var(name: &str, extent: i64) -> Var {
    Var::new(name, extent, IterKind::Spatial)
}

#[test]
fn builds_from_sums_differences_and_constant_products() {
    let (i, j) = (var("i", 8), var("j", 4));
    let e = (i.expr() * 3 + j.expr() - 5) * 2 - i.expr() + (-j.expr());
    let form = Affine::of(&e);
    assert_eq!(form.constant, -10);
    assert_eq!(form.coefficient(i.id()), Some(5));
    assert_eq!(form.coefficient(j.id()), Some(1));
    assert_eq!(form.terms.len(), 2);
    // Constant on either side of a product, and constant folding.
    let form = Affine::of(&(4 * i.expr() + Expr::i64(3) * Expr::i64(2)));
    assert_eq!((form.constant, form.coefficient(i.id())), (6, Some(4)));
    // Division by 1 is no division (a grouped convolution's channel).
    let form = Affine::of(&(floordiv(i.expr() * 2 + j.expr(), 1) * 1 + 3));
    assert_eq!(form.coefficient(i.id()), Some(2));
    assert_eq!(form.coefficient(j.id()), Some(1));
    assert_eq!(form.constant, 3);
}

#[test]
fn non_affine_uses_have_no_coefficient() {
    let (i, j) = (var("i", 8), var("j", 4));
    let other = var("k", 2);
    for e in [
        floordiv(i.expr(), 2) + j.expr(),
        i.expr() * j.expr(),
        select(i.expr().lt(4), i.expr(), 0i64),
        cast(DType::I32, i.expr()),
        // A non-affine use that cancels is still one.
        floormod(i.expr(), 3) * Expr::i64(0) + i.expr(),
    ] {
        let form = Affine::of(&e);
        assert_eq!(form.coefficient(i.id()), None, "{e}");
        assert!(form.depends_on(i.id()));
    }
    let form = Affine::of(&(floordiv(j.expr(), 2) + i.expr() - i.expr()));
    assert_eq!(form.coefficient(i.id()), Some(0));
    assert!(!form.depends_on(i.id()));
    assert_eq!(form.coefficient(other.id()), Some(0));
}

#[test]
fn decompose_options() {
    let i = var("i", 8);
    let through = Decompose {
        through_casts: true,
        ..Decompose::default()
    };
    let e = cast(DType::I64, cast(DType::I32, i.expr()) * 4);
    assert_eq!(Affine::with(&e, through).coefficient(i.id()), Some(4));
    assert_eq!(Affine::of(&e).coefficient(i.id()), None);
    // Only i64 nodes: 32-bit arithmetic wraps differently, so it is an atom.
    let narrow = cast(DType::I32, i.expr()) * 4;
    let only_i64 = Decompose {
        only_i64: true,
        ..Decompose::default()
    };
    let form = Affine::with(&narrow, only_i64);
    assert_eq!(form.terms, vec![(narrow.clone(), 1)]);
}

#[test]
fn strides_of_a_row_major_access() {
    let (i, k) = (var("i", 8), var("k", 4));
    let off = Affine::flat(
        &[i.expr() * 2 + 1, k.expr()],
        &[16, 4],
        Decompose::default(),
    );
    assert_eq!(off.coefficient(i.id()), Some(8));
    assert_eq!(off.coefficient(k.id()), Some(1));
    assert_eq!(off.constant, 4);
    let odd = Affine::flat(&[floordiv(i.expr(), 2)], &[4], Decompose::default());
    assert_eq!(odd.coefficient(i.id()), None);
}

#[test]
fn substitution() {
    let (i, o, n) = (var("i", 32), var("o", 8), var("n", 4));
    // i = o*4 + n, substituted into 3*i + 1.
    let form = Affine::of(&(i.expr() * 3 + 1));
    let split = Affine::of(&(o.expr() * 4 + n.expr()));
    let after = form.substitute(&i.expr(), &split);
    assert_eq!(after.constant, 1);
    assert_eq!(after.coefficient(o.id()), Some(12));
    assert_eq!(after.coefficient(n.id()), Some(3));
    assert_eq!(after.coefficient(i.id()), Some(0));
    assert_eq!(form.substitute(&o.expr(), &split), form);
}

#[test]
fn bounds_over_variable_ranges() {
    let (i, j) = (var("i", 8), var("j", 4));
    let form = Affine::of(&(i.expr() * 4 - j.expr() + 2));
    let extent = |a: &Expr| match a.kind() {
        ExprKind::Var(v) => Interval::of_extent(v.extent()),
        _ => Interval::FULL,
    };
    assert_eq!(form.bounds(extent, Overflow::Wrap), Interval::new(-1, 30));
    let (inner, outer) = form.partition(|a| *a == j.expr());
    assert_eq!(inner.bounds(extent, Overflow::Wrap), Interval::new(-1, 2));
    assert_eq!(outer.terms, vec![(i.expr(), 4)]);
    assert_eq!(outer.constant, 0);
    // An unknown atom: wrapping knows nothing, saturating keeps one side.
    let gather = Affine::of(&(floordiv(i.expr(), j.expr()) * Expr::i64(0) + i.expr()));
    assert_eq!(gather.bounds(extent, Overflow::Wrap), Interval::new(0, 7));
    let big = Affine::of(&(i.expr() * i64::MAX));
    assert_eq!(big.bounds(extent, Overflow::Wrap), Interval::FULL);
    assert_eq!(
        big.bounds(extent, Overflow::Saturate),
        Interval::new(0, i64::MAX)
    );
}

#[test]
fn coefficients_wrap_modulo_2_64() {
    let i = var("i", 8);
    let form = Affine::of(&((i.expr() * i64::MAX) * 2 + Expr::i64(i64::MAX) * 2));
    assert_eq!(form.coefficient(i.id()), Some(-2));
    assert_eq!(form.constant, -2);
    let scaled = Affine::of(&(i.expr() + i64::MIN)).scaled(-1);
    assert_eq!(scaled.constant, i64::MIN);
}

#[test]
fn compact_expression() {
    let (i, j, k) = (var("i", 8), var("j", 4), var("k", 2));
    let show = |e: Expr| Affine::of(&e).to_expr().to_string();
    assert_eq!(show(i.expr() * 3 + i.expr() + 1), "((i * 4) + 1)");
    assert_eq!(
        show(i.expr() * 2 + j.expr() * 2 + k.expr()),
        "(((i + j) * 2) + k)"
    );
    assert_eq!(show(Expr::i64(5) - i.expr()), "(5 - i)");
    assert_eq!(show(-i.expr() - j.expr()), "(-(i + j))");
    assert_eq!(show(i.expr() - j.expr() * 3 - 2), "((i - (j * 3)) - 2)");
    assert_eq!(show(i.expr() - i.expr()), "0");
    let e = i.expr() * 2 + floormod(j.expr(), 3) - 7;
    let rebuilt = Affine::of(&e).to_expr();
    assert_eq!(Affine::of(&rebuilt), Affine::of(&e));
}

#[test]
fn a_quotient_and_remainder_that_complete_each_other_are_their_dividend() {
    let (ow, f) = (var("ow", 112), var("f", 21));
    // The flat offset of `pad[ow·2 + f/3, f%3]` in rows of 3: `ow·6 + f`.
    let index = [ow.expr() * 2 + floordiv(f.expr(), 3), floormod(f.expr(), 3)];
    let form = Affine::flat(&index, &[230, 3], Decompose::EXACT);
    assert_eq!(form.coefficient(f.id()), Some(1));
    assert_eq!(form.coefficient(ow.id()), Some(6));
    // In either order, scaled, and with a negative divisor.
    for (e, coefficient) in [
        ((floormod(f.expr(), 3) + floordiv(f.expr(), 3) * 3) * 5, 5),
        (floordiv(f.expr(), -4) * -4 + floormod(f.expr(), -4), 1),
    ] {
        let form = Affine::of(&e);
        assert_eq!(form.coefficient(f.id()), Some(coefficient), "{e}");
        assert_eq!(form.terms.len(), 1, "{e}");
    }
    // Halves that do not complete each other stay atoms.
    for e in [
        floordiv(f.expr(), 3) * 2 + floormod(f.expr(), 3),
        floordiv(f.expr(), 3) * 3 + floormod(f.expr(), 4),
        floordiv(f.expr(), 3) * 3 + floormod(ow.expr(), 3),
    ] {
        assert_eq!(Affine::of(&e).coefficient(f.id()), None, "{e}");
    }
}
