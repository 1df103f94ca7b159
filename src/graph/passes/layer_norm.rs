//! The exporters' layer normalisation recognised as one node: PyTorch and
//! TensorFlow write `LayerNorm` over the last axis as
//!
//! ```text
//! μ = ReduceMean(x) ; d = x − μ ; v = ReduceMean(d², or d·d) ; s = Sqrt(v + ε)
//! n = d / s ; [n · γ] ; [+ β]
//! ```
//!
//! (nine nodes, two reductions and a broadcast in between, so at least
//! four kernels after fusion). When every intermediate is read only inside
//! the pattern, it becomes one `LayerNormalization(x, γ, β)` node, as ONNX
//! Runtime's LayerNormFusion does.

use std::collections::HashMap;

use crate::graph::error::GraphError;
use crate::graph::ir::{BinaryOp, Graph, Node, Op, TensorInfo, UnaryOp};
use crate::te::HostTensor;

/// The pattern's nodes and what the fused node needs.
struct Found {
    /// Indices of the pattern's nodes.
    nodes: Vec<usize>,
    x: String,
    epsilon: f32,
    scale: Option<String>,
    bias: Option<String>,
    output: String,
}

/// Readers of every tensor (node indices), and whether it is a graph output.
struct Readers<'g> {
    of: HashMap<&'g str, Vec<usize>>,
    graph: &'g Graph,
}

impl<'g> Readers<'g> {
    fn new(graph: &'g Graph) -> Readers<'g> {
        let mut of: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            for input in &node.inputs {
                let readers = of.entry(input.as_str()).or_default();
                if readers.last() != Some(&i) {
                    readers.push(i);
                }
            }
        }
        Readers { of, graph }
    }

    /// The readers of `tensor` when it is an intermediate only they read.
    fn only(&self, tensor: &str) -> &[usize] {
        if self.graph.outputs.iter().any(|o| o == tensor) {
            return &[];
        }
        self.of.get(tensor).map_or(&[], Vec::as_slice)
    }

    /// The single reader of `tensor`, an intermediate.
    fn single(&self, tensor: &str) -> Option<usize> {
        match self.only(tensor) {
            [one] => Some(*one),
            _ => None,
        }
    }
}

