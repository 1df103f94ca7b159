//! The `tessera` binary: `ops` and `show`, and its errors for bad input.

use crate::common;

use std::process::Output;

use common::tessera;
use tessera::ops;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn ops_lists_every_registered_op_one_per_line() {
    let out = tessera(&["ops"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), ops::registry().len());
    for (line, op) in lines.iter().zip(ops::registry()) {
        assert!(line.starts_with(op.name), "{line}");
        assert!(line.contains(op.description), "{line}");
        for p in op.params {
            assert!(
                line.contains(&format!(
                    "{}={}",
                    p.name,
                    p.default.expect("built-in ops have defaults")
                )),
                "{line}"
            );
        }
    }
    for name in [
        "matmul",
        "batch_matmul",
        "dense_bias_relu",
        "conv2d_nhwc",
        "conv2d_transpose",
        "conv2d_capsule",
        "softmax",
        "transpose_batch_matmul",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.split_whitespace().next() == Some(name))
        );
    }
}

#[test]
fn show_prints_the_dag_and_key() {
    let out = tessera(&[
        "show",
        "conv2d",
        "--shape",
        "N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(
        "workload:  conv2d[N=1,C=64,H=56,W=56,K=64,R=3,S=3,stride=1,pad=1,dilation=1,f32]#"
    ));
    assert!(text.contains("flops:     231211008"), "2·N·K·OH·OW·C·R·S");
    assert!(text.contains("pad = compute f32[1, 64, 58, 58]"));
    assert!(text.contains("conv2d = compute f32[1, 64, 56, 56]"));
    assert!(text.contains("canonical form:\ntessera-dag v1\np0 = placeholder f32[1, 64, 56, 56]"));
}

