//! Stencil primitives: one row of a depthwise convolution (a small R×S
//! filter slid along a row of outputs) at the machine's full vector width,
//! written with `std::arch` (Cranelift emits only 128-bit vectors). JIT
//! code calls them through one C ABI ([`StencilFn`]), as the symbols
//! `tessera_<name>` (e.g. `tessera_avx512_stencil`).
//!
//! Every primitive computes, for `0 ≤ j < n`,
//!
//! ```text
//! out[j] (+)= Σ_{r<R} Σ_{s<S} weight[r·w_r + s·w_s] · input[j·in_x + r·in_r + s·in_s]
//! ```
//!
//! with one fused multiply-add per tap, taps in order (r-major, then s),
//! starting from `0.0` or from `out[j]` when accumulating. Vector lanes and
//! scalar code round identically, so every primitive's result is
//! bit-identical to that loop written with [`f32::mul_add`].
//!
//! Primitives exist per instruction set ([`Isa::Avx2Fma`],
//! [`Isa::Avx512`], x86-64 only), each the one row algorithm (`algorithm`)
//! instantiated over that ISA's vector operations; the registry
//! ([`all_primitives`], [`find`], [`primitive_for`]) says which are
//! compiled in, a [`Target`] which this CPU may run ([`allowed_isas`]).
//! [`run`] is the checked call.

#[cfg(target_arch = "x86_64")]
mod algorithm;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod registry;
#[cfg(test)]
mod tests;

pub use registry::{all_primitives, allowed_isas, find, primitive_for, stencil_isas};

use super::Target;
use super::micro_kernels::{Epilogue, Isa};

/// The C ABI of every stencil primitive: for each row `0 ≤ y < rows`, one
/// after the other, with `out` advanced by `y·out_y` and `input` by
/// `y·in_y`, for `0 ≤ j < n` (nothing when `n ≤ 0` or `rows ≤ 0`),
///
/// ```text
/// acc = accumulate ≠ 0 ? out[j] : 0.0
/// for r in 0..taps_r { for s in 0..taps_s {
///     acc = fma(weight[r·w_r + s·w_s], input[j·in_x + r·in_r + s·in_s], acc)
/// } }
/// out[j] = acc
/// ```
///
/// Arguments, all counted in `f32` elements:
///
/// - `n`: outputs;
/// - `taps_r`, `taps_s`: the filter's taps (`R ≥ 1`, `S ≥ 1`);
/// - `in_x`: input elements between consecutive outputs (`≥ 1`; 1 and 2
///   have dedicated paths, other strides are gathered, or computed one
///   output at a time when a vector's lane offsets `l·in_x` exceed 32 bits);
/// - `in_r`, `in_s`: input elements between taps `r` and `r+1`, `s` and
///   `s+1` (`≥ 0`);
/// - `w_r`, `w_s`: weight elements between taps `r` and `r+1`, `s` and
///   `s+1` (`≥ 0`);
/// - `accumulate`: nonzero adds the sum to `out[j]`; zero overwrites
///   `out[j]`, which is then never read;
/// - `rows`, `out_y`, `in_y`: rows of outputs (a depthwise convolution's
///   output rows of one channel, one call for all), and the output and
///   input elements between consecutive rows (`≥ 0`);
/// - `epilogue`: null, or an [`Epilogue`] each output passes through before
///   it is stored, as the element `(y, j)` of its rows (a bias, a clip:
///   the convolution's elementwise consumer, fused).
///
/// # Safety
///
/// The caller guarantees that the CPU supports the primitive's [`Isa`];
/// that the input elements from `input[0]` to the last one the formula
/// names, every weight the formula names, and the epilogue's addends at
/// every `(y, j)` of the call (where `epilogue` is not null) are valid for
/// reading; that
/// every row's `out[0..n]` is valid for writing (and reading when
/// accumulating); and that `out` overlaps neither `input` nor `weight`.
///
/// A primitive writes only `out[0..n]`, reads `out` only when
/// accumulating, reads only the weights the formula names, and reads no
/// input element before the first or after the last one the formula names
/// (the input may end there, at the end of a page): with `in_x` = 1 or a
/// gathered stride it reads exactly the named elements; with `in_x` = 2 it
/// may also read the elements between two named ones. Use [`run`] for a
/// checked call.
pub type StencilFn = unsafe extern "C" fn(
    out: *mut f32,
    input: *const f32,
    weight: *const f32,
    n: i64,
    taps_r: i64,
    taps_s: i64,
    in_x: i64,
    in_r: i64,
    in_s: i64,
    w_r: i64,
    w_s: i64,
    accumulate: i64,
    rows: i64,
    out_y: i64,
    in_y: i64,
    epilogue: *const Epilogue,
);

