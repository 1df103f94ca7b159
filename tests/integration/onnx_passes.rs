//! Graph passes through the executor: a model compiled with the passes
//! computes what it computes without them (models built here, and the
//! `onnx` package's real ones), each pass does what it says on them, and
//! `tessera model show --passes` lists every pass.

use tessera::graph::passes::PASSES;
use tessera::graph::{CompileOptions, Graph, Model};
use tessera::te::{DType, HostTensor};

use crate::common::Scratch;
use crate::common::onnx_models::{
    Attr, floats, graph, light_models_dir, model, node, ort_python, ramp, value, write,
};
use crate::common::tessera;

/// `x → Conv → BatchNormalization → (Relu, Relu) → Add → MatMul by the
/// transpose of a weight → y`, a dead `Exp(x)`, and `z = k1 · k2`, a graph
/// output computed from constants alone.
fn conv_bn_model() -> tessera::graph::onnx::proto::ModelProto {
    let positive: Vec<f32> = ramp(4, 9).iter().map(|v| v.abs() + 0.5).collect();
    let nodes = vec![
        node(
            "Conv",
            "conv",
            &["x", "w", "b"],
            &["c"],
            vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        ),
        node(
            "BatchNormalization",
            "bn",
            &["c", "gamma", "beta", "mean", "var"],
            &["n"],
            vec![("epsilon", Attr::Float(1e-3))],
        ),
        node("Relu", "relu1", &["n"], &["r1"], vec![]),
        node("Relu", "relu2", &["n"], &["r2"], vec![]),
        node("Add", "add", &["r1", "r2"], &["s"], vec![]),
        node("Exp", "dead", &["x"], &["e"], vec![]),
        node(
            "Transpose",
            "t",
            &["mt"],
            &["m"],
            vec![("perm", Attr::Ints(vec![1, 0]))],
        ),
        node("MatMul", "mm", &["s", "m"], &["y"], vec![]),
        node("Mul", "k", &["k1", "k2"], &["z"], vec![]),
    ];
    let inits = vec![
        floats("w", &[4, 3, 3, 3], ramp(108, 1)),
        floats("b", &[4], ramp(4, 2)),
        floats("gamma", &[4], ramp(4, 3)),
        floats("beta", &[4], ramp(4, 4)),
        floats("mean", &[4], ramp(4, 5)),
        floats("var", &[4], positive),
        floats("mt", &[8, 8], ramp(64, 6)),
        floats("k1", &[2, 3], ramp(6, 7)),
        floats("k2", &[2, 3], ramp(6, 8)),
    ];
    model(
        13,
        graph(
            nodes,
            vec![value("x", &[Some(1), Some(3), Some(8), Some(8)])],
            vec![
                value("y", &[Some(1), Some(4), Some(8), Some(8)]),
                value("z", &[Some(2), Some(3)]),
            ],
            inits,
        ),
    )
}

fn count(graph: &Graph, op_type: &str) -> usize {
    graph
        .nodes
        .iter()
        .filter(|n| n.op.name() == op_type)
        .count()
}

/// Runs `model` with and without the passes on one random input and
/// asserts the outputs agree within `rel` (relative to max(1, |value|)).
fn assert_passes_keep_outputs(model: &Model, rel: f32) {
    let inputs: Vec<(String, HostTensor)> = model
        .graph()
        .inputs
        .iter()
        .map(|name| {
            let shape = model.graph().shape(name);
            (name.clone(), HostTensor::random(shape, DType::F32, 5))
        })
        .collect();
    let without = CompileOptions {
        passes: false,
        ..CompileOptions::default()
    };
    let want = model.compile(&without).unwrap().run(&inputs).unwrap();
    let mut compiled = model.compile(&CompileOptions::default()).unwrap();
    // By default, compiling runs the graph after the passes, fused.
    let (optimized, _) = model.optimized().unwrap();
    let fused = tessera::graph::fusion::fuse(&optimized, &[]).unwrap();
    assert_eq!(compiled.graph().nodes, fused.graph.nodes);
    let got = compiled.run(&inputs).unwrap();
    assert_eq!(want.len(), got.len());
    for ((wn, w), (gn, g)) in want.iter().zip(&got) {
        assert_eq!(wn, gn);
        assert_eq!(w.shape(), g.shape(), "{wn}");
        let (w, g) = (w.as_f32().unwrap(), g.as_f32().unwrap());
        for (i, (a, b)) in w.iter().zip(g).enumerate() {
            assert!(
                (a - b).abs() <= rel * a.abs().max(1.0),
                "output '{wn}' element {i}: {a} without the passes, {b} with them"
            );
        }
    }
}

