//! What kind of computation each operator is, as the fusion rules see it
//! (TVM's `OpPatternKind`, reduced to what tessera's lowerings produce).

use crate::graph::ir::Op;

/// The fusion pattern of an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Each output element from the input elements at the same index (up
    /// to broadcasting): Relu, Add, Clip, Gelu, …
    Elementwise,
    /// Output elements are input elements moved around: Transpose, Concat,
    /// Gather, Slice.
    Injective,
    /// A reduction over a window or an axis: pools, Softmax, LayerNorm,
    /// ReduceMean, LRN.
    Reduction,
    /// A contraction whose output an elementwise epilogue may follow inside
    /// the same loops: Conv, MatMul, Gemm (TVM's `kOutEWiseFusable`).
    Contraction,
    /// No kernel: the output is the input's elements under another shape.
    Alias,
}

/// The pattern of `op`.
pub fn pattern(op: &Op) -> Pattern {
    match op {
        Op::Unary(_)
        | Op::Clip { .. }
        | Op::LeakyRelu { .. }
        | Op::Binary(_)
        | Op::Sum
        | Op::Gelu { .. }
        | Op::BatchNormalization { .. } => Pattern::Elementwise,
        Op::Transpose { .. } | Op::Concat { .. } | Op::Gather { .. } | Op::Slice { .. } => {
            Pattern::Injective
        }
        Op::MaxPool(_)
        | Op::AveragePool(_)
        | Op::GlobalAveragePool
        | Op::Softmax { .. }
        | Op::LayerNormalization { .. }
        | Op::ReduceMean { .. }
        | Op::Lrn { .. } => Pattern::Reduction,
        Op::Conv(_) | Op::MatMul | Op::Gemm { .. } => Pattern::Contraction,
        Op::Reshape => Pattern::Alias,
    }
}
