//! Elementwise consumers fused into the micro-kernel call whose tile they
//! read (`fuse_kernel_epilogues`): a tile buffer `T` written by one call
//! and read only by the loop nest right after it,
//!
//! ```text
//! alloc T { T = A @ B  // micro-kernel
//!           for r { for c { [if guard] out[…] = min(max((T[r, c] + x[…]) + y[…], lo), hi) } } }
//! ```
//!
//! becomes one call that stores `out` directly, its results passed through
//! the epilogue first (the kernel's vector registers, not a second pass of
//! 128-bit code over the tile). What fuses: up to
//! [`MAX_ADDENDS`] addends, each read per row (`x[r]`) or contiguously along
//! the row (`x[r, c]`), then an optional `max` and `min` with constants, in
//! exactly that order (the kernels apply them in it, so results are
//! bit-identical); `out` must be contiguous along `c`. The call computes the
//! rows and columns the consumer's guard lets through, within its own.
//! A one-row stencil call and the one loop over its outputs after it fuse
//! the same way (a depthwise convolution's bias and clip), before the rows
//! of a plane are merged into one call. Anything else is left as it was.

use std::collections::HashMap;

use crate::arith::{Affine, Decompose};
use crate::runtime::micro_kernels::MAX_ADDENDS;
use crate::te::{BinOp, Const, DType, Expr, ExprKind, TensorId, Var, min};

use super::super::ir::{
    Buffer, BufferId, ForKind, KernelEpilogue, MicroKernelCall, MicroKernelOperand, StencilCall,
    StencilOperand, Stmt,
};
use super::super::passes::{map_children, simplify_exprs};
use super::Lowering;
use super::tensorize::{block_counts, guarded_by};

impl Lowering<'_> {
    /// Fuses every elementwise consumer of a micro-kernel tile into its call
    /// (see the [module docs](self)).
    pub(super) fn fuse_kernel_epilogues(&mut self) {
        let body = std::mem::replace(&mut self.body, Stmt::nop());
        self.body = fuse_kernel_epilogues(body, &self.buffers);
    }
}

/// `s` with every fusable consumer of a micro-kernel tile fused into the
/// call, and the tiles no longer used dropped.
pub(crate) fn fuse_kernel_epilogues(s: Stmt, buffers: &[Buffer]) -> Stmt {
    let handles: HashMap<TensorId, BufferId> = buffers
        .iter()
        .enumerate()
        .map(|(n, b)| (b.handle.id(), n))
        .collect();
    fuse(s, &Buffers { buffers, handles })
}

struct Buffers<'a> {
    buffers: &'a [Buffer],
    handles: HashMap<TensorId, BufferId>,
}

fn fuse(s: Stmt, cx: &Buffers<'_>) -> Stmt {
    match map_children(s, &mut |child| fuse(child, cx)) {
        Stmt::Allocate { buffer, body } => match fuse_tile(*body, buffer, cx) {
            // The fused call stores the output itself: the tile is gone.
            Ok(fused) => fused,
            Err(body) => Stmt::Allocate {
                buffer,
                body: Box::new(body),
            },
        },
        other => other,
    }
}

/// The body of tile `tile`'s allocation with the call writing it and the
/// consumer right after fused, where nothing else uses the tile; the body
/// back unchanged otherwise.
fn fuse_tile(body: Stmt, tile: BufferId, cx: &Buffers<'_>) -> Result<Stmt, Stmt> {
    let Stmt::Seq(mut items) = body else {
        return Err(body);
    };
    let writes_tile = |s: &Stmt| match s {
        Stmt::MicroKernelCall(call) => call.c.buffer == tile,
        Stmt::StencilCall(call) => call.out.buffer == tile,
        _ => false,
    };
    let Some(at) = items.iter().position(writes_tile) else {
        return Err(Stmt::Seq(items));
    };
    let fused = match (&items[at], items.get(at + 1)) {
        (Stmt::MicroKernelCall(call), Some(consumer)) => fused_call(call, consumer, tile, cx),
        (Stmt::StencilCall(call), Some(consumer)) => fused_stencil(call, consumer, tile, cx),
        _ => None,
    };
    let elsewhere = || {
        items
            .iter()
            .enumerate()
            .any(|(n, s)| n != at && n != at + 1 && uses(s, tile, cx))
    };
    match fused {
        Some(fused) if !elsewhere() => {
            items.splice(at..at + 2, [fused]);
            Ok(match items.len() {
                1 => items.remove(0),
                _ => Stmt::Seq(items),
            })
        }
        _ => Err(Stmt::Seq(items)),
    }
}

