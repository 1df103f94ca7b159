//! A model's tasks: the fused groups of ResNet-50 and of the BERT layer,
//! their count and keys, the same in every process; a task tuned in one
//! model is the same task, with the same records, in another.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::onnx_models::{generated_model, node, ort_python, value, write};
use crate::common::{Scratch, tessera};
use tessera::graph::tasks::{ModelTasks, model_tasks};
use tessera::graph::{CompileOptions, Model, NodeSource};

fn tasks_of(path: &Path) -> ModelTasks {
    let model = Model::load(path).expect("loads");
    let (optimized, _) = model.optimized().expect("the passes run");
    model_tasks(&optimized, "m").expect("tasks")
}

/// Task family → (distinct tasks, kernels).
fn families(tasks: &ModelTasks) -> BTreeMap<String, (usize, f64)> {
    let mut out: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    for t in &tasks.tasks {
        let entry = out.entry(t.task.family().to_string()).or_default();
        entry.0 += 1;
        entry.1 += t.weight;
    }
    out
}

/// The keys of `tasks` must be printed by `model show --passes`, which runs
/// in another process: the keys do not depend on the process.
fn assert_keys_in_another_process(path: &Path, tasks: &ModelTasks) {
    let out = tessera(&["model", "show", "--passes", path.to_str().expect("utf-8")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for t in &tasks.tasks {
        // Groups of one node are listed with the nodes, not as groups.
        if t.task.family().contains('+') {
            let key = t.task.key().to_string();
            assert!(text.contains(&key), "{key} not in model show:\n{text}");
        }
    }
}

#[test]
fn the_tasks_of_resnet50_and_the_bert_layer_are_stable() {
    let Some(python) = ort_python("onnx_tasks::stable") else {
        return;
    };
    let dir = Scratch::new("onnx-tasks-stable");
    let resnet = generated_model(&python, &dir, "r50", &["light", "resnet50"]);
    let bert = generated_model(&python, &dir, "bert", &["bert"]);
    for (path, kernels, expected) in [
        (
            &resnet,
            58.0,
            &[
                // Channels last: the pools as te DAGs, and the image's
                // layout transform.
                ("AveragePool", 1, 1.0),
                ("MaxPool", 1, 1.0),
                ("Transpose", 1, 1.0),
                // The stem, the 3×3s and the strided 1×1 projections.
                ("conv2d_nhwc_bias", 3, 3.0),
                ("conv2d_nhwc_bias+Relu", 8, 17.0),
                ("dense_bias", 1, 1.0),
                // The pointwise convolutions, as matrix products.
                ("matmul+Add", 1, 1.0),
                ("matmul+Add+Relu", 8, 16.0),
                ("matmul+Add+Sum+Relu", 4, 16.0),
                ("softmax", 1, 1.0),
            ][..],
        ),
        (
            &bert,
            15.0,
            &[
                ("LayerNormalization", 1, 2.0),
                ("batch_matmul", 1, 1.0),
                ("batch_matmul+Div+Add", 1, 1.0),
                ("matmul+Add", 1, 3.0),
                ("matmul+Add+Add", 2, 2.0),
                ("matmul+Add+Div+Erf+Add+Mul+Mul", 1, 1.0),
                ("Transpose", 3, 4.0),
                ("softmax", 1, 1.0),
            ][..],
        ),
    ] {
        let first = tasks_of(path);
        assert_eq!(first.kernels(), kernels, "{}", path.display());
        let got = families(&first);
        let want: BTreeMap<String, (usize, f64)> = expected
            .iter()
            .map(|(f, n, w)| (f.to_string(), (*n, *w)))
            .collect();
        assert_eq!(got, want, "{}", path.display());
        // The same keys again, and in another process.
        let again = tasks_of(path);
        let keys = |t: &ModelTasks| -> Vec<String> {
            t.tasks.iter().map(|t| t.task.key().hash.clone()).collect()
        };
        assert_eq!(keys(&first), keys(&again));
        assert_keys_in_another_process(path, &first);
    }
}

/// conv + bias + relu, then (`extra`) another convolution.
fn conv_relu_model(extra: bool) -> tessera::graph::onnx::proto::ModelProto {
    use crate::common::onnx_models::{floats, graph, model, ramp};
    let mut nodes = vec![
        node("Conv", "conv", &["x", "w", "b"], &["c"], vec![]),
        node("Relu", "relu", &["c"], &["r"], vec![]),
    ];
    let mut output = "r";
    if extra {
        nodes.push(node("Conv", "conv2", &["r", "w2"], &["y"], vec![]));
        output = "y";
    }
    let mut inits = vec![
        floats("w", &[4, 3, 1, 1], ramp(12, 3)),
        floats("b", &[4], ramp(4, 5)),
    ];
    if extra {
        inits.push(floats("w2", &[2, 4, 1, 1], ramp(8, 7)));
    }
    let out_channels = if extra { 2 } else { 4 };
    model(
        13,
        graph(
            nodes,
            vec![value("x", &[Some(1), Some(3), Some(6), Some(6)])],
            vec![value(
                output,
                &[Some(1), Some(out_channels), Some(6), Some(6)],
            )],
            inits,
        ),
    )
}

#[test]
fn a_task_tuned_in_one_model_is_tuned_in_another_that_contains_it() {
    let dir = Scratch::new("onnx-tasks-shared");
    let small = write(&dir, "small.onnx", &conv_relu_model(false));
    let large = write(&dir, "large.onnx", &conv_relu_model(true));
    let small_tasks = tasks_of(&small);
    let large_tasks = tasks_of(&large);
    // Channels last: the image's layout transform, the convolution, and
    // the transform of the result back.
    let families: Vec<&str> = small_tasks.tasks.iter().map(|t| t.task.family()).collect();
    assert_eq!(families, ["Transpose", "matmul+Add+Relu", "Transpose"]);
    let shared = &small_tasks.tasks[1].task;
    // The pointwise convolution runs as a matrix product: the input viewed
    // as [36, 3] times the weight [3, 4], plus the bias, then the ReLU.
    // The weight and bias are the model's constants: candidates are
    // measured with them laid out ahead of time; the data (the product's
    // left operand) is an input.
    let inputs: Vec<&str> = shared.dag().inputs().iter().map(|t| t.name()).collect();
    let [_data, weight, bias] = inputs.as_slice() else {
        panic!("the data, the weight and the bias; the inputs are {inputs:?}");
    };
    let mut constants = vec![*weight, *bias];
    constants.sort_unstable();
    assert_eq!(shared.constants(), constants, "the inputs are {inputs:?}");
    let plain = small_tasks.clone().without_constants();
    assert!(plain.tasks.iter().all(|t| t.task.constants().is_empty()));
    assert!(
        large_tasks
            .tasks
            .iter()
            .any(|t| t.task.key() == shared.key()),
        "the larger model has the task"
    );
    // Four trials of the small model into `db`, with `extra` flags: the
    // weights laid out ahead of time by default, as deployed, or timed as
    // inputs with `--no-prepack`; its report says which.
    let tune_small = |db: &Path, extra: &[&str], weights: &str| {
        let mut args = vec![
            "tune",
            small.to_str().expect("utf-8"),
            "--trials",
            "4",
            "--db",
            db.to_str().expect("utf-8"),
            "--remeasure",
            "0",
        ];
        args.extend_from_slice(extra);
        let out = tessera(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(weights),
            "{args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let db = dir.join("tuning.db");
    tune_small(&db, &[], "weights   laid out ahead of time");
    tune_small(
        &dir.join("as_inputs.db"),
        &["--no-prepack"],
        "weights   measured as inputs",
    );
    let db = tessera::db::TuningDb::open(&db).expect("opens");
    let model = Model::load(&large).expect("loads");
    let compiled = model
        .compile(&CompileOptions {
            db: Some(&db),
            ..CompileOptions::default()
        })
        .expect("compiles");
    let sources = compiled.sources();
    let (_, _, source) = sources
        .iter()
        .find(|(name, _, _)| name.starts_with("conv+"))
        .expect("the conv group");
    assert!(
        matches!(source, NodeSource::Tuned(from) if from.contains("matmul+Add+Relu")),
        "{source}"
    );
    // The image's layout transform is a task of both models; the rest of
    // the larger model was never tuned.
    let (_, _, source) = sources
        .iter()
        .find(|(name, _, _)| name.starts_with("x.channels_last"))
        .expect("the image's layout transform");
    assert!(matches!(source, NodeSource::Tuned(_)), "{source}");
    assert!(
        sources
            .iter()
            .filter(|(name, _, _)| !name.starts_with("conv+") && !name.starts_with("x."))
            .all(|(_, _, s)| !matches!(s, NodeSource::Tuned(_))),
        "{sources:?}"
    );
}
