//! Unit tests of [`Interval`]: both overflow policies, empty and unbounded
//! intervals, division and modulo, comparisons and the boolean operations.

use super::*;

const INF: i64 = i64::MAX;
const NEG_INF: i64 = i64::MIN;

fn sat(a: Interval, op: BinOp, b: Interval) -> Interval {
    a.binary(op, b, Overflow::Saturate)
}

#[test]
fn checked_arithmetic_is_exact_or_unknown() {
    let r = Interval::new(0, 7);
    assert_eq!(
        r.checked_add(Interval::point(3)),
        Some(Interval::new(3, 10))
    );
    assert_eq!(
        r.checked_sub(Interval::point(3)),
        Some(Interval::new(-3, 4))
    );
    assert_eq!(
        r.checked_mul(Interval::point(-2)),
        Some(Interval::new(-14, 0))
    );
    assert_eq!(r.checked_neg(), Some(Interval::new(-7, 0)));
    assert_eq!(
        Interval::point(i64::MAX).checked_add(Interval::point(1)),
        None
    );
    assert_eq!(
        Interval::point(i64::MIN).checked_sub(Interval::point(1)),
        None
    );
    assert_eq!(Interval::point(i64::MIN).checked_neg(), None);
    assert_eq!(
        Interval::point(1 << 32).checked_mul(Interval::point(1 << 32)),
        None
    );
}

#[test]
fn wrapping_overflow_means_nothing_is_known() {
    let big = Interval::new(0, i64::MAX);
    assert_eq!(
        big.binary(BinOp::Add, Interval::point(1), Overflow::Wrap),
        Interval::FULL
    );
    assert_eq!(
        Interval::point(i64::MIN).negate(Overflow::Wrap),
        Interval::FULL
    );
    // `MIN / -1` is the one division that overflows.
    assert_eq!(
        Interval::point(i64::MIN).truncdiv(Interval::point(-1)),
        Interval::FULL
    );
    assert_eq!(
        Interval::new(-5, 7).floordiv(Interval::point(4)),
        Interval::new(-2, 1)
    );
    assert_eq!(
        Interval::new(-5, 7).truncdiv(Interval::point(4)),
        Interval::new(-1, 1)
    );
}

#[test]
fn saturating_arithmetic_keeps_infinite_ends_infinite() {
    let from_zero = Interval::new(0, INF);
    assert_eq!(
        sat(from_zero, BinOp::Add, Interval::point(1)),
        Interval::new(1, INF)
    );
    assert_eq!(
        sat(from_zero, BinOp::Sub, Interval::point(1)),
        Interval::new(-1, INF)
    );
    assert_eq!(
        sat(from_zero, BinOp::Mul, Interval::point(-2)),
        Interval::new(NEG_INF, 0)
    );
    assert_eq!(
        from_zero.negate(Overflow::Saturate),
        Interval::new(NEG_INF, 0)
    );
    // A finite result beyond i64 is unbounded, not wrapped.
    let big = Interval::point(1 << 40);
    assert_eq!(sat(big, BinOp::Mul, big), Interval::point(INF));
    assert_eq!(
        sat(Interval::FULL, BinOp::Mul, Interval::FULL),
        Interval::FULL
    );
    assert_eq!(
        sat(Interval::point(0), BinOp::Mul, Interval::FULL),
        Interval::point(0)
    );
    assert_eq!(
        sat(Interval::FULL, BinOp::FloorDiv, Interval::point(4)),
        Interval::FULL
    );
}

#[test]
fn divisor_that_may_be_zero_is_unknown() {
    let r = Interval::new(0, 7);
    for overflow in [Overflow::Wrap, Overflow::Saturate] {
        for op in [BinOp::Div, BinOp::FloorDiv, BinOp::FloorMod] {
            assert_eq!(r.binary(op, Interval::new(0, 2), overflow), Interval::FULL);
            assert_eq!(r.binary(op, Interval::new(-1, 1), overflow), Interval::FULL);
        }
    }
}

#[test]
fn floormod_intervals() {
    let m = |lo, hi, d: Interval| Interval::new(lo, hi).floormod(d);
    let four = Interval::point(4);
    assert_eq!(m(0, 3, four), Interval::new(0, 3));
    assert_eq!(m(8, 11, four), Interval::new(0, 3));
    assert_eq!(m(9, 10, four), Interval::new(1, 2));
    assert_eq!(m(-3, -1, four), Interval::new(1, 3));
    assert_eq!(m(0, 9, four), Interval::new(0, 3));
    assert_eq!(m(-3, 9, Interval::point(-4)), Interval::new(-3, 0));
    assert_eq!(m(0, 9, Interval::new(3, 20)), Interval::new(0, 9));
    assert_eq!(m(-1, 9, Interval::new(3, 20)), Interval::new(0, 19));
    assert_eq!(
        sat(Interval::FULL, BinOp::FloorMod, four),
        Interval::new(0, 3)
    );
}

