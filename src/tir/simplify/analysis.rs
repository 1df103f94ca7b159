//! The e-class analysis: type, value range (constant folding when the range is
//! a single value), a known divisor of the value, and whether evaluating the
//! class may fault (division by a possibly-zero value, an opaque read).

use egg::{Analysis, DidMerge, EGraph, Id};

use super::interval::{self, Range, gcd};
use super::language::IndexLang;
use crate::te::{BinOp, CmpOp};

/// The e-graph type the simplifier runs on.
pub(super) type Graph = EGraph<IndexLang, IndexAnalysis>;

/// Whether a class holds an `i64` or a `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    Int,
    Bool,
}

/// What is known about an opaque leaf.
#[derive(Clone, Copy, Debug)]
pub(super) struct LeafInfo {
    pub ty: Ty,
    pub range: Range,
    pub may_fault: bool,
}

/// Per-class facts. All of them hold for every value of the loop variables
/// (where the expression is defined), under wrapping `i64` arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Data {
    pub ty: Ty,
    /// The value lies in this range; a single value makes the class constant.
    pub range: Range,
    /// The value is always a multiple of `mult` (`0`: the value is 0; `1`:
    /// nothing known).
    pub mult: u64,
    /// Evaluating the class may fault (so it must not be evaluated where the
    /// original expression would not have been, e.g. moved before a `&&`).
    pub may_fault: bool,
}

impl Data {
    /// The integer value, if the class is an integer constant.
    pub fn int_const(&self) -> Option<i64> {
        match self.ty {
            Ty::Int => self.range.as_point(),
            Ty::Bool => None,
        }
    }

    fn int(range: Range, mult: u64, may_fault: bool) -> Data {
        Data {
            ty: Ty::Int,
            range,
            mult,
            may_fault,
        }
    }

    fn boolean(range: Range, may_fault: bool) -> Data {
        Data {
            ty: Ty::Bool,
            range,
            mult: 1,
            may_fault,
        }
    }
}

/// The analysis, holding the ranges of this run's variables and leaves.
#[derive(Debug, Default)]
pub(super) struct IndexAnalysis {
    /// Extent of each loop variable slot.
    pub var_extents: Vec<i64>,
    /// Facts about each opaque leaf slot.
    pub leaves: Vec<LeafInfo>,
}

fn const_mult(v: i64) -> u64 {
    v.unsigned_abs()
}

/// The divisor known for `a * b` (when the product cannot wrap).
fn mul_mult(a: u64, b: u64) -> u64 {
    a.checked_mul(b).unwrap_or(a.max(b))
}

/// The divisor known for `a / c` when `c` divides `a` exactly.
fn quotient_mult(a: &Data, divisor: &Data) -> u64 {
    match divisor.int_const() {
        Some(c) if c != 0 && a.mult.is_multiple_of(c.unsigned_abs()) => a.mult / c.unsigned_abs(),
        _ => 1,
    }
}

fn arith(a: &Data, b: &Data, r: Option<Range>, mult: impl Fn() -> u64) -> Data {
    let may_fault = a.may_fault || b.may_fault;
    match r {
        Some(range) => Data::int(range, mult(), may_fault),
        // May wrap: the wrapped value keeps no useful divisor.
        None => Data::int(Range::FULL, 1, may_fault),
    }
}

fn division(a: &Data, b: &Data, range: Range, mult: u64) -> Data {
    let may_fault = a.may_fault || b.may_fault || b.range.contains_zero();
    Data::int(range, mult, may_fault)
}

fn comparison(op: CmpOp, a: &Data, b: &Data) -> Data {
    Data::boolean(
        interval::compare(op, a.range, b.range),
        a.may_fault || b.may_fault,
    )
}

impl IndexAnalysis {
    fn leaf(&self, slot: u32) -> Data {
        match self.leaves.get(slot as usize) {
            Some(info) => Data {
                ty: info.ty,
                range: info.range,
                mult: 1,
                may_fault: info.may_fault,
            },
            // Unknown slot: claim nothing.
            None => Data::int(Range::FULL, 1, true),
        }
    }
}

impl Analysis<IndexLang> for IndexAnalysis {
    type Data = Data;

