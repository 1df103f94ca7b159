//! `tessera ci`, end to end with tiny budgets on the real binary: every
//! output is written, a second run with a larger budget continues from the
//! database, shards merge into the unsharded run's workload set, and a
//! workload slower than its baseline artifact fails the job unless
//! `--allow-regression` (on a comparison no timing can flip; the same from
//! real measurements is in `realtime`).

use crate::common;
use common::{Scratch, tessera};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use tessera::db::TuningDb;
use tessera::deploy::{INDEX_FILE, Index};

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn succeeded(args: &[&str]) -> String {
    let out = tessera(args);
    assert!(
        out.status.success(),
        "`tessera {}` failed: {}\n{}",
        args.join(" "),
        stderr(&out),
        stdout(&out)
    );
    stdout(&out)
}

fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A suite file of `(label, op, shape)` workloads.
pub(crate) fn suite(dir: &Path, workloads: &[(&str, &str, &str)]) -> PathBuf {
    let entries: Vec<Value> = workloads
        .iter()
        .map(|(label, op, shape)| {
            serde_json::json!({"label": label, "op": op, "shape": shape, "weight": 1})
        })
        .collect();
    let path = dir.join("suite.json");
    let body = serde_json::json!({"name": "test", "description": "", "workloads": entries});
    std::fs::write(&path, body.to_string()).expect("suite written");
    path
}

const TWO: &[(&str, &str, &str)] = &[
    ("matmul", "matmul", "M=16,N=16,K=16"),
    ("relu", "relu", "M=32,N=32"),
];

pub(crate) fn report(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    serde_json::from_str(&text).expect("report.json is JSON")
}

