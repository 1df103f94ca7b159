//! Test scaffolding for the pass tests: small graphs built node by node,
//! random inputs, and the check that a rewritten graph computes the same
//! outputs as the original (both through the te reference interpreter).

use crate::graph::ir::{ConvAttrs, Graph, Node, Op, TensorInfo};
use crate::te::{DType, HostTensor};

use super::host_eval::evaluate_graph;

/// A graph under construction.
pub(crate) struct Builder {
    pub graph: Graph,
    seed: u64,
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            graph: Graph {
                name: "test".into(),
                opset: 13,
                ..Graph::default()
            },
            seed: 40,
        }
    }

    /// A runtime input.
    pub fn input(&mut self, name: &str, shape: &[usize]) -> &mut Builder {
        self.graph
            .tensors
            .insert(name.into(), TensorInfo::f32(shape));
        self.graph.inputs.push(name.into());
        self
    }

    /// A constant with random values in [0.5, 1.5) (safe under sqrt and division).
    pub fn constant(&mut self, name: &str, shape: &[usize]) -> &mut Builder {
        self.seed += 1;
        let random = HostTensor::random(shape, DType::F32, self.seed);
        let data: Vec<f32> = random
            .as_f32()
            .unwrap()
            .iter()
            .map(|v| v.abs() + 0.5)
            .collect();
        self.constant_values(name, shape, data)
    }

    /// A constant holding `data`.
    pub fn constant_values(&mut self, name: &str, shape: &[usize], data: Vec<f32>) -> &mut Builder {
        self.graph
            .tensors
            .insert(name.into(), TensorInfo::f32(shape));
        self.graph
            .constants
            .insert(name.into(), HostTensor::from_f32(shape, data).unwrap());
        self
    }

    /// The node `name: op(inputs) -> output` with the output's shape.
    pub fn node(
        &mut self,
        name: &str,
        op: Op,
        inputs: &[&str],
        output: &str,
        shape: &[usize],
    ) -> &mut Builder {
        self.graph
            .tensors
            .insert(output.into(), TensorInfo::f32(shape));
        self.graph.nodes.push(Node {
            name: name.into(),
            op,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: vec![output.into()],
        });
        self
    }

    /// Marks graph outputs.
    pub fn outputs(&mut self, names: &[&str]) -> Graph {
        self.graph.outputs = names.iter().map(|s| s.to_string()).collect();
        self.graph.clone()
    }
}

/// A channels-first convolution with a `kernel`×`kernel` window and these
/// strides, padding and groups.
pub(crate) fn conv(kernel: i64, stride: i64, pad: i64, group: i64) -> Op {
    Op::Conv(ConvAttrs {
        kernel: vec![kernel, kernel],
        strides: vec![stride, stride],
        pads_begin: vec![pad, pad],
        pads_end: vec![pad, pad],
        dilations: vec![1, 1],
        group,
        channels_last: false,
    })
}

/// A 3×3 convolution, stride 1, pad 1.
pub(crate) fn conv3x3() -> Op {
    conv(3, 1, 1, 1)
}

/// The node of `graph` named `name`.
pub(crate) fn node<'g>(graph: &'g Graph, name: &str) -> &'g Node {
    graph
        .nodes
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node '{name}'"))
}

/// How many nodes of `graph` have op type `op_type`.
pub(crate) fn count(graph: &Graph, op_type: &str) -> usize {
    graph
        .nodes
        .iter()
        .filter(|n| n.op.name() == op_type)
        .count()
}

/// Random values for every graph input.
pub(crate) fn random_inputs(graph: &Graph) -> Vec<(String, HostTensor)> {
    graph
        .inputs
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let value = HostTensor::random(graph.shape(name), DType::F32, 7 + i as u64);
            (name.clone(), value)
        })
        .collect()
}

/// Asserts `after` computes `before`'s outputs (same names, same shapes)
/// on random inputs, within `rel` relative to the larger of 1 and the value.
pub(crate) fn assert_same_outputs(before: &Graph, after: &Graph, rel: f64) {
    let inputs = random_inputs(before);
    let want = evaluate_graph(before, &inputs).expect("the original evaluates");
    let got = evaluate_graph(after, &inputs).expect("the rewritten graph evaluates");
    assert_eq!(want.len(), got.len(), "output count");
    for ((wn, w), (gn, g)) in want.iter().zip(&got) {
        assert_eq!(wn, gn, "output names");
        assert_eq!(w.shape(), g.shape(), "output '{wn}' shape");
        for (i, (a, b)) in w.to_f64_vec().iter().zip(g.to_f64_vec()).enumerate() {
            assert!(
                (a - b).abs() <= rel * a.abs().max(1.0),
                "output '{wn}' element {i}: was {a}, is {b}"
            );
        }
    }
}
