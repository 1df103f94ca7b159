//! The loop-nest IR: a [`PrimFunc`] is buffers plus a statement tree of
//! loops, stores, conditionals, allocations and lets.
//!
//! Expressions are [`te::Expr`](crate::te::Expr): loop variables are
//! [`Var`]s ranging over `0..extent`, and a `Read` reads a buffer through the
//! buffer's handle tensor ([`Buffer::handle`]). Reductions never appear.

use std::collections::HashMap;

use crate::runtime::micro_kernels::Isa;
use crate::te::{DType, Expr, Intrinsic, Tensor, TensorId, Var, placeholder};

/// Position of a buffer in [`PrimFunc::buffers`].
pub type BufferId = usize;

/// Where a buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemScope {
    /// A function argument, or a buffer allocated for the whole function.
    Global,
    /// A local buffer (cache stages), a candidate for registers.
    Local,
}

/// A dense row-major buffer.
#[derive(Clone, Debug)]
pub struct Buffer {
    /// The name (the stage it holds).
    pub name: String,
    /// Extents, outer first.
    pub shape: Vec<i64>,
    /// Element type.
    pub dtype: DType,
    /// Where it lives.
    pub scope: MemScope,
    /// The tensor that `Read` expressions use to name this buffer.
    pub handle: Tensor,
}

impl Buffer {
    /// A buffer with a fresh handle.
    pub fn new(name: &str, shape: &[i64], dtype: DType, scope: MemScope) -> Buffer {
        Buffer {
            name: name.into(),
            shape: shape.to_vec(),
            dtype,
            scope,
            handle: placeholder(name, shape, dtype),
        }
    }

    /// Number of elements.
    pub fn num_elements(&self) -> i64 {
        self.shape.iter().product()
    }
}

/// How a loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ForKind {
    /// One iteration after another.
    Serial,
    /// Iterations on the thread pool.
    Parallel,
    /// Vector code.
    Vectorized,
    /// Unrolled at code generation.
    Unrolled,
}

impl ForKind {
    /// The keyword used by the printer.
    pub fn name(self) -> &'static str {
        match self {
            ForKind::Serial => "serial",
            ForKind::Parallel => "parallel",
            ForKind::Vectorized => "vectorized",
            ForKind::Unrolled => "unrolled",
        }
    }
}

/// One operand of a [`MicroKernelCall`]: element `(r, c)` is
/// `buffer[offset + r·row_stride + c·col_stride]` (flat, row-major index).
#[derive(Clone, Debug)]
pub struct MicroKernelOperand {
    /// The buffer.
    pub buffer: BufferId,
    /// Flat index of element (0, 0); an `i64` expression of the enclosing loops.
    pub offset: Expr,
    /// Elements between consecutive rows.
    pub row_stride: i64,
    /// Elements between consecutive columns (1 for B and C).
    pub col_stride: i64,
}

/// A call of a GEMM micro-kernel (a tensorized block):
/// `C[m×n] += A[m×kc] · B[kc×n]`.
#[derive(Clone, Debug)]
pub struct MicroKernelCall {
    /// The micro-kernel (`runtime::micro_kernels` name).
    pub kernel: String,
    /// Rows of C and A in the block.
    pub m: i64,
    /// Columns of C and B in the block.
    pub n: i64,
    /// The block's reduction length.
    pub kc: i64,
    /// The (rows, columns, depth) this call computes, `i64` expressions:
    /// the block's extents, or fewer at the edge of a split that does not
    /// divide (the kernel's edge tiles).
    pub counts: [Expr; 3],
    /// The broadcast operand, `m × kc`.
    pub a: MicroKernelOperand,
    /// The vector operand, `kc × n`, contiguous along n.
    pub b: MicroKernelOperand,
    /// The accumulator, `m × n`, contiguous along n.
    pub c: MicroKernelOperand,
    /// An `i64` expression: nonzero where the call adds to C (`C += A·B`),
    /// zero where it starts C from zero without reading it (`C = A·B`): the
    /// sum of the reduction loops around the call when nothing else stands
    /// between the tile's first call and its init (TVM's `reduce_init`),
    /// else 1.
    pub accumulate: Expr,
    /// What the kernel applies to each result before storing it into C (the
    /// tile's elementwise consumer, fused by the `fuse_kernel_epilogues`
    /// pass), or `None`.
    pub epilogue: Option<KernelEpilogue>,
}

