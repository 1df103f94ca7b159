//! `tessera tune --suite`: the task scheduler over a suite file, its JSON
//! summary and plot, and the errors for bad suite files.

use crate::common;
use common::{FAST_TUNE as FAST, Scratch, tessera};

use std::path::Path;
use std::process::Output;

use tessera::db::{TuningDb, TuningRecord};
use tessera::schedule::Step;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("written");
    path.display().to_string()
}

/// Checks a task of the JSON summary against the database: its best is the
/// fastest record of its workload (one of them on a tie), at that record's
/// speed, and its default is the measurement of the empty step list.
fn assert_best_and_default_are_the_records(task: &serde_json::Value, records: &[TuningRecord]) {
    let key = task["workload_key"].as_str().expect("key");
    let (readable, short_hash) = key.rsplit_once('#').expect("readable#hash");
    let mine: Vec<&TuningRecord> = records
        .iter()
        .filter(|r| r.workload.readable == readable && r.workload.key.starts_with(short_hash))
        .collect();
    let flops = task["flops"].as_f64().expect("flops");
    let gflops = |cost: f64| flops / cost / 1e9;
    let fastest = mine
        .iter()
        .filter_map(|r| r.result.median())
        .min_by(f64::total_cmp)
        .expect("a record measured");
    let best = task["best_gflops"].as_f64().expect("best");
    assert!(
        (best - gflops(fastest)).abs() <= 1e-9 * best,
        "{key}: best {best} GFLOP/s, the fastest record {}",
        gflops(fastest)
    );
    let best_steps: Vec<Step> =
        serde_json::from_value(task["best_steps"].clone()).expect("best steps");
    assert!(
        mine.iter()
            .any(|r| r.result.median() == Some(fastest) && r.steps == best_steps),
        "{key}: the best steps {best_steps:?} are not a fastest record"
    );
    let defaults: Vec<f64> = mine
        .iter()
        .filter(|r| r.steps.is_empty())
        .filter_map(|r| r.result.median())
        .collect();
    assert_eq!(defaults.len(), 1, "{key}: the default measured once");
    assert_eq!(
        task["default_gflops"].as_f64(),
        Some(gflops(defaults[0])),
        "{key}: the default's speed is its record's"
    );
}

#[test]
fn a_suite_shares_the_budget_and_plots_every_task() {
    let dir = Scratch::new("suite-run");
    let suite = write(
        &dir,
        "tiny.json",
        r#"{"name": "tiny", "workloads": [
            {"label": "mm", "op": "matmul", "shape": "M=4,N=4,K=4"},
            {"label": "act", "op": "relu", "shape": "M=4,N=8", "weight": 2}
        ]}"#,
    );
    let db = dir.join("t.db").display().to_string();
    let plot = dir.join("curves.svg");
    let plot_arg = plot.display().to_string();
    let mut args = vec![
        "tune",
        "--suite",
        &suite,
        "--trials",
        "8",
        "--batch-size",
        "2",
        "--db",
        &db,
        "--json",
        "--plot",
        &plot_arg,
    ];
    args.extend_from_slice(FAST);
    let out = tessera(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let tasks = report["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["label"], "mm");
    assert_eq!(tasks[1]["label"], "act");
    assert_eq!(tasks[1]["weight"], 2.0);
    let trials: u64 = tasks
        .iter()
        .map(|t| t["trials"].as_u64().expect("trials"))
        .sum();
    assert!((2..=8).contains(&trials), "{trials} trials");
    assert_eq!(report["trials"].as_u64(), Some(trials));
    let records = TuningDb::open(Path::new(&db))
        .expect("db")
        .all_records()
        .expect("records");
    assert_eq!(
        records.len() as u64,
        trials + 2,
        "every trial and each default recorded"
    );
    for t in tasks {
        assert!(t["rounds"].as_u64().expect("rounds") >= 1, "{t}");
        assert!(t["default_gflops"].as_f64().expect("default measured") > 0.0);
        assert!(t["workload_key"].as_str().expect("key").contains('#'));
        assert_best_and_default_are_the_records(t, &records);
    }
    let allocation: Vec<u64> = report["allocation"]
        .as_array()
        .expect("allocation")
        .iter()
        .map(|v| v.as_u64().expect("index"))
        .collect();
    assert_eq!(allocation[..2], [0, 1], "round-robin warm-up first");
    assert_eq!(report["per_round"], 2);
    assert_eq!(report["suite"], "tiny");
    assert!(report["best_latency_s"].as_f64().expect("latency") > 0.0);
    let svg = std::fs::read_to_string(&plot).expect("the plot is written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for label in ["mm", "act"] {
        assert!(
            svg.lines().any(|l| l.trim() == label),
            "legend entry {label}"
        );
    }
    assert!(Path::new(&db).exists());
}

#[test]
fn a_single_task_plots_its_curve_and_prints_the_plot() {
    let dir = Scratch::new("suite-one");
    let db = dir.join("t.db").display().to_string();
    let plot = dir.join("one.svg").display().to_string();
    let mut args = vec![
        "tune",
        "relu",
        "--shape",
        "M=4,N=4",
        "--trials",
        "2",
        "--batch-size",
        "2",
        "--db",
        &db,
        "--plot",
        &plot,
    ];
    args.extend_from_slice(FAST);
    let out = tessera(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("plot      {plot}")), "{text}");
    let svg = std::fs::read_to_string(&plot).expect("written");
    assert!(svg.contains("relu[M=4,N=4,f32]") && svg.contains("best GFLOP/s"));
}

