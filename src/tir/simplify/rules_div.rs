//! Division and modulo by positive constants.
//!
//! With `c > 0` and exact (non-wrapping) integers, floor division satisfies
//! `floordiv(a + b, c) = floordiv(a, c) + floordiv(b, c)` whenever `c`
//! divides `a`, and `floormod(a + b, c) = floormod(b, c)`. Each rule checks
//! with the ranges that the sums and products it looks through cannot wrap,
//! so the wrapped `i64` values are the exact ones.

use egg::Id;

use super::analysis::Graph;
use super::appliers::{
    Rw, add_fits, divides, konst, mul_fits, num, positive, range, rw, rw_build, rw_if,
};
use super::interval::gcd;
use super::language::IndexLang;

/// The division and modulo rules.
pub(super) fn rules() -> Result<Vec<Rw>, String> {
    Ok(vec![
        rw("floordiv-one", "(floordiv ?a 1)", "?a")?,
        rw("tdiv-one", "(/ ?a 1)", "?a")?,
        rw("floormod-one", "(floormod ?a 1)", "0")?,
        // Truncation and floor agree on non-negative dividends and on exact
        // quotients.
        rw_if(
            "tdiv-to-floordiv",
            "(/ ?a ?c)",
            "(floordiv ?a ?c)",
            &["?a", "?c"],
            |g, v| positive(g, v[1]).is_some_and(|c| range(g, v[0]).lo >= 0 || divides(g, c, v[0])),
        )?,
        // floordiv(a + b, c) = floordiv(a, c) + floordiv(b, c) when c | a.
        rw_if(
            "floordiv-split",
            "(floordiv (+ ?a ?b) ?c)",
            "(+ (floordiv ?a ?c) (floordiv ?b ?c))",
            &["?a", "?b", "?c"],
            |g, v| {
                positive(g, v[2]).is_some_and(|c| divides(g, c, v[0])) && add_fits(g, v[0], v[1])
            },
        )?,
        // floordiv(a + b, c) = floordiv(a / k, c / k) when k | a, k | c and
        // 0 <= b < k (b cannot reach the next multiple of k).
        rw_build(
            "floordiv-drop-low",
            "(floordiv (+ ?a ?b) ?c)",
            &["?a", "?b", "?c"],
            drop_low,
        )?,
        // floordiv(x * k, c) = x * (k / c) when c | k, or floordiv(x, c / k)
        // when k | c.
        rw_build(
            "floordiv-mul",
            "(floordiv (* ?x ?k) ?c)",
            &["?x", "?k", "?c"],
            floordiv_mul,
        )?,
        // floordiv(floordiv(x, a), b) = floordiv(x, a * b) for a, b > 0.
        rw_build(
            "floordiv-nest",
            "(floordiv (floordiv ?x ?a) ?b)",
            &["?x", "?a", "?b"],
            |g, v| {
                let (a, b) = (positive(g, v[1])?, positive(g, v[2])?);
                let ab = num(g, a.checked_mul(b)?);
                Some(g.add(IndexLang::FloorDiv([v[0], ab])))
            },
        )?,
        rw_if(
            "floormod-small",
            "(floormod ?a ?c)",
            "?a",
            &["?a", "?c"],
            |g, v| positive(g, v[1]).is_some_and(|c| range(g, v[0]).within(0, c - 1)),
        )?,
        // floormod(a + b, c) = floormod(b, c) when c | a.
        rw_if(
            "floormod-split",
            "(floormod (+ ?a ?b) ?c)",
            "(floormod ?b ?c)",
            &["?a", "?b", "?c"],
            |g, v| {
                positive(g, v[2]).is_some_and(|c| divides(g, c, v[0])) && add_fits(g, v[0], v[1])
            },
        )?,
        // floormod(a + b, c) = floormod(a, c) + b when k | a, k | c and
        // 0 <= b < k (b stays below the next multiple of k).
        rw_build(
            "floormod-keep-low",
            "(floormod (+ ?a ?b) ?c)",
            &["?a", "?b", "?c"],
            |g, v| {
                let (a, b) = (v[0], v[1]);
                let c = positive(g, v[2])?;
                let k = i64::try_from(gcd(super::appliers::mult(g, a), c.unsigned_abs())).ok()?;
                if k <= 1 || !range(g, b).within(0, k - 1) || !add_fits(g, a, b) {
                    return None;
                }
                let low = g.add(IndexLang::FloorMod([a, v[2]]));
                Some(g.add(IndexLang::Add([low, b])))
            },
        )?,
        // floormod(x * k, c) = floormod(x, c / k) * k when k | c.
        rw_build(
            "floormod-mul",
            "(floormod (* ?x ?k) ?c)",
            &["?x", "?k", "?c"],
            |g, v| {
                let (k, c) = (positive(g, v[1])?, positive(g, v[2])?);
                if c % k != 0 || !mul_fits(g, v[0], v[1]) {
                    return None;
                }
                let q = num(g, c / k);
                let m = g.add(IndexLang::FloorMod([v[0], q]));
                Some(g.add(IndexLang::Mul([m, v[1]])))
            },
        )?,
        // floormod(floormod(x, a), b) = floormod(x, b) when b | a.
        rw_if(
            "floormod-nest",
            "(floormod (floormod ?x ?a) ?b)",
            "(floormod ?x ?b)",
            &["?a", "?b"],
            |g, v| matches!((positive(g, v[0]), positive(g, v[1])), (Some(a), Some(b)) if a % b == 0),
        )?,
        // floordiv(a, c) * c + floormod(a, c) = a (also when the product
        // wraps: ring arithmetic modulo 2^64).
        rw_if(
            "divmod-recombine",
            "(+ (* (floordiv ?a ?c) ?c) (floormod ?a ?c))",
            "?a",
            &["?c"],
            |g, v| positive(g, v[0]).is_some(),
        )?,
        // floormod(floordiv(x, a), b) * a + floormod(x, a) = floormod(x, a*b):
        // the digits of x in base a, joined (exact for all x, a, b > 0).
        rw_build(
            "divmod-join",
            "(+ (* (floormod (floordiv ?x ?a) ?b) ?a) (floormod ?x ?a))",
            &["?x", "?a", "?b"],
            |g, v| {
                let (a, b) = (positive(g, v[1])?, positive(g, v[2])?);
                let ab = num(g, a.checked_mul(b)?);
                Some(g.add(IndexLang::FloorMod([v[0], ab])))
            },
        )?,
    ])
}

