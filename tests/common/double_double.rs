//! An oracle for f64 math that shares no code with the code under test:
//! exp, log, sqrt, tanh, sigmoid, erf and pow in double-double arithmetic
//! (about 106 bits), from series and Newton steps written here, without
//! calling std's or libm's transcendental functions (the generated code and
//! the te interpreter both call those). Exact to far below an f64 ulp on the
//! ranges the tests use.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// An unevaluated sum `hi + lo` with `|lo| ≤ ulp(hi)/2`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DoubleDouble {
    /// The leading f64.
    pub hi: f64,
    /// The rounding error of `hi`.
    pub lo: f64,
}

/// π as a double-double.
const PI: DoubleDouble = DoubleDouble {
    hi: std::f64::consts::PI,
    lo: 1.224_646_799_147_353_2e-16,
};

/// ln 2 as a double-double.
const LN_2: DoubleDouble = DoubleDouble {
    hi: std::f64::consts::LN_2,
    lo: 2.319_046_813_846_299_6e-17,
};

/// `a + b` exactly, as a double-double (Knuth's TwoSum).
fn two_sum(a: f64, b: f64) -> DoubleDouble {
    let s = a + b;
    let bb = s - a;
    DoubleDouble {
        hi: s,
        lo: (a - (s - bb)) + (b - bb),
    }
}

/// `a + b` exactly when `|a| ≥ |b|` (Dekker's Fast2Sum).
fn fast_two_sum(a: f64, b: f64) -> DoubleDouble {
    let s = a + b;
    DoubleDouble {
        hi: s,
        lo: b - (s - a),
    }
}

/// `a · b` exactly, as a double-double (the error of the product by FMA).
fn two_product(a: f64, b: f64) -> DoubleDouble {
    let p = a * b;
    DoubleDouble {
        hi: p,
        lo: a.mul_add(b, -p),
    }
}

impl DoubleDouble {
    /// `x` exactly.
    pub fn from_f64(x: f64) -> DoubleDouble {
        DoubleDouble { hi: x, lo: 0.0 }
    }

    /// The nearest f64.
    pub fn to_f64(self) -> f64 {
        self.hi + self.lo
    }

    /// `self · 2^k` exactly (no overflow or underflow on the tests' ranges).
    fn scale_by_power_of_two(self, k: i32) -> DoubleDouble {
        let factor = 2f64.powi(k);
        DoubleDouble {
            hi: self.hi * factor,
            lo: self.lo * factor,
        }
    }

    /// `e^self`: `self = n·ln2 + r` with |r| ≤ ln2/2, `e^(r/2^10)` by its
    /// Taylor series, squared ten times, scaled by `2^n`.
    pub fn exp(self) -> DoubleDouble {
        const HALVINGS: i32 = 10;
        let n = (self.hi / LN_2.hi).round();
        let r = (self - LN_2 * n).scale_by_power_of_two(-HALVINGS);
        let (mut sum, mut term) = (DoubleDouble::from_f64(1.0), DoubleDouble::from_f64(1.0));
        for k in 1..=14 {
            term = term * r / k as f64;
            sum = sum + term;
        }
        for _ in 0..HALVINGS {
            sum = sum * sum;
        }
        sum.scale_by_power_of_two(n as i32)
    }

