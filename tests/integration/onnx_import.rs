//! ONNX import: parsing, shape inference and folding of shape subgraphs on
//! models built here with the reader's protobuf types and on the `onnx`
//! package's real models; and every bad input the issue lists, through the
//! command line (one line, exit 2, nothing written).

use tessera::graph::onnx::ImportOptions;
use tessera::graph::{Model, Op};

use crate::common::Scratch;
use crate::common::onnx_models::{
    Attr, floats, graph, light_models_dir, model, node, ort_python, small_cnn, value, value_typed,
    write,
};
use crate::common::tessera;

#[test]
fn a_small_cnn_imports_with_its_shape_subgraph_folded() {
    let dir = Scratch::new("onnx-import-cnn");
    let path = write(&dir, "cnn.onnx", &small_cnn(13));
    let model = Model::load(&path).unwrap();
    let g = model.graph();
    let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(
        ops,
        ["Conv", "Relu", "MaxPool", "Reshape", "Gemm", "Softmax"]
    );
    assert_eq!(g.shape("c"), [1, 4, 8, 8]);
    assert_eq!(g.shape("p"), [1, 4, 4, 4]);
    assert_eq!(g.shape("f"), [1, 64]);
    assert_eq!(g.shape("y"), [1, 10]);
    assert_eq!(g.inputs, ["x"]);
    // The shape subgraph's constants are gone; the weights stay.
    let constants: Vec<&str> = g.constants.keys().map(String::as_str).collect();
    assert_eq!(constants, ["b", "fb", "fw", "w"]);
    match &g.nodes[0].op {
        Op::Conv(a) => {
            assert_eq!(a.pads_begin, [1, 1]);
            assert_eq!(a.kernel, [3, 3]);
        }
        other => panic!("expected a Conv, got {other:?}"),
    }
    match &g.nodes[5].op {
        Op::Softmax { axis, last_axis } => assert_eq!((*axis, *last_axis), (1, 1)),
        other => panic!("expected a Softmax, got {other:?}"),
    }
}

#[test]
fn opset_semantics_differ_where_onnx_changed_them() {
    // Softmax before opset 13 normalises over every axis from `axis` on.
    let dir = Scratch::new("onnx-import-opsets");
    for (opset, expected) in [(11, (1, 2)), (13, (1, 1))] {
        let m = model(
            opset,
            graph(
                vec![node(
                    "Softmax",
                    "s",
                    &["x"],
                    &["y"],
                    vec![("axis", Attr::Int(1))],
                )],
                vec![value("x", &[Some(2), Some(3), Some(4)])],
                vec![value("y", &[Some(2), Some(3), Some(4)])],
                vec![],
            ),
        );
        let path = write(&dir, &format!("softmax{opset}.onnx"), &m);
        let g = Model::load(&path).unwrap().graph().clone();
        match &g.nodes[0].op {
            Op::Softmax { axis, last_axis } => assert_eq!((*axis, *last_axis), expected),
            other => panic!("{other:?}"),
        }
    }
    // Clip's bounds: attributes at opset 9, constant inputs from 11.
    let clip9 = model(
        9,
        graph(
            vec![node(
                "Clip",
                "c",
                &["x"],
                &["y"],
                vec![("min", Attr::Float(0.0)), ("max", Attr::Float(6.0))],
            )],
            vec![value("x", &[Some(5)])],
            vec![value("y", &[Some(5)])],
            vec![],
        ),
    );
    let clip13 = model(
        13,
        graph(
            vec![node("Clip", "c", &["x", "lo", "hi"], &["y"], vec![])],
            vec![value("x", &[Some(5)])],
            vec![value("y", &[Some(5)])],
            vec![floats("lo", &[], vec![0.0]), floats("hi", &[], vec![6.0])],
        ),
    );
    for (name, m) in [("clip9.onnx", clip9), ("clip13.onnx", clip13)] {
        let g = Model::load(write(&dir, name, &m)).unwrap().graph().clone();
        assert_eq!(g.nodes[0].op, Op::Clip { min: 0.0, max: 6.0 }, "{name}");
        assert_eq!(
            g.nodes[0].inputs,
            ["x"],
            "{name}: the bounds are attributes now"
        );
    }
}

