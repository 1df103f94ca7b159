//! Walks a lowered function and describes each store in its context: the
//! loops around it, the guards, its arithmetic and its buffer accesses.

use std::collections::HashMap;

use crate::runtime::micro_kernels::{self, Isa};
use crate::te::{Expr, ExprKind, IterKind, TensorId, Var};
use crate::tir::{
    ForKind, MemScope, MicroKernelCall, MicroKernelOperand, PackCall, PrimFunc, RowMathCall,
    StencilCall, StencilOperand, Stmt,
};

use super::access::{AccessFeatures, AccessKind, LoopInfo, analyse, flat_offset};
use super::ops::OpCounts;

/// An enclosing loop with its annotation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoopCtx {
    pub info: LoopInfo,
    pub kind: ForKind,
}

/// Everything the features of one store are computed from (raw, before
/// the log transform).
#[derive(Clone, Debug)]
pub struct StoreSummary {
    /// The buffer written.
    pub buffer: String,
    /// Times the store executes (product of the enclosing loop extents).
    pub trips: f64,
    /// Operation counts of one execution.
    pub(crate) ops: OpCounts,
    /// Enclosing loops, outer first.
    pub(crate) loops: Vec<LoopCtx>,
    /// Enclosing conditionals.
    pub guards: usize,
    /// The value is a constant (a reduction's initialisation).
    pub is_init: bool,
    /// The value reads the element it writes (a reduction's update).
    pub is_update: bool,
    /// The buffer written is a local (cache) buffer.
    pub writes_local: bool,
    /// Bytes of the buffer written, if it is allocated inside the function.
    pub alloc_bytes: f64,
    /// The accesses, most cache lines first.
    pub(crate) accesses: Vec<AccessFeatures>,
    /// The micro-kernel call this store stands for, if it is one.
    pub micro_kernel: Option<MicroKernelFeatures>,
}

/// What a tensorized store (a [`MicroKernelCall`]) says beyond the loop nest it
/// is described as: the kernel and how the block fills its tile.
#[derive(Clone, Debug, PartialEq)]
pub struct MicroKernelFeatures {
    /// The kernel's name, e.g. `avx512_8x32`.
    pub kernel: String,
    /// Width of the kernel ISA's vector registers in bits (32 for the
    /// portable scalar kernel; 0 if the kernel is unknown).
    pub vector_bits: f64,
    /// The kernel's register tile: rows (0 if unknown).
    pub mr: f64,
    /// The kernel's register tile: columns (0 if unknown).
    pub nr: f64,
    /// The block: rows of C.
    pub m: f64,
    /// The block: columns of C.
    pub n: f64,
    /// The block depth.
    pub kc: f64,
    /// Times the call executes: the product of the loop extents around it.
    pub calls: f64,
}

impl MicroKernelFeatures {
    /// The fraction of the kernel's `mr × nr` tile the `m × n` block fills
    /// (0 if the tile is unknown).
    pub fn tile_fill(&self) -> f64 {
        let tile = self.mr * self.nr;
        if tile > 0.0 {
            (self.m * self.n / tile).min(1.0)
        } else {
            0.0
        }
    }
}

/// The ISA and `(mr, nr)` tile of kernel `name`: from the registry, or,
/// for a kernel this build does not have (another architecture's), from
/// its `<isa>_<MR>x<NR>` name, so features do not depend on the machine
/// that extracts them.
fn kernel_shape(name: &str) -> Option<(Isa, usize, usize)> {
    if let Some(k) = micro_kernels::find(name) {
        return Some((k.isa, k.mr, k.nr));
    }
    let (isa, tile) = name.rsplit_once('_')?;
    let (mr, nr) = tile.split_once('x')?;
    Some((Isa::from_name(isa)?, mr.parse().ok()?, nr.parse().ok()?))
}

/// Bits of one vector register of `isa` (f32 lanes × 32).
fn vector_bits(isa: Isa) -> usize {
    isa.lanes() * 32
}

impl StoreSummary {
    /// Floating-point operations executed in total.
    pub fn flops(&self) -> f64 {
        self.ops.flops() * self.trips
    }

    /// Bytes moved by all accesses in total.
    pub fn bytes(&self) -> f64 {
        self.accesses.iter().map(|a| a.bytes).sum()
    }

    /// Cache lines touched by all accesses in total.
    pub fn lines(&self) -> f64 {
        self.accesses.iter().map(|a| a.lines).sum()
    }
}