/// The loops, guard and store of a consumer nest `for r { for c { [if g]
/// store } }` (or of one loop, `for c { … }`).
struct Nest<'s> {
    loops: Vec<&'s Var>,
    guard: Option<&'s Expr>,
    out: BufferId,
    indices: &'s [Expr],
    value: &'s Expr,
}

/// The statement of a one-statement sequence, or `s` itself.
fn single(s: &Stmt) -> Option<&Stmt> {
    match s {
        Stmt::Seq(items) if items.len() == 1 => items.first(),
        Stmt::Seq(_) => None,
        other => Some(other),
    }
}

/// A loop that does not fork (its variable and body).
fn serial_loop(s: &Stmt) -> Option<(&Var, &Stmt)> {
    match single(s)? {
        Stmt::For {
            var, kind, body, ..
        } if *kind != ForKind::Parallel => Some((var, &**body)),
        _ => None,
    }
}

/// The consumer nest of `s`, when its guard does not read the tile (the
/// fused call drops the guard's reads).
fn nest<'s>(s: &'s Stmt, tile: BufferId, cx: &Buffers<'_>) -> Option<Nest<'s>> {
    let (outer, body) = serial_loop(s)?;
    let (loops, body) = match serial_loop(body) {
        Some((inner, body)) => (vec![outer, inner], body),
        None => (vec![outer], body),
    };
    let (guard, store) = match single(body)? {
        Stmt::IfThenElse {
            cond,
            then,
            otherwise: None,
        } if !reads(cond, tile, cx) => (Some(cond), single(then)?),
        Stmt::IfThenElse { .. } => return None,
        other => (None, other),
    };
    let Stmt::Store {
        buffer,
        indices,
        value,
    } = store
    else {
        return None;
    };
    Some(Nest {
        loops,
        guard,
        out: *buffer,
        indices,
        value,
    })
}

/// The elementwise expression of a tile read: the read's indices, the
/// addends' reads (in order) and the clamps.
struct Elementwise<'e> {
    tile_indices: &'e [Expr],
    addends: Vec<(BufferId, &'e [Expr])>,
    lower: Option<f32>,
    upper: Option<f32>,
}

fn elementwise<'e>(value: &'e Expr, tile: BufferId, cx: &Buffers<'_>) -> Option<Elementwise<'e>> {
    let f32_const = |e: &Expr| match e.kind() {
        ExprKind::Const(Const::Float(v)) if e.dtype() == DType::F32 => Some(*v as f32),
        _ => None,
    };
    let read_of = |e: &'e Expr| match e.kind() {
        ExprKind::Read(t, indices) if e.dtype() == DType::F32 => {
            Some((*cx.handles.get(&t.id())?, indices.as_slice()))
        }
        _ => None,
    };
    let mut e = value;
    let mut upper = None;
    let mut lower = None;
    if let ExprKind::Binary(BinOp::Min, x, bound) = e.kind() {
        upper = Some(f32_const(bound)?);
        e = x;
    }
    if let ExprKind::Binary(BinOp::Max, x, bound) = e.kind() {
        lower = Some(f32_const(bound)?);
        e = x;
    }
    let mut addends = Vec::new();
    while let ExprKind::Binary(BinOp::Add, x, y) = e.kind() {
        // One side continues the chain down to the tile read, the other is
        // one read of another buffer.
        let chain = |e: &'e Expr| {
            matches!(e.kind(), ExprKind::Binary(BinOp::Add, ..))
                || read_of(e).is_some_and(|(b, _)| b == tile)
        };
        let term = |e: &'e Expr| read_of(e).filter(|(b, _)| *b != tile);
        let (rest, addend) = match (term(y), term(x)) {
            (Some(addend), _) if chain(x) => (x, addend),
            (_, Some(addend)) if chain(y) => (y, addend),
            _ => return None,
        };
        addends.insert(0, addend);
        e = rest;
    }
    let (buffer, tile_indices) = read_of(e)?;
    (buffer == tile && addends.len() <= MAX_ADDENDS).then_some(Elementwise {
        tile_indices,
        addends,
        lower,
        upper,
    })
}

