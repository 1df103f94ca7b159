//! Tensors: placeholders (inputs) and compute stages.

use std::fmt;
use std::sync::Arc;

use super::dtype::DType;
use super::expr::{Expr, ExprKind, IterKind, Operand, Var};
use super::ids::TensorId;

/// A tensor: either an input ([`placeholder`]) or the result of a [`compute`].
///
/// Cheap to clone; two handles are the same tensor only if one was cloned
/// from the other.
#[derive(Clone)]
pub struct Tensor(Arc<TensorNode>);

struct TensorNode {
    id: TensorId,
    name: String,
    shape: Vec<i64>,
    dtype: DType,
    op: TensorOp,
}

/// How a tensor's elements are produced.
#[derive(Clone)]
pub enum TensorOp {
    /// An input supplied by the caller.
    Placeholder,
    /// Computed from other tensors.
    Compute(ComputeOp),
}

/// The rule of a compute stage: `out[axes] = body`.
#[derive(Clone)]
pub struct ComputeOp {
    /// One spatial variable per output dimension.
    pub axes: Vec<Var>,
    /// The value at each output point; a [`Reduce`](super::Reduce) only at the top.
    pub body: Expr,
}

impl Tensor {
    /// The process-unique identity of this tensor.
    pub fn id(&self) -> TensorId {
        self.0.id
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The extent of each dimension.
    pub fn shape(&self) -> &[i64] {
        &self.0.shape
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// Placeholder or compute.
    pub fn op(&self) -> &TensorOp {
        &self.0.op
    }

    /// The compute rule, if this tensor is computed.
    pub fn compute_op(&self) -> Option<&ComputeOp> {
        match self.op() {
            TensorOp::Compute(c) => Some(c),
            TensorOp::Placeholder => None,
        }
    }

    /// Whether this is an input.
    pub fn is_placeholder(&self) -> bool {
        matches!(self.op(), TensorOp::Placeholder)
    }

    /// The number of elements (saturating; the DAG check bounds it).
    pub fn num_elements(&self) -> i64 {
        self.shape()
            .iter()
            .fold(1i64, |acc, &d| acc.saturating_mul(d.max(0)))
    }

    /// A read of one element: `a.at([&i, &k])`. Integer literals are `i64`.
    pub fn at<I>(&self, indices: I) -> Expr
    where
        I: IntoIterator,
        I::Item: Into<Operand>,
    {
        let indices = indices
            .into_iter()
            .map(|i| i.into().into_expr_hint(Some(DType::I64)))
            .collect();
        Expr::new(self.dtype(), ExprKind::Read(self.clone(), indices))
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.id() == other.id()
    }
}

impl Eq for Tensor {}

impl std::hash::Hash for Tensor {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}{:?}", self.name(), self.dtype(), self.shape())
    }
}

/// An input tensor of the given shape and dtype.
pub fn placeholder(name: &str, shape: &[i64], dtype: DType) -> Tensor {
    Tensor(Arc::new(TensorNode {
        id: TensorId::fresh(),
        name: name.to_string(),
        shape: shape.to_vec(),
        dtype,
        op: TensorOp::Placeholder,
    }))
}

/// A reduction axis ranging over `0..extent`, for [`sum`](super::sum) and friends.
pub fn reduce_axis(extent: i64, name: &str) -> Expr {
    Var::new(name, extent, IterKind::Reduce).expr()
}

/// A computed tensor: `rule` receives one index expression per dimension of
/// `shape` and returns the element's value (possibly a reduction).
///
/// ```
/// use tessera::te::{self, DType};
/// let a = te::placeholder("A", &[4, 8], DType::F32);
/// let b = te::placeholder("B", &[8, 3], DType::F32);
/// let k = te::reduce_axis(8, "k");
/// let c = te::compute("C", &[4, 3], |ix| {
///     te::sum(a.at([&ix[0], &k]) * b.at([&k, &ix[1]]), [&k])
/// });
/// assert_eq!(c.shape(), &[4, 3]);
/// ```
pub fn compute(name: &str, shape: &[i64], rule: impl FnOnce(&[Expr]) -> Expr) -> Tensor {
    let axes: Vec<Var> = shape
        .iter()
        .enumerate()
        .map(|(d, &extent)| Var::new(format!("i{d}"), extent, IterKind::Spatial))
        .collect();
    let indices: Vec<Expr> = axes.iter().map(Var::expr).collect();
    let body = rule(&indices);
    Tensor(Arc::new(TensorNode {
        id: TensorId::fresh(),
        name: name.to_string(),
        shape: shape.to_vec(),
        dtype: body.dtype(),
        op: TensorOp::Compute(ComputeOp { axes, body }),
    }))
}

impl Tensor {
    /// A computed tensor from an existing rule (used by schedule primitives
    /// that create stages, such as cache_write and rfactor).
    pub fn from_compute(name: &str, shape: &[i64], op: ComputeOp) -> Tensor {
        let dtype = op.body.dtype();
        Tensor(Arc::new(TensorNode {
            id: TensorId::fresh(),
            name: name.to_string(),
            shape: shape.to_vec(),
            dtype,
            op: TensorOp::Compute(op),
        }))
    }
}

impl ComputeOp {
    /// The reduction at the top of the rule, if any.
    pub fn reduction(&self) -> Option<&super::expr::Reduce> {
        match self.body.kind() {
            ExprKind::Reduce(r) => Some(r),
            _ => None,
        }
    }
}
