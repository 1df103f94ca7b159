//! The operator registry: every built-in op with its named shape parameters.

use super::error::OpError;
use super::shape::{ParamSpec, ShapeParams, parse_pairs, resolve};
use super::{elementwise, linalg, nn_conv, nn_pool, normalization, subgraphs};
use crate::te::{ComputeDag, DType, DagError};

/// A registered operator.
pub struct OpSpec {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line: what it computes, layouts, inputs.
    pub description: &'static str,
    /// Named shape parameters, in canonical order.
    pub params: &'static [ParamSpec],
    /// Builds the DAG; shape parameters are already range-checked.
    pub(crate) build: fn(&ShapeParams) -> Result<ComputeDag, OpError>,
}

impl OpSpec {
    /// Resolves `(name, value)` pairs against the parameters, filling defaults.
    pub fn shape(&self, given: &[(&str, i64)]) -> Result<ShapeParams, OpError> {
        let owned: Vec<(String, i64)> = given.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        resolve(self.name, self.params, &owned)
    }

    /// Parses `K=V,K=V` (as given to `--shape`) and resolves it.
    pub fn parse_shape(&self, text: &str) -> Result<ShapeParams, OpError> {
        let pairs = parse_pairs(self.name, text)?;
        resolve(self.name, self.params, &pairs)
    }

    /// The shape with every parameter at its default.
    pub fn default_shape(&self) -> ShapeParams {
        // Defaults are in range by construction (checked by a unit test).
        resolve(self.name, self.params, &[]).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Builds the checked DAG for `shape`, labelled `name[P=V,...,f32]`.
    pub fn build(&self, shape: &ShapeParams) -> Result<ComputeDag, OpError> {
        let dag = (self.build)(shape)?;
        Ok(dag.with_label(format!("{}[{},{}]", self.name, shape.to_text(), DType::F32)))
    }

    /// Floating-point operations of one run at `shape`.
    pub fn flop_count(&self, shape: &ShapeParams) -> Result<u64, OpError> {
        Ok(self.build(shape)?.flop_count())
    }
}

static REGISTRY: &[OpSpec] = &[
    linalg::MATMUL,
    linalg::MATMUL_NT,
    linalg::BATCH_MATMUL,
    linalg::DENSE,
    linalg::DENSE_BIAS,
    linalg::DENSE_BIAS_RELU,
    nn_conv::CONV1D,
    nn_conv::CONV2D,
    nn_conv::CONV2D_NHWC,
    nn_conv::GROUP_CONV2D,
    nn_conv::DEPTHWISE_CONV2D,
    nn_conv::CONV3D,
    nn_conv::CONV2D_TRANSPOSE,
    nn_conv::CONV2D_CAPSULE,
    normalization::NORM,
    nn_pool::MAX_POOL2D,
    nn_pool::AVG_POOL2D,
    normalization::SOFTMAX,
    normalization::LAYER_NORM,
    elementwise::RELU,
    elementwise::GELU,
    elementwise::BIAS_ADD,
    subgraphs::CONV2D_BN_RELU,
    subgraphs::TRANSPOSE_BATCH_MATMUL,
];

/// Every registered operator, in listing order.
pub fn registry() -> &'static [OpSpec] {
    REGISTRY
}

/// The operator called `name`.
pub fn find(name: &str) -> Result<&'static OpSpec, OpError> {
    REGISTRY
        .iter()
        .find(|op| op.name == name)
        .ok_or_else(|| OpError::UnknownOp {
            name: name.into(),
            known: REGISTRY
                .iter()
                .map(|op| op.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Wraps a DAG construction error with the op's name.
pub(crate) fn dag_error(op: &str) -> impl Fn(DagError) -> OpError + '_ {
    move |source| OpError::Dag {
        op: op.into(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_defaults_build() {
        let mut names: Vec<_> = registry().iter().map(|op| op.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), registry().len());
        for op in registry() {
            let shape = resolve(op.name, op.params, &[]);
            assert!(shape.is_ok(), "{}: defaults out of range", op.name);
        }
    }

    #[test]
    fn flop_counts_follow_the_closed_forms() {
        let flops = |name: &str, params: &[(&str, i64)]| {
            let op = find(name).expect("registered");
            op.flop_count(&op.shape(params).expect("valid"))
                .expect("builds")
        };
        assert_eq!(
            flops("matmul", &[("M", 7), ("N", 5), ("K", 3)]),
            2 * 7 * 5 * 3
        );
        assert_eq!(
            flops("dense_bias_relu", &[("M", 4), ("N", 6), ("K", 8)]),
            2 * 4 * 6 * 8 + 2 * 4 * 6
        );
        // 2·N·K·OH·OW·C·R·S with OH = OW = (9 + 2 - 3) / 2 + 1 = 5; the pad stage is free.
        let conv = [
            ("N", 2),
            ("C", 3),
            ("H", 9),
            ("W", 9),
            ("K", 4),
            ("stride", 2),
        ];
        assert_eq!(flops("conv2d", &conv), 2 * 2 * 4 * 5 * 5 * 3 * 3 * 3);
    }
}
