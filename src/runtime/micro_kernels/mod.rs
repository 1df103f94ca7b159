//! Hand-written f32 GEMM micro-kernels that JIT-compiled code calls
//! ("tensorize"): Cranelift emits only 128-bit vectors, so the inner
//! `MR×NR` tile of a matrix multiplication is handed to one of these.
//!
//! Every kernel computes `C[m×n] (+)= A[m×kc] · B[kc×n]` for `m ≤ MR`,
//! `n ≤ NR` through one C ABI ([`GemmFn`]), so Cranelift can call it with
//! `i64` arguments:
//!
//! - A element `(i, k)` at `a[i*a_rs + k*a_cs]` (any strides; a packed
//!   `MR`-panel has `a_rs = 1, a_cs = MR`); A elements are broadcast.
//! - B element `(k, j)` at `b[k*b_rs + j]` (rows contiguous; a packed
//!   `NR`-panel has `b_rs = NR`).
//! - C element `(i, j)` at `c[i*c_rs + j]`.
//! - `accumulate != 0`: `C += A·B`; `accumulate == 0`: `C = A·B` (C is not
//!   read). `kc = 0` is allowed (and writes zeros without `accumulate`).
//! - `epilogue`: null, or an [`Epilogue`] applied to each result before it
//!   is stored (a bias, a residual, a clamp: the product's elementwise
//!   consumer, fused).
//!
//! Full tiles keep the `MR×NR` accumulators in registers across the whole
//! `kc` loop; edge tiles never touch memory outside the `m×n` / `kc` region.
//! Kernels exist for several shapes per instruction set ([`Isa`]); the
//! registry ([`all_kernels`], [`find`]) says which are compiled in; a
//! [`Target`] says which this CPU may run ([`Target::kernels`]), its ISA
//! capped by `TESSERA_ISA` or [`Target::with_isa_cap`] to force a fallback.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod epilogue;
mod generic;
mod registry;
#[cfg(target_arch = "x86_64")]
mod sse;
#[cfg(target_arch = "x86_64")]
mod vector_kernels;

pub use epilogue::{Addend, CLAMP_LOWER, CLAMP_UPPER, Epilogue, MAX_ADDENDS};
pub use registry::{all_kernels, find};

use super::Target;

/// The C ABI every micro-kernel exports: `C[m×n] (+)= A[m×kc] · B[kc×n]`
/// with the strides described in the [module docs](self).
///
/// # Safety
///
/// The caller guarantees that the CPU supports the kernel's [`Isa`], that
/// `0 ≤ m ≤ MR`, `0 ≤ n ≤ NR`, `kc ≥ 0`, and that every element of A, B and C
/// the module docs name for that region is valid to read (A, B) and to read
/// and write (C), with C not aliasing A or B, and that `epilogue` is null
/// or points to an [`Epilogue`] whose used addends are valid to read over
/// the same `m×n` region. Nothing outside that region is touched. Use
/// [`run`] for a checked call.
pub type GemmFn = unsafe extern "C" fn(
    kc: i64,
    a: *const f32,
    a_rs: i64,
    a_cs: i64,
    b: *const f32,
    b_rs: i64,
    c: *mut f32,
    c_rs: i64,
    m: i64,
    n: i64,
    accumulate: i64,
    epilogue: *const Epilogue,
);

/// An instruction set a micro-kernel is written for, ordered by vector width
/// (a CPU that runs one runs every smaller one).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Isa {
    /// Portable scalar Rust (any architecture).
    Generic,
    /// x86-64 SSE2: 4 f32 lanes, separate multiply and add (no FMA).
    Sse,
    /// x86-64 AVX2 + FMA3: 8 f32 lanes.
    Avx2Fma,
    /// x86-64 AVX-512F: 16 f32 lanes.
    Avx512,
}

impl Isa {
    /// Every instruction set, narrowest first.
    pub const ALL: [Isa; 4] = [Isa::Generic, Isa::Sse, Isa::Avx2Fma, Isa::Avx512];

