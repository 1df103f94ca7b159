//! Pointwise convolutions as matrix products: a Conv with a 1×1 kernel
//! (strides and dilations 1, no padding, one group) on a batch of one, with
//! a constant weight `W[K, C, 1, 1]` (and constant bias `b[K]`), is the
//! product `W[K, C] · X[C, H·W]` of the input seen as a matrix (with any
//! number of spatial dimensions, `H·W` standing for their product):
//!
//! ```text
//! x[1,C,H,W] ─Conv(W, b)─► y[1,K,H,W] ─Clip─► … ─Add(skip)─► z
//!   becomes
//! x ─Reshape─► [C,HW] ─MatMul(W[K,C])─► [K,HW] ─Add(b[K,1])─► ─Clip─► …
//!   ─Add(skip viewed as [K,HW])─► ─Reshape─► z[1,K,H,W]
//! ```
//!
//! The elementwise nodes that read the result alone move to the `[K, H·W]`
//! view with it when each of their other operands is one value, a constant
//! with one value a channel, or a tensor of the result's full shape (a
//! residual skip, viewed as `[K, H·W]` by a Reshape). A Reshape is an alias
//! (no kernel, no copy), so the fused task becomes a `matmul+Add+Clip`
//! whose micro-kernel runs along the whole feature map, instead of a
//! convolution's along one output row, and the tuned GEMM path applies.
//!
//! A channels-last convolution (`X[1,H,W,C]`, `W[1,1,C,K]`) becomes the
//! product the other way round, `X[H·W, C] · W[C, K]`, its bias `[1, K]`
//! and its view `[H·W, K]`.

use std::collections::BTreeMap;

use crate::graph::error::GraphError;
use crate::graph::ir::{BinaryOp, Graph, Node, Op, TensorInfo, layout};
use crate::te::HostTensor;

use super::broadcast::broadcasts_per_channel;
use super::names::FreshNames;

/// Rewrites every pointwise convolution of `graph` (and the elementwise
/// nodes only its result feeds) as a matrix product.
pub(super) fn pointwise_convolutions_as_matmuls(
    mut graph: Graph,
) -> Result<(Graph, String), GraphError> {
    let (mut convolutions, mut followers) = (0usize, 0usize);
    let mut i = 0;
    while i < graph.nodes.len() {
        if let Some(rewrite) = plan(&graph, i) {
            followers += rewrite.followers;
            rewrite.apply(&mut graph);
            convolutions += 1;
        }
        // Node i is now the input's Reshape (or an untouched node); the
        // rewritten nodes after it are no convolutions.
        i += 1;
    }
    Ok((
        graph,
        format!(
            "rewrote {convolutions} pointwise convolutions as matrix products ({followers} elementwise followers moved)"
        ),
    ))
}

/// Everything one conversion changes, built before anything changes.
struct Rewrite {
    /// For each original node index replaced (ascending), its replacements.
    replaced: Vec<(usize, Vec<Node>)>,
    /// The new constants (and so tensors).
    constants: Vec<(String, HostTensor)>,
    /// The new tensors that nodes produce.
    tensors: Vec<(String, TensorInfo)>,
    /// The tensors no node produces any more.
    removed: Vec<String>,
    /// How many elementwise nodes moved to the matrix view.
    followers: usize,
}

impl Rewrite {
    /// Applies the rewrite: nothing here can fail.
    fn apply(self, graph: &mut Graph) {
        for (at, nodes) in self.replaced.into_iter().rev() {
            graph.nodes.splice(at..=at, nodes);
        }
        for name in self.removed {
            graph.tensors.remove(&name);
        }
        for (name, info) in self.tensors {
            graph.tensors.insert(name, info);
        }
        for (name, value) in self.constants {
            graph
                .tensors
                .insert(name.clone(), TensorInfo::f32(value.shape()));
            graph.constants.insert(name, value);
        }
    }
}