#[test]
fn show_passes_prints_the_ir_after_each_pass_in_order() {
    let shape = ["show", "matmul", "--shape", "M=64,N=64,K=64"];
    let plain = tessera(&shape);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let plain = stdout(&plain);
    let (header, final_ir) = plain.split_once("loop IR:\n").expect("a loop IR section");
    assert!(!plain.contains("== pass"), "{plain}");

    let out = tessera(&[&shape[..], &["--passes"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with(header), "the DAG part is the plain one");
    let (_, passes) = text
        .split_once("loop IR after each pass:\n")
        .expect("a pass section");
    let (passes, decisions) = passes
        .split_once("\ncodegen decisions:\n")
        .expect("codegen decisions after the passes");
    let sections: Vec<&str> = passes.split("\n== pass ").skip(1).collect();
    let names: Vec<&str> = tessera::tir::LOWERING_PASSES
        .iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(sections.len(), names.len(), "{passes}");
    for (n, (section, name)) in sections.iter().zip(&names).enumerate() {
        let head = format!("{}/{}: {name} (", n + 1, names.len());
        assert!(section.starts_with(&head), "{section}");
        let ir = &section[section.find("func matmul(").expect("IR after the pass")..];
        assert!(ir.trim_end().ends_with('}'), "{ir}");
        if n + 1 == names.len() {
            assert_eq!(ir, final_ir, "the last pass gives the plain loop IR");
        }
    }
    assert!(
        sections[1].contains("for k in 0..64"),
        "emit makes the loops"
    );
    assert_eq!(
        decisions,
        "vectorized loops: none\nallocated buffers: none\n"
    );
}

#[test]
fn show_passes_reports_vector_widths_and_promoted_buffers() {
    let out = tessera(&[
        "show",
        "matmul",
        "--shape",
        "M=64,N=64,K=64",
        "--schedule",
        "examples/schedules/matmul_tiled.json",
        "--passes",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let (_, decisions) = text
        .split_once("\ncodegen decisions:\n")
        .expect("codegen decisions");
    assert_eq!(
        decisions,
        "vectorized loops:
  B.local.i1 in 0..16: 4 chunks of 4 lanes, unrolled
  i1.init in 0..16: 4 chunks of 4 lanes, unrolled
  i1 in 0..16: 4 chunks of 4 lanes, unrolled
  i1.1 in 0..16: 4 chunks of 4 lanes, unrolled
allocated buffers:
  B.local: f32[64, 16] (in a parallel body): stack, 4096 bytes
  C.local: f32[2, 16] (in a parallel body): registers, 8 vectors of 4 lanes
"
    );
    assert!(
        text.contains("buffer C.local: f32[2, 16] local\n"),
        "{text}"
    );
}

/// Exit code 2, nothing on stdout, one line on stderr containing `parts`.
fn assert_rejected(args: &[&str], parts: &[&str]) {
    let out = tessera(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    for part in parts {
        assert!(err.contains(part), "{err:?} lacks {part:?}");
    }
}

#[test]
fn bad_input_is_a_one_line_error_with_exit_code_2() {
    assert_rejected(&["show", "conv9d"], &["unknown op 'conv9d'", "tessera ops"]);
    assert_rejected(
        &["show", "conv2d", "--shape", "X=3"],
        &["unknown shape parameter 'X'", "N,C,H,W,K,R,S"],
    );
    assert_rejected(&["show", "conv2d", "--shape", "H="], &["'H' has no value"]);
    assert_rejected(&["show", "conv2d", "--shape", "H"], &["'H' has no value"]);
    assert_rejected(&["show", "matmul", "--shape", "M=0"], &["'M'", "got 0"]);
    assert_rejected(&["show", "matmul", "--shape", "M=-4"], &["'M'", "got -4"]);
    assert_rejected(
        &["show", "matmul", "--shape", "M=ten"],
        &["'M' must be an integer", "'ten'"],
    );
    assert_rejected(
        &["show", "matmul", "--shape", "M=99999999999"],
        &["'M' must be between 1 and 1048576"],
    );
    assert_rejected(
        &["show", "matmul", "--shape", "M=2,M=3"],
        &["'M' is given twice"],
    );
    assert_rejected(
        &["show", "matmul", "--shape", "M=1000000,K=1000000"],
        &["matmul", "elements", "smaller shapes"],
    );
    assert_rejected(
        &["show", "conv2d", "--shape", "H=2,pad=0"],
        &["R=3", "H=2", "pad=0"],
    );
    assert_rejected(
        &[
            "tune",
            "matmul",
            "--shape",
            "M=8,N=8,K=8",
            "--constants",
            "W",
        ],
        &["'W' is not an input of matmul", "its inputs are A, B"],
    );
    assert_rejected(
        &[
            "tune",
            "matmul",
            "--shape",
            "M=8,N=8,K=8",
            "--flush",
            "weights",
        ],
        &[
            "--flush weights",
            "no task has constant weights",
            "--constants",
        ],
    );
    assert_rejected(
        &["tune", "matmul", "--shape", "M=8,N=8,K=8", "--prepack"],
        &["--prepack is for a model"],
    );
    assert_rejected(
        &["tune", "matmul", "--shape", "M=8,N=8,K=8", "--no-prepack"],
        &["--no-prepack is for a model"],
    );
    assert_rejected(
        &["show", "group_conv2d", "--shape", "C=6,groups=4"],
        &["groups=4", "C=6"],
    );
    assert_rejected(
        &["show", "max_pool2d", "--shape", "pad=2"],
        &["pad=2", "R=3"],
    );
    assert_rejected(
        &[
            "show",
            "conv2d_transpose",
            "--shape",
            "H=1,W=1,R=1,S=1,pad=3",
        ],
        &["pad=3"],
    );
}

#[test]
fn unknown_subcommand_exits_2() {
    let out = tessera(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bench_reports_gflops_peak_and_peers_as_json() {
    let out = tessera(&[
        "bench",
        "matmul",
        "--shape",
        "M=48,N=40,K=24",
        "--schedule",
        "examples/schedules/matmul_tiled.json",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)));
    for key in [
        "gflops",
        "peak_gflops",
        "peak_fraction",
        "compile_ms",
        "fraction_of_ceiling",
        "fraction_of_roofline",
        "arithmetic_intensity",
    ] {
        let v = report[key].as_f64().unwrap_or(-1.0);
        assert!(v > 0.0, "{key} = {v}");
    }
    assert_eq!(report["peak_fraction"], report["fraction_of_ceiling"]);
    assert_eq!(
        report["ceiling"]["compute_kind"], "f32x4",
        "no micro-kernel call"
    );
    assert!(report["machine_ceilings"]["widest"]["gflops"]["per_core"].as_f64() > Some(0.0));
    assert!(report["max_rel_error"].as_f64().is_some_and(|e| e < 1e-4));
    for peer in ["matrixmultiply", "gemm"] {
        assert!(
            report["peers"][peer].as_f64().is_some_and(|g| g > 0.0),
            "{peer}"
        );
    }
}

/// Every workload of a suite run reports the fraction of the ceiling that
/// applies to it and of the machine's roofline, both in (0, 1]: a fraction
/// above 1 means a ceiling is no upper bound. Compute- and bandwidth-bound
/// workloads, default schedules (no database: every one falls back).
#[test]
fn bench_never_reports_a_fraction_of_a_ceiling_above_one() {
    let dir = common::Scratch::new("bench-fractions");
    let suite = dir.join("suite.json");
    std::fs::write(
        &suite,
        r#"{"name": "fractions", "workloads": [
            {"label": "matmul", "op": "matmul", "shape": "M=96,N=80,K=64"},
            {"label": "relu", "op": "relu", "shape": "M=256,N=1024"},
            {"label": "bias_add", "op": "bias_add", "shape": "M=64,N=1000"},
            {"label": "softmax", "op": "softmax", "shape": "M=32,N=1024"}
        ]}"#,
    )
    .expect("writes the suite");
    let db = dir.join("none.db");
    let out = tessera(&[
        "bench",
        "--suite",
        &suite.to_string_lossy(),
        "--db",
        &db.to_string_lossy(),
        "--threads",
        "1",
        "--repeat",
        "3",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)));
    let workloads = report["workloads"].as_array().expect("workloads");
    assert_eq!(workloads.len(), 4);
    let mut bounds = Vec::new();
    for w in workloads {
        for key in [
            "fraction_of_ceiling",
            "fraction_of_roofline",
            "peak_fraction",
        ] {
            let fraction = w[key].as_f64().unwrap_or(f64::NAN);
            assert!(
                fraction > 0.0 && fraction <= 1.0,
                "{} {key} = {fraction}: {w}",
                w["label"]
            );
        }
        assert!(w["fraction_of_roofline"].as_f64() <= w["fraction_of_ceiling"].as_f64());
        bounds.push(
            w["ceiling"]["bound"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    assert_eq!(bounds[0], "compute", "matmul");
    assert_eq!(bounds[1], "bandwidth", "relu");
}

#[test]
fn bench_rejects_a_bad_schedule_file() {
    assert_rejected(
        &["bench", "matmul", "--schedule", "/nonexistent/steps.json"],
        &["cannot read /nonexistent/steps.json"],
    );
}

#[test]
fn measure_reports_every_candidate_and_the_throughput() {
    let out = tessera(&[
        "measure",
        "matmul",
        "--shape",
        "M=16,N=16,K=16",
        "--schedule",
        "examples/schedules/matmul_tiled.json",
        "--random",
        "3",
        "--workers",
        "2",
        "--min-repeat-ms",
        "1",
        "--no-record",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 4);
    for row in results {
        assert_eq!(row["result"]["error_kind"], "none", "{row}");
        assert!(row["gflops"].as_f64().expect("timed") > 0.0);
    }
    let summary = &report["summary"];
    assert_eq!(summary["candidates"], 4);
    assert!(summary["candidates_per_s"].as_f64().expect("rate") > 0.0);
    assert!(
        summary["workload"]
            .as_str()
            .expect("key")
            .starts_with("matmul[M=16,N=16,K=16,f32]#")
    );
}

#[test]
fn measure_and_device_reject_bad_input() {
    assert_rejected(
        &["measure", "matmul", "--shape", "M=16"],
        &["nothing to measure"],
    );
    assert_rejected(
        &[
            "measure",
            "matmul",
            "--random",
            "1",
            "--run-timeout=0",
            "--no-record",
        ],
        &["--run-timeout"],
    );
    assert_rejected(
        &[
            "measure",
            "matmul",
            "--random",
            "1",
            "--workers",
            "0",
            "--no-record",
        ],
        &["workers"],
    );
    let out = tessera(&["device"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("key:"));
}
