//! The serde form of a [`ComputeDag`]: [`DagSpec`], written by
//! [`ComputeDag::to_spec`] and rebuilt by [`ComputeDag::from_spec`].
//!
//! A DAG built in one process with the te API travels as JSON to another
//! (a measurement worker, a stored record) and is rebuilt there with every
//! name it had: tensor names, axis names and the label, since schedule
//! [`Step`](crate::schedule::Step)s refer to stages and loops by name.
//! `from_spec(to_spec(d))` has the same canonical text, workload key, label
//! and `Display` as `d`.
//!
//! The JSON form is documented on [`DagSpec`].

mod build;
mod error;

use serde::{Deserialize, Serialize};

pub use error::SpecError;

use super::dag::ComputeDag;
use super::dtype::DType;
use super::expr::{BinOp, CmpOp, Const, Expr, ExprKind, Intrinsic, ReduceOp};
use super::tensor::TensorOp;

/// A [`ComputeDag`] as data: tensors in DAG order (inputs first), the
/// output positions and the label.
///
/// JSON form (a matmul):
///
/// ```json
/// {"label": "matmul[M=4,N=3,K=8,f32]",
///  "tensors": [
///    {"kind": "placeholder", "name": "A", "shape": [4, 8], "dtype": "f32"},
///    {"kind": "placeholder", "name": "B", "shape": [8, 3], "dtype": "f32"},
///    {"kind": "compute", "name": "C", "shape": [4, 3], "dtype": "f32", "axes": ["i0", "i1"],
///     "body": {"op": "reduce", "reducer": "sum", "axes": [{"name": "k", "extent": 8}],
///              "source": {"op": "binary", "binop": "mul",
///                         "a": {"op": "read", "tensor": 0, "indices": [{"op": "var", "name": "i0"}, {"op": "var", "name": "k"}]},
///                         "b": {"op": "read", "tensor": 1, "indices": [{"op": "var", "name": "k"}, {"op": "var", "name": "i1"}]}}}}],
///  "outputs": [2]}
/// ```
///
/// Variables are referenced by name: a stage's spatial axes, and inside a
/// `reduce` node the reduction axes it declares. Reads name a tensor by its
/// position in `tensors`, and only earlier tensors can be read. Dtypes of
/// nodes follow from their operands (as the te builders make them), except
/// constants and casts, which carry theirs. Non-finite float constants are
/// written as the strings `"inf"`, `"-inf"` and `"nan"`.
///
/// ```
/// use tessera::te::{self, ComputeDag, DType, DagSpec};
/// let a = te::placeholder("A", &[4], DType::F32);
/// let b = te::compute("B", &[4], |ix| a.at([&ix[0]]) * 2.0_f32);
/// let dag = ComputeDag::new(&[a], &[b]).unwrap().with_label("double[N=4]");
/// let json = dag.to_spec().to_json();
/// let again = ComputeDag::from_spec(&DagSpec::from_json(&json).unwrap()).unwrap();
/// assert_eq!(again.workload_key(), dag.workload_key());
/// assert_eq!(again.to_string(), dag.to_string());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DagSpec {
    /// The readable label of the workload key, e.g. `matmul[M=64,N=64,K=64,f32]`.
    pub label: String,
    /// Every tensor in topological order: the placeholders (the inputs, in
    /// argument order), then the compute stages.
    pub tensors: Vec<TensorSpec>,
    /// Positions in `tensors` of the outputs, in argument order.
    pub outputs: Vec<usize>,
}

/// One tensor of a [`DagSpec`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TensorSpec {
    /// An input.
    Placeholder {
        /// Its name.
        name: String,
        /// Extent of each dimension.
        shape: Vec<i64>,
        /// Element type.
        dtype: DType,
    },
    /// A compute stage: `name[axes] = body`.
    Compute {
        /// Its name (schedule steps refer to the stage by it).
        name: String,
        /// Extent of each dimension.
        shape: Vec<i64>,
        /// Element type; must be the dtype of `body`.
        dtype: DType,
        /// The names of its spatial axes, one per dimension (the extents are
        /// the shape's).
        axes: Vec<String>,
        /// The value at each point.
        body: ExprSpec,
    },
}

impl TensorSpec {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        match self {
            TensorSpec::Placeholder { name, .. } | TensorSpec::Compute { name, .. } => name,
        }
    }
}

/// A reduction axis declared by a `reduce` node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxisSpec {
    /// Its name (unique within the stage).
    pub name: String,
    /// It ranges over `0..extent`.
    pub extent: i64,
}

/// The value of a constant. Non-finite floats are written as strings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConstValue {
    /// `true` / `false` (dtype `bool`).
    Bool(bool),
    /// An integer (integer dtypes; accepted for floats too).
    Int(i64),
    /// A finite float.
    Float(f64),
    /// `"inf"`, `"-inf"` or `"nan"`.
    Special(String),
}

