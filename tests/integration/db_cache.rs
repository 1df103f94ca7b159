//! The tuning cache: round trips through JSON lines, lookups that never
//! borrow another device's or shape's records, replay validation, concurrent
//! writers, a writer killed mid-run, and malformed input.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tessera::db::{
    ABORT_AFTER_ROW_ENV, DbError, Lookup, SCHEMA_VERSION, TuningDb, TuningRecord, WriteFault,
    WriteFaultAction,
};
use tessera::measure::{MeasureErrorKind, MeasureResult, Task};
use tessera::runtime::host_device;
use tessera::schedule::{Step, steps_from_json};

use common::{Scratch, ok_result, other_device, tessera, tessera_command};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn split_steps(factor: i64) -> Vec<Step> {
    steps_from_json(&format!(
        r#"[{{"kind":"split","stage":"C","iter":"i1","factors":[{factor}]}}]"#
    ))
    .expect("valid")
}

/// Two workloads × two devices, a few records each (one failure).
fn fill(db: &mut TuningDb) -> (Task, Task) {
    let big = Task::from_registry("matmul", "M=64,N=64,K=64").expect("task");
    let small = Task::from_registry("matmul", "M=32,N=32,K=32").expect("task");
    for (n, (task, device)) in [
        (&big, host_device().clone()),
        (&small, host_device().clone()),
        (&big, other_device()),
    ]
    .into_iter()
    .enumerate()
    {
        let steps: Vec<Vec<Step>> = [2, 4, 8, 16].iter().map(|&f| split_steps(f)).collect();
        let mut results: Vec<MeasureResult> = (0..4)
            .map(|i| ok_result(1e-3 * (4 - i) as f64 * (n + 1) as f64, 1.7e9 + i as f64))
            .collect();
        results[1] = MeasureResult::error(MeasureErrorKind::WrongResult, "output 0 differs", 0.002);
        let batch: Vec<(&[Step], &MeasureResult)> =
            steps.iter().map(Vec::as_slice).zip(&results).collect();
        assert_eq!(db.record_batch(task, &device, &batch).expect("recorded"), 4);
    }
    (big, small)
}

#[test]
fn db_to_jsonl_to_a_fresh_db_keeps_the_best_records() {
    let dir = Scratch::new("db-roundtrip");
    let mut db = TuningDb::open(&dir.join("a.db")).expect("opens");
    let (big, small) = fill(&mut db);
    let log = dir.join("logs/all.jsonl");
    assert_eq!(db.export_jsonl(&log, None, None).expect("exports"), 12);
    let mut fresh = TuningDb::open(&dir.join("b.db")).expect("opens");
    let stats = fresh.import_jsonl(&log, false).expect("imports");
    assert_eq!((stats.read, stats.added), (12, 12));
    let again = fresh.import_jsonl(&log, false).expect("imports");
    assert_eq!(
        (again.read, again.added),
        (12, 0),
        "importing twice adds nothing"
    );
    for task in [&big, &small] {
        for device in [host_device().key(), other_device().key()] {
            let want = db.best(&task.key().hash, &device.hash, 3).expect("query");
            let got = fresh
                .best(&task.key().hash, &device.hash, 3)
                .expect("query");
            assert_eq!(got, want);
        }
    }
    let best = fresh
        .best(&big.key().hash, &host_device().key().hash, 1)
        .expect("query");
    assert_eq!(
        best[0].steps,
        split_steps(16),
        "the fastest record comes first"
    );
    assert_eq!(fresh.list().expect("list"), db.list().expect("list"));
    // Exporting the fresh database gives the same file: nothing was lost or changed.
    let log2 = dir.join("logs/again.jsonl");
    fresh.export_jsonl(&log2, None, None).expect("exports");
    assert_eq!(
        std::fs::read_to_string(&log).expect("reads"),
        std::fs::read_to_string(&log2).expect("reads")
    );
    // Selective export.
    let host = host_device().key().to_string();
    let n = db
        .export_jsonl(
            &dir.join("host.jsonl"),
            Some(&host),
            Some(&big.key().hash[..10]),
        )
        .expect("exports");
    assert_eq!(n, 4);
    let err = db
        .export_jsonl(&dir.join("none.jsonl"), Some("no-such-device"), None)
        .expect_err("no match");
    assert!(err.to_string().contains("no-such-device"), "{err}");
    assert!(!dir.join("none.jsonl").exists());
}