#[test]
fn onnx_passes_keep_a_conv_bn_models_outputs_and_do_what_they_say() {
    let dir = Scratch::new("onnx-passes-conv-bn");
    let path = write(&dir, "conv_bn.onnx", &conv_bn_model());
    let model = Model::load(&path).unwrap();
    assert_eq!(count(model.graph(), "BatchNormalization"), 1);
    let (optimized, reports) = model.optimized().unwrap();
    assert_eq!(reports.len(), PASSES.len());
    let ops: Vec<&str> = optimized.nodes.iter().map(|n| n.op.name()).collect();
    // BN folded, Transpose and Mul folded into constants, one Relu merged
    // away, the Exp gone; the convolution and what follows it up to the
    // MatMul channels last, between two layout transforms.
    assert_eq!(
        ops,
        ["Transpose", "Conv", "Relu", "Add", "Transpose", "MatMul"],
        "{reports:#?}"
    );
    let layouts: Vec<&str> = optimized
        .nodes
        .iter()
        .filter(|n| n.op.name() == "Transpose")
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(layouts, ["x.channels_last.layout", "s.layout"]);
    assert!(optimized.constants.contains_key("z"));
    assert_eq!(optimized.outputs, ["y", "z"]);
    // The imported graph is untouched.
    assert_eq!(model.graph().nodes.len(), 9);
    assert_passes_keep_outputs(&model, 1e-5);
}

#[test]
fn onnx_passes_on_real_models() {
    let Some(python) = ort_python("onnx_passes_on_real_models") else {
        return;
    };
    let light = light_models_dir(&python);
    // ResNet-50: every BatchNormalization follows a convolution.
    let resnet = Model::load(light.join("light_resnet50.onnx")).unwrap();
    assert_eq!(count(resnet.graph(), "BatchNormalization"), 53);
    let (optimized, reports) = resnet.optimized().unwrap();
    assert_eq!(count(&optimized, "BatchNormalization"), 0, "{reports:#?}");
    assert!(reports[1].summary.contains("folded 53 BatchNormalizations"));
    // The 33 pointwise convolutions (1×1, stride 1) become matrix products,
    // 16 ReLUs and 16 residual Sum + ReLU pairs with them; the 7×7 stem,
    // the 16 3×3 and the 3 strided 1×1 projections stay convolutions.
    assert_eq!(count(&optimized, "Conv"), 20);
    assert_eq!(count(&optimized, "MatMul"), 33);
    // Every convolution channels last, with everything between them: the
    // image goes in by one Transpose, the pooled features come out by a
    // Reshape.
    assert_eq!(
        reports[2].summary,
        "120 nodes run channels last (1 layout transforms at the boundaries)"
    );
    assert_eq!(count(&optimized, "Transpose"), 1);
    assert!(optimized.nodes.iter().all(|n| match &n.op {
        tessera::graph::ir::Op::Conv(a) => a.channels_last,
        _ => true,
    }));
    assert_eq!(
        reports[3].summary,
        "rewrote 33 pointwise convolutions as matrix products (48 elementwise followers moved)"
    );
    // ShuffleNet (BN folding, shared constants) runs the same with and
    // without the passes.
    let shufflenet = Model::load(light.join("light_shufflenet.onnx")).unwrap();
    let (optimized, _) = shufflenet.optimized().unwrap();
    assert_eq!(count(&optimized, "BatchNormalization"), 0);
    assert_passes_keep_outputs(&shufflenet, 1e-4);
}

#[test]
fn onnx_passes_model_show_lists_every_pass() {
    let dir = Scratch::new("onnx-passes-show");
    let path = write(&dir, "conv_bn.onnx", &conv_bn_model());
    let out = tessera(&["model", "show", "--passes", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut at = 0;
    for pass in PASSES {
        let found = text[at..]
            .find(pass.name)
            .unwrap_or_else(|| panic!("{} missing or out of order:\n{text}", pass.name));
        at += found;
    }
    assert!(text.contains("folded 1 BatchNormalizations"), "{text}");
    assert!(text.contains("after the passes"), "{text}");
    let (_, after) = text.split_once("after the passes").unwrap();
    assert!(!after.contains("BatchNormalization"), "{text}");
    // The model's Transpose is folded; the ones left are the layout's.
    assert!(
        after
            .lines()
            .filter(|l| l.contains("Transpose"))
            .all(|l| l.contains(".layout")),
        "{text}"
    );
}
