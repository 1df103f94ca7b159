//! Whole models and one-node models of every supported operator, run by
//! tessera (default schedules, the JIT) and compared with ONNX Runtime's
//! outputs on the same inputs. The models and ORT's outputs come from
//! `bench/models/models.py` (seeded random weights and inputs); ORT runs
//! with graph optimisations off and one thread for the reference.
//!
//! Tolerance: each node adds rounding of order ε·√L relative to the size of
//! what it sums (L its longest reduction; reassociation and FMA change the
//! order), and the rounding of independent nodes adds in quadrature, so a
//! model's outputs may differ by 8·ε·√(Σ L) over its nodes, relative to the
//! largest reference output (plus that much absolute, for outputs near
//! zero). A wrong operator is off by far more than that.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tessera::graph::npy::read_npy;
use tessera::graph::onnx::ImportOptions;
use tessera::graph::{CompileOptions, Model};
use tessera::te::HostTensor;

use crate::common::Scratch;
use crate::common::onnx_models::ort_python;
use crate::common::{package_root, rounding_depth, tessera, tessera_command};

/// Runs `bench/models/models.py args` with `python`.
fn models_py(python: &Path, args: &[&str]) {
    let script = package_root().join("bench/models/models.py");
    let out = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "models.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Tensors by name.
type Named = Vec<(String, HostTensor)>;

/// The reference folder's inputs and expected outputs (by name).
fn manifest(dir: &Path) -> (Named, Named) {
    let text = std::fs::read_to_string(dir.join("manifest.json")).expect("manifest.json");
    let m: Value = serde_json::from_str(&text).expect("manifest parses");
    let load = |key: &str| -> Named {
        m[key]
            .as_array()
            .expect("a list")
            .iter()
            .map(|e| {
                let name = e["name"].as_str().expect("name").to_string();
                let file = dir.join(e["file"].as_str().expect("file"));
                (name, read_npy(&file).expect("reads the .npy"))
            })
            .collect()
    };
    (load("inputs"), load("outputs"))
}

/// The largest deviation of `got` from `want`, and what it may be.
struct Deviation {
    max_error: f64,
    allowed: f64,
}

/// Runs the model in tessera on the reference's inputs and compares every
/// output with ORT's.
fn compare(model_path: &Path, reference: &Path, label: &str) -> Deviation {
    let model = Model::load_with(model_path, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let (inputs, expected) = manifest(reference);
    let mut compiled = model
        .compile(&CompileOptions::default())
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let outputs = compiled
        .run(&inputs)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let depth = rounding_depth(model.graph()).max(1.0);
    let mut worst = Deviation {
        max_error: 0.0,
        allowed: f64::INFINITY,
    };
    for (name, want) in &expected {
        let Some((_, got)) = outputs.iter().find(|(n, _)| n == name) else {
            panic!("{label}: tessera gave no output '{name}'");
        };
        // ORT saves a 0-d output as 0-d; tessera's shapes are the graph's.
        assert_eq!(
            got.len(),
            want.len(),
            "{label}: output '{name}' has {:?}, ORT {:?}",
            got.shape(),
            want.shape()
        );
        let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
        let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
        let allowed = 8.0 * f64::from(f32::EPSILON) * depth * (scale + 1.0);
        let mut max_error = 0.0f64;
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let e = (a - b).abs();
            assert!(
                e.is_finite() && e <= allowed,
                "{label}: output '{name}'[{i}] = {a}, ONNX Runtime {b} (|Δ| {e:.3e} > {allowed:.3e}; largest output {scale:.3e})"
            );
            max_error = max_error.max(e);
        }
        if max_error / allowed > worst.max_error / worst.allowed.max(1e-300) {
            worst = Deviation { max_error, allowed };
        }
    }
    worst
}

#[test]
fn every_operator_case_matches_onnx_runtime() {
    let Some(python) = ort_python("onnx_vs_ort::operators") else {
        return;
    };
    let dir = Scratch::new("onnx-vs-ort-ops");
    let dir_s = dir.to_str().expect("utf-8 path");
    models_py(
        &python,
        &["ops", "--out-dir", dir_s, "--seed", "7", "--reference"],
    );
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).expect("cases"))
            .expect("cases.json parses");
    let cases = cases["cases"].as_array().expect("a list of cases");
    let mut op_types = std::collections::BTreeSet::new();
    let mut failed = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let model = dir.join(case["file"].as_str().expect("file"));
        let reference = dir.join(case["reference_dir"].as_str().expect("reference_dir"));
        // Every case runs; the failures are listed together.
        let run = std::panic::catch_unwind(|| compare(&model, &reference, name));
        if let Err(panic) = run {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(why);
        }
        op_types.insert(case["op"].as_str().expect("op").to_string());
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases differ from ONNX Runtime:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
    // Every operator the reader supports has at least one case.
    for op in tessera::graph::onnx::SUPPORTED_OP_TYPES {
        assert!(
            op_types.contains(*op) || ["Cast"].contains(op),
            "no one-node case exercises {op}"
        );
    }
    assert!(cases.len() >= 100, "only {} cases", cases.len());
}

