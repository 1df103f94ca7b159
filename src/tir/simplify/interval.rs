//! Integer ranges of wrapping `i64` values, shared by the e-graph analysis and
//! the constant-folding pre-pass.
//!
//! A [`Range`] bounds the *wrapped* value an expression takes for every value
//! of its loop variables. Each operation is computed exactly in `i128`; when
//! the exact result may leave `i64` (the hardware value would wrap) the result
//! is [`Range::FULL`], so a range is always sound for wrapping arithmetic.
//! Booleans are the range `[0, 1]` (false = 0, true = 1).

use crate::te::{BinOp, CmpOp};

/// A closed interval `[lo, hi]` of `i64` values (never empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Range {
    pub lo: i64,
    pub hi: i64,
}

impl Range {
    /// Every `i64` value: nothing is known.
    pub const FULL: Range = Range {
        lo: i64::MIN,
        hi: i64::MAX,
    };

    /// A boolean whose value is unknown.
    pub const BOOL: Range = Range { lo: 0, hi: 1 };

    /// The single value `v`.
    pub fn point(v: i64) -> Range {
        Range { lo: v, hi: v }
    }

    /// The value of a boolean constant.
    pub fn of_bool(b: bool) -> Range {
        Range::point(b as i64)
    }

    /// `[lo, hi]`, or [`Range::FULL`] when `lo > hi` (an empty range only
    /// arises from contradictory facts; claiming nothing is always sound).
    pub fn new(lo: i64, hi: i64) -> Range {
        if lo <= hi {
            Range { lo, hi }
        } else {
            Range::FULL
        }
    }

    /// The exact range `[lo, hi]`, or `None` if it does not fit in `i64`.
    pub fn exact(lo: i128, hi: i128) -> Option<Range> {
        let lo = i64::try_from(lo).ok()?;
        let hi = i64::try_from(hi).ok()?;
        Some(Range::new(lo, hi))
    }

    /// The range of a loop variable over `0..extent` (unknown if `extent < 1`).
    pub fn of_extent(extent: i64) -> Range {
        if extent >= 1 {
            Range::new(0, extent - 1)
        } else {
            Range::FULL
        }
    }

    /// The value, if the range holds exactly one.
    pub fn as_point(self) -> Option<i64> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// Whether every value lies in `[lo, hi]`.
    pub fn within(self, lo: i64, hi: i64) -> bool {
        self.lo >= lo && self.hi <= hi
    }

    /// Whether zero is a possible value.
    pub fn contains_zero(self) -> bool {
        self.lo <= 0 && 0 <= self.hi
    }

    /// Values in both ranges; `self` if they do not overlap (which sound
    /// ranges of one value never do).
    pub fn intersect(self, o: Range) -> Range {
        let (lo, hi) = (self.lo.max(o.lo), self.hi.min(o.hi));
        if lo <= hi { Range { lo, hi } } else { self }
    }

