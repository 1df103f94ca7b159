//! Program features: what the learned models see of a candidate.
//!
//! A candidate is lowered to loop IR and each store (innermost statement) is
//! described in its context, in the spirit of Ansor's features: the
//! arithmetic it executes by kind, the annotations of the loops around it
//! (vectorize, unroll, parallel: lengths and positions), its trip count and
//! guards, and for up to [`MAX_ACCESSES`] buffer accesses (most cache lines
//! first) the access type, bytes, distinct bytes, cache lines, reuse type
//! and distance, and the stride of the innermost loop; plus allocation and
//! arithmetic-intensity features. A store that is a micro-kernel call (a
//! tensorized block, `Stmt::MicroKernelCall`) is described as the loop nest it
//! replaces and is marked as such: `tensorized`, the kernel ISA's vector
//! width, its `mr × nr` register tile, the block depth `kc`, how much of
//! the tile the block fills, and how many calls execute (all zero for an
//! ordinary store). Counts and sizes go through
//! `log2(1 + x)`, so rows of small and large workloads share a scale.
//!
//! A program's row is [`FEATURE_LEN`] long: the features of its dominant
//! store (most floating-point work), those of the runner-up (most work, then
//! most bytes, among the others; zeros if there is none), and
//! [`PROGRAM_FEATURES`] about the whole function. [`feature_names`] names
//! every column; the tables below document each one.

mod access;
mod ops;
mod walk;

pub use walk::{MicroKernelFeatures, StoreSummary, summarize};

use crate::schedule::State;
use crate::tir::{self, ForKind, PrimFunc};

use super::error::CostError;
use access::{AccessFeatures, AccessKind, ReuseKind};

/// Version of the feature layout; model files record it and refuse others.
/// v2 added the micro-kernel features (`tensorized` … `ukernel_calls`).
pub const FEATURE_VERSION: u32 = 2;

/// Accesses described per store.
pub const MAX_ACCESSES: usize = 5;

/// Per-store features: name and meaning. "Executed" counts are per
/// execution of the store times its trip count.
pub const STORE_FEATURES: [(&str, &str); 39] = [
    (
        "float_add_sub",
        "executed float additions and subtractions (log)",
    ),
    (
        "float_mul",
        "executed float multiplications not fused into an FMA (log)",
    ),
    ("float_fma", "executed float multiply-adds (log)"),
    ("float_div", "executed float divisions (log)"),
    ("float_min_max", "executed float min/max (log)"),
    ("float_cmp", "executed float comparisons (log)"),
    (
        "float_math",
        "executed math intrinsics: exp, log, sqrt, tanh, sigmoid, erf, pow, abs (log)",
    ),
    (
        "int_add_sub",
        "executed integer additions/subtractions, mostly index arithmetic (log)",
    ),
    ("int_mul", "executed integer multiplications (log)"),
    (
        "int_div_mod",
        "executed integer divisions and modulos (log)",
    ),
    (
        "int_cmp",
        "executed integer/boolean comparisons and logic (log)",
    ),
    ("select", "executed selects (log)"),
    ("cast", "executed casts (log)"),
    (
        "trips",
        "times the store executes: product of the enclosing loop extents (log)",
    ),
    ("loops", "number of enclosing loops"),
    (
        "innermost_extent",
        "extent of the innermost enclosing loop (log)",
    ),
    (
        "guards",
        "enclosing conditionals (bounds guards of non-divisible splits)",
    ),
    (
        "is_init",
        "1 if the value is a constant (a reduction's initialisation)",
    ),
    (
        "is_update",
        "1 if the value reads the element written (a reduction's update)",
    ),
    (
        "writes_local",
        "1 if the buffer written is a local (cache) buffer",
    ),
    (
        "vector_len",
        "product of the extents of enclosing vectorized loops (log)",
    ),
    (
        "vector_innermost",
        "1 if the innermost enclosing loop is vectorized",
    ),
    ("vector_loops", "number of enclosing vectorized loops"),
    (
        "unroll_len",
        "product of the extents of enclosing unrolled loops (log)",
    ),
    ("unroll_loops", "number of enclosing unrolled loops"),
    (
        "unroll_innermost",
        "1 if the innermost enclosing loop is unrolled",
    ),
    (
        "parallel_len",
        "product of the extents of enclosing parallel loops (log)",
    ),
    ("parallel_loops", "number of enclosing parallel loops"),
    (
        "parallel_outermost",
        "1 if the outermost enclosing loop is parallel",
    ),
    (
        "arith_intensity",
        "executed float operations per byte accessed (log)",
    ),
    (
        "alloc_bytes",
        "size of the buffer written if the function allocates it (log)",
    ),
    (
        "accesses",
        "number of distinct buffer accesses of the store",
    ),
    (
        "tensorized",
        "1 if the store is a micro-kernel call (a tensorized block); the ukernel_* features are 0 otherwise",
    ),
    (
        "ukernel_vector_bits",
        "vector register width of the kernel's ISA in bits: 512, 256, 128, 32 for the portable one (log)",
    ),
    ("ukernel_mr", "rows of the kernel's register tile (log)"),
    ("ukernel_nr", "columns of the kernel's register tile (log)"),
    ("ukernel_kc", "the block depth kc of one call (log)"),
    (
        "ukernel_tile_fill",
        "m·n / (mr·nr): the fraction of the kernel's tile the block fills (0..1)",
    ),
    (
        "ukernel_calls",
        "executed calls: product of the loop extents around the call (log)",
    ),
];