/// The workload keys of the only device folder under `schedules`.
fn deployed_keys(schedules: &Path) -> BTreeSet<String> {
    let folders: Vec<PathBuf> = std::fs::read_dir(schedules)
        .expect("schedules folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join(INDEX_FILE).is_file())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    let index = Index::read(&folders[0].join(INDEX_FILE)).expect("index");
    index
        .artifacts
        .iter()
        .map(|e| e.workload_key.clone())
        .collect()
}

fn trial_records(db: &Path) -> usize {
    let db = TuningDb::open_existing(db).expect("database");
    db.all_records()
        .expect("records")
        .iter()
        .filter(|r| !r.steps.is_empty())
        .count()
}

#[test]
fn the_job_writes_every_output_and_resumes_from_its_database() {
    let dir = Scratch::new("ci-resume");
    let suite = suite(&dir, TWO);
    let out = dir.join("out");
    // Microsecond kernels on a shared machine: only a gross slowdown against
    // the previous run's artifacts may count here (regressions have their
    // own test).
    let run = |trials: &str| {
        succeeded(&[
            "ci",
            "--suite",
            text(&suite),
            "--out",
            text(&out),
            "--trials-per-task",
            trials,
            "--regression-tolerance",
            "0.8",
        ])
    };

    let first = run("2");
    assert!(first.contains("2 trials per workload"), "{first}");
    let r = report(&out);
    assert_eq!(r["trials_this_run"], 4, "{r:#}");
    let workloads = r["workloads"].as_array().expect("workloads");
    assert_eq!(workloads.len(), 2);
    for w in workloads {
        assert!(w["tuned_gflops"].as_f64().is_some_and(|g| g > 0.0), "{w}");
        assert!(w["default_gflops"].as_f64().is_some_and(|g| g > 0.0), "{w}");
        assert_eq!(w["comparison"]["kind"], "no_baseline", "{w}");
        assert!(w["artifact"].as_str().is_some(), "{w}");
    }
    let outputs = &r["outputs"];
    let db = PathBuf::from(outputs["db"].as_str().expect("db"));
    assert_eq!(db, out.join("tuning.db"));
    assert_eq!(trial_records(&db), 4);
    let log = PathBuf::from(outputs["log"].as_str().expect("log"));
    assert!(log.starts_with(out.join("tuning_logs")));
    let lines = std::fs::read_to_string(&log).expect("log").lines().count();
    assert_eq!(lines, 6, "4 trials and 2 default schedules");
    let model = PathBuf::from(outputs["model"].as_str().expect("model"));
    let (header, _) = tessera::cost::load_model(&model).expect("the retrained model loads");
    assert_eq!(header.workloads.len(), 2);
    assert_eq!(deployed_keys(&out.join("schedules")).len(), 2);
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("| `matmul[M=16,N=16,K=16,f32]#"), "{md}");
    assert!(md.contains("2 trials per workload"), "{md}");
    assert!(md.contains("![tuning curves](curves.svg)"), "{md}");
    assert!(out.join("curves.svg").is_file());
    for w in workloads {
        let name = w["workload"].as_str().expect("workload");
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("no row for {name} in {md}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let figure = |key: &str| {
            w[key]
                .as_f64()
                .map_or("–".to_string(), |g| format!("{g:.2}"))
        };
        assert_eq!(cells[5], figure("recorded_gflops"), "{row}");
        assert_eq!(cells[6], figure("remeasured_gflops"), "{row}");
        assert_ne!(cells[6], "–", "the deployed record was re-measured: {row}");
    }

    // More budget: the run continues (4 more trials), it does not restart,
    // and it compares with the artifacts the first run published.
    run("4");
    let r = report(&out);
    assert_eq!(r["trials_this_run"], 4, "{r:#}");
    assert_eq!(trial_records(&db), 8);
    let trials: Vec<u64> = r["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .map(|w| w["trials"].as_u64().expect("trials"))
        .collect();
    assert_eq!(trials.iter().sum::<u64>(), 8);
    for w in r["workloads"].as_array().expect("workloads") {
        assert_ne!(w["comparison"]["kind"], "no_baseline", "{w}");
    }

    // The same budget again: nothing left to spend, nothing tuned.
    let third = run("4");
    assert!(third.contains("already spent"), "{third}");
    assert_eq!(report(&out)["trials_this_run"], 0);
    assert_eq!(trial_records(&db), 8);
    assert!(!out.join("curves.svg").exists(), "no stale curves");
}

#[test]
fn two_shards_merged_equal_the_unsharded_run() {
    let dir = Scratch::new("ci-shards");
    let three = [
        ("matmul", "matmul", "M=16,N=16,K=16"),
        ("relu", "relu", "M=32,N=32"),
        ("bias_add", "bias_add", "M=16,N=32"),
    ];
    let suite = suite(&dir, &three);
    let run = |out: &Path, shard: &str| {
        succeeded(&[
            "ci",
            "--suite",
            text(&suite),
            "--out",
            text(out),
            "--trials-per-task",
            "1",
            "--shard",
            shard,
        ])
    };
    let (a, b, whole) = (dir.join("a"), dir.join("b"), dir.join("whole"));
    run(&a, "1/2");
    run(&b, "2/2");
    run(&whole, "1/1");
    let keys_a = deployed_keys(&a.join("schedules"));
    let keys_b = deployed_keys(&b.join("schedules"));
    assert_eq!(
        (keys_a.len(), keys_b.len()),
        (2, 1),
        "round robin: 1st and 3rd, 2nd"
    );
    assert!(keys_a.is_disjoint(&keys_b));

    let merged = dir.join("merged.db");
    for shard in [&a, &b] {
        succeeded(&[
            "cache",
            "--db",
            text(&merged),
            "merge",
            text(&shard.join("tuning.db")),
        ]);
    }
    let schedules = dir.join("merged-schedules");
    succeeded(&["deploy", "--db", text(&merged), "--out", text(&schedules)]);
    let unsharded = deployed_keys(&whole.join("schedules"));
    assert_eq!(unsharded.len(), 3);
    assert_eq!(deployed_keys(&schedules), unsharded);
    assert_eq!(
        keys_a.union(&keys_b).cloned().collect::<BTreeSet<_>>(),
        unsharded
    );
}

/// Measures `schedule` of matmul 64³ into `db`, and fails unless it was
/// recorded as a success. The timeouts are generous: this runs beside the
/// other tests on a 2-core machine, where the default ten seconds for a
/// debug build's verification and repeats were once not enough; a failed
/// record would only surface later, as "nothing to deploy".
fn measure_matmul_into(schedule: &Path, db: &Path) {
    let report = succeeded(&[
        "measure",
        "matmul",
        "--shape",
        "M=64,N=64,K=64",
        "--schedule",
        text(schedule),
        "--db",
        text(db),
        "--build-timeout",
        "300",
        "--run-timeout",
        "300",
    ]);
    assert!(
        report.contains("1 none"),
        "the schedule {} was not measured successfully:\n{report}",
        text(schedule)
    );
}

/// A baseline folder holding the hand-tiled schedule of matmul 64³.
pub(crate) fn hand_tiled_baseline(dir: &Path) -> PathBuf {
    let db = dir.join("baseline.db");
    let schedule =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/schedules/matmul_tiled.json");
    measure_matmul_into(&schedule, &db);
    let baseline = dir.join("baseline");
    succeeded(&["deploy", "--db", text(&db), "--out", text(&baseline)]);
    baseline
}

/// The job's database seeded with one deliberately slow schedule of matmul
/// 64³ (n outermost, the rows innermost: strided, unvectorized stores;
/// several times slower than the hand-tiled one), so that the job, whose
/// one trial per task is then already spent, deploys it and must compare
/// it with the baseline.
pub(crate) fn tune_one_trial(suite: &Path, out: &Path, baseline: &Path, extra: &[&str]) -> Output {
    std::fs::create_dir_all(out).expect("out dir");
    let slow = out.with_extension("slow.json");
    std::fs::write(
        &slow,
        r#"[{"kind":"reorder","stage":"C","order":["i1","k","i0"]}]"#,
    )
    .expect("write schedule");
    measure_matmul_into(&slow, &out.join("tuning.db"));
    let mut args = vec![
        "ci",
        "--suite",
        text(suite),
        "--out",
        text(out),
        "--trials-per-task",
        "1",
        "--baseline",
        text(baseline),
        "--model",
        "random",
        "--no-pretrained",
        "--timeout",
        "300",
    ];
    args.extend_from_slice(extra);
    tessera(&args)
}

/// Rewrites the baseline's one artifact as a later tessera might read it:
/// `steps` (when given) in place of its schedule, and `gflops` as its
/// recorded speed.
fn edit_baseline(baseline: &Path, steps: Option<Value>, gflops: f64) {
    let folder = std::fs::read_dir(baseline)
        .expect("baseline")
        .map(|e| e.expect("entry").path())
        .find(|p| p.join(INDEX_FILE).is_file())
        .expect("device folder");
    let index = Index::read(&folder.join(INDEX_FILE)).expect("index");
    let file = folder.join(&index.artifacts[0].file);
    let mut artifact: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("artifact")).expect("JSON");
    if let Some(steps) = steps {
        artifact["steps"] = steps;
    }
    artifact["gflops"] = serde_json::json!(gflops);
    std::fs::write(&file, artifact.to_string()).expect("artifact written");
}

