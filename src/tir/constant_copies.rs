//! Copies of a constant input made once, ahead of time (TVM's layout
//! rewrite for inference, done on the loop IR): when a function reads an
//! input only through one copy into a local buffer — a packing panel made
//! inside the loops of a tile, possibly transposing, padded or gathered — the
//! copy's result depends on nothing but the input and the loops around it.
//! Every panel it will ever make can then be made once, concatenated in the
//! order of those loops: the *packer* function does that, and the *kernel*
//! reads the panel at its place in the packed buffer instead of copying.
//!
//! The packed layout is the copy's own: whatever the copy statement does
//! (a `pack` routine, a loop nest, guards at the edges, even arithmetic on
//! the input alone), the packer runs it, so the kernel reads exactly the
//! values it would have computed. Elements a partial copy leaves unwritten
//! are zero in the packed buffer.

use std::collections::HashSet;

use thiserror::Error;

use crate::te::{Expr, ExprKind, IterKind, Var, VarId};

use super::ir::{Buffer, BufferId, ForKind, MemScope, MicroKernelOperand, PrimFunc, Stmt};
use super::passes::map_own_exprs;

/// Why an input's copies cannot be made ahead of time.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConstantCopyError {
    /// The name is not among the function's inputs.
    #[error("'{input}' is not an input of {func}; its inputs are {available}")]
    NotAnInput {
        /// The name asked for.
        input: String,
        /// The function.
        func: String,
        /// Its input names.
        available: String,
    },
    /// No copy of the input into a local buffer was found.
    #[error("the function reads '{0}' directly (it makes no copy of it)")]
    NoCopy(String),
    /// More than one copy, or a copy and direct reads.
    #[error(
        "the function copies '{input}' into {copies} local buffer(s) and reads it directly in \
         {elsewhere} statement(s); only a single copy, and no direct read, can be made ahead of time"
    )]
    ManyUses {
        /// The input.
        input: String,
        /// Copies into local buffers.
        copies: usize,
        /// Statements that read it other than in a copy.
        elsewhere: usize,
    },
    /// The copy depends on something other than its enclosing loops.
    #[error("the copy of '{input}' into {copy} depends on {what}, not only on the loops around it")]
    NotLoopInvariant {
        /// The input.
        input: String,
        /// The local buffer.
        copy: String,
        /// What else it depends on.
        what: String,
    },
    /// The copy is modified or used in a way a packed buffer cannot stand in for.
    #[error("the copy of '{input}' into {copy} is {how}")]
    Unsupported {
        /// The input.
        input: String,
        /// The local buffer.
        copy: String,
        /// What is done to it.
        how: String,
    },
}

/// The packed buffer may be at most this many times the input: panels
/// that overlap (a halo) are stored once per panel.
const MAX_GROWTH: i64 = 4;

/// A function with one constant input's copies made ahead of time.
#[derive(Clone, Debug)]
pub struct HoistedCopy {
    /// The function, now taking the input packed: a 1-D buffer of
    /// [`packed_len`](Self::packed_len) elements in the input's place.
    pub kernel: PrimFunc,
    /// The packing function: the input (as the original function takes it)
    /// in, the packed buffer out.
    pub packer: PrimFunc,
    /// Elements of the packed buffer: one panel per iteration of the loops
    /// the copy depends on.
    pub packed_len: i64,
}

/// A function with the copies of several constant inputs made ahead of
/// time: [`hoist_constant_copies`].
#[derive(Clone, Debug)]
pub struct HoistedConstants {
    /// The function, taking each hoisted input packed.
    pub kernel: PrimFunc,
    /// The packer of each hoisted input, with its name, in name order.
    pub packers: Vec<(String, PrimFunc)>,
    /// The inputs asked for that stay as the function takes them, each with
    /// the reason.
    pub not_hoisted: Vec<(String, ConstantCopyError)>,
}

