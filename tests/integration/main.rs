//! The integration and property tests, as one test binary: one link of
//! Cranelift, egg, SQLite and the learners instead of one per file. Each
//! module is one area (`cargo test --test integration tensorize::` runs one);
//! `common` holds the helpers they share; `realtime` holds the checks that
//! need a quiet machine's clock, ignored here and run alone by `.ci/run`'s
//! last step. Two test programs stay apart:
//! `custom_op` registers `op!` operators, which would change the registry
//! every other module lists, and `custom_op_cli` is a user program with its
//! own `main`.

#[path = "../common/mod.rs"]
mod common;

mod bench_columns;
mod ci_job;
mod cli;
mod cost_model;
mod dag_errors;
mod dag_tasks;
mod db_cache;
mod deploy;
mod deploy_aot;
mod deploy_layout;
mod deploy_verify;
mod intrinsics;
mod jit_equivalence;
mod kernel_api;
mod measure_isolation;
mod onnx_deploy;
mod onnx_import;
mod onnx_memory_plan;
mod onnx_passes;
mod onnx_tasks;
mod onnx_vs_ort;
mod ops_reference;
mod ort_harness;
mod realtime;
mod reductions;
mod remeasure;
mod row_fusion;
mod row_math;
mod schedule_equivalence;
mod search;
mod simplify_report;
mod step_errors;
mod suite;
mod tensorize;
mod window_ops;
mod workload_key;
