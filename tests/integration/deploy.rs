//! Tune-then-deploy: artifacts written from the cache, loaded back by the
//! `Library`, and every way a lookup can miss (device, shape, stale, corrupt)
//! giving its own outcome — never a wrong kernel.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use common::{
    Scratch, assert_close, ok_result, other_device, random_inputs, reference, split_steps, tessera,
    tiled_steps,
};
use tessera::db::TuningDb;
use tessera::deploy::{
    self, Artifact, DeployOptions, DeployOutcome, FallbackReason, INDEX_FILE, Index, KernelSource,
    Library, device_dir,
};
use tessera::measure::{MeasureResult, Task};
use tessera::runtime::{DeviceDescription, host_device};
use tessera::schedule::{Step, steps_from_json};

const MATMUL: &str = "M=64,N=64,K=64";

/// A database with matmul 64³ on this host (the tiled schedule fastest, a
/// plain split slower) and matmul 32³ on another device.
fn tuned_db(dir: &Path) -> (TuningDb, Task) {
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let task = Task::from_registry("matmul", MATMUL).expect("task");
    let (tiled, split) = (tiled_steps(), split_steps(4));
    let (fast, slow) = (ok_result(1e-4, 1.8e9), ok_result(1e-3, 1.8e9));
    let batch: Vec<(&[Step], &MeasureResult)> = vec![(&split, &slow), (&tiled, &fast)];
    db.record_batch(&task, host_device(), &batch)
        .expect("recorded");
    let other = Task::from_registry("matmul", "M=32,N=32,K=32").expect("task");
    let batch: Vec<(&[Step], &MeasureResult)> = vec![(&split, &fast)];
    db.record_batch(&other, &other_device(), &batch)
        .expect("recorded");
    (db, task)
}

fn deploy_to(db: &TuningDb, out: &Path, device: &DeviceDescription) -> deploy::DeployReport {
    let options = DeployOptions {
        out: out.to_path_buf(),
        ..DeployOptions::default()
    };
    deploy::deploy(db, device, &options).expect("deployed")
}

fn fallback(library: &Library, task: &Task) -> FallbackReason {
    let loaded = library.kernel(task.dag()).expect("a kernel either way");
    match loaded.source {
        KernelSource::Fallback(reason) => reason,
        KernelSource::Tuned { path, .. } => panic!("expected a fallback, got {}", path.display()),
    }
}

#[test]
fn deploy_load_run_equals_the_reference_and_compiles_once() {
    let dir = Scratch::new("deploy-roundtrip");
    let (db, task) = tuned_db(&dir);
    let out = dir.join("schedules");
    let report = deploy_to(&db, &out, host_device());
    assert_eq!(report.workloads.len(), 1, "only this device's workload");
    assert_eq!(report.workloads[0].outcome, DeployOutcome::Written);
    let library = Library::open(&out).expect("library");
    let loaded = library.kernel(task.dag()).expect("kernel");
    let KernelSource::Tuned { artifact, .. } = &loaded.source else {
        panic!("expected the tuned artifact: {}", loaded.source);
    };
    assert_eq!(
        artifact.steps,
        tiled_steps(),
        "the fastest record is deployed"
    );
    assert!((artifact.gflops - task.dag().flop_count() as f64 / 1e-4 / 1e9).abs() < 1e-6);
    assert_eq!(artifact.trials, 2);
    let inputs = random_inputs(task.dag(), 3);
    let got = loaded.kernel.run_host(&inputs).expect("runs");
    assert_close("deployed matmul", &got, &reference(task.dag(), &inputs), 64);
    let again = library.kernel(task.dag()).expect("kernel");
    assert!(Rc::ptr_eq(&loaded.kernel, &again.kernel));
    assert_eq!(library.compiled(), 1);
    // Deploying again changes nothing.
    let report = deploy_to(&db, &out, host_device());
    assert_eq!(report.workloads[0].outcome, DeployOutcome::Unchanged);
}

