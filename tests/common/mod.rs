//! Helpers shared by the tests: small shapes for every op, random inputs,
//! comparison with a tolerance scaled by reduction length, the error bound
//! of an f32 dot product ([`error_bound`]), which micro-kernel ISAs a run
//! covers ([`isa_coverage`]), f64 math in double-double as an independent
//! oracle ([`double_double`]), running the binary ([`binary`]), the rows of
//! the ONNX Runtime comparison ([`ort_workloads`]) and folders that clean up
//! after themselves ([`scratch`]).
#![allow(dead_code)]

mod binary;
pub mod double_double;
mod error_bound;
mod isa_coverage;
pub mod onnx_models;
pub mod ort_workloads;
pub mod random_dag;
mod scratch;

#[allow(unused_imports)] // custom_op_cli runs itself, not the tessera binary
pub use binary::{package_root, tessera, tessera_command};
#[allow(unused_imports)] // the tensorize tests use these; the other test programs do not
pub use error_bound::{DOT_ERROR_CONSTANT, DotReference, f32_dot_error_bound};
#[allow(unused_imports)]
pub use isa_coverage::{IsaCoverage, REQUIRE_ISA_ENV, isa_coverage};
pub use scratch::Scratch;

use tessera::measure::{MeasureErrorKind, MeasureResult};
use tessera::ops;
use tessera::runtime::{DeviceDescription, host_device};
use tessera::te::{self, ComputeDag, DType, ExprKind, HostTensor};

