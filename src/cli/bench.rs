//! `tessera bench`: compile the best cached (or deployed, or given)
//! schedule, verify it, time it, and compare with the default schedule and
//! Rust GEMM peers in the same process; one workload or a whole suite.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::error::CliError;
use super::peers::{Product, gemm_crate, matrixmultiply};
use crate::codegen::{self, CodegenOptions, Kernel, OptLevel, peak};
use crate::db::{self, Lookup, TuningDb};
use crate::deploy::{Library, Resolution};
use crate::measure::{Task, Timing, TimingOptions, time_runs};
use crate::ops;
use crate::runtime::{self, NdBuffer, Target};
use crate::schedule::{State, calls_micro_kernel};
use crate::search::Suite;
use crate::te::{ComputeDag, DType, HostTensor};
use crate::tir;

/// `--opt-level` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum OptArg {
    None,
    Speed,
}

/// `tessera bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The operator (see `tessera ops`); leave out with --suite.
    #[arg(required_unless_present = "suite")]
    op: Option<String>,
    /// Shape parameters, e.g. `M=1024,N=1024,K=1024`.
    #[arg(long, default_value = "")]
    shape: String,
    /// A JSON step list to time instead of the best cached schedule.
    #[arg(long, conflicts_with_all = ["from", "suite"])]
    schedule: Option<PathBuf>,
    /// The tuning database the best schedule comes from (default: $TESSERA_DB
    /// or tuning_logs/tuning.db).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Load the kernel from a schedules folder written by `tessera deploy`
    /// instead of the database.
    #[arg(long, conflicts_with = "db")]
    from: Option<PathBuf>,
    /// Bench every workload of a suite file (see suites/) into one table.
    #[arg(long, conflicts_with = "op")]
    suite: Option<PathBuf>,
    /// Threads for parallel loops (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Cranelift optimisation level.
    #[arg(long, value_enum, default_value_t = OptArg::Speed)]
    opt_level: OptArg,
    /// Timing repeats.
    #[arg(long, default_value_t = 7)]
    repeat: usize,
    /// Bit-stable floating point: no FMA contraction.
    #[arg(long)]
    strict_fp: bool,
    /// Inputs that are constant weights (comma-separated, e.g. `weight`):
    /// also time the schedule with them laid out ahead of time (its packing
    /// copies of them removed), as `Library::kernel_with_constants` loads it.
    #[arg(long, value_delimiter = ',', conflicts_with = "suite")]
    constants: Vec<String>,
}

impl BenchArgs {
    fn threads(&self) -> usize {
        self.threads.unwrap_or_else(runtime::num_threads)
    }

    fn opt_level(&self) -> OptLevel {
        match self.opt_level {
            OptArg::None => OptLevel::None,
            OptArg::Speed => OptLevel::Speed,
        }
    }
}

/// Where the timed schedule came from.
enum Source {
    /// A `--schedule` file.
    File(PathBuf),
    /// The best cached or deployed schedule, with its recorded GFLOP/s.
    Tuned { record_gflops: f64, origin: String },
    /// The default schedule, and why.
    Fallback(String),
}

impl Source {
    fn label(&self) -> &'static str {
        match self {
            Source::File(_) => "file",
            Source::Tuned { .. } => "tuned",
            Source::Fallback(_) => "fallback",
        }
    }

    fn reason(&self) -> Option<String> {
        match self {
            Source::File(path) => Some(format!("--schedule {}", path.display())),
            Source::Tuned { origin, .. } => Some(origin.clone()),
            Source::Fallback(reason) => Some(reason.clone()),
        }
    }
}

