//! Seeded property test: random integer and boolean expressions keep their
//! value (wherever the original evaluates without fault) and never grow.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::{node_count, simplify};
use crate::te::{
    BinOp, CmpOp, Const, Expr, ExprKind, IterKind, Var, floordiv, floormod, max, min, select,
};

/// A value of the evaluator: integers wrap like `i64` index arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    I(i64),
    B(bool),
}

fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q.wrapping_sub(1)
    } else {
        q
    }
}

/// Evaluates like the reference interpreter; `None` is a fault (division by
/// zero). `select`, `&&` and `||` evaluate lazily.
fn eval(e: &Expr, vars: &[Var], values: &[i64]) -> Option<Val> {
    let int = |x: &Expr| match eval(x, vars, values)? {
        Val::I(v) => Some(v),
        Val::B(b) => Some(b as i64),
    };
    let boolean = |x: &Expr| match eval(x, vars, values)? {
        Val::B(b) => Some(b),
        Val::I(v) => Some(v != 0),
    };
    Some(match e.kind() {
        ExprKind::Const(Const::Int(v)) => Val::I(*v),
        ExprKind::Const(Const::Bool(b)) => Val::B(*b),
        ExprKind::Var(v) => Val::I(values[vars.iter().position(|w| w == v)?]),
        ExprKind::Neg(a) => Val::I(int(a)?.wrapping_neg()),
        ExprKind::Not(a) => Val::B(!boolean(a)?),
        ExprKind::Binary(BinOp::And, a, b) => Val::B(boolean(a)? && boolean(b)?),
        ExprKind::Binary(BinOp::Or, a, b) => Val::B(boolean(a)? || boolean(b)?),
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (int(a)?, int(b)?);
            if matches!(op, BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod) && y == 0 {
                return None;
            }
            Val::I(match op {
                BinOp::Add => x.wrapping_add(y),
                BinOp::Sub => x.wrapping_sub(y),
                BinOp::Mul => x.wrapping_mul(y),
                BinOp::Div => x.wrapping_div(y),
                BinOp::FloorDiv => floor_div(x, y),
                BinOp::FloorMod => x.wrapping_sub(floor_div(x, y).wrapping_mul(y)),
                BinOp::Min => x.min(y),
                BinOp::Max => x.max(y),
                BinOp::And | BinOp::Or => return None,
            })
        }
        ExprKind::Cmp(op, a, b) => {
            let (x, y) = (int(a)?, int(b)?);
            Val::B(match op {
                CmpOp::Eq => x == y,
                CmpOp::Ne => x != y,
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                CmpOp::Ge => x >= y,
            })
        }
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => {
            if boolean(cond)? {
                eval(then, vars, values)?
            } else {
                eval(otherwise, vars, values)?
            }
        }
        _ => return None,
    })
}

struct Gen {
    rng: StdRng,
    vars: Vec<Var>,
}

impl Gen {
    fn var(&mut self) -> Expr {
        let i = self.rng.random_range(0..self.vars.len());
        self.vars[i].expr()
    }

    fn small_const(&mut self) -> i64 {
        self.rng.random_range(-6..24)
    }

    /// A constant that is sometimes huge, to exercise wrapping.
    fn any_const(&mut self) -> i64 {
        match self.rng.random_range(0..20) {
            0 => i64::MAX - self.rng.random_range(0..4),
            1 => i64::MIN + self.rng.random_range(0..4),
            2 => 1 << self.rng.random_range(40..63),
            _ => self.small_const(),
        }
    }

    fn divisor(&mut self) -> Expr {
        match self.rng.random_range(0..10) {
            0 => self.var(),
            1 => Expr::i64(-self.rng.random_range(1..5)),
            _ => Expr::i64(self.rng.random_range(1..10)),
        }
    }

    fn int(&mut self, depth: u32) -> Expr {
        if depth == 0 || self.rng.random_range(0..10) < 2 {
            return if self.rng.random_range(0..3) == 0 {
                Expr::i64(self.any_const())
            } else {
                self.var()
            };
        }
        let d = depth - 1;
        match self.rng.random_range(0..16) {
            0 | 1 => self.int(d) + self.int(d),
            2 => self.int(d) - self.int(d),
            3 => self.int(d) * self.small_const(),
            4 => self.int(d) * self.int(d),
            // A split index: outer * c + inner.
            5 | 6 => {
                let c = self.rng.random_range(1..9);
                self.int(d) * c + self.int(d)
            }
            7 => floordiv(self.int(d), self.divisor()),
            8 => floormod(self.int(d), self.divisor()),
            9 => self.int(d) / self.divisor(),
            // A fused index taken apart and put back together.
            10 => {
                let (x, c) = (self.int(d), self.rng.random_range(1..9));
                floordiv(&x, c) * c + floormod(&x, c)
            }
            11 => min(self.int(d), self.int(d)),
            12 => max(self.int(d), self.int(d)),
            13 => select(self.boolean(d), self.int(d), self.int(d)),
            14 => -self.int(d),
            _ => self.int(d) + self.small_const(),
        }
    }