    /// The smallest range holding both.
    pub fn union(self, o: Range) -> Range {
        Range {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }

    fn corners(self, o: Range, f: impl Fn(i128, i128) -> i128) -> Option<Range> {
        let c = [
            f(self.lo as i128, o.lo as i128),
            f(self.lo as i128, o.hi as i128),
            f(self.hi as i128, o.lo as i128),
            f(self.hi as i128, o.hi as i128),
        ];
        let lo = c.iter().copied().min()?;
        let hi = c.iter().copied().max()?;
        Range::exact(lo, hi)
    }

    /// `self + o`, or `None` if the sum may wrap.
    pub fn add(self, o: Range) -> Option<Range> {
        Range::exact(
            self.lo as i128 + o.lo as i128,
            self.hi as i128 + o.hi as i128,
        )
    }

    /// `self - o`, or `None` if the difference may wrap.
    pub fn sub(self, o: Range) -> Option<Range> {
        Range::exact(
            self.lo as i128 - o.hi as i128,
            self.hi as i128 - o.lo as i128,
        )
    }

    /// `self * o`, or `None` if the product may wrap.
    pub fn mul(self, o: Range) -> Option<Range> {
        self.corners(o, |a, b| a * b)
    }

    /// `-self`, or `None` if the negation may wrap.
    pub fn neg(self) -> Option<Range> {
        Range::exact(-(self.hi as i128), -(self.lo as i128))
    }

    /// Floor division; unknown when the divisor may be zero.
    pub fn floordiv(self, o: Range) -> Range {
        if o.contains_zero() {
            return Range::FULL;
        }
        self.corners(o, floor_div).unwrap_or(Range::FULL)
    }

    /// Truncating division; unknown when the divisor may be zero.
    pub fn truncdiv(self, o: Range) -> Range {
        if o.contains_zero() {
            return Range::FULL;
        }
        self.corners(o, |a, b| a / b).unwrap_or(Range::FULL)
    }

    /// Floor modulo (sign of the divisor); unknown when the divisor may be zero.
    pub fn floormod(self, o: Range) -> Range {
        if o.lo > 0 {
            if let Some(c) = o.as_point() {
                let (q_lo, q_hi) = (
                    floor_div(self.lo as i128, c as i128),
                    floor_div(self.hi as i128, c as i128),
                );
                if q_lo == q_hi {
                    // No multiple of c is crossed: the value is shifted.
                    let shift = q_lo * c as i128;
                    return Range::exact(self.lo as i128 - shift, self.hi as i128 - shift)
                        .unwrap_or(Range::FULL);
                }
            }
            // A non-negative dividend only shrinks.
            let hi = if self.lo >= 0 {
                self.hi.min(o.hi - 1)
            } else {
                o.hi - 1
            };
            Range::new(0, hi)
        } else if o.hi < 0 {
            Range::new(o.lo.saturating_add(1), 0)
        } else {
            Range::FULL
        }
    }

    /// The smaller of two values.
    pub fn min(self, o: Range) -> Range {
        Range::new(self.lo.min(o.lo), self.hi.min(o.hi))
    }

    /// The larger of two values.
    pub fn max(self, o: Range) -> Range {
        Range::new(self.lo.max(o.lo), self.hi.max(o.hi))
    }
}

/// Division rounding towards negative infinity (`b != 0`).
pub(super) fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// Whether `a op b` is decided for all values: `Some(true)`, `Some(false)`,
/// or `None` when the ranges overlap in a way that allows both answers.
pub(super) fn decide(op: CmpOp, a: Range, b: Range) -> Option<bool> {
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

/// The range of a comparison's result.
pub(super) fn compare(op: CmpOp, a: Range, b: Range) -> Range {
    decide(op, a, b).map_or(Range::BOOL, Range::of_bool)
}

/// The range of a short-circuit `&&`: false if either side is false.
pub(super) fn and(a: Range, b: Range) -> Range {
    match (a.as_point(), b.as_point()) {
        (Some(0), _) | (_, Some(0)) => Range::of_bool(false),
        (Some(1), Some(1)) => Range::of_bool(true),
        _ => Range::BOOL,
    }
}

/// The range of a short-circuit `||`: true if either side is true.
pub(super) fn or(a: Range, b: Range) -> Range {
    match (a.as_point(), b.as_point()) {
        (Some(1), _) | (_, Some(1)) => Range::of_bool(true),
        (Some(0), Some(0)) => Range::of_bool(false),
        _ => Range::BOOL,
    }
}

/// The range of a logical negation.
pub(super) fn not(a: Range) -> Range {
    match a.as_point() {
        Some(v) => Range::of_bool(v == 0),
        None => Range::BOOL,
    }
}

/// The range of `select(cond, then, otherwise)`.
pub(super) fn select(cond: Range, then: Range, otherwise: Range) -> Range {
    match cond.as_point() {
        Some(1) => then,
        Some(0) => otherwise,
        _ => then.union(otherwise),
    }
}

/// The value of `a op b` for constant operands, as the interpreter computes
/// it; `None` for a division by zero (left in place: it faults at run time).
pub(super) fn eval(op: BinOp, a: i64, b: i64) -> Option<i64> {
    let floor = |a: i64, b: i64| -> i64 {
        let q = a.wrapping_div(b);
        if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
            q.wrapping_sub(1)
        } else {
            q
        }
    };
    if matches!(op, BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod) && b == 0 {
        return None;
    }
    Some(match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => a.wrapping_div(b),
        BinOp::FloorDiv => floor(a, b),
        BinOp::FloorMod => a.wrapping_sub(floor(a, b).wrapping_mul(b)),
        BinOp::Min => a.min(b),
        BinOp::Max => a.max(b),
        BinOp::And | BinOp::Or => return None,
    })
}

/// Greatest common divisor (`gcd(0, x) = x`).
pub(super) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_is_exact_or_unknown() {
        let r = Range::new(0, 7);
        assert_eq!(r.add(Range::point(3)), Some(Range::new(3, 10)));
        assert_eq!(r.mul(Range::point(-2)), Some(Range::new(-14, 0)));
        assert_eq!(Range::point(i64::MAX).add(Range::point(1)), None);
        assert_eq!(Range::point(i64::MIN).neg(), None);
        assert_eq!(r.floordiv(Range::new(0, 2)), Range::FULL);
        assert_eq!(
            Range::new(-5, 7).floordiv(Range::point(4)),
            Range::new(-2, 1)
        );
    }

    #[test]
    fn floormod_ranges() {
        assert_eq!(Range::new(0, 3).floormod(Range::point(4)), Range::new(0, 3));
        assert_eq!(
            Range::new(8, 11).floormod(Range::point(4)),
            Range::new(0, 3)
        );
        assert_eq!(
            Range::new(9, 10).floormod(Range::point(4)),
            Range::new(1, 2)
        );
        assert_eq!(Range::new(0, 9).floormod(Range::point(4)), Range::new(0, 3));
        assert_eq!(
            Range::new(-3, 9).floormod(Range::point(-4)),
            Range::new(-3, 0)
        );
        assert_eq!(
            Range::new(0, 9).floormod(Range::new(3, 20)),
            Range::new(0, 9)
        );
    }

    #[test]
    fn comparisons_are_decided_only_when_certain() {
        let a = Range::new(0, 63);
        assert_eq!(decide(CmpOp::Lt, a, Range::point(64)), Some(true));
        assert_eq!(decide(CmpOp::Lt, a, Range::point(63)), None);
        assert_eq!(decide(CmpOp::Ge, a, Range::point(0)), Some(true));
        assert_eq!(decide(CmpOp::Eq, a, Range::point(64)), Some(false));
        assert_eq!(
            decide(CmpOp::Ne, Range::point(2), Range::point(2)),
            Some(false)
        );
    }
}
