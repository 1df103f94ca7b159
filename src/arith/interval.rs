//! The one integer interval type: the values an integer expression can take,
//! with the arithmetic, comparison and boolean operations on such sets.
//!
//! Bounds are `i64`. Every operation is computed exactly in `i128` and then
//! read back under an explicit [`Overflow`] policy, because the callers mean
//! two different things by an integer:
//!
//! - [`Overflow::Wrap`]: the machine's wrapping `i64` (the simplifier). A
//!   result that may leave `i64` is [`Interval::FULL`], so a range stays
//!   sound for wrapping arithmetic; the checked methods ([`Interval::checked_add`]…)
//!   say `None` instead.
//! - [`Overflow::Saturate`]: mathematical integers (te's index analysis).
//!   The ends `i64::MIN` / `i64::MAX` are −∞ / +∞ and a bound beyond them
//!   stays there, so `[0, +∞) + 1` is `[1, +∞)`.
//!
//! `lo > hi` is the empty set (a branch no value reaches); no operation of
//! the wrapping policy produces one from non-empty operands.

use std::fmt;

use crate::te::{BinOp, CmpOp};

/// How a bound that leaves `i64` is read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// The value is a wrapping `i64`: a bound beyond `i64` means any value.
    Wrap,
    /// The value is a mathematical integer: `i64::MIN` / `i64::MAX` are
    /// infinite and a bound beyond them saturates there.
    Saturate,
}

/// Where infinite bounds sit while a saturating result is computed.
const INFINITY: i128 = 1 << 100;

/// A closed interval `[lo, hi]` of integers; `lo > hi` is empty. Under
/// [`Overflow::Saturate`], `i64::MIN` / `i64::MAX` are unbounded ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interval {
    /// The smallest value.
    pub lo: i64,
    /// The largest value.
    pub hi: i64,
}

impl Interval {
    /// Every value: nothing is known (unbounded on both sides).
    pub const FULL: Interval = Interval {
        lo: i64::MIN,
        hi: i64::MAX,
    };

    /// A boolean whose value is unknown (false = 0, true = 1).
    pub const BOOL: Interval = Interval { lo: 0, hi: 1 };

    /// `[lo, hi]` as given (empty when `lo > hi`).
    pub fn new(lo: i64, hi: i64) -> Interval {
        Interval { lo, hi }
    }

    /// The single value `v`.
    pub fn point(v: i64) -> Interval {
        Interval { lo: v, hi: v }
    }

    /// The value of a boolean constant.
    pub fn of_bool(b: bool) -> Interval {
        Interval::point(b as i64)
    }

    /// The exact interval `[lo, hi]`, or `None` if it does not fit in `i64`.
    pub fn exact(lo: i128, hi: i128) -> Option<Interval> {
        Some(Interval::new(
            i64::try_from(lo).ok()?,
            i64::try_from(hi).ok()?,
        ))
    }

    /// A loop variable over `0..extent`; unknown ([`Interval::FULL`]) if
    /// `extent < 1`, which no loop that runs has.
    pub fn of_extent(extent: i64) -> Interval {
        if extent >= 1 {
            Interval::new(0, extent - 1)
        } else {
            Interval::FULL
        }
    }

    /// Whether no value lies in the interval.
    pub fn is_empty(self) -> bool {
        self.lo > self.hi
    }

    /// The value, if the interval holds exactly one.
    pub fn as_point(self) -> Option<i64> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// Whether every value lies in `[lo, hi]` (true when empty).
    pub fn within(self, lo: i64, hi: i64) -> bool {
        self.is_empty() || (self.lo >= lo && self.hi <= hi)
    }

    /// Whether zero is a possible value.
    pub fn contains_zero(self) -> bool {
        self.lo <= 0 && 0 <= self.hi
    }

    /// The values in both (empty when they do not overlap).
    pub fn intersect(self, o: Interval) -> Interval {
        Interval::new(self.lo.max(o.lo), self.hi.min(o.hi))
    }

    /// Two sound intervals of one value combined: the values in both, or
    /// `self` when they do not overlap (contradictory facts; claiming less is
    /// always sound, and the result is never empty).
    pub fn refine(self, o: Interval) -> Interval {
        let both = self.intersect(o);
        if both.is_empty() { self } else { both }
    }

    /// The smallest interval holding both.
    pub fn union(self, o: Interval) -> Interval {
        if self.is_empty() {
            return o;
        }
        if o.is_empty() {
            return self;
        }
        Interval::new(self.lo.min(o.lo), self.hi.max(o.hi))
    }

