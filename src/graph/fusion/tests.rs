//! Fusion tests: which groups form, and that a fused graph computes what
//! the graph does (te reference interpreter on both).

use std::collections::{BTreeMap, HashSet};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::{FusedGraph, fuse};
use crate::graph::ir::{BinaryOp, Graph, Op, UnaryOp};
use crate::graph::lower::Lowered;
use crate::graph::passes::test_support::{Builder, conv3x3, random_inputs};
use crate::graph::passes::{Engine, evaluate_graph, evaluate_lowered};
use crate::te::HostTensor;

/// The outputs of a fused graph, node by node through the interpreter.
fn evaluate_fused(
    fused: &FusedGraph,
    inputs: &[(String, HostTensor)],
) -> Vec<(String, HostTensor)> {
    let graph = &fused.graph;
    let mut values: BTreeMap<String, HostTensor> = graph.constants.clone();
    values.extend(inputs.iter().cloned());
    for (node, lowered) in graph.nodes.iter().zip(&fused.lowered) {
        let outputs = evaluate_lowered(graph, node, lowered, &values, Engine::Interpreter)
            .unwrap_or_else(|e| panic!("{}: {e}", node.name));
        values.extend(node.outputs.iter().cloned().zip(outputs));
    }
    graph
        .outputs
        .iter()
        .map(|o| (o.clone(), values[o].clone()))
        .collect()
}

/// Asserts the fused graph computes the graph's outputs: the same
/// operations in the same order per element, so only the interpreter's
/// rounding of reassociated sums may differ.
fn assert_fused_computes_the_same(graph: &Graph, fused: &FusedGraph) {
    let inputs = random_inputs(graph);
    let want = evaluate_graph(graph, &inputs).expect("the graph evaluates");
    let got = evaluate_fused(fused, &inputs);
    assert_eq!(want.len(), got.len());
    for ((wn, w), (gn, g)) in want.iter().zip(&got) {
        assert_eq!(wn, gn);
        assert_eq!(w.shape(), g.shape(), "{wn}");
        for (i, (a, b)) in w.to_f64_vec().iter().zip(g.to_f64_vec()).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * a.abs().max(1.0),
                "output '{wn}' element {i}: graph {a}, fused {b}"
            );
        }
    }
}

fn kernel_label(fused: &FusedGraph, node: &str) -> String {
    let at = fused
        .graph
        .nodes
        .iter()
        .position(|n| n.name == node)
        .unwrap_or_else(|| panic!("no node {node}"));
    match &fused.lowered[at] {
        Lowered::Kernel(k) => k.dag.label().to_string(),
        Lowered::Alias => "alias".into(),
    }
}

fn node_names(fused: &FusedGraph) -> Vec<&str> {
    fused.graph.nodes.iter().map(|n| n.name.as_str()).collect()
}

fn conv_bias_relu_add() -> Graph {
    let mut b = Builder::new();
    b.input("x", &[1, 4, 6, 6])
        .constant("w", &[4, 4, 3, 3])
        .constant("bias", &[4])
        .node("conv", conv3x3(), &["x", "w", "bias"], "c", &[1, 4, 6, 6])
        .node("relu", Op::Unary(UnaryOp::Relu), &["c"], "r", &[1, 4, 6, 6])
        .node("conv2", conv3x3(), &["r", "w"], "c2", &[1, 4, 6, 6])
        .node(
            "res",
            Op::Binary(BinaryOp::Add),
            &["c2", "x"],
            "s",
            &[1, 4, 6, 6],
        )
        .node(
            "relu2",
            Op::Unary(UnaryOp::Relu),
            &["s"],
            "y",
            &[1, 4, 6, 6],
        );
    b.outputs(&["y"])
}

#[test]
fn convolution_bias_relu_and_the_residual_add_fuse() {
    let graph = conv_bias_relu_add();
    let fused = fuse(&graph, &[]).expect("fuses");
    assert_eq!(node_names(&fused), ["conv+Relu", "conv2+Add+Relu"]);
    let label = kernel_label(&fused, "conv+Relu");
    assert!(label.starts_with("conv2d_bias+Relu["), "{label}");
    let label = kernel_label(&fused, "conv2+Add+Relu");
    assert!(label.starts_with("conv2d+Add+Relu["), "{label}");
    assert_eq!(fused.groups.len(), 2);
    assert!(fused.groups.iter().all(|g| g.not_spliced.is_none()));
    assert_fused_computes_the_same(&graph, &fused);
    // The group reads x, w and bias (the residual's x once more) and no
    // tensor the group computes.
    let Lowered::Kernel(k) = &fused.lowered[1] else {
        panic!("a kernel")
    };
    assert_eq!(k.inputs, ["r", "w", "x"]);
    assert_eq!(k.outputs, ["y"]);
}