struct Walker<'f> {
    func: &'f PrimFunc,
    handles: HashMap<TensorId, usize>,
    allocated: Vec<bool>,
    loops: Vec<LoopCtx>,
    guards: usize,
    out: Vec<StoreSummary>,
}

/// Describes every store of `func`, in program order.
pub fn summarize(func: &PrimFunc) -> Vec<StoreSummary> {
    let mut allocated = vec![false; func.buffers.len()];
    func.body.visit(&mut |s| {
        if let Stmt::Allocate { buffer, .. } = s
            && let Some(a) = allocated.get_mut(*buffer)
        {
            *a = true;
        }
    });
    let mut w = Walker {
        func,
        handles: func.handle_map(),
        allocated,
        loops: Vec::new(),
        guards: 0,
        out: Vec::new(),
    };
    w.stmt(&func.body);
    w.out
}

impl Walker<'_> {
    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => {
                self.loops.push(LoopCtx {
                    info: LoopInfo {
                        var: var.id(),
                        extent: *extent as f64,
                    },
                    kind: *kind,
                });
                self.stmt(body);
                self.loops.pop();
            }
            Stmt::Seq(items) => items.iter().for_each(|i| self.stmt(i)),
            Stmt::IfThenElse {
                then, otherwise, ..
            } => {
                self.guards += 1;
                self.stmt(then);
                if let Some(o) = otherwise {
                    self.stmt(o);
                }
                self.guards -= 1;
            }
            Stmt::Allocate { body, .. } | Stmt::Let { body, .. } => self.stmt(body),
            Stmt::Store {
                buffer,
                indices,
                value,
            } => self.store(*buffer, indices, value),
            Stmt::MicroKernelCall(call) => self.micro_kernel_call(call),
            Stmt::RowMathCall(call) => self.row_math_call(call),
            Stmt::PackCall(call) => self.pack_call(call),
            Stmt::StencilCall(call) => self.stencil_call(call),
        }
    }

    /// Enters the loops a call replaces: serial, the innermost vectorized.
    fn push_call_loops(&mut self, vars: &[Var]) {
        let last = vars.len().saturating_sub(1);
        for (i, v) in vars.iter().enumerate() {
            let kind = if i == last {
                ForKind::Vectorized
            } else {
                ForKind::Serial
            };
            self.loops.push(LoopCtx {
                info: LoopInfo {
                    var: v.id(),
                    extent: v.extent() as f64,
                },
                kind,
            });
        }
    }

    /// A stencil call described as the loop nest it replaces: window rows
    /// and columns serial, outputs vectorized,
    /// `out[j] += weight[r, s] · input[j, r, s]` through the strides; marked
    /// as a one-row kernel call of depth `R·S` ([`MicroKernelFeatures`]).
    fn stencil_call(&mut self, call: &StencilCall) {
        let calls: f64 = self.loops.iter().map(|l| l.info.extent).product();
        let [n, taps_r, taps_s] = call.extents;
        let micro_kernel = MicroKernelFeatures {
            kernel: call.primitive(),
            vector_bits: vector_bits(call.isa) as f64,
            mr: 1.0,
            nr: n as f64,
            m: call.rows as f64,
            n: n as f64,
            kc: (taps_r * taps_s) as f64,
            calls,
        };
        let vars = [
            Var::new("stencil.y", call.rows, IterKind::Spatial),
            Var::new("stencil.r", taps_r, IterKind::Reduce),
            Var::new("stencil.s", taps_s, IterKind::Reduce),
            Var::new("stencil.j", n, IterKind::Spatial),
        ];
        self.push_call_loops(&vars);
        let [y, r, s, j] = vars.clone().map(|v| v.expr());
        let element = |o: &StencilOperand| {
            let rank = self.func.buffers[o.buffer].shape.len().max(1);
            let flat = o.offset.clone()
                + j.clone() * Expr::i64(o.strides[0])
                + r.clone() * Expr::i64(o.strides[1])
                + s.clone() * Expr::i64(o.strides[2])
                + y.clone() * Expr::i64(o.strides[3]);
            let mut idx = vec![Expr::i64(0); rank - 1];
            idx.push(flat);
            idx
        };
        let read = |o: &StencilOperand| self.func.buffers[o.buffer].handle.at(element(o));
        let out_idx = element(&call.out);
        let value = read(&call.out) + read(&call.weight) * read(&call.input);
        let before = self.out.len();
        self.store(call.out.buffer, &out_idx, &value);
        if self.out.len() > before
            && let Some(s) = self.out.last_mut()
        {
            s.micro_kernel = Some(micro_kernel);
        }
        for _ in 0..vars.len() {
            self.loops.pop();
        }
    }

    /// A packing call described as the copy it replaces: rows serial,
    /// columns vectorized, `dst[r, c] = src[r, c]` through the strides.
    fn pack_call(&mut self, call: &PackCall) {
        let vars = [
            Var::new("pack.r", call.extents[0], IterKind::Spatial),
            Var::new("pack.c", call.extents[1], IterKind::Spatial),
        ];
        for (v, kind) in vars.iter().zip([ForKind::Serial, ForKind::Vectorized]) {
            self.loops.push(LoopCtx {
                info: LoopInfo {
                    var: v.id(),
                    extent: v.extent() as f64,
                },
                kind,
            });
        }
        let [r, c] = vars.map(|v| v.expr());
        let src = self.func.buffers[call.src.buffer]
            .handle
            .at(self.flat_indices(&call.src, &r, &c));
        self.store(call.dst.buffer, &self.flat_indices(&call.dst, &r, &c), &src);
        self.loops.pop();
        self.loops.pop();
    }

    /// Operand `o`'s element `(row, col)` as indices of its buffer: the flat
    /// index as the last index (the others 0), the same row-major offset.
    fn flat_indices(&self, o: &MicroKernelOperand, row: &Expr, col: &Expr) -> Vec<Expr> {
        let rank = self.func.buffers[o.buffer].shape.len().max(1);
        let flat = o.offset.clone()
            + row.clone() * Expr::i64(o.row_stride)
            + col.clone() * Expr::i64(o.col_stride);
        let mut idx = vec![Expr::i64(0); rank - 1];
        idx.push(flat);
        idx
    }

    /// A row-primitive call described as the loop it replaces:
    /// `for r in 0..count vectorized { T[r] = f(T[r]) }`.
    fn row_math_call(&mut self, call: &RowMathCall) {
        let r = Var::new("row_math.j", call.count, IterKind::Spatial);
        self.loops.push(LoopCtx {
            info: LoopInfo {
                var: r.id(),
                extent: call.count as f64,
            },
            kind: ForKind::Vectorized,
        });
        let handle = &self.func.buffers[call.buffer].handle;
        let index = vec![r.expr()];
        let value = Expr::new(
            crate::te::DType::F32,
            crate::te::ExprKind::Call(call.function, vec![handle.at(index.clone())]),
        );
        self.store(call.buffer, &index, &value);
        self.loops.pop();
    }

    /// A micro-kernel call described as the loop nest it replaces: m and k
    /// serial, n vectorized, `C[i, j] += A[i, k] · B[k, j]` through the
    /// operands' strides.
    /// The store is marked with the kernel and its block ([`MicroKernelFeatures`]).
    fn micro_kernel_call(&mut self, call: &MicroKernelCall) {
        let calls: f64 = self.loops.iter().map(|l| l.info.extent).product();
        let shape = kernel_shape(&call.kernel);
        let micro_kernel = MicroKernelFeatures {
            kernel: call.kernel.clone(),
            vector_bits: shape.map_or(0.0, |(isa, _, _)| vector_bits(isa) as f64),
            mr: shape.map_or(0.0, |(_, mr, _)| mr as f64),
            nr: shape.map_or(0.0, |(_, _, nr)| nr as f64),
            m: call.m as f64,
            n: call.n as f64,
            kc: call.kc as f64,
            calls,
        };
        let vars = [
            Var::new("gemm.m", call.m, IterKind::Spatial),
            Var::new("gemm.k", call.kc, IterKind::Reduce),
            Var::new("gemm.n", call.n, IterKind::Spatial),
        ];
        self.push_call_loops(&vars);
        let [m, k, n] = vars.map(|v| v.expr());
        let indices =
            |o: &MicroKernelOperand, row: &Expr, col: &Expr| self.flat_indices(o, row, col);
        let read =
            |o: &MicroKernelOperand, idx: Vec<Expr>| self.func.buffers[o.buffer].handle.at(idx);
        let c_idx = indices(&call.c, &m, &n);
        let value = read(&call.c, c_idx.clone())
            + read(&call.a, indices(&call.a, &m, &k)) * read(&call.b, indices(&call.b, &k, &n));
        let before = self.out.len();
        self.store(call.c.buffer, &c_idx, &value);
        if self.out.len() > before
            && let Some(s) = self.out.last_mut()
        {
            s.micro_kernel = Some(micro_kernel);
        }
        for _ in 0..3 {
            self.loops.pop();
        }
    }

    fn store(&mut self, buffer: usize, indices: &[Expr], value: &Expr) {
        let Some(target) = self.func.buffers.get(buffer) else {
            return;
        };
        let mut ops = OpCounts::default();
        ops.add_expr(value);
        indices.iter().for_each(|i| ops.add_expr(i));
        let loops: Vec<LoopInfo> = self.loops.iter().map(|l| l.info).collect();
        let write_offset = flat_offset(indices, &target.shape);
        let mut is_update = false;
        // Reads grouped by buffer; a read of the written element makes the
        // write a read-write.
        let mut reads: Vec<(usize, Vec<Expr>)> = Vec::new();
        value.visit(&mut |x| {
            if let ExprKind::Read(t, idx) = x.kind()
                && let Some(&b) = self.handles.get(&t.id())
            {
                if b == buffer && idx.as_slice() == indices {
                    is_update = true;
                } else if !reads.iter().any(|(rb, ri)| *rb == b && ri == idx) {
                    reads.push((b, idx.clone()));
                }
            }
        });
        let elements = |b: usize| self.func.buffers[b].num_elements() as f64;
        let element_bytes = |b: usize| self.func.buffers[b].dtype.size_bytes() as f64;
        let mut accesses = vec![analyse(
            if is_update {
                AccessKind::ReadWrite
            } else {
                AccessKind::Write
            },
            &write_offset,
            &loops,
            element_bytes(buffer),
            elements(buffer),
        )];
        for (b, idx) in &reads {
            let offset = flat_offset(idx, &self.func.buffers[*b].shape);
            accesses.push(analyse(
                AccessKind::Read,
                &offset,
                &loops,
                element_bytes(*b),
                elements(*b),
            ));
        }
        accesses.sort_by(|a, b| b.lines.total_cmp(&a.lines));
        let allocated = self.allocated.get(buffer).copied().unwrap_or(false);
        self.out.push(StoreSummary {
            buffer: target.name.clone(),
            trips: loops.iter().map(|l| l.extent).product(),
            ops,
            loops: self.loops.clone(),
            guards: self.guards,
            is_init: matches!(value.kind(), ExprKind::Const(_)),
            is_update,
            writes_local: target.scope == MemScope::Local,
            alloc_bytes: if allocated {
                elements(buffer) * element_bytes(buffer)
            } else {
                0.0
            },
            accesses,
            micro_kernel: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_shapes_come_from_the_registry_or_the_name() {
        // The portable kernel is in every build.
        let generic = micro_kernels::all_kernels()
            .iter()
            .find(|k| k.isa == Isa::Generic)
            .expect("a portable kernel");
        assert_eq!(
            kernel_shape(generic.name),
            Some((Isa::Generic, generic.mr, generic.nr))
        );
        assert_eq!(vector_bits(Isa::Generic), 32);
        assert_eq!(vector_bits(Isa::Sse), 128);
        assert_eq!(vector_bits(Isa::Avx2Fma), 256);
        assert_eq!(vector_bits(Isa::Avx512), 512);
        // Whether or not this build has it, a well-formed name describes it.
        assert_eq!(kernel_shape("avx512_8x32"), Some((Isa::Avx512, 8, 32)));
        assert_eq!(kernel_shape("avx2_6x16"), Some((Isa::Avx2Fma, 6, 16)));
        assert_eq!(kernel_shape("nonsense"), None);
        assert_eq!(kernel_shape("avx9_8x32"), None);
    }

    #[test]
    fn tile_fill_is_the_blocks_share_of_the_tile() {
        let call = |m: f64, n: f64, mr: f64, nr: f64| MicroKernelFeatures {
            kernel: "k".into(),
            vector_bits: 512.0,
            mr,
            nr,
            m,
            n,
            kc: 64.0,
            calls: 1.0,
        };
        assert_eq!(call(8.0, 32.0, 8.0, 32.0).tile_fill(), 1.0);
        assert_eq!(call(6.0, 16.0, 8.0, 32.0).tile_fill(), 0.375);
        assert_eq!(call(6.0, 16.0, 0.0, 0.0).tile_fill(), 0.0);
    }
}