/// One compiled stencil primitive.
#[derive(Clone, Copy, Debug)]
pub struct StencilPrimitive {
    /// `<isa>_stencil`, e.g. `avx512_stencil`; unique in [`all_primitives`].
    pub name: &'static str,
    /// The instruction set it needs.
    pub isa: Isa,
    /// The entry point; see [`StencilFn`].
    pub func: StencilFn,
}

/// The sizes and strides of one stencil call, in `f32` elements; the
/// arguments of [`StencilFn`] other than the pointers and `accumulate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StencilShape {
    /// Outputs (`≥ 0` for [`run`]).
    pub n: i64,
    /// Filter taps along r (`≥ 1`).
    pub taps_r: i64,
    /// Filter taps along s (`≥ 1`).
    pub taps_s: i64,
    /// Input elements between consecutive outputs (`≥ 1`).
    pub in_x: i64,
    /// Input elements between taps `r` and `r+1` (`≥ 0`).
    pub in_r: i64,
    /// Input elements between taps `s` and `s+1` (`≥ 0`).
    pub in_s: i64,
    /// Weight elements between taps `r` and `r+1` (`≥ 0`).
    pub w_r: i64,
    /// Weight elements between taps `s` and `s+1` (`≥ 0`).
    pub w_s: i64,
    /// Rows of `n` outputs (`≥ 0`; 1 for a single row).
    pub rows: i64,
    /// Output elements between consecutive rows (`≥ 0`).
    pub out_y: i64,
    /// Input elements between consecutive rows (`≥ 0`).
    pub in_y: i64,
}

impl StencilShape {
    /// The fields that are out of range, as `(field, value, minimum)`, in
    /// declaration order.
    fn out_of_range(&self) -> Vec<(&'static str, i64, i64)> {
        [
            ("n", self.n, 0),
            ("taps_r", self.taps_r, 1),
            ("taps_s", self.taps_s, 1),
            ("in_x", self.in_x, 1),
            ("in_r", self.in_r, 0),
            ("in_s", self.in_s, 0),
            ("w_r", self.w_r, 0),
            ("w_s", self.w_s, 0),
            ("rows", self.rows, 0),
            ("out_y", self.out_y, 0),
            ("in_y", self.in_y, 0),
        ]
        .into_iter()
        .filter(|&(_, value, min)| value < min)
        .collect()
    }

    /// Output elements the formula writes from the start of `out`:
    /// `(rows−1)·out_y + n` (0 when `n ≤ 0` or `rows ≤ 0`).
    pub fn out_len(&self) -> u128 {
        if self.n <= 0 || self.rows <= 0 {
            return 0;
        }
        let last = (i128::from(self.rows) - 1) * i128::from(self.out_y) + i128::from(self.n);
        u128::try_from(last).unwrap_or(0)
    }

    /// Input elements the formula reads from the start of `input`: one past
    /// the last element it names, `(n−1)·in_x + (R−1)·in_r + (S−1)·in_s + 1`
    /// (0 when `n ≤ 0` or a filter dimension is empty). Meaningful for
    /// non-negative strides.
    pub fn input_len(&self) -> u128 {
        if self.n <= 0 || self.taps_r <= 0 || self.taps_s <= 0 || self.rows <= 0 {
            return 0;
        }
        let last = (i128::from(self.rows) - 1) * i128::from(self.in_y)
            + (i128::from(self.n) - 1) * i128::from(self.in_x)
            + (i128::from(self.taps_r) - 1) * i128::from(self.in_r)
            + (i128::from(self.taps_s) - 1) * i128::from(self.in_s);
        u128::try_from(last + 1).unwrap_or(0)
    }