#[test]
fn another_devices_artifacts_are_never_used_and_never_touched() {
    let dir = Scratch::new("deploy-device");
    let (db, task) = tuned_db(&dir);
    let out = dir.join("schedules");
    deploy_to(&db, &out, &other_device());
    let theirs = device_dir(&out, &other_device().key());
    assert!(theirs.join(INDEX_FILE).is_file());
    let before = std::fs::read(theirs.join(INDEX_FILE)).expect("index");
    let library = Library::open(&out).expect("library");
    let small = Task::from_registry("matmul", "M=32,N=32,K=32").expect("task");
    match fallback(&library, &small) {
        FallbackReason::NoArtifactsForDevice { available, .. } => {
            assert_eq!(available.len(), 1, "{available:?}");
        }
        other => panic!("expected a device mismatch, got {other}"),
    }
    // Deploying this host's records leaves the other device's folder alone.
    deploy_to(&db, &out, host_device());
    assert_eq!(
        std::fs::read(theirs.join(INDEX_FILE)).expect("index"),
        before
    );
    let library = Library::open(&out).expect("library");
    assert!(library.kernel(task.dag()).expect("kernel").is_tuned());
    assert!(!library.kernel(small.dag()).expect("kernel").is_tuned());
}

#[test]
fn another_shape_falls_back_naming_the_tuned_shapes() {
    let dir = Scratch::new("deploy-shape");
    let (db, _) = tuned_db(&dir);
    let out = dir.join("schedules");
    deploy_to(&db, &out, host_device());
    let library = Library::open(&out).expect("library");
    let other = Task::from_registry("matmul", "M=64,N=32,K=64").expect("task");
    match fallback(&library, &other) {
        FallbackReason::NoArtifact { other_shapes, .. } => {
            assert_eq!(other_shapes, vec!["matmul[M=64,N=64,K=64,f32]".to_string()]);
        }
        other => panic!("expected a shape mismatch, got {other}"),
    }
    let inputs = random_inputs(other.dag(), 1);
    let loaded = library.kernel(other.dag()).expect("kernel");
    let got = loaded.kernel.run_host(&inputs).expect("runs");
    assert_close("fallback", &got, &reference(other.dag(), &inputs), 64);
}

/// The artifact file and index of this host's matmul 64³.
fn deployed(name: &str) -> (Scratch, PathBuf, PathBuf, PathBuf, Task) {
    let dir = Scratch::new(&format!("deploy-{name}"));
    let (db, task) = tuned_db(&dir);
    let out = dir.join("schedules");
    let report = deploy_to(&db, &out, host_device());
    let file = report.workloads[0].file.clone().expect("artifact file");
    let index = device_dir(&out, &host_device().key()).join(INDEX_FILE);
    (dir, out, file, index, task)
}

#[test]
fn an_artifact_tuned_for_another_definition_is_stale() {
    let (_dir, out, file, index_path, task) = deployed("stale-key");
    // As if the operator's definition changed after tuning: the stored key
    // is not the DAG's any more, though its readable name still is.
    let old_key = "0".repeat(64);
    let mut artifact = Artifact::read(&file).expect("artifact");
    artifact.workload.key = old_key.clone();
    std::fs::write(&file, serde_json::to_string(&artifact).expect("json")).expect("write");
    let mut index = Index::read(&index_path).expect("index");
    index.artifacts[0].workload_key = old_key;
    std::fs::write(&index_path, serde_json::to_string(&index).expect("json")).expect("write");
    let library = Library::open(&out).expect("library");
    match fallback(&library, &task) {
        FallbackReason::Stale { reason, .. } => assert!(reason.contains("another definition")),
        other => panic!("expected stale, got {other}"),
    }
}

