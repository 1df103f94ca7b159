//! The IR interpreter: executes a [`PrimFunc`] on host tensors, exactly, with
//! every load and store bounds-checked. Allocated buffers start as NaN (or
//! the smallest integer), so reading an element before writing it shows.
//!
//! It is the oracle between the reference interpreter and compiled code.

use std::collections::HashMap;

use thiserror::Error;

use crate::te::eval::{Fault, Node, Resolver, eval, flat_offset};
use crate::te::{DType, HostData, HostTensor, VarId};

use super::ir::{PrimFunc, Stmt};

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TirInterpError {
    /// Wrong number of inputs.
    #[error("the function takes {expected} inputs, but {got} were given")]
    InputCount {
        /// Inputs expected.
        expected: usize,
        /// Inputs given.
        got: usize,
    },
    /// An input of the wrong shape or dtype.
    #[error("input '{name}' must be {expected}, but is {got}")]
    InputMismatch {
        /// The parameter.
        name: String,
        /// Its declared type and shape.
        expected: String,
        /// What was given.
        got: String,
    },
    /// Integer division by zero.
    #[error("integer division by zero")]
    DivisionByZero,
    /// A load or store outside its buffer.
    #[error("{access} of buffer '{buffer}' at {index:?} is out of bounds (shape {shape:?})")]
    OutOfBounds {
        /// `load` or `store`.
        access: &'static str,
        /// The buffer.
        buffer: String,
        /// The index.
        index: Vec<i64>,
        /// The buffer's shape.
        shape: Vec<i64>,
    },
    /// An expression names a variable or buffer that is not in scope.
    #[error("unresolved {0}")]
    Unresolved(String),
}

enum Op {
    For {
        slot: usize,
        extent: i64,
        body: Box<Op>,
    },
    Seq(Vec<Op>),
    Store {
        buffer: usize,
        indices: Vec<Node>,
        value: Node,
    },
    If {
        cond: Node,
        then: Box<Op>,
        otherwise: Option<Box<Op>>,
    },
    Allocate {
        buffer: usize,
        body: Box<Op>,
    },
    Let {
        slot: usize,
        value: Node,
        body: Box<Op>,
    },
    MicroKernelCall(Box<MicroKernelOp>),
    PackCall(Box<PackOp>),
    StencilCall(Box<StencilOp>),
    RowMathCall {
        buffer: usize,
        count: i64,
        function: crate::te::Intrinsic,
    },
}

/// A micro-kernel call, resolved.
struct MicroKernelOp {
    /// Rows, columns, depth.
    counts: [Node; 3],
    /// Nonzero: `C += A·B`; zero: `C = A·B`, C not read.
    accumulate: Node,
    /// A, B, C: buffer, offset, row stride, column stride.
    operands: [(usize, Node, i64, i64); 3],
    /// The epilogue, if any.
    epilogue: Option<EpilogueOp>,
}

/// A micro-kernel call's epilogue, resolved.
struct EpilogueOp {
    /// The addends: buffer, offset, row stride, column stride.
    addends: Vec<(usize, Node, i64, i64)>,
    /// The lower clamp.
    lower: Option<f32>,
    /// The upper clamp.
    upper: Option<f32>,
}

/// A stencil call, resolved.
struct StencilOp {
    /// Outputs, window rows, window columns.
    counts: [Node; 3],
    /// Nonzero: `out += Σ`; zero: `out = Σ`, out not read.
    accumulate: Node,
    /// Output, input, weight: buffer, offset, strides (output, r, s, row).
    operands: [(usize, Node, [i64; 4]); 3],
    /// Rows of outputs.
    rows: i64,
    /// The epilogue, if any, with the output as a `rows × n` tile (buffer,
    /// offset, row stride, column stride).
    epilogue: Option<(EpilogueOp, (usize, Node, i64, i64))>,
}

/// A packing call, resolved.
struct PackOp {
    /// Rows, columns.
    counts: [Node; 2],
    /// src, dst: buffer, offset, row stride, column stride.
    operands: [(usize, Node, i64, i64); 2],
}

