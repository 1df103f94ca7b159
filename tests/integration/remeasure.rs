//! Re-measuring the best candidates at the end of tuning: `deploy` chooses
//! by the re-measured median (a lucky outlier is not deployed), the figure
//! survives JSON lines, a run with `--remeasure 2` stores exactly two
//! re-measured records per task measured by fresh workers, and databases
//! of schema 1 (no re-measurements) still open, merge and deploy as before.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::{FAST_TUNE, Scratch, ok_result, split_steps, tessera, tiled_steps};
use tessera::cost::RandomModel;
use tessera::db::{Lookup, Remeasurement, TuningDb, schema_sql};
use tessera::deploy::{self, Artifact, DeployOptions, DeployOutcome};
use tessera::measure::{MeasureOptions, MeasureResult, Measurer, Task, TimingOptions};
use tessera::runtime::host_device;
use tessera::schedule::Step;
use tessera::search::{RemeasureOptions, SearchOptions, TuneOptions, tune};

const MATMUL: &str = "M=64,N=64,K=64";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn again(seconds: f64) -> Remeasurement {
    Remeasurement {
        costs: vec![seconds * 0.98, seconds, seconds * 1.03],
        timestamp: 1.9e9,
    }
}

/// Matmul 64³ tuned on this host: a plain split whose tuning figure is the
/// best (1.00e-4 s, a lucky outlier: re-measured at 3.0e-4 s), the tiled
/// schedule slightly slower while tuning (1.05e-4 s) but re-measured at
/// 1.2e-4 s, and a split by 8 tuned at 2e-4 s and never re-measured.
fn db_with_a_lucky_outlier(path: &Path) -> (TuningDb, Task) {
    let mut db = TuningDb::open(path).expect("db");
    let task = Task::from_registry("matmul", MATMUL).expect("task");
    let (lucky, steady, other) = (split_steps(4), tiled_steps(), split_steps(8));
    let results = [
        ok_result(1.0e-4, 1.8e9),
        ok_result(1.05e-4, 1.8e9),
        ok_result(2.0e-4, 1.8e9),
    ];
    let batch: Vec<(&[Step], &MeasureResult)> = vec![
        (&lucky, &results[0]),
        (&steady, &results[1]),
        (&other, &results[2]),
    ];
    db.record_batch(&task, host_device(), &batch)
        .expect("recorded");
    let device = host_device();
    assert_eq!(
        db.record_remeasurement(&task, device, &lucky, &again(3.0e-4))
            .expect("stored"),
        1
    );
    assert_eq!(
        db.record_remeasurement(&task, device, &steady, &again(1.2e-4))
            .expect("stored"),
        1
    );
    (db, task)
}

fn gflops(task: &Task, seconds: f64) -> f64 {
    task.dag().flop_count() as f64 / seconds / 1e9
}

fn deployed_artifact(db: &TuningDb, out: &Path) -> Artifact {
    let report = deploy::deploy(
        db,
        host_device(),
        &DeployOptions {
            out: out.to_path_buf(),
            ..DeployOptions::default()
        },
    )
    .expect("deployed");
    assert_eq!(report.workloads.len(), 1);
    assert_eq!(report.workloads[0].outcome, DeployOutcome::Written);
    Artifact::read(report.workloads[0].file.as_ref().expect("a file")).expect("artifact")
}

/// `tessera deploy --db DB --out OUT [--json]`'s standard output (it must succeed).
fn deploy_cli(db: &Path, out: &Path, json: bool) -> String {
    let mut args = vec!["deploy", "--db", path_str(db), "--out", path_str(out)];
    if json {
        args.push("--json");
    }
    let o = tessera(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout)
}

/// The summary line of matmul 64³.
fn matmul_line(stdout: &str) -> &str {
    stdout
        .lines()
        .find(|l| l.contains("matmul[M=64,N=64,K=64"))
        .unwrap_or_else(|| panic!("no line of the workload in {stdout}"))
}

