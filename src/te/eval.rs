//! The evaluation core shared by the reference interpreter (`te::interp`)
//! and the loop-IR interpreter (`tir::interp`): expressions resolved to
//! environment slots and buffer positions, then evaluated exactly.

use std::collections::HashMap;

use super::dtype::DType;
use super::expr::{BinOp, CmpOp, Const, Expr, ExprKind, Intrinsic, ReduceOp};
use super::host_tensor::{HostTensor, Value};
use super::ids::{TensorId, VarId};

/// An expression resolved for evaluation: variables are environment slots,
/// reads are buffer positions.
pub(crate) enum Node {
    Const(Value),
    Var(usize),
    Neg(DType, Box<Node>),
    Not(Box<Node>),
    Binary(BinOp, DType, Box<Node>, Box<Node>),
    Cmp(CmpOp, Box<Node>, Box<Node>),
    Select(Box<Node>, Box<Node>, Box<Node>),
    Cast(DType, Box<Node>),
    Call(Intrinsic, Vec<Node>),
    Read {
        buffer: usize,
        shape: Vec<i64>,
        indices: Vec<Node>,
    },
}

/// Maps variables to environment slots and tensors to buffer positions.
pub(crate) struct Resolver {
    /// Variable id → slot.
    pub slots: HashMap<VarId, usize>,
    /// Tensor id → (buffer position, buffer shape).
    pub buffers: HashMap<TensorId, (usize, Vec<i64>)>,
}

/// An expression refers to something the resolver does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unresolved {
    Var(String),
    Tensor(String),
}

impl Resolver {
    pub fn resolve(&self, e: &Expr) -> Result<Node, Unresolved> {
        let boxed = |x: &Expr| self.resolve(x).map(Box::new);
        Ok(match e.kind() {
            ExprKind::Const(c) => Node::Const(const_value(*c)),
            ExprKind::Var(v) => Node::Var(
                *self
                    .slots
                    .get(&v.id())
                    .ok_or_else(|| Unresolved::Var(v.name().into()))?,
            ),
            ExprKind::Neg(a) => Node::Neg(e.dtype(), boxed(a)?),
            ExprKind::Not(a) => Node::Not(boxed(a)?),
            ExprKind::Binary(op, a, b) => Node::Binary(*op, e.dtype(), boxed(a)?, boxed(b)?),
            ExprKind::Cmp(op, a, b) => Node::Cmp(*op, boxed(a)?, boxed(b)?),
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => Node::Select(boxed(cond)?, boxed(then)?, boxed(otherwise)?),
            ExprKind::Cast(a) => Node::Cast(e.dtype(), boxed(a)?),
            ExprKind::Call(f, args) => Node::Call(
                *f,
                args.iter()
                    .map(|a| self.resolve(a))
                    .collect::<Result<_, _>>()?,
            ),
            ExprKind::Read(t, idx) => {
                let (buffer, shape) = self
                    .buffers
                    .get(&t.id())
                    .cloned()
                    .ok_or_else(|| Unresolved::Tensor(t.name().into()))?;
                Node::Read {
                    buffer,
                    shape,
                    indices: idx
                        .iter()
                        .map(|i| self.resolve(i))
                        .collect::<Result<_, _>>()?,
                }
            }
            // Reductions exist only at the top of a rule; callers evaluate the source.
            ExprKind::Reduce(r) => self.resolve(&r.source)?,
        })
    }
}

pub(crate) fn const_value(c: Const) -> Value {
    match c {
        Const::Float(v) => Value::F(v),
        Const::Int(v) => Value::I(v),
        Const::Bool(v) => Value::B(v),
    }
}

/// Why an evaluation stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    DivisionByZero,
    OutOfBounds { buffer: usize, index: Vec<i64> },
}

pub(crate) fn wrap(dtype: DType, v: i64) -> i64 {
    if dtype == DType::I32 {
        v as i32 as i64
    } else {
        v
    }
}

pub(crate) fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

pub(crate) fn int_binary(op: BinOp, dtype: DType, a: i64, b: i64) -> Result<i64, Fault> {
    let divides = matches!(op, BinOp::Div | BinOp::FloorDiv | BinOp::FloorMod);
    if divides && b == 0 {
        return Err(Fault::DivisionByZero);
    }
    let v = match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        BinOp::Div => a.wrapping_div(b),
        BinOp::FloorDiv => floor_div(a, b),
        BinOp::FloorMod => a.wrapping_sub(floor_div(a, b).wrapping_mul(b)),
        BinOp::Min => a.min(b),
        BinOp::Max => a.max(b),
        BinOp::And | BinOp::Or => (a != 0 && b != 0) as i64,
    };
    Ok(wrap(dtype, v))
}

pub(crate) fn float_binary(op: BinOp, a: f64, b: f64) -> f64 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Min => a.min(b),
        BinOp::Max => a.max(b),
        // Rejected for floats when the DAG was built.
        BinOp::FloorDiv => (a / b).floor(),
        BinOp::FloorMod => a - (a / b).floor() * b,
        BinOp::And | BinOp::Or => f64::NAN,
    }
}

pub(crate) fn compare<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