fn output(node: &Node) -> Option<&str> {
    match node.outputs.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

/// Whether `node` is a ReduceMean over the last axis of its input, kept.
fn mean_over_last_axis(graph: &Graph, node: &Node) -> bool {
    let rank = node.inputs.first().map_or(0, |x| graph.shape(x).len());
    matches!(&node.op, Op::ReduceMean { axes, keepdims: true } if rank > 0 && axes == &[rank - 1])
}

/// The one-element constant among `node`'s two inputs other than `tensor`.
fn scalar_beside(graph: &Graph, node: &Node, tensor: &str) -> Option<f32> {
    let other = match node.inputs.as_slice() {
        [a, b] if a == tensor => b,
        [a, b] if b == tensor => a,
        _ => return None,
    };
    let c = graph.constant(other)?;
    (c.len() == 1).then(|| c.as_f32()?.first().copied())?
}

/// The constant among `node`'s two inputs other than `tensor`, when it
/// holds one value per element of the last axis (`[C]`, `[1, …, C]`).
fn per_feature_beside<'g>(graph: &'g Graph, node: &'g Node, tensor: &str) -> Option<&'g str> {
    let other = match node.inputs.as_slice() {
        [a, b] if a == tensor => b,
        [a, b] if b == tensor => a,
        _ => return None,
    };
    let c = graph.constant(other)?;
    let features = *graph.shape(tensor).last()?;
    let shape = graph.shape(other);
    let per_feature = shape.last() == Some(&features) && c.len() == features;
    per_feature.then_some(other.as_str())
}

fn binary(node: &Node, op: BinaryOp) -> bool {
    node.op == Op::Binary(op)
}

/// The pattern starting at the ReduceMean `m`, when all of it is there.
fn find(graph: &Graph, readers: &Readers, m: usize) -> Option<Found> {
    let nodes = &graph.nodes;
    let mean = &nodes[m];
    if !mean_over_last_axis(graph, mean) {
        return None;
    }
    let x = mean.inputs.first()?;
    let mu = output(mean)?;
    let sub = readers.single(mu)?;
    if !binary(&nodes[sub], BinaryOp::Sub) || nodes[sub].inputs != [x.clone(), mu.to_string()] {
        return None;
    }
    let d = output(&nodes[sub])?;
    let [r0, r1] = readers.only(d) else {
        return None;
    };
    let is_square = |i: usize| {
        let n = &nodes[i];
        (binary(n, BinaryOp::Pow) && scalar_beside(graph, n, d) == Some(2.0) && n.inputs[0] == d)
            || (binary(n, BinaryOp::Mul) && n.inputs == [d.to_string(), d.to_string()])
    };
    let (square, div) = if is_square(*r0) {
        (*r0, *r1)
    } else {
        (*r1, *r0)
    };
    if !is_square(square) || !binary(&nodes[div], BinaryOp::Div) || nodes[div].inputs[0] != d {
        return None;
    }
    let variance = readers.single(output(&nodes[square])?)?;
    if !mean_over_last_axis(graph, &nodes[variance]) {
        return None;
    }
    let v = output(&nodes[variance])?;
    let add_eps = readers.single(v)?;
    let epsilon = scalar_beside(graph, &nodes[add_eps], v)?;
    if !binary(&nodes[add_eps], BinaryOp::Add) {
        return None;
    }
    let sqrt = readers.single(output(&nodes[add_eps])?)?;
    if nodes[sqrt].op != Op::Unary(UnaryOp::Sqrt) {
        return None;
    }
    let s = output(&nodes[sqrt])?;
    if readers.single(s) != Some(div) || nodes[div].inputs[1] != s {
        return None;
    }
    let mut found = Found {
        nodes: vec![m, sub, square, variance, add_eps, sqrt, div],
        x: x.clone(),
        epsilon,
        scale: None,
        bias: None,
        output: output(&nodes[div])?.to_string(),
    };
    if let Some(mul) = readers.single(&found.output)
        && binary(&nodes[mul], BinaryOp::Mul)
        && let Some(gamma) = per_feature_beside(graph, &nodes[mul], &found.output)
    {
        found.scale = Some(gamma.to_string());
        found.nodes.push(mul);
        found.output = output(&nodes[mul])?.to_string();
    }
    if let Some(add) = readers.single(&found.output)
        && binary(&nodes[add], BinaryOp::Add)
        && let Some(beta) = per_feature_beside(graph, &nodes[add], &found.output)
    {
        found.bias = Some(beta.to_string());
        found.nodes.push(add);
        found.output = output(&nodes[add])?.to_string();
    }
    Some(found)
}

/// `name` as a `[C]` constant (a new one when its shape is another).
fn per_feature_constant(graph: &mut Graph, name: &str, node: &str, role: &str) -> Option<String> {
    let c = graph.constant(name)?.clone();
    if graph.shape(name).len() == 1 {
        return Some(name.to_string());
    }
    let values = c.as_f32()?.to_vec();
    let fresh = format!("{node}.{role}");
    let tensor = HostTensor::from_f32(&[values.len()], values).ok()?;
    graph
        .tensors
        .insert(fresh.clone(), TensorInfo::f32(&[tensor.len()]));
    graph.constants.insert(fresh.clone(), tensor);
    Some(fresh)
}

/// Replaces every complete pattern by one LayerNormalization node.
pub(super) fn recognise_layer_norm(mut graph: Graph) -> Result<(Graph, String), GraphError> {
    let mut replaced = 0usize;
    let mut m = 0;
    while m < graph.nodes.len() {
        let readers = Readers::new(&graph);
        let Some(found) = find(&graph, &readers, m) else {
            m += 1;
            continue;
        };
        let name = format!("{}.layer_norm", graph.nodes[m].name);
        let features = graph.shape(&found.x).last().copied().unwrap_or(1);
        let scale = match &found.scale {
            Some(gamma) => per_feature_constant(&mut graph, gamma, &name, "scale"),
            None => {
                let fresh = format!("{name}.scale");
                let ones = HostTensor::from_f32(&[features], vec![1.0; features]).ok();
                ones.map(|t| {
                    graph
                        .tensors
                        .insert(fresh.clone(), TensorInfo::f32(&[features]));
                    graph.constants.insert(fresh.clone(), t);
                    fresh
                })
            }
        };
        let bias = match &found.bias {
            Some(beta) => per_feature_constant(&mut graph, beta, &name, "bias"),
            None => Some(String::new()),
        };
        let (Some(scale), Some(bias)) = (scale, bias) else {
            m += 1;
            continue;
        };
        let rank = graph.shape(&found.x).len();
        let mut inputs = vec![found.x.clone(), scale];
        if !bias.is_empty() {
            inputs.push(bias);
        }
        let node = Node {
            name,
            op: Op::LayerNormalization {
                axis: rank - 1,
                epsilon: found.epsilon,
            },
            inputs,
            outputs: vec![found.output.clone()],
        };
        let last = found.nodes.iter().copied().max().unwrap_or(m);
        graph.nodes[last] = node;
        let mut gone: Vec<usize> = found.nodes.into_iter().filter(|&i| i != last).collect();
        gone.sort_unstable();
        for i in gone.into_iter().rev() {
            graph.nodes.remove(i);
        }
        replaced += 1;
    }
    Ok((
        graph,
        format!("replaced {replaced} ReduceMean/Sub/Pow/Sqrt/Div patterns by LayerNormalization"),
    ))
}

#[cfg(test)]
mod tests {
    use super::recognise_layer_norm;
    use crate::graph::ir::{BinaryOp, Graph, Op, UnaryOp};
    use crate::graph::passes::test_support::{Builder, assert_same_outputs, count};

    /// The exporters' pattern over `[2, 3, 8]`; `square_by_mul` writes d·d
    /// instead of Pow(d, 2); `affine` adds ·γ and +β (γ as `[1, 1, 8]`).
    fn pattern(square_by_mul: bool, affine: bool) -> Builder {
        let mean = || Op::ReduceMean {
            axes: vec![2],
            keepdims: true,
        };
        let mut b = Builder::new();
        b.input("x", &[2, 3, 8])
            .constant_values("eps", &[], vec![1e-5])
            .constant_values("two", &[], vec![2.0])
            .constant("gamma", &[1, 1, 8])
            .constant("beta", &[8])
            .node("mean", mean(), &["x"], "mu", &[2, 3, 1])
            .node(
                "sub",
                Op::Binary(BinaryOp::Sub),
                &["x", "mu"],
                "d",
                &[2, 3, 8],
            );
        if square_by_mul {
            b.node(
                "sq",
                Op::Binary(BinaryOp::Mul),
                &["d", "d"],
                "sq",
                &[2, 3, 8],
            );
        } else {
            b.node(
                "sq",
                Op::Binary(BinaryOp::Pow),
                &["d", "two"],
                "sq",
                &[2, 3, 8],
            );
        }
        b.node("var", mean(), &["sq"], "v", &[2, 3, 1])
            .node(
                "eps",
                Op::Binary(BinaryOp::Add),
                &["v", "eps"],
                "ve",
                &[2, 3, 1],
            )
            .node("sqrt", Op::Unary(UnaryOp::Sqrt), &["ve"], "s", &[2, 3, 1])
            .node(
                "div",
                Op::Binary(BinaryOp::Div),
                &["d", "s"],
                "n",
                &[2, 3, 8],
            );
        if affine {
            b.node(
                "scale",
                Op::Binary(BinaryOp::Mul),
                &["n", "gamma"],
                "ns",
                &[2, 3, 8],
            )
            .node(
                "shift",
                Op::Binary(BinaryOp::Add),
                &["ns", "beta"],
                "y",
                &[2, 3, 8],
            );
        }
        b
    }

    fn recognised(graph: &Graph) -> Graph {
        recognise_layer_norm(graph.clone()).expect("runs").0
    }

    #[test]
    fn the_pattern_becomes_one_layer_normalization() {
        for (by_mul, affine) in [(false, true), (true, true), (false, false)] {
            let output = if affine { "y" } else { "n" };
            let graph = pattern(by_mul, affine).outputs(&[output]);
            let after = recognised(&graph);
            assert_eq!(after.nodes.len(), 1, "{by_mul} {affine}");
            assert_eq!(count(&after, "LayerNormalization"), 1);
            let Op::LayerNormalization { axis, epsilon } = after.nodes[0].op else {
                panic!("a LayerNormalization");
            };
            assert_eq!((axis, epsilon), (2, 1e-5));
            assert_eq!(after.nodes[0].outputs, [output]);
            assert_same_outputs(&graph, &after, 1e-5);
        }
    }

    #[test]
    fn a_pattern_whose_intermediates_are_read_elsewhere_stays() {
        // The centred values are also a graph output.
        let graph = pattern(false, true).outputs(&["y", "d"]);
        assert_eq!(recognised(&graph).nodes.len(), graph.nodes.len());
        // The variance is read by another node.
        let mut b = pattern(false, true);
        b.node("extra", Op::Unary(UnaryOp::Sqrt), &["v"], "e", &[2, 3, 1]);
        let graph = b.outputs(&["y", "e"]);
        assert_eq!(recognised(&graph).nodes.len(), graph.nodes.len());
        // A mean over another axis is no layer norm.
        let mut b = pattern(false, true);
        b.graph.nodes[0].op = Op::ReduceMean {
            axes: vec![1],
            keepdims: true,
        };
        b.graph.tensors.get_mut("mu").expect("mu").shape = vec![2, 1, 8];
        let graph = b.outputs(&["y"]);
        assert_eq!(recognised(&graph).nodes.len(), graph.nodes.len());
    }
}
