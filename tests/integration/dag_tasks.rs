//! Any te DAG as a task: every registry op's DAG survives its spec
//! (`ComputeDag::to_spec` / `from_spec`) with its key and names, schedules
//! replay on the rebuilt DAG to the same program, and a DAG that is no
//! registry op tunes in worker processes through the task scheduler, with
//! its records, its best schedule and the suite's end-to-end latency curve.

use crate::common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;

use common::random_dag::random_dag;
use common::{
    Scratch, assert_close, build, random_inputs, reduction_length, reference, small_cases,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tessera::codegen::{self, CodegenOptions};
use tessera::cost::{RandomModel, workload_rows};
use tessera::db::TuningDb;
use tessera::deploy::{self, DeployOptions, DeployOutcome};
use tessera::measure::{Task, TaskSource};
use tessera::runtime::host_device;
use tessera::schedule::random::random_schedule;
use tessera::schedule::{State, Step};
use tessera::search::{
    RemeasureOptions, SearchOptions, Suite, SuiteOptions, SuiteTask, tune_suite,
};
use tessera::te::{self, ComputeDag, DType, DagSpec};
use tessera::tir;

fn rebuilt(dag: &ComputeDag) -> ComputeDag {
    let json = dag.to_spec().to_json();
    let spec = DagSpec::from_json(&json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    let again = ComputeDag::from_spec(&spec).unwrap_or_else(|e| panic!("{e}\n{json}"));
    let label = dag.label();
    assert_eq!(again.canonical_text(), dag.canonical_text(), "{label}");
    assert_eq!(again.workload_key(), dag.workload_key(), "{label}");
    assert_eq!(again.label(), label);
    assert_eq!(again.to_string(), dag.to_string(), "{label}");
    again
}

#[test]
fn every_registry_op_round_trips_through_its_spec() {
    let quick = Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/quick.json");
    let suite = Suite::load(&quick).unwrap_or_else(|e| panic!("{e}"));
    let tasks = suite.tasks().expect("builds");
    assert_eq!(tasks.len(), tessera::ops::registry().len(), "one per op");
    for t in &tasks {
        rebuilt(t.task.dag());
    }
    for (op, params) in small_cases() {
        rebuilt(&build(op, &params));
    }
}

/// Random DAGs (random structure, expressions and names) survive their
/// spec: the same key, text and names, and the same values, bit for bit.
#[test]
fn random_dags_round_trip_through_their_spec() {
    let cases: u64 = std::env::var("TESSERA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        * 20;
    for seed in 0..cases {
        let dag = random_dag(&mut StdRng::seed_from_u64(seed));
        let again = rebuilt(&dag);
        let inputs = random_inputs(&dag, seed);
        assert_eq!(
            bits(&reference(&dag, &inputs)),
            bits(&reference(&again, &inputs)),
            "seed {seed}:\n{dag}"
        );
        if seed % 10 == 0 {
            let (func_a, _) = lowered_and_run(&State::new(&dag), seed);
            let (func_b, _) = lowered_and_run(&State::new(&again), seed);
            assert_eq!(func_a, func_b, "seed {seed}");
        }
    }
}

/// Lowers `state` and runs it on the inputs of `seed`.
fn lowered_and_run(state: &State, seed: u64) -> (String, Vec<te::HostTensor>) {
    let func = tir::lower(state).unwrap_or_else(|e| panic!("lowering: {e}"));
    let kernel = codegen::compile(&func, &CodegenOptions::default())
        .unwrap_or_else(|e| panic!("compile: {e}"));
    let outputs = kernel
        .run_host(&random_inputs(state.dag(), seed))
        .unwrap_or_else(|e| panic!("run: {e}"));
    (func.to_string(), outputs)
}

fn bits(outputs: &[te::HostTensor]) -> Vec<Vec<u64>> {
    outputs
        .iter()
        .map(|o| o.to_f64_vec().iter().map(|v| v.to_bits()).collect())
        .collect()
}

/// Random schedules of the original DAG replay on the rebuilt one: the
/// same loop program, the same output bits, and the reference's values.
#[test]
fn schedules_replay_on_the_rebuilt_dag_to_the_same_program() {
    let mut replayed = 0;
    for (n, (op, params)) in small_cases().iter().enumerate() {
        let dag = build(op, params);
        let again = rebuilt(&dag);
        for seed in 0..2u64 {
            let mut rng = StdRng::seed_from_u64(seed * 7919 + n as u64);
            let state = random_schedule(&dag, &mut rng, 8);
            let label = format!("{op} seed {seed}");
            let on_rebuilt = State::replay(&again, state.steps())
                .unwrap_or_else(|e| panic!("{label}: the steps do not replay: {e}"));
            if seed > 0 {
                // Lowering alone for the second seed: the first is run.
                let a = tir::lower(&state).map(|f| f.to_string());
                let b = tir::lower(&on_rebuilt).map(|f| f.to_string());
                assert_eq!(a.ok(), b.ok(), "{label}: lowered programs differ");
                continue;
            }
            let (func_a, out_a) = lowered_and_run(&state, seed);
            let (func_b, out_b) = lowered_and_run(&on_rebuilt, seed);
            assert_eq!(func_a, func_b, "{label}: lowered programs differ");
            assert_eq!(bits(&out_a), bits(&out_b), "{label}: outputs differ");
            let want = reference(&dag, &random_inputs(&dag, seed));
            assert_close(&label, &out_b, &want, reduction_length(&dag));
            replayed += 1;
        }
    }
    assert!(replayed >= 20, "only {replayed} schedules run");
}

/// `relu(A·B + bias)`: a matmul stage and an elementwise stage, no registry op.
fn dense_relu(m: i64, n: i64, k: i64) -> ComputeDag {
    let a = te::placeholder("A", &[m, k], DType::F32);
    let b = te::placeholder("B", &[k, n], DType::F32);
    let bias = te::placeholder("bias", &[n], DType::F32);
    let r = te::reduce_axis(k, "k");
    let mm = te::compute("mm", &[m, n], |ix| {
        te::sum(a.at([&ix[0], &r]) * b.at([&r, &ix[1]]), [&r])
    });
    let out = te::compute("out", &[m, n], |ix| {
        te::max(mm.at([&ix[0], &ix[1]]) + bias.at([&ix[1]]), 0.0_f32)
    });
    ComputeDag::new(&[a, b, bias], &[out])
        .expect("valid")
        .with_label(format!("fused_dense_relu[M={m},N={n},K={k}]"))
}

/// The steps a tuner could record: tile the relu stage, compute the matmul
/// in its tiles (reduction outermost), vectorise and parallelise.
fn tuned_looking_steps() -> Vec<Step> {
    serde_json::from_str(
        r#"[{"kind": "split", "stage": "out", "iter": "i0", "factors": [4]},
            {"kind": "split", "stage": "out", "iter": "i1", "factors": [8]},
            {"kind": "reorder", "stage": "out", "order": ["i0.0", "i1.0", "i0.1", "i1.1"]},
            {"kind": "compute_at", "stage": "mm", "target": "out", "iter": "i1.0"},
            {"kind": "reorder", "stage": "mm", "order": ["k", "i0", "i1"]},
            {"kind": "annotate", "stage": "mm", "iter": "i1", "annotation": "vectorize"},
            {"kind": "annotate", "stage": "out", "iter": "i1.1", "annotation": "vectorize"},
            {"kind": "annotate", "stage": "out", "iter": "i0.0", "annotation": "parallel"}]"#,
    )
    .expect("steps")
}

#[test]
fn tuned_looking_steps_replay_on_a_rebuilt_dag_task() {
    let dag = dense_relu(16, 16, 8);
    let task = Task::from_dag(dag.clone()).expect("task");
    let steps = tuned_looking_steps();
    let original = State::replay(&dag, &steps).unwrap_or_else(|e| panic!("{e}"));
    let on_task = State::replay(task.dag(), &steps).unwrap_or_else(|e| panic!("{e}"));
    let (func_a, out_a) = lowered_and_run(&original, 3);
    let (func_b, out_b) = lowered_and_run(&on_task, 3);
    assert_eq!(func_a, func_b);
    assert_eq!(bits(&out_a), bits(&out_b));
    assert_close(
        "dense_relu",
        &out_b,
        &reference(&dag, &random_inputs(&dag, 3)),
        8,
    );
}

#[test]
fn a_dag_task_tunes_in_workers_and_its_best_replays_on_a_fresh_build() {
    let dir = Scratch::new("dag-task-tune");
    let mut db = TuningDb::open(&dir.join("t.db")).expect("db");
    let fused = Task::from_dag(dense_relu(64, 64, 64)).expect("task");
    let tasks = vec![
        SuiteTask {
            label: "fused".into(),
            task: fused.clone(),
            weight: 2.0,
        },
        SuiteTask {
            label: "relu".into(),
            task: Task::from_registry("relu", "M=16,N=16").expect("task"),
            weight: 1.0,
        },
    ];
    let options = SuiteOptions {
        total_trials: 16,
        batch_size: 4,
        seed: 5,
        search: SearchOptions {
            population: 16,
            generations: 1,
            ..SearchOptions::default()
        },
        remeasure: RemeasureOptions::off(),
        ..SuiteOptions::default()
    };
    let report = tune_suite(
        &tasks,
        &mut common::fast_measurer(),
        Some(&mut db),
        &mut RandomModel::new(5),
        &options,
        &|_| {},
        &AtomicBool::new(false),
    )
    .expect("tunes");
    assert!(report.trials >= 8, "{} trials", report.trials);
    assert_eq!(report.tasks[0].op, "fused_dense_relu");
    assert_eq!(report.tasks[0].shape, "");

    // The end-to-end curve: one point per round, never rising, ending at
    // the reported objective (the same sum of the same figures).
    let curve = &report.latency_curve;
    assert_eq!(curve.len(), report.allocation.len());
    let values: Vec<f64> = curve
        .iter()
        .map(|p| p.latency_s.expect("every task has a schedule"))
        .collect();
    let start = report.start_latency_s.expect("defaults ran");
    assert!(values[0] <= start);
    assert!(values.windows(2).all(|w| w[1] <= w[0]), "{values:?}");
    assert!(curve.windows(2).all(|w| w[1].trials > w[0].trials));
    assert_eq!(curve.last().map(|p| p.trials), Some(report.trials));
    assert_eq!(values.last().copied(), report.best_latency_s);

    // Its records: no registry op, the DAG's key, every trial and the default.
    let records = db
        .records(&fused.key().hash, &host_device().key().hash)
        .expect("records");
    assert_eq!(records.len(), report.tasks[0].report.trials + 1);
    assert!(
        records
            .iter()
            .all(|r| r.workload.op.is_none() && r.workload.shape.is_none())
    );
    assert_eq!(
        records[0].workload.readable,
        "fused_dense_relu[M=64,N=64,K=64]"
    );
    assert!(
        records
            .iter()
            .filter(|r| r.result.median().is_some())
            .count()
            >= 2
    );

    // The best record replays on a DAG built again (fresh variables).
    let best = db
        .best(&fused.key().hash, &host_device().key().hash, 1)
        .expect("best")
        .into_iter()
        .next()
        .expect("a best record");
    assert_eq!(best.steps, report.tasks[0].report.best_steps);
    let fresh = dense_relu(64, 64, 64);
    let state = State::replay(&fresh, &best.steps).unwrap_or_else(|e| panic!("{e}"));
    let (_, got) = lowered_and_run(&state, 7);
    assert_close(
        "the best schedule",
        &got,
        &reference(&fresh, &random_inputs(&fresh, 7)),
        64,
    );

    // The records keep the DAG (schema 3): retraining rebuilds the DAG task
    // and uses its records beside the registry task's.
    let (rows, skipped) = workload_rows(&db, None).expect("rows");
    assert!(rows.iter().any(|w| w.op == "relu" && !w.rows.is_empty()));
    assert!(
        rows.iter()
            .any(|w| w.readable.starts_with("fused_dense_relu") && !w.rows.is_empty()),
        "{skipped:?}"
    );
    assert!(skipped.is_empty(), "{skipped:?}");

    // Deploying writes both, and the DAG task's artifact replays on a
    // fresh build of the DAG.
    let options = DeployOptions {
        out: dir.join("schedules"),
        ..DeployOptions::default()
    };
    let deployed = deploy::deploy(&db, host_device(), &options).expect("deploys");
    let outcome = |readable: &str| {
        deployed
            .workloads
            .iter()
            .find(|w| w.readable.starts_with(readable))
            .map(|w| w.outcome.clone())
    };
    assert_eq!(outcome("fused_dense_relu"), Some(DeployOutcome::Written));
    assert_eq!(outcome("relu"), Some(DeployOutcome::Written));
    let library = tessera::deploy::Library::open(dir.join("schedules")).expect("library");
    assert!(library.kernel(&fresh).expect("compiles").is_tuned());
}

/// Speaks the worker protocol to a real `tessera measure-worker`: a DAG
/// spec with another key is refused at setup, with the key in the message.
#[test]
fn a_worker_refuses_a_dag_spec_whose_key_does_not_match() {
    fn frame(json: &serde_json::Value) -> Vec<u8> {
        let header = json.to_string().into_bytes();
        let mut out = (header.len() as u32).to_le_bytes().to_vec();
        out.extend(header);
        out.extend(0u64.to_le_bytes());
        out
    }
    fn read(r: &mut impl Read) -> serde_json::Value {
        let mut len = [0u8; 4];
        r.read_exact(&mut len).expect("header length");
        let mut header = vec![0u8; u32::from_le_bytes(len) as usize];
        r.read_exact(&mut header).expect("header");
        let mut size = [0u8; 8];
        r.read_exact(&mut size).expect("payload length");
        let mut payload = vec![0u8; u64::from_le_bytes(size) as usize];
        r.read_exact(&mut payload).expect("payload");
        serde_json::from_slice(&header).expect("JSON")
    }
    let task = Task::from_dag(dense_relu(8, 8, 8)).expect("task");
    assert!(matches!(task.source(), TaskSource::Dag { .. }));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("measure-worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("worker starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    assert_eq!(read(&mut stdout)["type"], "hello");
    let setup = |key: &str| {
        serde_json::json!({"type": "setup", "source": task.source(), "key_hash": key,
                           "threads": 1, "codegen": CodegenOptions::default()})
    };
    let wrong = "f".repeat(64);
    stdin.write_all(&frame(&setup(&wrong))).expect("sent");
    let answer = read(&mut stdout);
    assert_eq!(answer["type"], "setup_failed", "{answer}");
    let msg = answer["msg"].as_str().expect("a message");
    assert!(
        msg.contains(&task.key().hash) && msg.contains(&format!("not {wrong}")),
        "{msg}"
    );
    stdin
        .write_all(&frame(&setup(&task.key().hash)))
        .expect("sent");
    assert_eq!(read(&mut stdout)["type"], "ready");
    drop(stdin);
    assert!(child.wait().expect("exits").success());
}

/// `tune m.onnx --plot FILE.svg` draws the model's estimated end-to-end
/// latency against trials.
#[test]
fn tuning_a_model_plots_its_end_to_end_latency() {
    use common::onnx_models::{floats, graph, model, node, ramp, value, write};
    let dir = Scratch::new("dag-task-model-plot");
    let m = model(
        13,
        graph(
            vec![
                node("MatMul", "mm", &["x", "w"], &["y"], vec![]),
                node("Relu", "act", &["y"], &["z"], vec![]),
            ],
            vec![value("x", &[Some(8), Some(16)])],
            vec![value("z", &[Some(8), Some(8)])],
            vec![floats("w", &[16, 8], ramp(128, 9))],
        ),
    );
    let path = write(&dir, "m.onnx", &m);
    let (db, plot) = (dir.join("t.db"), dir.join("latency.svg"));
    let args = [
        "tune",
        path.to_str().expect("path"),
        "--trials",
        "4",
        "--batch-size",
        "2",
        "--remeasure",
        "0",
        "--db",
        db.to_str().expect("path"),
        "--plot",
        plot.to_str().expect("path"),
    ];
    let out = common::tessera(&[&args[..], common::FAST_TUNE].concat());
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(&plot).expect("the plot is written");
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.contains("estimated end-to-end latency (ms)"), "{svg}");
    // Fused, the model's two nodes are one task.
    assert!(svg.contains("trials") && svg.contains("1 tasks"), "{svg}");
    assert!(
        svg.matches("<circle").count() >= 3,
        "the start and a point per round"
    );
}