/// What a micro-kernel call applies to each result `x` of its tile before
/// storing it (see `runtime::micro_kernels::Epilogue`): every addend in
/// order, then `max(·, lower)`, then `min(·, upper)`.
#[derive(Clone, Debug, Default)]
pub struct KernelEpilogue {
    /// Terms added in order: element `(r, c)` of the tile at the operand's
    /// `(r, c)`; `col_stride` 0 (one value per row) or 1 (contiguous), at
    /// most `runtime::micro_kernels::MAX_ADDENDS`.
    pub addends: Vec<MicroKernelOperand>,
    /// The lower clamp.
    pub lower: Option<f32>,
    /// The upper clamp (after the lower).
    pub upper: Option<f32>,
}

impl MicroKernelCall {
    /// The operands: A, B, C, then the epilogue's addends.
    pub fn operands(&self) -> Vec<&MicroKernelOperand> {
        let addends = self.epilogue.iter().flat_map(|e| e.addends.iter());
        [&self.a, &self.b, &self.c]
            .into_iter()
            .chain(addends)
            .collect()
    }

    /// The operands, mutable: A, B, C, then the epilogue's addends.
    pub fn operands_mut(&mut self) -> Vec<&mut MicroKernelOperand> {
        let addends = self.epilogue.iter_mut().flat_map(|e| e.addends.iter_mut());
        [&mut self.a, &mut self.b, &mut self.c]
            .into_iter()
            .chain(addends)
            .collect()
    }

    /// Every expression of the call: the operands' offsets, the counts,
    /// then `accumulate`.
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut out: Vec<&Expr> = self.operands().iter().map(|o| &o.offset).collect();
        out.extend(self.counts.iter());
        out.push(&self.accumulate);
        out
    }
}

/// A call of a row primitive (`runtime::row_math`):
/// `buffer[j] = function(buffer[j])` for `0 ≤ j < count`, in place, at the
/// full vector width of `isa`. Made by the `row_math` lowering pass from a
/// `row_math` step.
#[derive(Clone, Debug)]
pub struct RowMathCall {
    /// The function (an f32 transcendental).
    pub function: Intrinsic,
    /// The instruction set of the row primitive.
    pub isa: Isa,
    /// The scratch row (f32, at least `count` elements), from element 0.
    pub buffer: BufferId,
    /// How many elements.
    pub count: i64,
}

impl RowMathCall {
    /// The row primitive's name, e.g. `avx2_exp`.
    pub fn primitive(&self) -> String {
        format!("{}_{}", self.isa.name(), self.function.name())
    }
}

/// A call of a packing routine (`runtime::pack`), from a `pack` step:
/// `dst(r, c) = src(r, c)` for `r < counts[0]`, `c < counts[1]`, where
/// element `(r, c)` of each operand is as in [`MicroKernelOperand`] (dst's
/// column stride is 1).
#[derive(Clone, Debug)]
pub struct PackCall {
    /// The instruction set of the routine.
    pub isa: Isa,
    /// Rows and columns of the full block (the two loops' extents).
    pub extents: [i64; 2],
    /// The rows and columns this call copies, `i64` expressions: the
    /// extents, or fewer at the edge of a split that does not divide.
    pub counts: [Expr; 2],
    /// The copied tensor.
    pub src: MicroKernelOperand,
    /// The panel written, contiguous along columns.
    pub dst: MicroKernelOperand,
}

impl PackCall {
    /// The routine's name, e.g. `avx2_pack`.
    pub fn routine(&self) -> String {
        format!("{}_pack", self.isa.name())
    }

    /// Every expression of the call: the offsets (src, dst), then the counts.
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut out = vec![&self.src.offset, &self.dst.offset];
        out.extend(self.counts.iter());
        out
    }
}

