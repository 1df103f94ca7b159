//! BatchNormalization folded into the convolution it follows: a Conv with
//! constant weight (and bias) whose output only a BatchNormalization with
//! constant parameters reads becomes one Conv with
//! `W'[k] = W[k]·s_k`, `b'_k = (b_k − mean_k)·s_k + β_k`, where
//! `s_k = γ_k / √(var_k + ε)`. The Caffe2 form of the same thing — the
//! Conv's output multiplied, or added to, by a per-channel constant — folds
//! the same way (`s_k` = the factor; or the addend into the bias).

use crate::graph::error::GraphError;
use crate::graph::ir::{BinaryOp, Graph, Node, Op, TensorInfo};
use crate::te::HostTensor;

use super::broadcast::broadcasts_per_channel;
use super::names::FreshNames;

/// A per-output-channel affine map `y·scale + shift`.
struct Affine {
    scale: Vec<f64>,
    shift: Vec<f64>,
}

/// Which kind of reader was folded.
#[derive(Clone, Copy)]
enum Folded {
    BatchNorm,
    Mul,
    Add,
}

/// Folds every BatchNormalization, per-channel Mul and per-channel Add
/// that is the only reader of a constant-weight convolution into it.
pub(super) fn fold_batch_norm(mut after: Graph) -> Result<(Graph, String), GraphError> {
    let (mut batch_norms, mut muls, mut adds) = (0usize, 0usize, 0usize);
    let mut i = 0;
    while i < after.nodes.len() {
        match fold_reader_of(&mut after, i) {
            Some(Folded::BatchNorm) => batch_norms += 1,
            Some(Folded::Mul) => muls += 1,
            Some(Folded::Add) => adds += 1,
            // Nothing to fold into node i: go on. After a fold, node i is
            // the new convolution, which may fold its next reader too.
            None => i += 1,
        }
    }
    Ok((
        after,
        format!(
            "folded {batch_norms} BatchNormalizations, {muls} per-channel Muls and {adds} per-channel Adds into convolutions"
        ),
    ))
}

/// Folds the only reader of node `conv` into it when `conv` is a Conv
/// with constant weight and bias and the reader is a foldable per-channel
/// affine map; rewrites `graph` in place and says what it folded.
fn fold_reader_of(graph: &mut Graph, conv: usize) -> Option<Folded> {
    let node = &graph.nodes[conv];
    if !matches!(node.op, Op::Conv(_)) || node.outputs.len() != 1 {
        return None;
    }
    let y = &node.outputs[0];
    let weight = graph.constant(node.inputs.get(1)?)?.as_f32()?;
    let channels = *graph.shape(y).get(1)?;
    let bias: Vec<f64> = match node.inputs.get(2) {
        Some(b) => graph
            .constant(b)?
            .as_f32()?
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
        None => vec![0.0; channels],
    };
    if graph.outputs.contains(y) || bias.len() != channels || weight.len() % channels != 0 {
        return None;
    }
    let readers: Vec<usize> = (0..graph.nodes.len())
        .filter(|&j| graph.nodes[j].inputs.contains(y))
        .collect();
    let [reader] = readers.as_slice() else {
        return None;
    };
    let (affine, kind) = affine_of(graph, &graph.nodes[*reader], y, channels)?;
    let per_channel = weight.len() / channels;
    let new_weight: Vec<f32> = weight
        .iter()
        .enumerate()
        .map(|(p, &w)| (f64::from(w) * affine.scale[p / per_channel]) as f32)
        .collect();
    let new_bias: Vec<f32> = (0..channels)
        .map(|k| (bias[k] * affine.scale[k] + affine.shift[k]) as f32)
        .collect();
    let weight_shape = graph.shape(&node.inputs[1]).to_vec();
    let mut names = FreshNames::new(graph);
    let weight_name = names.tensor(&format!("{}.folded_weight", node.name));
    let bias_name = names.tensor(&format!("{}.folded_bias", node.name));
    let weight_value = HostTensor::from_f32(&weight_shape, new_weight).ok()?;
    let bias_value = HostTensor::from_f32(&[channels], new_bias).ok()?;
    let reader = graph.nodes.remove(*reader);
    let folded = Node {
        name: graph.nodes[conv].name.clone(),
        op: graph.nodes[conv].op.clone(),
        inputs: vec![
            graph.nodes[conv].inputs[0].clone(),
            weight_name.clone(),
            bias_name.clone(),
        ],
        outputs: reader.outputs,
    };
    let old_output = std::mem::replace(&mut graph.nodes[conv], folded);
    for (name, value) in [(weight_name, weight_value), (bias_name, bias_value)] {
        graph
            .tensors
            .insert(name.clone(), TensorInfo::f32(value.shape()));
        graph.constants.insert(name, value);
    }
    graph.tensors.remove(&old_output.outputs[0]);
    Some(kind)
}

