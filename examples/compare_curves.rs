//! Draws the tuning curves of several `tessera tune --json` reports in one
//! SVG, e.g. the cost-model search against random search of the same budget:
//!
//! ```sh
//! tessera tune matmul --shape M=512,N=512,K=512 --trials 200 --json > forest.json
//! tessera tune matmul --shape M=512,N=512,K=512 --trials 200 --model random --db other.db --json > random.json
//! cargo run --example compare_curves -- curves.svg forest.json random.json
//! ```
//!
//! Each series is labelled with the report's model.

use std::process::ExitCode;

use tessera::search::{CurvePoint, plot_curves};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((out, reports)) = args.split_first().filter(|(_, r)| !r.is_empty()) else {
        eprintln!("usage: compare_curves OUT.svg REPORT.json [REPORT.json …]");
        return ExitCode::from(2);
    };
    let mut series = Vec::new();
    let mut title = String::new();
    for path in reports {
        let report: serde_json::Value = match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: {path}: {e}");
                return ExitCode::from(2);
            }
        };
        let curve: Vec<CurvePoint> = match serde_json::from_value(report["curve"].clone()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "error: {path}: no tuning curve ({e}); is it a `tessera tune --json` report?"
                );
                return ExitCode::from(2);
            }
        };
        title = report["workload_key"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let label = report["model"].as_str().unwrap_or(path).to_string();
        series.push((label, curve));
    }
    match plot_curves(std::path::Path::new(out), &title, &series) {
        Ok(()) => {
            println!("wrote {out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
