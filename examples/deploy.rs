//! A deployed program: load the tuned kernel of one workload from a
//! schedules folder (written by `tessera deploy`), run it, check it, and
//! say where its schedule came from — the tuned artifact of this machine,
//! or the default schedule and why.
//!
//! ```sh
//! tessera tune matmul --shape M=256,N=256,K=256 --trials 64 && tessera deploy
//! cargo run --release --example deploy -- schedules matmul M=256,N=256,K=256
//! ```
//!
//! Pass `--require-tuned` to exit with an error instead of falling back.

use std::process::ExitCode;
use std::time::Instant;

use tessera::deploy::Library;
use tessera::measure::Task;
use tessera::te;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let require_tuned = args.iter().any(|a| a == "--require-tuned");
    args.retain(|a| a != "--require-tuned");
    let root = args.first().map_or("schedules", String::as_str);
    let op = args.get(1).map_or("matmul", String::as_str);
    let shape = args.get(2).map_or("M=256,N=256,K=256", String::as_str);
    match run(root, op, shape, require_tuned) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(
    root: &str,
    op: &str,
    shape: &str,
    require_tuned: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let task = Task::from_registry(op, shape)?;
    let library = Library::open(root)?;
    let loaded = library.kernel(task.dag())?;
    println!("{}: {}", task.key(), loaded.source);
    if require_tuned && !loaded.is_tuned() {
        return Err("no tuned schedule for this workload on this machine".into());
    }
    let inputs = task.inputs();
    let start = Instant::now();
    let got = loaded.kernel.run_host(&inputs)?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "ran in {:.3} ms ({:.2} GFLOP/s, one cold run)",
        secs * 1e3,
        task.dag().flop_count() as f64 / secs / 1e9
    );
    let want = te::evaluate(task.dag(), &inputs)?;
    let error = got
        .iter()
        .zip(&want)
        .flat_map(|(g, w)| g.to_f64_vec().into_iter().zip(w.to_f64_vec()))
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max);
    println!("checked against the reference: max relative error {error:.2e}");
    if error > 1e-3 {
        return Err(format!("wrong result: max relative error {error:.2e}").into());
    }
    Ok(())
}