#[test]
fn an_artifact_whose_steps_no_longer_apply_is_stale() {
    let (_dir, out, file, _, task) = deployed("stale-steps");
    let mut artifact = Artifact::read(&file).expect("artifact");
    artifact.steps =
        steps_from_json(r#"[{"kind":"split","stage":"C","iter":"no_such_loop","factors":[4]}]"#)
            .expect("steps");
    std::fs::write(&file, serde_json::to_string(&artifact).expect("json")).expect("write");
    let library = Library::open(&out).expect("library");
    match fallback(&library, &task) {
        FallbackReason::Stale { reason, .. } => assert!(reason.contains("no longer applies")),
        other => panic!("expected stale, got {other}"),
    }
}

#[test]
fn corrupted_artifact_or_index_files_fall_back_with_the_file_named() {
    let (_dir, out, file, index, task) = deployed("corrupt");
    std::fs::write(&file, "{\"schema\": 1, \"steps\": [").expect("write");
    let library = Library::open(&out).expect("library");
    match fallback(&library, &task) {
        FallbackReason::Corrupt { path, .. } => assert_eq!(path, file),
        other => panic!("expected corrupt, got {other}"),
    }
    std::fs::write(&index, "not json").expect("write");
    let library = Library::open(&out).expect("library");
    match fallback(&library, &task) {
        FallbackReason::Corrupt { path, .. } => assert_eq!(path, index),
        other => panic!("expected corrupt index, got {other}"),
    }
    assert!(Library::open(out.join("missing")).is_err());
}

#[test]
fn a_faster_existing_artifact_is_kept_unless_forced() {
    let (_dir, out, file, _, _) = deployed("keep");
    let mut artifact = Artifact::read(&file).expect("artifact");
    artifact.gflops *= 10.0;
    artifact.steps = split_steps(8);
    std::fs::write(&file, serde_json::to_string(&artifact).expect("json")).expect("write");
    let dir = out.parent().expect("parent").to_path_buf();
    let db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let report = deploy_to(&db, &out, host_device());
    assert!(matches!(
        report.workloads[0].outcome,
        DeployOutcome::KeptFaster { .. }
    ));
    assert_eq!(
        Artifact::read(&file).expect("artifact").steps,
        split_steps(8)
    );
    let options = DeployOptions {
        out: out.clone(),
        force: true,
        ..DeployOptions::default()
    };
    let report = deploy::deploy(&db, host_device(), &options).expect("deployed");
    assert_eq!(report.workloads[0].outcome, DeployOutcome::Written);
    assert_eq!(
        Artifact::read(&file).expect("artifact").steps,
        tiled_steps()
    );
}

#[test]
fn the_cli_deploys_and_bench_reports_the_source_and_the_recorded_speed() {
    let dir = Scratch::new("deploy-cli");
    let (db, _) = tuned_db(&dir);
    drop(db);
    let db_path = dir.join("tuning.db");
    let out = dir.join("schedules");
    let (db_arg, out_arg) = (db_path.to_string_lossy(), out.to_string_lossy());
    let run = tessera(&["deploy", "--db", &db_arg, "--out", &out_arg, "--json"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!(report["workloads"][0]["outcome"], "written");
    let bench = |shape: &str| {
        let run = tessera(&[
            "bench", "matmul", "--shape", shape, "--from", &out_arg, "--repeat", "1", "--json",
        ]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&run.stdout).expect("json")
    };
    let tuned = bench(MATMUL);
    assert_eq!(tuned["source"], "tuned");
    let recorded = tuned["record_gflops"].as_f64().expect("recorded GFLOP/s");
    assert!((recorded - 2.0 * 64f64.powi(3) / 1e-4 / 1e9).abs() < 1e-6);
    for key in ["gflops", "default_gflops", "peak_fraction", "max_rel_error"] {
        assert!(tuned[key].is_number(), "{key} in {tuned}");
    }
    let other = bench("M=32,N=32,K=32");
    assert_eq!(other["source"], "fallback");
    assert!(other["record_gflops"].is_null());
    assert!(
        other["source_reason"]
            .as_str()
            .is_some_and(|r| r.contains("matmul[M=64,N=64,K=64,f32]"))
    );
    // A workload selector that names nothing is an error, and nothing is written.
    let empty = dir.join("empty");
    let run = tessera(&[
        "deploy",
        "--db",
        &db_arg,
        "--out",
        &empty.to_string_lossy(),
        "--workload",
        "conv2d",
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("conv2d"));
    assert!(!empty.exists());
}

#[test]
fn deploy_aot_writes_an_object_a_c_program_links_and_calls() {
    let dir = Scratch::new("deploy-aot");
    let (db, task) = tuned_db(&dir);
    drop(db);
    deploy_aot_link_and_run(&dir, &task);
}

#[test]
fn deploy_aot_of_a_tensorized_record_links_with_the_c_micro_kernels() {
    use crate::tensorize::step::packed;
    let kernel = common::isa_coverage(&tessera::runtime::Target::from_env())
        .kernels()
        .into_iter()
        .max_by_key(|k| k.isa)
        .expect("a micro-kernel");
    let dir = Scratch::new("deploy-aot-tensorized");
    let task = Task::from_registry("matmul", "M=37,N=45,K=29").expect("task");
    let steps = packed(kernel.mr as i64, kernel.nr as i64, kernel.name);
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    db.record_batch(&task, host_device(), &[(&steps, &ok_result(1e-5, 1.8e9))])
        .expect("recorded");
    drop(db);
    deploy_aot_link_and_run(&dir, &task);
}

/// `tessera deploy --aot` of the matmul record of `task` in
/// `dir/tuning.db`; a C program linking its object, the runtime and the
/// micro-kernels checks it against a naive loop.
fn deploy_aot_link_and_run(dir: &Path, task: &Task) {
    let out = dir.join("schedules");
    let run = tessera(&[
        "deploy",
        "--db",
        &dir.join("tuning.db").to_string_lossy(),
        "--out",
        &out.to_string_lossy(),
        "--aot",
        "--json",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    let aot = &report["workloads"][0]["aot"];
    let symbol = aot["symbol"].as_str().expect("symbol");
    assert_eq!(symbol, format!("matmul_{}", task.key().short_hash()));
    let (object, runtime, kernels) = (
        aot["object"].as_str().expect("object"),
        aot["runtime"].as_str().expect("runtime"),
        aot["kernels"].as_str().expect("kernels"),
    );
    let include = Path::new(aot["header"].as_str().expect("header"))
        .parent()
        .expect("aot folder")
        .to_path_buf();
    let upper = symbol.to_uppercase();
    // C[i][j] = Σk A[i][k]·B[k][j] on deterministic inputs, checked in double.
    let main = format!(
        r#"#include <math.h>
#include <stdio.h>
#include "{symbol}.h"
static float a[{upper}_A_SIZE], b[{upper}_B_SIZE], c[{upper}_C_SIZE];
int main(void) {{
  const int m = {upper}_A_DIM0, k = {upper}_A_DIM1, n = {upper}_B_DIM1;
  for (int i = 0; i < m * k; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < k * n; i++) b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  {symbol}_call(a, b, c);
  double worst = 0.0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {{
      double want = 0.0;
      for (int p = 0; p < k; p++) want += (double)a[i * k + p] * (double)b[p * n + j];
      double err = fabs(c[i * n + j] - want);
      if (!(err <= worst)) worst = err;
    }}
  printf("max error %g\n", worst);
  return worst < 1e-3 ? 0 : 1;
}}
"#
    );
    let source = dir.join("main.c");
    std::fs::write(&source, main).expect("write main.c");
    let program = dir.join("matmul_aot");
    let cc = Command::new("cc")
        .args(["-O2", "-Wall", "-I"])
        .arg(&include)
        .arg(&source)
        .args([runtime, kernels, object])
        .args(["-lm", "-lpthread", "-o"])
        .arg(&program)
        .output()
        .expect("cannot run the C compiler `cc` (install gcc or clang)");
    assert!(
        cc.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let ran = Command::new(&program).output().expect("runs");
    assert!(
        ran.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
}

#[test]
fn bench_suite_tables_every_workload_with_its_source() {
    let dir = Scratch::new("deploy-bench-suite");
    let (db, _) = tuned_db(&dir);
    drop(db);
    let suite = dir.join("suite.json");
    std::fs::write(
        &suite,
        r#"{"name": "two", "workloads": [
            {"label": "mm", "op": "matmul", "shape": "M=64,N=64,K=64"},
            {"label": "relu", "op": "relu", "shape": "M=16,N=16"}]}"#,
    )
    .expect("suite");
    let db_arg = dir.join("tuning.db");
    let args = |json: bool| {
        let mut a = vec![
            "bench".to_string(),
            "--suite".into(),
            suite.to_string_lossy().into_owned(),
            "--db".into(),
            db_arg.to_string_lossy().into_owned(),
            "--repeat".into(),
            "1".into(),
        ];
        if json {
            a.push("--json".into());
        }
        a
    };
    let run = |json: bool| {
        let a = args(json);
        let out = tessera(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let report: serde_json::Value = serde_json::from_str(&run(true)).expect("json");
    let rows = report["workloads"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["label"].as_str(), rows[0]["source"].as_str()),
        (Some("mm"), Some("tuned"))
    );
    assert_eq!(rows[1]["source"], "fallback");
    let table = run(false);
    assert!(
        table.contains("matmul[M=64,N=64,K=64,f32]") && table.contains("relu: "),
        "{table}"
    );
}

#[test]
fn a_users_own_definition_of_the_workload_loads_the_tuned_schedule() {
    use tessera::te::{self, ComputeDag, DType};
    let dir = Scratch::new("deploy-own-names");
    let (db, task) = tuned_db(&dir);
    let out = dir.join("schedules");
    deploy_to(&db, &out, host_device());
    // The same matmul with every tensor and the reduction axis named differently.
    let lhs = te::placeholder("lhs", &[64, 64], DType::F32);
    let rhs = te::placeholder("rhs", &[64, 64], DType::F32);
    let r = te::reduce_axis(64, "r");
    let prod = te::compute("prod", &[64, 64], |ix| {
        te::sum(lhs.at([&ix[0], &r]) * rhs.at([&r, &ix[1]]), [&r])
    });
    let dag = ComputeDag::new(&[lhs, rhs], &[prod]).expect("dag");
    assert_eq!(dag.workload_key().hash, task.key().hash);
    let library = Library::open(&out).expect("library");
    let loaded = library.kernel(&dag).expect("kernel");
    assert!(loaded.is_tuned(), "{}", loaded.source);
    let inputs = random_inputs(&dag, 5);
    let got = loaded.kernel.run_host(&inputs).expect("runs");
    assert_close("renamed matmul", &got, &reference(&dag, &inputs), 64);
}

#[test]
fn deploy_device_selects_another_machines_records_or_all() {
    let dir = Scratch::new("deploy-device");
    let (db, _) = tuned_db(&dir);
    drop(db);
    let db_arg = dir.join("tuning.db").to_string_lossy().into_owned();
    let folders = |out: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(out)
            .map(|entries| {
                entries
                    .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let other = other_device().key();
    let other_dir = device_dir(Path::new(""), &other)
        .to_string_lossy()
        .into_owned();
    let host_dir = device_dir(Path::new(""), &host_device().key())
        .to_string_lossy()
        .into_owned();

    let only_other = dir.join("other");
    let run = tessera(&[
        "deploy",
        "--db",
        &db_arg,
        "--out",
        &only_other.to_string_lossy(),
        "--device",
        other.short_hash(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(folders(&only_other), vec![other_dir.clone()]);

    let all = dir.join("all");
    let run = tessera(&[
        "deploy",
        "--db",
        &db_arg,
        "--out",
        &all.to_string_lossy(),
        "--device",
        "all",
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let mut both = vec![other_dir, host_dir];
    both.sort();
    assert_eq!(folders(&all), both);

    let missing = tessera(&["deploy", "--db", &db_arg, "--device", "no-such-device"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no-such-device"));
    let aot = tessera(&["deploy", "--db", &db_arg, "--device", "all", "--aot"]);
    assert_eq!(aot.status.code(), Some(2), "AOT targets this machine only");
}