#[test]
fn records_of_another_device_or_shape_are_never_an_exact_match() {
    let mut db = TuningDb::open_in_memory().expect("opens");
    let task = Task::from_registry("matmul", "M=64,N=64,K=64").expect("task");
    let steps = split_steps(8);
    let result = ok_result(1e-3, 1.7e9);
    db.record_batch(&task, &other_device(), &[(&steps, &result)])
        .expect("recorded");
    let (found, skipped) = db.lookup(&task, &host_device().key()).expect("lookup");
    assert!(skipped.is_empty());
    match found {
        Lookup::OtherDevices(devices) => {
            assert_eq!(devices.len(), 1);
            assert_eq!(devices[0].1, other_device().key().hash);
            assert_eq!(devices[0].2, 1);
        }
        other => panic!("expected other devices, got {other:?}"),
    }
    let other_shape = Task::from_registry("matmul", "M=64,N=64,K=32").expect("task");
    let (found, _) = db
        .lookup(&other_shape, &other_device().key())
        .expect("lookup");
    assert_eq!(
        found,
        Lookup::Nothing(vec!["matmul[M=64,N=64,K=64,f32]".into()])
    );
    let (found, _) = db.lookup(&task, &other_device().key()).expect("lookup");
    assert!(matches!(found, Lookup::Exact(r) if r.steps == steps));
}

