//! The rewrite rules: ring identities, min/max, logic and select here;
//! division in [`rules_div`](super::rules_div), comparisons in
//! [`rules_cmp`](super::rules_cmp).
//!
//! Every rule keeps the value of the expression for every value of its
//! variables under wrapping `i64` arithmetic. Ring identities (`+ - *`) hold
//! modulo 2^64 and need no condition; rules involving division, ordering or
//! min/max check that nothing they rely on can wrap. A rule may remove a
//! possible fault (`x * 0 → 0` drops a division by zero inside `x`) but never
//! introduces one: divisions are only created with positive constant
//! divisors, and short-circuit operands are only reordered when the operand
//! moved first cannot fault.

use std::sync::OnceLock;

use super::appliers::{Rw, konst, may_fault, range, rw, rw_if};
use super::{rules_cmp, rules_div};

/// All rules, built once.
pub(super) fn rules() -> &'static [Rw] {
    static RULES: OnceLock<Vec<Rw>> = OnceLock::new();
    RULES.get_or_init(|| {
        build().unwrap_or_else(|err| {
            // Only a typo in a rule's pattern text gets here; the unit tests
            // build the rules, so it cannot ship. Simplify with no rules.
            debug_assert!(false, "{err}");
            Vec::new()
        })
    })
}

/// Builds every rule, or names the first malformed one.
pub(super) fn build() -> Result<Vec<Rw>, String> {
    let mut all = ring()?;
    all.extend(rules_div::rules()?);
    all.extend(rules_cmp::rules()?);
    all.extend(min_max()?);
    all.extend(logic()?);
    all.extend(select()?);
    Ok(all)
}

/// Identities of the ring of `i64` values modulo 2^64.
///
/// Distributing a constant over a sum (`(a + b)*c → a*c + b*c`) is valid but
/// not here: with associativity and commutativity it multiplies the e-graph
/// several times over for every nested tile. The linear normalisation that
/// runs before the e-graph (`linear`) expands and collects sums instead;
/// the division rules below look through products (`floordiv-mul`,
/// `floormod-mul`) rather than needing them expanded.
fn ring() -> Result<Vec<Rw>, String> {
    Ok(vec![
        rw("add-comm", "(+ ?a ?b)", "(+ ?b ?a)")?,
        rw("add-assoc", "(+ ?a (+ ?b ?c))", "(+ (+ ?a ?b) ?c)")?,
        rw("mul-comm", "(* ?a ?b)", "(* ?b ?a)")?,
        // Only constants are regrouped in products: index arithmetic rarely
        // multiplies variables, and full associativity doubles the e-graph.
        rw_if(
            "mul-const-assoc",
            "(* (* ?a ?b) ?c)",
            "(* ?a (* ?b ?c))",
            &["?b", "?c"],
            |g, v| konst(g, v[0]).is_some() && konst(g, v[1]).is_some(),
        )?,
        rw("add-zero", "(+ ?a 0)", "?a")?,
        rw("mul-one", "(* ?a 1)", "?a")?,
        rw("mul-zero", "(* ?a 0)", "0")?,
        rw("sub-zero", "(- ?a 0)", "?a")?,
        rw("sub-self", "(- ?a ?a)", "0")?,
        rw("sub-canon", "(- ?a ?b)", "(+ ?a (* ?b -1))")?,
        rw("sub-uncanon", "(+ ?a (* ?b -1))", "(- ?a ?b)")?,
        rw("neg-canon", "(neg ?a)", "(* ?a -1)")?,
        rw("neg-uncanon", "(* ?a -1)", "(neg ?a)")?,
        rw("add-self", "(+ ?a ?a)", "(* ?a 2)")?,
        rw("factor", "(+ (* ?a ?b) (* ?a ?c))", "(* ?a (+ ?b ?c))")?,
        rw("factor-one", "(+ ?a (* ?a ?b))", "(* ?a (+ ?b 1))")?,
    ])
}

/// Minimum and maximum: symmetric, idempotent, decided by ranges.
fn min_max() -> Result<Vec<Rw>, String> {
    Ok(vec![
        rw("min-comm", "(min ?a ?b)", "(min ?b ?a)")?,
        rw("max-comm", "(max ?a ?b)", "(max ?b ?a)")?,
        rw("min-self", "(min ?a ?a)", "?a")?,
        rw("max-self", "(max ?a ?a)", "?a")?,
        rw_if("min-decided", "(min ?a ?b)", "?a", &["?a", "?b"], |g, v| {
            range(g, v[0]).hi <= range(g, v[1]).lo
        })?,
        rw_if("max-decided", "(max ?a ?b)", "?a", &["?a", "?b"], |g, v| {
            range(g, v[0]).lo >= range(g, v[1]).hi
        })?,
    ])
}

/// Short-circuit `&&`, `||` and `!`. The analysis folds constant operands'
/// results; these rules drop the operands that no longer matter.
fn logic() -> Result<Vec<Rw>, String> {
    let moved_first_is_safe = |g: &super::analysis::Graph, v: &[egg::Id]| !may_fault(g, v[0]);
    Ok(vec![
        rw("and-true-l", "(&& true ?a)", "?a")?,
        rw("and-true-r", "(&& ?a true)", "?a")?,
        rw("or-false-l", "(|| false ?a)", "?a")?,
        rw("or-false-r", "(|| ?a false)", "?a")?,
        rw("and-self", "(&& ?a ?a)", "?a")?,
        rw("or-self", "(|| ?a ?a)", "?a")?,
        rw("and-contra", "(&& ?a (! ?a))", "false")?,
        rw("or-excluded", "(|| ?a (! ?a))", "true")?,
        rw("not-not", "(! (! ?a))", "?a")?,
        // Evaluation order a, b, c is kept, so these are always safe.
        rw("and-assoc-l", "(&& ?a (&& ?b ?c))", "(&& (&& ?a ?b) ?c)")?,
        rw("and-assoc-r", "(&& (&& ?a ?b) ?c)", "(&& ?a (&& ?b ?c))")?,
        rw("or-assoc-l", "(|| ?a (|| ?b ?c))", "(|| (|| ?a ?b) ?c)")?,
        rw("or-assoc-r", "(|| (|| ?a ?b) ?c)", "(|| ?a (|| ?b ?c))")?,
        // `b` is evaluated first afterwards: only when it cannot fault.
        rw_if(
            "and-comm",
            "(&& ?a ?b)",
            "(&& ?b ?a)",
            &["?b"],
            moved_first_is_safe,
        )?,
        rw_if(
            "or-comm",
            "(|| ?a ?b)",
            "(|| ?b ?a)",
            &["?b"],
            moved_first_is_safe,
        )?,
    ])
}

/// `select` with a known or negated condition, or equal branches.
fn select() -> Result<Vec<Rw>, String> {
    Ok(vec![
        rw("select-true", "(select true ?a ?b)", "?a")?,
        rw("select-false", "(select false ?a ?b)", "?b")?,
        rw("select-same", "(select ?c ?a ?a)", "?a")?,
        rw("select-not", "(select (! ?c) ?a ?b)", "(select ?c ?b ?a)")?,
    ])
}
