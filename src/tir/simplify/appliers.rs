//! Rule plumbing: conditions on the analysis data of pattern variables, an
//! applier that computes its right-hand side, and small accessors.

use egg::{
    Applier, Condition, ConditionalApplier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, Var,
};

use super::analysis::{Graph, IndexAnalysis};
use super::interval::Range;
use super::language::IndexLang;

/// A rewrite of the simplifier's e-graph.
pub(super) type Rw = Rewrite<IndexLang, IndexAnalysis>;

/// The most pattern variables a condition or builder reads.
const MAX_VARS: usize = 4;

fn parse_vars(names: &[&str]) -> Result<Vec<Var>, String> {
    if names.len() > MAX_VARS {
        return Err(format!("at most {MAX_VARS} variables: {names:?}"));
    }
    names
        .iter()
        .map(|n| {
            n.parse::<Var>()
                .map_err(|e| format!("bad variable {n}: {e:?}"))
        })
        .collect()
}

fn lookup(vars: &[Var], subst: &Subst) -> Option<[Id; MAX_VARS]> {
    let mut ids = [Id::from(0usize); MAX_VARS];
    for (slot, v) in ids.iter_mut().zip(vars) {
        *slot = *subst.get(*v)?;
    }
    Some(ids)
}

fn pattern(name: &str, text: &str) -> Result<Pattern<IndexLang>, String> {
    text.parse()
        .map_err(|e| format!("rule {name}: bad pattern {text}: {e:?}"))
}

/// A condition on the classes bound to some pattern variables.
struct When<F> {
    vars: Vec<Var>,
    test: F,
}

impl<F> Condition<IndexLang, IndexAnalysis> for When<F>
where
    F: Fn(&Graph, &[Id]) -> bool,
{
    fn check(&self, egraph: &mut Graph, _eclass: Id, subst: &Subst) -> bool {
        match lookup(&self.vars, subst) {
            Some(ids) => (self.test)(egraph, &ids),
            None => false,
        }
    }

    fn vars(&self) -> Vec<Var> {
        self.vars.clone()
    }
}

/// An applier that adds whatever `build` returns (if anything) to the matched
/// class; used where the right-hand side needs computed constants.
struct Build<F> {
    vars: Vec<Var>,
    build: F,
}

impl<F> Applier<IndexLang, IndexAnalysis> for Build<F>
where
    F: Fn(&mut Graph, &[Id]) -> Option<Id>,
{
    fn apply_one(
        &self,
        egraph: &mut Graph,
        eclass: Id,
        subst: &Subst,
        _searcher_ast: Option<&PatternAst<IndexLang>>,
        _rule_name: Symbol,
    ) -> Vec<Id> {
        let Some(ids) = lookup(&self.vars, subst) else {
            return vec![];
        };
        match (self.build)(egraph, &ids) {
            Some(new) if egraph.union(eclass, new) => vec![eclass],
            _ => vec![],
        }
    }

    fn vars(&self) -> Vec<Var> {
        self.vars.clone()
    }
}

/// `lhs => rhs`, valid for every value.
pub(super) fn rw(name: &str, lhs: &str, rhs: &str) -> Result<Rw, String> {
    Rewrite::new(name, pattern(name, lhs)?, pattern(name, rhs)?)
}

/// `lhs => rhs` where `test` holds on the classes bound to `vars`.
pub(super) fn rw_if<F>(
    name: &str,
    lhs: &str,
    rhs: &str,
    vars: &[&str],
    test: F,
) -> Result<Rw, String>
where
    F: Fn(&Graph, &[Id]) -> bool + Send + Sync + 'static,
{
    let applier = ConditionalApplier {
        condition: When {
            vars: parse_vars(vars)?,
            test,
        },
        applier: pattern(name, rhs)?,
    };
    Rewrite::new(name, pattern(name, lhs)?, applier)
}

/// `lhs => build(classes bound to vars)`, when `build` returns a class.
pub(super) fn rw_build<F>(name: &str, lhs: &str, vars: &[&str], build: F) -> Result<Rw, String>
where
    F: Fn(&mut Graph, &[Id]) -> Option<Id> + Send + Sync + 'static,
{
    let applier = Build {
        vars: parse_vars(vars)?,
        build,
    };
    Rewrite::new(name, pattern(name, lhs)?, applier)
}

/// The integer constant of a class, if it is one.
pub(super) fn konst(g: &Graph, id: Id) -> Option<i64> {
    g[id].data.int_const()
}

/// The positive integer constant of a class, if it is one.
pub(super) fn positive(g: &Graph, id: Id) -> Option<i64> {
    konst(g, id).filter(|&c| c > 0)
}

/// The value range of a class.
pub(super) fn range(g: &Graph, id: Id) -> Range {
    g[id].data.range
}

/// A known divisor of a class's value (`0`: the value is zero).
pub(super) fn mult(g: &Graph, id: Id) -> u64 {
    g[id].data.mult
}

/// Whether evaluating the class may fault.
pub(super) fn may_fault(g: &Graph, id: Id) -> bool {
    g[id].data.may_fault
}

/// Whether `a + b` never wraps.
pub(super) fn add_fits(g: &Graph, a: Id, b: Id) -> bool {
    range(g, a).checked_add(range(g, b)).is_some()
}

/// Whether `a * b` never wraps.
pub(super) fn mul_fits(g: &Graph, a: Id, b: Id) -> bool {
    range(g, a).checked_mul(range(g, b)).is_some()
}

/// Whether the positive `c` divides every value of the class.
pub(super) fn divides(g: &Graph, c: i64, id: Id) -> bool {
    c > 0 && mult(g, id).is_multiple_of(c.unsigned_abs())
}

/// Adds the constant `v`.
pub(super) fn num(g: &mut Graph, v: i64) -> Id {
    g.add(IndexLang::Num(v))
}