/// Every read, in `dag`, of a stage by a stage of the same shape, as
/// (reader, producer, whether it is at the reader's own axes).
fn same_shape_reads(dag: &crate::te::ComputeDag) -> Vec<(String, String, bool)> {
    use crate::te::ExprKind;
    let mut reads = Vec::new();
    for stage in dag.stages() {
        let Some(op) = stage.compute_op() else {
            continue;
        };
        op.body.visit(&mut |e| {
            if let ExprKind::Read(t, indices) = e.kind()
                && !t.is_placeholder()
                && t.shape() == stage.shape()
            {
                let identity = indices
                    .iter()
                    .zip(&op.axes)
                    .all(|(i, a)| matches!(i.kind(), ExprKind::Var(v) if v == a));
                reads.push((stage.name().to_string(), t.name().to_string(), identity));
            }
        });
    }
    reads
}

#[test]
fn an_epilogue_reads_its_producer_at_its_own_axes_across_unit_dimensions() {
    // The members see [4, 6, 6] (unit dimensions dropped), the group
    // computes [1, 4, 6, 6]: the batch index must be the epilogue's own
    // axis, not a literal 0, or the sketches cannot fuse it into the
    // convolution's tiles.
    let fused = fuse(&conv_bias_relu_add(), &[]).expect("fuses");
    for lowered in &fused.lowered {
        let Lowered::Kernel(k) = lowered else {
            continue;
        };
        let reads = same_shape_reads(&k.dag);
        assert!(!reads.is_empty(), "{}", k.dag.label());
        for (reader, producer, identity) in reads {
            assert!(
                identity,
                "{}: {reader} reads {producer} at other indices",
                k.dag.label()
            );
        }
        let epilogue = k.dag.outputs()[0].name().to_string();
        let sketches = crate::search::generate_sketches(&k.dag, &crate::runtime::Target::host());
        assert!(
            sketches.iter().any(|s| s.steps.iter().any(|step| matches!(
                step,
                crate::search::SketchStep::Fixed(crate::schedule::Step::ComputeAt { target, .. })
                    if *target == epilogue
            ))),
            "{}: no sketch computes the convolution inside its epilogue {epilogue}",
            k.dag.label()
        );
    }
}

#[test]
fn a_fused_convolution_keeps_its_cache_write_and_transposed_accumulator_sketches() {
    // The epilogue can be fused into the convolution's tiles; the group
    // must still keep the tensorized cache-write sketches with the
    // accumulator channel-innermost and the epilogue on its own, the
    // fastest for short output rows (a ResNet-50 3x3 convolution over 7x7
    // lost 2.4x when only the consumer-hosted tiles were offered), next to
    // the same accumulator copied out by the fused epilogue itself.
    let mut b = Builder::new();
    b.input("x", &[1, 4, 6, 6])
        .constant("w", &[32, 4, 3, 3])
        .constant("bias", &[32])
        .node("conv", conv3x3(), &["x", "w", "bias"], "c", &[1, 32, 6, 6])
        .node(
            "relu",
            Op::Unary(UnaryOp::Relu),
            &["c"],
            "r",
            &[1, 32, 6, 6],
        );
    let fused = fuse(&b.outputs(&["r"]), &[]).expect("fuses");
    assert_eq!(node_names(&fused), ["conv+Relu"]);
    for lowered in &fused.lowered {
        let Lowered::Kernel(k) = lowered else {
            continue;
        };
        let sketches = crate::search::generate_sketches(&k.dag, &crate::runtime::Target::host());
        let names: Vec<&String> = sketches.iter().map(|s| &s.name).collect();
        let transposed = |epilogue_alone: bool| {
            sketches.iter().any(|s| {
                s.name.contains("tensorize(")
                    && s.name.contains("+transposed_accumulator")
                    && s.name.contains("relu:") == epilogue_alone
            })
        };
        assert!(transposed(true), "{}: {names:?}", k.dag.label());
        assert!(transposed(false), "{}: {names:?}", k.dag.label());
    }
}

