//! Define, tune, deploy, load and run — the whole tessera workflow in one
//! program:
//!
//! 1. write an operator as a tensor expression (a dense layer with bias and
//!    ReLU); its workload key is a hash of its canonical form, so it is the
//!    same workload as the registry's `dense_bias_relu` at this shape,
//! 2. tune that workload for a few dozen trials into a temporary database
//!    (measurement workers rebuild it from the registry by name),
//! 3. deploy the best schedule into a temporary `schedules/` folder,
//! 4. load it back for *our own* DAG with `deploy::Library`, run it and
//!    check it against the reference interpreter.
//!
//! ```sh
//! cargo run --release --example quickstart            # 48 trials
//! cargo run --release --example quickstart -- 16      # fewer
//! ```

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use tessera::cost::{LearnedModel, new_learner};
use tessera::db::TuningDb;
use tessera::deploy::{self, DeployOptions, Library};
use tessera::measure::{MeasureOptions, Measurer, Task};
use tessera::runtime::host_device;
use tessera::search::{TuneEvent, TuneOptions, tune};
use tessera::te::{self, ComputeDag, DType};

fn main() -> ExitCode {
    // Candidates are measured in worker processes started from this very
    // binary: let the library serve them.
    if std::env::args().nth(1).as_deref() == Some("measure-worker") {
        return ExitCode::from(tessera::cli::run() as u8);
    }
    match quickstart() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn quickstart() -> Result<(), Box<dyn std::error::Error>> {
    let trials: usize = match std::env::args().nth(1) {
        Some(n) => n
            .parse()
            .map_err(|_| format!("trials must be a number, not '{n}'"))?,
        None => 48,
    };
    // out[i, j] = relu(Σk data[i, k] · weight[j, k] + bias[j])
    let (m, n, k) = (32, 512, 256);
    let data = te::placeholder("x", &[m, k], DType::F32);
    let weight = te::placeholder("w", &[n, k], DType::F32);
    let bias = te::placeholder("b", &[n], DType::F32);
    let rk = te::reduce_axis(k, "k");
    let product = te::compute("xw", &[m, n], |ix| {
        te::sum(data.at([&ix[0], &rk]) * weight.at([&ix[1], &rk]), [&rk])
    });
    let biased = te::compute("xw_b", &[m, n], |ix| {
        product.at([&ix[0], &ix[1]]) + bias.at([&ix[1]])
    });
    let out = te::compute("y", &[m, n], |ix| te::max(biased.at([&ix[0], &ix[1]]), 0.0));
    let dag = ComputeDag::new(&[data, weight, bias], &[out])?;

    let task = Task::from_registry("dense_bias_relu", &format!("M={m},N={n},K={k}"))?;
    println!("our DAG:  {}", dag.workload_key());
    println!("registry: {}", task.key());
    if dag.workload_key().hash != task.key().hash {
        return Err("our definition is not the registry's dense_bias_relu".into());
    }
    let work = std::env::temp_dir().join(format!("tessera-quickstart-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;

    // Tune.
    let mut db = TuningDb::open(&work.join("tuning.db"))?;
    let mut measurer = Measurer::new(MeasureOptions::default())?;
    let mut model = LearnedModel::new(new_learner("forest")?);
    let options = TuneOptions {
        trials,
        batch_size: 16,
        ..TuneOptions::default()
    };
    let start = Instant::now();
    let report = tune(
        &task,
        &mut measurer,
        Some(&mut db),
        &mut model,
        &options,
        &|event| match event {
            TuneEvent::Batch {
                trials,
                budget,
                best_gflops,
                ..
            } => eprint!("\r  tuning: {trials}/{budget} trials, best {best_gflops:.2} GFLOP/s "),
            TuneEvent::Remeasure { done, total, .. } => {
                eprint!("\r  re-measuring the best: {done}/{total} runs              ")
            }
        },
        &AtomicBool::new(false),
    )?;
    eprintln!();
    let (best, default) = (
        report.best_gflops.unwrap_or(f64::NAN),
        report.default_gflops.unwrap_or(f64::NAN),
    );
    println!(
        "tuned: {best:.2} GFLOP/s (default {default:.2}, {:.1}x) in {} trials, {:.1} s",
        best / default,
        report.trials,
        start.elapsed().as_secs_f64()
    );

    // Deploy.
    let schedules = work.join("schedules");
    let deployed = deploy::deploy(
        &db,
        host_device(),
        &DeployOptions {
            out: schedules.clone(),
            ..DeployOptions::default()
        },
    )?;
    println!("deployed to {}", deployed.device_dir.display());

    // Load and run, as a deployed program would.
    let library = Library::open(&schedules)?;
    let loaded = library.kernel(&dag)?;
    println!("loaded: {}", loaded.source);
    if !loaded.is_tuned() {
        return Err("the deployed schedule was not found".into());
    }
    let inputs = task.inputs();
    let got = loaded.kernel.run_host(&inputs)?;
    let want = te::evaluate(&dag, &inputs)?;
    let error = got
        .iter()
        .zip(&want)
        .flat_map(|(g, w)| g.to_f64_vec().into_iter().zip(w.to_f64_vec()))
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max);
    println!("checked against the reference: max relative error {error:.2e}");
    std::fs::remove_dir_all(&work)?;
    if error > 1e-3 {
        return Err(format!("wrong result: max relative error {error:.2e}").into());
    }
    Ok(())
}