    fn boolean(&mut self, depth: u32) -> Expr {
        if depth == 0 {
            return Expr::bool(self.rng.random_range(0..2) == 0);
        }
        let d = depth - 1;
        match self.rng.random_range(0..10) {
            0 => self.int(d).lt(self.int(d)),
            1 => self.int(d).le(self.any_const()),
            2 => self.int(d).gt(self.small_const()),
            3 => self.int(d).ge(self.int(d)),
            4 => self.int(d).equal(self.int(d)),
            5 => self.int(d).not_equal(self.small_const()),
            6 => self.boolean(d) & self.boolean(d),
            7 => self.boolean(d) | self.boolean(d),
            8 => !self.boolean(d),
            _ => select(self.boolean(d), self.boolean(d), self.boolean(d)),
        }
    }
}

#[test]
fn random_expressions_keep_their_value_and_never_grow() {
    for seed in [0x7e55e7a, 17, 2024] {
        check_random_expressions(seed);
    }
}

fn check_random_expressions(seed: u64) {
    let mut source = Gen {
        rng: StdRng::seed_from_u64(seed),
        vars: Vec::new(),
    };
    let (mut before, mut after, mut checked) = (0, 0, 0);
    let mut slowest = std::time::Duration::ZERO;
    for case in 0..800 {
        let nvars = source.rng.random_range(1..5);
        source.vars = (0..nvars)
            .map(|v| {
                let extent = match source.rng.random_range(0..6) {
                    0 => 1,
                    _ => source.rng.random_range(1..40),
                };
                Var::new(format!("v{v}"), extent, IterKind::Spatial)
            })
            .collect();
        let depth = source.rng.random_range(1..5);
        let e = if case % 3 == 0 {
            source.boolean(depth)
        } else {
            source.int(depth)
        };
        super::cache::clear();
        let start = std::time::Instant::now();
        let s = simplify(&e);
        slowest = slowest.max(start.elapsed());
        assert!(
            node_count(&s) <= node_count(&e),
            "seed {seed} case {case}: grew\n  {e:?}\n  {s:?}"
        );
        assert_eq!(
            s.dtype(),
            e.dtype(),
            "seed {seed} case {case}: dtype changed"
        );
        before += node_count(&e);
        after += node_count(&s);
        let vars = source.vars.clone();
        for trial in 0..40 {
            let values: Vec<i64> = vars
                .iter()
                .map(|v| match trial {
                    0 => 0,
                    1 => v.extent() - 1,
                    _ => source.rng.random_range(0..v.extent()),
                })
                .collect();
            let Some(want) = eval(&e, &vars, &values) else {
                continue; // the original faults here: nothing to preserve
            };
            checked += 1;
            let got = eval(&s, &vars, &values);
            assert_eq!(
                got,
                Some(want),
                "seed {seed} case {case}: values {values:?}\n  original   {e:?}\n  simplified {s:?}"
            );
        }
    }
    assert!(checked > 10_000, "only {checked} evaluations");
    assert!(
        after * 10 < before * 9,
        "simplification barely shrinks: {before} -> {after} nodes"
    );
    println!(
        "property test (seed {seed}): {checked} evaluations, nodes {before} -> {after}, \
         slowest call {:.0} us",
        slowest.as_secs_f64() * 1e6
    );
}

/// Every value of every variable (extents must be small).
fn all_assignments(vars: &[Var]) -> Vec<Vec<i64>> {
    let mut out = vec![Vec::new()];
    for v in vars {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                (0..v.extent()).map(move |x| {
                    let mut p = prefix.clone();
                    p.push(x);
                    p
                })
            })
            .collect();
    }
    out
}

#[test]
fn wrapping_sums_and_products_are_not_divided_through() {
    let x = Var::new("x", 4, IterKind::Spatial);
    let j = Var::new("j", 4, IterKind::Spatial);
    let vars = [x.clone(), j.clone()];
    let (xe, je) = (x.expr(), j.expr());
    let big = 1i64 << 62;
    // x * 2^62 wraps for x >= 2: none of the exact-integer identities hold.
    let cases = [
        floordiv(&xe * big + &je, 4),
        floormod(&xe * big + &je, 3),
        floordiv(&xe * big, 4),
        (&xe * big + 1).lt(5),
        (&xe * big).le(big),
        (&xe * big + &je).lt(&xe * big + 2),
        floordiv(&xe * big + &je, 8) * 8 + floormod(&xe * big + &je, 8),
        max(&xe * big, 0),
        floordiv(&xe + (i64::MAX - 2), 2),
    ];
    for e in &cases {
        let s = simplify(e);
        for values in all_assignments(&vars) {
            let want = eval(e, &vars, &values);
            if want.is_some() {
                assert_eq!(eval(&s, &vars, &values), want, "{values:?}: {e:?} -> {s:?}");
            }
        }
    }
}
