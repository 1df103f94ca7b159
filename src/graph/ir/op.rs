//! The operators of the graph IR, with their attributes resolved: defaults
//! filled, negative axes made positive, `auto_pad` turned into explicit pads,
//! and the inputs that only carry attributes (a Reshape's shape, a Clip's
//! bounds, opset-13 axes) read from constants at import and dropped.

use serde::Serialize;

/// An elementwise function of one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOp {
    /// `max(x, 0)`.
    Relu,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// The error function.
    Erf,
    /// `sqrt(x)`.
    Sqrt,
    /// `exp(x)`.
    Exp,
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `1 / x`.
    Reciprocal,
}

/// An elementwise function of two inputs, with numpy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `a ^ b`.
    Pow,
}

/// A convolution's attributes, one entry per spatial dimension.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConvAttrs {
    /// Window extents (from the weight's shape when the attribute is absent).
    pub kernel: Vec<i64>,
    /// Strides.
    pub strides: Vec<i64>,
    /// Padding before each spatial dimension.
    pub pads_begin: Vec<i64>,
    /// Padding after each spatial dimension.
    pub pads_end: Vec<i64>,
    /// Dilations.
    pub dilations: Vec<i64>,
    /// Channel groups (`C` and `K` both divisible by it).
    pub group: i64,
    /// Channels last: `X[N,*,C], W[*,C/group,K]` → `Y[N,*,K]` (the
    /// `channels_last` pass's layout) instead of ONNX's channels first.
    pub channels_last: bool,
}

/// A pooling window's attributes, one entry per spatial dimension.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolAttrs {
    /// Window extents.
    pub kernel: Vec<i64>,
    /// Strides.
    pub strides: Vec<i64>,
    /// Padding before each spatial dimension.
    pub pads_begin: Vec<i64>,
    /// Padding after each spatial dimension.
    pub pads_end: Vec<i64>,
    /// Dilations (max pools; average pools take 1).
    pub dilations: Vec<i64>,
    /// Output sizes rounded up instead of down.
    pub ceil_mode: bool,
    /// Average pools: padding counts in the divisor.
    pub count_include_pad: bool,
    /// Channels last: `X[N,*,C]` → `Y[N,*,C]` (the `channels_last` pass's
    /// layout) instead of ONNX's channels first.
    pub channels_last: bool,
}