/// The per-channel affine map `reader` applies to `y` (of `channels`
/// channels on axis 1), when its parameters are constants.
fn affine_of(graph: &Graph, reader: &Node, y: &str, channels: usize) -> Option<(Affine, Folded)> {
    let floats = |name: &String| -> Option<Vec<f64>> {
        let values = graph.constant(name)?.as_f32()?;
        Some(values.iter().map(|&v| f64::from(v)).collect())
    };
    match &reader.op {
        Op::BatchNormalization { epsilon } if reader.inputs.first()? == y => {
            let params: Vec<Vec<f64>> = reader.inputs[1..]
                .iter()
                .map(floats)
                .collect::<Option<_>>()?;
            let [gamma, beta, mean, var] = params.as_slice() else {
                return None;
            };
            if params.iter().any(|p| p.len() != channels) {
                return None;
            }
            let scale: Vec<f64> = (0..channels)
                .map(|k| gamma[k] / (var[k] + f64::from(*epsilon)).sqrt())
                .collect();
            let shift = (0..channels)
                .map(|k| beta[k] - mean[k] * scale[k])
                .collect();
            Some((Affine { scale, shift }, Folded::BatchNorm))
        }
        Op::Binary(op @ (BinaryOp::Mul | BinaryOp::Add)) if reader.inputs.len() == 2 => {
            let other = reader.inputs.iter().find(|i| *i != y)?;
            let same_shape = graph.shape(&reader.outputs[0]) == graph.shape(y);
            let c = per_channel(graph, other, y, channels)?;
            if !same_shape {
                return None;
            }
            Some(match op {
                BinaryOp::Mul => (
                    Affine {
                        scale: c,
                        shift: vec![0.0; channels],
                    },
                    Folded::Mul,
                ),
                _ => (
                    Affine {
                        scale: vec![1.0; channels],
                        shift: c,
                    },
                    Folded::Add,
                ),
            })
        }
        _ => None,
    }
}

