//! The operator registry: every built-in op with its named shape parameters,
//! and the operators a program registers itself (every `op!` definition).
//!
//! Registration goes through [`inventory`]: `inventory::submit!` places an
//! [`OpSpec`] in a link-time list, so an op defined anywhere in the binary
//! (a dependency, an example, a test) is found by name without a central
//! list. Names must be unique; a name defined twice is an error when looked up.

use super::error::OpError;
use super::shape::{ParamSpec, ShapeParams, parse_pairs, resolve};
use super::{elementwise, linalg, nn_conv, nn_pool, normalization, subgraphs};
use crate::te::{ComputeDag, DagError};

/// Builds an operator's DAG from range-checked shape parameters.
pub type BuildFn = fn(&ShapeParams) -> Result<ComputeDag, OpError>;

/// Where an operator is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    /// Part of tessera.
    BuiltIn,
    /// Registered by the program: the `op!` macro gives
    /// `module::path (file.rs:line)`.
    Registered(&'static str),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::BuiltIn => f.write_str("built-in"),
            Origin::Registered(at) => write!(f, "registered at {at}"),
        }
    }
}

/// A registered operator.
pub struct OpSpec {
    /// The name used on the command line.
    pub name: &'static str,
    /// One line: what it computes, layouts, inputs.
    pub description: &'static str,
    /// Named shape parameters, in canonical order.
    pub params: &'static [ParamSpec],
    /// Where the operator is defined.
    pub origin: Origin,
    /// Builds the DAG; shape parameters are already range-checked.
    pub(crate) build: BuildFn,
}

inventory::collect!(OpSpec);

impl OpSpec {
    /// An operator defined outside tessera, for `inventory::submit!`
    /// (which the `op!` macro writes for you):
    ///
    /// ```
    /// use tessera::ops::{OpError, OpSpec, Origin, ParamSpec, ShapeParams};
    /// use tessera::te::{ComputeDag, DType, compute, placeholder};
    ///
    /// fn build(shape: &ShapeParams) -> Result<ComputeDag, OpError> {
    ///     let x = placeholder("x", &[shape.get("N")], DType::F32);
    ///     let y = compute("y", &[shape.get("N")], |i| x.at([i[0].clone()]) * 2.0);
    ///     ComputeDag::new(&[x], &[y]).map_err(|source| OpError::Dag { op: "twice".into(), source })
    /// }
    ///
    /// tessera::inventory::submit! {
    ///     OpSpec::new(
    ///         "twice",
    ///         "y[N] = 2·x[N]",
    ///         &[ParamSpec { name: "N", default: Some(1024), min: 1, help: "length" }],
    ///         build,
    ///         Origin::Registered("doc example"),
    ///     )
    /// }
    ///
    /// assert_eq!(tessera::ops::find("twice").unwrap().description, "y[N] = 2·x[N]");
    /// ```
    pub const fn new(
        name: &'static str,
        description: &'static str,
        params: &'static [ParamSpec],
        build: BuildFn,
        origin: Origin,
    ) -> OpSpec {
        OpSpec {
            name,
            description,
            params,
            origin,
            build,
        }
    }

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

    /// The shape with every parameter at its default; an error names the
    /// first parameter without one.
    pub fn default_shape(&self) -> Result<ShapeParams, OpError> {
        resolve(self.name, self.params, &[])
    }

    /// Builds the checked DAG for `shape`, labelled `name[P=V,...,dtype]`
    /// (the first output's dtype).
    pub fn build(&self, shape: &ShapeParams) -> Result<ComputeDag, OpError> {
        let dag = (self.build)(shape)?;
        let dtype = dag
            .outputs()
            .first()
            .map(|t| t.dtype().to_string())
            .unwrap_or_default();
        let label = if shape.values().is_empty() {
            format!("{}[{dtype}]", self.name)
        } else {
            format!("{}[{},{dtype}]", self.name, shape.to_text())
        };
        Ok(dag.with_label(label))
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
    nn_conv::CONV2D_BIAS,
    nn_conv::CONV2D_NHWC,
    nn_conv::CONV2D_NHWC_BIAS,
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

/// Every operator: the built-in ones in listing order, then those the
/// program registered (`op!`), by name.
pub fn registry() -> Vec<&'static OpSpec> {
    let mut registered: Vec<&'static OpSpec> = inventory::iter::<OpSpec>.into_iter().collect();
    registered.sort_by_key(|op| (op.name, origin_text(op)));
    REGISTRY.iter().chain(registered).collect()
}

fn origin_text(op: &OpSpec) -> String {
    op.origin.to_string()
}

/// The operator called `name`; an error when none or more than one is.
pub fn find(name: &str) -> Result<&'static OpSpec, OpError> {
    let all = registry();
    let matching: Vec<&'static OpSpec> = all.iter().copied().filter(|op| op.name == name).collect();
    match matching.as_slice() {
        [op] => Ok(op),
        [] => Err(OpError::UnknownOp {
            name: name.into(),
            known: all.iter().map(|op| op.name).collect::<Vec<_>>().join(", "),
        }),
        several => Err(OpError::AmbiguousOp {
            name: name.into(),
            origins: several
                .iter()
                .map(|op| origin_text(op))
                .collect::<Vec<_>>()
                .join("; "),
        }),
    }
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
        let mut names: Vec<_> = REGISTRY.iter().map(|op| op.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        for op in REGISTRY {
            assert_eq!(op.origin, Origin::BuiltIn);
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