/// `call` storing `consumer`'s output through the epilogue of its
/// elementwise expression, when the consumer reads the tile element the
/// call wrote at its own `(r, c)` and nothing else of it.
fn fused_call(
    call: &MicroKernelCall,
    consumer: &Stmt,
    tile: BufferId,
    cx: &Buffers<'_>,
) -> Option<Stmt> {
    if call.epilogue.is_some()
        || call.accumulate.as_int() != Some(0)
        || call.c.offset.as_int() != Some(0)
        || call.c.col_stride != 1
    {
        return None;
    }
    let nest = nest(consumer, tile, cx)?;
    let expr = elementwise(nest.value, tile, cx)?;
    // Which loop walks the tile's rows and which its columns: the tile
    // element the call wrote at (row, col).
    let [a, b] = nest.loops[..] else {
        return None;
    };
    let reads_written = |row: &Var, col: &Var| {
        tile_operand(tile, expr.tile_indices, Some(row), col, cx).is_some_and(|at| {
            at.offset.as_int() == Some(0)
                && at.col_stride == 1
                && at.row_stride == call.c.row_stride
        })
    };
    let (row, col) = if reads_written(a, b) {
        (a, b)
    } else if reads_written(b, a) {
        (b, a)
    } else {
        return None;
    };
    let out = tile_operand(nest.out, nest.indices, Some(row), col, cx)?;
    let rows_apart = out.row_stride >= call.n || call.m <= 1;
    if out.col_stride != 1 || !rows_apart {
        return None;
    }
    let epilogue = epilogue_of(&expr, nest.out, Some(row), col, cx)?;
    let conditions = nest.guard.map(conjuncts).unwrap_or_default();
    let (counts, outside) = block_counts::<2>(&[row.clone(), col.clone()], conditions).ok()?;
    let mut fused = call.clone();
    fused.counts[0] = min(call.counts[0].clone(), counts[0].clone());
    fused.counts[1] = min(call.counts[1].clone(), counts[1].clone());
    fused.c = out;
    fused.epilogue = Some(epilogue);
    let fused = Stmt::MicroKernelCall(Box::new(fused));
    Some(guarded_by(outside, simplify_exprs(fused)))
}

/// A one-row stencil `call` storing `consumer`'s output through the
/// epilogue of its elementwise expression, when the consumer's one loop
/// reads the output the call wrote at its own `j` and nothing else of it.
fn fused_stencil(
    call: &StencilCall,
    consumer: &Stmt,
    tile: BufferId,
    cx: &Buffers<'_>,
) -> Option<Stmt> {
    if call.epilogue.is_some()
        || call.rows != 1
        || call.accumulate.as_int() != Some(0)
        || call.out.offset.as_int() != Some(0)
        || call.out.strides[0] != 1
    {
        return None;
    }
    let nest = nest(consumer, tile, cx)?;
    let [col] = nest.loops[..] else {
        return None;
    };
    let expr = elementwise(nest.value, tile, cx)?;
    let at = tile_operand(tile, expr.tile_indices, None, col, cx)?;
    if at.offset.as_int() != Some(0) || at.col_stride != 1 {
        return None;
    }
    let out = tile_operand(nest.out, nest.indices, None, col, cx)?;
    if out.col_stride != 1 {
        return None;
    }
    let epilogue = epilogue_of(&expr, nest.out, None, col, cx)?;
    let conditions = nest.guard.map(conjuncts).unwrap_or_default();
    let (counts, outside) = block_counts::<1>(std::slice::from_ref(col), conditions).ok()?;
    let mut fused = call.clone();
    fused.counts[0] = min(call.counts[0].clone(), counts[0].clone());
    fused.out = StencilOperand {
        buffer: out.buffer,
        offset: out.offset,
        strides: [1, 0, 0, 0],
    };
    fused.epilogue = Some(epilogue);
    let fused = Stmt::StencilCall(Box::new(fused));
    Some(guarded_by(outside, simplify_exprs(fused)))
}

