//! The reference interpreter: evaluates a [`ComputeDag`] naively and exactly.
//! It is the oracle every later layer is tested against.
//!
//! Semantics:
//! - Float arithmetic inside a rule, including reduction accumulation, is done
//!   in `f64` and rounded to the stage's dtype only when the element is stored
//!   (an explicit cast to `f32` rounds immediately). An `f32` result is thus
//!   the correctly rounded value of a more exact computation, which is what
//!   compiled code is compared against, with a tolerance.
//! - Integer arithmetic wraps at the width of its dtype; integer division by
//!   zero is an error. Float → integer casts truncate toward zero and saturate.
//! - `select` evaluates only the chosen branch.
//! - Every read is bounds-checked (an error, never a panic).

use std::collections::HashMap;

use thiserror::Error;

use super::dag::ComputeDag;
use super::dtype::DType;
use super::expr::{BinOp, CmpOp, Const, Expr, ExprKind, Intrinsic, ReduceOp};
use super::host_tensor::{HostTensor, Value};
use super::tensor::{ComputeOp, Tensor};

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InterpError {
    /// The number of input tensors differs from the DAG's inputs.
    #[error("the DAG takes {expected} inputs, but {got} were given")]
    InputCount {
        /// Inputs the DAG declares.
        expected: usize,
        /// Inputs given.
        got: usize,
    },
    /// An input has the wrong shape.
    #[error("input '{input}' must have shape {expected:?}, but has shape {got:?}")]
    InputShape {
        /// The input.
        input: String,
        /// Declared shape.
        expected: Vec<i64>,
        /// Given shape.
        got: Vec<usize>,
    },
    /// An input has the wrong dtype.
    #[error("input '{input}' must have dtype {expected}, but has dtype {got}")]
    InputDtype {
        /// The input.
        input: String,
        /// Declared dtype.
        expected: DType,
        /// Given dtype.
        got: DType,
    },
    /// Integer division or modulo by zero.
    #[error("stage '{stage}': integer division by zero")]
    DivisionByZero {
        /// The stage.
        stage: String,
    },
    /// A read left its tensor (only possible with data-dependent indices).
    #[error("stage '{stage}': read of '{tensor}' at {index:?} is out of bounds")]
    OutOfBounds {
        /// The stage.
        stage: String,
        /// The tensor read.
        tensor: String,
        /// The index.
        index: Vec<i64>,
    },
}

