//! Test scaffolding for the lowering tests: tiny hand-built graphs with
//! random inputs, evaluation of a lowered node through the te interpreter
//! and the JIT, row-major index helpers and tolerance-checked comparison.

use std::collections::BTreeMap;

use crate::codegen::{CodegenOptions, compile};
use crate::schedule::State;
use crate::te::{DType, HostTensor, evaluate};

use super::super::error::GraphError;
use super::super::ir::{Graph, Node, Op, TensorInfo};
use super::{Lowered, NodeKernel, lower_node};

/// A one-node graph under construction, with the values of its inputs.
pub(super) struct Case {
    pub graph: Graph,
    values: BTreeMap<String, HostTensor>,
    seed: u64,
}

impl Case {
    /// An empty graph.
    pub fn new() -> Case {
        Case {
            graph: Graph::default(),
            values: BTreeMap::new(),
            seed: 17,
        }
    }

    fn next_seed(&mut self) -> u64 {
        self.seed += 1;
        self.seed
    }

    /// A runtime input with random values in [-1, 1).
    pub fn input(&mut self, name: &str, shape: &[usize]) -> &mut Case {
        let seed = self.next_seed();
        let value = HostTensor::random(shape, DType::F32, seed);
        self.input_values(name, value)
    }

    /// A runtime input with random values in [0.5, 1.5) (for sqrt, pow, division).
    pub fn positive_input(&mut self, name: &str, shape: &[usize]) -> &mut Case {
        let seed = self.next_seed();
        let data: Vec<f32> = HostTensor::random(shape, DType::F32, seed)
            .as_f32()
            .map(|d| d.iter().map(|v| v.abs() + 0.5).collect())
            .unwrap_or_default();
        let value = HostTensor::from_f32(shape, data).expect("length fits the shape");
        self.input_values(name, value)
    }

    fn input_values(&mut self, name: &str, value: HostTensor) -> &mut Case {
        self.graph
            .tensors
            .insert(name.into(), TensorInfo::f32(value.shape()));
        self.graph.inputs.push(name.into());
        self.values.insert(name.into(), value);
        self
    }

    /// A constant holding `data`.
    pub fn constant(&mut self, name: &str, shape: &[usize], data: Vec<f32>) -> &mut Case {
        let value = HostTensor::from_f32(shape, data).expect("length fits the shape");
        self.graph
            .tensors
            .insert(name.into(), TensorInfo::f32(shape));
        self.graph.constants.insert(name.into(), value.clone());
        self.values.insert(name.into(), value);
        self
    }

    /// A constant with random values in [-1, 1).
    pub fn random_constant(&mut self, name: &str, shape: &[usize]) -> &mut Case {
        let seed = self.next_seed();
        let value = HostTensor::random(shape, DType::F32, seed);
        let data = value.as_f32().map(<[f32]>::to_vec).unwrap_or_default();
        self.constant(name, shape, data)
    }

    /// The node `op(inputs) -> y` with output shape `out`, added to the graph.
    pub fn node(&mut self, op: Op, inputs: &[&str], out: &[usize]) -> Node {
        self.graph.tensors.insert("y".into(), TensorInfo::f32(out));
        self.graph.outputs = vec!["y".into()];
        let node = Node {
            name: "n0".into(),
            op,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec!["y".into()],
        };
        self.graph.nodes = vec![node.clone()];
        node
    }

    /// The value of tensor `name`, widened to f64.
    pub fn data(&self, name: &str) -> Vec<f64> {
        self.values
            .get(name)
            .map(HostTensor::to_f64_vec)
            .unwrap_or_default()
    }

    /// Lowers `node`.
    pub fn lower(&self, node: &Node) -> Result<Lowered, GraphError> {
        lower_node(&self.graph, node)
    }

    /// Lowers `node` to a kernel, panicking with the error otherwise.
    pub fn kernel(&self, node: &Node) -> NodeKernel {
        match self.lower(node) {
            Ok(Lowered::Kernel(k)) => k,
            Ok(Lowered::Alias) => panic!("{} lowered to an alias", node.op.name()),
            Err(e) => panic!("{} failed to lower: {e}", node.op.name()),
        }
    }