fn compile(s: &Stmt, r: &mut Resolver) -> Result<Op, TirInterpError> {
    let unresolved = |u| TirInterpError::Unresolved(format!("{u:?}"));
    let bind = |r: &mut Resolver, id: VarId| {
        let slot = r.slots.len();
        r.slots.insert(id, slot);
        slot
    };
    Ok(match s {
        Stmt::For {
            var, extent, body, ..
        } => Op::For {
            slot: bind(r, var.id()),
            extent: *extent,
            body: Box::new(compile(body, r)?),
        },
        Stmt::Seq(items) => Op::Seq(
            items
                .iter()
                .map(|i| compile(i, r))
                .collect::<Result<_, _>>()?,
        ),
        Stmt::Store {
            buffer,
            indices,
            value,
        } => Op::Store {
            buffer: *buffer,
            indices: indices
                .iter()
                .map(|i| r.resolve(i))
                .collect::<Result<_, _>>()
                .map_err(unresolved)?,
            value: r.resolve(value).map_err(unresolved)?,
        },
        Stmt::IfThenElse {
            cond,
            then,
            otherwise,
        } => Op::If {
            cond: r.resolve(cond).map_err(unresolved)?,
            then: Box::new(compile(then, r)?),
            otherwise: match otherwise {
                Some(o) => Some(Box::new(compile(o, r)?)),
                None => None,
            },
        },
        Stmt::Allocate { buffer, body } => Op::Allocate {
            buffer: *buffer,
            body: Box::new(compile(body, r)?),
        },
        Stmt::Let { var, value, body } => {
            let value = r.resolve(value).map_err(unresolved)?;
            Op::Let {
                slot: bind(r, var.id()),
                value,
                body: Box::new(compile(body, r)?),
            }
        }
        Stmt::RowMathCall(call) => Op::RowMathCall {
            buffer: call.buffer,
            count: call.count,
            function: call.function,
        },
        Stmt::PackCall(call) => {
            let operand = |o: &super::ir::MicroKernelOperand| {
                r.resolve(&o.offset)
                    .map(|offset| (o.buffer, offset, o.row_stride, o.col_stride))
                    .map_err(unresolved)
            };
            let count = |e: &crate::te::Expr| r.resolve(e).map_err(unresolved);
            Op::PackCall(Box::new(PackOp {
                counts: [count(&call.counts[0])?, count(&call.counts[1])?],
                operands: [operand(&call.src)?, operand(&call.dst)?],
            }))
        }
        Stmt::MicroKernelCall(call) => {
            let operand = |o: &super::ir::MicroKernelOperand| {
                r.resolve(&o.offset)
                    .map(|offset| (o.buffer, offset, o.row_stride, o.col_stride))
                    .map_err(unresolved)
            };
            let count = |e: &crate::te::Expr| r.resolve(e).map_err(unresolved);
            Op::MicroKernelCall(Box::new(MicroKernelOp {
                counts: [
                    count(&call.counts[0])?,
                    count(&call.counts[1])?,
                    count(&call.counts[2])?,
                ],
                accumulate: count(&call.accumulate)?,
                operands: [operand(&call.a)?, operand(&call.b)?, operand(&call.c)?],
                epilogue: match &call.epilogue {
                    Some(e) => Some(EpilogueOp {
                        addends: e.addends.iter().map(operand).collect::<Result<_, _>>()?,
                        lower: e.lower,
                        upper: e.upper,
                    }),
                    None => None,
                },
            }))
        }
        Stmt::StencilCall(call) => {
            let kernel_operand = |o: &super::ir::MicroKernelOperand| {
                r.resolve(&o.offset)
                    .map(|offset| (o.buffer, offset, o.row_stride, o.col_stride))
                    .map_err(unresolved)
            };
            let operand = |o: &super::ir::StencilOperand| {
                r.resolve(&o.offset)
                    .map(|offset| (o.buffer, offset, o.strides))
                    .map_err(unresolved)
            };
            let count = |e: &crate::te::Expr| r.resolve(e).map_err(unresolved);
            Op::StencilCall(Box::new(StencilOp {
                counts: [
                    count(&call.counts[0])?,
                    count(&call.counts[1])?,
                    count(&call.counts[2])?,
                ],
                accumulate: count(&call.accumulate)?,
                operands: [
                    operand(&call.out)?,
                    operand(&call.input)?,
                    operand(&call.weight)?,
                ],
                rows: call.rows,
                epilogue: match &call.epilogue {
                    Some(e) => Some((
                        EpilogueOp {
                            addends: e
                                .addends
                                .iter()
                                .map(kernel_operand)
                                .collect::<Result<_, _>>()?,
                            lower: e.lower,
                            upper: e.upper,
                        },
                        kernel_operand(&super::ir::MicroKernelOperand {
                            buffer: call.out.buffer,
                            offset: call.out.offset.clone(),
                            row_stride: call.out.strides[3],
                            col_stride: call.out.strides[0],
                        })?,
                    )),
                    None => None,
                },
            }))
        }
    })
}