/// One operand of a [`StencilCall`]: the element at output `j` of row `y`,
/// tap `(r, s)` is
/// `buffer[offset + j·strides[0] + r·strides[1] + s·strides[2] + y·strides[3]]`
/// (flat, row-major index).
#[derive(Clone, Debug)]
pub struct StencilOperand {
    /// The buffer.
    pub buffer: BufferId,
    /// Flat index of the element at output 0, tap (0, 0); an `i64`
    /// expression of the enclosing loops.
    pub offset: Expr,
    /// Elements between consecutive outputs, window rows, window columns
    /// and rows of outputs.
    pub strides: [i64; 4],
}

/// A call of a stencil primitive (`runtime::stencil`), a block tensorized
/// with a stencil intrinsic: for each of `rows` rows `y` in turn and
/// `j < counts[0]`,
/// `out[y, j] (+)= Σ_{r < counts[1]} Σ_{s < counts[2]} weight[r, s] · input[y, j, r, s]`,
/// at the full vector width of `isa` (a depthwise convolution's rows).
#[derive(Clone, Debug)]
pub struct StencilCall {
    /// The instruction set of the primitive.
    pub isa: Isa,
    /// The block's extents: outputs, window rows, window columns.
    pub extents: [i64; 3],
    /// What this call computes, `i64` expressions: the extents, or fewer at
    /// the edge of a split that does not divide.
    pub counts: [Expr; 3],
    /// Rows of outputs: 1 as lowered, more where a loop around the call
    /// was folded into it (`tir::coalesce_stencil_rows`).
    pub rows: i64,
    /// The output row (strides `[1, 0, 0, ·]`).
    pub out: StencilOperand,
    /// The input window (stride along the outputs ≥ 1).
    pub input: StencilOperand,
    /// The window's weights (stride 0 along the outputs and the rows).
    pub weight: StencilOperand,
    /// An `i64` expression: nonzero where the call adds to the output,
    /// zero where it starts it from zero (as [`MicroKernelCall::accumulate`]).
    pub accumulate: Expr,
    /// What the primitive applies to each output before storing it, the
    /// output `j` of row `y` as the epilogue's element `(y, j)` (the
    /// convolution's elementwise consumer, fused by `fuse_kernel_epilogues`),
    /// or `None`.
    pub epilogue: Option<KernelEpilogue>,
}

impl StencilCall {
    /// The primitive's name, e.g. `avx512_stencil`.
    pub fn primitive(&self) -> String {
        format!("{}_stencil", self.isa.name())
    }

    /// The operands: output, input, weight.
    pub fn operands(&self) -> [&StencilOperand; 3] {
        [&self.out, &self.input, &self.weight]
    }

    /// Every expression of the call: the operands' offsets, the counts,
    /// `accumulate`, then the epilogue's addends' offsets.
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut out: Vec<&Expr> = self.operands().iter().map(|o| &o.offset).collect();
        out.extend(self.counts.iter());
        out.push(&self.accumulate);
        out.extend(self.addends().map(|a| &a.offset));
        out
    }

    /// The epilogue's addends (none without an epilogue).
    pub fn addends(&self) -> impl Iterator<Item = &MicroKernelOperand> {
        self.epilogue.iter().flat_map(|e| e.addends.iter())
    }

    /// Whether the call reads or writes buffer `id` (an operand or an addend).
    pub fn uses(&self, id: BufferId) -> bool {
        self.operands().iter().any(|o| o.buffer == id) || self.addends().any(|a| a.buffer == id)
    }
}