#[test]
fn a_dynamic_dimension_takes_the_given_shape() {
    let dir = Scratch::new("onnx-import-dynamic");
    let mut m = small_cnn(13);
    if let Some(g) = m.graph.as_mut() {
        g.input = vec![value("x", &[None, Some(3), Some(8), Some(8)])];
    }
    let path = write(&dir, "dyn.onnx", &m);
    let err = Model::load(&path).unwrap_err().to_string();
    assert!(err.contains("--input-shape x="), "{err}");
    let mut options = ImportOptions::default();
    options
        .input_shapes
        .insert("x".to_string(), vec![1, 3, 8, 8]);
    let g = Model::load_with(&path, &options).unwrap().graph().clone();
    assert_eq!(g.shape("y"), [1, 10]);
    options
        .input_shapes
        .insert("x".to_string(), vec![1, 4, 8, 8]);
    let err = Model::load_with(&path, &options).unwrap_err().to_string();
    assert!(err.contains("dimension 1 is fixed at 3"), "{err}");
}

#[test]
fn the_onnx_packages_real_models_import_with_static_shapes() {
    let Some(python) = ort_python("onnx_import::real_models") else {
        return;
    };
    let dir = light_models_dir(&python);
    let mut seen = 0;
    for (name, output) in [
        ("resnet50", vec![1, 1000]),
        ("squeezenet", vec![1, 1000, 1, 1]),
        ("shufflenet", vec![1, 1000]),
        ("inception_v1", vec![1, 1000]),
        ("inception_v2", vec![1, 1000]),
        ("densenet121", vec![1, 1000, 1, 1]),
        ("vgg19", vec![1, 1000]),
        ("bvlc_alexnet", vec![1, 1000]),
        ("zfnet512", vec![1, 1000]),
    ] {
        let path = dir.join(format!("light_{name}.onnx"));
        let model = Model::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let g = model.graph();
        assert_eq!(g.shape(&g.outputs[0]), output.as_slice(), "{name}");
        // Every weight is a constant (ConstantOfShape folded): no node
        // computes one at run time.
        for node in &g.nodes {
            assert!(
                node.inputs.iter().any(|i| !g.constants.contains_key(i)),
                "{name}: node {} computes from constants only",
                node.name
            );
        }
        seen += 1;
    }
    assert_eq!(seen, 9);
}

/// Runs `tessera args`, expects exit 2 with a one-line error containing
/// every part of `expect`, and that `must_not_exist` was not written.
fn fails_cleanly(args: &[&str], expect: &[&str], must_not_exist: &std::path::Path) {
    let out = tessera(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: one line: {stderr}"
    );
    assert!(stderr.starts_with("error: "), "{stderr}");
    for part in expect {
        assert!(
            stderr.contains(part),
            "{args:?}: expected '{part}' in: {stderr}"
        );
    }
    assert!(
        !must_not_exist.exists(),
        "{args:?} wrote {}",
        must_not_exist.display()
    );
}