    /// `self + o` exactly, or `None` if the sum may leave `i64` (wrap).
    pub fn checked_add(self, o: Interval) -> Option<Interval> {
        exact(
            BinOp::Add,
            self.widen(Overflow::Wrap),
            o.widen(Overflow::Wrap),
        )
    }

    /// `self - o` exactly, or `None` if the difference may wrap.
    pub fn checked_sub(self, o: Interval) -> Option<Interval> {
        exact(
            BinOp::Sub,
            self.widen(Overflow::Wrap),
            o.widen(Overflow::Wrap),
        )
    }

    /// `self * o` exactly, or `None` if the product may wrap.
    pub fn checked_mul(self, o: Interval) -> Option<Interval> {
        exact(
            BinOp::Mul,
            self.widen(Overflow::Wrap),
            o.widen(Overflow::Wrap),
        )
    }

    /// `-self` exactly, or `None` if the negation may wrap.
    pub fn checked_neg(self) -> Option<Interval> {
        Interval::exact(-(self.hi as i128), -(self.lo as i128))
    }

    /// `-self` under `overflow`.
    pub fn negate(self, overflow: Overflow) -> Interval {
        Interval::point(0).binary(BinOp::Sub, self, overflow)
    }

    /// Floor division of wrapping values; unknown when the divisor may be zero.
    pub fn floordiv(self, o: Interval) -> Interval {
        self.binary(BinOp::FloorDiv, o, Overflow::Wrap)
    }

    /// Truncating division of wrapping values; unknown when the divisor may
    /// be zero.
    pub fn truncdiv(self, o: Interval) -> Interval {
        self.binary(BinOp::Div, o, Overflow::Wrap)
    }

    /// Floor modulo (sign of the divisor); unknown when the divisor may be zero.
    pub fn floormod(self, o: Interval) -> Interval {
        self.binary(BinOp::FloorMod, o, Overflow::Wrap)
    }

    /// The smaller of two values.
    pub fn min(self, o: Interval) -> Interval {
        self.binary(BinOp::Min, o, Overflow::Wrap)
    }

    /// The larger of two values.
    pub fn max(self, o: Interval) -> Interval {
        self.binary(BinOp::Max, o, Overflow::Wrap)
    }

    /// `self op o` under `overflow`: the values `a op b` takes for `a` in
    /// `self` and `b` in `o`. A division by a divisor that may be zero is
    /// unknown; `&&` and `||` are [`Interval::BOOL`] (see [`and`], [`or`]).
    pub fn binary(self, op: BinOp, o: Interval, overflow: Overflow) -> Interval {
        if matches!(op, BinOp::And | BinOp::Or) {
            return Interval::BOOL;
        }
        let Some((lo, hi)) = exact_wide(op, self.widen(overflow), o.widen(overflow)) else {
            return Interval::FULL;
        };
        match overflow {
            Overflow::Wrap => Interval::exact(lo, hi).unwrap_or(Interval::FULL),
            Overflow::Saturate => {
                let clamp = |v: i128| v.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
                Interval::new(clamp(lo), clamp(hi))
            }
        }
    }

    /// The bounds in `i128`, infinite ends moved out of `i64`'s reach when
    /// they are infinite.
    fn widen(self, overflow: Overflow) -> (i128, i128) {
        let (lo, hi) = (self.lo as i128, self.hi as i128);
        match overflow {
            Overflow::Wrap => (lo, hi),
            Overflow::Saturate => (
                if self.lo == i64::MIN { -INFINITY } else { lo },
                if self.hi == i64::MAX { INFINITY } else { hi },
            ),
        }
    }
}

/// `a op b` of widened bounds, exact in `i64` or `None`.
fn exact(op: BinOp, a: (i128, i128), b: (i128, i128)) -> Option<Interval> {
    let (lo, hi) = exact_wide(op, a, b)?;
    Interval::exact(lo, hi)
}

/// The exact bounds of `a op b`, or `None` when nothing is known (a divisor
/// that may be zero).
fn exact_wide(op: BinOp, a: (i128, i128), b: (i128, i128)) -> Option<(i128, i128)> {
    let corners = |f: fn(i128, i128) -> i128| {
        let c = [f(a.0, b.0), f(a.0, b.1), f(a.1, b.0), f(a.1, b.1)];
        Some((c.into_iter().min()?, c.into_iter().max()?))
    };
    let divisor_may_be_zero = b.0 <= 0 && 0 <= b.1;
    match op {
        BinOp::Add => Some((a.0 + b.0, a.1 + b.1)),
        BinOp::Sub => Some((a.0 - b.1, a.1 - b.0)),
        BinOp::Mul => corners(i128::saturating_mul),
        BinOp::Div if divisor_may_be_zero => None,
        BinOp::Div => corners(|x, y| x / y),
        BinOp::FloorDiv if divisor_may_be_zero => None,
        BinOp::FloorDiv => corners(floor_div),
        BinOp::FloorMod => floor_mod(a, b),
        BinOp::Min => Some((a.0.min(b.0), a.1.min(b.1))),
        BinOp::Max => Some((a.0.max(b.0), a.1.max(b.1))),
        BinOp::And | BinOp::Or => Some((0, 1)),
    }
}