/// Small, odd shapes for every registered op (with strides, padding,
/// dilation, groups where the op has them).
pub fn small_cases() -> Vec<(&'static str, Vec<(&'static str, i64)>)> {
    vec![
        ("matmul", vec![("M", 7), ("N", 9), ("K", 5)]),
        ("matmul_nt", vec![("M", 6), ("N", 5), ("K", 7)]),
        ("batch_matmul", vec![("B", 2), ("M", 5), ("N", 6), ("K", 3)]),
        ("dense", vec![("M", 3), ("N", 10), ("K", 6)]),
        ("dense_bias", vec![("M", 4), ("N", 7), ("K", 5)]),
        ("dense_bias_relu", vec![("M", 5), ("N", 6), ("K", 4)]),
        (
            "conv1d",
            vec![
                ("N", 1),
                ("C", 3),
                ("L", 11),
                ("K", 4),
                ("R", 3),
                ("stride", 2),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
        (
            "conv2d",
            vec![
                ("N", 1),
                ("C", 3),
                ("H", 7),
                ("W", 6),
                ("K", 4),
                ("R", 3),
                ("S", 3),
                ("stride", 1),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
        (
            "conv2d_nhwc",
            vec![
                ("N", 1),
                ("C", 2),
                ("H", 6),
                ("W", 7),
                ("K", 3),
                ("R", 3),
                ("S", 2),
                ("stride", 2),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
        (
            "group_conv2d",
            vec![
                ("N", 1),
                ("C", 4),
                ("H", 5),
                ("W", 5),
                ("K", 6),
                ("R", 3),
                ("S", 3),
                ("stride", 1),
                ("pad", 1),
                ("dilation", 1),
                ("groups", 2),
            ],
        ),
        (
            "depthwise_conv2d",
            vec![
                ("N", 1),
                ("C", 3),
                ("H", 7),
                ("W", 7),
                ("R", 3),
                ("S", 3),
                ("stride", 1),
                ("pad", 2),
                ("dilation", 2),
            ],
        ),
        (
            "conv3d",
            vec![
                ("N", 1),
                ("C", 2),
                ("D", 4),
                ("H", 4),
                ("W", 5),
                ("K", 2),
                ("T", 2),
                ("R", 3),
                ("S", 2),
                ("stride", 1),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
        (
            "conv2d_transpose",
            vec![
                ("N", 1),
                ("C", 2),
                ("H", 4),
                ("W", 3),
                ("K", 3),
                ("R", 3),
                ("S", 4),
                ("stride", 2),
                ("pad", 1),
            ],
        ),
        (
            "conv2d_capsule",
            vec![
                ("N", 1),
                ("H", 4),
                ("W", 4),
                ("C", 2),
                ("K", 2),
                ("R", 3),
                ("S", 3),
                ("stride", 1),
                ("pad", 1),
                ("cap", 2),
            ],
        ),
        ("norm", vec![("B", 3), ("M", 5), ("N", 7)]),
        (
            "max_pool2d",
            vec![
                ("N", 1),
                ("C", 2),
                ("H", 7),
                ("W", 8),
                ("R", 3),
                ("S", 3),
                ("stride", 2),
                ("pad", 1),
            ],
        ),
        (
            "avg_pool2d",
            vec![
                ("N", 1),
                ("C", 2),
                ("H", 6),
                ("W", 7),
                ("R", 2),
                ("S", 3),
                ("stride", 2),
                ("pad", 1),
            ],
        ),
        ("softmax", vec![("M", 5), ("N", 13)]),
        ("layer_norm", vec![("M", 4), ("N", 11)]),
        ("relu", vec![("M", 7), ("N", 9)]),
        ("gelu", vec![("M", 5), ("N", 6)]),
        ("bias_add", vec![("M", 6), ("N", 5)]),
        (
            "conv2d_bn_relu",
            vec![
                ("N", 1),
                ("H", 5),
                ("W", 6),
                ("C", 3),
                ("K", 4),
                ("R", 3),
                ("S", 3),
                ("stride", 1),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
        (
            "transpose_batch_matmul",
            vec![("B", 1), ("L", 5), ("H", 2), ("D", 3)],
        ),
        // Last, so that the random-schedule seeds of the ops above stay as they were.
        (
            "conv2d_bias",
            vec![
                ("N", 1),
                ("C", 3),
                ("H", 6),
                ("W", 7),
                ("K", 5),
                ("R", 3),
                ("S", 3),
                ("stride", 2),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
        (
            "conv2d_nhwc_bias",
            vec![
                ("N", 1),
                ("C", 3),
                ("H", 7),
                ("W", 6),
                ("K", 4),
                ("R", 3),
                ("S", 3),
                ("stride", 1),
                ("pad", 1),
                ("dilation", 1),
            ],
        ),
    ]
}

/// Two worker processes of this build's `tessera`, timing each candidate
/// once, briefly: for tests that tune in real workers.
pub fn fast_measurer() -> tessera::measure::Measurer {
    use tessera::measure::{MeasureOptions, Measurer, TimingOptions};
    Measurer::new(MeasureOptions {
        workers: 2,
        kernel_threads: 1,
        run_timeout: std::time::Duration::from_secs(20),
        timing: TimingOptions {
            warmup: 1,
            number: 1,
            repeat: 1,
            min_repeat_ms: 0.5,
            flush: tessera::measure::CacheFlush::Off,
        },
        worker_program: Some(std::path::PathBuf::from(env!("CARGO_BIN_EXE_tessera"))),
        ..MeasureOptions::default()
    })
    .expect("workers start")
}

/// `tessera tune` flags that keep a test run small and fast: one worker,
/// one short timed repeat, a small search, the random model.
pub const FAST_TUNE: &[&str] = &[
    "--workers",
    "1",
    "--min-repeat-ms",
    "1",
    "--repeat",
    "1",
    "--population",
    "16",
    "--generations",
    "1",
    "--model",
    "random",
];

/// Builds `op` at `params`.
pub fn build(op: &str, params: &[(&str, i64)]) -> ComputeDag {
    let spec = ops::find(op).unwrap_or_else(|e| panic!("{e}"));
    let shape = spec.shape(params).unwrap_or_else(|e| panic!("{e}"));
    spec.build(&shape).unwrap_or_else(|e| panic!("{e}"))
}

/// Deterministic random inputs for `dag`.
pub fn random_inputs(dag: &ComputeDag, seed: u64) -> Vec<HostTensor> {
    dag.inputs()
        .iter()
        .enumerate()
        .map(|(n, t)| {
            let shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
            HostTensor::random(&shape, DType::F32, seed * 31 + n as u64)
        })
        .collect()
}

/// The longest reduction of any stage (product of its reduction extents).
pub fn reduction_length(dag: &ComputeDag) -> usize {
    dag.stages()
        .iter()
        .filter_map(|t| t.compute_op())
        .map(|op| match op.body.kind() {
            ExprKind::Reduce(r) => r.axes.iter().map(|a| a.extent() as usize).product(),
            _ => 1,
        })
        .max()
        .unwrap_or(1)
}

/// √(Σ L) over a model graph's kernels (L: each DAG's longest reduction,
/// ≥ 1): the rounding of independent nodes adds in quadrature, so outputs
/// may differ by 8·ε·√(Σ L) relative to the largest one.
pub fn rounding_depth(graph: &tessera::graph::Graph) -> f64 {
    use tessera::graph::lower::{Lowered, lower_node};
    let total: usize = graph
        .nodes
        .iter()
        .map(|node| match lower_node(graph, node) {
            Ok(Lowered::Kernel(k)) => reduction_length(&k.dag).max(1),
            _ => 0,
        })
        .sum();
    (total as f64).sqrt()
}

/// The reference result.
pub fn reference(dag: &ComputeDag, inputs: &[HostTensor]) -> Vec<HostTensor> {
    te::evaluate(dag, inputs).unwrap_or_else(|e| panic!("reference: {e}"))
}

/// `got` equals `want` within the tolerance that grows with the reduction
/// length (f32 accumulation and reassociation change rounding), measured
/// here as the longest reduction of any stage.
pub fn assert_close(label: &str, got: &[HostTensor], want: &[HostTensor], reduction: usize) {
    assert_eq!(got.len(), want.len(), "{label}: number of outputs");
    let tol = tessera::measure::rounding_tolerance(reduction as f64);
    for (o, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape(), w.shape(), "{label}: shape of output {o}");
        let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let ok = (a - b).abs() <= tol * b.abs().max(1.0) || (a.is_infinite() && a == b);
            assert!(ok, "{label}: output {o}[{i}] = {a}, want {b} (tol {tol:e})");
        }
    }
}

/// A successful measurement of about `seconds` per run, taken at `timestamp`.
pub fn ok_result(seconds: f64, timestamp: f64) -> MeasureResult {
    MeasureResult {
        costs: vec![seconds, seconds * 1.01, seconds * 0.99],
        error_kind: MeasureErrorKind::None,
        error_msg: String::new(),
        build_secs: 0.001,
        run_secs: 0.1,
        max_rel_error: Some(1e-7),
        timestamp,
    }
}

/// A device that differs from this host only in one ISA feature.
pub fn other_device() -> DeviceDescription {
    let mut d = host_device().clone();
    d.features.push("has_imaginary_feature".into());
    d
}

/// The hand-tiled matmul schedule of `examples/schedules/matmul_tiled.json`.
pub fn tiled_steps() -> Vec<tessera::schedule::Step> {
    let text = std::fs::read_to_string("examples/schedules/matmul_tiled.json").expect("schedule");
    tessera::schedule::steps_from_json(&text).expect("steps")
}

/// Matmul's output column axis split by `factor`.
pub fn split_steps(factor: i64) -> Vec<tessera::schedule::Step> {
    tessera::schedule::steps_from_json(&format!(
        r#"[{{"kind":"split","stage":"C","iter":"i1","factors":[{factor}]}}]"#
    ))
    .expect("valid")
}

/// Records `steps` for `task` on this host in a new database in `dir` (as a
/// successful 10 µs measurement) and deploys it into `dir/schedules`:
/// the artifact written.
pub fn deploy_one_record(
    dir: &std::path::Path,
    task: &tessera::measure::Task,
    steps: &[tessera::schedule::Step],
) -> tessera::deploy::Artifact {
    let mut db = tessera::db::TuningDb::open(&dir.join("tuning.db")).expect("db");
    let result = ok_result(1e-5, 1.8e9);
    db.record_batch(task, host_device(), &[(steps, &result)])
        .expect("recorded");
    let options = tessera::deploy::DeployOptions {
        out: dir.join("schedules"),
        workloads: Vec::new(),
        force: false,
    };
    let report = tessera::deploy::deploy(&db, host_device(), &options).expect("deployed");
    let file = report.workloads[0].file.clone().expect("artifact");
    tessera::deploy::Artifact::read(&file).expect("artifact")
}
