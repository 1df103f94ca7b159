//! The ONNX Runtime comparison (`bench/ort/`) without ONNX Runtime: its
//! workload file parses and every built-in row's ONNX inputs and outputs
//! are the tensors of the DAG tessera benches, with their shapes (the
//! `op!` rows are checked by `custom_op_cli`, whose registry has them);
//! the rows the issue asks for are there; a wrong shape or name is caught;
//! and `tessera bench --save-io`, which the harness compares ORT with,
//! writes the inputs and outputs it ran on as `.npy` files and `io.json`.

use crate::common;
use common::ort_workloads::{self, Row, check_row, is_custom};
use common::{Scratch, tessera};

use tessera::ops;

#[test]
fn every_builtin_row_matches_its_dag() {
    let workloads = ort_workloads::load();
    assert!(workloads.opset >= 17, "LayerNormalization needs opset 17");
    let mut names = std::collections::BTreeSet::new();
    for row in &workloads.rows {
        assert!(names.insert(&row.name), "row name {} twice", row.name);
        if is_custom(row) {
            assert!(
                ops::find(&row.op).is_err(),
                "{}: {} is a built-in op, not one of the custom_op example",
                row.name,
                row.op
            );
            continue;
        }
        assert_eq!(row.binary, None, "{}: unknown binary", row.name);
        if let Err(e) = check_row(row) {
            panic!("{}: {e}", row.name);
        }
    }
}

#[test]
fn the_rows_of_issue_21_and_22_are_there() {
    let workloads = ort_workloads::load();
    let count = |op: &str| workloads.rows.iter().filter(|r| r.op == op).count();
    for (op, at_least) in [
        ("softmax", 1),
        ("layer_norm", 2),
        ("gelu", 1),
        ("bias_add", 1),
        ("max_pool2d", 1),
        ("avg_pool2d", 1),
        ("depthwise_conv2d", 2),
        ("matmul", 3),
        ("batch_matmul", 1),
        ("dense_bias_relu", 1),
        ("conv2d", 2),
    ] {
        assert!(count(op) >= at_least, "fewer than {at_least} {op} rows");
    }
    let strides: Vec<&str> = workloads
        .rows
        .iter()
        .filter(|r| r.op == "depthwise_conv2d")
        .map(|r| r.shape.as_str())
        .collect();
    assert!(strides.iter().any(|s| s.contains("stride=1")));
    assert!(strides.iter().any(|s| s.contains("stride=2")));
    assert!(
        workloads.rows.iter().any(is_custom),
        "no op! operator against its ONNX graph"
    );
}

fn softmax_row() -> Row {
    ort_workloads::load()
        .rows
        .into_iter()
        .find(|r| r.op == "softmax")
        .expect("a softmax row")
}

#[test]
fn a_wrong_shape_name_or_wiring_is_caught() {
    let mut row = softmax_row();
    row.inputs[0].shape = vec![128, 1023];
    assert!(
        check_row(&row)
            .unwrap_err()
            .contains("tessera's x is [128, 1024]")
    );

    let mut row = softmax_row();
    row.inputs[0].shape = vec![1024, 128];
    row.inputs[0].reshape = true;
    assert!(
        check_row(&row).is_ok(),
        "a declared reshape of as many elements"
    );
    row.inputs[0].shape = vec![1024, 127];
    assert!(check_row(&row).is_err(), "a reshape to fewer elements");

    let mut row = softmax_row();
    row.outputs[0].tessera = "y".into();
    assert!(check_row(&row).unwrap_err().contains("tessera's DAG has"));

    let mut row = softmax_row();
    row.nodes[0].inputs[0] = "z".into();
    assert!(
        check_row(&row)
            .unwrap_err()
            .contains("input z is not defined")
    );
}

#[test]
fn bench_save_io_writes_what_the_harness_reads() {
    let dir = Scratch::new("ort-save-io");
    let io = dir.join("io");
    let out = tessera(&[
        "bench",
        "layer_norm",
        "--shape",
        "M=3,N=5",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
        "--db",
        dir.join("none.db").to_str().expect("utf-8 path"),
        "--save-io",
        io.to_str().expect("utf-8 path"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(io.join("io.json")).expect("io.json"))
            .expect("io.json is JSON");
    let names = |role: &str| -> Vec<(String, serde_json::Value)> {
        listing[role]
            .as_array()
            .expect("a list")
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().expect("a name").to_string(),
                    e["shape"].clone(),
                )
            })
            .collect()
    };
    let inputs = names("inputs");
    assert_eq!(
        inputs,
        vec![
            ("x".to_string(), serde_json::json!([3, 5])),
            ("gamma".to_string(), serde_json::json!([5])),
            ("beta".to_string(), serde_json::json!([5])),
        ]
    );
    assert_eq!(
        names("outputs"),
        vec![("layer_norm".to_string(), serde_json::json!([3, 5]))]
    );

    let x = read_npy(&io.join("x.npy"), "(3, 5)");
    let gamma = read_npy(&io.join("gamma.npy"), "(5,)");
    let beta = read_npy(&io.join("beta.npy"), "(5,)");
    let got = read_npy(&io.join("layer_norm.npy"), "(3, 5)");
    // The saved output is layer_norm of the saved inputs, in f64 here; each
    // output is a sum of 5 terms then a division: a few f32 roundings.
    for i in 0..3 {
        let row = &x[i * 5..(i + 1) * 5];
        let mean = row.iter().sum::<f64>() / 5.0;
        let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 5.0;
        for j in 0..5 {
            let want = (row[j] - mean) / (variance + 1e-5).sqrt() * gamma[j] + beta[j];
            let bound = 1e-5 * want.abs().max(1.0) * (1.0 / (variance + 1e-5).sqrt()).max(1.0);
            assert!(
                (got[i * 5 + j] - want).abs() <= bound,
                "layer_norm[{i},{j}] = {} saved, {want} from the saved inputs",
                got[i * 5 + j]
            );
        }
    }
}

/// An `.npy` file of f32 in C order with the given shape, as f64.
fn read_npy(path: &std::path::Path, shape: &str) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00", "{}", path.display());
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).expect("an ASCII header");
    let want = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    assert!(header.starts_with(&want), "{}: {header}", path.display());
    bytes[10 + header_len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
        .collect()
}
