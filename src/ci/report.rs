//! The job's report: `report.md` (what ran, with which budget, a table per
//! workload, regressions), `report.json` (the same, for machines) and
//! `curves.svg` (each workload's best GFLOP/s over this run's trials; drawn
//! with the `cli` feature only).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::deploy::write_atomic;
use crate::search::CurvePoint;

use super::error::CiError;
use super::job::CiReport;

/// The Markdown report inside the output folder.
pub const REPORT_MD: &str = "report.md";
/// The JSON report inside the output folder.
pub const REPORT_JSON: &str = "report.json";
/// The tuning curves inside the output folder.
pub const CURVES_SVG: &str = "curves.svg";

/// Writes `report.md`, `report.json` and (when this run tuned) `curves.svg`
/// into the report's output folder; returns the files written.
pub fn write_report(report: &CiReport) -> Result<Vec<PathBuf>, CiError> {
    let dir = &report.outputs.dir;
    let mut written = Vec::new();
    let series: Vec<(String, Vec<CurvePoint>)> = report
        .workloads
        .iter()
        .filter(|w| w.curve.len() > 1)
        .map(|w| (w.label.clone(), w.curve.clone()))
        .collect();
    let curves = dir.join(CURVES_SVG);
    let drew = draw_curves(report, &curves, &series)?;
    if drew {
        written.push(curves);
    } else if curves.is_file() {
        // An earlier run's curves would pass for this one's.
        std::fs::remove_file(&curves).map_err(CiError::io(&curves))?;
    }
    let md = dir.join(REPORT_MD);
    write_atomic(&md, markdown(report, drew).as_bytes())?;
    written.push(md);
    let json = dir.join(REPORT_JSON);
    let text = serde_json::to_string_pretty(report).map_err(|e| CiError::Io {
        path: json.clone(),
        source: std::io::Error::other(e),
    })?;
    write_atomic(&json, format!("{text}\n").as_bytes())?;
    written.push(json);
    Ok(written)
}

/// Draws `series` into `path`; whether there was anything to draw.
#[cfg(feature = "cli")]
fn draw_curves(
    report: &CiReport,
    path: &Path,
    series: &[(String, Vec<CurvePoint>)],
) -> Result<bool, CiError> {
    if series.is_empty() {
        return Ok(false);
    }
    let title = format!(
        "{} (shard {}): best GFLOP/s per workload over this run, as a fraction of its final best",
        report.suite, report.shard
    );
    crate::search::plot_normalised_curves(path, &title, series)?;
    Ok(true)
}

/// Without the `cli` feature (no plotters) no curves are drawn.
#[cfg(not(feature = "cli"))]
fn draw_curves(
    _report: &CiReport,
    _path: &Path,
    _series: &[(String, Vec<CurvePoint>)],
) -> Result<bool, CiError> {
    Ok(false)
}

fn number(g: Option<f64>) -> String {
    g.map_or("–".to_string(), |g| format!("{g:.2}"))
}

fn relative(path: &Path, dir: &Path) -> String {
    path.strip_prefix(dir).unwrap_or(path).display().to_string()
}