/// Per-access features (repeated [`MAX_ACCESSES`] times per store; an
/// absent access is all zeros).
pub const ACCESS_FEATURES: [(&str, &str); 16] = [
    ("is_read", "1 if the access only reads"),
    ("is_write", "1 if the access only writes"),
    (
        "is_read_write",
        "1 if the store reads and writes the element (reduction update)",
    ),
    ("bytes", "bytes accessed over all executions (log)"),
    (
        "unique_bytes",
        "distinct bytes accessed: product of the extents of loops the index depends on (log)",
    ),
    (
        "lines",
        "cache lines touched over all executions, counting contiguous runs along the smallest stride (log)",
    ),
    ("unique_lines", "distinct cache lines touched (log)"),
    (
        "reuse_loop",
        "1 if a loop the index does not depend on revisits the same elements",
    ),
    (
        "reuse_serial",
        "1 if the reuse is the store reading and writing the same element",
    ),
    ("reuse_none", "1 if every execution touches new elements"),
    (
        "reuse_distance_iters",
        "iterations between reuses: product of the loop extents inside the reusing loop (log)",
    ),
    (
        "reuse_distance_bytes",
        "bytes of this access touched between reuses (log)",
    ),
    (
        "reuse_count",
        "times the elements are reused: the reusing loop's extent (log)",
    ),
    (
        "innermost_stride",
        "elements the offset moves per step of the innermost loop (log; 1e9 if not affine)",
    ),
    (
        "contiguous",
        "1 if the innermost loop walks the buffer with stride 1",
    ),
    ("element_bytes", "bytes per element"),
];

/// Whole-function features.
pub const PROGRAM_FEATURES: [(&str, &str); 8] = [
    ("stores", "number of stores"),
    (
        "rest_flops",
        "executed float operations of the stores other than the two described (log)",
    ),
    ("rest_bytes", "bytes accessed by the other stores (log)"),
    (
        "rest_lines",
        "cache lines touched by the other stores (log)",
    ),
    ("allocations", "number of buffers the function allocates"),
    ("alloc_bytes", "total bytes the function allocates (log)"),
    ("loops", "number of loops in the function"),
    (
        "outer_parallel",
        "extent of the outermost parallel loop, if any (log)",
    ),
];

/// Features per store.
pub const STORE_LEN: usize = STORE_FEATURES.len() + MAX_ACCESSES * ACCESS_FEATURES.len();

/// Features per program: two stores and the whole-function features.
pub const FEATURE_LEN: usize = 2 * STORE_LEN + PROGRAM_FEATURES.len();

/// `log2(1 + x)` for non-negative `x` (0 otherwise).
fn slog(x: f64) -> f32 {
    if x > 0.0 {
        (1.0 + x).log2() as f32
    } else {
        0.0
    }
}

fn flag(b: bool) -> f32 {
    f32::from(u8::from(b))
}

/// The name of every column, in order (`s0.` dominant store, `s1.` the
/// runner-up, `aN.` their accesses, `p.` the whole function).
pub fn feature_names() -> Vec<String> {
    let mut names = Vec::with_capacity(FEATURE_LEN);
    for s in ["s0", "s1"] {
        names.extend(STORE_FEATURES.iter().map(|(n, _)| format!("{s}.{n}")));
        for a in 0..MAX_ACCESSES {
            names.extend(ACCESS_FEATURES.iter().map(|(n, _)| format!("{s}.a{a}.{n}")));
        }
    }
    names.extend(PROGRAM_FEATURES.iter().map(|(n, _)| format!("p.{n}")));
    names
}

fn access_features(a: &AccessFeatures, out: &mut Vec<f32>) {
    out.extend([
        flag(a.kind == AccessKind::Read),
        flag(a.kind == AccessKind::Write),
        flag(a.kind == AccessKind::ReadWrite),
        slog(a.bytes),
        slog(a.unique_bytes),
        slog(a.lines),
        slog(a.unique_lines),
        flag(a.reuse == ReuseKind::LoopMultipleRead),
        flag(a.reuse == ReuseKind::SerialReadWrite),
        flag(a.reuse == ReuseKind::None),
        slog(a.reuse_distance_iters),
        slog(a.reuse_distance_bytes),
        slog(a.reuse_count),
        slog(a.innermost_stride),
        flag(a.contiguous),
        a.element_bytes as f32,
    ]);
}

