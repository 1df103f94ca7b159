//! The memory plan on real models: the arena of ResNet-50 and the BERT
//! layer against the lower bound (issue #24's target: at most 1.1×), and
//! SqueezeNet computing bit for bit the same with the plan's reuse as with
//! every tensor kept apart. Models come from `bench/models/models.py`.

use std::path::Path;

use tessera::graph::memory::MemoryPlan;
use tessera::graph::{CompileOptions, Model};
use tessera::te::{DType, HostTensor};

use crate::common::Scratch;
use crate::common::onnx_models::{generated_model, ort_python};
use crate::common::tessera;

/// Writes `models.py what… --out dir/name.onnx` and loads it.
fn generated(python: &Path, dir: &Path, name: &str, what: &[&str]) -> (Model, String) {
    let path = generated_model(python, dir, name, what);
    let model = Model::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    (model, path.display().to_string())
}

#[test]
fn the_arena_of_resnet50_and_the_bert_layer_is_within_a_tenth_of_the_lower_bound() {
    let Some(python) = ort_python("onnx_memory_plan::arena_bound") else {
        return;
    };
    let dir = Scratch::new("memory-plan-bound");
    for (name, what) in [
        ("resnet50", &["light", "resnet50"][..]),
        ("bert", &["bert"][..]),
    ] {
        let (model, path) = generated(&python, &dir, name, what);
        let plan = MemoryPlan::of_graph(model.graph(), &[]).expect("plans");
        eprintln!(
            "{name}: {plan}; arena {} B, lower bound {} B, ratio {:.4}",
            plan.arena_bytes,
            plan.lower_bound_bytes,
            plan.arena_bytes as f64 / plan.lower_bound_bytes as f64
        );
        assert!(plan.arena_bytes >= plan.lower_bound_bytes, "{name}: {plan}");
        assert!(
            plan.arena_bytes as f64 <= 1.1 * plan.lower_bound_bytes as f64,
            "{name}: {plan}"
        );
        assert!(
            plan.arena_bytes * 2 < plan.all_intermediate_bytes,
            "{name}: the plan reuses little: {plan}"
        );
        // `model show` prints the same line.
        let shown = tessera(&["model", "show", &path]);
        let stdout = String::from_utf8_lossy(&shown.stdout);
        assert!(
            shown.status.success(),
            "{}",
            String::from_utf8_lossy(&shown.stderr)
        );
        assert!(stdout.contains(&format!("memory:    {plan}")), "{stdout}");
    }
}

#[test]
fn squeezenet_computes_the_same_with_the_memory_plan_as_without() {
    let Some(python) = ort_python("onnx_memory_plan::squeezenet") else {
        return;
    };
    let dir = Scratch::new("memory-plan-squeezenet");
    let (model, _) = generated(&python, &dir, "squeezenet", &["light", "squeezenet"]);
    let graph = model.graph();
    let inputs: Vec<(String, HostTensor)> = graph
        .inputs
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let value = HostTensor::random(graph.shape(name), DType::F32, 11 + i as u64);
            (name.clone(), value)
        })
        .collect();
    // Unfused, so that the ReLUs are nodes of their own that can run in place.
    let unfused = CompileOptions {
        fuse: false,
        ..CompileOptions::default()
    };
    let mut planned = model.compile(&unfused).expect("compiles");
    let plan = planned.memory_plan().clone();
    eprintln!("squeezenet: {plan}");
    assert!(!plan.in_place.is_empty(), "squeezenet's ReLUs run in place");
    // The same graph after the passes, every node output kept to the end:
    // no two tensors share bytes (the tensors the passes make, like a
    // pointwise convolution's product before its bias, included).
    let (optimized, _) = model.optimized().expect("the passes run");
    let every: Vec<String> = optimized
        .nodes
        .iter()
        .flat_map(|n| n.outputs.clone())
        .collect();
    let mut apart = Model::from_graph(optimized)
        .compile(&CompileOptions {
            keep: every,
            passes: false,
            ..CompileOptions::default()
        })
        .expect("compiles");
    assert!(apart.memory_plan().in_place.is_empty());
    assert!(apart.memory_plan().arena_bytes >= plan.all_intermediate_bytes);
    let want = apart.run(&inputs).expect("runs");
    let got = planned.run(&inputs).expect("runs");
    assert_eq!(want.len(), got.len());
    for ((name, w), (_, g)) in want.iter().zip(&got) {
        let (w, g) = (w.as_f32().expect("f32"), g.as_f32().expect("f32"));
        assert!(w.iter().all(|v| v.is_finite()), "{name}: not finite");
        assert_eq!(w, g, "{name} differs with the memory plan");
    }
    // Fused (the default), planned over the groups: the same values.
    let mut fused = model.compile(&CompileOptions::default()).expect("compiles");
    assert!(fused.memory_plan().arena_bytes <= plan.arena_bytes);
    for ((name, w), (_, f)) in want.iter().zip(&fused.run(&inputs).expect("runs")) {
        assert_eq!(w.as_f32(), f.as_f32(), "{name} differs when fused");
    }
}

#[test]
fn an_intermediate_overwritten_in_place_is_kept_when_asked_for() {
    use crate::common::onnx_models::{small_cnn, write};
    use tessera::graph::npy::{read_npy, write_npy};

    let dir = Scratch::new("memory-plan-keep");
    let path = write(&dir, "cnn.onnx", &small_cnn(13));
    let model = Model::load(&path).expect("loads");
    let x = HostTensor::random(model.graph().shape("x"), DType::F32, 5);
    let inputs = vec![("x".to_string(), x.clone())];

    // Unfused, the ReLU overwrites the convolution's output `c` (fused, `c`
    // is no buffer at all), both channels last.
    let mut compiled = model
        .compile(&CompileOptions {
            fuse: false,
            ..CompileOptions::default()
        })
        .expect("compiles");
    assert!(
        compiled
            .memory_plan()
            .in_place
            .iter()
            .any(|p| p.input == "c.channels_last" && p.output == "r.channels_last"),
        "{:?}",
        compiled.memory_plan().in_place
    );
    compiled.run(&inputs).expect("runs");
    let err = compiled.tensor("c").expect_err("c is overwritten");
    assert!(err.to_string().contains("--output c=FILE.npy"), "{err}");

    let mut kept = model
        .compile(&CompileOptions {
            keep: vec!["c".into()],
            ..CompileOptions::default()
        })
        .expect("compiles");
    kept.run(&inputs).expect("runs");
    let c = kept.tensor("c").expect("kept");
    let c = c.as_f32().expect("f32");
    assert!(c.iter().any(|v| *v < 0.0), "c holds ReLU's output");

    // The command line keeps what --output names.
    let x_file = dir.join("x.npy");
    write_npy(&x_file, &x).expect("writes");
    let c_file = dir.join("c.npy");
    let out = tessera(&[
        "run",
        path.to_str().expect("utf-8"),
        "--input",
        &format!("x={}", x_file.display()),
        "--output",
        &format!("c={}", c_file.display()),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_cli = read_npy(&c_file).expect("reads");
    assert_eq!(from_cli.as_f32().expect("f32"), c);
}