/// The Markdown text of the report (`curves`: whether curves.svg was drawn).
pub fn markdown(report: &CiReport, curves: bool) -> String {
    let mut out = String::new();
    let dir = &report.outputs.dir;
    let _ = writeln!(out, "# tessera CI tuning report: {}\n", report.suite);
    let _ = writeln!(out, "| | |\n|---|---|");
    let rows = [
        (
            "suite",
            format!(
                "`{}` ({} workloads)",
                report.suite_file.display(),
                report.suite_workloads
            ),
        ),
        (
            "shard",
            format!("{} ({} workloads)", report.shard, report.workloads.len()),
        ),
        ("device", format!("`{}`", report.device)),
        ("budget", report.budget.clone()),
        ("seed", report.seed.to_string()),
        ("trials this run", report.trials_this_run.to_string()),
        (
            "tuning time",
            format!("{:.1} s (job: {:.1} s)", report.tuning_s, report.wall_s),
        ),
        ("tessera", report.tessera_version.clone()),
        ("started", report.started_at.clone()),
        ("command", format!("`{}`", report.command)),
    ];
    for (name, value) in rows {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    if let Some(note) = &report.tuning_note {
        let _ = writeln!(out, "\n{note}.");
    }
    let regressions = report.regressions();
    let _ = writeln!(out, "\n## Workloads\n");
    let _ = writeln!(
        out,
        "Default and tuned GFLOP/s are measured one after the other at the end of the run \
         (same workers, same inputs, each checked against the reference); the speed-up is their ratio. \
         \"while tuning\" is the deployed record's figure from the search (the best of many noisy \
         measurements), \"re-measured\" its median in fresh workers after the search, which deploy chose by. \
         The baseline is `{}` as the run found it; a workload regresses when its new schedule is more \
         than {:.0}% slower than the baseline's, or has none.\n",
        report.baseline.display(),
        report.regression_tolerance * 100.0
    );
    let _ = writeln!(
        out,
        "| workload | default GFLOP/s | tuned GFLOP/s | speed-up | while tuning | re-measured | trials (this run) | baseline GFLOP/s | vs baseline | |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|---|");
    for w in &report.workloads {
        let status = if w.regressed {
            "**regressed**".to_string()
        } else {
            w.note.clone().unwrap_or_default()
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} |",
            w.workload,
            number(w.default_gflops),
            number(w.tuned_gflops),
            w.speedup().map_or("–".to_string(), |s| format!("{s:.1}×")),
            number(w.recorded_gflops),
            number(w.remeasured_gflops),
            w.trials,
            w.trials_this_run,
            number(w.baseline_gflops()),
            w.comparison.describe(),
            status
        );
    }
    let speedups: Vec<f64> = report
        .workloads
        .iter()
        .filter_map(|w| w.speedup())
        .collect();
    if !speedups.is_empty() {
        let mut sorted = speedups.clone();
        sorted.sort_by(f64::total_cmp);
        let geomean = (speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len() as f64).exp();
        let _ = writeln!(
            out,
            "\nSpeed-up over the default schedule: geometric mean {geomean:.1}×, median {:.1}×, range {:.1}× – {:.1}×.",
            sorted[sorted.len() / 2],
            sorted[0],
            sorted[sorted.len() - 1]
        );
    }
    let _ = writeln!(out, "\n## Regressions\n");
    if regressions.is_empty() {
        let _ = writeln!(out, "None.");
    } else {
        for w in &regressions {
            let _ = writeln!(out, "- `{}`: {}", w.workload, regression_text(w));
        }
    }
    for line in &report.baseline_unreadable {
        let _ = writeln!(out, "- baseline entry not read: {line}");
    }
    let _ = writeln!(out, "\n## Files\n");
    let o = &report.outputs;
    let _ = writeln!(
        out,
        "- `{}`: the tuning database (resume from it)",
        relative(&o.db, dir)
    );
    let _ = writeln!(
        out,
        "- `{}`: this device's records as JSON lines",
        relative(&o.log, dir)
    );
    let _ = writeln!(
        out,
        "- `{}/`: the deployed artifacts",
        relative(&o.schedules, dir)
    );
    match &o.model {
        Some(m) => {
            let _ = writeln!(
                out,
                "- `{}`: the cost model retrained on this device's records",
                relative(m, dir)
            );
        }
        None => {
            let _ = writeln!(out, "- no cost model: no usable records");
        }
    }
    if curves {
        let _ = writeln!(out, "\n## Tuning curves\n\n![tuning curves]({CURVES_SVG})");
    }
    out
}

fn regression_text(w: &super::job::CiWorkload) -> String {
    use super::baseline::Comparison;
    match &w.comparison {
        Comparison::Missing {
            baseline_gflops,
            why,
        } => {
            format!("no new schedule ({why}); the baseline had {baseline_gflops:.2} GFLOP/s")
        }
        Comparison::Measured {
            baseline_gflops,
            ratio,
        } => format!(
            "{:.0}% slower than the baseline schedule ({baseline_gflops:.2} GFLOP/s), both measured by this run, twice",
            (1.0 - ratio) * 100.0
        ),
        Comparison::Recorded {
            baseline_gflops,
            ratio,
            why,
        } => format!(
            "{} GFLOP/s against the {baseline_gflops:.2} recorded in the baseline ({why}; {:.0}% slower)",
            number(w.tuned_gflops),
            (1.0 - ratio) * 100.0
        ),
        other => other.describe(),
    }
}