#[test]
fn every_bad_input_is_one_line_exit_2_and_writes_nothing() {
    let dir = Scratch::new("onnx-import-bad");
    let out = dir.join("out.npy");
    let out_s = out.to_str().unwrap();
    let good = write(&dir, "good.onnx", &small_cnn(13));
    let bytes = std::fs::read(&good).unwrap();
    let run = |model: &std::path::Path, expect: &[&str]| {
        fails_cleanly(
            &["run", model.to_str().unwrap(), "--output", out_s],
            expect,
            &out,
        );
    };

    let truncated = dir.join("truncated.onnx");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    run(&truncated, &["truncated.onnx", "is not an ONNX model"]);

    let text = dir.join("text.onnx");
    std::fs::write(&text, "this is not a model\n").unwrap();
    run(&text, &["text.onnx", "is not an ONNX model"]);

    let mut newer = small_cnn(13);
    newer.opset_import[0].version = Some(99);
    run(
        &write(&dir, "newer.onnx", &newer),
        &["opset 99", "re-export it"],
    );

    let unknown_op = model(
        13,
        graph(
            vec![node("Einsum", "mix", &["x"], &["y"], vec![])],
            vec![value("x", &[Some(2), Some(2)])],
            vec![value("y", &[Some(2)])],
            vec![],
        ),
    );
    run(
        &write(&dir, "einsum.onnx", &unknown_op),
        &[
            "node 'mix'",
            "Einsum is not supported",
            "supported operators:",
            "Conv",
        ],
    );

    let bad_attr = model(
        20,
        graph(
            vec![node(
                "Gelu",
                "act",
                &["x"],
                &["y"],
                vec![("approximate", Attr::Str("fast"))],
            )],
            vec![value("x", &[Some(4)])],
            vec![value("y", &[Some(4)])],
            vec![],
        ),
    );
    run(
        &write(&dir, "gelu.onnx", &bad_attr),
        &["node 'act' (Gelu)", "approximate='fast'", "none, tanh"],
    );

    let mut dynamic = small_cnn(13);
    if let Some(g) = dynamic.graph.as_mut() {
        g.input = vec![value("x", &[None, Some(3), Some(8), Some(8)])];
    }
    run(
        &write(&dir, "dynamic.onnx", &dynamic),
        &["input 'x'", "dynamic dimension 0", "--input-shape x="],
    );

    let int_input = model(
        13,
        graph(
            vec![node("Relu", "r", &["x"], &["y"], vec![])],
            vec![value_typed("x", 7, &[Some(4)])],
            vec![value("y", &[Some(4)])],
            vec![],
        ),
    );
    run(
        &write(&dir, "int.onnx", &int_input),
        &["tensor 'x' is int64", "f32"],
    );

    let cycle = model(
        13,
        graph(
            vec![
                node("Add", "a", &["x", "y2"], &["y1"], vec![]),
                node("Relu", "b", &["y1"], &["y2"], vec![]),
            ],
            vec![value("x", &[Some(4)])],
            vec![value("y2", &[Some(4)])],
            vec![],
        ),
    );
    run(
        &write(&dir, "cycle.onnx", &cycle),
        &["cycle", "\"a\"", "\"b\""],
    );

    let dangling = model(
        13,
        graph(
            vec![node("Add", "a", &["x", "ghost"], &["y"], vec![])],
            vec![value("x", &[Some(4)])],
            vec![value("y", &[Some(4)])],
            vec![],
        ),
    );
    run(
        &write(&dir, "dangling.onnx", &dangling),
        &["node 'a' reads tensor 'ghost'", "dangling"],
    );

    // Inputs that do not fit the model.
    let wrong_shape = dir.join("wrong_shape.npy");
    tessera::graph::npy::write_npy(
        &wrong_shape,
        &tessera::te::HostTensor::from_f32(&[1, 3, 4, 4], vec![0.0; 48]).unwrap(),
    )
    .unwrap();
    let run_on = |input: &std::path::Path, expect: &[&str]| {
        let flag = format!("x={}", input.display());
        let args = [
            "run",
            good.to_str().unwrap(),
            "--input",
            &flag,
            "--output",
            out_s,
        ];
        fails_cleanly(&args, expect, &out);
    };
    run_on(
        &wrong_shape,
        &["input 'x'", "[1, 3, 4, 4]", "expects f32[1, 3, 8, 8]"],
    );
    let wrong_dtype = dir.join("wrong_dtype.npy");
    {
        use npyz::WriterBuilder;
        let mut file = std::fs::File::create(&wrong_dtype).unwrap();
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[1, 3, 8, 8])
            .writer(&mut file)
            .begin_nd()
            .unwrap();
        writer.extend(vec![0.0f64; 192]).unwrap();
        writer.finish().unwrap();
    }
    run_on(&wrong_dtype, &["wrong_dtype.npy", "<f8", "float32"]);
    fails_cleanly(
        &["run", good.to_str().unwrap(), "--output", out_s],
        &["input 'x'", "not given"],
        &out,
    );
}

/// A model of one MatMul `x[8,16] · w[16,8]`: the registry's matmul 8×8×16.
fn one_matmul() -> tessera::graph::onnx::proto::ModelProto {
    use crate::common::onnx_models::ramp;
    model(
        13,
        graph(
            vec![node("MatMul", "mm", &["x", "w"], &["y"], vec![])],
            vec![value("x", &[Some(8), Some(16)])],
            vec![value("y", &[Some(8), Some(8)])],
            vec![floats("w", &[16, 8], ramp(128, 9))],
        ),
    )
}