/// `shape` without its leading 1s: two shapes equal so hold the same
/// elements in the same order.
fn without_leading_ones(shape: &[usize]) -> &[usize] {
    let first = shape.iter().position(|&e| e != 1).unwrap_or(shape.len());
    &shape[first..]
}

/// The f32 constant `value`'s elements under `shape` (as many).
fn reshaped(value: &HostTensor, shape: &[usize]) -> Option<HostTensor> {
    value.as_f32()?;
    HostTensor::new(shape, value.data().clone()).ok()
}

/// How one operand of a follower, other than the chain's tensor, reads in
/// the matrix view.
enum Operand {
    /// Read as it is (one value).
    Same(String),
    /// A new constant with these values, under this shape.
    Constant(HostTensor),
    /// A Reshape of this runtime tensor to the view's shape.
    View(String),
}

/// The rewrite of the Conv at node `conv`, when it is a pointwise one.
fn plan(graph: &Graph, conv: usize) -> Option<Rewrite> {
    let node = &graph.nodes[conv];
    let Op::Conv(attrs) = &node.op else {
        return None;
    };
    let pointwise = attrs.kernel.iter().all(|&k| k == 1)
        && attrs.strides.iter().all(|&s| s == 1)
        && attrs
            .pads_begin
            .iter()
            .chain(&attrs.pads_end)
            .all(|&p| p == 0)
        && attrs.dilations.iter().all(|&d| d == 1)
        && attrs.group == 1;
    let [y] = node.outputs.as_slice() else {
        return None;
    };
    if !pointwise || !(2..=3).contains(&node.inputs.len()) {
        return None;
    }
    let x = &node.inputs[0];
    if graph.constant(x).is_some() {
        return None;
    }
    let channels_last = attrs.channels_last;
    let (x_shape, y_shape) = (graph.shape(x), graph.shape(y));
    let weight = graph.constant(&node.inputs[1])?;
    let (x_first, y_first) = if channels_last {
        (
            layout::channels_first(x_shape),
            layout::channels_first(y_shape),
        )
    } else {
        (x_shape.to_vec(), y_shape.to_vec())
    };
    let &[1, c, ref x_spatial @ ..] = x_first.as_slice() else {
        return None;
    };
    let &[1, k, ref y_spatial @ ..] = y_first.as_slice() else {
        return None;
    };
    let weight_shape: Vec<usize> = if channels_last {
        std::iter::repeat_n(1, x_spatial.len())
            .chain([c, k])
            .collect()
    } else {
        [k, c]
            .into_iter()
            .chain(std::iter::repeat_n(1, x_spatial.len()))
            .collect()
    };
    if x_spatial.is_empty() || x_spatial != y_spatial || weight.shape() != weight_shape {
        return None;
    }
    let bias = match node.inputs.get(2) {
        Some(b) => {
            let value = graph.constant(b)?;
            if value.shape() != [k] {
                return None;
            }
            Some(value)
        }
        None => None,
    };
    let hw: usize = x_spatial.iter().product();
    // Channels first: `W[K, C] · X[C, HW]`; channels last: `X[HW, C] · W[C, K]`.
    let (view, x_matrix, w_matrix, per_channel) = if channels_last {
        ([hw, k], [hw, c], [c, k], [1, k])
    } else {
        ([k, hw], [c, hw], [k, c], [k, 1])
    };

    let mut names = FreshNames::new(graph);
    let mut constants = Vec::new();
    let mut tensors = Vec::new();
    let new_constant = |names: &mut FreshNames,
                        constants: &mut Vec<(String, HostTensor)>,
                        base: &str,
                        value: &HostTensor,
                        shape: &[usize]|
     -> Option<String> {
        let value = reshaped(value, shape)?;
        let name = names.tensor(base);
        constants.push((name.clone(), value));
        Some(name)
    };

    // The product, and the bias.
    let matrix_weight = new_constant(
        &mut names,
        &mut constants,
        &format!("{}.matrix_weight", node.name),
        weight,
        &w_matrix,
    )?;
    let x_view = names.tensor(&format!("{x}.as_matrix"));
    tensors.push((x_view.clone(), TensorInfo::f32(&x_matrix)));
    let product = names.tensor(&format!("{y}.as_matrix"));
    tensors.push((product.clone(), TensorInfo::f32(&view)));
    let mut at_conv = vec![
        Node {
            name: names.node(&format!("{}.input_as_matrix", node.name)),
            op: Op::Reshape,
            inputs: vec![x.clone()],
            outputs: vec![x_view.clone()],
        },
        Node {
            // The product keeps the convolution's name (and so its group's).
            name: node.name.clone(),
            op: Op::MatMul,
            inputs: if channels_last {
                vec![x_view, matrix_weight]
            } else {
                vec![matrix_weight, x_view]
            },
            outputs: vec![product.clone()],
        },
    ];
    let mut current = product;
    if let Some(bias) = bias {
        let bias_name = new_constant(
            &mut names,
            &mut constants,
            &format!("{}.matrix_bias", node.name),
            bias,
            &per_channel,
        )?;
        let biased = names.tensor(&format!("{y}.biased"));
        tensors.push((biased.clone(), TensorInfo::f32(&view)));
        at_conv.push(Node {
            name: names.node(&format!("{}.bias", node.name)),
            op: Op::Binary(BinaryOp::Add),
            inputs: vec![current, bias_name],
            outputs: vec![biased.clone()],
        });
        current = biased;
    }
    let mut replaced = vec![(conv, at_conv)];

    // The elementwise nodes only the result feeds, in a chain.
    let mut reads: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (j, n) in graph.nodes.iter().enumerate() {
        for input in &n.inputs {
            reads.entry(input.as_str()).or_default().push(j);
        }
    }
    let mut last = y.clone();
    let mut removed = Vec::new();
    let mut followers = 0;
    loop {
        if graph.outputs.contains(&last) {
            break;
        }
        let Some(&[j]) = reads.get(last.as_str()).map(Vec::as_slice) else {
            break;
        };
        let follower = &graph.nodes[j];
        let Some(operands) =
            follower_operands(graph, follower, &last, y_shape, &view, channels_last)
        else {
            break;
        };
        let [out] = follower.outputs.as_slice() else {
            break;
        };
        let mut nodes = Vec::new();
        let mut inputs = Vec::with_capacity(follower.inputs.len());
        for (input, operand) in follower.inputs.iter().zip(operands) {
            inputs.push(match operand {
                None => current.clone(),
                Some(Operand::Same(name)) => name,
                Some(Operand::Constant(value)) => {
                    let name = names.tensor(&format!("{input}.as_matrix"));
                    constants.push((name.clone(), value));
                    name
                }
                Some(Operand::View(tensor)) => {
                    let name = names.tensor(&format!("{tensor}.as_matrix"));
                    tensors.push((name.clone(), TensorInfo::f32(&view)));
                    nodes.push(Node {
                        name: names.node(&format!("{}.{tensor}_as_matrix", follower.name)),
                        op: Op::Reshape,
                        inputs: vec![tensor],
                        outputs: vec![name.clone()],
                    });
                    name
                }
            });
        }
        let result = names.tensor(&format!("{out}.as_matrix"));
        tensors.push((result.clone(), TensorInfo::f32(&view)));
        nodes.push(Node {
            name: follower.name.clone(),
            op: follower.op.clone(),
            inputs,
            outputs: vec![result.clone()],
        });
        replaced.push((j, nodes));
        removed.push(last);
        last = out.clone();
        current = result;
        followers += 1;
    }

    // One Reshape back, to the last tensor under its own name and shape.
    let back = Node {
        name: names.node(&format!("{}.matrix_as_{last}", node.name)),
        op: Op::Reshape,
        inputs: vec![current],
        outputs: vec![last],
    };
    replaced.last_mut()?.1.push(back);
    Some(Rewrite {
        replaced,
        constants,
        tensors,
        removed,
        followers,
    })
}

