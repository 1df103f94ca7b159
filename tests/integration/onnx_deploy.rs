//! Deployed models: `tessera deploy m.onnx` writes the model's tuned
//! kernels and its model artifact (`model.json` + `graph.onnx`, the graph
//! after the passes); `tessera run m.onnx --from DIR` and
//! `Model::load_deployed` load it without passes, search or database, and
//! fall back to the `.onnx` (saying why) when the artifact does not fit.
//!
//! Tolerance against ONNX Runtime and between schedules: as in
//! `onnx_vs_ort`, 8·ε·√(Σ L) relative to the largest reference output
//! (plus as much absolute), L each kernel's longest reduction: tuned and
//! default schedules sum in different orders.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tessera::db::TuningDb;
use tessera::deploy::Library;
use tessera::deploy::{INDEX_FILE, Index, device_dir};
use tessera::graph::deployed::{
    GRAPH_FILE, MODEL_FILE, ModelArtifact, ModelDeployOptions, ModelOrigin, TaskSchedule,
    deploy_model, model_dir,
};

use tessera::graph::npy::{read_npy, write_npy};
use tessera::graph::onnx::{ImportOptions, encode, export, import_bytes};
use tessera::graph::{CompileOptions, CompiledModel, Model, NodeSource};
use tessera::measure::{MeasureResult, Task};
use tessera::runtime::host_device;
use tessera::schedule::Step;
use tessera::te::{DType, HostTensor};

use crate::common::onnx_models::{
    Attr, floats, graph, int64s, model, node, ort_python, ramp, small_cnn, value, write,
};
use crate::common::{Scratch, ok_result, rounding_depth, tessera};

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Asserts `got` is within the error bound of `want`.
fn assert_near(got: &HostTensor, want: &HostTensor, depth: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: element counts");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let allowed = 8.0 * f64::from(f32::EPSILON) * depth * (scale + 1.0);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let e = (a - b).abs();
        assert!(
            e.is_finite() && e <= allowed,
            "{what}[{i}] = {a}, expected {b} (|Δ| {e:.3e} > {allowed:.3e})"
        );
    }
}

