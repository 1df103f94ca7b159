//! A user binary: this test program defines operators with `op!` (the
//! example's `ops.rs`, plus one without defaults) and *is* a tessera command
//! line, as a user's crate would be: with `TESSERA_CLI` set it hands its
//! arguments to `tessera::cli::run()`. The test runs itself that way and
//! checks that the custom ops appear in `ops`, tune for a few trials (their
//! measurement workers are this binary too), `show`, deploy, load through
//! `deploy::Library`, compute what the reference computes, and `bench` from
//! the deployed artifacts.
//!
//! It has its own `main` (`harness = false`): libtest's would take the
//! worker's `measure-worker` argument for a test filter.

mod common;
#[path = "../examples/custom_op/ops.rs"]
mod ops;

use std::path::Path;
use std::process::{Command, ExitCode, Output};

use common::{Scratch, assert_close, random_inputs, reduction_length, reference};
use ops::{attention_scores, dense_relu, rms_norm, shape_text};
use tessera::deploy::{KernelSource, Library};
use tessera::te::{ComputeDag, HostTensor};

/// Set in the environment of the child runs (and inherited by their
/// measurement workers): run as the tessera command line.
const AS_CLI: &str = "TESSERA_CLI";

tessera::op! {
    /// A shifted copy; no defaults, so `--shape` must give N.
    fn shifted(x: f32[N]) -> f32[N] {
        out[i] = if i > 0 { x[i - 1] } else { 0.0 }
    }
}

const DENSE: [i64; 3] = [16, 32, 24]; // M, K, N
const ATTENTION: [i64; 5] = [1, 2, 8, 4, 12]; // B, H, L, D, S

struct Test {
    name: &'static str,
    run: fn(),
}

const TESTS: &[Test] = &[
    Test {
        name: "custom_ops_are_listed_and_shown",
        run: custom_ops_are_listed_and_shown,
    },
    Test {
        name: "custom_ops_tune_deploy_load_and_bench",
        run: custom_ops_tune_deploy_load_and_bench,
    },
    Test {
        name: "a_required_parameter_must_be_given",
        run: a_required_parameter_must_be_given,
    },
    Test {
        name: "ort_rows_of_custom_ops_match_their_dags",
        run: ort_rows_of_custom_ops_match_their_dags,
    },
    Test {
        name: "every_sketch_of_rms_norm_with_its_row_fused_one_matches_the_reference",
        run: every_sketch_of_rms_norm_with_its_row_fused_one_matches_the_reference,
    },
];

