//! WorkloadKey: the same DAG gives the same key in every run and on every
//! machine; any change in shape, dtype or formula gives a different key.

use std::process::Command;

use tessera::ops;
use tessera::te::{ComputeDag, DType, WorkloadKey, compute, placeholder, reduce_axis, sum};

/// The hash of `matmul` at M=N=K=64. It changes only when the canonical text
/// changes, which invalidates every tuning record: do that deliberately.
const MATMUL_64_HASH: &str = "2130db8cfb8c1f87572ebb9f74d5fbdb035ec74d15c3de9764180c89974c6c68";

fn op_key(name: &str, params: &[(&str, i64)]) -> WorkloadKey {
    let op = ops::find(name).expect("registered");
    let shape = op.shape(params).expect("valid shape");
    op.build(&shape).expect("valid op").workload_key()
}

/// A matmul-like DAG with free choice of names, dtype and formula.
fn custom(names: (&str, &str, &str), m: i64, dtype: DType, transpose_b: bool) -> ComputeDag {
    let a = placeholder(names.0, &[m, 16], dtype);
    let b = placeholder(names.1, &[16, 16], dtype);
    let k = reduce_axis(16, "k");
    let c = compute(names.2, &[m, 16], |ix| {
        let rhs = if transpose_b {
            b.at([&ix[1], &k])
        } else {
            b.at([&k, &ix[1]])
        };
        sum(a.at([&ix[0], &k]) * rhs, [&k])
    });
    ComputeDag::new(&[a, b], &[c]).expect("valid")
}

#[test]
fn key_is_pinned_across_runs_and_machines() {
    let key = op_key("matmul", &[("M", 64), ("N", 64), ("K", 64)]);
    assert_eq!(key.hash, MATMUL_64_HASH);
    assert_eq!(key.readable, "matmul[M=64,N=64,K=64,f32]");
    assert_eq!(key.to_string(), "matmul[M=64,N=64,K=64,f32]#2130db8cfb8c");
}

#[test]
fn rebuilding_gives_the_same_key() {
    for op in ops::registry() {
        let shape = op.default_shape().expect("built-in defaults resolve");
        let first = op.build(&shape).expect("builds").workload_key();
        let second = op.build(&shape).expect("builds").workload_key();
        assert_eq!(first, second, "{}", op.name);
    }
}

#[test]
fn names_do_not_matter() {
    let x = custom(("A", "B", "C"), 8, DType::F32, false);
    let y = custom(("lhs", "rhs", "product"), 8, DType::F32, false);
    assert_eq!(x.workload_key().hash, y.workload_key().hash);
}

#[test]
fn shape_dtype_and_formula_change_the_key() {
    let base = custom(("A", "B", "C"), 8, DType::F32, false).workload_key();
    let other_shape = custom(("A", "B", "C"), 9, DType::F32, false).workload_key();
    let other_dtype = custom(("A", "B", "C"), 8, DType::F64, false).workload_key();
    let other_formula = custom(("A", "B", "C"), 8, DType::F32, true).workload_key();
    for changed in [&other_shape, &other_dtype, &other_formula] {
        assert_ne!(base.hash, changed.hash);
    }
}

#[test]
fn a_changed_constant_or_parameter_changes_the_key() {
    let conv = |pad| op_key("conv2d", &[("H", 14), ("W", 14), ("pad", pad)]);
    assert_ne!(conv(1).hash, conv(2).hash);
    let stride = |s| op_key("conv2d", &[("H", 14), ("W", 14), ("stride", s)]);
    assert_ne!(stride(1).hash, stride(2).hash);
    assert_ne!(
        op_key("matmul", &[("M", 64), ("N", 64), ("K", 64)]).hash,
        op_key("matmul", &[("M", 64), ("N", 64), ("K", 65)]).hash
    );
}

#[test]
fn distinct_registry_ops_have_distinct_keys() {
    let mut hashes: Vec<String> = ops::registry()
        .iter()
        .map(|op| {
            op.build(&op.default_shape().expect("built-in defaults resolve"))
                .expect("builds")
                .workload_key()
                .hash
        })
        .collect();
    let count = hashes.len();
    hashes.sort();
    hashes.dedup();
    assert_eq!(hashes.len(), count);
}

#[test]
fn separate_processes_agree() {
    let hash_from_cli = || {
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["show", "matmul", "--shape", "M=64,N=64,K=64"])
            .output()
            .expect("runs");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("hash:").map(|h| h.trim().to_string()))
            .expect("prints a hash")
    };
    assert_eq!(hash_from_cli(), MATMUL_64_HASH);
    assert_eq!(hash_from_cli(), MATMUL_64_HASH);
}