#[test]
fn deploy_picks_the_better_remeasured_record_not_the_lucky_outlier() {
    let dir = Scratch::new("remeasure-lucky");
    let (db, task) = db_with_a_lucky_outlier(&dir.join("tuning.db"));

    let artifact = deployed_artifact(&db, &dir.join("schedules"));
    assert_eq!(artifact.steps, tiled_steps(), "the steady schedule");
    assert!((artifact.gflops - gflops(&task, 1.05e-4)).abs() < 1e-9);
    let remeasured = artifact.remeasured_gflops.expect("a re-measured figure");
    assert!((remeasured - gflops(&task, 1.2e-4)).abs() < 1e-9);
    assert_eq!(artifact.remeasured_median_secs, Some(1.2e-4));

    // The lookup deployment and `bench` use agrees.
    let (found, _) = db.lookup(&task, &host_device().key()).expect("lookup");
    let Lookup::Exact(record) = found else {
        panic!("expected an exact match: {found:?}");
    };
    assert_eq!(record.steps, tiled_steps());

    // The CLI prints both figures of the deployed schedule.
    let (db_path, out) = (dir.join("tuning.db"), dir.join("cli-schedules"));
    let stdout = deploy_cli(&db_path, &out, false);
    assert!(stdout.contains("re-measured"), "{stdout}");
    let line = matmul_line(&stdout);
    let tuned_text = format!("{:.2}", gflops(&task, 1.05e-4));
    let again_text = format!("{:.2}", gflops(&task, 1.2e-4));
    assert!(
        line.contains(&tuned_text) && line.contains(&again_text),
        "{line} should hold {tuned_text} and {again_text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&deploy_cli(&db_path, &out, true)).expect("json");
    let row = &json["workloads"][0];
    assert_eq!(row["outcome"], "unchanged");
    assert!((row["remeasured_gflops"].as_f64().expect("figure") - remeasured).abs() < 1e-9);
}

#[test]
fn without_remeasured_records_deploy_picks_the_best_tuning_figure() {
    let dir = Scratch::new("remeasure-none");
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let task = Task::from_registry("matmul", MATMUL).expect("task");
    let (lucky, steady) = (split_steps(4), tiled_steps());
    let results = [ok_result(1.0e-4, 1.8e9), ok_result(1.05e-4, 1.8e9)];
    let batch: Vec<(&[Step], &MeasureResult)> = vec![(&lucky, &results[0]), (&steady, &results[1])];
    db.record_batch(&task, host_device(), &batch)
        .expect("recorded");
    let artifact = deployed_artifact(&db, &dir.join("schedules"));
    assert_eq!(artifact.steps, split_steps(4));
    assert_eq!(artifact.remeasured_gflops, None);
}

#[test]
fn remeasured_figures_survive_jsonl_export_and_import() {
    let dir = Scratch::new("remeasure-jsonl");
    let (db, _) = db_with_a_lucky_outlier(&dir.join("a.db"));
    let log = dir.join("all.jsonl");
    assert_eq!(db.export_jsonl(&log, None, None).expect("exported"), 3);
    let lines = std::fs::read_to_string(&log).expect("log");
    assert_eq!(lines.matches("\"remeasured\"").count(), 2, "{lines}");

    let mut fresh = TuningDb::open(&dir.join("b.db")).expect("db");
    fresh.import_jsonl(&log, false).expect("imported");
    assert_eq!(
        fresh.all_records().expect("records"),
        db.all_records().expect("records")
    );
    assert_eq!(
        deployed_artifact(&fresh, &dir.join("b")).steps,
        tiled_steps()
    );

    // A database holding the same records without re-measurements takes
    // them from the log, and adds no record.
    let mut plain = TuningDb::open(&dir.join("c.db")).expect("db");
    let records: Vec<_> = db
        .all_records()
        .expect("records")
        .into_iter()
        .map(|mut r| {
            r.remeasured = None;
            r
        })
        .collect();
    assert_eq!(plain.insert_all(&records).expect("stored"), 3);
    assert_eq!(
        deployed_artifact(&plain, &dir.join("c1")).steps,
        split_steps(4)
    );
    let stats = plain.import_jsonl(&log, false).expect("imported");
    assert_eq!((stats.read, stats.added), (3, 0));
    assert_eq!(
        deployed_artifact(&plain, &dir.join("c2")).steps,
        tiled_steps()
    );

    // A re-measurement without costs is malformed.
    let bad = lines.replacen(
        "\"remeasured\":{\"costs\":[",
        "\"remeasured\":{\"costs\":[-1,",
        1,
    );
    let bad_log = dir.join("bad.jsonl");
    std::fs::write(&bad_log, bad).expect("written");
    let err = fresh.import_jsonl(&bad_log, false).expect_err("rejected");
    assert!(err.to_string().contains("re-measured costs"), "{err}");
}

fn measurer(workers: usize) -> Measurer {
    Measurer::new(MeasureOptions {
        workers,
        kernel_threads: 1,
        run_timeout: Duration::from_secs(20),
        timing: TimingOptions {
            warmup: 1,
            number: 1,
            repeat: 2,
            min_repeat_ms: 0.2,
            flush: tessera::measure::CacheFlush::Off,
        },
        worker_program: Some(PathBuf::from(env!("CARGO_BIN_EXE_tessera"))),
        ..MeasureOptions::default()
    })
    .expect("workers start")
}

#[test]
fn a_run_with_remeasure_2_remeasures_its_2_best_in_fresh_workers() {
    let dir = Scratch::new("remeasure-tune");
    let mut db = TuningDb::open(&dir.join("tuning.db")).expect("db");
    let task = Task::from_registry("matmul", "M=16,N=16,K=16").expect("task");
    let mut measurer = measurer(2);
    let tuning_workers = measurer.worker_pids();
    let options = TuneOptions {
        trials: 6,
        batch_size: 3,
        seed: 5,
        early_stopping: None,
        search: SearchOptions {
            population: 16,
            generations: 1,
            ..SearchOptions::default()
        },
        remeasure: RemeasureOptions {
            candidates: 2,
            passes: 2,
        },
    };
    let events = std::sync::Mutex::new(Vec::new());
    let report = tune(
        &task,
        &mut measurer,
        Some(&mut db),
        &mut RandomModel::new(5),
        &options,
        &|event| {
            if let tessera::search::TuneEvent::Remeasure { done, total, .. } = event {
                events.lock().expect("lock").push((done, total));
            }
        },
        &AtomicBool::new(false),
    )
    .expect("tunes");
    assert_eq!(report.trials, 6, "re-measurement runs are not trials");
    let records = db
        .records(&task.key().hash, &host_device().key().hash)
        .expect("records");
    assert_eq!(records.len(), 7, "the default and 6 trials; no new records");
    let remeasured: Vec<_> = records.iter().filter(|r| r.remeasured.is_some()).collect();
    assert_eq!(remeasured.len(), 2, "exactly the 2 best");

    // They are the two best by tuning figure, each timed once per pass.
    let mut by_cost: Vec<_> = records
        .iter()
        .filter_map(|r| Some((r.result.median()?, &r.steps)))
        .collect();
    by_cost.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (_, steps) in &by_cost[..2] {
        let record = remeasured.iter().find(|r| &&r.steps == steps);
        let record = record.expect("one of the 2 best by tuning figure is re-measured");
        let costs = &record.remeasured.as_ref().expect("re-measured").costs;
        assert_eq!(costs.len(), 2 * 2, "2 passes of 2 timed repeats");
    }

    let again = report.remeasure.as_ref().expect("a re-measurement report");
    assert_eq!(again.candidates.len(), 2);
    assert_eq!(again.passes, 2);
    assert!(again.secs > 0.0);
    assert_eq!(report.best_steps, *by_cost[0].1);
    assert!(report.best_remeasured().is_some());
    // Fresh processes: none of the workers that measured the trials.
    assert_eq!(again.worker_pids.len(), 2);
    for pid in &again.worker_pids {
        assert!(
            !tuning_workers.contains(pid),
            "re-measured by worker {pid}, one of the tuning workers {tuning_workers:?}"
        );
        assert!(measurer.spawned_pids().contains(pid));
    }
    // Progress: one event per pass, counting runs.
    assert_eq!(*events.lock().expect("lock"), vec![(2, 4), (4, 4)]);
}

#[test]
fn a_suite_with_remeasure_2_stores_2_remeasured_records_per_task_and_prints_both_figures() {
    let dir = Scratch::new("remeasure-suite");
    let suite = dir.join("tiny.json");
    std::fs::write(
        &suite,
        r#"{"name": "tiny", "workloads": [
            {"label": "mm", "op": "matmul", "shape": "M=4,N=4,K=4"},
            {"label": "act", "op": "relu", "shape": "M=4,N=8"}
        ]}"#,
    )
    .expect("written");
    let db = dir.join("t.db");
    let mut args = vec![
        "tune",
        "--suite",
        path_str(&suite),
        "--trials",
        "8",
        "--batch-size",
        "2",
        "--db",
        path_str(&db),
        "--remeasure",
        "2",
    ];
    args.extend_from_slice(FAST_TUNE);
    let out = tessera(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("re-measured") && stdout.contains("runs (not trials)"),
        "{stdout}"
    );
    let db = TuningDb::open(&db).expect("db");
    let records = db.all_records().expect("records");
    for readable in ["matmul[M=4,N=4,K=4", "relu[M=4,N=8"] {
        let mine: Vec<_> = records
            .iter()
            .filter(|r| r.workload.readable.starts_with(readable))
            .collect();
        let successes = mine.iter().filter(|r| r.result.is_ok()).count();
        let again = mine.iter().filter(|r| r.remeasured.is_some()).count();
        assert_eq!(again, successes.min(2), "{readable}: {successes} successes");
        assert_eq!(again, 2, "{readable}: two candidates at least succeeded");
    }

    // Out of range: refused before anything is tuned.
    let o = tessera(&[
        "tune",
        "relu",
        "--remeasure",
        "99",
        "--db",
        path_str(&dir.join("x.db")),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--remeasure 99"),
        "{}",
        text(&o.stderr)
    );
    assert!(!dir.join("x.db").exists());
}