    /// Weight elements the formula reads: `(R−1)·w_r + (S−1)·w_s + 1`
    /// (0 when `n ≤ 0` or a filter dimension is empty). Meaningful for
    /// non-negative strides.
    pub fn weight_len(&self) -> u128 {
        if self.n <= 0 || self.taps_r <= 0 || self.taps_s <= 0 {
            return 0;
        }
        let last = (i128::from(self.taps_r) - 1) * i128::from(self.w_r)
            + (i128::from(self.taps_s) - 1) * i128::from(self.w_s);
        u128::try_from(last + 1).unwrap_or(0)
    }
}

/// Why [`run`] refused to call a stencil primitive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StencilError {
    /// The primitive's instruction set is wider than the target allows.
    #[error(
        "stencil primitive `{name}` needs {needs}, but this target allows only {host} \
         (CPU supports {cpu}; cap: {cap})"
    )]
    NotAvailable {
        /// The primitive.
        name: &'static str,
        /// Its instruction set.
        needs: Isa,
        /// The widest instruction set the target allows.
        host: Isa,
        /// The widest instruction set the CPU supports.
        cpu: Isa,
        /// What capped it, e.g. `TESSERA_ISA=sse`, or `none`.
        cap: String,
    },
    /// A field of the [`StencilShape`] is below its minimum.
    #[error("stencil shape field `{field}` is {value}, but must be at least {min}")]
    InvalidShape {
        /// The field, e.g. `in_x`.
        field: &'static str,
        /// Its value.
        value: i64,
        /// The smallest value allowed.
        min: i64,
    },
    /// A slice holds fewer elements than the shape names.
    #[error("stencil slice `{slice}` needs {needs} elements for this shape, but has {has}")]
    TooShort {
        /// `out`, `input` or `weight`.
        slice: &'static str,
        /// Elements the shape names ([`StencilShape::out_len`],
        /// [`StencilShape::input_len`], [`StencilShape::weight_len`]).
        needs: u128,
        /// Elements the slice has.
        has: usize,
    },
}

/// Runs `primitive` on `out`, `input` and `weight` with `shape` (see
/// [`StencilFn`] for the formula), after checking that `target` may run it,
/// that the shape's fields are in range and that each slice holds every
/// element the shape names. Longer slices are fine; only their first
/// elements are used.
pub fn run(
    target: &Target,
    primitive: &StencilPrimitive,
    out: &mut [f32],
    input: &[f32],
    weight: &[f32],
    shape: StencilShape,
    accumulate: bool,
) -> Result<(), StencilError> {
    if primitive.isa > target.isa() {
        return Err(StencilError::NotAvailable {
            name: primitive.name,
            needs: primitive.isa,
            host: target.isa(),
            cpu: target.cpu_isa(),
            cap: target.cap_description(),
        });
    }
    if let Some(&(field, value, min)) = shape.out_of_range().first() {
        return Err(StencilError::InvalidShape { field, value, min });
    }
    for (slice, needs, has) in [
        ("out", shape.out_len(), out.len()),
        ("input", shape.input_len(), input.len()),
        ("weight", shape.weight_len(), weight.len()),
    ] {
        if needs > has as u128 {
            return Err(StencilError::TooShort { slice, needs, has });
        }
    }
    // SAFETY: the target allows the ISA and every target describes this
    // host's CPU; the strides are non-negative, so every element the
    // formula names lies below the lengths just checked; `out` is a unique
    // borrow, so it overlaps neither shared slice; no epilogue.
    unsafe {
        call(
            primitive,
            out.as_mut_ptr(),
            input.as_ptr(),
            weight.as_ptr(),
            shape,
            accumulate,
            std::ptr::null(),
        )
    };
    Ok(())
}

/// Calls `primitive` through its C ABI with `shape`'s arguments.
///
/// # Safety
///
/// The [`StencilFn`] contract.
unsafe fn call(
    primitive: &StencilPrimitive,
    out: *mut f32,
    input: *const f32,
    weight: *const f32,
    shape: StencilShape,
    accumulate: bool,
    epilogue: *const Epilogue,
) {
    // SAFETY: the caller's contract.
    unsafe {
        (primitive.func)(
            out,
            input,
            weight,
            shape.n,
            shape.taps_r,
            shape.taps_s,
            shape.in_x,
            shape.in_r,
            shape.in_s,
            shape.w_r,
            shape.w_s,
            i64::from(accumulate),
            shape.rows,
            shape.out_y,
            shape.in_y,
            epilogue,
        )
    }
}