/// The schedule to time for `op` at `shape`, and where it came from.
fn resolve(
    args: &BenchArgs,
    target: &Target,
    op: &str,
    shape: &str,
    dag: &ComputeDag,
) -> Result<(State, Source), CliError> {
    if let Some(path) = &args.schedule {
        let state = super::commands::load_state(dag, Some(path))?;
        return Ok((state, Source::File(path.clone())));
    }
    if let Some(dir) = &args.from {
        let library =
            Library::open_with_target(dir, *target).map_err(|e| CliError::Usage(e.to_string()))?;
        return Ok(match library.resolve(dag) {
            Resolution::Tuned {
                artifact,
                path,
                state,
            } => (
                *state,
                Source::Tuned {
                    record_gflops: artifact.gflops,
                    origin: path.display().to_string(),
                },
            ),
            Resolution::Fallback(reason) => (State::new(dag), Source::Fallback(reason.to_string())),
        });
    }
    let path = args.db.clone().unwrap_or_else(db::default_path);
    if !path.is_file() {
        return Ok((
            State::new(dag),
            Source::Fallback(format!(
                "no tuning database at {} (run `tessera tune` first)",
                path.display()
            )),
        ));
    }
    let database = TuningDb::open_existing(&path)?;
    let task = Task::from_registry(op, shape)?;
    let device = runtime::host_device().key();
    let (found, _) = database.lookup(&task, &device)?;
    Ok(match found {
        Lookup::Exact(record) => {
            let state =
                State::replay(dag, &record.steps).map_err(|source| CliError::ScheduleApply {
                    path: path.clone(),
                    source,
                })?;
            (
                state,
                Source::Tuned {
                    record_gflops: record.gflops().unwrap_or(f64::NAN),
                    origin: format!("best of {}", path.display()),
                },
            )
        }
        Lookup::OtherDevices(devices) => (
            State::new(dag),
            Source::Fallback(format!(
                "tuned only on other devices ({}), not on {device}",
                devices
                    .iter()
                    .map(|(name, _, n)| format!("{name}: {n} records"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ),
        Lookup::Nothing(shapes) => (
            State::new(dag),
            Source::Fallback(if shapes.is_empty() {
                format!("{} is not tuned in {}", task.key().readable, path.display())
            } else {
                format!(
                    "{} is not tuned in {} (tuned shapes: {})",
                    task.key().readable,
                    path.display(),
                    shapes.join(", ")
                )
            }),
        ),
    })
}

/// The best measured schedule of `dag` in the database that calls no
/// micro-kernel (what `tune --no-tensorize` finds), when the database has one.
fn best_plain(args: &BenchArgs, op: &str, shape: &str, dag: &ComputeDag) -> Option<State> {
    if args.schedule.is_some() || args.from.is_some() {
        return None;
    }
    let path = args.db.clone().unwrap_or_else(db::default_path);
    let database = TuningDb::open_existing(&path).ok()?;
    let task = Task::from_registry(op, shape).ok()?;
    let device = runtime::host_device().key();
    let records = database.records(&task.key().hash, &device.hash).ok()?;
    records
        .into_iter()
        .filter(|r| !calls_micro_kernel(&r.steps))
        .filter_map(|r| Some((r.result.median()?, r.steps)))
        .filter(|(cost, _)| cost.is_finite())
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .and_then(|(_, steps)| State::replay(dag, &steps).ok())
}

fn compile(state: &State, args: &BenchArgs, target: &Target) -> Result<Kernel, CliError> {
    let func = tir::lower(state)?;
    Ok(codegen::compile(
        &func,
        &CodegenOptions {
            opt_level: args.opt_level(),
            strict_fp: args.strict_fp,
            ..CodegenOptions::for_target(*target)
        },
    )?)
}

fn buffers(kernel: &Kernel, inputs: &[HostTensor]) -> Result<Vec<NdBuffer>, CliError> {
    let mut out = Vec::new();
    for input in inputs {
        out.push(NdBuffer::from_host(input).map_err(codegen::KernelError::from)?);
    }
    for p in &kernel.params()[kernel.num_inputs()..] {
        out.push(NdBuffer::zeros(&p.shape, p.dtype).map_err(codegen::KernelError::from)?);
    }
    Ok(out)
}

fn run(kernel: &Kernel, bufs: &mut [NdBuffer]) -> Result<(), CliError> {
    let mut refs: Vec<&mut NdBuffer> = bufs.iter_mut().collect();
    Ok(kernel.run(&mut refs)?)
}

/// Times `run`: one warm-up, `repeat` repeats of at least 100 ms each.
fn time(repeat: usize, run: impl FnMut()) -> Timing {
    let options = TimingOptions {
        warmup: 1,
        number: 1,
        repeat,
        min_repeat_ms: 100.0,
        flush_cache: false,
    };
    time_runs(&options, run, || {})
}

/// Times every contender `repeat` times, one repeat of each in turn, so
/// that a change in the machine's load touches all of them alike.
fn time_interleaved(repeat: usize, contenders: &mut [Box<dyn FnMut() + '_>]) -> Vec<Timing> {
    let mut timings: Vec<Timing> = contenders
        .iter()
        .map(|_| Timing {
            costs: Vec::new(),
            number: 0,
        })
        .collect();
    for _ in 0..repeat.max(1) {
        for (run, timing) in contenders.iter_mut().zip(&mut timings) {
            let t = time(1, run);
            timing.costs.extend(t.costs);
            timing.number = t.number;
        }
    }
    timings
}

fn time_kernel(kernel: &Kernel, bufs: &mut [NdBuffer], repeat: usize) -> Result<Timing, CliError> {
    run(kernel, bufs)?;
    let mut refs: Vec<&mut NdBuffer> = bufs.iter_mut().collect();
    Ok(time(repeat, || {
        let _ = kernel.run(&mut refs);
    }))
}

/// Largest difference relative to `max(1, |reference|)`.
fn max_rel_error(got: &[f64], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max)
}

/// `tessera bench`.
pub(crate) fn bench(args: &BenchArgs, target: &Target) -> Result<String, CliError> {
    runtime::set_num_threads(args.threads());
    let ghz = peak::measure_clock_ghz()?;
    if let Some(path) = &args.suite {
        return bench_suite(args, target, path, ghz);
    }
    let op = args.op.as_deref().unwrap_or_default();
    let report = bench_one(args, target, op, &args.shape, ghz)?;
    if args.json {
        return Ok(format!("{report}\n"));
    }
    Ok(render(&report))
}

/// Benches one workload: the chosen schedule, verified against the
/// default one, both timed, and the GEMM peers for matrix products.
fn bench_one(
    args: &BenchArgs,
    target: &Target,
    op_name: &str,
    shape_text: &str,
    ghz: f64,
) -> Result<Value, CliError> {
    let op = ops::find(op_name)?;
    let shape = op.parse_shape(shape_text)?;
    let dag = op.build(&shape)?;
    let (state, source) = resolve(args, target, op.name, &shape.to_text(), &dag)?;
    let threads = args.threads();
    let kernel = compile(&state, args, target)?;
    let tensorized = calls_micro_kernel(state.steps());
    let plain = match best_plain(args, op.name, &shape.to_text(), &dag) {
        Some(plain) if tensorized => Some(compile(&plain, args, target)?),
        _ => None,
    };
    let baseline = compile(&State::new(&dag), args, target)?;
    let inputs: Vec<HostTensor> = dag
        .inputs()
        .iter()
        .enumerate()
        .map(|(n, t)| {
            let dims: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
            HostTensor::random(&dims, DType::F32, n as u64 + 1)
        })
        .collect();
    let mut tuned_bufs = buffers(&kernel, &inputs)?;
    let mut base_bufs = buffers(&baseline, &inputs)?;
    run(&kernel, &mut tuned_bufs)?;
    run(&baseline, &mut base_bufs)?;
    let n_in = kernel.num_inputs();
    let error_of = |bufs: &[NdBuffer]| {
        bufs[n_in..]
            .iter()
            .zip(&base_bufs[n_in..])
            .map(|(t, b)| max_rel_error(&t.to_host().to_f64_vec(), &b.to_host().to_f64_vec()))
            .fold(0.0, f64::max)
    };
    let mut error = error_of(&tuned_bufs);
    let prepacked = super::bench_constants::prepacked(&dag, &state, &args.constants, &inputs)?;
    let mut prepacked_run = match &prepacked {
        Some((rewritten, packed)) => {
            let k = compile(rewritten, args, target)?;
            let mut bufs = buffers(&k, packed)?;
            run(&k, &mut bufs)?;
            error = error.max(error_of(&bufs));
            Some((k, bufs))
        }
        None => None,
    };
    let mut plain_bufs = match &plain {
        Some(k) => {
            let mut bufs = buffers(k, &inputs)?;
            run(k, &mut bufs)?;
            error = error.max(error_of(&bufs));
            Some(bufs)
        }
        None => None,
    };
    let reduction = dag.flop_count() as f64
        / dag
            .outputs()
            .iter()
            .map(|t| t.num_elements())
            .sum::<i64>()
            .max(1) as f64;
    let tolerance = 1e-5 + 2e-7 * reduction;
    if error > tolerance {
        return Err(CliError::Verification { error, tolerance });
    }
    let flops = dag.flop_count() as f64;
    if cfg!(debug_assertions) {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "warning: this is a debug build of tessera; timings are not representative (build with --release)"
            )
        });
    }
    let untuned = time_kernel(&baseline, &mut base_bufs, args.repeat.min(3))?;
    let peak_gflops = peak::f32x4_fma_peak_gflops(ghz, threads);
    let native_isa = target.isa();
    let native_peak_gflops =
        crate::runtime::ukernels::peak_gflops_per_core(native_isa, ghz) * threads as f64;
    let get = |name: &str| {
        shape
            .values()
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(1, |(_, v)| *v as usize)
    };
    // The tuned kernel, the tuned plain one and the peers, interleaved.
    let product = Product::of(op.name, &get);
    let peer_inputs: Vec<NdBuffer> = match product {
        Some(_) => inputs
            .iter()
            .take(2)
            .map(NdBuffer::from_host)
            .collect::<Result<_, _>>()
            .map_err(codegen::KernelError::from)?,
        None => Vec::new(),
    };
    let mut peer_c = NdBuffer::zeros(&kernel.params()[n_in].shape, DType::F32)
        .map_err(codegen::KernelError::from)?;
    let mut peer_c2 = NdBuffer::zeros(&kernel.params()[n_in].shape, DType::F32)
        .map_err(codegen::KernelError::from)?;
    let mut names = vec!["tuned"];
    let mut contenders: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    let mut tuned_refs: Vec<&mut NdBuffer> = tuned_bufs.iter_mut().collect();
    let tuned_kernel = &kernel;
    contenders.push(Box::new(move || {
        let _ = tuned_kernel.run(&mut tuned_refs);
    }));
    if let (Some(k), Some(bufs)) = (&plain, plain_bufs.as_mut()) {
        let mut refs: Vec<&mut NdBuffer> = bufs.iter_mut().collect();
        names.push("plain");
        contenders.push(Box::new(move || {
            let _ = k.run(&mut refs);
        }));
    }
    if let Some((k, bufs)) = prepacked_run.as_mut() {
        let mut refs: Vec<&mut NdBuffer> = bufs.iter_mut().collect();
        let k = &*k;
        names.push("prepacked");
        contenders.push(Box::new(move || {
            let _ = k.run(&mut refs);
        }));
    }
    if let (Some(p), [a, b]) = (product, peer_inputs.as_slice()) {
        names.push("matrixmultiply");
        let (c, c2) = (&mut peer_c, &mut peer_c2);
        contenders.push(Box::new(move || matrixmultiply(&p, a, b, c)));
        names.push("gemm");
        contenders.push(Box::new(move || gemm_crate(&p, a, b, c2, threads)));
    }
    let timings = time_interleaved(args.repeat, &mut contenders);
    drop(contenders);
    let gflops_of = |name: &str| {
        names
            .iter()
            .position(|n| *n == name)
            .map(|i| flops / timings[i].median() / 1e9)
    };
    let tuned = timings[0].clone();
    let gflops = flops / tuned.median() / 1e9;
    let mut peers = serde_json::Map::new();
    for name in ["matrixmultiply", "gemm"] {
        if let Some(g) = gflops_of(name) {
            peers.insert(name.into(), json!(g));
        }
    }
    let plain_gflops = gflops_of("plain");
    let prepacked_gflops = gflops_of("prepacked");
    let default_gflops = flops / untuned.median() / 1e9;
    let record_gflops = match &source {
        Source::Tuned { record_gflops, .. } => json!(record_gflops),
        _ => Value::Null,
    };
    Ok(json!({
        "op": op.name,
        "shape": shape.to_text(),
        "workload": dag.workload_key().to_string(),
        "threads": threads,
        "opt_level": format!("{:?}", args.opt_level()).to_lowercase(),
        "strict_fp": args.strict_fp,
        "source": source.label(),
        "source_reason": source.reason(),
        "gflops": gflops,
        "record_gflops": record_gflops,
        "median_ms": tuned.median() * 1e3,
        "min_ms": tuned.min() * 1e3,
        "clock_ghz": ghz,
        "peak_gflops": peak_gflops,
        "peak_fraction": gflops / peak_gflops,
        "native_isa": native_isa.name(),
        "native_peak_gflops": native_peak_gflops,
        "native_peak_fraction": gflops / native_peak_gflops,
        "compile_ms": kernel.compile_time().as_secs_f64() * 1e3,
        "default_gflops": default_gflops,
        "untuned_gflops": default_gflops,
        "tolerance": tolerance,
        "max_rel_error": error,
        "plain_gflops": plain_gflops,
        "constants": args.constants,
        "prepacked_gflops": prepacked_gflops,
        "peers": peers,
    }))
}

fn num(report: &Value, key: &str) -> f64 {
    report[key].as_f64().unwrap_or(f64::NAN)
}

/// The text report of one [`bench_one`] result.
fn render(report: &Value) -> String {
    let gflops = num(report, "gflops");
    let peak_gflops = num(report, "peak_gflops");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} [{}], {} thread(s), opt_level {}",
        report["op"].as_str().unwrap_or_default(),
        report["shape"].as_str().unwrap_or_default(),
        report["threads"],
        report["opt_level"].as_str().unwrap_or_default(),
    );
    let _ = writeln!(
        out,
        "  schedule         {}: {}",
        report["source"].as_str().unwrap_or_default(),
        report["source_reason"].as_str().unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "  verified against the default schedule: max rel. error {:.2e} (tolerance {:.1e})",
        num(report, "max_rel_error"),
        num(report, "tolerance")
    );
    let _ = writeln!(
        out,
        "  compile          {:8.2} ms",
        num(report, "compile_ms")
    );
    let _ = writeln!(
        out,
        "  time             {:8.3} ms median, {:.3} ms min",
        num(report, "median_ms"),
        num(report, "min_ms")
    );
    let _ = writeln!(out, "  tuned            {gflops:8.2} GFLOP/s");
    if let Some(recorded) = report["record_gflops"].as_f64() {
        let _ = writeln!(
            out,
            "  when tuned       {recorded:8.2} GFLOP/s (now / then = {:.2})",
            gflops / recorded
        );
    }
    let _ = writeln!(
        out,
        "  peak f32x4 FMA   {peak_gflops:8.2} GFLOP/s = {:.2} GHz (measured) x {} FMA/cycle x 4 lanes x 2 flops x {} core(s); fraction {:.1}%",
        num(report, "clock_ghz"),
        peak::FMA_PIPES,
        report["threads"],
        100.0 * gflops / peak_gflops
    );
    let native_peak = num(report, "native_peak_gflops");
    let _ = writeln!(
        out,
        "  peak {:<6} FMA  {native_peak:8.2} GFLOP/s (the widest vector ISA here, nominal: 2 FMA/cycle x lanes x 2 flops x cores); fraction {:.1}%",
        report["native_isa"].as_str().unwrap_or_default(),
        100.0 * gflops / native_peak
    );
    let default_gflops = num(report, "default_gflops");
    let _ = writeln!(
        out,
        "  default          {default_gflops:8.2} GFLOP/s (tuned is {:.1}x)",
        gflops / default_gflops
    );
    if let Some(prepacked) = report["prepacked_gflops"].as_f64() {
        let _ = writeln!(
            out,
            "  prepacked        {prepacked:8.2} GFLOP/s ({} laid out ahead of time; prepacked / tuned = {:.2})",
            report["constants"]
                .as_array()
                .map(|c| c
                    .iter()
                    .filter_map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default(),
            prepacked / gflops
        );
    }
    if let Some(plain) = report["plain_gflops"].as_f64() {
        let _ = writeln!(
            out,
            "  tuned plain      {plain:8.2} GFLOP/s (best schedule without micro-kernels; tuned / plain = {:.2})",
            gflops / plain
        );
    }
    if let Some(peers) = report["peers"].as_object() {
        for (name, value) in peers {
            let peer = value.as_f64().unwrap_or(f64::NAN);
            let _ = writeln!(
                out,
                "  {name:<16} {peer:8.2} GFLOP/s (tuned / {name} = {:.2})",
                gflops / peer
            );
        }
    }
    out
}