/// ONNX Runtime's first output of `model` on input `x` (graph
/// optimisations off, one thread), or `None` when there is no ORT.
fn ort_output(python: &Path, model: &Path, x: &Path, dir: &Path) -> HostTensor {
    let out = dir.join("ort.npy");
    let script = "import sys, numpy as np, onnxruntime as ort\n\
        o = ort.SessionOptions(); o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL\n\
        o.intra_op_num_threads = 1\n\
        s = ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])\n\
        name = s.get_inputs()[0].name\n\
        np.save(sys.argv[3], s.run(None, {name: np.load(sys.argv[2])})[0])\n";
    let run = Command::new(python)
        .args(["-c", script, s(model), s(x), s(&out)])
        .output()
        .expect("python runs");
    assert!(
        run.status.success(),
        "ORT: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    read_npy(&out).expect("ORT's output")
}

fn tuned_count(compiled: &CompiledModel) -> usize {
    compiled
        .sources()
        .iter()
        .filter(|(_, _, s)| matches!(s, NodeSource::Tuned(_)))
        .count()
}

/// A small CNN tuned for a few trials, deployed by the CLI, loaded back by
/// the CLI and the API with no database anywhere: tuned sources, the
/// artifact's graph (no passes), outputs that match ONNX Runtime and the
/// run before deploying.
#[test]
fn a_deployed_model_loads_without_search_and_matches() {
    let dir = Scratch::new("onnx-deploy-cnn");
    let path = write(&dir, "cnn.onnx", &small_cnn(13));
    let db = dir.join("tuning.db");
    let schedules = dir.join("schedules");
    ok(
        &tessera(&[
            "tune",
            s(&path),
            "--trials",
            "10",
            "--db",
            s(&db),
            "--remeasure",
            "0",
        ]),
        "tune",
    );
    let stdout = ok(
        &tessera(&["deploy", s(&path), "--db", s(&db), "--out", s(&schedules)]),
        "deploy",
    );
    assert!(
        stdout.contains("deployed") && stdout.contains("tuned"),
        "{stdout}"
    );
    let folder = model_dir(&schedules, &host_device().key(), &path);
    let artifact = ModelArtifact::read(&folder.join(MODEL_FILE)).expect("model.json");
    assert!(folder.join(GRAPH_FILE).is_file());
    assert!(
        artifact.passes.iter().any(|p| p == "fold_constants"),
        "{:?}",
        artifact.passes
    );
    let tuned_tasks = artifact
        .tasks
        .iter()
        .filter(|t| matches!(t.schedule, TaskSchedule::Artifact(_)))
        .count();
    assert!(tuned_tasks >= 1, "{:?}", artifact.tasks);
    assert!(artifact.memory.arena_bytes >= artifact.memory.lower_bound_bytes);
    // Deploying again changes no artifact; --json says so per task.
    let again = ok(
        &tessera(&[
            "deploy",
            s(&path),
            "--db",
            s(&db),
            "--out",
            s(&schedules),
            "--json",
        ]),
        "deploy --json",
    );
    let json: serde_json::Value = serde_json::from_str(&again).expect("JSON");
    let rows = json["tasks"].as_array().expect("tasks");
    assert_eq!(rows.len(), artifact.tasks.len(), "{json:#}");
    for row in rows {
        let outcome = row["outcome"].as_str().unwrap_or_default();
        assert!(outcome == "unchanged" || outcome == "-", "{row}");
    }
    for task in &artifact.tasks {
        if let TaskSchedule::Artifact(file) = &task.schedule {
            assert!(
                device_dir(&schedules, &host_device().key())
                    .join(file)
                    .is_file(),
                "{file}"
            );
        }
    }

    // The API: no database given, the artifact's graph, tuned kernels.
    let deployed = Model::load_deployed(&schedules, &path).expect("loads");
    assert!(
        matches!(deployed.origin, ModelOrigin::Artifact { .. }),
        "{}",
        deployed.origin
    );
    let library = Library::open(&schedules).expect("library");
    let mut compiled = deployed
        .compile(&library, Vec::new(), true)
        .expect("compiles");
    assert_eq!(
        tuned_count(&compiled),
        tuned_tasks.min(compiled.sources().len())
    );
    let x = HostTensor::random(&[1, 3, 8, 8], DType::F32, 7);
    let inputs = vec![("x".to_string(), x.clone())];
    let got = compiled.run(&inputs).expect("runs").remove(0).1;
    let undeployed = Model::load(&path).expect("imports");
    let want = undeployed
        .compile(&CompileOptions::default())
        .expect("compiles")
        .run(&inputs)
        .expect("runs")
        .remove(0)
        .1;
    let depth = rounding_depth(undeployed.graph()).max(1.0);
    assert_near(&got, &want, depth, "deployed vs undeployed");

    // The CLI: `run --from`, no database, tuned sources reported.
    let x_path = dir.join("x.npy");
    write_npy(&x_path, &x).unwrap();
    let y_path = dir.join("y.npy");
    let stdout = ok(
        &tessera(&[
            "run",
            s(&path),
            "--from",
            s(&schedules),
            "--input",
            &format!("x={}", x_path.display()),
            "--output",
            s(&y_path),
        ]),
        "run --from",
    );
    assert!(stdout.contains("graph: model artifact"), "{stdout}");
    assert!(
        stdout.contains(&format!("kernels: {} tuned", tuned_count(&compiled))),
        "{stdout}"
    );
    let cli = read_npy(&y_path).expect("y.npy");
    assert_eq!(cli, got, "the CLI and the API run the same kernels");
    if let Some(python) = ort_python("a_deployed_model_loads_without_search_and_matches") {
        let ort = ort_output(&python, &path, &x_path, &dir);
        assert_near(&got, &ort, depth, "deployed vs ONNX Runtime");
        // The stored graph is a valid ONNX model ORT runs the same.
        let ort_graph = ort_output(&python, &folder.join(GRAPH_FILE), &x_path, &dir);
        assert_near(&ort_graph, &ort, depth, "graph.onnx in ORT");
    }
}

/// Deploys `small_cnn(13)` with one record of its conv task (the default
/// steps) into `dir/schedules`: the model path and the schedules root.
fn deployed_cnn(dir: &Path) -> (PathBuf, PathBuf) {
    let path = write(dir, "cnn.onnx", &small_cnn(13));
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let (g, _) = Model::load(&path).unwrap().optimized().unwrap();
    let tasks = tessera::graph::tasks::model_tasks(&g, "cnn").expect("tasks");
    let task = tasks
        .tasks
        .iter()
        .map(|t| t.task.clone())
        .find(|t| t.family().starts_with("conv2d"))
        .expect("the conv group's task");
    let steps: Vec<Step> = Vec::new();
    let result: MeasureResult = ok_result(1e-5, 1.8e9);
    db.record_batch(&task, host_device(), &[(&steps, &result)])
        .expect("recorded");
    let schedules = dir.join("schedules");
    let options = ModelDeployOptions {
        out: schedules.clone(),
        ..ModelDeployOptions::default()
    };
    let report = deploy_model(&db, &host_device().key(), &path, &options).expect("deploys");
    assert!(
        report
            .artifact
            .tasks
            .iter()
            .any(|t| matches!(t.schedule, TaskSchedule::Artifact(_))),
        "the conv task is not deployed: {:?}",
        report.artifact.tasks
    );
    (path, schedules)
}

#[test]
fn a_changed_model_falls_back_to_the_onnx_with_the_reason() {
    let dir = Scratch::new("onnx-deploy-changed");
    let (_, schedules) = deployed_cnn(&dir);
    // Same file name, other weights: another SHA-256, the same workloads.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let mut changed = small_cnn(13);
    if let Some(g) = changed.graph.as_mut() {
        g.initializer[0] = floats("w", &[4, 3, 3, 3], ramp(108, 99));
    }
    let path = write(&other, "cnn.onnx", &changed);
    let deployed = Model::load_deployed(&schedules, &path).expect("loads");
    match &deployed.origin {
        ModelOrigin::Source { reason } => {
            assert!(reason.contains("is not the file deployed"), "{reason}");
        }
        other => panic!("expected the fallback, got {other}"),
    }
    // The kernels still come from the library: the workloads are the same.
    let library = Library::open(&schedules).expect("library");
    let mut compiled = deployed
        .compile(&library, Vec::new(), true)
        .expect("compiles");
    assert!(tuned_count(&compiled) >= 1);
    let x = HostTensor::random(&[1, 3, 8, 8], DType::F32, 3);
    let inputs = vec![("x".to_string(), x)];
    let got = compiled.run(&inputs).expect("runs").remove(0).1;
    let want = Model::load(&path)
        .unwrap()
        .compile(&CompileOptions::default())
        .unwrap()
        .run(&inputs)
        .unwrap()
        .remove(0)
        .1;
    assert_eq!(
        got, want,
        "the new weights are used, not the deployed graph's"
    );
    // The CLI says so in one line.
    let stdout = ok(
        &tessera(&[
            "model",
            "bench",
            s(&path),
            "--from",
            s(&schedules),
            "--no-ort",
            "--runs",
            "1",
        ]),
        "bench --from",
    );
    assert!(
        stdout.contains("no model artifact used:") && stdout.contains("is not the file deployed"),
        "{stdout}"
    );
}

#[test]
fn another_devices_library_gives_every_task_the_default_with_the_reason() {
    let dir = Scratch::new("onnx-deploy-other-device");
    let (path, schedules) = deployed_cnn(&dir);
    let mine = device_dir(&schedules, &host_device().key());
    let theirs = schedules.join("other-cpu-0123456789ab");
    std::fs::rename(&mine, &theirs).unwrap();
    let mut index = Index::read(&theirs.join(INDEX_FILE)).unwrap();
    index.device_key = "0123456789abcdef".into();
    index.device = "other-cpu".into();
    std::fs::write(
        theirs.join(INDEX_FILE),
        serde_json::to_string_pretty(&index).unwrap(),
    )
    .unwrap();
    let deployed = Model::load_deployed(&schedules, &path).expect("loads");
    match &deployed.origin {
        ModelOrigin::Source { reason } => {
            assert!(
                reason.contains("has one for: other-cpu-0123456789ab"),
                "{reason}"
            );
        }
        other => panic!("expected the fallback, got {other}"),
    }
    let library = Library::open(&schedules).expect("library");
    let compiled = deployed
        .compile(&library, Vec::new(), true)
        .expect("compiles");
    assert_eq!(tuned_count(&compiled), 0);
    for (name, _, source) in compiled.sources() {
        match source {
            NodeSource::Default(why) => assert!(
                why.contains("no tuned schedules for this device")
                    && why.contains("other-cpu-0123456789ab"),
                "{name}: {why}"
            ),
            NodeSource::Alias => {}
            NodeSource::Tuned(from) => panic!("{name} used another device's schedule {from}"),
        }
    }
}

/// A corrupted `model.json` is a fallback with the reason, not an error:
/// the `.onnx` at hand still gives the right answer (documented choice).
#[test]
fn a_corrupted_model_json_falls_back_with_the_reason() {
    let dir = Scratch::new("onnx-deploy-corrupt");
    let (path, schedules) = deployed_cnn(&dir);
    let json = model_dir(&schedules, &host_device().key(), &path).join(MODEL_FILE);
    let text = std::fs::read_to_string(&json).unwrap();
    std::fs::write(&json, &text[..text.len() / 2]).unwrap();
    let deployed = Model::load_deployed(&schedules, &path).expect("loads");
    match &deployed.origin {
        ModelOrigin::Source { reason } => assert!(
            reason.contains("not a tessera model artifact") && reason.contains("redeploy"),
            "{reason}"
        ),
        other => panic!("expected the fallback, got {other}"),
    }
    // A graph.onnx that is not the one model.json records: also a fallback.
    std::fs::write(&json, text).unwrap();
    let graph = json.with_file_name(GRAPH_FILE);
    let mut bytes = std::fs::read(&graph).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&graph, bytes).unwrap();
    let deployed = Model::load_deployed(&schedules, &path).expect("loads");
    match &deployed.origin {
        ModelOrigin::Source { reason } => {
            assert!(reason.contains("does not have the SHA-256"), "{reason}")
        }
        other => panic!("expected the fallback, got {other}"),
    }
}