/// An expression node, mirroring [`ExprKind`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExprSpec {
    /// A constant of `dtype`.
    Const {
        /// Its dtype.
        dtype: DType,
        /// Its value.
        value: ConstValue,
    },
    /// A spatial axis of the stage or a reduction axis of the enclosing `reduce`.
    Var {
        /// The axis name.
        name: String,
    },
    /// `-a`.
    Neg {
        /// The operand.
        a: Box<ExprSpec>,
    },
    /// `!a` (bool).
    Not {
        /// The operand.
        a: Box<ExprSpec>,
    },
    /// `a binop b` (or `binop(a, b)`); the dtype of `a`.
    Binary {
        /// The operator.
        binop: BinOp,
        /// Left operand.
        a: Box<ExprSpec>,
        /// Right operand.
        b: Box<ExprSpec>,
    },
    /// `a cmp b`; bool.
    Cmp {
        /// The comparison.
        cmp: CmpOp,
        /// Left operand.
        a: Box<ExprSpec>,
        /// Right operand.
        b: Box<ExprSpec>,
    },
    /// `select(cond, then, otherwise)`; the dtype of `then`.
    Select {
        /// The bool condition.
        cond: Box<ExprSpec>,
        /// Value when it holds.
        then: Box<ExprSpec>,
        /// Value otherwise.
        otherwise: Box<ExprSpec>,
    },
    /// Conversion of `a` to `dtype`.
    Cast {
        /// The target dtype.
        dtype: DType,
        /// The value converted.
        a: Box<ExprSpec>,
    },
    /// A math intrinsic; the dtype of its first argument.
    Call {
        /// The function.
        func: Intrinsic,
        /// Its arguments (as many as its arity).
        args: Vec<ExprSpec>,
    },
    /// An element of an earlier tensor.
    Read {
        /// Position of the tensor in [`DagSpec::tensors`].
        tensor: usize,
        /// One index per dimension.
        indices: Vec<ExprSpec>,
    },
    /// A reduction over the axes it declares (the whole body of a stage only).
    Reduce {
        /// How values are combined.
        reducer: ReduceOp,
        /// The reduction axes.
        axes: Vec<AxisSpec>,
        /// The value reduced.
        source: Box<ExprSpec>,
    },
}

impl ComputeDag {
    /// This DAG as data, with every name it was built with: see
    /// [`DagSpec`] for the JSON form; [`ComputeDag::from_spec`] rebuilds it
    /// with the same canonical text, workload key, label and `Display`.
    pub fn to_spec(&self) -> DagSpec {
        let tensors = self
            .tensors()
            .iter()
            .map(|t| match t.op() {
                TensorOp::Placeholder => TensorSpec::Placeholder {
                    name: t.name().to_string(),
                    shape: t.shape().to_vec(),
                    dtype: t.dtype(),
                },
                TensorOp::Compute(op) => TensorSpec::Compute {
                    name: t.name().to_string(),
                    shape: t.shape().to_vec(),
                    dtype: t.dtype(),
                    axes: op.axes.iter().map(|v| v.name().to_string()).collect(),
                    body: self.expr_spec(&op.body),
                },
            })
            .collect();
        DagSpec {
            label: self.label().to_string(),
            tensors,
            outputs: self.output_positions().to_vec(),
        }
    }

    fn expr_spec(&self, e: &Expr) -> ExprSpec {
        let boxed = |e: &Expr| Box::new(self.expr_spec(e));
        match e.kind() {
            ExprKind::Const(c) => ExprSpec::Const {
                dtype: e.dtype(),
                value: const_value(*c),
            },
            ExprKind::Var(v) => ExprSpec::Var {
                name: v.name().to_string(),
            },
            ExprKind::Neg(a) => ExprSpec::Neg { a: boxed(a) },
            ExprKind::Not(a) => ExprSpec::Not { a: boxed(a) },
            ExprKind::Binary(op, a, b) => ExprSpec::Binary {
                binop: *op,
                a: boxed(a),
                b: boxed(b),
            },
            ExprKind::Cmp(op, a, b) => ExprSpec::Cmp {
                cmp: *op,
                a: boxed(a),
                b: boxed(b),
            },
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => ExprSpec::Select {
                cond: boxed(cond),
                then: boxed(then),
                otherwise: boxed(otherwise),
            },
            ExprKind::Cast(a) => ExprSpec::Cast {
                dtype: e.dtype(),
                a: boxed(a),
            },
            ExprKind::Call(f, args) => ExprSpec::Call {
                func: *f,
                args: args.iter().map(|a| self.expr_spec(a)).collect(),
            },
            ExprKind::Read(t, indices) => ExprSpec::Read {
                // A checked DAG holds every tensor it reads; usize::MAX would
                // be reported by from_spec as a read of an unknown tensor.
                tensor: self.position(t).unwrap_or(usize::MAX),
                indices: indices.iter().map(|i| self.expr_spec(i)).collect(),
            },
            ExprKind::Reduce(r) => ExprSpec::Reduce {
                reducer: r.op,
                axes: r
                    .axes
                    .iter()
                    .map(|v| AxisSpec {
                        name: v.name().to_string(),
                        extent: v.extent(),
                    })
                    .collect(),
                source: boxed(&r.source),
            },
        }
    }
}

fn const_value(c: Const) -> ConstValue {
    match c {
        Const::Bool(b) => ConstValue::Bool(b),
        Const::Int(v) => ConstValue::Int(v),
        Const::Float(v) if v.is_finite() => ConstValue::Float(v),
        Const::Float(v) if v.is_nan() => ConstValue::Special("nan".into()),
        Const::Float(v) if v > 0.0 => ConstValue::Special("inf".into()),
        Const::Float(_) => ConstValue::Special("-inf".into()),
    }
}

impl DagSpec {
    /// Parses the JSON form.
    pub fn from_json(text: &str) -> Result<DagSpec, SpecError> {
        serde_json::from_str(text).map_err(|e| SpecError::Parse {
            reason: e.to_string(),
        })
    }

    /// The JSON form (one line).
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
