//! Comparisons. The analysis decides comparisons whose operand ranges do not
//! overlap; these rules normalise `>`/`>=`, negate under `!`, and move
//! constants out of the compared expressions so guards shrink (`i*4 + 3 < 20`
//! becomes `i < 5`). Moving a term across a comparison is only valid when the
//! sum or product it came from cannot wrap, which each rule checks.

use egg::Id;

use super::analysis::Graph;
use super::appliers::{Rw, add_fits, konst, mul_fits, num, positive, range, rw, rw_build, rw_if};
use super::interval::floor_div;
use super::language::IndexLang;

type Ctor = fn([Id; 2]) -> IndexLang;

/// The comparisons kept after normalisation, with their pattern symbols.
const KEPT: [(&str, Ctor); 4] = [
    ("<", IndexLang::Lt),
    ("<=", IndexLang::Le),
    ("==", IndexLang::Eq),
    ("!=", IndexLang::Ne),
];

/// The comparison rules.
pub(super) fn rules() -> Result<Vec<Rw>, String> {
    let mut all = vec![
        rw("gt-flip", "(> ?a ?b)", "(< ?b ?a)")?,
        rw("ge-flip", "(>= ?a ?b)", "(<= ?b ?a)")?,
        rw("lt-self", "(< ?a ?a)", "false")?,
        rw("le-self", "(<= ?a ?a)", "true")?,
        rw("eq-self", "(== ?a ?a)", "true")?,
        rw("ne-self", "(!= ?a ?a)", "false")?,
        rw("eq-comm", "(== ?a ?b)", "(== ?b ?a)")?,
        rw("ne-comm", "(!= ?a ?b)", "(!= ?b ?a)")?,
        rw("not-lt", "(! (< ?a ?b))", "(<= ?b ?a)")?,
        rw("not-le", "(! (<= ?a ?b))", "(< ?b ?a)")?,
        rw("not-eq", "(! (== ?a ?b))", "(!= ?a ?b)")?,
        rw("not-ne", "(! (!= ?a ?b))", "(== ?a ?b)")?,
    ];
    for (op, ctor) in KEPT {
        all.extend(move_constant(op, ctor)?);
        all.push(rw_if(
            &format!("cancel-{op}"),
            &format!("({op} (+ ?a ?b) (+ ?a ?c))"),
            &format!("({op} ?b ?c)"),
            &["?a", "?b", "?c"],
            |g, v| add_fits(g, v[0], v[1]) && add_fits(g, v[0], v[2]),
        )?);
    }
    all.extend(divide_by_coefficient()?);
    all.extend(compare_quotient()?);
    all.extend(split_bounds()?);
    all.extend(merge_bounds()?);
    Ok(all)
}

/// `(a + k) op c → a op (c - k)` and `c op (a + k) → (c - k) op a`.
fn move_constant(op: &str, ctor: Ctor) -> Result<Vec<Rw>, String> {
    let shifted = |g: &mut Graph, v: &[Id]| -> Option<(Id, Id)> {
        let (k, c) = (konst(g, v[1])?, konst(g, v[2])?);
        if !add_fits(g, v[0], v[1]) {
            return None;
        }
        Some((v[0], num(g, c.checked_sub(k)?)))
    };
    Ok(vec![
        rw_build(
            &format!("move-const-l{op}"),
            &format!("({op} (+ ?a ?k) ?c)"),
            &["?a", "?k", "?c"],
            move |g, v| {
                let (a, d) = shifted(g, v)?;
                Some(g.add(ctor([a, d])))
            },
        )?,
        rw_build(
            &format!("move-const-r{op}"),
            &format!("({op} ?c (+ ?a ?k))"),
            &["?a", "?k", "?c"],
            move |g, v| {
                let (a, d) = shifted(g, v)?;
                Some(g.add(ctor([d, a])))
            },
        )?,
    ])
}

