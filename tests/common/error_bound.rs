//! The rounding-error bound of an f32 dot product, the one place the tests'
//! tolerances for sums of products come from.
//!
//! A sum of `k` products accumulated in f32 in any order, with or without
//! FMA, rounds at most twice per product: once for the product, once for the
//! addition (an FMA rounds once for both). With `n = 2k` roundings of at most
//! half an ulp each (unit roundoff `u = ε/2`), Higham's bound for recursive
//! summation (*Accuracy and Stability of Numerical Algorithms*, §3.1) is
//!
//! ```text
//! |got − exact| ≤ γ(2k) · Σₚ |aₚ·bₚ|,   γ(n) = n·u / (1 − n·u)
//! ```
//!
//! that is `c · k · ε · Σₚ|aₚ·bₚ|` with `c = 1 / (1 − k·ε)` (1.0001 at
//! k = 800): [`DOT_ERROR_CONSTANT`] `= 1` to first order. An initial value
//! the sum accumulates onto (`C += A·B`) is one more term of `Σ` and costs no
//! extra rounding (the `k` additions include it). The exact value and `Σ` are
//! computed by the test in f64, whose own error (the same bound with the f64
//! `ε`, 2²⁹ times smaller) is added.

/// `c` of `c · k · ε · Σ|aₚ·bₚ|` to first order in `k·ε`: two roundings of
/// half an ulp per product (see the module header).
pub const DOT_ERROR_CONSTANT: f64 = 1.0;

/// The largest |f32 result − exact| of a sum of `k` products whose absolute
/// values (and the absolute value of any initial accumulator) sum to
/// `abs_sum`, against an exact value computed in f64.
pub fn f32_dot_error_bound(k: usize, abs_sum: f64) -> f64 {
    let gamma = |epsilon: f64| {
        let first_order = DOT_ERROR_CONSTANT * k as f64 * epsilon;
        first_order / (1.0 - first_order)
    };
    (gamma(f64::from(f32::EPSILON)) + gamma(f64::EPSILON)) * abs_sum
}

/// A sum of products in f64: the exact value's stand-in and `Σ|terms|`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DotReference {
    /// The sum, in f64.
    pub value: f64,
    /// The sum of the terms' absolute values, in f64.
    pub abs_sum: f64,
    /// The number of products.
    pub products: usize,
}

impl DotReference {
    /// The sum starting at `initial` (the accumulator `C += A·B` adds onto;
    /// 0 for `C = A·B`).
    pub fn starting_at(initial: f32) -> DotReference {
        DotReference {
            value: f64::from(initial),
            abs_sum: f64::from(initial).abs(),
            products: 0,
        }
    }

    /// Adds the product `a·b`.
    pub fn add_product(&mut self, a: f32, b: f32) {
        let product = f64::from(a) * f64::from(b);
        self.value += product;
        self.abs_sum += product.abs();
        self.products += 1;
    }

    /// [`f32_dot_error_bound`] for this sum.
    pub fn error_bound(&self) -> f64 {
        f32_dot_error_bound(self.products, self.abs_sum)
    }

    /// Panics, with `what()` and the numbers, unless `got` is within
    /// [`error_bound`](DotReference::error_bound) of the sum.
    pub fn assert_within_bound(&self, got: f32, what: &dyn Fn() -> String) {
        let bound = self.error_bound();
        let error = (f64::from(got) - self.value).abs();
        assert!(
            error <= bound,
            "{}: got {got}, want {} (f64), error {error:e} > bound {bound:e} \
             (= c·k·ε·Σ|a·b| with c = {DOT_ERROR_CONSTANT}, k = {}, Σ = {})",
            what(),
            self.value,
            self.products,
            self.abs_sum
        );
    }
}
