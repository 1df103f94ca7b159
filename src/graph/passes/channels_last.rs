//! Layout choice: convolutions, pools and the elementwise nodes between
//! them run channels last (`[N, H, W, C]`), the layout the GEMM kernels
//! prefer — a convolution's output channels are the micro-kernel's vector
//! axis and its input channels the reduction's contiguous run, so its tile
//! is stored as computed, with no transposing copy out.
//!
//! ```text
//! x[1,C,H,W] ─Conv─► ─Relu─► ─MaxPool─► ─Conv─► ─Add(skip)─► ─GlobalAveragePool─► Flatten
//!   becomes
//! x ─Transpose─► [1,H,W,C] ─Conv*─► ─Relu─► ─MaxPool*─► ─Conv*─► ─Add─► ─ReduceMean(1,2)─►
//!   ─Reshape─► [1,C,1,1] ─► Flatten                       (* channels last)
//! ```
//!
//! A 2-D convolution with a constant weight and one group always goes
//! channels last, its weight folded into a constant `[R, S, C, K]`; a
//! pool, a global average pool and an elementwise node go channels last
//! when their input already is (an elementwise node's other operands: one
//! value, a constant — permuted — or a tensor of the full shape). Where a
//! channels-first node reads a channels-last tensor (or the reverse, or a
//! graph output), a Transpose is inserted once per tensor; one that only
//! moves dimensions of extent 1 is a Reshape (an alias).
//!
//! Graphs with grouped convolutions keep channels first: their depthwise
//! convolutions run the stencil row primitives over channel planes, which
//! a channels-last tensor would take away.

use std::collections::{BTreeMap, BTreeSet};

use crate::graph::error::GraphError;
use crate::graph::ir::{Graph, Node, Op, TensorInfo, layout};
use crate::te::HostTensor;

use super::names::FreshNames;

/// The suffix of the name of a tensor's channels-last form (`r` →
/// `r.channels_last`, made unique by a counter where taken).
pub const CHANNELS_LAST_SUFFIX: &str = ".channels_last";

/// Rewrites `graph` channels last where that applies (see the module docs).
pub(super) fn channels_last(graph: Graph) -> Result<(Graph, String), GraphError> {
    let grouped = graph
        .nodes
        .iter()
        .filter(|n| matches!(&n.op, Op::Conv(a) if a.group != 1))
        .count();
    if grouped > 0 {
        return Ok((
            graph,
            format!(
                "kept channels first: {grouped} grouped convolutions run channels-first stencil rows"
            ),
        ));
    }
    if !graph.nodes.iter().any(|n| convertible_conv(&graph, n)) {
        return Ok((graph, "no 2-D convolution with a constant weight".into()));
    }
    let mut rewrite = Rewriter::new(&graph);
    for node in &graph.nodes {
        rewrite.node(node);
    }
    rewrite.outputs_channels_first();
    let (converted, transposes) = (rewrite.converted, rewrite.transposes);
    let graph = rewrite.finish();
    Ok((
        graph,
        format!(
            "{converted} nodes run channels last ({transposes} layout transforms at the boundaries)"
        ),
    ))
}

/// A 2-D, one-group, channels-first convolution of a rank-4 input by a
/// constant weight.
fn convertible_conv(graph: &Graph, node: &Node) -> bool {
    let Op::Conv(a) = &node.op else {
        return false;
    };
    a.kernel.len() == 2
        && a.group == 1
        && !a.channels_last
        && node.outputs.len() == 1
        && graph.shape(&node.inputs[0]).len() == 4
        && node
            .inputs
            .get(1)
            .and_then(|w| graph.constant(w))
            .is_some_and(|w| w.shape().len() == 4 && w.as_f32().is_some())
}

/// The elementwise ops that run in any layout.
fn elementwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_) | Op::Clip { .. } | Op::LeakyRelu { .. } | Op::Binary(_) | Op::Sum
    )
}