/// Comparisons of `a * k` (`k > 0`) with a constant compare `a` instead.
fn divide_by_coefficient() -> Result<Vec<Rw>, String> {
    // (a, k, c) with k > 0 and a * k not wrapping.
    fn parts(g: &Graph, v: &[Id]) -> Option<(i128, i128)> {
        let k = positive(g, v[1])?;
        let c = konst(g, v[2])?;
        mul_fits(g, v[0], v[1]).then_some((k as i128, c as i128))
    }
    fn ceil_div(c: i128, k: i128) -> i128 {
        -floor_div(-c, k)
    }
    fn add_cmp(
        g: &mut Graph,
        ctor: Ctor,
        lhs: Result<Id, i128>,
        rhs: Result<Id, i128>,
    ) -> Option<Id> {
        let mut side = |s: Result<Id, i128>| -> Option<Id> {
            match s {
                Ok(id) => Some(id),
                Err(v) => Some(num(g, i64::try_from(v).ok()?)),
            }
        };
        let (l, r) = (side(lhs)?, side(rhs)?);
        Some(g.add(ctor([l, r])))
    }
    let vars = &["?a", "?k", "?c"];
    Ok(vec![
        // a*k < c  ⇔  a < ceil(c / k)
        rw_build("coef-lt-l", "(< (* ?a ?k) ?c)", vars, |g, v| {
            let (k, c) = parts(g, v)?;
            add_cmp(g, IndexLang::Lt, Ok(v[0]), Err(ceil_div(c, k)))
        })?,
        // a*k <= c  ⇔  a <= floor(c / k)
        rw_build("coef-le-l", "(<= (* ?a ?k) ?c)", vars, |g, v| {
            let (k, c) = parts(g, v)?;
            add_cmp(g, IndexLang::Le, Ok(v[0]), Err(floor_div(c, k)))
        })?,
        // c < a*k  ⇔  floor(c / k) < a
        rw_build("coef-lt-r", "(< ?c (* ?a ?k))", vars, |g, v| {
            let (k, c) = parts(g, v)?;
            add_cmp(g, IndexLang::Lt, Err(floor_div(c, k)), Ok(v[0]))
        })?,
        // c <= a*k  ⇔  ceil(c / k) <= a
        rw_build("coef-le-r", "(<= ?c (* ?a ?k))", vars, |g, v| {
            let (k, c) = parts(g, v)?;
            add_cmp(g, IndexLang::Le, Err(ceil_div(c, k)), Ok(v[0]))
        })?,
        // a*k == c  ⇔  a == c / k if k | c, else never.
        rw_build("coef-eq", "(== (* ?a ?k) ?c)", vars, |g, v| {
            let (k, c) = parts(g, v)?;
            if c % k == 0 {
                add_cmp(g, IndexLang::Eq, Ok(v[0]), Err(c / k))
            } else {
                Some(g.add(IndexLang::Bool(false)))
            }
        })?,
        rw_build("coef-ne", "(!= (* ?a ?k) ?c)", vars, |g, v| {
            let (k, c) = parts(g, v)?;
            if c % k == 0 {
                add_cmp(g, IndexLang::Ne, Ok(v[0]), Err(c / k))
            } else {
                Some(g.add(IndexLang::Bool(true)))
            }
        })?,
    ])
}

/// A bound on `floordiv(a, c)` (`c > 0`) is a bound on `a`:
/// `floordiv(a, c) < k ⇔ a < k*c`. Exact: floor division cannot wrap.
fn compare_quotient() -> Result<Vec<Rw>, String> {
    // (a, c, k) with c > 0, and the bound k*c or (k+1)*c.
    fn scaled(g: &mut Graph, v: &[Id], plus_one: bool) -> Option<Id> {
        let (c, k) = (positive(g, v[1])?, konst(g, v[2])?);
        let k = if plus_one { k.checked_add(1)? } else { k };
        Some(num(g, k.checked_mul(c)?))
    }
    let vars = &["?a", "?c", "?k"];
    Ok(vec![
        // floordiv(a, c) < k  ⇔  a < k*c
        rw_build("quot-lt-l", "(< (floordiv ?a ?c) ?k)", vars, |g, v| {
            let b = scaled(g, v, false)?;
            Some(g.add(IndexLang::Lt([v[0], b])))
        })?,
        // floordiv(a, c) <= k  ⇔  a < (k+1)*c
        rw_build("quot-le-l", "(<= (floordiv ?a ?c) ?k)", vars, |g, v| {
            let b = scaled(g, v, true)?;
            Some(g.add(IndexLang::Lt([v[0], b])))
        })?,
        // k < floordiv(a, c)  ⇔  (k+1)*c <= a
        rw_build("quot-lt-r", "(< ?k (floordiv ?a ?c))", vars, |g, v| {
            let b = scaled(g, v, true)?;
            Some(g.add(IndexLang::Le([b, v[0]])))
        })?,
        // k <= floordiv(a, c)  ⇔  k*c <= a
        rw_build("quot-le-r", "(<= ?k (floordiv ?a ?c))", vars, |g, v| {
            let b = scaled(g, v, false)?;
            Some(g.add(IndexLang::Le([b, v[0]])))
        })?,
    ])
}