/// `func` with the copy of each input in `inputs` hoisted into a packer
/// where [`hoist_constant_copy`] can, one after the other (names sorted,
/// repeats ignored); the others stay, with their reasons.
pub fn hoist_constant_copies(func: PrimFunc, inputs: &[&str]) -> HoistedConstants {
    let mut names = inputs.to_vec();
    names.sort_unstable();
    names.dedup();
    let mut hoisted = HoistedConstants {
        kernel: func,
        packers: Vec::new(),
        not_hoisted: Vec::new(),
    };
    for name in names {
        match hoist_constant_copy(&hoisted.kernel, name) {
            Ok(copy) => {
                hoisted.kernel = copy.kernel;
                hoisted.packers.push((name.to_string(), copy.packer));
            }
            Err(reason) => hoisted.not_hoisted.push((name.to_string(), reason)),
        }
    }
    hoisted
}

/// One loop or guard on the path from the function's body to a statement
/// (a let on the path binds no loop: a copy using it is refused).
#[derive(Clone)]
enum Frame {
    Loop { var: Var, extent: i64 },
    Guard(Expr),
}

/// `func` with the copy of input `input` hoisted into a packer (see the
/// module docs). Errors say why it cannot be, naming the copy.
pub fn hoist_constant_copy(func: &PrimFunc, input: &str) -> Result<HoistedCopy, ConstantCopyError> {
    let source = func.params[..func.num_inputs]
        .iter()
        .copied()
        .find(|&id| func.buffers[id].name == input)
        .ok_or_else(|| ConstantCopyError::NotAnInput {
            input: input.to_string(),
            func: func.name.clone(),
            available: func.params[..func.num_inputs]
                .iter()
                .map(|&id| func.buffers[id].name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let mut found = Vec::new();
    find_copies(&func.body, func, source, &mut Vec::new(), &mut found);
    let uses = count_uses(&func.body, func, source);
    let in_copies: usize = found
        .iter()
        .map(|f| count_uses(&f.producer, func, source))
        .sum();
    let Found {
        path,
        local,
        producer,
        consumers,
    } = match found.len() {
        0 => return Err(ConstantCopyError::NoCopy(input.to_string())),
        1 if uses == in_copies => found.remove(0),
        copies => {
            return Err(ConstantCopyError::ManyUses {
                input: input.to_string(),
                copies,
                elsewhere: uses - in_copies,
            });
        }
    };
    let copy_name = func.buffers[local].name.clone();
    let unsupported = |how: &str| ConstantCopyError::Unsupported {
        input: input.to_string(),
        copy: copy_name.clone(),
        how: how.to_string(),
    };
    let producer = &producer;
    if writes(&consumers, local) {
        return Err(unsupported("written again after it is made"));
    }

    // The loops the copy depends on, and the guards it runs under.
    let loops: HashSet<VarId> = path
        .iter()
        .filter_map(|f| match f {
            Frame::Loop { var, .. } => Some(var.id()),
            Frame::Guard(_) => None,
        })
        .collect();
    let mut needed: HashSet<VarId> = HashSet::new();
    for var in producer.free_vars() {
        if !loops.contains(&var) {
            return Err(ConstantCopyError::NotLoopInvariant {
                input: input.to_string(),
                copy: copy_name.clone(),
                what: "a value bound outside a loop (a let)".into(),
            });
        }
        needed.insert(var);
    }
    let mut guards = Vec::new();
    for frame in &path {
        if let Frame::Guard(cond) = frame {
            let vars = expr_vars(cond);
            if vars.iter().all(|v| needed.contains(v)) {
                guards.push(cond.clone());
            } else {
                return Err(ConstantCopyError::NotLoopInvariant {
                    input: input.to_string(),
                    copy: copy_name.clone(),
                    what: format!("the condition {cond} it runs under"),
                });
            }
        }
    }
    let panel_loops: Vec<(Var, i64)> = path
        .iter()
        .filter_map(|f| match f {
            Frame::Loop { var, extent } if needed.contains(&var.id()) => {
                Some((var.clone(), *extent))
            }
            _ => None,
        })
        .collect();

    let panel_len = func.buffers[local].num_elements();
    let panels: i64 = panel_loops.iter().map(|(_, e)| *e).product();
    let packed_len = panels * panel_len;
    let input_len = func.buffers[source].num_elements();
    if packed_len > MAX_GROWTH * input_len.max(1) {
        return Err(unsupported(&format!(
            "made {panels} times over {panel_len} elements: {packed_len} elements packed \
             against the input's {input_len} (more than {MAX_GROWTH}×)"
        )));
    }
    // Flat position of this iteration's panel in the packed buffer.
    let mut base = Expr::i64(0);
    let mut stride = panel_len;
    for (var, extent) in panel_loops.iter().rev() {
        base = base + var.expr() * stride;
        stride *= extent;
    }

    let dtype = func.buffers[source].dtype;
    let mut kernel = func.clone();
    let packed = kernel.buffers.len();
    kernel
        .buffers
        .push(Buffer::new(input, &[packed_len], dtype, MemScope::Global));
    for param in kernel.params.iter_mut() {
        if *param == source {
            *param = packed;
        }
    }
    let redirect = Redirect {
        from: local,
        from_handle: func.buffers[local].handle.clone(),
        shape: func.buffers[local].shape.clone(),
        to: packed,
        to_handle: kernel.buffers[packed].handle.clone(),
        base,
    };
    let reading = redirect.stmt(consumers);
    kernel.body = replace_allocation(kernel.body, local, &mut Some(reading));

    // The packer: zeros (the padding a partial copy leaves), then every panel.
    let mut made = redirect.stmt(producer.clone());
    for cond in guards.into_iter().rev() {
        made = Stmt::IfThenElse {
            cond,
            then: Box::new(made),
            otherwise: None,
        };
    }
    for (var, extent) in panel_loops.iter().rev() {
        made = Stmt::For {
            var: var.clone(),
            extent: *extent,
            kind: ForKind::Serial,
            body: Box::new(made),
        };
    }
    let zero_var = Var::new("packed", packed_len, IterKind::Spatial);
    let zeros = Stmt::For {
        var: zero_var.clone(),
        extent: packed_len,
        kind: ForKind::Serial,
        body: Box::new(Stmt::Store {
            buffer: packed,
            indices: vec![zero_var.expr()],
            value: Expr::constant(dtype, 0.0),
        }),
    };
    let body = renumber(Stmt::Seq(vec![zeros, made]), &[(source, 0), (packed, 1)]);
    let packer = PrimFunc {
        name: format!("{}_pack_{}", func.name, input),
        buffers: vec![func.buffers[source].clone(), kernel.buffers[packed].clone()],
        params: vec![0, 1],
        num_inputs: 1,
        body,
    };
    Ok(HoistedCopy {
        kernel,
        packer,
        packed_len,
    })
}

/// Statements that read or write buffer `id`, counted once each.
fn count_uses(s: &Stmt, func: &PrimFunc, id: BufferId) -> usize {
    let handle = func.buffers[id].handle.id();
    let mut uses = 0;
    s.visit(&mut |stmt| {
        let used = match stmt {
            Stmt::For { .. } | Stmt::Allocate { .. } | Stmt::Seq(_) => false,
            Stmt::Let { value, .. } => reads_handle(value, handle),
            Stmt::IfThenElse { cond, .. } => reads_handle(cond, handle),
            Stmt::Store {
                buffer,
                indices,
                value,
            } => {
                *buffer == id
                    || reads_handle(value, handle)
                    || indices.iter().any(|i| reads_handle(i, handle))
            }
            Stmt::MicroKernelCall(call) => call.operands().iter().any(|o| o.buffer == id),
            Stmt::PackCall(call) => call.src.buffer == id || call.dst.buffer == id,
            Stmt::RowMathCall(call) => call.buffer == id,
            Stmt::StencilCall(call) => call.uses(id),
        };
        uses += usize::from(used);
    });
    uses
}

fn reads_handle(e: &Expr, handle: crate::te::TensorId) -> bool {
    e.any(&mut |x| matches!(x.kind(), ExprKind::Read(t, _) if t.id() == handle))
}

/// An allocation whose first statement fills it from the input alone.
struct Found {
    /// The loops, guards and lets around the allocation.
    path: Vec<Frame>,
    /// The local buffer.
    local: BufferId,
    /// The statement that fills it.
    producer: Stmt,
    /// The allocation's body without it.
    consumers: Stmt,
}

/// Every `alloc L { copy; uses… }` whose first statement touching `L`
/// computes it from `source` alone (a copy, possibly transposing, padded
/// or even transformed), with the path to it.
fn find_copies(
    s: &Stmt,
    func: &PrimFunc,
    source: BufferId,
    path: &mut Vec<Frame>,
    found: &mut Vec<Found>,
) {
    match s {
        Stmt::Allocate { buffer, body } => {
            if let Some((producer, consumers)) = split_copy(body, func, *buffer)
                && is_copy_of(&producer, func, source, *buffer)
            {
                found.push(Found {
                    path: path.clone(),
                    local: *buffer,
                    producer,
                    consumers,
                });
            }
            find_copies(body, func, source, path, found);
        }
        Stmt::For {
            var, extent, body, ..
        } => {
            path.push(Frame::Loop {
                var: var.clone(),
                extent: *extent,
            });
            find_copies(body, func, source, path, found);
            path.pop();
        }
        Stmt::Let { body, .. } => find_copies(body, func, source, path, found),
        Stmt::IfThenElse {
            cond,
            then,
            otherwise,
        } => {
            path.push(Frame::Guard(cond.clone()));
            find_copies(then, func, source, path, found);
            path.pop();
            if let Some(o) = otherwise {
                path.push(Frame::Guard(!cond.clone()));
                find_copies(o, func, source, path, found);
                path.pop();
            }
        }
        Stmt::Seq(items) => items
            .iter()
            .for_each(|i| find_copies(i, func, source, path, found)),
        Stmt::Store { .. }
        | Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::PackCall(_)
        | Stmt::StencilCall(_) => {}
    }
}

/// The statement that first touches `local` in the scope of its allocation
/// (`body`, through the allocations of other buffers that open it, then a
/// sequence), and `body` without it: the copy that fills `local` and
/// everything after it. `None` when the scope has no such sequence.
fn split_copy(body: &Stmt, func: &PrimFunc, local: BufferId) -> Option<(Stmt, Stmt)> {
    match body {
        Stmt::Allocate { buffer, body } if *buffer != local => {
            let (first, rest) = split_copy(body, func, local)?;
            Some((
                first,
                Stmt::Allocate {
                    buffer: *buffer,
                    body: Box::new(rest),
                },
            ))
        }
        Stmt::Seq(items) => {
            let at = items.iter().position(|i| count_uses(i, func, local) > 0)?;
            let mut rest = items.clone();
            let first = rest.remove(at);
            Some((first, Stmt::Seq(rest)))
        }
        _ => None,
    }
}

/// Whether `s` writes only `local`, reads only `source` (at least once) and
/// calls nothing but packing routines from `source` into `local`.
fn is_copy_of(s: &Stmt, func: &PrimFunc, source: BufferId, local: BufferId) -> bool {
    let handle = func.buffers[source].handle.id();
    let mut reads_source = false;
    let mut only = true;
    s.visit(&mut |stmt| match stmt {
        Stmt::Store { buffer, .. } => only &= *buffer == local,
        Stmt::PackCall(call) => {
            only &= call.dst.buffer == local && call.src.buffer == source;
            reads_source = true;
        }
        Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::StencilCall(_)
        | Stmt::Allocate { .. } => only = false,
        _ => {}
    });
    s.visit_exprs(&mut |e| {
        e.visit(&mut |x| {
            if let ExprKind::Read(t, _) = x.kind() {
                if t.id() == handle {
                    reads_source = true;
                } else {
                    only = false;
                }
            }
        })
    });
    only && reads_source
}

/// Whether `s` writes buffer `id`.
fn writes(s: &Stmt, id: BufferId) -> bool {
    let mut written = false;
    s.visit(&mut |stmt| {
        written |= match stmt {
            Stmt::Store { buffer, .. } => *buffer == id,
            Stmt::MicroKernelCall(call) => call.c.buffer == id,
            Stmt::PackCall(call) => call.dst.buffer == id,
            Stmt::RowMathCall(call) => call.buffer == id,
            Stmt::StencilCall(call) => call.out.buffer == id,
            _ => false,
        }
    });
    written
}

fn expr_vars(e: &Expr) -> Vec<VarId> {
    let mut vars = Vec::new();
    e.visit(&mut |x| {
        if let ExprKind::Var(v) = x.kind()
            && !vars.contains(&v.id())
        {
            vars.push(v.id());
        }
    });
    vars
}

/// Accesses of a local buffer sent to its panel in the packed buffer.
struct Redirect {
    from: BufferId,
    from_handle: crate::te::Tensor,
    shape: Vec<i64>,
    to: BufferId,
    to_handle: crate::te::Tensor,
    base: Expr,
}

impl Redirect {
    fn flat(&self, indices: &[Expr]) -> Expr {
        let mut flat = self.base.clone();
        let mut stride = 1;
        for (index, extent) in indices.iter().zip(&self.shape).rev() {
            flat = flat + index.clone() * stride;
            stride *= extent;
        }
        flat
    }

    fn operand(&self, o: &mut MicroKernelOperand) {
        self.retarget(&mut o.buffer, &mut o.offset);
    }

    /// A call operand's buffer and flat offset, sent to the panel when it
    /// is the local buffer.
    fn retarget(&self, buffer: &mut BufferId, offset: &mut Expr) {
        if *buffer == self.from {
            *buffer = self.to;
            *offset = self.base.clone() + offset.clone();
        }
    }

    fn stmt(&self, s: Stmt) -> Stmt {
        let s = match s {
            Stmt::Store {
                buffer,
                indices,
                value,
            } if buffer == self.from => Stmt::Store {
                buffer: self.to,
                indices: vec![self.flat(&indices)],
                value,
            },
            Stmt::MicroKernelCall(mut call) => {
                for operand in call.operands_mut() {
                    self.operand(operand);
                }
                Stmt::MicroKernelCall(call)
            }
            Stmt::PackCall(mut call) => {
                self.operand(&mut call.src);
                self.operand(&mut call.dst);
                Stmt::PackCall(call)
            }
            Stmt::StencilCall(mut call) => {
                for o in [&mut call.out, &mut call.input, &mut call.weight] {
                    self.retarget(&mut o.buffer, &mut o.offset);
                }
                for addend in call.epilogue.iter_mut().flat_map(|e| e.addends.iter_mut()) {
                    self.operand(addend);
                }
                Stmt::StencilCall(call)
            }
            other => super::passes::map_children(other, &mut |c| self.stmt(c)),
        };
        let handle = self.from_handle.id();
        map_own_exprs(s, &mut |e| {
            e.rewrite(&mut |x| match x.kind() {
                ExprKind::Read(t, idx) if t.id() == handle => Some(Expr::new(
                    x.dtype(),
                    ExprKind::Read(self.to_handle.clone(), vec![self.flat(idx)]),
                )),
                _ => None,
            })
        })
    }
}

/// `s` with the allocation of `local` replaced by `replacement` (taken once).
fn replace_allocation(s: Stmt, local: BufferId, replacement: &mut Option<Stmt>) -> Stmt {
    match s {
        Stmt::Allocate { buffer, .. } if buffer == local && replacement.is_some() => {
            replacement.take().unwrap_or_else(Stmt::nop)
        }
        other => {
            super::passes::map_children(other, &mut |c| replace_allocation(c, local, replacement))
        }
    }
}

/// `s` with buffer ids renumbered by `map` (ids not in it are kept).
fn renumber(s: Stmt, map: &[(BufferId, BufferId)]) -> Stmt {
    let id = |b: BufferId| map.iter().find(|(f, _)| *f == b).map_or(b, |(_, t)| *t);
    match s {
        Stmt::Store {
            buffer,
            indices,
            value,
        } => Stmt::Store {
            buffer: id(buffer),
            indices,
            value,
        },
        Stmt::PackCall(mut call) => {
            call.src.buffer = id(call.src.buffer);
            call.dst.buffer = id(call.dst.buffer);
            Stmt::PackCall(call)
        }
        Stmt::Allocate { buffer, body } => Stmt::Allocate {
            buffer: id(buffer),
            body: Box::new(renumber(*body, map)),
        },
        other => super::passes::map_children(other, &mut |c| renumber(c, map)),
    }
}