/// `value` (f32, rank ≤ 4, broadcast against a rank-4 tensor) with
/// leading 1s up to rank 4, permuted by `perm`.
fn permute_constant(value: &HostTensor, perm: &[usize]) -> Option<HostTensor> {
    let data = value.as_f32()?;
    let rank = perm.len();
    let padding = rank.checked_sub(value.shape().len())?;
    let shape: Vec<usize> = std::iter::repeat_n(1, padding)
        .chain(value.shape().iter().copied())
        .collect();
    let out_shape = layout::permuted(&shape, perm);
    let strides: Vec<usize> = (0..rank).map(|d| shape[d + 1..].iter().product()).collect();
    let mut out = Vec::with_capacity(data.len());
    let mut index = vec![0usize; rank];
    for _ in 0..data.len() {
        let at: usize = (0..rank).map(|d| index[d] * strides[perm[d]]).sum();
        out.push(data[at]);
        for d in (0..rank).rev() {
            index[d] += 1;
            if index[d] < out_shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    HostTensor::from_f32(&out_shape, out).ok()
}

/// Whether transposing `shape` by `perm` keeps every element in place
/// (only dimensions of extent 1 move): a Reshape does it.
fn moves_only_unit_dims(shape: &[usize], perm: &[usize]) -> bool {
    let moved: Vec<usize> = perm.iter().copied().filter(|&d| shape[d] != 1).collect();
    moved.windows(2).all(|w| w[0] < w[1])
}

/// The state of one rewrite: the nodes so far and where each tensor lives.
struct Rewriter<'g> {
    graph: &'g Graph,
    names: FreshNames,
    nodes: Vec<Node>,
    /// Original tensor name → its channels-last tensor.
    last: BTreeMap<String, String>,
    /// Original tensors present under their own name, channels first.
    first: BTreeSet<String>,
    tensors: BTreeMap<String, TensorInfo>,
    constants: BTreeMap<String, HostTensor>,
    converted: usize,
    transposes: usize,
}

impl<'g> Rewriter<'g> {
    fn new(graph: &'g Graph) -> Rewriter<'g> {
        Rewriter {
            graph,
            names: FreshNames::new(graph),
            nodes: Vec::with_capacity(graph.nodes.len()),
            last: BTreeMap::new(),
            first: graph
                .inputs
                .iter()
                .chain(graph.constants.keys())
                .cloned()
                .collect(),
            tensors: graph.tensors.clone(),
            constants: graph.constants.clone(),
            converted: 0,
            transposes: 0,
        }
    }

    /// A layout transform of `from` (of `shape`) by `perm` into `to`.
    fn transform(&mut self, from: &str, shape: &[usize], perm: Vec<usize>, to: &str) {
        let op = if moves_only_unit_dims(shape, &perm) {
            Op::Reshape
        } else {
            self.transposes += 1;
            Op::Transpose { perm: perm.clone() }
        };
        self.tensors.insert(
            to.to_string(),
            TensorInfo::f32(&layout::permuted(shape, &perm)),
        );
        self.nodes.push(Node {
            name: self.names.node(&format!("{to}.layout")),
            op,
            inputs: vec![from.to_string()],
            outputs: vec![to.to_string()],
        });
    }

    /// The channels-first tensor `name`, transformed back once if only its
    /// channels-last form exists.
    fn read_first(&mut self, name: &str) -> String {
        if !self.first.contains(name)
            && let Some(last) = self.last.get(name).cloned()
        {
            let shape = self.tensors[&last].shape.clone();
            self.transform(&last, &shape, layout::to_channels_first(shape.len()), name);
            self.first.insert(name.to_string());
        }
        name.to_string()
    }

    /// The channels-last form of the rank-4 tensor `name`, transformed once
    /// if it does not exist yet.
    fn read_last(&mut self, name: &str) -> String {
        if let Some(last) = self.last.get(name) {
            return last.clone();
        }
        let to = self.names.tensor(&format!("{name}{CHANNELS_LAST_SUFFIX}"));
        let shape = self.graph.shape(name).to_vec();
        self.transform(name, &shape, layout::to_channels_last(shape.len()), &to);
        self.last.insert(name.to_string(), to.clone());
        to
    }

    /// A new constant holding `value`.
    fn constant(&mut self, base: &str, value: HostTensor) -> String {
        let name = self.names.tensor(base);
        self.tensors
            .insert(name.clone(), TensorInfo::f32(value.shape()));
        self.constants.insert(name.clone(), value);
        name
    }

    /// Emits `op` over `inputs` channels last, writing the channels-last
    /// form of `node`'s output.
    fn emit_last(&mut self, node: &Node, op: Op, inputs: Vec<String>) {
        let out = &node.outputs[0];
        let name = self.names.tensor(&format!("{out}{CHANNELS_LAST_SUFFIX}"));
        self.tensors.insert(
            name.clone(),
            TensorInfo::f32(&layout::channels_last(self.graph.shape(out))),
        );
        self.tensors.remove(out);
        self.last.insert(out.clone(), name.clone());
        self.nodes.push(Node {
            name: node.name.clone(),
            op,
            inputs,
            outputs: vec![name],
        });
        self.converted += 1;
    }

    fn node(&mut self, node: &Node) {
        let single_rank4 = node.outputs.len() == 1 && self.graph.shape(&node.outputs[0]).len() == 4;
        let input_last = |r: &Rewriter, i: usize| {
            node.inputs
                .get(i)
                .is_some_and(|t| r.last.contains_key(t) && r.graph.shape(t).len() == 4)
        };
        match &node.op {
            Op::Conv(a) if convertible_conv(self.graph, node) => {
                let Some(weight) = self
                    .graph
                    .constant(&node.inputs[1])
                    .and_then(|w| permute_constant(w, &layout::weight_to_channels_last(4)))
                else {
                    return self.keep(node);
                };
                let x = self.read_last(&node.inputs[0]);
                let w = self.constant(&format!("{}.weight_channels_last", node.name), weight);
                let mut inputs = vec![x, w];
                inputs.extend(node.inputs.get(2).map(|b| self.read_first(b)));
                let mut attrs = a.clone();
                attrs.channels_last = true;
                self.emit_last(node, Op::Conv(attrs), inputs);
            }
            Op::MaxPool(a) | Op::AveragePool(a)
                if single_rank4
                    && a.kernel.len() == 2
                    && !a.channels_last
                    && input_last(self, 0) =>
            {
                let mut attrs = a.clone();
                attrs.channels_last = true;
                let op = match node.op {
                    Op::MaxPool(_) => Op::MaxPool(attrs),
                    _ => Op::AveragePool(attrs),
                };
                let x = self.read_last(&node.inputs[0]);
                self.emit_last(node, op, vec![x]);
            }
            Op::GlobalAveragePool if single_rank4 && input_last(self, 0) => {
                let x = self.read_last(&node.inputs[0]);
                let op = Op::ReduceMean {
                    axes: vec![1, 2],
                    keepdims: true,
                };
                self.emit_last(node, op, vec![x]);
            }
            op if elementwise(op) && single_rank4 => match self.elementwise_operands(node) {
                Some(operands) => {
                    let inputs = operands
                        .into_iter()
                        .zip(&node.inputs)
                        .map(|(operand, input)| match operand {
                            Operand::Same => self.read_first(input),
                            Operand::Last => self.read_last(input),
                            Operand::Constant(value) => {
                                self.constant(&format!("{input}{CHANNELS_LAST_SUFFIX}"), value)
                            }
                        })
                        .collect();
                    self.emit_last(node, node.op.clone(), inputs);
                }
                None => self.keep(node),
            },
            _ => self.keep(node),
        }
    }

    /// How each input of the elementwise `node` reads channels last; `None`
    /// when it stays channels first (no input is channels last yet, or an
    /// operand cannot follow).
    fn elementwise_operands(&self, node: &Node) -> Option<Vec<Operand>> {
        let full = self.graph.shape(&node.outputs[0]);
        if !node.inputs.iter().any(|t| self.last.contains_key(t)) {
            return None;
        }
        node.inputs
            .iter()
            .map(|input| {
                let shape = self.graph.shape(input);
                if shape == full && !self.graph.constants.contains_key(input) {
                    return Some(Operand::Last);
                }
                if shape.iter().product::<usize>() == 1 && shape.len() <= 4 {
                    return Some(Operand::Same);
                }
                let value = self.graph.constant(input)?;
                permute_constant(value, &layout::to_channels_last(4)).map(Operand::Constant)
            })
            .collect()
    }

    /// Emits `node` as it is, channels first.
    fn keep(&mut self, node: &Node) {
        let inputs = node.inputs.iter().map(|t| self.read_first(t)).collect();
        for out in &node.outputs {
            self.first.insert(out.clone());
        }
        self.nodes.push(Node {
            inputs,
            ..node.clone()
        });
    }

    /// Transforms back every graph output that exists channels last only.
    fn outputs_channels_first(&mut self) {
        for output in &self.graph.outputs {
            self.read_first(output);
        }
    }

    /// The rewritten graph, its unused tensor entries dropped.
    fn finish(self) -> Graph {
        let mut graph = Graph {
            name: self.graph.name.clone(),
            opset: self.graph.opset,
            inputs: self.graph.inputs.clone(),
            outputs: self.graph.outputs.clone(),
            tensors: self.tensors,
            constants: self.constants,
            nodes: self.nodes,
        };
        let used: BTreeSet<String> = graph
            .inputs
            .iter()
            .chain(graph.constants.keys())
            .chain(graph.nodes.iter().flat_map(|n| n.outputs.iter()))
            .cloned()
            .collect();
        graph.tensors.retain(|name, _| used.contains(name));
        graph
    }
}

/// How one input of an elementwise node reads channels last.
enum Operand {
    /// As it is: one value.
    Same,
    /// Its channels-last form (a tensor of the node's full shape).
    Last,
    /// A new constant: the original permuted channels last.
    Constant(HostTensor),
}

#[cfg(test)]
mod tests {
    use super::super::check_graph;
    use super::super::pointwise_conv::pointwise_convolutions_as_matmuls;
    use super::super::test_support::{Builder, assert_same_outputs, conv, conv3x3, count, node};
    use super::*;
    use crate::graph::ir::{BinaryOp, ConvAttrs, PoolAttrs, UnaryOp};

    fn rewritten(graph: &Graph) -> (Graph, String) {
        let (after, summary) = channels_last(graph.clone()).expect("runs");
        check_graph(&after).expect("the invariants hold");
        (after, summary)
    }

    fn max_pool() -> Op {
        Op::MaxPool(PoolAttrs {
            kernel: vec![3, 3],
            strides: vec![2, 2],
            pads_begin: vec![1, 1],
            pads_end: vec![1, 1],
            dilations: vec![1, 1],
            ceil_mode: false,
            count_include_pad: false,
            channels_last: false,
        })
    }

    /// A residual block the way ResNet builds it: a stem, a pool, two
    /// branches added, per-channel and scalar constants, a global pool and
    /// a flatten, and one intermediate read channels first by a graph output.
    fn residual_block() -> Graph {
        Builder::new()
            .input("x", &[1, 3, 9, 9])
            .constant("w0", &[4, 3, 3, 3])
            .constant("b0", &[4])
            .constant("w1", &[6, 4, 1, 1])
            .constant("w2", &[6, 4, 3, 3])
            .constant("b2", &[6])
            .constant("scale", &[6, 1, 1])
            .constant("row", &[5])
            .constant_values("half", &[1], vec![0.5])
            .node(
                "stem",
                conv(3, 1, 1, 1),
                &["x", "w0", "b0"],
                "s",
                &[1, 4, 9, 9],
            )
            .node("relu", Op::Unary(UnaryOp::Relu), &["s"], "r", &[1, 4, 9, 9])
            .node("pool", max_pool(), &["r"], "p", &[1, 4, 5, 5])
            .node("proj", conv(1, 1, 0, 1), &["p", "w1"], "a", &[1, 6, 5, 5])
            .node("body", conv3x3(), &["p", "w2", "b2"], "c", &[1, 6, 5, 5])
            .node(
                "mul",
                Op::Binary(BinaryOp::Mul),
                &["c", "scale"],
                "m",
                &[1, 6, 5, 5],
            )
            .node(
                "row",
                Op::Binary(BinaryOp::Add),
                &["m", "row"],
                "m2",
                &[1, 6, 5, 5],
            )
            .node(
                "add",
                Op::Binary(BinaryOp::Add),
                &["a", "m2"],
                "y",
                &[1, 6, 5, 5],
            )
            .node(
                "half",
                Op::Binary(BinaryOp::Mul),
                &["y", "half"],
                "h",
                &[1, 6, 5, 5],
            )
            .node("gap", Op::GlobalAveragePool, &["h"], "g", &[1, 6, 1, 1])
            .node("flat", Op::Reshape, &["g"], "f", &[1, 6])
            .outputs(&["f", "p"])
    }

    #[test]
    fn a_residual_block_runs_channels_last_and_computes_the_same() {
        let before = residual_block();
        let (after, summary) = rewritten(&before);
        assert_eq!(
            summary,
            "10 nodes run channels last (2 layout transforms at the boundaries)"
        );
        assert_same_outputs(&before, &after, 1e-5);
        let convs: Vec<&ConvAttrs> = after
            .nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Conv(a) => Some(a),
                _ => None,
            })
            .collect();
        assert_eq!(convs.len(), 3);
        assert!(convs.iter().all(|a| a.channels_last));
        assert!(
            after
                .nodes
                .iter()
                .any(|n| matches!(&n.op, Op::MaxPool(a) if a.channels_last))
        );
        // The input goes in, the pool's output comes back for the graph
        // output: two Transposes; the global pool's [1,1,1,6] comes back by
        // a Reshape.
        assert_eq!(count(&after, "Transpose"), 2);
        assert_eq!(count(&after, "ReduceMean"), 1);
        assert_eq!(count(&after, "GlobalAveragePool"), 0);
        let stem = node(&after, "stem");
        assert_eq!(after.shape(&stem.inputs[0]), [1, 9, 9, 3]);
        assert_eq!(after.shape(&stem.inputs[1]), [3, 3, 3, 4]);
        assert_eq!(after.shape(&stem.outputs[0]), [1, 9, 9, 4]);
        let scale = node(&after, "mul");
        assert_eq!(after.shape(&scale.inputs[1]), [1, 1, 1, 6]);
    }

    #[test]
    fn pointwise_convolutions_channels_last_become_matrix_products() {
        let before = residual_block();
        let (last, _) = rewritten(&before);
        let (after, summary) = pointwise_convolutions_as_matmuls(last).expect("runs");
        check_graph(&after).expect("the invariants hold");
        assert!(summary.starts_with("rewrote 1 pointwise"), "{summary}");
        assert_same_outputs(&before, &after, 1e-5);
        let product = node(&after, "proj");
        assert!(matches!(product.op, Op::MatMul));
        assert_eq!(after.shape(&product.inputs[0]), [25, 4]);
        assert_eq!(after.shape(&product.inputs[1]), [4, 6]);
    }

    #[test]
    fn graphs_with_grouped_convolutions_keep_channels_first() {
        let before = Builder::new()
            .input("x", &[1, 4, 6, 6])
            .constant("w", &[4, 1, 3, 3])
            .node("dw", conv(3, 1, 1, 4), &["x", "w"], "y", &[1, 4, 6, 6])
            .node("relu", Op::Unary(UnaryOp::Relu), &["y"], "z", &[1, 4, 6, 6])
            .outputs(&["z"]);
        let (after, summary) = rewritten(&before);
        assert_eq!(
            summary,
            "kept channels first: 1 grouped convolutions run channels-first stencil rows"
        );
        assert_eq!(after.nodes, before.nodes);
    }

    #[test]
    fn elementwise_nodes_before_any_convolution_stay_channels_first() {
        let before = Builder::new()
            .input("x", &[1, 2, 5, 5])
            .input("bcast", &[1, 2, 1, 1])
            .constant("w", &[3, 2, 3, 3])
            .node("pre", Op::Unary(UnaryOp::Relu), &["x"], "r", &[1, 2, 5, 5])
            .node("conv", conv3x3(), &["r", "w"], "c", &[1, 3, 5, 5])
            .node(
                "clip",
                Op::Clip { min: 0.0, max: 1.0 },
                &["c"],
                "y",
                &[1, 3, 5, 5],
            )
            .node(
                "other",
                Op::Binary(BinaryOp::Add),
                &["r", "bcast"],
                "o",
                &[1, 2, 5, 5],
            )
            .outputs(&["y", "o"]);
        let (after, _) = rewritten(&before);
        assert_same_outputs(&before, &after, 1e-5);
        let pre = node(&after, "pre");
        assert_eq!(after.shape(&pre.outputs[0]), [1, 2, 5, 5]);
        let other = node(&after, "other");
        assert_eq!(other.inputs, ["r", "bcast"]);
        let clip = node(&after, "clip");
        assert_eq!(after.shape(&clip.outputs[0]), [1, 5, 5, 3]);
    }

    #[test]
    fn te_lowerings_channels_last_compute_the_same() {
        // Asymmetric padding, a stride and a dilation (no registry op), an
        // average pool whose divisor counts only the input, its last window
        // overhanging (ceil mode).
        let lopsided = Op::Conv(ConvAttrs {
            kernel: vec![3, 2],
            strides: vec![2, 1],
            pads_begin: vec![1, 0],
            pads_end: vec![0, 1],
            dilations: vec![1, 2],
            group: 1,
            channels_last: false,
        });
        let average = Op::AveragePool(PoolAttrs {
            kernel: vec![2, 3],
            strides: vec![1, 2],
            pads_begin: vec![1, 1],
            pads_end: vec![0, 0],
            dilations: vec![1, 1],
            ceil_mode: true,
            count_include_pad: false,
            channels_last: false,
        });
        let before = Builder::new()
            .input("x", &[2, 3, 7, 6])
            .constant("w", &[5, 3, 3, 2])
            .constant("b", &[5])
            .node("conv", lopsided, &["x", "w", "b"], "c", &[2, 5, 3, 5])
            .node("avg", average, &["c"], "y", &[2, 5, 3, 3])
            .outputs(&["y"]);
        let (after, summary) = rewritten(&before);
        assert_eq!(
            summary,
            "2 nodes run channels last (2 layout transforms at the boundaries)"
        );
        assert_same_outputs(&before, &after, 1e-5);
    }

    #[test]
    fn a_one_value_operand_made_channels_last_is_read_back() {
        // `b` holds one value, made channels last by its convolution: the
        // Add reads it as it is, so it comes back channels first (a Reshape).
        let before = Builder::new()
            .input("x", &[1, 2, 3, 3])
            .constant("wa", &[4, 2, 3, 3])
            .constant("wb", &[1, 2, 3, 3])
            .node("a", conv3x3(), &["x", "wa"], "a", &[1, 4, 3, 3])
            .node("b", conv(3, 1, 0, 1), &["x", "wb"], "b", &[1, 1, 1, 1])
            .node(
                "add",
                Op::Binary(BinaryOp::Add),
                &["a", "b"],
                "y",
                &[1, 4, 3, 3],
            )
            .outputs(&["y"]);
        let (after, _) = rewritten(&before);
        assert_same_outputs(&before, &after, 1e-5);
        let add = node(&after, "add");
        assert_eq!(add.inputs[1], "b");
        assert_eq!(count(&after, "Reshape"), 1);
    }

    #[test]
    fn constants_permute_like_their_tensors() {
        let value =
            HostTensor::from_f32(&[2, 3], (0..6).map(|v| v as f32).collect()).expect("a tensor");
        // [2, 3] is [1, 1, 2, 3] channels first: [1, 2, 3, 1] channels last.
        let last = permute_constant(&value, &layout::to_channels_last(4)).expect("f32");
        assert_eq!(last.shape(), [1, 2, 3, 1]);
        assert_eq!(last.as_f32(), value.as_f32());
        let chw = HostTensor::from_f32(&[1, 2, 2, 3], (0..12).map(|v| v as f32).collect())
            .expect("a tensor");
        let hwc = permute_constant(&chw, &layout::to_channels_last(4)).expect("f32");
        assert_eq!(hwc.shape(), [1, 2, 3, 2]);
        let want = [0., 6., 1., 7., 2., 8., 3., 9., 4., 10., 5., 11.];
        assert_eq!(hwc.as_f32(), Some(&want[..]));
        assert!(moves_only_unit_dims(&[1, 1, 1, 6], &[0, 3, 1, 2]));
        assert!(!moves_only_unit_dims(&[1, 2, 1, 6], &[0, 3, 1, 2]));
    }
}