fn poisoned(shape: &[i64], dtype: DType) -> HostTensor {
    let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    let n: usize = dims.iter().product();
    let data = match dtype {
        DType::F32 => HostData::F32(vec![f32::NAN; n]),
        DType::F64 => HostData::F64(vec![f64::NAN; n]),
        DType::I32 => HostData::I32(vec![i32::MIN; n]),
        DType::I64 => HostData::I64(vec![i64::MIN; n]),
        DType::Bool => HostData::Bool(vec![false; n]),
    };
    HostTensor::new(&dims, data).unwrap_or_else(|_| HostTensor::zeros(&dims, dtype))
}

struct Machine<'a> {
    func: &'a PrimFunc,
    env: Vec<i64>,
    buffers: Vec<HostTensor>,
}

impl Machine<'_> {
    fn fault(&self, f: Fault, access: &'static str) -> TirInterpError {
        match f {
            Fault::DivisionByZero => TirInterpError::DivisionByZero,
            Fault::OutOfBounds { buffer, index } => TirInterpError::OutOfBounds {
                access,
                buffer: self.func.buffers[buffer].name.clone(),
                index,
                shape: self.func.buffers[buffer].shape.clone(),
            },
        }
    }

    fn exec(&mut self, op: &Op) -> Result<(), TirInterpError> {
        match op {
            Op::For { slot, extent, body } => {
                for i in 0..*extent {
                    self.env[*slot] = i;
                    self.exec(body)?;
                }
            }
            Op::Seq(items) => {
                for item in items {
                    self.exec(item)?;
                }
            }
            Op::Store {
                buffer,
                indices,
                value,
            } => {
                let mut index = Vec::with_capacity(indices.len());
                for i in indices {
                    let v = eval(i, &self.env, &self.buffers).map_err(|f| self.fault(f, "load"))?;
                    index.push(v.as_i64());
                }
                let v = eval(value, &self.env, &self.buffers).map_err(|f| self.fault(f, "load"))?;
                let shape = &self.func.buffers[*buffer].shape;
                let flat = flat_offset(&index, shape).ok_or_else(|| {
                    self.fault(
                        Fault::OutOfBounds {
                            buffer: *buffer,
                            index: index.clone(),
                        },
                        "store",
                    )
                })?;
                self.buffers[*buffer].set(flat, v);
            }
            Op::If {
                cond,
                then,
                otherwise,
            } => {
                let c = eval(cond, &self.env, &self.buffers).map_err(|f| self.fault(f, "load"))?;
                if c.as_bool() {
                    self.exec(then)?;
                } else if let Some(o) = otherwise {
                    self.exec(o)?;
                }
            }
            Op::Allocate { buffer, body } => {
                let b = &self.func.buffers[*buffer];
                self.buffers[*buffer] = poisoned(&b.shape, b.dtype);
                self.exec(body)?;
            }
            Op::Let { slot, value, body } => {
                let v = eval(value, &self.env, &self.buffers).map_err(|f| self.fault(f, "load"))?;
                self.env[*slot] = v.as_i64();
                self.exec(body)?;
            }
            Op::RowMathCall {
                buffer,
                count,
                function,
            } => self.row_math_call(*buffer, *count, *function)?,
            Op::MicroKernelCall(op) => {
                let MicroKernelOp {
                    counts,
                    accumulate,
                    operands,
                    epilogue,
                } = op.as_ref();
                let (c, accumulate) = self.call_counts(counts, accumulate)?;
                self.micro_kernel_call(c, accumulate, operands)?;
                if let Some(epilogue) = epilogue {
                    self.kernel_epilogue(0..c[0], c[1], &operands[2], epilogue)?
                }
            }
            Op::StencilCall(op) => {
                let StencilOp {
                    counts,
                    accumulate,
                    operands,
                    rows,
                    epilogue,
                } = op.as_ref();
                let (c, accumulate) = self.call_counts(counts, accumulate)?;
                for y in 0..*rows {
                    self.stencil_call(c, y, accumulate, operands)?;
                    if let Some((epilogue, out)) = epilogue {
                        self.kernel_epilogue(y..y + 1, c[0], out, epilogue)?
                    }
                }
            }
            Op::PackCall(op) => {
                let PackOp { counts, operands } = op.as_ref();
                let mut c = [0i64; 2];
                for (slot, node) in c.iter_mut().zip(counts) {
                    *slot = eval(node, &self.env, &self.buffers)
                        .map_err(|f| self.fault(f, "load"))?
                        .as_i64()
                        .max(0);
                }
                self.pack_call(c[0], c[1], operands)?
            }
        }
        Ok(())
    }

    /// A call's counts (negative ones as 0) and whether it accumulates.
    fn call_counts(
        &self,
        counts: &[Node; 3],
        accumulate: &Node,
    ) -> Result<([i64; 3], bool), TirInterpError> {
        let mut c = [0i64; 3];
        for (slot, node) in c.iter_mut().zip(counts) {
            *slot = eval(node, &self.env, &self.buffers)
                .map_err(|f| self.fault(f, "load"))?
                .as_i64()
                .max(0);
        }
        let accumulate = eval(accumulate, &self.env, &self.buffers)
            .map_err(|f| self.fault(f, "load"))?
            .as_i64()
            != 0;
        Ok((c, accumulate))
    }

    /// `buffer[j] = function(buffer[j])` for `j < count`, through the
    /// reference math (as an inline call is evaluated), rounded to f32 on
    /// the store.
    fn row_math_call(
        &mut self,
        buffer: usize,
        count: i64,
        function: crate::te::Intrinsic,
    ) -> Result<(), TirInterpError> {
        let len = self.func.buffers[buffer].num_elements();
        if count > len {
            return Err(self.fault(
                Fault::OutOfBounds {
                    buffer,
                    index: vec![count - 1],
                },
                "store",
            ));
        }
        for j in 0..count.max(0) as usize {
            let x = self.buffers[buffer].get(j);
            let y = crate::te::eval::intrinsic(function, &[x]);
            self.buffers[buffer].set(j, y);
        }
        Ok(())
    }

    /// The flat index of element (0, 0) of each operand whose `rows × cols`
    /// region lies inside its buffer, or the fault of the first that does
    /// not (`stored` names the operand written).
    fn operand_bases<const N: usize>(
        &self,
        operands: &[(usize, Node, i64, i64); N],
        regions: [(i64, i64); N],
        stored: usize,
    ) -> Result<[i64; N], TirInterpError> {
        let mut base = [0i64; N];
        for (slot, (buffer, offset, row_stride, col_stride)) in operands.iter().enumerate() {
            let offset = eval(offset, &self.env, &self.buffers)
                .map_err(|f| self.fault(f, "load"))?
                .as_i64();
            let (rows, cols) = regions[slot];
            let last = offset + (rows - 1).max(0) * row_stride + (cols - 1).max(0) * col_stride;
            let len = self.func.buffers[*buffer].num_elements();
            if rows > 0 && cols > 0 && (offset.min(last) < 0 || offset.max(last) >= len) {
                return Err(self.fault(
                    Fault::OutOfBounds {
                        buffer: *buffer,
                        index: vec![offset.min(last), offset.max(last)],
                    },
                    if slot == stored { "store" } else { "load" },
                ));
            }
            base[slot] = offset;
        }
        Ok(base)
    }

    /// `dst(r, c) = src(r, c)` element by element: the meaning of a packing
    /// call, checked against the buffers' bounds first.
    fn pack_call(
        &mut self,
        rows: i64,
        cols: i64,
        operands: &[(usize, Node, i64, i64); 2],
    ) -> Result<(), TirInterpError> {
        let base = self.operand_bases(operands, [(rows, cols); 2], 1)?;
        let [(src, _, s_rs, s_cs), (dst, _, d_rs, d_cs)] = operands;
        for r in 0..rows {
            for c in 0..cols {
                let x = self.buffers[*src].get((base[0] + r * s_rs + c * s_cs) as usize);
                self.buffers[*dst].set((base[1] + r * d_rs + c * d_cs) as usize, x);
            }
        }
        Ok(())
    }

    /// Row `y` of a stencil call, `out[j] (+)= Σ_r Σ_s weight[r, s] ·
    /// input[j, r, s]` element by element, in f32, taps in order: the
    /// meaning of a stencil call, every element checked against its
    /// buffer's bounds.
    fn stencil_call(
        &mut self,
        [n, taps_r, taps_s]: [i64; 3],
        y: i64,
        accumulate: bool,
        operands: &[(usize, Node, [i64; 4]); 3],
    ) -> Result<(), TirInterpError> {
        let mut base = [0i64; 3];
        for (slot, (_, offset, _)) in base.iter_mut().zip(operands) {
            *slot = eval(offset, &self.env, &self.buffers)
                .map_err(|f| self.fault(f, "load"))?
                .as_i64();
        }
        let at = |slot: usize, j: i64, r: i64, s: i64| {
            let strides = operands[slot].2;
            base[slot] + j * strides[0] + r * strides[1] + s * strides[2] + y * strides[3]
        };
        let element = |this: &Self, slot: usize, index: i64| -> Result<f32, TirInterpError> {
            let buffer = operands[slot].0;
            usize::try_from(index)
                .ok()
                .and_then(|i| {
                    this.buffers[buffer]
                        .as_f32()
                        .and_then(|d| d.get(i).copied())
                })
                .ok_or_else(|| {
                    this.fault(
                        Fault::OutOfBounds {
                            buffer,
                            index: vec![index],
                        },
                        if slot == 0 { "store" } else { "load" },
                    )
                })
        };
        for j in 0..n {
            let out_at = at(0, j, 0, 0);
            let mut acc = if accumulate {
                element(self, 0, out_at)?
            } else {
                element(self, 0, out_at).map(|_| 0.0)?
            };
            for r in 0..taps_r {
                for s in 0..taps_s {
                    acc += element(self, 2, at(2, j, r, s))? * element(self, 1, at(1, j, r, s))?;
                }
            }
            if let Some(slot) = self.buffers[operands[0].0]
                .as_f32_mut()
                .and_then(|d| d.get_mut(out_at as usize))
            {
                *slot = acc;
            }
        }
        Ok(())
    }

    /// `C += A·B` element by element, in f32, k in order: the meaning of a
    /// micro-kernel call, checked against the buffers' bounds first.
    fn micro_kernel_call(
        &mut self,
        [m, n, kc]: [i64; 3],
        accumulate: bool,
        operands: &[(usize, Node, i64, i64); 3],
    ) -> Result<(), TirInterpError> {
        let base = self.operand_bases(operands, [(m, kc), (kc, n), (m, n)], 2)?;
        let [(a, _, a_rs, a_cs), (b, _, b_rs, b_cs), (c, _, c_rs, c_cs)] = operands;
        let read = |buffers: &[HostTensor], buffer: usize, at: i64| -> f32 {
            buffers[buffer]
                .as_f32()
                .and_then(|d| d.get(at as usize).copied())
                .unwrap_or(f32::NAN)
        };
        for i in 0..m {
            for j in 0..n {
                let at = base[2] + i * c_rs + j * c_cs;
                let mut acc = if accumulate {
                    read(&self.buffers, *c, at)
                } else {
                    0.0
                };
                for k in 0..kc {
                    acc += read(&self.buffers, *a, base[0] + i * a_rs + k * a_cs)
                        * read(&self.buffers, *b, base[1] + k * b_rs + j * b_cs);
                }
                if let Some(slot) = self.buffers[*c]
                    .as_f32_mut()
                    .and_then(|d| d.get_mut(at as usize))
                {
                    *slot = acc;
                }
            }
        }
        Ok(())
    }

    /// A call's epilogue on rows `rows` of the `n`-column results it stored
    /// in C: each addend in order, then the clamps (the order of
    /// `runtime::micro_kernels::Epilogue`), every addend read checked
    /// against its buffer's bounds.
    fn kernel_epilogue(
        &mut self,
        rows: std::ops::Range<i64>,
        n: i64,
        c: &(usize, Node, i64, i64),
        epilogue: &EpilogueOp,
    ) -> Result<(), TirInterpError> {
        let EpilogueOp {
            addends,
            lower,
            upper,
        } = epilogue;
        let m = rows.end;
        let mut bases = Vec::with_capacity(addends.len());
        for addend in addends {
            let [base] = self.operand_bases(std::array::from_ref(addend), [(m, n)], usize::MAX)?;
            bases.push(base);
        }
        let [c_base] = self.operand_bases(std::array::from_ref(c), [(m, n)], 0)?;
        let (c_buffer, _, c_rs, c_cs) = *c;
        for i in rows {
            for j in 0..n {
                let at = (c_base + i * c_rs + j * c_cs) as usize;
                let mut x = self.buffers[c_buffer]
                    .as_f32()
                    .and_then(|d| d.get(at).copied())
                    .unwrap_or(f32::NAN);
                for ((buffer, _, rs, cs), base) in addends.iter().zip(&bases) {
                    let index = (base + i * rs + j * cs) as usize;
                    x += self.buffers[*buffer]
                        .as_f32()
                        .and_then(|d| d.get(index).copied())
                        .unwrap_or(f32::NAN);
                }
                if let Some(lower) = lower {
                    x = x.max(*lower);
                }
                if let Some(upper) = upper {
                    x = x.min(*upper);
                }
                if let Some(slot) = self.buffers[c_buffer]
                    .as_f32_mut()
                    .and_then(|d| d.get_mut(at))
                {
                    *slot = x;
                }
            }
        }
        Ok(())
    }
}