/// Exit code 2, nothing on stdout, one line on stderr containing `parts`.
fn assert_rejected(args: &[&str], parts: &[&str]) {
    let out = tessera(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    for part in parts {
        assert!(err.contains(part), "{args:?}: {err}");
    }
}

/// A bad suite file: its name, its text, and what the one-line error must say.
struct BadSuite {
    file: &'static str,
    text: &'static str,
    extra: &'static [&'static str],
    says: &'static [&'static str],
}

const BAD_SUITES: &[BadSuite] = &[
    BadSuite {
        file: "bad.json",
        text: r#"{"name": "bad", "workloads": [{"label": "a", "op": "relu"}, {"label": "b", "op": "convolve"}]}"#,
        extra: &[],
        says: &[
            "error: suite",
            "bad.json",
            "workload #2 'b'",
            "unknown op 'convolve'",
        ],
    },
    BadSuite {
        file: "weight.json",
        text: r#"{"name": "w", "workloads": [{"label": "a", "op": "relu", "weight": 0}]}"#,
        extra: &[],
        says: &["workload #1 'a'", "weight 0"],
    },
    BadSuite {
        file: "dup.json",
        text: r#"{"name": "d", "workloads": [{"label": "a", "op": "relu"}, {"label": "a", "op": "gelu", "shape": "M=0"}]}"#,
        extra: &[],
        says: &["workload #2 'a'", "duplicate label"],
    },
    BadSuite {
        file: "shape.json",
        text: r#"{"name": "s", "workloads": [{"label": "g", "op": "group_conv2d", "shape": "C=6,K=8,groups=4"}]}"#,
        extra: &[],
        says: &["workload #1 'g'", "groups=4 must divide"],
    },
    BadSuite {
        file: "broken.json",
        text: "{\"name\": \"x\",\n \"workloads\": [}",
        extra: &[],
        says: &["broken.json", "line 2"],
    },
    BadSuite {
        file: "two.json",
        text: TWO_WORKLOADS,
        extra: &["--trials", "1"],
        says: &["--trials 1 is less than the 2 workloads"],
    },
    BadSuite {
        file: "two.json",
        text: TWO_WORKLOADS,
        extra: &["--plot", "/nonexistent/x.svg"],
        says: &["--plot"],
    },
];

const TWO_WORKLOADS: &str =
    r#"{"name": "two", "workloads": [{"label": "a", "op": "relu"}, {"label": "b", "op": "gelu"}]}"#;

#[test]
fn bad_suites_and_options_are_rejected_naming_the_entry() {
    let dir = Scratch::new("suite-bad");
    let db = dir.join("t.db").display().to_string();
    for case in BAD_SUITES {
        let suite = write(&dir, case.file, case.text);
        let mut args = vec!["tune", "--suite", &suite, "--db", &db];
        args.extend_from_slice(case.extra);
        assert_rejected(&args, case.says);
        assert_eq!(
            stderr(&tessera(&args)).lines().count(),
            1,
            "one line: {args:?}"
        );
    }
    assert_rejected(
        &["tune", "--suite", "/nonexistent/s.json"],
        &["cannot read suite /nonexistent/s.json"],
    );
    // --suite replaces the op and its shape; one of the two is required.
    let two = write(&dir, "two.json", TWO_WORKLOADS);
    assert_rejected(&["tune", "relu", "--suite", &two], &["cannot be used with"]);
    assert_rejected(
        &["tune", "--suite", &two, "--shape", "M=4"],
        &["cannot be used with"],
    );
    assert_rejected(&["tune"], &["required"]);
}