/// The arguments of one [`StencilFn`] call, as counts and signed pointer
/// offsets; what the row algorithm (`algorithm`) reads.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
struct Row {
    out: *mut f32,
    input: *const f32,
    weight: *const f32,
    /// Outputs, `≥ 1`.
    n: usize,
    /// Taps (0 for an empty filter dimension: the sum is empty).
    taps_r: usize,
    taps_s: usize,
    in_x: isize,
    in_r: isize,
    in_s: isize,
    w_r: isize,
    w_s: isize,
    accumulate: bool,
    /// Rows, `≥ 1`, and the pointer steps between them.
    rows: usize,
    out_y: isize,
    in_y: isize,
    /// The epilogue (null: none) and the row being computed, its `y`.
    epilogue: *const Epilogue,
    y: usize,
}

#[cfg(target_arch = "x86_64")]
impl Row {
    /// The rows of a [`StencilFn`] call with `shape`, or `None` when it has
    /// no outputs.
    fn new(
        out: *mut f32,
        input: *const f32,
        weight: *const f32,
        shape: StencilShape,
        accumulate: bool,
        epilogue: *const Epilogue,
    ) -> Option<Row> {
        let n = usize::try_from(shape.n).ok().filter(|&n| n > 0)?;
        let rows = usize::try_from(shape.rows).ok().filter(|&r| r > 0)?;
        // x86-64: `i64` and `isize` are the same width.
        Some(Row {
            out,
            input,
            weight,
            n,
            taps_r: usize::try_from(shape.taps_r).unwrap_or(0),
            taps_s: usize::try_from(shape.taps_s).unwrap_or(0),
            in_x: shape.in_x as isize,
            in_r: shape.in_r as isize,
            in_s: shape.in_s as isize,
            w_r: shape.w_r as isize,
            w_s: shape.w_s as isize,
            accumulate,
            rows,
            out_y: shape.out_y as isize,
            in_y: shape.in_y as isize,
            epilogue,
            y: 0,
        })
    }

    /// Computes outputs `j` in `range` one at a time, with the same fused
    /// multiply-adds in the same order as the vector lanes (inlined into
    /// the ISA's code, where `mul_add` is one instruction).
    ///
    /// # Safety
    ///
    /// The [`StencilFn`] contract for this row, and `range` within `0..n`.
    #[inline(always)]
    unsafe fn scalar(&self, range: std::ops::Range<usize>) {
        for j in range {
            let out = self.out.wrapping_add(j);
            // SAFETY: `j < n`: the caller's contract.
            let mut acc = if self.accumulate {
                unsafe { *out }
            } else {
                0.0
            };
            let base = self.input.wrapping_offset(offset(j, self.in_x));
            for r in 0..self.taps_r {
                for s in 0..self.taps_s {
                    let tap_w = offset(r, self.w_r).wrapping_add(offset(s, self.w_s));
                    let tap_x = offset(r, self.in_r).wrapping_add(offset(s, self.in_s));
                    // SAFETY: elements the formula names: the caller's contract.
                    let (w, x) = unsafe {
                        (
                            *self.weight.wrapping_offset(tap_w),
                            *base.wrapping_offset(tap_x),
                        )
                    };
                    acc = w.mul_add(x, acc);
                }
            }
            // SAFETY: `j < n` and the epilogue's addends at (y, j): the
            // caller's contract.
            unsafe {
                if let Some(epilogue) = self.epilogue.as_ref() {
                    acc = epilogue.apply(self.y, j, acc);
                }
                *out = acc
            };
        }
    }
}

/// `i · stride` elements, wrapping: address arithmetic that never panics
/// (a valid call only ever dereferences offsets the formula names).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn offset(i: usize, stride: isize) -> isize {
    (i as isize).wrapping_mul(stride)
}