/// Runs `func` on `inputs` (its first parameters) and returns the outputs.
pub fn run(func: &PrimFunc, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, TirInterpError> {
    if inputs.len() != func.num_inputs {
        return Err(TirInterpError::InputCount {
            expected: func.num_inputs,
            got: inputs.len(),
        });
    }
    let describe = |shape: &[i64], dtype: DType| format!("{dtype}{shape:?}");
    let mut buffers: Vec<HostTensor> = func
        .buffers
        .iter()
        .map(|b| poisoned(&b.shape, b.dtype))
        .collect();
    for (&param, input) in func.params.iter().zip(inputs) {
        let b = &func.buffers[param];
        let shape: Vec<i64> = input.shape().iter().map(|&d| d as i64).collect();
        if shape != b.shape || input.dtype() != b.dtype {
            return Err(TirInterpError::InputMismatch {
                name: b.name.clone(),
                expected: describe(&b.shape, b.dtype),
                got: describe(&shape, input.dtype()),
            });
        }
        buffers[param] = input.clone();
    }
    let mut resolver = Resolver {
        slots: HashMap::new(),
        buffers: func
            .buffers
            .iter()
            .enumerate()
            .map(|(n, b)| (b.handle.id(), (n, b.shape.clone())))
            .collect(),
    };
    let program = compile(&func.body, &mut resolver)?;
    let mut machine = Machine {
        func,
        env: vec![0; resolver.slots.len()],
        buffers,
    };
    machine.exec(&program)?;
    let outputs = func.params[func.num_inputs..]
        .iter()
        .map(|&p| std::mem::replace(&mut machine.buffers[p], HostTensor::zeros(&[], DType::Bool)))
        .collect();
    Ok(outputs)
}