/// A statement.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `for var in 0..extent { body }`
    For {
        /// The loop variable (its extent equals `extent`).
        var: Var,
        /// Number of iterations (≥ 1).
        extent: i64,
        /// How the loop runs.
        kind: ForKind,
        /// The loop body.
        body: Box<Stmt>,
    },
    /// Statements in order.
    Seq(Vec<Stmt>),
    /// `buffer[indices] = value`
    Store {
        /// The buffer written.
        buffer: BufferId,
        /// One index per dimension.
        indices: Vec<Expr>,
        /// The value.
        value: Expr,
    },
    /// `if cond { then } else { otherwise }`
    IfThenElse {
        /// A boolean condition.
        cond: Expr,
        /// Run when it holds.
        then: Box<Stmt>,
        /// Run otherwise.
        otherwise: Option<Box<Stmt>>,
    },
    /// `buffer` exists (uninitialised) while `body` runs.
    Allocate {
        /// The buffer.
        buffer: BufferId,
        /// Where it is used.
        body: Box<Stmt>,
    },
    /// A micro-kernel call (see [`MicroKernelCall`]).
    MicroKernelCall(Box<MicroKernelCall>),
    /// A row-primitive call (see [`RowMathCall`]).
    RowMathCall(RowMathCall),
    /// A packing-routine call (see [`PackCall`]).
    PackCall(Box<PackCall>),
    /// A stencil-primitive call (see [`StencilCall`]).
    StencilCall(Box<StencilCall>),
    /// `let var = value in body`
    Let {
        /// The bound variable.
        var: Var,
        /// Its value.
        value: Expr,
        /// Where it is visible.
        body: Box<Stmt>,
    },
}

impl Stmt {
    /// An empty statement.
    pub fn nop() -> Stmt {
        Stmt::Seq(Vec::new())
    }

    /// Calls `f` on this statement and every statement inside it (pre-order).
    pub fn visit(&self, f: &mut dyn FnMut(&Stmt)) {
        f(self);
        match self {
            Stmt::For { body, .. } | Stmt::Allocate { body, .. } | Stmt::Let { body, .. } => {
                body.visit(f)
            }
            Stmt::Seq(items) => items.iter().for_each(|s| s.visit(f)),
            Stmt::IfThenElse {
                then, otherwise, ..
            } => {
                then.visit(f);
                if let Some(o) = otherwise {
                    o.visit(f);
                }
            }
            Stmt::Store { .. }
            | Stmt::MicroKernelCall(_)
            | Stmt::RowMathCall(_)
            | Stmt::PackCall(_)
            | Stmt::StencilCall(_) => {}
        }
    }

    /// Variables this statement tree uses that it does not bind itself (by
    /// a loop or a let inside it), in order of first use.
    pub fn free_vars(&self) -> Vec<crate::te::VarId> {
        let mut bound = std::collections::HashSet::new();
        self.visit(&mut |s| match s {
            Stmt::For { var, .. } | Stmt::Let { var, .. } => {
                bound.insert(var.id());
            }
            _ => {}
        });
        let mut free = Vec::new();
        self.visit_exprs(&mut |e| {
            e.visit(&mut |x| {
                if let crate::te::ExprKind::Var(v) = x.kind()
                    && !bound.contains(&v.id())
                    && !free.contains(&v.id())
                {
                    free.push(v.id());
                }
            })
        });
        free
    }

    /// Calls `f` on every expression in this statement tree (store indices and
    /// values, conditions, let values).
    pub fn visit_exprs(&self, f: &mut dyn FnMut(&Expr)) {
        self.visit(&mut |s| match s {
            Stmt::Store { indices, value, .. } => {
                indices.iter().for_each(&mut *f);
                f(value);
            }
            Stmt::IfThenElse { cond, .. } => f(cond),
            Stmt::Let { value, .. } => f(value),
            Stmt::MicroKernelCall(call) => call.exprs().into_iter().for_each(&mut *f),
            Stmt::PackCall(call) => call.exprs().into_iter().for_each(&mut *f),
            Stmt::StencilCall(call) => call.exprs().into_iter().for_each(&mut *f),
            _ => {}
        });
    }
}

/// A lowered function: its buffers and body. Parameters are the DAG's inputs
/// then its outputs.
#[derive(Clone, Debug)]
pub struct PrimFunc {
    /// The function name.
    pub name: String,
    /// Every buffer: parameters and allocations.
    pub buffers: Vec<Buffer>,
    /// The parameters, in argument order (inputs, then outputs).
    pub params: Vec<BufferId>,
    /// How many of `params` are inputs (the rest are outputs).
    pub num_inputs: usize,
    /// The body.
    pub body: Stmt,
}

impl PrimFunc {
    /// Buffer position by handle tensor id, for resolving `Read`s.
    pub fn handle_map(&self) -> HashMap<TensorId, BufferId> {
        self.buffers
            .iter()
            .enumerate()
            .map(|(n, b)| (b.handle.id(), n))
            .collect()
    }
}