/// Whether a constant of `shape` holds one value per channel of a
/// channels-last tensor of shape `target`: every dimension 1 but the last,
/// which is the target's last (leading dimensions may be missing).
fn broadcasts_along_last(shape: &[usize], target: &[usize]) -> bool {
    match (shape.split_last(), target.last()) {
        (Some((&channels, rest)), Some(&want)) => {
            channels == want && shape.len() <= target.len() && rest.iter().all(|&e| e == 1)
        }
        _ => false,
    }
}

/// For each input of `follower` (which reads `tensor`, of shape `full`,
/// once): `None` for `tensor` itself, else how the operand reads in the
/// `view` (`[K, H·W]`, or `[H·W, K]` channels last). `None` altogether
/// when `follower` cannot move.
fn follower_operands(
    graph: &Graph,
    follower: &Node,
    tensor: &str,
    full: &[usize],
    view: &[usize; 2],
    channels_last: bool,
) -> Option<Vec<Option<Operand>>> {
    let elementwise = matches!(
        follower.op,
        Op::Unary(_)
            | Op::Clip { .. }
            | Op::LeakyRelu { .. }
            | Op::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div)
            | Op::Sum
    );
    let [out] = follower.outputs.as_slice() else {
        return None;
    };
    if !elementwise || graph.shape(out) != full {
        return None;
    }
    let whole = without_leading_ones(full);
    follower
        .inputs
        .iter()
        .map(|input| {
            if input == tensor {
                return Some(None);
            }
            let shape = graph.shape(input);
            let elements: usize = shape.iter().product();
            let operand = match graph.constant(input) {
                // One value broadcasts against any shape; a view needs at
                // most two dimensions not to widen the result's rank.
                _ if elements == 1 && shape.len() <= 2 => Operand::Same(input.clone()),
                Some(value) if elements == 1 => Operand::Constant(reshaped(value, &[1])?),
                Some(value) if channels_last && broadcasts_along_last(shape, full) => {
                    Operand::Constant(reshaped(value, &[1, view[1]])?)
                }
                Some(value) if !channels_last && broadcasts_per_channel(shape, full) => {
                    Operand::Constant(reshaped(value, &[view[0], 1])?)
                }
                Some(value) if without_leading_ones(shape) == whole => {
                    Operand::Constant(reshaped(value, view)?)
                }
                None if without_leading_ones(shape) == whole => Operand::View(input.clone()),
                _ => return None,
            };
            Some(Some(operand))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::check_graph;
    use super::super::test_support::{Builder, assert_same_outputs, conv, conv3x3, count, node};
    use super::*;
    use crate::graph::ir::UnaryOp;

    /// A 1×1 convolution with these strides, padding and groups.
    fn conv1x1(stride: i64, pad: i64, group: i64) -> Op {
        conv(1, stride, pad, group)
    }

    fn rewritten(graph: &Graph) -> (Graph, String) {
        let (after, summary) = pointwise_convolutions_as_matmuls(graph.clone()).expect("runs");
        check_graph(&after).expect("the invariants hold");
        (after, summary)
    }

    #[test]
    fn a_pointwise_convolution_and_its_followers_become_a_matrix_product() {
        const FULL: &[usize] = &[1, 4, 3, 5];
        let before = Builder::new()
            .input("x", &[1, 3, 3, 5])
            .input("skip", FULL)
            .constant("w", &[4, 3, 1, 1])
            .constant("b", &[4])
            .constant("s", &[1, 4, 1, 1])
            .constant_values("u", &[1, 1, 1, 1], vec![-1.5])
            .constant("f", FULL)
            .node("conv", conv1x1(1, 0, 1), &["x", "w", "b"], "c", FULL)
            .node("clip", Op::Clip { min: 0.0, max: 0.9 }, &["c"], "c1", FULL)
            .node("scale", Op::Binary(BinaryOp::Mul), &["c1", "s"], "c2", FULL)
            .node("neg", Op::Binary(BinaryOp::Mul), &["u", "c2"], "c3", FULL)
            .node("sub", Op::Binary(BinaryOp::Sub), &["f", "c3"], "c4", FULL)
            .node("sum", Op::Sum, &["skip", "c4"], "c5", FULL)
            .node("relu", Op::Unary(UnaryOp::Relu), &["c5"], "y", FULL)
            .outputs(&["y"]);
        let (after, summary) = rewritten(&before);
        assert_eq!(
            summary,
            "rewrote 1 pointwise convolutions as matrix products (6 elementwise followers moved)"
        );
        assert_same_outputs(&before, &after, 1e-5);
        assert_eq!(count(&after, "Conv"), 0);
        assert_eq!(count(&after, "MatMul"), 1);
        // The input's view, the skip's view and the way back.
        assert_eq!(count(&after, "Reshape"), 3, "{:#?}", after.nodes);
        let product = node(&after, "conv");
        assert_eq!(after.shape(&product.inputs[0]), [4, 3]);
        assert_eq!(after.shape(&product.inputs[1]), [3, 15]);
        for name in ["conv.bias", "clip", "scale", "neg", "sub", "sum", "relu"] {
            let n = node(&after, name);
            assert_eq!(after.shape(&n.outputs[0]), [4, 15], "{name}");
            for input in &n.inputs {
                let shape = after.shape(input);
                assert!(shape.len() <= 2, "{name} reads '{input}' as {shape:?}");
            }
        }
        assert_eq!(after.shape(&node(&after, "conv.bias").inputs[1]), [4, 1]);
        assert_eq!(after.shape(&node(&after, "scale").inputs[1]), [4, 1]);
        // The constant stays on the left of the Sub, as a [K, H·W] matrix.
        let sub = node(&after, "sub");
        assert!(after.constant(&sub.inputs[0]).is_some());
        assert_eq!(after.shape(&sub.inputs[0]), [4, 15]);
        assert!(after.constant(&sub.inputs[1]).is_none());
        // One Reshape back to the original output; its readers untouched.
        let last = after.nodes.last().expect("nodes");
        assert_eq!(
            (last.op.name(), last.outputs.as_slice()),
            ("Reshape", &["y".to_string()][..])
        );
        assert_eq!(after.shape("y"), FULL);
        for gone in ["c", "c1", "c2", "c3", "c4", "c5"] {
            assert!(!after.tensors.contains_key(gone), "{gone}");
        }
    }

    /// `x → conv 1×1 (no bias) → Relu → r → Exp → y`, `r` also read by
    /// `extra` when `read_twice`.
    fn chain(read_twice: bool) -> Builder {
        const FULL: &[usize] = &[1, 2, 4, 4];
        let mut b = Builder::new();
        b.input("x", &[1, 3, 4, 4])
            .constant("w", &[2, 3, 1, 1])
            .node("conv", conv1x1(1, 0, 1), &["x", "w"], "c", FULL)
            .node("relu", Op::Unary(UnaryOp::Relu), &["c"], "r", FULL)
            .node("exp", Op::Unary(UnaryOp::Exp), &["r"], "y", FULL);
        if read_twice {
            b.node("extra", Op::Unary(UnaryOp::Neg), &["r"], "e", FULL);
        }
        b
    }

    #[test]
    fn the_chain_stops_at_a_graph_output_or_a_tensor_read_twice() {
        for (graph, moved) in [
            // r is a graph output: Relu moves, Exp stays.
            (chain(false).outputs(&["y", "r"]), "(1 elementwise"),
            // r is read twice: the same.
            (chain(true).outputs(&["y", "e"]), "(1 elementwise"),
            // The result itself is a graph output: nothing moves.
            (chain(false).outputs(&["y", "c"]), "(0 elementwise"),
        ] {
            let (after, summary) = rewritten(&graph);
            assert!(
                summary.contains("rewrote 1 pointwise") && summary.contains(moved),
                "{summary}"
            );
            assert_same_outputs(&graph, &after, 1e-5);
            assert_eq!(node(&after, "exp").inputs, ["r"]);
            assert_eq!(after.shape("r"), [1, 2, 4, 4]);
            assert_eq!(count(&after, "Reshape"), 2);
        }
        // A node reading the result twice does not move either.
        let graph = Builder::new()
            .input("x", &[1, 3, 4, 4])
            .constant("w", &[2, 3, 1, 1])
            .node("conv", conv1x1(1, 0, 1), &["x", "w"], "c", &[1, 2, 4, 4])
            .node(
                "square",
                Op::Binary(BinaryOp::Mul),
                &["c", "c"],
                "y",
                &[1, 2, 4, 4],
            )
            .outputs(&["y"]);
        let (after, summary) = rewritten(&graph);
        assert!(summary.contains("(0 elementwise"), "{summary}");
        assert_eq!(node(&after, "square").inputs, ["c", "c"]);
        assert_same_outputs(&graph, &after, 1e-5);
    }

    #[test]
    fn other_convolutions_are_left_alone() {
        let single = |op: Op, x: &[usize], w: &[usize], y: &[usize], runtime_weight: bool| {
            let mut b = Builder::new();
            b.input("x", x);
            if runtime_weight {
                b.input("w", w);
            } else {
                b.constant("w", w);
            }
            b.node("conv", op, &["x", "w"], "c", y)
                .node("relu", Op::Unary(UnaryOp::Relu), &["c"], "y", y)
                .outputs(&["y"])
        };
        let cases = [
            (
                "strided",
                single(
                    conv1x1(2, 0, 1),
                    &[1, 3, 4, 4],
                    &[2, 3, 1, 1],
                    &[1, 2, 2, 2],
                    false,
                ),
            ),
            (
                "3×3",
                single(
                    conv3x3(),
                    &[1, 3, 4, 4],
                    &[2, 3, 3, 3],
                    &[1, 2, 4, 4],
                    false,
                ),
            ),
            (
                "padded",
                single(
                    conv1x1(1, 1, 1),
                    &[1, 3, 4, 4],
                    &[2, 3, 1, 1],
                    &[1, 2, 6, 6],
                    false,
                ),
            ),
            (
                "batch 2",
                single(
                    conv1x1(1, 0, 1),
                    &[2, 3, 4, 4],
                    &[2, 3, 1, 1],
                    &[2, 2, 4, 4],
                    false,
                ),
            ),
            (
                "grouped",
                single(
                    conv1x1(1, 0, 3),
                    &[1, 3, 4, 4],
                    &[3, 1, 1, 1],
                    &[1, 3, 4, 4],
                    false,
                ),
            ),
            (
                "runtime weight",
                single(
                    conv1x1(1, 0, 1),
                    &[1, 3, 4, 4],
                    &[2, 3, 1, 1],
                    &[1, 2, 4, 4],
                    true,
                ),
            ),
        ];
        for (what, graph) in cases {
            let (after, summary) = rewritten(&graph);
            assert!(summary.starts_with("rewrote 0 "), "{what}: {summary}");
            assert_eq!(after.nodes, graph.nodes, "{what}");
            assert_eq!(after.tensors, graph.tensors, "{what}");
            assert_eq!(
                after.constants.keys().collect::<Vec<_>>(),
                graph.constants.keys().collect::<Vec<_>>(),
                "{what}"
            );
            assert_same_outputs(&graph, &after, 0.0);
        }
    }
}