    fn make(egraph: &mut Graph, enode: &IndexLang, _id: Id) -> Data {
        let d = |id: &Id| egraph[*id].data;
        if let Some(v) = fold_constants(egraph, enode) {
            return Data::int(Range::point(v), const_mult(v), false);
        }
        match enode {
            IndexLang::Num(v) => Data::int(Range::point(*v), const_mult(*v), false),
            IndexLang::Bool(b) => Data::boolean(Range::of_bool(*b), false),
            IndexLang::Var(slot) => {
                let extent = egraph
                    .analysis
                    .var_extents
                    .get(slot.0 as usize)
                    .copied()
                    .unwrap_or(0);
                Data::int(Range::of_extent(extent), 1, false)
            }
            IndexLang::Leaf(slot) => egraph.analysis.leaf(slot.0),
            IndexLang::Add([a, b]) => {
                let (a, b) = (d(a), d(b));
                arith(&a, &b, a.range.checked_add(b.range), || gcd(a.mult, b.mult))
            }
            IndexLang::Sub([a, b]) => {
                let (a, b) = (d(a), d(b));
                arith(&a, &b, a.range.checked_sub(b.range), || gcd(a.mult, b.mult))
            }
            IndexLang::Mul([a, b]) => {
                let (a, b) = (d(a), d(b));
                arith(&a, &b, a.range.checked_mul(b.range), || {
                    mul_mult(a.mult, b.mult)
                })
            }
            IndexLang::Neg(a) => {
                let a = d(a);
                arith(&a, &a, a.range.checked_neg(), || a.mult)
            }
            IndexLang::Div([a, b]) => {
                let (a, b) = (d(a), d(b));
                division(&a, &b, a.range.truncdiv(b.range), quotient_mult(&a, &b))
            }
            IndexLang::FloorDiv([a, b]) => {
                let (a, b) = (d(a), d(b));
                division(&a, &b, a.range.floordiv(b.range), quotient_mult(&a, &b))
            }
            IndexLang::FloorMod([a, b]) => {
                let (a, b) = (d(a), d(b));
                match b.int_const() {
                    // A multiple of the divisor leaves no remainder.
                    Some(c) if c != 0 && a.mult.is_multiple_of(c.unsigned_abs()) => {
                        division(&a, &b, Range::point(0), 0)
                    }
                    Some(c) if c != 0 => division(
                        &a,
                        &b,
                        a.range.floormod(b.range),
                        gcd(a.mult, c.unsigned_abs()),
                    ),
                    _ => division(&a, &b, a.range.floormod(b.range), 1),
                }
            }
            IndexLang::Min([a, b]) => {
                let (a, b) = (d(a), d(b));
                arith(&a, &b, Some(a.range.min(b.range)), || gcd(a.mult, b.mult))
            }
            IndexLang::Max([a, b]) => {
                let (a, b) = (d(a), d(b));
                arith(&a, &b, Some(a.range.max(b.range)), || gcd(a.mult, b.mult))
            }
            IndexLang::Lt([a, b]) => comparison(CmpOp::Lt, &d(a), &d(b)),
            IndexLang::Le([a, b]) => comparison(CmpOp::Le, &d(a), &d(b)),
            IndexLang::Gt([a, b]) => comparison(CmpOp::Gt, &d(a), &d(b)),
            IndexLang::Ge([a, b]) => comparison(CmpOp::Ge, &d(a), &d(b)),
            IndexLang::Eq([a, b]) => comparison(CmpOp::Eq, &d(a), &d(b)),
            IndexLang::Ne([a, b]) => comparison(CmpOp::Ne, &d(a), &d(b)),
            IndexLang::And([a, b]) => {
                let (a, b) = (d(a), d(b));
                Data::boolean(interval::and(a.range, b.range), a.may_fault || b.may_fault)
            }
            IndexLang::Or([a, b]) => {
                let (a, b) = (d(a), d(b));
                Data::boolean(interval::or(a.range, b.range), a.may_fault || b.may_fault)
            }
            IndexLang::Not(a) => {
                let a = d(a);
                Data::boolean(interval::not(a.range), a.may_fault)
            }
            IndexLang::Select([c, t, e]) => {
                let (c, t, e) = (d(c), d(t), d(e));
                Data {
                    ty: t.ty,
                    range: interval::select(c.range, t.range, e.range),
                    mult: gcd(t.mult, e.mult),
                    may_fault: c.may_fault || t.may_fault || e.may_fault,
                }
            }
        }
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        debug_assert_eq!(a.ty, b.ty, "merged an integer class with a boolean one");
        let merged = Data {
            ty: a.ty,
            range: a.range.refine(b.range),
            mult: lcm_or_larger(a.mult, b.mult),
            // Either representative may be extracted: stay conservative.
            may_fault: a.may_fault || b.may_fault,
        };
        let did = DidMerge(merged != *a, merged != b);
        *a = merged;
        did
    }

    fn modify(egraph: &mut Graph, id: Id) {
        let data = egraph[id].data;
        let Some(v) = data.range.as_point() else {
            return;
        };
        let node = match data.ty {
            Ty::Int => IndexLang::Num(v),
            Ty::Bool => IndexLang::Bool(v != 0),
        };
        let added = egraph.add(node);
        egraph.union(id, added);
        // The constant is the best representative: drop the rest.
        let id = egraph.find(id);
        egraph[id].nodes.retain(IndexLang::is_constant);
    }
}

/// The wrapped value of an arithmetic node whose operands are constants
/// (`None` for a division by zero, which is left to fault at run time).
fn fold_constants(egraph: &Graph, enode: &IndexLang) -> Option<i64> {
    let k = |id: &Id| egraph[*id].data.int_const();
    let (op, [a, b]) = match enode {
        IndexLang::Neg(a) => return Some(k(a)?.wrapping_neg()),
        IndexLang::Add(ids) => (BinOp::Add, ids),
        IndexLang::Sub(ids) => (BinOp::Sub, ids),
        IndexLang::Mul(ids) => (BinOp::Mul, ids),
        IndexLang::Div(ids) => (BinOp::Div, ids),
        IndexLang::FloorDiv(ids) => (BinOp::FloorDiv, ids),
        IndexLang::FloorMod(ids) => (BinOp::FloorMod, ids),
        IndexLang::Min(ids) => (BinOp::Min, ids),
        IndexLang::Max(ids) => (BinOp::Max, ids),
        _ => return None,
    };
    interval::eval(op, k(a)?, k(b)?)
}

/// A common multiple of two divisors (`0` means "the value is zero").
fn lcm_or_larger(a: u64, b: u64) -> u64 {
    if a == 0 || b == 0 {
        return 0;
    }
    (a / gcd(a, b)).checked_mul(b).unwrap_or(a.max(b))
}
