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
//! Anything else is left as it was.

use std::collections::HashMap;

use crate::arith::{Affine, Decompose};
use crate::runtime::micro_kernels::MAX_ADDENDS;
use crate::te::{BinOp, Const, DType, Expr, ExprKind, TensorId, Var, min};

use super::super::ir::{
    Buffer, BufferId, ForKind, KernelEpilogue, MicroKernelCall, MicroKernelOperand, Stmt,
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
        Stmt::Allocate { buffer, body } => {
            let body = fuse_tile(*body, buffer, cx);
            if uses(&body, buffer, cx) {
                Stmt::Allocate {
                    buffer,
                    body: Box::new(body),
                }
            } else {
                body
            }
        }
        other => other,
    }
}

/// The body of tile `tile`'s allocation with a call writing it and the
/// consumer right after fused, where nothing else uses the tile.
fn fuse_tile(body: Stmt, tile: BufferId, cx: &Buffers<'_>) -> Stmt {
    let Stmt::Seq(mut items) = body else {
        return body;
    };
    let writes_tile = |s: &Stmt| matches!(s, Stmt::MicroKernelCall(call) if call.c.buffer == tile);
    let Some(at) = items.iter().position(writes_tile) else {
        return Stmt::Seq(items);
    };
    let elsewhere = items
        .iter()
        .enumerate()
        .any(|(n, s)| n != at && n != at + 1 && uses(s, tile, cx));
    let fused = match (&items[at], items.get(at + 1)) {
        (Stmt::MicroKernelCall(call), Some(consumer)) if !elsewhere => {
            fused_call(call, consumer, tile, cx)
        }
        _ => None,
    };
    if let Some(fused) = fused {
        items.splice(at..at + 2, [fused]);
    }
    Stmt::Seq(items)
}

/// The loops, guard and store of a consumer nest `for r { for c { [if g] store } }`.
struct Nest<'s> {
    loops: [&'s Var; 2],
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

fn nest(s: &Stmt) -> Option<Nest<'_>> {
    let (outer, body) = serial_loop(s)?;
    let (inner, body) = serial_loop(body)?;
    let (guard, store) = match single(body)? {
        Stmt::IfThenElse {
            cond,
            then,
            otherwise: None,
        } => (Some(cond), single(then)?),
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
        loops: [outer, inner],
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
    let nest = nest(consumer)?;
    let expr = elementwise(nest.value, tile, cx)?;
    let exact = Decompose::EXACT;
    let flat = |buffer: BufferId, indices: &[Expr]| {
        Affine::flat(indices, &cx.buffers[buffer].shape, exact)
    };
    // Which loop walks the tile's rows and which its columns.
    let tile_at = flat(tile, expr.tile_indices);
    let strides = nest.loops.map(|v| tile_at.coefficient(v.id()));
    let (row, col) = match strides {
        [Some(r), Some(1)] if r == call.c.row_stride => (nest.loops[0], nest.loops[1]),
        [Some(1), Some(r)] if r == call.c.row_stride => (nest.loops[1], nest.loops[0]),
        _ => return None,
    };
    let only_tile_loops = tile_at.terms.iter().all(|(atom, c)| {
        *c == 0
            || atom
                .as_var()
                .is_some_and(|v| v.id() == row.id() || v.id() == col.id())
    });
    if tile_at.constant != 0 || !only_tile_loops {
        return None;
    }
    let operand = |buffer: BufferId, indices: &[Expr]| -> Option<MicroKernelOperand> {
        let form = flat(buffer, indices);
        let row_stride = form.coefficient(row.id())?;
        let col_stride = form.coefficient(col.id())?;
        let origin = form
            .substitute(&row.expr(), &Affine::default())
            .substitute(&col.expr(), &Affine::default());
        Some(MicroKernelOperand {
            buffer,
            offset: origin.to_expr(),
            row_stride,
            col_stride,
        })
    };
    let out = operand(nest.out, nest.indices)?;
    let rows_apart = out.row_stride >= call.n || call.m <= 1;
    if out.col_stride != 1 || !rows_apart || cx.buffers[nest.out].dtype != DType::F32 {
        return None;
    }
    let mut addends = Vec::new();
    for (buffer, indices) in &expr.addends {
        let addend = operand(*buffer, indices)?;
        if *buffer == nest.out || !matches!(addend.col_stride, 0 | 1) || addend.row_stride < 0 {
            return None;
        }
        addends.push(addend);
    }
    let conditions = nest.guard.map(conjuncts).unwrap_or_default();
    let (counts, outside) = block_counts::<2>(&[row.clone(), col.clone()], conditions).ok()?;
    let mut fused = call.clone();
    fused.counts[0] = min(call.counts[0].clone(), counts[0].clone());
    fused.counts[1] = min(call.counts[1].clone(), counts[1].clone());
    fused.c = out;
    fused.epilogue = Some(KernelEpilogue {
        addends,
        lower: expr.lower,
        upper: expr.upper,
    });
    let fused = Stmt::MicroKernelCall(Box::new(fused));
    Some(guarded_by(outside, simplify_exprs(fused)))
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
    let handle = cx.buffers[id].handle.id();
    let mut used = false;
    s.visit(&mut |stmt| {
        used |= match stmt {
            Stmt::Store { buffer, .. } => *buffer == id,
            Stmt::MicroKernelCall(call) => call.operands().iter().any(|o| o.buffer == id),
            Stmt::PackCall(call) => call.src.buffer == id || call.dst.buffer == id,
            Stmt::RowMathCall(call) => call.buffer == id,
            Stmt::StencilCall(call) => call.operands().iter().any(|o| o.buffer == id),
            _ => false,
        }
    });
    s.visit_exprs(&mut |e| {
        used |= e.any(&mut |x| matches!(x.kind(), ExprKind::Read(t, _) if t.id() == handle));
    });
    used
}