    /// f32 lanes of one vector register (1 for [`Isa::Generic`]).
    pub fn lanes(self) -> usize {
        match self {
            Isa::Generic => 1,
            Isa::Sse => 4,
            Isa::Avx2Fma => 8,
            Isa::Avx512 => 16,
        }
    }

    /// The short name used in kernel names and by `TESSERA_ISA`:
    /// `generic`, `sse`, `avx2`, `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Generic => "generic",
            Isa::Sse => "sse",
            Isa::Avx2Fma => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// The ISA of a [`name`](Isa::name) (case-insensitive; `avx2fma` and
    /// `sse2` are accepted too), or `None`.
    pub fn from_name(name: &str) -> Option<Isa> {
        match name.trim().to_ascii_lowercase().as_str() {
            "generic" | "scalar" => Some(Isa::Generic),
            "sse" | "sse2" => Some(Isa::Sse),
            "avx2" | "avx2fma" | "avx2_fma" | "avx2+fma" => Some(Isa::Avx2Fma),
            "avx512" | "avx512f" => Some(Isa::Avx512),
            _ => None,
        }
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One compiled micro-kernel: its name, instruction set, tile shape and
/// entry point.
#[derive(Clone, Copy, Debug)]
pub struct MicroKernel {
    /// `<isa>_<MR>x<NR>`, e.g. `avx512_6x32`; unique in [`all_kernels`].
    pub name: &'static str,
    /// The instruction set it needs ([`Target::can_run`] checks it).
    pub isa: Isa,
    /// Rows of the full tile (the most `m` may be).
    pub mr: usize,
    /// Columns of the full tile (the most `n` may be).
    pub nr: usize,
    /// The entry point; see [`GemmFn`] for its contract.
    pub func: GemmFn,
}

/// Why [`run`] refused to call a micro-kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MicroKernelError {
    /// The kernel's instruction set is wider than the host allows.
    #[error(
        "micro-kernel `{kernel}` needs {needs}, but this target allows only {host} \
         (CPU supports {cpu}; cap: {cap}); pick a kernel from Target::kernels(), \
         or raise TESSERA_ISA / the target's cap"
    )]
    NotAvailable {
        /// The kernel's name.
        kernel: &'static str,
        /// The kernel's instruction set.
        needs: Isa,
        /// The widest instruction set the target allows ([`Target::isa`]).
        host: Isa,
        /// The widest instruction set the CPU supports.
        cpu: Isa,
        /// What capped it, e.g. `TESSERA_ISA=sse`, or `none`.
        cap: String,
    },
    /// The tile is larger than the kernel's `MR×NR`.
    #[error("tile {m}x{n} exceeds micro-kernel `{kernel}`'s {mr}x{nr}")]
    TileTooLarge {
        /// The kernel's name.
        kernel: &'static str,
        /// Rows asked for.
        m: usize,
        /// Columns asked for.
        n: usize,
        /// The kernel's rows.
        mr: usize,
        /// The kernel's columns.
        nr: usize,
    },
    /// An operand's slice ends before the last element the region reads or
    /// writes.
    #[error(
        "operand {operand} is too short: the {rows}x{cols} region with these strides \
         needs {needed} elements, the slice has {len}"
    )]
    SliceTooShort {
        /// `A`, `B` or `C`.
        operand: &'static str,
        /// Rows of the operand's region.
        rows: usize,
        /// Columns of the operand's region.
        cols: usize,
        /// Elements needed (`usize::MAX` if the computation overflows).
        needed: usize,
        /// The slice's length.
        len: usize,
    },
    /// C's row stride is smaller than `n`, so rows would overlap.
    #[error("C's row stride {c_rs} is smaller than n = {n}: rows of C would overlap")]
    OverlappingRows {
        /// C's row stride.
        c_rs: usize,
        /// Columns asked for.
        n: usize,
    },
}

