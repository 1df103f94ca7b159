//! `tessera bench`'s same-run columns: the best schedule without
//! micro-kernels next to a tensorized best (`plain_gflops`), and a schedule
//! with its constant inputs laid out ahead of time (`--constants`).

use crate::common;
use common::{Scratch, tessera};

use std::path::Path;
use std::process::Output;

fn text(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn succeeded(args: &[&str]) {
    let out = tessera(args);
    assert!(
        out.status.success(),
        "`tessera {}`: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

const SHAPE: &str = "M=16,N=16,K=16";

/// matmul 16³ with its 4×4 blocks computed by the portable micro-kernel.
const TENSORIZED: &str = r#"[
    {"kind":"split","stage":"C","iter":"i0","factors":[4]},
    {"kind":"split","stage":"C","iter":"i1","factors":[4]},
    {"kind":"reorder","stage":"C","order":["i0.0","i1.0","k","i0.1","i1.1"]},
    {"kind":"tensorize","stage":"C","iter":"k","intrinsic":"generic_4x4"}
]"#;

#[test]
fn a_tensorized_best_is_timed_next_to_the_best_plain_schedule() {
    let dir = Scratch::new("bench-plain");
    let measured = dir.join("measured.db");
    let tensorized = dir.join("tensorized.json");
    std::fs::write(&tensorized, TENSORIZED).expect("write");
    succeeded(&[
        "measure",
        "matmul",
        "--shape",
        SHAPE,
        "--schedule",
        text(&tensorized),
        "--schedule",
        "examples/schedules/matmul_tiled.json",
        "--db",
        text(&measured),
    ]);
    // Which of the two measured faster depends on the build; make the
    // tensorized one the best and the tiled one the best plain record.
    let log = dir.join("records.jsonl");
    succeeded(&[
        "cache",
        "export",
        "--db",
        text(&measured),
        "--out",
        text(&log),
    ]);
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .expect("log")
        .lines()
        .map(|line| {
            let mut record: serde_json::Value = serde_json::from_str(line).expect("record");
            let tensorized = record["steps"].to_string().contains("tensorize");
            let cost = if tensorized { 1e-6 } else { 2e-6 };
            record["result"]["costs"] = serde_json::json!([cost, cost, cost]);
            record.to_string()
        })
        .collect();
    std::fs::write(&log, lines.join("\n") + "\n").expect("write log");
    let db = dir.join("ranked.db");
    succeeded(&["cache", "import", text(&log), "--db", text(&db)]);

    let report = json_of(&tessera(&[
        "bench",
        "matmul",
        "--shape",
        SHAPE,
        "--db",
        text(&db),
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
    ]));
    assert_eq!(report["source"], "tuned", "{report}");
    assert!(
        report["plain_gflops"].as_f64().is_some_and(|g| g > 0.0),
        "{report}"
    );
    assert!(
        report["max_rel_error"].as_f64().is_some_and(|e| e < 1e-4),
        "{report}"
    );

    // A plain best has no plain column.
    let report = json_of(&tessera(&[
        "bench",
        "matmul",
        "--shape",
        SHAPE,
        "--db",
        text(&measured),
        "--schedule",
        "examples/schedules/matmul_tiled.json",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
    ]));
    assert!(report["plain_gflops"].is_null(), "{report}");
}

#[test]
fn constants_laid_out_ahead_of_time_are_timed_and_checked() {
    let dir = Scratch::new("bench-constants");
    let schedule = dir.join("packed.json");
    std::fs::write(
        &schedule,
        r#"[{"kind":"cache_read","stage":"weight","readers":["dense"],"layout":[1,0]}]"#,
    )
    .expect("write");
    let bench = |constants: &str| {
        tessera(&[
            "bench",
            "dense",
            "--shape",
            "M=8,N=24,K=16",
            "--schedule",
            text(&schedule),
            "--constants",
            constants,
            "--threads",
            "1",
            "--repeat",
            "1",
            "--json",
        ])
    };
    let report = json_of(&bench("weight"));
    assert_eq!(report["constants"], serde_json::json!(["weight"]));
    assert!(
        report["prepacked_gflops"].as_f64().is_some_and(|g| g > 0.0),
        "{report}"
    );
    assert!(
        report["max_rel_error"].as_f64().is_some_and(|e| e < 1e-4),
        "{report}"
    );

    // The schedule reads data where it is: nothing to lay out, the
    // deployed kernel is the plain one, and no prepacked figure is made up.
    let report = json_of(&bench("data"));
    assert_eq!(report["constants"], serde_json::json!(["data"]));
    assert!(report["prepacked_gflops"].is_null(), "{report}");
    let out = bench("bias");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bias"), "{err}");
}