fn main() -> ExitCode {
    if std::env::var_os(AS_CLI).is_some() {
        return ExitCode::from(tessera::cli::run() as u8);
    }
    // libtest-like: `--list`, and name filters (flags such as
    // --nocapture or --test-threads are accepted and ignored).
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for t in TESTS {
            println!("{}: test", t.name);
        }
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let exact = args.iter().any(|a| a == "--exact");
    let selected: Vec<&Test> = TESTS
        .iter()
        .filter(|t| {
            filters.is_empty()
                || filters.iter().any(|f| {
                    if exact {
                        t.name == f.as_str()
                    } else {
                        t.name.contains(f.as_str())
                    }
                })
        })
        .collect();
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for t in &selected {
        let outcome = std::panic::catch_unwind(t.run);
        println!(
            "test {} ... {}",
            t.name,
            if outcome.is_ok() { "ok" } else { "FAILED" }
        );
        if outcome.is_err() {
            failed.push(t.name);
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; {} filtered out\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len(),
        TESTS.len() - selected.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs this binary as the tessera command line.
fn cli(args: &[&str]) -> Output {
    let exe = std::env::current_exe().expect("the test binary's path");
    Command::new(exe)
        .env(AS_CLI, "1")
        .args(args)
        .output()
        .expect("runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn succeeded(args: &[&str]) -> String {
    let out = cli(args);
    assert!(
        out.status.success(),
        "`{}` failed: {}\n{}",
        args.join(" "),
        stderr(&out),
        stdout(&out)
    );
    stdout(&out)
}

fn custom_ops_are_listed_and_shown() {
    let listing = succeeded(&["ops"]);
    let line = |name: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} is not listed:\n{listing}"))
            .to_string()
    };
    let dense = line("dense_relu");
    assert!(dense.contains("M=64,K=256,N=256"), "{dense}");
    assert!(dense.contains("Dense layer with bias and ReLU."), "{dense}");
    assert!(
        dense.contains("registered at") && dense.contains("ops.rs"),
        "{dense}"
    );
    assert!(line("attention_scores").contains("B=2,H=4,L=64,D=32,S=64"));
    assert!(line("shifted").contains("N=?"));
    assert!(
        line("matmul").contains("M=512"),
        "built-ins are still listed"
    );

    let attention_shape = shape_text(attention_scores::PARAMS, &ATTENTION);
    let shown = succeeded(&["show", "attention_scores", "--shape", &attention_shape]);
    let key = attention_scores::dag(&ATTENTION)
        .expect("builds")
        .workload_key();
    assert!(shown.contains(&format!("workload:  {key}")), "{shown}");
    assert!(shown.contains("loop IR:"), "{shown}");
}

fn custom_ops_tune_deploy_load_and_bench() {
    let dir = Scratch::new("custom-cli-tune");
    let db = dir.join("tuning.db");
    let schedules = dir.join("schedules");
    let (db, schedules_text) = (
        db.to_str().expect("utf-8"),
        schedules.to_str().expect("utf-8"),
    );
    let dense_shape = shape_text(dense_relu::PARAMS, &DENSE);
    let attention_shape = shape_text(attention_scores::PARAMS, &ATTENTION);
    for (op, shape) in [
        ("dense_relu", &dense_shape),
        ("attention_scores", &attention_shape),
    ] {
        let tuned = succeeded(&[
            "tune", op, "--shape", shape, "--trials", "4", "--seed", "3", "--db", db,
        ]);
        assert!(tuned.contains(&format!("workload  {op}[")), "{tuned}");
        assert!(tuned.contains("best "), "{tuned}");
    }

    let deployed = succeeded(&["deploy", "--db", db, "--out", schedules_text, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&deployed).expect("deploy --json is JSON");
    let outcomes: Vec<(String, String)> = report["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .map(|w| {
            (
                w["workload"].as_str().expect("name").to_string(),
                w["outcome"].as_str().expect("outcome").to_string(),
            )
        })
        .collect();
    assert_eq!(outcomes.len(), 2, "{deployed}");
    assert!(outcomes.iter().all(|(_, o)| o == "written"), "{deployed}");

    let library = Library::open(&schedules).expect("the deployed folder opens");
    check_loaded(
        &library,
        &dense_relu::dag(&DENSE).expect("builds"),
        |kernel, inputs, out| {
            dense_relu::call(
                kernel,
                &f32s(&inputs[0]),
                &f32s(&inputs[1]),
                &f32s(&inputs[2]),
                out,
            )
            .expect("runs");
        },
    );
    check_loaded(
        &library,
        &attention_scores::dag(&ATTENTION).expect("builds"),
        |kernel, inputs, out| {
            attention_scores::call(kernel, &f32s(&inputs[0]), &f32s(&inputs[1]), out)
                .expect("runs");
        },
    );

    let bench = succeeded(&[
        "bench",
        "dense_relu",
        "--shape",
        &dense_shape,
        "--from",
        schedules_text,
        "--json",
        "--repeat",
        "3",
    ]);
    let bench: serde_json::Value = serde_json::from_str(&bench).expect("bench --json is JSON");
    assert_eq!(bench["source"], "tuned", "{bench}");
}

/// Loads `dag`'s deployed kernel, runs it through the op's typed `call`,
/// and compares with the reference interpreter.
fn check_loaded(
    library: &Library,
    dag: &ComputeDag,
    call: impl Fn(&tessera::codegen::Kernel, &[HostTensor], &mut [f32]),
) {
    let loaded = library.kernel(dag).expect("loads");
    assert!(
        matches!(loaded.source, KernelSource::Tuned { .. }),
        "{}: {:?}",
        dag.label(),
        loaded.source
    );
    let inputs = random_inputs(dag, 7);
    let want = reference(dag, &inputs);
    let mut got = vec![0.0f32; want[0].len()];
    call(&loaded.kernel, &inputs, &mut got);
    let got = HostTensor::from_f32(want[0].shape(), got).expect("the output's length");
    assert_close(dag.label(), &[got], &want, reduction_length(dag));
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    t.to_f64_vec().into_iter().map(|v| v as f32).collect()
}

fn a_required_parameter_must_be_given() {
    assert_eq!(shifted::PARAM_SPECS[0].default, None);
    let out = cli(&[
        "tune",
        "shifted",
        "--trials",
        "1",
        "--db",
        "/nonexistent/never-written.db",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("'N' has no default"),
        "{}",
        stderr(&out)
    );
    assert!(!Path::new("/nonexistent/never-written.db").exists());
    let shown = succeeded(&["show", "shifted", "--shape", "N=5"]);
    assert!(shown.contains("shifted[N=5,f32]"), "{shown}");
}

/// The rows of `bench/ort/workloads.json` that bench an op of this example
/// (the integration tests' registry has only the built-ins): their ONNX
/// inputs and outputs are the op's tensors, with their shapes.
fn ort_rows_of_custom_ops_match_their_dags() {
    let rows: Vec<_> = common::ort_workloads::load()
        .rows
        .into_iter()
        .filter(common::ort_workloads::is_custom)
        .collect();
    assert!(
        !rows.is_empty(),
        "no custom_op row in bench/ort/workloads.json"
    );
    for row in &rows {
        if let Err(e) = common::ort_workloads::check_row(row) {
            panic!("{}: {e}", row.name);
        }
    }
}

/// The example's rms_norm (`op!`), at shapes whose rows are no multiple of
/// the vector width: random fills of every sketch, the row-fused one (the
/// sum of squares and the per-row reciprocal inside the output's row loop)
/// among them, through the IR interpreter and the JIT against the reference.
fn every_sketch_of_rms_norm_with_its_row_fused_one_matches_the_reference() {
    use rand::SeedableRng;
    use tessera::codegen::{self, CodegenOptions};
    use tessera::runtime::Target;
    use tessera::search::{generate_sketches, materialize, random_decisions};

    let target = Target::from_env();
    let mut fused = 0;
    for shape in [[5, 37], [3, 70], [2, 7]] {
        let dag = rms_norm::dag(&shape).expect("builds");
        let inputs = random_inputs(&dag, 3);
        let want = reference(&dag, &inputs);
        for sketch in generate_sketches(&dag, &target) {
            fused += usize::from(sketch.name.contains("out:row_fusion(rstd,sum_sq)"));
            for seed in 0..3 {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                let decisions = random_decisions(&sketch, &mut rng);
                let label = format!("rms_norm {shape:?} [{}] {decisions:?}", sketch.name);
                let state = materialize(&dag, &sketch, &decisions)
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                let func = tessera::tir::lower(&state).unwrap_or_else(|e| panic!("{label}: {e}"));
                let interpreted =
                    tessera::tir::run(&func, &inputs).unwrap_or_else(|e| panic!("{label}: {e}"));
                assert_close(&label, &interpreted, &want, reduction_length(&dag));
                let kernel = codegen::compile(&func, &CodegenOptions::default())
                    .unwrap_or_else(|e| panic!("{label}: compile: {e}"));
                let got = kernel
                    .run_host(&inputs)
                    .unwrap_or_else(|e| panic!("{label}: run: {e}"));
                assert_close(&label, &got, &want, reduction_length(&dag));
            }
        }
    }
    assert!(fused >= 3, "only {fused} row-fused sketches over 3 shapes");
}