/// Evaluates `dag` on `inputs` (in the DAG's input order) and returns its outputs.
pub fn evaluate(dag: &ComputeDag, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, InterpError> {
    let mut all = evaluate_all(dag, inputs)?;
    let mut outputs = Vec::new();
    for &p in dag.output_positions() {
        outputs.push(std::mem::replace(
            &mut all[p],
            HostTensor::zeros(&[], DType::Bool),
        ));
    }
    Ok(outputs)
}

/// Evaluates `dag` and returns every tensor, in [`ComputeDag::tensors`] order.
pub fn evaluate_all(
    dag: &ComputeDag,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, InterpError> {
    check_inputs(dag, inputs)?;
    let mut buffers: Vec<HostTensor> = inputs.to_vec();
    for stage in dag.stages() {
        let Some(op) = stage.compute_op() else {
            continue;
        };
        let result = evaluate_stage(dag, stage, op, &buffers)?;
        buffers.push(result);
    }
    Ok(buffers)
}

fn check_inputs(dag: &ComputeDag, inputs: &[HostTensor]) -> Result<(), InterpError> {
    if inputs.len() != dag.inputs().len() {
        return Err(InterpError::InputCount {
            expected: dag.inputs().len(),
            got: inputs.len(),
        });
    }
    for (declared, given) in dag.inputs().iter().zip(inputs) {
        let shape_ok = declared.ndim() == given.shape().len()
            && declared
                .shape()
                .iter()
                .zip(given.shape())
                .all(|(&d, &g)| d as usize == g);
        if !shape_ok {
            return Err(InterpError::InputShape {
                input: declared.name().into(),
                expected: declared.shape().to_vec(),
                got: given.shape().to_vec(),
            });
        }
        if declared.dtype() != given.dtype() {
            return Err(InterpError::InputDtype {
                input: declared.name().into(),
                expected: declared.dtype(),
                got: given.dtype(),
            });
        }
    }
    Ok(())
}

/// An expression resolved against the stage: variables become slots of the
/// environment, reads become buffer positions with strides.
enum Node {
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

struct Resolver<'a> {
    dag: &'a ComputeDag,
    slots: HashMap<u64, usize>,
}

impl Resolver<'_> {
    fn resolve(&self, e: &Expr) -> Node {
        let boxed = |x: &Expr| Box::new(self.resolve(x));
        match e.kind() {
            ExprKind::Const(c) => Node::Const(match *c {
                Const::Float(v) => Value::F(v),
                Const::Int(v) => Value::I(v),
                Const::Bool(v) => Value::B(v),
            }),
            // Scoping was checked when the DAG was built.
            ExprKind::Var(v) => Node::Var(self.slots.get(&v.id()).copied().unwrap_or(0)),
            ExprKind::Neg(a) => Node::Neg(e.dtype(), boxed(a)),
            ExprKind::Not(a) => Node::Not(boxed(a)),
            ExprKind::Binary(op, a, b) => Node::Binary(*op, e.dtype(), boxed(a), boxed(b)),
            ExprKind::Cmp(op, a, b) => Node::Cmp(*op, boxed(a), boxed(b)),
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => Node::Select(boxed(cond), boxed(then), boxed(otherwise)),
            ExprKind::Cast(a) => Node::Cast(e.dtype(), boxed(a)),
            ExprKind::Call(f, args) => {
                Node::Call(*f, args.iter().map(|a| self.resolve(a)).collect())
            }
            ExprKind::Read(t, idx) => Node::Read {
                buffer: self.dag.position(t).unwrap_or(0),
                shape: t.shape().to_vec(),
                indices: idx.iter().map(|i| self.resolve(i)).collect(),
            },
            // Reductions exist only at the top of a rule, handled by the caller.
            ExprKind::Reduce(r) => self.resolve(&r.source),
        }
    }
}

#[derive(Clone, Copy)]
enum Fault {
    DivisionByZero,
    OutOfBounds(usize),
}

struct Machine<'a> {
    env: Vec<i64>,
    buffers: &'a [HostTensor],
    fault_index: Vec<i64>,
}

fn wrap(dtype: DType, v: i64) -> i64 {
    if dtype == DType::I32 {
        v as i32 as i64
    } else {
        v
    }
}

fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn int_binary(op: BinOp, dtype: DType, a: i64, b: i64) -> Result<i64, Fault> {
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

fn float_binary(op: BinOp, a: f64, b: f64) -> f64 {
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

fn compare<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

fn cast(dtype: DType, v: Value) -> Value {
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

fn intrinsic(f: Intrinsic, args: &[Value]) -> Value {
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

impl Machine<'_> {
    fn eval(&mut self, n: &Node) -> Result<Value, Fault> {
        Ok(match n {
            Node::Const(v) => *v,
            Node::Var(slot) => Value::I(self.env[*slot]),
            Node::Neg(d, a) => match self.eval(a)? {
                Value::I(v) => Value::I(wrap(*d, v.wrapping_neg())),
                other => Value::F(-other.as_f64()),
            },
            Node::Not(a) => Value::B(!self.eval(a)?.as_bool()),
            Node::Binary(op, d, a, b) => {
                let x = self.eval(a)?;
                if matches!(op, BinOp::And | BinOp::Or) {
                    // Short-circuit like the branches of a select.
                    let short = matches!(op, BinOp::And) != x.as_bool();
                    if short {
                        return Ok(Value::B(x.as_bool()));
                    }
                    return Ok(Value::B(self.eval(b)?.as_bool()));
                }
                let y = self.eval(b)?;
                match (x, y) {
                    (Value::I(p), Value::I(q)) => Value::I(int_binary(*op, *d, p, q)?),
                    _ => Value::F(float_binary(*op, x.as_f64(), y.as_f64())),
                }
            }
            Node::Cmp(op, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                Value::B(match (x, y) {
                    (Value::I(p), Value::I(q)) => compare(*op, p, q),
                    (Value::B(p), Value::B(q)) => compare(*op, p, q),
                    _ => compare(*op, x.as_f64(), y.as_f64()),
                })
            }
            Node::Select(c, t, o) => {
                if self.eval(c)?.as_bool() {
                    self.eval(t)?
                } else {
                    self.eval(o)?
                }
            }
            Node::Cast(d, a) => cast(*d, self.eval(a)?),
            Node::Call(f, args) => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(self.eval(a)?);
                }
                intrinsic(*f, &values)
            }
            Node::Read {
                buffer,
                shape,
                indices,
            } => {
                let mut flat: i64 = 0;
                let mut index = Vec::with_capacity(indices.len());
                for (i, extent) in indices.iter().zip(shape) {
                    let v = self.eval(i)?.as_i64();
                    index.push(v);
                    flat = flat * extent + v;
                    if v < 0 || v >= *extent {
                        self.fault_index = index;
                        return Err(Fault::OutOfBounds(*buffer));
                    }
                }
                self.buffers[*buffer].get(flat as usize)
            }
        })
    }
}

fn combine(op: ReduceOp, acc: Value, v: Value) -> Value {
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

/// Advances `index` through the box `0..extents` in row-major order;
/// false once every point was visited.
fn advance(index: &mut [i64], extents: &[i64]) -> bool {
    for d in (0..index.len()).rev() {
        index[d] += 1;
        if index[d] < extents[d] {
            return true;
        }
        index[d] = 0;
    }
    false
}

fn evaluate_stage(
    dag: &ComputeDag,
    stage: &Tensor,
    op: &ComputeOp,
    buffers: &[HostTensor],
) -> Result<HostTensor, InterpError> {
    let mut slots: HashMap<u64, usize> = op
        .axes
        .iter()
        .enumerate()
        .map(|(n, v)| (v.id(), n))
        .collect();
    let reduction = match op.body.kind() {
        ExprKind::Reduce(r) => Some(r),
        _ => None,
    };
    let reduce_extents: Vec<i64> = reduction
        .map(|r| r.axes.iter().map(|a| a.extent()).collect())
        .unwrap_or_default();
    if let Some(r) = reduction {
        for (n, a) in r.axes.iter().enumerate() {
            slots.insert(a.id(), op.axes.len() + n);
        }
    }
    let resolver = Resolver { dag, slots };
    let body = resolver.resolve(&op.body);
    let dims: Vec<usize> = stage.shape().iter().map(|&d| d as usize).collect();
    let mut out = HostTensor::zeros(&dims, stage.dtype());
    let n_spatial = op.axes.len();
    let mut machine = Machine {
        env: vec![0; n_spatial + reduce_extents.len()],
        buffers,
        fault_index: Vec::new(),
    };
    let fault = |f: Fault, m: &Machine| match f {
        Fault::DivisionByZero => InterpError::DivisionByZero {
            stage: stage.name().into(),
        },
        Fault::OutOfBounds(b) => InterpError::OutOfBounds {
            stage: stage.name().into(),
            tensor: dag.tensors()[b].name().into(),
            index: m.fault_index.clone(),
        },
    };
    let identity = reduction.and_then(|r| r.op.identity(stage.dtype()));
    let mut point = vec![0i64; n_spatial];
    for flat in 0..out.len() {
        machine.env[..n_spatial].copy_from_slice(&point);
        let value = match (reduction, identity) {
            (Some(r), Some(id)) => {
                let mut acc = match id {
                    Const::Float(v) => Value::F(v),
                    Const::Int(v) => Value::I(v),
                    Const::Bool(v) => Value::B(v),
                };
                let mut rpoint = vec![0i64; reduce_extents.len()];
                loop {
                    machine.env[n_spatial..].copy_from_slice(&rpoint);
                    let v = machine.eval(&body).map_err(|f| fault(f, &machine))?;
                    acc = combine(r.op, acc, v);
                    if !advance(&mut rpoint, &reduce_extents) {
                        break;
                    }
                }
                acc
            }
            _ => machine.eval(&body).map_err(|f| fault(f, &machine))?,
        };
        out.set(flat, value);
        advance(&mut point, stage.shape());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{HostData, compute, floordiv, floormod, placeholder, select};

    fn int_dag(rule: impl FnOnce(&Expr) -> Expr) -> ComputeDag {
        let a = placeholder("A", &[4], DType::I32);
        let c = compute("C", &[4], |ix| rule(&a.at([&ix[0]])));
        ComputeDag::new(&[a], &[c]).expect("valid")
    }

    fn run_i32(dag: &ComputeDag, values: Vec<i32>) -> Result<Vec<f64>, InterpError> {
        let input = HostTensor::new(&[4], HostData::I32(values)).expect("length 4");
        Ok(evaluate(dag, &[input])?[0].to_f64_vec())
    }

    #[test]
    fn floor_division_and_modulo_round_down() {
        let dag = int_dag(|x| floordiv(x, 3) * 10 + floormod(x, 3));
        let got = run_i32(&dag, vec![7, -7, 0, -1]).expect("evaluates");
        assert_eq!(got, vec![21.0, -28.0, 0.0, -8.0]);
    }

    #[test]
    fn truncating_division_by_zero_is_an_error() {
        let dag = int_dag(|x| Expr::i32(10) / x);
        let err = run_i32(&dag, vec![1, 2, 0, 4]).expect_err("divides by zero");
        assert_eq!(err, InterpError::DivisionByZero { stage: "C".into() });
        assert_eq!(run_i32(&dag, vec![-3, 2, 5, 4]).expect("ok")[0], -3.0);
    }

    #[test]
    fn i32_arithmetic_wraps() {
        let dag = int_dag(|x| x * 1_000_000);
        let got = run_i32(&dag, vec![3000, 1, 0, -1]).expect("evaluates");
        assert_eq!(got[0], (3000i32.wrapping_mul(1_000_000)) as f64);
    }

    #[test]
    fn select_evaluates_only_the_chosen_branch() {
        let dag = int_dag(|x| select(x.equal(0), 0, Expr::i32(100) / x));
        let got = run_i32(&dag, vec![0, 5, -50, 0]).expect("no division by zero");
        assert_eq!(got, vec![0.0, 20.0, -2.0, 0.0]);
    }

    #[test]
    fn inputs_are_checked() {
        let dag = int_dag(|x| x.clone());
        assert!(matches!(
            evaluate(&dag, &[]),
            Err(InterpError::InputCount {
                expected: 1,
                got: 0
            })
        ));
        let wrong_shape = HostTensor::zeros(&[5], DType::I32);
        assert!(matches!(
            evaluate(&dag, &[wrong_shape]),
            Err(InterpError::InputShape { .. })
        ));
        let wrong_dtype = HostTensor::zeros(&[4], DType::F32);
        let err = evaluate(&dag, &[wrong_dtype]).expect_err("dtype");
        assert_eq!(
            err.to_string(),
            "input 'A' must have dtype i32, but has dtype f32"
        );
    }

    #[test]
    fn f32_results_are_rounded_once_from_f64() {
        let a = placeholder("A", &[1], DType::F32);
        let c = compute("C", &[1], |ix| a.at([&ix[0]]) * 3.0 / 3.0);
        let dag = ComputeDag::new(&[a], &[c]).expect("valid");
        let x = 0.1f32;
        let input = HostTensor::from_f32(&[1], vec![x]).expect("length 1");
        let got = evaluate(&dag, &[input]).expect("evaluates");
        assert_eq!(got[0].as_f32(), Some(&[x][..]));
    }
}