/// Makes `what` (a `models.py` subcommand and its arguments) into
/// `dir/name.onnx`, its reference into `dir/name/`, and compares.
fn generated_model_matches(python: &Path, dir: &Path, name: &str, what: &[&str]) {
    let model: PathBuf = dir.join(format!("{name}.onnx"));
    let reference = dir.join(name);
    let model_s = model.to_str().expect("utf-8 path");
    let mut args: Vec<&str> = what.to_vec();
    args.extend(["--out", model_s, "--seed", "3"]);
    models_py(python, &args);
    models_py(
        python,
        &[
            "reference",
            model_s,
            "--inputs-dir",
            reference.to_str().expect("utf-8 path"),
            "--seed",
            "5",
        ],
    );
    let d = compare(&model, &reference, name);
    eprintln!(
        "{name}: largest |Δ| {:.3e} (allowed {:.3e})",
        d.max_error, d.allowed
    );
}

#[test]
fn the_bert_layer_and_the_mobilenet_block_match_onnx_runtime() {
    let Some(python) = ort_python("onnx_vs_ort::generated_models") else {
        return;
    };
    let dir = Scratch::new("onnx-vs-ort-generated");
    generated_model_matches(&python, &dir, "bert", &["bert"]);
    generated_model_matches(&python, &dir, "bert_ln_op", &["bert", "--layernorm", "op"]);
    generated_model_matches(&python, &dir, "mobilenet", &["mobilenet"]);

    // The same through the command line, as a user runs it: inputs and
    // outputs as .npy files, the output read back and compared.
    let reference = dir.join("mobilenet");
    let (_, expected) = manifest(&reference);
    let listing: Value = serde_json::from_str(
        &std::fs::read_to_string(reference.join("manifest.json")).expect("manifest.json"),
    )
    .expect("manifest parses");
    let model = dir.join("mobilenet.onnx");
    let mut args = vec!["run".to_string(), model.display().to_string()];
    for input in listing["inputs"].as_array().expect("inputs") {
        let name = input["name"].as_str().expect("name");
        let file = reference.join(input["file"].as_str().expect("file"));
        args.extend(["--input".to_string(), format!("{name}={}", file.display())]);
    }
    let (out_name, want) = &expected[0];
    let out_file = dir.join("cli_out.npy");
    args.extend([
        "--output".to_string(),
        format!("{out_name}={}", out_file.display()),
    ]);
    let out = tessera(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("wrote ") && stdout.contains("on the default schedule"),
        "{stdout}"
    );
    let got = read_npy(&out_file).expect("the output file");
    assert_eq!(got.shape(), want.shape());
    let worst = got
        .to_f64_vec()
        .iter()
        .zip(want.to_f64_vec())
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        worst < 1e-4,
        "tessera run differs from ONNX Runtime by {worst}"
    );

    // `model bench --json`: tessera's latency next to ONNX Runtime's.
    let out = tessera_command(&[
        "model",
        "bench",
        model.to_str().expect("utf-8 path"),
        "--runs",
        "2",
        "--warmup",
        "1",
        "--json",
    ])
    .env("TESSERA_PYTHON", &python)
    .output()
    .expect("tessera runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        report["latency_ms"].as_f64().is_some_and(|v| v > 0.0),
        "{report}"
    );
    assert!(
        report["ort_latency_ms"].as_f64().is_some_and(|v| v > 0.0),
        "{report}"
    );
    let (arena, bound, all) = (
        report["arena_bytes"].as_u64().expect("arena_bytes"),
        report["arena_lower_bound_bytes"]
            .as_u64()
            .expect("lower bound"),
        report["all_intermediate_bytes"]
            .as_u64()
            .expect("intermediates"),
    );
    assert!(bound > 0 && bound <= arena && arena < all, "{report}");
    // One entry per node of the graph that runs: the one after the passes,
    // fused.
    let nodes = report["nodes"].as_array().expect("nodes");
    let (optimized, _) = Model::load(&model)
        .expect("loads")
        .optimized()
        .expect("the passes run");
    let fused = tessera::graph::fusion::fuse(&optimized, &[]).expect("fuses");
    assert_eq!(nodes.len(), fused.graph.nodes.len());
    assert!(fused.graph.nodes.len() < optimized.nodes.len());
    assert!(
        nodes
            .iter()
            .all(|n| n["source"] == "default" || n["source"] == "alias")
    );

    // `bench/ort/nodes.py`: that report joined with ORT's profiler, per
    // kind of kernel; every convolution group gets ORT time of its own.
    let report_file = dir.join("bench.json");
    std::fs::write(&report_file, &out.stdout).expect("writes the report");
    let joined = Command::new(&python)
        .arg(package_root().join("bench/ort/nodes.py"))
        .args([&model, &report_file])
        .args(["--runs", "3"])
        .output()
        .expect("python runs");
    let table = String::from_utf8_lossy(&joined.stdout);
    assert!(
        joined.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&joined.stderr)
    );
    let conv_rows: Vec<Vec<f64>> = table
        .lines()
        .filter(|l| l.contains("conv") || l.contains("matmul"))
        .map(|l| {
            l.split_whitespace()
                .take(2)
                .map(|v| v.parse().unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    assert!(!conv_rows.is_empty(), "{table}");
    assert!(
        conv_rows
            .iter()
            .all(|r| r.len() == 2 && r[0] > 0.0 && r[1] > 0.0),
        "{table}"
    );
}

/// The light models `names`, with random weights, against ONNX Runtime.
fn real_cnns_match(test: &str, names: &[&str]) {
    let Some(python) = ort_python(test) else {
        return;
    };
    let dir = Scratch::new(&format!("onnx-vs-ort-{}", names.join("-")));
    for name in names {
        generated_model_matches(&python, &dir, name, &["light", name]);
    }
}

// Two tests, so that the test threads share the models; VGG-19, whose 20
// GFLOP run on the default schedules is two minutes of a debug build (and
// whose plain conv, pool and dense nodes the others cover), runs with
// `--ignored`.
#[test]
fn the_real_cnns_with_random_weights_match_onnx_runtime() {
    real_cnns_match(
        "onnx_vs_ort::real_models",
        &["squeezenet", "shufflenet", "resnet50", "inception_v1"],
    );
}

#[test]
fn the_real_cnns_with_random_weights_match_onnx_runtime_2() {
    real_cnns_match(
        "onnx_vs_ort::real_models_2",
        &["inception_v2", "densenet121", "bvlc_alexnet", "zfnet512"],
    );
}

#[test]
#[ignore = "two minutes of a debug build; run with --ignored (or in release)"]
fn the_real_cnns_with_random_weights_match_onnx_runtime_vgg19() {
    real_cnns_match("onnx_vs_ort::real_models_vgg19", &["vgg19"]);
}