    /// The kernel's input buffers: each bound graph tensor's values under
    /// the DAG input's shape.
    pub fn kernel_inputs(&self, kernel: &NodeKernel) -> Vec<HostTensor> {
        kernel
            .dag
            .inputs()
            .iter()
            .zip(&kernel.inputs)
            .map(|(t, name)| {
                let value = self.values.get(name).expect("a bound tensor has a value");
                let shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
                let data = value.as_f32().expect("f32").to_vec();
                HostTensor::from_f32(&shape, data).expect("element counts match")
            })
            .collect()
    }

    /// The kernel's output through the te reference interpreter.
    pub fn interpret(&self, kernel: &NodeKernel) -> Vec<f32> {
        let outputs = evaluate(&kernel.dag, &self.kernel_inputs(kernel)).expect("interpretable");
        outputs[0].as_f32().expect("f32 output").to_vec()
    }

    /// The kernel's output through the JIT with the default schedule.
    pub fn jit(&self, kernel: &NodeKernel) -> Vec<f32> {
        let func = crate::tir::lower(&State::new(&kernel.dag)).expect("lowers to loops");
        let compiled = compile(&func, &CodegenOptions::default()).expect("compiles");
        let outputs = compiled
            .run_host(&self.kernel_inputs(kernel))
            .expect("runs");
        outputs[0].as_f32().expect("f32 output").to_vec()
    }

    /// Lowers `node`, checks the DAG output shape against the graph, and
    /// returns the kernel and its interpreted output.
    pub fn run(&self, node: &Node) -> (NodeKernel, Vec<f32>) {
        let kernel = self.kernel(node);
        let want: Vec<i64> = self
            .graph
            .shape(&node.outputs[0])
            .iter()
            .map(|&d| d as i64)
            .collect();
        let got = kernel.dag.outputs()[0].shape();
        if kernel.registry_op.is_some() {
            // A registry op may compute the same elements under another shape.
            assert_eq!(got.iter().product::<i64>(), want.iter().product::<i64>());
        } else {
            assert_eq!(got, want.as_slice());
        }
        let out = self.interpret(&kernel);
        (kernel, out)
    }
}

/// Row-major strides of `shape`.
pub(super) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The multi-index of row-major position `flat`.
pub(super) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        index[d] = flat % shape[d];
        flat /= shape[d];
    }
    index
}

/// The row-major position of `index`.
pub(super) fn ravel(index: &[usize], shape: &[usize]) -> usize {
    index.iter().zip(strides(shape)).map(|(i, s)| i * s).sum()
}

/// `f(index)` for every position of `shape`, in row-major order.
pub(super) fn tabulate(shape: &[usize], mut f: impl FnMut(&[usize]) -> f64) -> Vec<f64> {
    let n: usize = shape.iter().product();
    (0..n).map(|p| f(&unravel(p, shape))).collect()
}

/// Asserts `got` matches `want` within the rounding of `terms` accumulated
/// f32 operations (plus a few for transcendental functions), relative to
/// the larger of 1 and the value.
pub(super) fn assert_close(got: &[f32], want: &[f64], terms: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: element count");
    let unit = f64::from(f32::EPSILON);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = 4.0 * unit * (terms as f64 + 8.0) * w.abs().max(1.0);
        assert!(
            (f64::from(g) - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w} (tolerance {tol:e})"
        );
    }
}

/// Asserts the JIT computes what the interpreter does for `kernel`.
pub(super) fn assert_jit_matches(case: &Case, kernel: &NodeKernel, terms: usize, what: &str) {
    let reference: Vec<f64> = case
        .interpret(kernel)
        .iter()
        .map(|&v| f64::from(v))
        .collect();
    let got = case.jit(kernel);
    assert_close(&got, &reference, terms + 16, &format!("{what} (JIT)"));
}