#[test]
fn a_tensor_read_outside_or_kept_ends_its_group() {
    let graph = conv_bias_relu_add();
    // `c` kept: the Relu reading it cannot hide it.
    let fused = fuse(&graph, &["c".to_string()]).expect("fuses");
    assert_eq!(node_names(&fused), ["conv", "relu", "conv2+Add+Relu"]);
    assert_fused_computes_the_same(&graph, &fused);

    // `c2` also read by a multiply that joins too: still one group.
    let mut b = Builder::new();
    b.graph = graph.clone();
    b.node(
        "twice",
        Op::Binary(BinaryOp::Mul),
        &["c2", "y"],
        "z",
        &[1, 4, 6, 6],
    );
    let graph = b.outputs(&["z"]);
    let fused = fuse(&graph, &[]).expect("fuses");
    assert_eq!(node_names(&fused), ["conv+Relu", "conv2+Add+Relu+Mul"]);
    assert_fused_computes_the_same(&graph, &fused);

    // `c2` read by a convolution (outside any group of conv2): the
    // residual add cannot take it in and anchors its own group.
    let mut b = Builder::new();
    b.graph = graph.clone();
    b.node("conv3", conv3x3(), &["c2", "w"], "c3", &[1, 4, 6, 6]);
    let graph = b.outputs(&["z", "c3"]);
    let fused = fuse(&graph, &[]).expect("fuses");
    assert_eq!(
        node_names(&fused),
        ["conv+Relu", "conv2", "res+Relu+Mul", "conv3"]
    );
    assert_fused_computes_the_same(&graph, &fused);
}

#[test]
fn the_erf_gelu_diamond_after_a_matmul_is_one_group() {
    // x·W + b, then 0.5·y·(1 + erf(y/√2)) as exporters write it: y is read
    // twice, both times inside the group.
    let mut b = Builder::new();
    b.input("x", &[8, 16])
        .constant("w", &[16, 12])
        .constant("b", &[12])
        .constant_values("sqrt2", &[], vec![std::f32::consts::SQRT_2])
        .constant_values("one", &[], vec![1.0])
        .constant_values("half", &[], vec![0.5])
        .node("mm", Op::MatMul, &["x", "w"], "m", &[8, 12])
        .node(
            "bias",
            Op::Binary(BinaryOp::Add),
            &["m", "b"],
            "y",
            &[8, 12],
        )
        .node(
            "div",
            Op::Binary(BinaryOp::Div),
            &["y", "sqrt2"],
            "d",
            &[8, 12],
        )
        .node("erf", Op::Unary(UnaryOp::Erf), &["d"], "e", &[8, 12])
        .node(
            "add1",
            Op::Binary(BinaryOp::Add),
            &["e", "one"],
            "a",
            &[8, 12],
        )
        .node("mul", Op::Binary(BinaryOp::Mul), &["y", "a"], "p", &[8, 12])
        .node(
            "half",
            Op::Binary(BinaryOp::Mul),
            &["p", "half"],
            "g",
            &[8, 12],
        );
    let graph = b.outputs(&["g"]);
    let fused = fuse(&graph, &[]).expect("fuses");
    assert_eq!(node_names(&fused), ["mm+Add+Div+Erf+Add+Mul+Mul"]);
    let label = kernel_label(&fused, "mm+Add+Div+Erf+Add+Mul+Mul");
    assert!(
        label.starts_with("matmul+Add+Div+Erf+Add+Mul+Mul[M=8,N=12,K=16"),
        "{label}"
    );
    assert_fused_computes_the_same(&graph, &fused);
}