#[test]
fn deploying_into_a_file_fails_and_writes_nothing() {
    let dir = Scratch::new("onnx-deploy-bad-out");
    let path = write(&dir, "cnn.onnx", &small_cnn(13));
    let db = dir.join("tuning.db");
    TuningDb::open(&db).expect("db");
    let file = dir.join("not-a-folder");
    std::fs::write(&file, "x").unwrap();
    let before: Vec<_> = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let out = tessera(&["deploy", s(&path), "--db", s(&db), "--out", s(&file)]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a folder"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    let after: Vec<_> = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(before.len(), after.len(), "{after:?}");
}

/// `x[16,24] · Wᵀ` (Gemm with transB: the registry's dense, a kernel of
/// its own: nothing follows it to fuse).
fn dense_model(dir: &Path) -> PathBuf {
    let nodes = vec![node(
        "Gemm",
        "fc",
        &["x", "w"],
        &["y"],
        vec![("transB", Attr::Int(1))],
    )];
    let m = model(
        13,
        graph(
            nodes,
            vec![value("x", &[Some(16), Some(24)])],
            vec![value("y", &[Some(16), Some(40)])],
            vec![floats("w", &[40, 24], ramp(960, 5))],
        ),
    );
    write(dir, "dense.onnx", &m)
}

/// A tuned schedule that reads the weight through one packing copy: the
/// model artifact lists it as prepacked, loading lays it out once (the
/// source says so), and the output is the unpacked kernel's, bit for bit.
#[test]
fn weights_are_laid_out_once_at_load_where_the_schedule_allows() {
    let dir = Scratch::new("onnx-deploy-prepack");
    let path = dense_model(&dir);
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let task = Task::from_registry("dense", "M=16,N=40,K=24").expect("dense");
    let steps = crate::deploy_layout::tensorized_dense();
    db.record_batch(&task, host_device(), &[(&steps, &ok_result(1e-5, 1.8e9))])
        .expect("recorded");
    let schedules = dir.join("schedules");
    let options = ModelDeployOptions {
        out: schedules.clone(),
        ..ModelDeployOptions::default()
    };
    let report = deploy_model(&db, &host_device().key(), &path, &options).expect("deploys");
    let fc = report
        .artifact
        .tasks
        .iter()
        .find(|t| t.readable.starts_with("dense"))
        .expect("the dense task");
    assert_eq!(fc.prepacked, vec!["weight".to_string()], "{fc:?}");

    let deployed = Model::load_deployed(&schedules, &path).expect("loads");
    assert!(deployed.from_artifact(), "{}", deployed.origin);
    let library = Library::open(&schedules).expect("library");
    let mut packed = deployed
        .compile(&library, Vec::new(), true)
        .expect("compiles");
    let mut plain = deployed
        .compile(&library, Vec::new(), false)
        .expect("compiles");
    match packed.sources()[0].2 {
        NodeSource::Tuned(from) => assert!(from.contains("w laid out ahead of time"), "{from}"),
        other => panic!("expected the tuned kernel, got {other}"),
    }
    match plain.sources()[0].2 {
        NodeSource::Tuned(from) => assert!(!from.contains("ahead of time"), "{from}"),
        other => panic!("expected the tuned kernel, got {other}"),
    }
    let x = HostTensor::random(&[16, 24], DType::F32, 11);
    let inputs = vec![("x".to_string(), x)];
    let got = packed.run(&inputs).unwrap();
    assert_eq!(got, plain.run(&inputs).unwrap());
    let want = Model::load(&path)
        .unwrap()
        .compile(&CompileOptions::default())
        .unwrap()
        .run(&inputs)
        .unwrap();
    assert_near(
        &got[0].1,
        &want[0].1,
        (24f64).sqrt(),
        "prepacked vs default",
    );
    // The CLI lays them out by default and says so; `--no-prepack` not.
    let x = dir.join("x.npy");
    write_npy(&x, &inputs[0].1).unwrap();
    let y = dir.join("y.npy");
    let from = ["--from", s(&schedules)];
    let input = format!("x={}", x.display());
    let run = [
        "run",
        s(&path),
        from[0],
        from[1],
        "--input",
        &input,
        "--output",
        s(&y),
    ];
    ok(&tessera(&run), "run");
    assert_eq!(read_npy(&y).unwrap(), got[0].1);
    let bench = [
        "model",
        "bench",
        s(&path),
        from[0],
        from[1],
        "--no-ort",
        "--runs",
        "1",
    ];
    let stdout = ok(&tessera(&bench), "bench");
    assert!(
        stdout.contains("weights:  laid out once at load"),
        "{stdout}"
    );
    let mut unpacked = bench.to_vec();
    unpacked.push("--no-prepack");
    let stdout = ok(&tessera(&unpacked), "bench --no-prepack");
    assert!(
        stdout.contains("weights:  in the model's layout"),
        "{stdout}"
    );
}

/// Graphs after the passes come back the same from their ONNX bytes, at
/// old and new opsets, with the ops whose attributes moved to inputs.
#[test]
fn graphs_round_trip_through_onnx() {
    let dir = Scratch::new("onnx-deploy-round-trip");
    let ops = |opset: i64| {
        let mut nodes = vec![
            node(
                "Transpose",
                "t",
                &["x"],
                &["xt"],
                vec![("perm", Attr::Ints(vec![1, 0]))],
            ),
            node(
                "Softmax",
                "sm",
                &["xt"],
                &["p"],
                vec![("axis", Attr::Int(1))],
            ),
            node(
                "Concat",
                "cat",
                &["p", "p2"],
                &["c"],
                vec![("axis", Attr::Int(0))],
            ),
            node("Exp", "p2", &["xt"], &["p2"], vec![]),
        ];
        // Keep the nodes in topological order.
        nodes.swap(2, 3);
        let (clip, slice, mean): (NodeWithInits, NodeWithInits, NodeWithInits) = if opset < 11 {
            (
                (
                    node(
                        "Clip",
                        "clip",
                        &["c"],
                        &["cl"],
                        vec![("min", Attr::Float(-0.5)), ("max", Attr::Float(0.75))],
                    ),
                    vec![],
                ),
                (
                    node(
                        "Slice",
                        "sl",
                        &["cl"],
                        &["s"],
                        vec![
                            ("starts", Attr::Ints(vec![1])),
                            ("ends", Attr::Ints(vec![9])),
                            ("axes", Attr::Ints(vec![1])),
                        ],
                    ),
                    vec![],
                ),
                (
                    node(
                        "ReduceMean",
                        "rm",
                        &["s"],
                        &["y"],
                        vec![("axes", Attr::Ints(vec![1]))],
                    ),
                    vec![],
                ),
            )
        } else {
            (
                (
                    node("Clip", "clip", &["c", "lo", ""], &["cl"], vec![]),
                    vec![floats("lo", &[], vec![-0.5])],
                ),
                (
                    node(
                        "Slice",
                        "sl",
                        &["cl", "st", "en", "ax", "sp"],
                        &["s"],
                        vec![],
                    ),
                    vec![
                        int64s("st", &[-2]),
                        int64s("en", &[i64::MIN]),
                        int64s("ax", &[1]),
                        int64s("sp", &[-3]),
                    ],
                ),
                if opset >= 18 {
                    (
                        node(
                            "ReduceMean",
                            "rm",
                            &["s", "rax"],
                            &["y"],
                            vec![("keepdims", Attr::Int(0))],
                        ),
                        vec![int64s("rax", &[1])],
                    )
                } else {
                    (
                        node(
                            "ReduceMean",
                            "rm",
                            &["s"],
                            &["y"],
                            vec![("axes", Attr::Ints(vec![1]))],
                        ),
                        vec![],
                    )
                },
            )
        };
        let mut inits = vec![];
        for (n, i) in [clip, slice, mean] {
            nodes.push(n);
            inits.extend(i);
        }
        nodes.push(node(
            "Gather",
            "g",
            &["c", "idx"],
            &["gy"],
            vec![("axis", Attr::Int(1))],
        ));
        inits.push(int64s("idx", &[3, -1, 0]));
        model(
            opset,
            graph(
                nodes,
                vec![value("x", &[Some(12), Some(6)])],
                vec![value("y", &[None]), value("gy", &[None])],
                inits,
            ),
        )
    };
    for opset in [9, 13, 18] {
        let path = write(&dir, &format!("ops{opset}.onnx"), &ops(opset));
        let imported = Model::load(&path).unwrap_or_else(|e| panic!("opset {opset}: {e}"));
        let (g, _) = imported.optimized().unwrap();
        let bytes = encode(&export(&g).unwrap_or_else(|e| panic!("opset {opset}: {e}")));
        let back = import_bytes(Path::new("back.onnx"), &bytes, &ImportOptions::default())
            .unwrap_or_else(|e| panic!("opset {opset}: {e}"));
        assert_eq!(back.nodes, g.nodes, "opset {opset}");
        assert_eq!((&back.inputs, &back.outputs), (&g.inputs, &g.outputs));
        for (name, value) in g.weights() {
            assert_eq!(back.constant(name), Some(value), "opset {opset}: {name}");
        }
        for node in &g.nodes {
            for t in node.inputs.iter().chain(&node.outputs) {
                assert_eq!(back.info(t), g.info(t), "opset {opset}: tensor {t}");
            }
        }
    }
    // Small CNNs (Conv, pools, Gemm, Reshape, BatchNormalization folded).
    for opset in [13, 17] {
        let path = write(&dir, &format!("cnn{opset}.onnx"), &small_cnn(opset));
        let (g, _) = Model::load(&path).unwrap().optimized().unwrap();
        let bytes = encode(&export(&g).unwrap());
        let back = import_bytes(Path::new("back.onnx"), &bytes, &ImportOptions::default()).unwrap();
        assert_eq!(back.nodes, g.nodes, "cnn opset {opset}");
        assert_eq!(back.constants, g.constants, "cnn opset {opset}");
    }
}

type NodeWithInits = (
    tessera::graph::onnx::proto::NodeProto,
    Vec<tessera::graph::onnx::proto::TensorProto>,
);

/// `tessera ci --onnx`: the model's tasks tuned and published, its model
/// artifact deployed, its latency before and after in the report; the
/// published folder runs it with `--from`.
#[test]
fn ci_on_a_model_tunes_deploys_and_reports_its_latency() {
    let dir = Scratch::new("onnx-deploy-ci");
    let path = dense_model(&dir);
    let out = dir.join("ci");
    let ci = |trials: &str| {
        let args = [
            "ci",
            "--onnx",
            s(&path),
            "--out",
            s(&out),
            "--trials-per-task",
            trials,
            "--remeasure",
            "0",
            "--allow-regression",
        ];
        ok(&tessera(&args), "ci --onnx")
    };
    let stdout = ci("1");
    assert!(
        stdout.contains("latency") && stdout.contains("(default) ->"),
        "{stdout}"
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("model_report.json")).expect("model_report.json"),
    )
    .expect("parses");
    assert!(
        report["after_ms"].as_f64().is_some_and(|t| t > 0.0),
        "{report:#}"
    );
    assert_eq!(report["before_from"], "default", "{report:#}");
    let schedules = out.join("schedules");
    let folder = model_dir(&schedules, &host_device().key(), &path);
    assert!(folder.join(MODEL_FILE).is_file(), "{stdout}");
    let deployed = Model::load_deployed(&schedules, &path).expect("loads");
    assert!(deployed.from_artifact(), "{}", deployed.origin);
    // A second run starts from the published folder.
    let stdout = ci("2");
    assert!(stdout.contains("(schedules) ->"), "{stdout}");
}