pub(crate) fn cast(dtype: DType, v: Value) -> Value {
    match dtype {
        DType::F32 => Value::F(v.as_f64() as f32 as f64),
        DType::F64 => Value::F(v.as_f64()),
        DType::I32 => Value::I(match v {
            Value::F(f) => f as i32 as i64,
            other => other.as_i64() as i32 as i64,
        }),
        DType::I64 => Value::I(v.as_i64()),
        DType::Bool => Value::B(v.as_bool()),
    }
}

pub(crate) fn intrinsic(f: Intrinsic, args: &[Value]) -> Value {
    if let (Intrinsic::Abs, Some(Value::I(v))) = (f, args.first()) {
        return Value::I(v.wrapping_abs());
    }
    let x = args.first().map_or(f64::NAN, |v| v.as_f64());
    Value::F(match f {
        Intrinsic::Exp => x.exp(),
        Intrinsic::Log => x.ln(),
        Intrinsic::Sqrt => x.sqrt(),
        Intrinsic::Tanh => x.tanh(),
        Intrinsic::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Intrinsic::Abs => x.abs(),
        Intrinsic::Pow => x.powf(args.get(1).map_or(f64::NAN, |v| v.as_f64())),
        Intrinsic::Erf => libm::erf(x),
    })
}

/// Where evaluation reads tensor elements from: materialised buffers, or a
/// source that computes elements on demand.
pub(crate) trait ElementSource {
    /// The element at row-major offset `flat` of buffer `buffer`.
    fn element(&self, buffer: usize, flat: usize) -> Result<Value, Fault>;
}

impl ElementSource for [HostTensor] {
    fn element(&self, buffer: usize, flat: usize) -> Result<Value, Fault> {
        Ok(self[buffer].get(flat))
    }
}

impl ElementSource for Vec<HostTensor> {
    fn element(&self, buffer: usize, flat: usize) -> Result<Value, Fault> {
        Ok(self[buffer].get(flat))
    }
}

/// Evaluates `n` with loop variables `env` over `buffers`.
pub(crate) fn eval<B: ElementSource + ?Sized>(
    n: &Node,
    env: &[i64],
    buffers: &B,
) -> Result<Value, Fault> {
    let ev = |x: &Node| eval(x, env, buffers);
    Ok(match n {
        Node::Const(v) => *v,
        Node::Var(slot) => Value::I(env[*slot]),
        Node::Neg(d, a) => match ev(a)? {
            Value::I(v) => Value::I(wrap(*d, v.wrapping_neg())),
            other => Value::F(-other.as_f64()),
        },
        Node::Not(a) => Value::B(!ev(a)?.as_bool()),
        Node::Binary(op, d, a, b) => {
            let x = ev(a)?;
            if matches!(op, BinOp::And | BinOp::Or) {
                // Short-circuit, like the branches of a select.
                if matches!(op, BinOp::And) != x.as_bool() {
                    return Ok(Value::B(x.as_bool()));
                }
                return Ok(Value::B(ev(b)?.as_bool()));
            }
            let y = ev(b)?;
            match (x, y) {
                (Value::I(p), Value::I(q)) => Value::I(int_binary(*op, *d, p, q)?),
                _ => Value::F(float_binary(*op, x.as_f64(), y.as_f64())),
            }
        }
        Node::Cmp(op, a, b) => {
            let (x, y) = (ev(a)?, ev(b)?);
            Value::B(match (x, y) {
                (Value::I(p), Value::I(q)) => compare(*op, p, q),
                (Value::B(p), Value::B(q)) => compare(*op, p, q),
                _ => compare(*op, x.as_f64(), y.as_f64()),
            })
        }
        Node::Select(c, t, o) => {
            if ev(c)?.as_bool() {
                ev(t)?
            } else {
                ev(o)?
            }
        }
        Node::Cast(d, a) => cast(*d, ev(a)?),
        Node::Call(f, args) => {
            let values = args.iter().map(ev).collect::<Result<Vec<_>, _>>()?;
            intrinsic(*f, &values)
        }
        Node::Read {
            buffer,
            shape,
            indices,
        } => {
            let index = indices
                .iter()
                .map(|i| ev(i).map(Value::as_i64))
                .collect::<Result<Vec<_>, _>>()?;
            let flat = flat_offset(&index, shape).ok_or_else(|| Fault::OutOfBounds {
                buffer: *buffer,
                index: index.clone(),
            })?;
            buffers.element(*buffer, flat)?
        }
    })
}

/// The row-major offset of `index` in `shape`, if it lies inside.
pub(crate) fn flat_offset(index: &[i64], shape: &[i64]) -> Option<usize> {
    let mut flat: i64 = 0;
    for (&i, &extent) in index.iter().zip(shape) {
        if i < 0 || i >= extent {
            return None;
        }
        flat = flat * extent + i;
    }
    Some(flat as usize)
}

/// Combines a reduction accumulator with one more value.
pub(crate) fn combine(op: ReduceOp, acc: Value, v: Value) -> Value {
    match (acc, v) {
        (Value::I(a), Value::I(b)) => Value::I(match op {
            ReduceOp::Sum => a.wrapping_add(b),
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
        }),
        _ => {
            let (a, b) = (acc.as_f64(), v.as_f64());
            Value::F(match op {
                ReduceOp::Sum => a + b,
                ReduceOp::Max => a.max(b),
                ReduceOp::Min => a.min(b),
            })
        }
    }
}