fn drop_low(g: &mut Graph, v: &[Id]) -> Option<Id> {
    let (a, b) = (v[0], v[1]);
    let c = positive(g, v[2])?;
    let k = gcd(super::appliers::mult(g, a), c.unsigned_abs());
    let k = i64::try_from(k).ok()?;
    // k == c is floordiv-split's case (and floordiv(b, c) folds to 0).
    if k <= 1 || k >= c || !range(g, b).within(0, k - 1) || !add_fits(g, a, b) {
        return None;
    }
    let k_id = num(g, k);
    let a_over_k = g.add(IndexLang::FloorDiv([a, k_id]));
    let c_over_k = num(g, c / k);
    Some(g.add(IndexLang::FloorDiv([a_over_k, c_over_k])))
}

fn floordiv_mul(g: &mut Graph, v: &[Id]) -> Option<Id> {
    let (x, k_id) = (v[0], v[1]);
    let k = konst(g, k_id)?;
    let c = positive(g, v[2])?;
    if !mul_fits(g, x, k_id) {
        return None;
    }
    if k % c == 0 {
        let q = num(g, k / c);
        Some(g.add(IndexLang::Mul([x, q])))
    } else if k > 0 && c % k == 0 {
        let q = num(g, c / k);
        Some(g.add(IndexLang::FloorDiv([x, q])))
    } else {
        None
    }
}