#[test]
fn the_cli_says_what_it_found_instead_of_an_exact_match() {
    let dir = Scratch::new("db-cli-mismatch");
    let path = dir.join("t.db");
    let mut db = TuningDb::open(&path).expect("opens");
    let task = Task::from_registry("matmul", "M=64,N=64,K=64").expect("task");
    let steps = split_steps(8);
    let result = ok_result(1e-3, 1.7e9);
    db.record_batch(&task, &other_device(), &[(&steps, &result)])
        .expect("recorded");
    drop(db);
    let best = |shape: &str, extra: &[&str]| {
        let mut args = vec!["cache", "best", "matmul", "--shape", shape, "--db"];
        args.push(path.to_str().expect("utf-8 path"));
        args.extend_from_slice(extra);
        tessera(&args)
    };
    let out = best("M=64,N=64,K=64", &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("other device(s)") && err.contains(&other_device().key().readable),
        "{err}"
    );
    assert!(text(&out.stdout).is_empty());
    let out = best("M=64,N=64,K=32", &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("other shapes: matmul[M=64,N=64,K=64,f32]"),
        "{err}"
    );
    let device = &other_device().key().hash[..12];
    let out = best("M=64,N=64,K=64", &["--device", device, "--steps-only"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        steps_from_json(&text(&out.stdout)).expect("a schedule"),
        steps
    );
}

#[test]
fn records_that_no_longer_replay_are_reported_and_skipped() {
    let mut db = TuningDb::open_in_memory().expect("opens");
    let task = Task::from_registry("matmul", "M=64,N=64,K=64").expect("task");
    let stale: Vec<Step> = steps_from_json(
        r#"[{"kind":"split","stage":"C","iter":"j_from_an_old_dag","factors":[4]}]"#,
    )
    .expect("parses");
    let valid = split_steps(4);
    let (fast, slow) = (ok_result(1e-4, 1.7e9), ok_result(1e-3, 1.7e9));
    db.record_batch(&task, host_device(), &[(&stale, &fast), (&valid, &slow)])
        .expect("recorded");
    let (found, skipped) = db.lookup(&task, &host_device().key()).expect("lookup");
    assert!(
        matches!(found, Lookup::Exact(ref r) if r.steps == valid),
        "{found:?}"
    );
    assert_eq!(skipped.len(), 1);
    assert!(
        skipped[0].reason.contains("j_from_an_old_dag"),
        "{:?}",
        skipped[0]
    );
    let valid_records = db
        .best_valid(&task, &host_device().key(), 5)
        .expect("query");
    assert_eq!(valid_records.records.len(), 1);
}

#[test]
fn prune_keeps_the_fastest_and_merge_is_idempotent() {
    let dir = Scratch::new("db-prune-merge");
    let mut a = TuningDb::open(&dir.join("a.db")).expect("opens");
    fill(&mut a);
    let mut b = TuningDb::open(&dir.join("b.db")).expect("opens");
    let stats = b.merge(&dir.join("a.db")).expect("merges");
    assert_eq!((stats.read, stats.added), (12, 12));
    assert_eq!(b.merge(&dir.join("a.db")).expect("merges").added, 0);
    assert!(b.merge(&dir.join("missing.db")).is_err());
    let deleted = b.prune(1).expect("prunes");
    assert_eq!(deleted, 9, "3 groups of 4 records keep 1 each");
    for row in b.list().expect("list") {
        assert_eq!((row.records, row.successes), (1, 1));
        let best = a.best(&row.workload.1, &row.device.1, 1).expect("query");
        assert_eq!(best[0].result.median(), row.best_cost);
    }
}

fn good_line() -> String {
    let mut db = TuningDb::open_in_memory().expect("opens");
    let task = Task::from_registry("matmul", "M=16,N=16,K=16").expect("task");
    let steps = split_steps(4);
    db.record_batch(&task, host_device(), &[(&steps, &ok_result(1e-5, 1.7e9))])
        .expect("recorded");
    let record = db.all_records().expect("records").remove(0);
    serde_json::to_string(&record).expect("serialises")
}

#[test]
fn malformed_logs_are_rejected_with_line_numbers_and_write_nothing() {
    let dir = Scratch::new("db-malformed");
    let good = good_line();
    let truncated = &good[..good.len() / 2];
    let wrong_type = good.replacen("\"costs\":[", "\"costs\":\"fast\",\"was\":[", 1);
    let unknown_step = good.replacen("\"kind\":\"split\"", "\"kind\":\"splat\"", 1);
    let newer = good.replacen(&format!("\"schema\":{SCHEMA_VERSION}"), "\"schema\":99", 1);
    assert_ne!(newer, good);
    let forged_device = good.replacen("\"key\":\"", "\"key\":\"0", 1);
    let cases = [
        (truncated.to_string(), "EOF"),
        (wrong_type, "invalid type"),
        (unknown_step, "splat"),
        (newer, "schema 99"),
        (format!("{}\n", "{\"schema\": 1}"), "missing field"),
        (forged_device, "64 hex"),
    ];
    for (n, (bad, expected)) in cases.iter().enumerate() {
        let db_path = dir.join(format!("case{n}.db"));
        let log = dir.join(format!("case{n}.jsonl"));
        std::fs::write(&log, format!("{good}\n\n{bad}\n")).expect("writes");
        let mut db = TuningDb::open(&db_path).expect("opens");
        let err = db.import_jsonl(&log, false).expect_err("malformed");
        let msg = err.to_string();
        assert!(matches!(err, DbError::MalformedLog { .. }), "{msg}");
        assert!(
            msg.contains("line 3") && msg.contains(expected),
            "case {n}: {msg}"
        );
        assert_eq!(db.count().expect("count"), 0, "case {n}: nothing written");
        let stats = db.import_jsonl(&log, true).expect("skips the bad line");
        assert_eq!((stats.added, stats.skipped.len()), (1, 1));
        // The CLI: one line, exit code 2.
        let out = tessera(&[
            "cache",
            "import",
            log.to_str().expect("utf-8"),
            "--db",
            dir.join(format!("cli{n}.db")).to_str().expect("utf-8"),
        ]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            text(&out.stderr).contains("line 3"),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stderr).lines().count(), 1);
    }
}