/// The read or store of `buffer` at `indices` as a tile over the loops
/// `row` (none: one row) and `col`: its element at the origin and its
/// strides, when affine in both.
fn tile_operand(
    buffer: BufferId,
    indices: &[Expr],
    row: Option<&Var>,
    col: &Var,
    cx: &Buffers<'_>,
) -> Option<MicroKernelOperand> {
    if cx.buffers[buffer].dtype != DType::F32 {
        return None;
    }
    let form = Affine::flat(indices, &cx.buffers[buffer].shape, Decompose::EXACT);
    let row_stride = match row {
        Some(row) => form.coefficient(row.id())?,
        None => 0,
    };
    let col_stride = form.coefficient(col.id())?;
    let origin = row
        .into_iter()
        .chain([col])
        .fold(form, |f, v| f.substitute(&v.expr(), &Affine::default()));
    Some(MicroKernelOperand {
        buffer,
        offset: origin.to_expr(),
        row_stride,
        col_stride,
    })
}

/// The epilogue of `expr`, its addends as tiles over `row` and `col`
/// (each read per row or along it, never the output `out` itself).
fn epilogue_of(
    expr: &Elementwise<'_>,
    out: BufferId,
    row: Option<&Var>,
    col: &Var,
    cx: &Buffers<'_>,
) -> Option<KernelEpilogue> {
    let mut addends = Vec::new();
    for &(buffer, indices) in &expr.addends {
        let addend = tile_operand(buffer, indices, row, col, cx)?;
        if buffer == out || !matches!(addend.col_stride, 0 | 1) || addend.row_stride < 0 {
            return None;
        }
        addends.push(addend);
    }
    Some(KernelEpilogue {
        addends,
        lower: expr.lower,
        upper: expr.upper,
    })
}

/// The conjuncts of a boolean condition (`a && b && …`).
fn conjuncts(cond: &Expr) -> Vec<Expr> {
    match cond.kind() {
        ExprKind::Binary(BinOp::And, a, b) => {
            let mut out = conjuncts(a);
            out.extend(conjuncts(b));
            out
        }
        _ => vec![cond.clone()],
    }
}

/// Whether `s` reads or writes buffer `id` (a store, a read in any
/// expression, an operand of a call).
fn uses(s: &Stmt, id: BufferId, cx: &Buffers<'_>) -> bool {
    let mut used = false;
    s.visit(&mut |stmt| {
        used |= match stmt {
            Stmt::Store { buffer, .. } => *buffer == id,
            Stmt::MicroKernelCall(call) => call.operands().iter().any(|o| o.buffer == id),
            Stmt::PackCall(call) => call.src.buffer == id || call.dst.buffer == id,
            Stmt::RowMathCall(call) => call.buffer == id,
            Stmt::StencilCall(call) => call.uses(id),
            _ => false,
        }
    });
    s.visit_exprs(&mut |e| used |= reads(e, id, cx));
    used
}

/// Whether `e` reads buffer `id`.
fn reads(e: &Expr, id: BufferId, cx: &Buffers<'_>) -> bool {
    let handle = cx.buffers[id].handle.id();
    e.any(&mut |x| matches!(x.kind(), ExprKind::Read(t, _) if t.id() == handle))
}