/// Writes a database as tessera wrote it at schema 1, holding the records
/// of `from` (the same rows, without the re-measurement columns).
fn schema_1_copy(from: &Path, to: &Path) {
    let conn = rusqlite::Connection::open(to).expect("opens");
    conn.execute_batch(schema_sql(1).expect("the schema 1 SQL"))
        .expect("schema 1");
    conn.execute_batch(&format!(
        "PRAGMA user_version = 1;
         ATTACH DATABASE '{}' AS new;
         INSERT INTO devices SELECT * FROM new.devices;
         INSERT INTO workloads SELECT id, key, readable, op, shape, canonical, flops FROM new.workloads;
         INSERT INTO records SELECT id, workload_id, device_id, steps, costs, cost, error_kind,
             error_msg, build_secs, run_secs, max_rel_error, tessera_version, 1, timestamp,
             fingerprint FROM new.records;
         DETACH DATABASE new;",
        from.display()
    ))
    .expect("copied");
}

fn user_version(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .expect("opens")
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version")
}

#[test]
fn a_schema_1_database_merges_opens_and_deploys_as_before() {
    let dir = Scratch::new("remeasure-old-db");
    let task = Task::from_registry("matmul", MATMUL).expect("task");
    {
        let mut new = TuningDb::open(&dir.join("new.db")).expect("db");
        let (lucky, steady) = (split_steps(4), tiled_steps());
        let results = [ok_result(1.0e-4, 1.8e9), ok_result(1.05e-4, 1.8e9)];
        let batch: Vec<(&[Step], &MeasureResult)> =
            vec![(&lucky, &results[0]), (&steady, &results[1])];
        new.record_batch(&task, host_device(), &batch)
            .expect("recorded");
    }
    let old = dir.join("old.db");
    schema_1_copy(&dir.join("new.db"), &old);
    assert_eq!(user_version(&old), 1);

    // Merged from (read only, not migrated).
    let mut merged = TuningDb::open(&dir.join("merged.db")).expect("db");
    let stats = merged.merge(&old).expect("merged");
    assert_eq!((stats.read, stats.added), (2, 2));
    assert_eq!(user_version(&old), 1, "merging only reads");

    // Opened: migrated, every record without a re-measured figure.
    let db = TuningDb::open(&old).expect("a schema 1 database opens");
    assert_eq!(user_version(&old), tessera::db::SCHEMA_VERSION);
    let records = db.all_records().expect("records");
    assert_eq!(records.len(), 2);
    assert!(
        records
            .iter()
            .all(|r| r.remeasured.is_none() && r.schema == 1)
    );
    let artifact = deployed_artifact(&db, &dir.join("schedules"));
    assert_eq!(
        artifact.steps,
        split_steps(4),
        "by the tuning figure, as before"
    );
    assert_eq!(artifact.remeasured_gflops, None);
    let file = std::fs::read_to_string(
        deploy::device_dir(&dir.join("schedules"), &host_device().key())
            .join(tessera::deploy::artifact_file_name(&artifact.workload)),
    )
    .expect("artifact file");
    assert!(!file.contains("remeasured"), "{file}");
    drop(db);

    // The CLI deploys it too, the re-measured column empty.
    let stdout = deploy_cli(&old, &dir.join("cli"), false);
    let line = matmul_line(&stdout);
    assert!(line.contains(" - "), "{line}");
}