#[test]
fn a_database_with_a_newer_schema_is_refused_untouched() {
    let dir = Scratch::new("db-newer");
    let path = dir.join("future.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("opens");
        conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 7;")
            .expect("writes");
    }
    let before = std::fs::read(&path).expect("reads");
    let err = TuningDb::open(&path).err().expect("refused");
    assert!(
        matches!(err, DbError::NewerSchema { found: 7, .. }),
        "{err}"
    );
    let out = tessera(&["cache", "list", "--db", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    let msg = text(&out.stderr);
    assert!(
        msg.contains("schema version 7") && msg.contains("upgrade tessera"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(&path).expect("reads"),
        before,
        "the file is untouched"
    );
    let missing = dir.join("typo.db");
    let out = tessera(&["cache", "list", "--db", missing.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !missing.exists(),
        "a read-only command does not create a database"
    );
}

fn measure_args<'a>(db: &'a str, random: &'a str, seed: &'a str) -> Vec<&'a str> {
    vec![
        "measure",
        "matmul",
        "--shape",
        "M=16,N=16,K=16",
        "--random",
        random,
        "--seed",
        seed,
        "--steps",
        "4",
        "--workers",
        "1",
        "--batch-size",
        "3",
        "--min-repeat-ms",
        "0.5",
        "--repeat",
        "1",
        "--db",
        db,
    ]
}

#[test]
fn two_tuners_write_one_database_at_once() {
    let dir = Scratch::new("db-concurrent");
    let path = dir.join("shared.db");
    let db = path.to_str().expect("utf-8");
    let spawn = |seed: &str| {
        tessera_command(&measure_args(db, "12", seed))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts")
    };
    let (a, b) = (spawn("1"), spawn("2"));
    for child in [a, b] {
        let out = child.wait_with_output().expect("finishes");
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let db = TuningDb::open(&path).expect("opens");
    let records = db.all_records().expect("records");
    assert_eq!(records.len(), 24, "every record of both writers is there");
    assert!(
        records
            .iter()
            .all(|r| r.result.error_kind == MeasureErrorKind::None)
    );
}

fn count(path: &Path) -> usize {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    conn.query_row("SELECT COUNT(*) FROM records", [], |r| r.get::<_, i64>(0))
        .map_or(0, |n| n as usize)
}

/// The database at `path`, after SQLite's integrity check passed on it.
fn reopened_after_a_crash(path: &Path) -> TuningDb {
    let conn = rusqlite::Connection::open(path).expect("opens after the crash");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("checks");
    assert_eq!(check, "ok");
    drop(conn);
    TuningDb::open(path).expect("opens")
}

#[test]
fn a_writer_killed_mid_run_leaves_every_committed_batch() {
    let dir = Scratch::new("db-killed");
    let path = dir.join("killed.db");
    let db = path.to_str().expect("utf-8");
    let mut child = tessera_command(&measure_args(db, "3000", "3"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let start = Instant::now();
    let mut seen = 0;
    while seen < 6 && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
        seen = count(&path);
    }
    assert!(seen >= 6, "the writer committed batches before the kill");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let db = reopened_after_a_crash(&path);
    let n = db.count().expect("count");
    assert!(n >= seen, "{n} records after the kill, {seen} seen before");
    assert_eq!(n % 3, 0, "batches are whole: {n} records in batches of 3");
    assert!(
        db.all_records()
            .expect("readable")
            .iter()
            .all(|r: &TuningRecord| r.validate().is_ok())
    );
}

/// Three batches of three records of matmul 64³, each record with its own
/// split factor (2 to 10, in batch order), so a stored row tells its batch.
fn three_batches() -> (Task, Vec<Vec<Vec<Step>>>, Vec<MeasureResult>) {
    let task = Task::from_registry("matmul", "M=64,N=64,K=64").expect("task");
    let steps: Vec<Vec<Vec<Step>>> = (0..3)
        .map(|batch| (0..3).map(|row| split_steps(2 + 3 * batch + row)).collect())
        .collect();
    let results = (0..9).map(|n| ok_result(1e-3, 1.7e9 + n as f64)).collect();
    (task, steps, results)
}

fn write_batch(
    db: &mut TuningDb,
    task: &Task,
    steps: &[Vec<Step>],
    results: &[MeasureResult],
) -> Result<usize, DbError> {
    let batch: Vec<(&[Step], &MeasureResult)> =
        steps.iter().map(Vec::as_slice).zip(results).collect();
    db.record_batch(task, host_device(), &batch)
}

/// The split factors of the stored records, oldest first, read through a
/// connection of its own (what is on disk, not what one connection sees).
fn stored_factors(path: &Path) -> Vec<i64> {
    TuningDb::open(path)
        .expect("opens")
        .all_records()
        .expect("readable")
        .iter()
        .map(|r| match r.steps.as_slice() {
            [Step::Split { factors, .. }] => factors[0],
            other => panic!("not a record of these tests: {other:?}"),
        })
        .collect()
}

#[test]
fn a_batch_whose_second_row_fails_stores_none_of_its_rows_and_keeps_every_earlier_batch() {
    let dir = Scratch::new("db-batch-fault");
    let path = dir.join("fault.db");
    let mut db = TuningDb::open(&path).expect("opens");
    let (task, steps, results) = three_batches();
    // Record 8 is the second row of the third batch.
    db.inject_write_fault(Some(WriteFault {
        after_row: 8,
        action: WriteFaultAction::Fail,
    }));
    for batch in 0..2 {
        let written = write_batch(&mut db, &task, &steps[batch], &results[3 * batch..][..3]);
        assert_eq!(written.expect("written whole"), 3, "batch {batch}");
    }
    match write_batch(&mut db, &task, &steps[2], &results[6..9]) {
        Err(DbError::InjectedFault { row, .. }) => assert_eq!(row, 8),
        other => panic!("the third batch should fail at its second row, got {other:?}"),
    }
    assert_eq!(
        stored_factors(&path),
        [2, 3, 4, 5, 6, 7],
        "no row of the failed batch (factors 8, 9, 10), every row of the two before"
    );
    assert_eq!(db.count().expect("count"), 6);
    // The fault strikes once: the same batch again is stored whole.
    assert_eq!(
        write_batch(&mut db, &task, &steps[2], &results[6..9]).expect("written whole"),
        3
    );
    assert_eq!(stored_factors(&path), [2, 3, 4, 5, 6, 7, 8, 9, 10]);
}

#[test]
fn a_writer_aborted_inside_a_batch_stores_none_of_its_rows_and_keeps_every_earlier_batch() {
    let dir = Scratch::new("db-abort-in-batch");
    let path = dir.join("aborted.db");
    let db = path.to_str().expect("utf-8");
    // Nine candidates in batches of three; the writer aborts right after
    // inserting record 8, the second row of the third batch, before it commits.
    let out = tessera_command(&measure_args(db, "9", "5"))
        .env(ABORT_AFTER_ROW_ENV, "8")
        .output()
        .expect("runs");
    assert!(
        !out.status.success(),
        "the writer should have aborted: {}",
        text(&out.stdout)
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(6),
            "SIGABRT: {}",
            text(&out.stderr)
        );
    }
    let db = reopened_after_a_crash(&path);
    let records = db.all_records().expect("readable");
    assert_eq!(
        records.len(),
        6,
        "the two committed batches whole, nothing of the third"
    );
    assert!(records.iter().all(|r| r.validate().is_ok()));
}

#[test]
fn an_abort_hook_that_is_not_a_record_count_is_refused() {
    let dir = Scratch::new("db-abort-hook-bad");
    let path = dir.join("hook.db");
    TuningDb::open(&path).expect("creates");
    for value in ["x", "0", "-1"] {
        let out = tessera_command(&["cache", "list", "--db", path.to_str().expect("utf-8")])
            .env(ABORT_AFTER_ROW_ENV, value)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{value}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(&format!("{ABORT_AFTER_ROW_ENV}={value} is not")),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn gzip_logs_and_snapshots_hold_the_same_records() {
    let dir = Scratch::new("db-gzip");
    let mut db = TuningDb::open(&dir.join("a.db")).expect("opens");
    fill(&mut db);
    let (plain, packed) = (dir.join("all.jsonl"), dir.join("all.jsonl.gz"));
    db.export_jsonl(&plain, None, None).expect("exports");
    db.export_jsonl(&packed, None, None).expect("exports gzip");
    let plain_len = std::fs::metadata(&plain).expect("plain").len();
    let packed_bytes = std::fs::read(&packed).expect("packed");
    assert_eq!(&packed_bytes[..2], &[0x1f, 0x8b], "a gzip stream");
    assert!((packed_bytes.len() as u64) < plain_len / 4);
    let mut fresh = TuningDb::open_in_memory().expect("opens");
    let stats = fresh.import_jsonl(&packed, false).expect("imports gzip");
    assert_eq!((stats.read, stats.added), (12, 12));
    assert_eq!(fresh.list().expect("list"), db.list().expect("list"));

    let copy = dir.join("copy.db");
    db.snapshot(&copy).expect("snapshot");
    db.snapshot(&copy)
        .expect("a second snapshot replaces the first");
    let copied = TuningDb::open_existing(&copy).expect("the copy opens");
    assert_eq!(copied.list().expect("list"), db.list().expect("list"));
    assert_eq!(copied.count().expect("count"), 12);
}