/// The values of constant `name` per channel of `y` (axis 1) when it
/// broadcasts against `y` as one value, or one value a channel.
fn per_channel(graph: &Graph, name: &str, y: &str, channels: usize) -> Option<Vec<f64>> {
    let values = graph.constant(name)?.as_f32()?;
    if values.len() == 1 {
        return Some(vec![f64::from(values[0]); channels]);
    }
    if !broadcasts_per_channel(graph.shape(name), graph.shape(y)) || values.len() != channels {
        return None;
    }
    Some(values.iter().map(|&v| f64::from(v)).collect())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{Builder, assert_same_outputs, conv3x3, count};
    use super::*;
    use crate::graph::ir::UnaryOp;

    /// `x → Conv(w[, b]) → BatchNormalization → Relu`.
    fn conv_bn_relu(bias: bool) -> Graph {
        let mut b = Builder::new();
        b.input("x", &[1, 3, 6, 6]).constant("w", &[4, 3, 3, 3]);
        for p in ["gamma", "beta", "mean", "var", "b"] {
            b.constant(p, &[4]);
        }
        let conv_inputs: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
        b.node("conv", conv3x3(), conv_inputs, "c", &[1, 4, 6, 6])
            .node(
                "bn",
                Op::BatchNormalization { epsilon: 1e-3 },
                &["c", "gamma", "beta", "mean", "var"],
                "n",
                &[1, 4, 6, 6],
            )
            .node("relu", Op::Unary(UnaryOp::Relu), &["n"], "y", &[1, 4, 6, 6])
            .outputs(&["y"])
    }

    #[test]
    fn batch_norm_folds_into_the_convolution() {
        for bias in [true, false] {
            let before = conv_bn_relu(bias);
            let (after, summary) = fold_batch_norm(before.clone()).unwrap();
            assert!(
                summary.contains("folded 1 BatchNormalizations"),
                "{summary}"
            );
            assert_eq!(count(&after, "BatchNormalization"), 0);
            assert_eq!(count(&after, "Conv"), 1);
            let conv = &after.nodes[0];
            assert_eq!(conv.outputs, ["n"]);
            assert_eq!(conv.inputs.len(), 3);
            assert!(!after.tensors.contains_key("c"));
            super::super::check_graph(&after).unwrap();
            assert_same_outputs(&before, &after, 1e-5);
        }
    }

    #[test]
    fn per_channel_mul_and_add_fold_into_the_convolution() {
        let before = Builder::new()
            .input("x", &[1, 3, 6, 6])
            .constant("w", &[4, 3, 3, 3])
            .constant("s", &[4, 1, 1])
            .constant("t", &[1, 4, 1, 1])
            .constant("u", &[1])
            .node("conv", conv3x3(), &["x", "w"], "c", &[1, 4, 6, 6])
            .node(
                "mul",
                Op::Binary(BinaryOp::Mul),
                &["s", "c"],
                "m",
                &[1, 4, 6, 6],
            )
            .node(
                "add",
                Op::Binary(BinaryOp::Add),
                &["m", "t"],
                "a",
                &[1, 4, 6, 6],
            )
            .node(
                "mul2",
                Op::Binary(BinaryOp::Mul),
                &["a", "u"],
                "y",
                &[1, 4, 6, 6],
            )
            .outputs(&["y"]);
        let (after, summary) = fold_batch_norm(before.clone()).unwrap();
        assert!(
            summary.contains("2 per-channel Muls and 1 per-channel Adds"),
            "{summary}"
        );
        assert_eq!(after.nodes.len(), 1);
        assert_eq!(after.nodes[0].outputs, ["y"]);
        assert_same_outputs(&before, &after, 1e-5);
    }

    #[test]
    fn what_is_not_per_channel_or_not_the_only_reader_stays() {
        let before = Builder::new()
            .input("x", &[1, 3, 6, 6])
            .constant("w", &[4, 3, 3, 3])
            // Broadcast along the last axis, not the channels.
            .constant("s", &[6])
            .node("conv", conv3x3(), &["x", "w"], "c", &[1, 4, 6, 6])
            .node(
                "mul",
                Op::Binary(BinaryOp::Mul),
                &["c", "s"],
                "m",
                &[1, 4, 6, 6],
            )
            .node("conv2", conv3x3(), &["m", "w2"], "c2", &[1, 4, 6, 6])
            .node(
                "add",
                Op::Binary(BinaryOp::Add),
                &["c2", "c2"],
                "a",
                &[1, 4, 6, 6],
            )
            .node(
                "mul2",
                Op::Binary(BinaryOp::Mul),
                &["c2", "s"],
                "y",
                &[1, 4, 6, 6],
            )
            .constant("w2", &[4, 4, 3, 3])
            .outputs(&["y", "a"]);
        let (after, summary) = fold_batch_norm(before.clone()).unwrap();
        assert_eq!(after.nodes.len(), before.nodes.len(), "{summary}");
        assert_same_outputs(&before, &after, 0.0);
    }
}
