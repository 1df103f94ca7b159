//! Custom operators end to end: two ops written with `tessera::op!` (in
//! `ops.rs`), tuned, deployed and called through their typed wrappers —
//! and this binary *is* a `tessera` command line that knows them.
//!
//! ```sh
//! cargo run --release --example custom_op                     # the demo, 24 trials per op
//! cargo run --release --example custom_op -- demo --trials 8 --out /tmp/custom
//! cargo run --release --example custom_op -- ops              # every tessera command works,
//! cargo run --release --example custom_op -- tune attention_scores --trials 100
//! ```
//!
//! The demo runs the same commands as the `tessera` binary, through
//! `tessera::cli::run_with`: `tune` each op into a database, `deploy`, then
//! loads the deployed kernels with `deploy::Library`, calls them with
//! `dense_relu::call(&kernel, &x, &w, &b, &mut out)` and checks them against
//! plain Rust loops, and finally `bench`es them against the default schedule.

mod ops;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ops::{attention_scores, dense_relu, shape_text};
use tessera::deploy::{KernelSource, Library};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("demo") => match demo(args.get(1..).unwrap_or(&[])) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        // Everything else, `measure-worker` included (the tuner starts its
        // workers from this binary), is the tessera command line.
        Some(_) => ExitCode::from(tessera::cli::run() as u8),
    }
}

struct DemoOptions {
    trials: usize,
    out: Option<PathBuf>,
}

fn parse_options(args: &[String]) -> Result<DemoOptions, String> {
    let mut options = DemoOptions {
        trials: 24,
        out: None,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let mut value = || rest.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--trials" => {
                let text = value()?;
                options.trials =
                    text.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("--trials must be a positive integer, not '{text}'")
                    })?;
            }
            "--out" => options.out = Some(PathBuf::from(value()?)),
            other => {
                return Err(format!(
                    "unknown demo option '{other}'; the options are --trials N and --out DIR"
                ));
            }
        }
    }
    Ok(options)
}

/// Runs one tessera command in this process; a non-zero exit is an error.
fn tessera(args: &[&str]) -> Result<(), String> {
    println!("\n$ custom_op {}", args.join(" "));
    let code = tessera::cli::run_with(std::iter::once("custom_op").chain(args.iter().copied()));
    if code == 0 {
        Ok(())
    } else {
        Err(format!("`{}` exited with {code}", args.join(" ")))
    }
}

fn demo(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let options = parse_options(args)?;
    let work = match &options.out {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("tessera-custom-op-{}", std::process::id())),
    };
    std::fs::create_dir_all(&work)?;
    let result = run_demo(&work, options.trials);
    if options.out.is_none() {
        let _ = std::fs::remove_dir_all(&work);
    } else {
        println!("\ndatabase and schedules kept in {}", work.display());
    }
    result
}

const DENSE_SHAPE: [i64; 3] = [64, 256, 256]; // M, K, N
const ATTENTION_SHAPE: [i64; 5] = [2, 4, 64, 32, 64]; // B, H, L, D, S

fn run_demo(work: &Path, trials: usize) -> Result<(), Box<dyn std::error::Error>> {
    let db = work.join("tuning.db");
    let schedules = work.join("schedules");
    let (db, schedules) = (path_text(&db)?, path_text(&schedules)?);
    let trials = trials.to_string();
    let dense_shape = shape_text(dense_relu::PARAMS, &DENSE_SHAPE);
    let attention_shape = shape_text(attention_scores::PARAMS, &ATTENTION_SHAPE);
    let workloads = [
        (dense_relu::NAME, dense_shape.as_str()),
        (attention_scores::NAME, attention_shape.as_str()),
    ];

    tessera(&["ops"])?;
    for (op, shape) in workloads {
        tessera(&[
            "tune", op, "--shape", shape, "--trials", &trials, "--db", db,
        ])?;
    }
    tessera(&["deploy", "--db", db, "--out", schedules])?;

    let library = Library::open(Path::new(schedules))?;
    println!();
    check_dense_relu(&library)?;
    check_attention_scores(&library)?;

    for (op, shape) in workloads {
        tessera(&["bench", op, "--shape", shape, "--from", schedules])?;
    }
    Ok(())
}

fn path_text(path: &Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))
}

/// The deployed kernel of `dag`, or an error when deployment fell back.
fn tuned_kernel(
    library: &Library,
    dag: &tessera::te::ComputeDag,
) -> Result<std::rc::Rc<tessera::codegen::Kernel>, Box<dyn std::error::Error>> {
    let loaded = library.kernel(dag)?;
    match &loaded.source {
        KernelSource::Tuned { path, .. } => {
            println!("{}: tuned kernel from {}", dag.label(), path.display());
            Ok(loaded.kernel)
        }
        KernelSource::Fallback(reason) => {
            Err(format!("{}: not deployed: {reason}", dag.label()).into())
        }
    }
}

/// Deterministic values in [-1, 1).
fn values(len: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

fn check(label: &str, got: &[f32], want: &[f32], reduction: usize) -> Result<(), String> {
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    let tolerance = 1e-5 * reduction as f32;
    println!("{label}: max |tuned − plain loops| = {worst:.2e} (tolerance {tolerance:.1e})");
    if worst <= tolerance {
        Ok(())
    } else {
        Err(format!(
            "{label}: the tuned kernel differs from the plain loops by {worst}"
        ))
    }
}

fn check_dense_relu(library: &Library) -> Result<(), Box<dyn std::error::Error>> {
    let [m, k, n] = DENSE_SHAPE.map(|v| v as usize);
    let kernel = tuned_kernel(library, &dense_relu::dag(&DENSE_SHAPE)?)?;
    let (x, w, b) = (values(m * k, 1), values(n * k, 2), values(n, 3));
    let mut out = vec![0.0f32; m * n];
    dense_relu::call(&kernel, &x, &w, &b, &mut out)?;
    let mut want = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f32 = (0..k).map(|kk| x[i * k + kk] * w[j * k + kk]).sum();
            want[i * n + j] = (dot + b[j]).max(0.0);
        }
    }
    Ok(check("dense_relu", &out, &want, k)?)
}

fn check_attention_scores(library: &Library) -> Result<(), Box<dyn std::error::Error>> {
    let [batch, heads, l, d, s] = ATTENTION_SHAPE.map(|v| v as usize);
    let kernel = tuned_kernel(library, &attention_scores::dag(&ATTENTION_SHAPE)?)?;
    let q = values(batch * heads * l * d, 4);
    let k = values(batch * heads * s * d, 5);
    let mut out = vec![0.0f32; batch * heads * l * s];
    attention_scores::call(&kernel, &q, &k, &mut out)?;
    let scale = (d as f32).sqrt();
    let mut want = vec![0.0f32; out.len()];
    for bh in 0..batch * heads {
        for i in 0..l {
            for j in 0..s {
                let dot: f32 = (0..d)
                    .map(|dd| q[(bh * l + i) * d + dd] * k[(bh * s + j) * d + dd])
                    .sum();
                want[(bh * l + i) * s + j] = dot / scale;
            }
        }
    }
    Ok(check("attention_scores", &out, &want, d)?)
}