/// The [`STORE_LEN`] features of one store.
pub fn store_features(s: &StoreSummary) -> Vec<f32> {
    let mut out = Vec::with_capacity(STORE_LEN);
    out.extend(s.ops.values().iter().map(|&c| slog(c * s.trips)));
    let innermost = s.loops.last();
    let of_kind = |k: ForKind| s.loops.iter().filter(move |l| l.kind == k);
    let product = |k: ForKind| of_kind(k).map(|l| l.info.extent).product::<f64>();
    let count = |k: ForKind| of_kind(k).count() as f32;
    let is_innermost = |k: ForKind| flag(innermost.is_some_and(|l| l.kind == k));
    let bytes = s.bytes();
    out.extend([
        slog(s.trips),
        s.loops.len() as f32,
        slog(innermost.map_or(1.0, |l| l.info.extent)),
        s.guards as f32,
        flag(s.is_init),
        flag(s.is_update),
        flag(s.writes_local),
        slog(if count(ForKind::Vectorized) > 0.0 {
            product(ForKind::Vectorized)
        } else {
            0.0
        }),
        is_innermost(ForKind::Vectorized),
        count(ForKind::Vectorized),
        slog(if count(ForKind::Unrolled) > 0.0 {
            product(ForKind::Unrolled)
        } else {
            0.0
        }),
        count(ForKind::Unrolled),
        is_innermost(ForKind::Unrolled),
        slog(if count(ForKind::Parallel) > 0.0 {
            product(ForKind::Parallel)
        } else {
            0.0
        }),
        count(ForKind::Parallel),
        flag(s.loops.first().is_some_and(|l| l.kind == ForKind::Parallel)),
        slog(if bytes > 0.0 { s.flops() / bytes } else { 0.0 }),
        slog(s.alloc_bytes),
        s.accesses.len() as f32,
    ]);
    match &s.micro_kernel {
        Some(k) => out.extend([
            1.0,
            slog(k.vector_bits),
            slog(k.mr),
            slog(k.nr),
            slog(k.kc),
            k.tile_fill() as f32,
            slog(k.calls),
        ]),
        None => out.extend([0.0; 7]),
    }
    debug_assert_eq!(out.len(), STORE_FEATURES.len());
    for a in s.accesses.iter().take(MAX_ACCESSES) {
        access_features(a, &mut out);
    }
    out.resize(STORE_LEN, 0.0);
    out
}

/// The [`FEATURE_LEN`] features of a lowered function.
pub fn func_features(func: &PrimFunc) -> Vec<f32> {
    let stores = summarize(func);
    let mut order: Vec<usize> = (0..stores.len()).collect();
    order.sort_by(|&a, &b| {
        let key = |i: usize| (stores[i].flops(), stores[i].bytes());
        key(b)
            .partial_cmp(&key(a))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut out = Vec::with_capacity(FEATURE_LEN);
    for k in 0..2 {
        match order.get(k) {
            Some(&i) => out.extend(store_features(&stores[i])),
            None => out.resize(out.len() + STORE_LEN, 0.0),
        }
    }
    let rest: Vec<&StoreSummary> = order.iter().skip(2).map(|&i| &stores[i]).collect();
    let mut loops = 0usize;
    let mut allocations = 0usize;
    let mut alloc_bytes = 0.0;
    let mut outer_parallel = 0.0;
    func.body.visit(&mut |s| match s {
        tir::Stmt::For { extent, kind, .. } => {
            loops += 1;
            if *kind == ForKind::Parallel && outer_parallel == 0.0 {
                outer_parallel = *extent as f64;
            }
        }
        tir::Stmt::Allocate { buffer, .. } => {
            allocations += 1;
            if let Some(b) = func.buffers.get(*buffer) {
                alloc_bytes += b.num_elements() as f64 * b.dtype.size_bytes() as f64;
            }
        }
        _ => {}
    });
    out.extend([
        stores.len() as f32,
        slog(rest.iter().map(|s| s.flops()).sum()),
        slog(rest.iter().map(|s| s.bytes()).sum()),
        slog(rest.iter().map(|s| s.lines()).sum()),
        allocations as f32,
        slog(alloc_bytes),
        loops as f32,
        slog(outer_parallel),
    ]);
    out
}

/// Lowers `state` and returns its [`FEATURE_LEN`] features.
pub fn program_features(state: &State) -> Result<Vec<f32>, CostError> {
    let func = tir::lower(state).map_err(|e| CostError::Features(e.to_string()))?;
    Ok(func_features(&func))
}