/// `tessera bench --suite FILE`: every workload, one table (or one JSON object).
fn bench_suite(
    args: &BenchArgs,
    target: &Target,
    path: &Path,
    ghz: f64,
) -> Result<String, CliError> {
    let suite = Suite::load(path)?;
    let mut reports = Vec::new();
    for w in &suite.workloads {
        let mut report = bench_one(args, target, &w.op, &w.shape, ghz)?;
        report["label"] = json!(w.label);
        reports.push(report);
    }
    if args.json {
        return Ok(format!(
            "{}\n",
            json!({"suite": suite.name, "threads": args.threads(), "workloads": reports})
        ));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "suite {} ({} workloads), {} thread(s)",
        suite.name,
        reports.len(),
        args.threads()
    );
    let _ = writeln!(
        out,
        "{:<14} {:<48} {:>8} {:>9} {:>9} {:>8} {:>9} {:>8}",
        "label", "workload", "source", "GFLOP/s", "default", "speedup", "recorded", "gemm"
    );
    for r in &reports {
        let fmt = |v: f64| {
            if v.is_finite() {
                format!("{v:.2}")
            } else {
                "-".into()
            }
        };
        let gflops = num(r, "gflops");
        let _ = writeln!(
            out,
            "{:<14} {:<48} {:>8} {:>9} {:>9} {:>7.1}x {:>9} {:>8}",
            r["label"].as_str().unwrap_or_default(),
            r["workload"].as_str().unwrap_or_default(),
            r["source"].as_str().unwrap_or_default(),
            fmt(gflops),
            fmt(num(r, "default_gflops")),
            gflops / num(r, "default_gflops"),
            fmt(num(r, "record_gflops")),
            fmt(r["peers"]["gemm"].as_f64().unwrap_or(f64::NAN)),
        );
    }
    for r in reports.iter().filter(|r| r["source"] == "fallback") {
        let _ = writeln!(
            out,
            "  {}: {}",
            r["label"].as_str().unwrap_or_default(),
            r["source_reason"].as_str().unwrap_or_default()
        );
    }
    Ok(out)
}
