//! `tessera bench`: compile a schedule, verify it, time it, and compare with
//! the untuned schedule and Rust GEMM peers in the same process.

use std::fmt::Write;
use std::path::Path;

use serde_json::json;

use super::error::CliError;
use super::peers::{Product, gemm_crate, matrixmultiply};
use crate::codegen::{self, CodegenOptions, Kernel, OptLevel, peak};
use crate::measure::{Timing, TimingOptions, time_runs};
use crate::ops;
use crate::runtime::{self, NdBuffer};
use crate::schedule::State;
use crate::te::{DType, HostTensor};
use crate::tir;

/// What to benchmark and how.
pub(crate) struct BenchArgs<'a> {
    pub op: &'a str,
    pub shape: &'a str,
    pub schedule: Option<&'a Path>,
    pub threads: usize,
    pub json: bool,
    pub opt_level: OptLevel,
    pub repeat: usize,
    pub strict_fp: bool,
}

fn compile(state: &State, args: &BenchArgs) -> Result<Kernel, CliError> {
    let func = tir::lower(state)?;
    Ok(codegen::compile(
        &func,
        &CodegenOptions {
            opt_level: args.opt_level,
            strict_fp: args.strict_fp,
            ..CodegenOptions::default()
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
pub(crate) fn bench(args: &BenchArgs) -> Result<String, CliError> {
    let op = ops::find(args.op)?;
    let shape = op.parse_shape(args.shape)?;
    let dag = op.build(&shape)?;
    let state = super::commands::load_state(&dag, args.schedule)?;
    runtime::set_num_threads(args.threads);
    let kernel = compile(&state, args)?;
    let baseline = compile(&State::new(&dag), args)?;
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
    let error = tuned_bufs[n_in..]
        .iter()
        .zip(&base_bufs[n_in..])
        .map(|(t, b)| max_rel_error(&t.to_host().to_f64_vec(), &b.to_host().to_f64_vec()))
        .fold(0.0, f64::max);
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
        eprintln!(
            "warning: this is a debug build of tessera; timings are not representative (build with --release)"
        );
    }
    let tuned = time_kernel(&kernel, &mut tuned_bufs, args.repeat)?;
    let untuned = time_kernel(&baseline, &mut base_bufs, args.repeat.min(3))?;
    let ghz = peak::measure_clock_ghz()?;
    let peak_gflops = peak::f32x4_fma_peak_gflops(ghz, args.threads);
    let gflops = flops / tuned.median() / 1e9;
    let get = |name: &str| {
        shape
            .values()
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(1, |(_, v)| *v as usize)
    };
    let mut peers = serde_json::Map::new();
    if let Some(p) = Product::of(op.name, &get) {
        let (a, b) = (&tuned_bufs[0], &tuned_bufs[1]);
        let mut c = NdBuffer::zeros(&kernel.params()[n_in].shape, DType::F32)
            .map_err(codegen::KernelError::from)?;
        let t = time(args.repeat, || matrixmultiply(&p, a, b, &mut c));
        peers.insert("matrixmultiply".into(), json!(flops / t.median() / 1e9));
        let threads = args.threads;
        let t = time(args.repeat, || gemm_crate(&p, a, b, &mut c, threads));
        peers.insert("gemm".into(), json!(flops / t.median() / 1e9));
    }
    let report = json!({
        "op": op.name,
        "shape": shape.to_text(),
        "threads": args.threads,
        "opt_level": format!("{:?}", args.opt_level).to_lowercase(),
        "strict_fp": args.strict_fp,
        "gflops": gflops,
        "median_ms": tuned.median() * 1e3,
        "min_ms": tuned.min() * 1e3,
        "clock_ghz": ghz,
        "peak_gflops": peak_gflops,
        "peak_fraction": gflops / peak_gflops,
        "compile_ms": kernel.compile_time().as_secs_f64() * 1e3,
        "untuned_gflops": flops / untuned.median() / 1e9,
        "max_rel_error": error,
        "peers": peers,
    });
    if args.json {
        return Ok(format!("{report}\n"));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} [{}], {} thread(s), opt_level {:?}",
        op.name,
        shape.to_text(),
        args.threads,
        args.opt_level
    );
    let _ = writeln!(
        out,
        "  verified against the untuned schedule: max rel. error {error:.2e} (tolerance {tolerance:.1e})"
    );
    let _ = writeln!(
        out,
        "  compile          {:8.2} ms",
        kernel.compile_time().as_secs_f64() * 1e3
    );
    let _ = writeln!(
        out,
        "  time             {:8.3} ms median, {:.3} ms min",
        tuned.median() * 1e3,
        tuned.min() * 1e3
    );
    let _ = writeln!(out, "  tuned            {gflops:8.2} GFLOP/s");
    let _ = writeln!(
        out,
        "  peak f32x4 FMA   {peak_gflops:8.2} GFLOP/s = {ghz:.2} GHz (measured) x {} FMA/cycle x 4 lanes x 2 flops x {} core(s); fraction {:.1}%",
        peak::FMA_PIPES,
        args.threads,
        100.0 * gflops / peak_gflops
    );
    let untuned_gflops = flops / untuned.median() / 1e9;
    let _ = writeln!(
        out,
        "  untuned          {untuned_gflops:8.2} GFLOP/s (tuned is {:.1}x)",
        gflops / untuned_gflops
    );
    for (name, value) in &peers {
        let peer = value.as_f64().unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "  {name:<16} {peer:8.2} GFLOP/s (tuned / {name} = {:.2})",
            gflops / peer
        );
    }
    Ok(out)
}