/// The bounds of `floormod(a, b)` (sign of the divisor), `None` when the
/// divisor may be zero.
fn floor_mod(a: (i128, i128), b: (i128, i128)) -> Option<(i128, i128)> {
    if b.0 > 0 {
        if b.0 == b.1 {
            let c = b.0;
            let (q_lo, q_hi) = (floor_div(a.0, c), floor_div(a.1, c));
            if q_lo == q_hi {
                // No multiple of c is crossed: the value is shifted.
                return Some((a.0 - q_lo * c, a.1 - q_lo * c));
            }
        }
        // A non-negative dividend only shrinks.
        let hi = if a.0 >= 0 { a.1.min(b.1 - 1) } else { b.1 - 1 };
        Some((0, hi))
    } else if b.1 < 0 {
        Some((b.0 + 1, 0))
    } else {
        None
    }
}

impl fmt::Display for Interval {
    /// `[lo, hi]`, with `(-inf` / `+inf)` for unbounded ends.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == i64::MIN {
            write!(f, "(-inf, ")?;
        } else {
            write!(f, "[{}, ", self.lo)?;
        }
        if self.hi == i64::MAX {
            write!(f, "+inf)")
        } else {
            write!(f, "{}]", self.hi)
        }
    }
}

/// Division rounding towards negative infinity (`b != 0`).
pub fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// Greatest common divisor (`gcd(0, x) = x`).
pub fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether `a op b` is decided for all values: `Some(true)`, `Some(false)`,
/// or `None` when the intervals overlap in a way that allows both answers.
pub fn decide(op: CmpOp, a: Interval, b: Interval) -> Option<bool> {
    match op {
        CmpOp::Lt => {
            if a.hi < b.lo {
                Some(true)
            } else if a.lo >= b.hi {
                Some(false)
            } else {
                None
            }
        }
        CmpOp::Le => {
            if a.hi <= b.lo {
                Some(true)
            } else if a.lo > b.hi {
                Some(false)
            } else {
                None
            }
        }
        CmpOp::Gt => decide(CmpOp::Lt, b, a),
        CmpOp::Ge => decide(CmpOp::Le, b, a),
        CmpOp::Eq => {
            if a.hi < b.lo || b.hi < a.lo {
                Some(false)
            } else if a.as_point().is_some() && a == b {
                Some(true)
            } else {
                None
            }
        }
        CmpOp::Ne => decide(CmpOp::Eq, a, b).map(|v| !v),
    }
}

/// The interval of a comparison's result.
pub fn compare(op: CmpOp, a: Interval, b: Interval) -> Interval {
    decide(op, a, b).map_or(Interval::BOOL, Interval::of_bool)
}

/// The interval of a short-circuit `&&`: false if either side is false.
pub fn and(a: Interval, b: Interval) -> Interval {
    match (a.as_point(), b.as_point()) {
        (Some(0), _) | (_, Some(0)) => Interval::of_bool(false),
        (Some(1), Some(1)) => Interval::of_bool(true),
        _ => Interval::BOOL,
    }
}

/// The interval of a short-circuit `||`: true if either side is true.
pub fn or(a: Interval, b: Interval) -> Interval {
    match (a.as_point(), b.as_point()) {
        (Some(1), _) | (_, Some(1)) => Interval::of_bool(true),
        (Some(0), Some(0)) => Interval::of_bool(false),
        _ => Interval::BOOL,
    }
}

/// The interval of a logical negation.
pub fn not(a: Interval) -> Interval {
    match a.as_point() {
        Some(v) => Interval::of_bool(v == 0),
        None => Interval::BOOL,
    }
}

/// The interval of `select(cond, then, otherwise)`.
pub fn select(cond: Interval, then: Interval, otherwise: Interval) -> Interval {
    match cond.as_point() {
        Some(1) => then,
        Some(0) => otherwise,
        _ => then.union(otherwise),
    }
}

#[cfg(test)]
#[path = "interval_tests.rs"]
mod tests;