/// A graph operator with its attributes resolved.
///
/// The inputs listed are the node's data inputs, in this order.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// `X[N,C,*], W[K,C/group,*], [B[K]]` → `Y[N,K,*]` (channels last:
    /// `X[N,*,C], W[*,C/group,K]` → `Y[N,*,K]`).
    Conv(ConvAttrs),
    /// Inference batch normalisation: `X[N,C,*], scale[C], bias[C], mean[C], var[C]`.
    BatchNormalization {
        /// Added to the variance.
        epsilon: f32,
    },
    /// An elementwise function.
    Unary(UnaryOp),
    /// `min(max(x, min), max)`.
    Clip {
        /// Lower bound (−∞ when absent).
        min: f32,
        /// Upper bound (+∞ when absent).
        max: f32,
    },
    /// `alpha·x` below 0, `x` above (LeakyRelu).
    LeakyRelu {
        /// Slope below zero.
        alpha: f32,
    },
    /// Two inputs, broadcast.
    Binary(BinaryOp),
    /// The sum of any number of inputs, broadcast.
    Sum,
    /// numpy `matmul`: batched, broadcast over leading dimensions.
    MatMul,
    /// `alpha·op(A)·op(B) + beta·C`, `op` transposing when asked.
    Gemm {
        /// Scale of the product.
        alpha: f32,
        /// Scale of `C`.
        beta: f32,
        /// `A` is stored `[K, M]`.
        trans_a: bool,
        /// `B` is stored `[N, K]`.
        trans_b: bool,
    },
    /// Max over each window (padding ignored).
    MaxPool(PoolAttrs),
    /// Mean over each window.
    AveragePool(PoolAttrs),
    /// Mean over every spatial position: `[N,C,*]` → `[N,C,1,…]`.
    GlobalAveragePool,
    /// Local response normalisation across channels.
    Lrn {
        /// Channels in the window.
        size: i64,
        /// Scale.
        alpha: f32,
        /// Exponent.
        beta: f32,
        /// Offset.
        bias: f32,
    },
    /// Output = input's elements under the output's shape (Reshape,
    /// Flatten, Squeeze, Unsqueeze, Identity, Dropout at inference).
    Reshape,
    /// Permutes dimensions: output dimension `i` is input dimension `perm[i]`.
    Transpose {
        /// The permutation.
        perm: Vec<usize>,
    },
    /// Joins inputs along an axis.
    Concat {
        /// The axis.
        axis: usize,
    },
    /// `exp(x − max) / Σ exp(x − max)` over the given trailing axes
    /// (one axis from opset 13; every axis from `axis` on before it).
    Softmax {
        /// The first axis normalised over.
        axis: usize,
        /// The last axis normalised over (inclusive).
        last_axis: usize,
    },
    /// `(x − μ) / sqrt(σ² + ε) · scale + bias` over the axes from `axis` on.
    LayerNormalization {
        /// The first normalised axis.
        axis: usize,
        /// Added to the variance.
        epsilon: f32,
    },
    /// The mean over some axes.
    ReduceMean {
        /// The axes, ascending.
        axes: Vec<usize>,
        /// Whether reduced axes stay as size 1.
        keepdims: bool,
    },
    /// `0.5·x·(1 + erf(x/√2))`, or its tanh approximation.
    Gelu {
        /// The tanh approximation.
        tanh: bool,
    },
    /// Elements of the data input picked along `axis` by constant indices.
    Gather {
        /// The axis.
        axis: usize,
        /// The indices (non-negative, in range), row-major.
        indices: Vec<i64>,
        /// Their shape.
        indices_shape: Vec<usize>,
    },
    /// `data[starts:ends:steps]` along some axes, all constant.
    Slice {
        /// Per input dimension: first index.
        starts: Vec<i64>,
        /// Per input dimension: step (positive or negative).
        steps: Vec<i64>,
    },
}

impl Op {
    /// The ONNX-like name shown in printouts (`Conv`, `Add`, `Reshape`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Conv(_) => "Conv",
            Op::BatchNormalization { .. } => "BatchNormalization",
            Op::Unary(u) => match u {
                UnaryOp::Relu => "Relu",
                UnaryOp::Sigmoid => "Sigmoid",
                UnaryOp::Tanh => "Tanh",
                UnaryOp::Erf => "Erf",
                UnaryOp::Sqrt => "Sqrt",
                UnaryOp::Exp => "Exp",
                UnaryOp::Neg => "Neg",
                UnaryOp::Abs => "Abs",
                UnaryOp::Reciprocal => "Reciprocal",
            },
            Op::Clip { .. } => "Clip",
            Op::LeakyRelu { .. } => "LeakyRelu",
            Op::Binary(b) => match b {
                BinaryOp::Add => "Add",
                BinaryOp::Sub => "Sub",
                BinaryOp::Mul => "Mul",
                BinaryOp::Div => "Div",
                BinaryOp::Pow => "Pow",
            },
            Op::Sum => "Sum",
            Op::MatMul => "MatMul",
            Op::Gemm { .. } => "Gemm",
            Op::MaxPool(_) => "MaxPool",
            Op::AveragePool(_) => "AveragePool",
            Op::GlobalAveragePool => "GlobalAveragePool",
            Op::Lrn { .. } => "LRN",
            Op::Reshape => "Reshape",
            Op::Transpose { .. } => "Transpose",
            Op::Concat { .. } => "Concat",
            Op::Softmax { .. } => "Softmax",
            Op::LayerNormalization { .. } => "LayerNormalization",
            Op::ReduceMean { .. } => "ReduceMean",
            Op::Gelu { .. } => "Gelu",
            Op::Gather { .. } => "Gather",
            Op::Slice { .. } => "Slice",
        }
    }

    /// Whether the node only reinterprets its input's elements under another
    /// shape: the executor runs no kernel for it.
    pub fn is_alias(&self) -> bool {
        matches!(self, Op::Reshape)
    }
}