    /// `ln self` for `self > 0`: Newton's iteration `y ← y + x·e^−y − 1`
    /// from `exponent·ln2 + (mantissa − 1)`.
    pub fn ln(self) -> DoubleDouble {
        assert!(self.hi > 0.0, "ln of {self:?}");
        // A normal f64's exponent and mantissa in [1, 2), from its bits.
        let exponent = ((self.hi.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        let mantissa = self.hi / 2f64.powi(exponent);
        let mut y = DoubleDouble::from_f64(f64::from(exponent) * LN_2.hi + (mantissa - 1.0));
        for _ in 0..8 {
            y = y + self * (-y).exp() - 1.0;
        }
        y
    }

    /// `|self|`.
    pub fn abs(self) -> DoubleDouble {
        if self.hi < 0.0 { -self } else { self }
    }

    /// `√self` for `self ≥ 0`: one Newton step in double-double from the
    /// f64 square root (which IEEE 754 rounds correctly).
    pub fn sqrt(self) -> DoubleDouble {
        if self.hi == 0.0 {
            return DoubleDouble::from_f64(0.0);
        }
        let s = DoubleDouble::from_f64(self.hi.sqrt());
        s + (self - s * s) / (s * 2.0)
    }

    /// `tanh self = (e^2x − 1) / (e^2x + 1)`.
    pub fn tanh(self) -> DoubleDouble {
        let e = (self * 2.0).exp();
        (e - 1.0) / (e + 1.0)
    }

    /// `1 / (1 + e^−x)`.
    pub fn sigmoid(self) -> DoubleDouble {
        DoubleDouble::from_f64(1.0) / ((-self).exp() + 1.0)
    }

    /// `erf x = 2/√π · e^−x² · Σₙ 2ⁿ·x^(2n+1) / (1·3·…·(2n+1))`, a series of
    /// terms of one sign (no cancellation).
    pub fn erf(self) -> DoubleDouble {
        let x2 = self * self;
        let (mut sum, mut term) = (self, self);
        for n in 1..1000 {
            term = term * x2 * 2.0 / (2 * n + 1) as f64;
            sum = sum + term;
            if term.hi.abs() < 1e-34 * sum.hi.abs() {
                break;
            }
        }
        sum * (-x2).exp() * 2.0 / PI.sqrt()
    }

    /// `self^y = e^(y · ln self)` for `self > 0`.
    pub fn pow(self, y: f64) -> DoubleDouble {
        (self.ln() * y).exp()
    }
}

impl Add for DoubleDouble {
    type Output = DoubleDouble;
    fn add(self, other: DoubleDouble) -> DoubleDouble {
        let s = two_sum(self.hi, other.hi);
        let t = two_sum(self.lo, other.lo);
        let s = fast_two_sum(s.hi, s.lo + t.hi);
        fast_two_sum(s.hi, s.lo + t.lo)
    }
}

impl Add<f64> for DoubleDouble {
    type Output = DoubleDouble;
    fn add(self, other: f64) -> DoubleDouble {
        self + DoubleDouble::from_f64(other)
    }
}

impl Neg for DoubleDouble {
    type Output = DoubleDouble;
    fn neg(self) -> DoubleDouble {
        DoubleDouble {
            hi: -self.hi,
            lo: -self.lo,
        }
    }
}

impl Sub for DoubleDouble {
    type Output = DoubleDouble;
    fn sub(self, other: DoubleDouble) -> DoubleDouble {
        self + -other
    }
}

impl Sub<f64> for DoubleDouble {
    type Output = DoubleDouble;
    fn sub(self, other: f64) -> DoubleDouble {
        self + -other
    }
}

impl Mul for DoubleDouble {
    type Output = DoubleDouble;
    fn mul(self, other: DoubleDouble) -> DoubleDouble {
        let p = two_product(self.hi, other.hi);
        fast_two_sum(p.hi, p.lo + (self.hi * other.lo + self.lo * other.hi))
    }
}

impl Mul<f64> for DoubleDouble {
    type Output = DoubleDouble;
    fn mul(self, other: f64) -> DoubleDouble {
        self * DoubleDouble::from_f64(other)
    }
}

/// Long division: three f64 quotient digits.
impl Div for DoubleDouble {
    type Output = DoubleDouble;
    fn div(self, other: DoubleDouble) -> DoubleDouble {
        let q1 = self.hi / other.hi;
        let r = self - other * q1;
        let q2 = r.hi / other.hi;
        let r = r - other * q2;
        let q3 = r.hi / other.hi;
        fast_two_sum(q1, q2) + q3
    }
}

impl Div<f64> for DoubleDouble {
    type Output = DoubleDouble;
    fn div(self, other: f64) -> DoubleDouble {
        self / DoubleDouble::from_f64(other)
    }
}