/// A speed no 64³ matmul reaches (it would run in half a nanosecond): any
/// schedule compared with it is slower by orders of magnitude, so the
/// comparison does not depend on how fast this machine is today.
const IMPOSSIBLE_GFLOPS: f64 = 1.0e6;

/// The regression logic on a comparison that timing cannot flip: the
/// baseline's schedule no longer replays, so the job holds the new schedule
/// to the speed recorded in the baseline, which nothing reaches. (The same
/// verdict from two real measurements is `realtime::a_measured_slowdown_fails_the_ci_job`.)
#[test]
fn a_schedule_slower_than_the_baseline_fails_the_job_unless_allowed() {
    let dir = Scratch::new("ci-regression");
    let suite = suite(&dir, &[("matmul", "matmul", "M=64,N=64,K=64")]);
    let baseline = hand_tiled_baseline(&dir);
    let no_longer_applies = serde_json::json!([{"kind": "split", "stage": "C", "iter": "no_such_axis", "factors": [4]}]);
    edit_baseline(&baseline, Some(no_longer_applies), IMPOSSIBLE_GFLOPS);

    let out = dir.join("strict");
    let strict = tune_one_trial(&suite, &out, &baseline, &[]);
    assert_eq!(strict.status.code(), Some(3), "{}", stderr(&strict));
    assert!(stdout(&strict).contains("REGRESSED"), "{}", stdout(&strict));
    assert!(
        stderr(&strict).contains("1 workload(s) regressed against the baseline (matmul)"),
        "{}",
        stderr(&strict)
    );
    let r = report(&out);
    let w = &r["workloads"][0];
    assert_eq!(w["regressed"], true, "{w}");
    assert_eq!(w["comparison"]["kind"], "recorded", "{w}");
    assert_eq!(w["comparison"]["baseline_gflops"], IMPOSSIBLE_GFLOPS, "{w}");
    assert!(
        w["comparison"]["why"]
            .as_str()
            .expect("why")
            .contains("no longer replays"),
        "{w}"
    );
    let tuned = w["tuned_gflops"].as_f64().expect("tuned GFLOP/s");
    let ratio = w["comparison"]["ratio"].as_f64().expect("ratio");
    assert!(tuned > 0.0 && ratio < 1e-3, "{w}");
    assert!(
        (ratio - tuned / IMPOSSIBLE_GFLOPS).abs() <= 1e-9 * ratio,
        "{w}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains("**regressed**") && md.contains("slower than the baseline"),
        "{md}"
    );

    let allowed_out = dir.join("allowed");
    let allowed = tune_one_trial(&suite, &allowed_out, &baseline, &["--allow-regression"]);
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    let w = &report(&allowed_out)["workloads"][0];
    assert_eq!(w["regressed"], true, "{w}");
    assert_eq!(w["comparison"]["kind"], "recorded", "{w}");
}