#[test]
fn reductions_start_groups_and_take_an_epilogue_but_never_a_broadcast() {
    // The exporters' layer norm: mean, x − mean (broadcast: a new group),
    // square, mean, + ε, sqrt, divide, scale, shift.
    let mut b = Builder::new();
    let mean = || Op::ReduceMean {
        axes: vec![1],
        keepdims: true,
    };
    b.input("x", &[4, 8])
        .constant_values("eps", &[], vec![1e-5])
        .constant_values("two", &[], vec![2.0])
        .constant("gamma", &[8])
        .constant("beta", &[8])
        .node("mean", mean(), &["x"], "mu", &[4, 1])
        .node("sub", Op::Binary(BinaryOp::Sub), &["x", "mu"], "d", &[4, 8])
        .node(
            "pow",
            Op::Binary(BinaryOp::Pow),
            &["d", "two"],
            "sq",
            &[4, 8],
        )
        .node("var", mean(), &["sq"], "v", &[4, 1])
        .node(
            "eps",
            Op::Binary(BinaryOp::Add),
            &["v", "eps"],
            "ve",
            &[4, 1],
        )
        .node("sqrt", Op::Unary(UnaryOp::Sqrt), &["ve"], "sd", &[4, 1])
        .node("div", Op::Binary(BinaryOp::Div), &["d", "sd"], "n", &[4, 8])
        .node(
            "scale",
            Op::Binary(BinaryOp::Mul),
            &["n", "gamma"],
            "ns",
            &[4, 8],
        )
        .node(
            "shift",
            Op::Binary(BinaryOp::Add),
            &["ns", "beta"],
            "y",
            &[4, 8],
        );
    let graph = b.outputs(&["y"]);
    let fused = fuse(&graph, &[]).expect("fuses");
    // `d` is read by the divide, outside {sub, pow}: pow stays apart.
    assert_eq!(
        node_names(&fused),
        ["mean", "sub", "pow", "var+Add+Sqrt", "div+Mul+Add"]
    );
    assert_fused_computes_the_same(&graph, &fused);
}

/// Random graphs of convolutions, matrix-free elementwise chains,
/// diamonds, residuals and reductions: fusing never changes the outputs,
/// every group's inner tensors stay inside it, and nodes run after what
/// they read.
#[test]
fn random_graphs_fuse_to_the_same_function() {
    for seed in 0..24u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut b = Builder::new();
        b.input("x", &[1, 3, 5, 5]).constant("w", &[3, 3, 3, 3]);
        let mut live: Vec<String> = vec!["x".into()];
        let shape = [1, 3, 5, 5];
        let nodes = rng.random_range(3..12);
        for n in 0..nodes {
            let out = format!("t{n}");
            let pick =
                |rng: &mut StdRng, live: &[String]| live[rng.random_range(0..live.len())].clone();
            let a = pick(&mut rng, &live);
            match rng.random_range(0..6) {
                0 => {
                    b.node(&format!("n{n}"), conv3x3(), &[&a, "w"], &out, &shape);
                }
                1 => {
                    b.node(
                        &format!("n{n}"),
                        Op::Unary(UnaryOp::Relu),
                        &[&a],
                        &out,
                        &shape,
                    );
                }
                2 => {
                    b.node(
                        &format!("n{n}"),
                        Op::Unary(UnaryOp::Tanh),
                        &[&a],
                        &out,
                        &shape,
                    );
                }
                3 | 4 => {
                    let c = pick(&mut rng, &live);
                    let op = if rng.random_bool(0.5) {
                        BinaryOp::Add
                    } else {
                        BinaryOp::Mul
                    };
                    b.node(&format!("n{n}"), Op::Binary(op), &[&a, &c], &out, &shape);
                }
                _ => {
                    let kept = Op::ReduceMean {
                        axes: vec![1],
                        keepdims: true,
                    };
                    b.node(
                        &format!("n{n}m"),
                        kept,
                        &[&a],
                        &format!("{out}m"),
                        &[1, 1, 5, 5],
                    );
                    let m = format!("{out}m");
                    b.node(
                        &format!("n{n}"),
                        Op::Binary(BinaryOp::Sub),
                        &[&a, &m],
                        &out,
                        &shape,
                    );
                }
            }
            live.push(out);
        }
        let last = live.last().cloned().unwrap_or_default();
        let mut outputs = vec![last.as_str()];
        if rng.random_bool(0.5) && live.len() > 2 {
            outputs.push(live[live.len() / 2].as_str());
        }
        outputs.dedup();
        let graph = b.outputs(&outputs);
        let fused = fuse(&graph, &[]).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let mut written: HashSet<&str> = graph.inputs.iter().map(String::as_str).collect();
        written.extend(graph.constants.keys().map(String::as_str));
        for node in &fused.graph.nodes {
            for input in &node.inputs {
                assert!(
                    written.contains(input.as_str()),
                    "seed {seed}: {} reads {input} before it is written",
                    node.name
                );
            }
            written.extend(node.outputs.iter().map(String::as_str));
        }
        for output in &graph.outputs {
            assert!(
                written.contains(output.as_str()),
                "seed {seed}: output {output}"
            );
        }
        assert_fused_computes_the_same(&graph, &fused);
    }
}