#[test]
fn tuned_records_of_registry_operators_apply_to_model_nodes() {
    use crate::common::{ok_result, other_device, split_steps};
    use tessera::db::TuningDb;
    use tessera::deploy::{self, DeployOptions, Library};
    use tessera::graph::{CompileOptions, NodeSource};
    use tessera::measure::{MeasureResult, Task};
    use tessera::runtime::host_device;
    use tessera::schedule::Step;
    use tessera::te::{DType, HostTensor};

    let dir = Scratch::new("onnx-import-tuned");
    let path = write(&dir, "mm.onnx", &one_matmul());
    let model = Model::load(&path).unwrap();
    let x = HostTensor::random(&[8, 16], DType::F32, 3);
    let inputs = vec![("x".to_string(), x)];
    let mut default = model.compile(&CompileOptions::default()).unwrap();
    let want = default.run(&inputs).unwrap();

    let mut db = TuningDb::open(&dir.join("tuning.db")).unwrap();
    let task = Task::from_registry("matmul", "M=8,N=8,K=16").unwrap();
    let steps = split_steps(4);
    let result = ok_result(1e-6, 1.0);
    let batch: Vec<(&[Step], &MeasureResult)> = vec![(&steps, &result)];
    db.record_batch(&task, &other_device(), &batch).unwrap();
    // Another device's record is never used.
    let compiled = model
        .compile(&CompileOptions {
            db: Some(&db),
            ..CompileOptions::default()
        })
        .unwrap();
    match compiled.sources()[0].2 {
        NodeSource::Default(why) => assert!(why.contains("only on other devices"), "{why}"),
        other => panic!("expected the default schedule, got {other}"),
    }
    db.record_batch(&task, host_device(), &batch).unwrap();
    let mut tuned = model
        .compile(&CompileOptions {
            db: Some(&db),
            ..CompileOptions::default()
        })
        .unwrap();
    assert!(
        matches!(tuned.sources()[0].2, NodeSource::Tuned(_)),
        "{}",
        tuned.sources()[0].2
    );
    assert_eq!(tuned.run(&inputs).unwrap(), want);

    // Deployed, the library's artifact is what the node runs.
    let out = dir.join("schedules");
    let options = DeployOptions {
        out: out.clone(),
        ..DeployOptions::default()
    };
    deploy::deploy(&db, host_device(), &options).unwrap();
    let library = Library::open(&out).unwrap();
    let mut deployed = model
        .compile(&CompileOptions {
            library: Some(&library),
            ..CompileOptions::default()
        })
        .unwrap();
    match deployed.sources()[0].2 {
        NodeSource::Tuned(from) => assert!(from.contains("schedules"), "{from}"),
        other => panic!("expected the deployed artifact, got {other}"),
    }
    assert_eq!(deployed.run(&inputs).unwrap(), want);
}

#[test]
fn tuning_a_model_tunes_its_fused_tasks_and_run_uses_them() {
    use tessera::te::{DType, HostTensor};
    let dir = Scratch::new("onnx-import-tune-model");
    let mut m = one_matmul();
    if let Some(g) = m.graph.as_mut() {
        // Two MatMuls of one workload (their weights differ, or the passes
        // merge them), their sum and a Relu: fused, the second MatMul is
        // the registry's matmul and the first one takes the Add and Relu.
        g.node
            .push(node("MatMul", "mm2", &["x", "w2"], &["y2"], vec![]));
        let w2 = crate::common::onnx_models::ramp(128, 11);
        g.initializer.push(floats("w2", &[16, 8], w2));
        g.node
            .push(node("Add", "sum", &["y", "y2"], &["s"], vec![]));
        g.node.push(node("Relu", "act", &["s"], &["z"], vec![]));
        g.output = vec![value("z", &[Some(8), Some(8)])];
    }
    let path = write(&dir, "mm.onnx", &m);
    let db = dir.join("tuning.db");
    let (path_s, db_s) = (path.to_str().unwrap(), db.to_str().unwrap());
    let out = tessera(&[
        "tune",
        path_s,
        "--trials",
        "2",
        "--db",
        db_s,
        "--remeasure",
        "0",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("2 tasks for its 2 kernels after fusion"),
        "{stdout}"
    );
    assert!(
        stdout.contains("T0-matmul ") && stdout.contains("T1-matmul+Add+Relu "),
        "{stdout}"
    );
    let x = dir.join("x.npy");
    tessera::graph::npy::write_npy(&x, &HostTensor::random(&[8, 16], DType::F32, 1)).unwrap();
    let input = format!("x={}", x.display());
    let out = tessera(&["run", path_s, "--db", db_s, "--input", &input]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("kernels: 2 tuned, 0 on the default schedule"),
        "{stdout}"
    );
}