#[test]
fn min_max_and_logic() {
    let (a, b) = (Interval::new(0, 10), Interval::new(5, 7));
    assert_eq!(a.min(b), Interval::new(0, 7));
    assert_eq!(a.max(b), Interval::new(5, 10));
    assert_eq!(a.binary(BinOp::And, b, Overflow::Wrap), Interval::BOOL);
    let (t, f) = (Interval::of_bool(true), Interval::of_bool(false));
    assert_eq!(and(t, Interval::BOOL), Interval::BOOL);
    assert_eq!(and(f, Interval::BOOL), f);
    assert_eq!(or(t, Interval::BOOL), t);
    assert_eq!(or(f, f), f);
    assert_eq!(not(t), f);
    assert_eq!(not(Interval::BOOL), Interval::BOOL);
    assert_eq!(select(t, a, b), a);
    assert_eq!(select(Interval::BOOL, a, b), a);
    assert_eq!(
        select(Interval::BOOL, b, Interval::point(20)),
        Interval::new(5, 20)
    );
}

#[test]
fn empty_intervals() {
    let empty = Interval::new(3, 2);
    assert!(empty.is_empty());
    assert!(empty.within(0, 0));
    assert_eq!(empty.union(Interval::point(9)), Interval::point(9));
    assert_eq!(Interval::point(9).union(empty), Interval::point(9));
    let (a, b) = (Interval::new(0, 3), Interval::new(5, 9));
    assert!(a.intersect(b).is_empty());
    assert_eq!(a.intersect(Interval::new(2, 9)), Interval::new(2, 3));
    // Refining never empties: contradictory facts keep what was known.
    assert_eq!(a.refine(b), a);
    assert_eq!(a.refine(Interval::new(2, 9)), Interval::new(2, 3));
    assert_eq!(Interval::of_extent(0), Interval::FULL);
    assert_eq!(Interval::of_extent(8), Interval::new(0, 7));
}

#[test]
fn membership() {
    let r = Interval::new(0, 63);
    assert!(r.within(0, 63));
    assert!(!r.within(1, 63));
    assert!(r.contains_zero());
    assert!(!Interval::new(1, 2).contains_zero());
    assert_eq!(Interval::point(5).as_point(), Some(5));
    assert_eq!(r.as_point(), None);
    assert_eq!(Interval::exact(0, 1 << 64), None);
    assert_eq!(Interval::exact(-1, 1), Some(Interval::new(-1, 1)));
}

#[test]
fn comparisons_are_decided_only_when_certain() {
    let a = Interval::new(0, 63);
    assert_eq!(decide(CmpOp::Lt, a, Interval::point(64)), Some(true));
    assert_eq!(decide(CmpOp::Lt, a, Interval::point(63)), None);
    assert_eq!(decide(CmpOp::Ge, a, Interval::point(0)), Some(true));
    assert_eq!(decide(CmpOp::Gt, a, Interval::point(63)), Some(false));
    assert_eq!(decide(CmpOp::Eq, a, Interval::point(64)), Some(false));
    assert_eq!(
        decide(CmpOp::Ne, Interval::point(2), Interval::point(2)),
        Some(false)
    );
    assert_eq!(compare(CmpOp::Le, a, Interval::point(10)), Interval::BOOL);
    assert_eq!(
        compare(CmpOp::Le, a, Interval::point(63)),
        Interval::of_bool(true)
    );
}

#[test]
fn display_names_infinite_ends() {
    assert_eq!(Interval::FULL.to_string(), "(-inf, +inf)");
    assert_eq!(Interval::new(-1, 8).to_string(), "[-1, 8]");
    assert_eq!(Interval::new(0, INF).to_string(), "[0, +inf)");
    assert_eq!(Interval::new(NEG_INF, 3).to_string(), "(-inf, 3]");
}

#[test]
fn helpers() {
    assert_eq!(floor_div(-7, 2), -4);
    assert_eq!(floor_div(7, -2), -4);
    assert_eq!(floor_div(6, 3), 2);
    assert_eq!(gcd(12, 18), 6);
    assert_eq!(gcd(0, 5), 5);
}