/// A baseline whose schedule still replays is measured again beside the new
/// one, not trusted: its recorded speed is one nothing reaches, and the
/// comparison must use what this run measured instead. The verdict follows
/// the measured ratio whichever way the timings fall.
#[test]
fn a_baseline_that_still_replays_is_measured_again() {
    let dir = Scratch::new("ci-remeasured");
    let suite = suite(&dir, &[("matmul", "matmul", "M=64,N=64,K=64")]);
    let baseline = hand_tiled_baseline(&dir);
    edit_baseline(&baseline, None, IMPOSSIBLE_GFLOPS);

    let out = dir.join("out");
    let run = tune_one_trial(&suite, &out, &baseline, &[]);
    let w = &report(&out)["workloads"][0];
    assert_eq!(w["comparison"]["kind"], "measured", "{w}");
    let measured = w["comparison"]["baseline_gflops"]
        .as_f64()
        .expect("baseline GFLOP/s");
    assert!(
        measured > 0.0 && measured < IMPOSSIBLE_GFLOPS / 100.0,
        "the recorded speed was used: {w}"
    );
    let ratio = w["comparison"]["ratio"].as_f64().expect("ratio");
    assert!(ratio.is_finite() && ratio > 0.0, "{w}");
    let regressed = ratio < 1.0 - 0.10; // the default --regression-tolerance
    assert_eq!(w["regressed"], regressed, "{w}");
    let expected_code = if regressed { 3 } else { 0 };
    assert_eq!(run.status.code(), Some(expected_code), "{}", stderr(&run));
}

#[test]
fn bad_options_fail_before_anything_is_written() {
    let dir = Scratch::new("ci-options");
    let suite = suite(&dir, TWO);
    let out = dir.join("out");
    let cases: &[(&[&str], &str)] = &[
        (&[], "give a budget"),
        (&["--trials-per-task", "0"], "at least 1"),
        (&["--trials-per-task", "1", "--shard", "3/3"], "is empty"),
        (
            &["--trials-per-task", "1", "--shard", "3/2"],
            "expected i/n",
        ),
        (
            &["--trials-per-task", "1", "--regression-tolerance", "1.5"],
            "below 1",
        ),
        (&["--time-budget", "soon"], "time-budget"),
        (
            &["--trials-per-task", "1", "--learner", "nope"],
            "unknown cost model",
        ),
    ];
    for (extra, message) in cases {
        let mut args = vec!["ci", "--suite", text(&suite), "--out", text(&out)];
        args.extend_from_slice(extra);
        let o = tessera(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(message), "{extra:?}: {}", stderr(&o));
        assert!(!out.exists(), "{extra:?} wrote {}", out.display());
    }
    let missing = tessera(&[
        "ci",
        "--suite",
        text(&dir.join("nope.json")),
        "--out",
        text(&out),
        "--trials-per-task",
        "1",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("nope.json"),
        "{}",
        stderr(&missing)
    );
}