/// `a*k + b < c` with `0 <= b < k` (`k > 0`) is a bound on `a` alone when
/// `b` cannot reach past `c`'s remainder: with `c = q*k + r`, it holds
/// exactly when `a < q` if `r = 0`, and when `a <= q` if `b < r` always.
fn split_bounds() -> Result<Vec<Rw>, String> {
    /// `Q` with `a*k + b < strict ⇔ a < Q`, if there is one.
    fn bound_on_a(g: &Graph, v: &[Id], strict: i128) -> Option<i64> {
        let (a, k_id, b) = (v[0], v[1], v[2]);
        let k = positive(g, k_id)?;
        let rb = range(g, b);
        // a*k + b must not wrap.
        range(g, a).checked_mul(range(g, k_id))?.checked_add(rb)?;
        let k = k as i128;
        let q = floor_div(strict, k);
        let r = strict - q * k;
        if rb.lo < 0 || rb.hi as i128 >= k {
            return None;
        }
        let bound = if r == 0 {
            q
        } else if (rb.hi as i128) < r {
            q + 1
        } else {
            return None;
        };
        i64::try_from(bound).ok()
    }
    let vars = &["?a", "?k", "?b", "?c"];
    // (pattern, the constant is on the left, strict bound = c + offset)
    let shapes = [
        ("(< (+ (* ?a ?k) ?b) ?c)", false, 0),
        ("(<= (+ (* ?a ?k) ?b) ?c)", false, 1),
        // c < s ⇔ !(s < c + 1);  c <= s ⇔ !(s < c)
        ("(< ?c (+ (* ?a ?k) ?b))", true, 1),
        ("(<= ?c (+ (* ?a ?k) ?b))", true, 0),
    ];
    let mut all = Vec::new();
    for (n, (lhs, negated, offset)) in shapes.into_iter().enumerate() {
        all.push(rw_build(
            &format!("split-bound-{n}"),
            lhs,
            vars,
            move |g, v| {
                let c = konst(g, v[3])? as i128;
                let q = bound_on_a(g, v, c + offset)?;
                let q = num(g, q);
                Some(if negated {
                    g.add(IndexLang::Le([q, v[0]]))
                } else {
                    g.add(IndexLang::Lt([v[0], q]))
                })
            },
        )?);
    }
    Ok(all)
}

/// Two bounds of one expression joined by `&&`/`||` become one bound.
fn merge_bounds() -> Result<Vec<Rw>, String> {
    let both = |g: &Graph, v: &[Id]| Some((konst(g, v[1])?, konst(g, v[2])?));
    let vars = &["?a", "?k", "?l"];
    let mut all = Vec::new();
    for (op, ctor) in [("<", IndexLang::Lt as Ctor), ("<=", IndexLang::Le as Ctor)] {
        // Upper bounds a op k: `&&` keeps the smaller, `||` the larger.
        for (logic, pick) in [("&&", i64::min as fn(i64, i64) -> i64), ("||", i64::max)] {
            all.push(rw_build(
                &format!("merge-upper{op}{logic}"),
                &format!("({logic} ({op} ?a ?k) ({op} ?a ?l))"),
                vars,
                move |g, v| {
                    let (k, l) = both(g, v)?;
                    let bound = num(g, pick(k, l));
                    Some(g.add(ctor([v[0], bound])))
                },
            )?);
        }
        // Lower bounds k op a: `&&` keeps the larger, `||` the smaller.
        for (logic, pick) in [("&&", i64::max as fn(i64, i64) -> i64), ("||", i64::min)] {
            all.push(rw_build(
                &format!("merge-lower{op}{logic}"),
                &format!("({logic} ({op} ?k ?a) ({op} ?l ?a))"),
                vars,
                move |g, v| {
                    let (k, l) = both(g, v)?;
                    let bound = num(g, pick(k, l));
                    Some(g.add(ctor([bound, v[0]])))
                },
            )?);
        }
    }
    Ok(all)
}