/// Elements a `rows×cols` region with these strides spans (0 for an empty
/// region), or `None` on overflow.
pub(crate) fn span(
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (rows - 1)
        .checked_mul(row_stride)?
        .checked_add((cols - 1).checked_mul(col_stride)?)?
        .checked_add(1)
}

fn check_len(
    operand: &'static str,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
    len: usize,
) -> Result<(), MicroKernelError> {
    match span(rows, cols, row_stride, col_stride) {
        Some(needed) if needed <= len => Ok(()),
        needed => Err(MicroKernelError::SliceTooShort {
            operand,
            rows,
            cols,
            needed: needed.unwrap_or(usize::MAX),
            len,
        }),
    }
}

fn to_i64(x: usize) -> i64 {
    // Slice lengths are at most isize::MAX, and every stride that reaches the
    // kernel has been checked against one, so this never saturates there.
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// Calls micro-kernel `k` on slices, after checking that `target` may run
/// it (its CPU has the ISA and no cap forbids it), that `m ≤ MR` and `n ≤ NR`, that C's rows do not overlap, and
/// that every slice covers the elements the region touches (see the
/// [module docs](self) for the layout).
#[allow(clippy::too_many_arguments)]
pub fn run(
    target: &Target,
    k: &MicroKernel,
    kc: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    c: &mut [f32],
    c_rs: usize,
    m: usize,
    n: usize,
    accumulate: bool,
) -> Result<(), MicroKernelError> {
    if !target.can_run(k) {
        return Err(MicroKernelError::NotAvailable {
            kernel: k.name,
            needs: k.isa,
            host: target.isa(),
            cpu: target.cpu_isa(),
            cap: target.cap_description(),
        });
    }
    if m > k.mr || n > k.nr {
        return Err(MicroKernelError::TileTooLarge {
            kernel: k.name,
            m,
            n,
            mr: k.mr,
            nr: k.nr,
        });
    }
    if m > 1 && n > 0 && c_rs < n {
        return Err(MicroKernelError::OverlappingRows { c_rs, n });
    }
    let (a_rows, b_cols) = if n == 0 { (0, 0) } else { (m, n) };
    let (kc_a, kc_b) = if m == 0 { (0, 0) } else { (kc, kc) };
    check_len("A", a_rows, kc_a, a_rs, a_cs, a.len())?;
    check_len("B", kc_b, b_cols, b_rs, 1, b.len())?;
    check_len("C", m, n, c_rs, 1, c.len())?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    // SAFETY: the target allows the ISA, and every target's CPU is this
    // host's, as detected (`Target` has no other constructor); m ≤ MR, n ≤ NR; the slices cover every
    // element of the region (checked above); `c` is a unique borrow, so it
    // aliases neither `a` nor `b`.
    unsafe {
        (k.func)(
            to_i64(kc),
            a.as_ptr(),
            to_i64(a_rs),
            to_i64(a_cs),
            b.as_ptr(),
            to_i64(b_rs),
            c.as_mut_ptr(),
            to_i64(c_rs),
            to_i64(m),
            to_i64(n),
            i64::from(accumulate),
            std::ptr::null(),
        )
    }
    Ok(())
}

/// The scalar reference with the micro-kernels' semantics:
/// `C[m×n] (+)= A[m×kc] · B[kc×n]`, summing over k in order from the
/// existing C (with `accumulate`) or from zero. Panics if a slice is too
/// short for the region.
#[allow(clippy::too_many_arguments)]
pub fn reference(
    kc: usize,
    a: &[f32],
    a_rs: usize,
    a_cs: usize,
    b: &[f32],
    b_rs: usize,
    c: &mut [f32],
    c_rs: usize,
    m: usize,
    n: usize,
    accumulate: bool,
) {
    for i in 0..m {
        for j in 0..n {
            let mut sum = if accumulate { c[i * c_rs + j] } else { 0.0 };
            for p in 0..kc {
                sum += a[i * a_rs + p * a_cs] * b[p * b_rs + j];
            }
            c[i * c_rs + j] = sum;
        }
    }
}
