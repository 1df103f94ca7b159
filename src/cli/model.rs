//! `tessera model show | bench` and `tessera run`: models from ONNX files,
//! described, timed against ONNX Runtime, and run on `.npy` inputs.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::CliError;
use crate::db::{self, TuningDb};
use crate::deploy::Library;
use crate::graph::bench::{ort_latency, time_model};
use crate::graph::deployed::DeployedModel;
use crate::graph::npy::{read_npy, write_npy};
use crate::graph::onnx::ImportOptions;
use crate::graph::passes::describe_passes;
use crate::graph::printer::{describe, describe_fusion, table};
use crate::graph::{CompileOptions, CompiledModel, GraphError, Model, NodeSource};
use crate::runtime;
use crate::te::{DType, HostTensor};

/// Where a model's schedules come from and the shapes of its inputs.
#[derive(Debug, clap::Args)]
pub(crate) struct ModelSource {
    /// The ONNX model file.
    model: PathBuf,
    /// The shape of an input with dynamic dimensions, e.g.
    /// `--input-shape input=1,3,224,224` (repeat for several).
    #[arg(long = "input-shape", value_name = "NAME=D0,D1,…")]
    input_shapes: Vec<String>,
    /// Schedules from a folder written by `tessera deploy` (else the tuning
    /// cache when it exists, else the default schedules).
    #[arg(long)]
    from: Option<PathBuf>,
    /// The tuning cache (default: $TESSERA_DB or tuning_logs/tuning.db, when it exists).
    #[arg(long, conflicts_with = "from")]
    db: Option<PathBuf>,
    /// With --from: keep constant inputs in the model's layout, each
    /// tuned kernel copying them into its panels on every run. By default
    /// each constant a tuned schedule reads only through one packing copy
    /// is laid out once at load — every panel the kernel reads, in the
    /// order it reads them — and the kernel runs without the copy.
    #[arg(long, requires = "from")]
    no_prepack: bool,
}

/// `tessera model …`.
#[derive(Debug, clap::Args)]
pub(crate) struct ModelArgs {
    #[command(subcommand)]
    command: ModelCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ModelCommand {
    /// Print the model's inputs, outputs and constants, and per node its
    /// shapes, FLOPs and the tessera operator or DAG it becomes.
    Show {
        /// The ONNX model file.
        model: PathBuf,
        /// The shape of an input with dynamic dimensions (`NAME=1,3,224,224`).
        #[arg(long = "input-shape", value_name = "NAME=D0,D1,…")]
        input_shapes: Vec<String>,
        /// List the graph passes in order with what each changed on this
        /// model, show the graph after them, then the fusion rules and the
        /// fused groups (the kernels and tasks the model runs as).
        #[arg(long)]
        passes: bool,
    },
    /// Time the whole model (median end-to-end latency after warm-up, and a
    /// per-node breakdown) next to ONNX Runtime on the same file.
    Bench(BenchArgs),
}

/// `tessera model bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    #[command(flatten)]
    source: ModelSource,
    /// Threads for tessera's parallel loops and ONNX Runtime's intra-op pool.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Timed runs (the median is reported).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Do not time ONNX Runtime.
    #[arg(long)]
    no_ort: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `tessera run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    source: ModelSource,
    /// An input as a float32 `.npy` file: `NAME=file.npy` (repeat for each input).
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Where to write an output: `file.npy` (the first graph output) or
    /// `NAME=file.npy` (any graph output or tensor; repeat for several).
    #[arg(long = "output", value_name = "[NAME=]FILE")]
    outputs: Vec<String>,
    /// Threads for parallel loops (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

/// `tessera model …`.
pub(crate) fn model(args: &ModelArgs) -> Result<String, CliError> {
    match &args.command {
        ModelCommand::Show {
            model,
            input_shapes,
            passes,
        } => {
            let options = import_options(input_shapes)?;
            let loaded = Model::load_with(model, &options)?;
            let source = model.display().to_string();
            if *passes {
                let (optimized, reports) = loaded.optimized()?;
                Ok(format!(
                    "{}\n{}\n{}",
                    describe_passes(&reports),
                    describe(&optimized, &format!("{source}, after the passes")),
                    describe_fusion(&optimized)
                ))
            } else {
                Ok(describe(loaded.graph(), &source))
            }
        }
        ModelCommand::Bench(bench) => model_bench(bench),
    }
}

/// `--input-shape NAME=1,3,224,224` flags as import options.
pub(crate) fn import_options(flags: &[String]) -> Result<ImportOptions, CliError> {
    let mut options = ImportOptions::default();
    for flag in flags {
        let bad = |what: &str| {
            CliError::Graph(GraphError::BadInputShape {
                input: flag.clone(),
                what: what.to_string(),
            })
        };
        let (name, dims) = flag
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=D0,D1,… (e.g. input=1,3,224,224)"))?;
        let dims: Vec<usize> = dims
            .split(',')
            .map(|d| d.trim().parse::<usize>().ok().filter(|&d| d > 0))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("every dimension must be a positive integer"))?;
        options.input_shapes.insert(name.to_string(), dims);
    }
    Ok(options)
}

/// A model loaded for `run` or `model bench`.
struct Loaded {
    /// The graph to compile: with `--from`, the model artifact's when it
    /// fits, else the source's.
    model: Model,
    options: ImportOptions,
    /// With `--from`: the library and where the graph came from.
    deployed: Option<(Library, DeployedModel)>,
}

/// The model `source` names, imported with its `--input-shape`s; with
/// `--from DIR`, as deployed in DIR (see [`Model::load_deployed`]).
fn load(source: &ModelSource) -> Result<Loaded, CliError> {
    let options = import_options(&source.input_shapes)?;
    let Some(dir) = &source.from else {
        let model = Model::load_with(&source.model, &options)?;
        return Ok(Loaded {
            model,
            options,
            deployed: None,
        });
    };
    let library = Library::open(dir).map_err(|e| {
        CliError::Graph(GraphError::Kernel {
            node: "library".to_string(),
            op_type: String::new(),
            reason: e.to_string(),
        })
    })?;
    let deployed = Model::load_deployed_with(dir, &source.model, &options)?;
    Ok(Loaded {
        model: deployed.model.clone(),
        options,
        deployed: Some((library, deployed)),
    })
}

/// Compiles the loaded model, keeping the intermediates named in `keep`
/// readable after a run: with `--from`, through the library only; else
/// with the tuning cache when there is one.
fn compile(
    source: &ModelSource,
    loaded: &Loaded,
    keep: Vec<String>,
) -> Result<CompiledModel, CliError> {
    if let Some((library, deployed)) = &loaded.deployed {
        return Ok(deployed.compile(library, keep, !source.no_prepack)?);
    }
    let db_path = source.db.clone().unwrap_or_else(db::default_path);
    let db = if source.db.is_some() || db_path.is_file() {
        Some(TuningDb::open(&db_path)?)
    } else {
        None
    };
    Ok(loaded.model.compile(&CompileOptions {
        db: db.as_ref(),
        keep,
        ..CompileOptions::default()
    })?)
}

/// With `--from`: one line saying where the graph came from.
fn origin_line(loaded: &Loaded) -> String {
    loaded
        .deployed
        .as_ref()
        .map(|(_, d)| format!("graph: {}\n", d.origin))
        .unwrap_or_default()
}

/// How many kernels run tuned and default, with the reasons grouped.
fn sources_summary(compiled: &CompiledModel) -> String {
    let (mut tuned, mut aliases) = (0, 0);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (_, _, source) in compiled.sources() {
        match source {
            NodeSource::Tuned(_) => tuned += 1,
            NodeSource::Alias => aliases += 1,
            NodeSource::Default(why) => *reasons.entry(why.clone()).or_default() += 1,
        }
    }
    let default: usize = reasons.values().sum();
    let mut out =
        format!("kernels: {tuned} tuned, {default} on the default schedule, {aliases} aliases\n");
    for (why, count) in reasons {
        let _ = writeln!(out, "  default ×{count}: {why}");
    }
    out
}

/// `tessera run`.
pub(crate) fn run(args: &RunArgs) -> Result<String, CliError> {
    if let Some(threads) = args.threads {
        runtime::set_num_threads(threads);
    }
    let mut inputs = Vec::new();
    for flag in &args.inputs {
        let (name, file) = flag.split_once('=').ok_or_else(|| {
            CliError::Graph(GraphError::BadInput {
                input: flag.clone(),
                what: "expected NAME=file.npy".to_string(),
            })
        })?;
        let tensor = read_npy(Path::new(file))?;
        inputs.push((name.to_string(), tensor));
    }
    let loaded = load(&args.source)?;
    let model = &loaded.model;
    // The inputs are checked before anything is compiled.
    crate::graph::exec::check_inputs(model.graph(), &inputs)?;
    let mut wanted: Vec<(String, PathBuf)> = Vec::new();
    for flag in &args.outputs {
        match flag.split_once('=') {
            Some((name, file)) if !name.is_empty() && !name.contains('/') => {
                wanted.push((name.to_string(), PathBuf::from(file)));
            }
            _ => {
                let first = model.graph().outputs.first().cloned().unwrap_or_default();
                wanted.push((first, PathBuf::from(flag)));
            }
        }
    }
    // Intermediates asked for are kept out of the memory plan's reuse.
    let keep: Vec<String> = wanted
        .iter()
        .map(|(name, _)| name.clone())
        .filter(|name| model.graph().info(name).is_some() && !model.graph().outputs.contains(name))
        .collect();
    let mut compiled = compile(&args.source, &loaded, keep)?;
    let outputs = compiled.run(&inputs)?;
    // Every value first, then the files: an unknown name writes nothing.
    let mut values = Vec::with_capacity(wanted.len());
    for (name, file) in &wanted {
        values.push((name, file, compiled.tensor(name)?));
    }
    let mut out = origin_line(&loaded);
    for (name, file, value) in values {
        write_npy(file, &value)?;
        let _ = writeln!(
            out,
            "wrote {}: {name} f32{:?}",
            file.display(),
            value.shape()
        );
    }
    if wanted.is_empty() {
        for (name, value) in &outputs {
            let data = value.as_f32().unwrap_or(&[]);
            let (min, max) = data
                .iter()
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
                    (a.min(v), b.max(v))
                });
            let _ = writeln!(
                out,
                "{name} f32{:?}: min {min}, max {max} (write it with --output {name}=FILE.npy)",
                value.shape()
            );
        }
    }
    out.push_str(&sources_summary(&compiled));
    Ok(out)
}

/// One node of the JSON report.
#[derive(Serialize)]
struct NodeReport {
    name: String,
    op_type: &'static str,
    kernel: String,
    source: &'static str,
    reason: String,
    gflop: f64,
    time_ms: f64,
}

/// The JSON report of `model bench`.
#[derive(Serialize)]
struct BenchReport {
    model: String,
    threads: usize,
    runs: usize,
    latency_ms: f64,
    gflops: f64,
    ort_latency_ms: Option<f64>,
    ort_version: Option<String>,
    ort_error: Option<String>,
    /// ORT's latency / tessera's (above 1: tessera is faster).
    ratio: Option<f64>,
    tuned_kernels: usize,
    default_kernels: usize,
    /// The memory plan: the arena of intermediates, its lower bound, and
    /// the intermediates' bytes without reuse.
    arena_bytes: usize,
    /// With `--from`: where the graph came from (the model artifact, or
    /// why not).
    graph_origin: Option<String>,
    /// With `--from`: whether constants were laid out once at load.
    prepacked_weights: bool,
    arena_lower_bound_bytes: usize,
    all_intermediate_bytes: usize,
    nodes: Vec<NodeReport>,
}

fn model_bench(args: &BenchArgs) -> Result<String, CliError> {
    runtime::set_num_threads(args.threads.max(1));
    let loaded = load(&args.source)?;
    let (model, options) = (&loaded.model, &loaded.options);
    let mut compiled = compile(&args.source, &loaded, Vec::new())?;
    let inputs: Vec<(String, HostTensor)> = model
        .graph()
        .inputs
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let shape = model.graph().shape(name).to_vec();
            (
                name.clone(),
                HostTensor::random(&shape, DType::F32, i as u64 + 1),
            )
        })
        .collect();
    compiled.set_inputs(&inputs)?;
    let timings = time_model(&mut compiled, args.runs, args.warmup);
    let ort = if args.no_ort {
        Err("not asked for (--no-ort)".to_string())
    } else {
        ort_latency(
            &args.source.model,
            args.threads.max(1),
            args.runs,
            args.warmup,
            &options.input_shapes,
        )
    };
    let latency_ms = timings.latency.as_secs_f64() * 1e3;
    let flops: u64 = timings.nodes.iter().map(|n| n.flops).sum();
    let nodes: Vec<NodeReport> = timings
        .nodes
        .iter()
        .map(|n| NodeReport {
            name: n.name.clone(),
            op_type: n.op_type,
            kernel: n.kernel.clone(),
            source: n.source.label(),
            reason: match &n.source {
                NodeSource::Tuned(from) => from.clone(),
                NodeSource::Default(why) => why.clone(),
                NodeSource::Alias => String::new(),
            },
            gflop: n.flops as f64 / 1e9,
            time_ms: n.time.as_secs_f64() * 1e3,
        })
        .collect();
    let report = BenchReport {
        model: args.source.model.display().to_string(),
        threads: args.threads.max(1),
        runs: timings.runs,
        latency_ms,
        gflops: flops as f64 / 1e9 / timings.latency.as_secs_f64().max(1e-12),
        ort_latency_ms: ort.as_ref().ok().map(|o| o.ort_latency_ms),
        ort_version: ort.as_ref().ok().map(|o| o.ort_version.clone()),
        ort_error: ort.as_ref().err().cloned(),
        ratio: ort.as_ref().ok().map(|o| o.ort_latency_ms / latency_ms),
        tuned_kernels: nodes.iter().filter(|n| n.source == "tuned").count(),
        default_kernels: nodes.iter().filter(|n| n.source == "default").count(),
        arena_bytes: compiled.memory_plan().arena_bytes,
        graph_origin: loaded.deployed.as_ref().map(|(_, d)| d.origin.to_string()),
        prepacked_weights: loaded.deployed.is_some() && !args.source.no_prepack,
        arena_lower_bound_bytes: compiled.memory_plan().lower_bound_bytes,
        all_intermediate_bytes: compiled.memory_plan().all_intermediate_bytes,
        nodes,
    };
    if args.json {
        return serde_json::to_string_pretty(&report)
            .map(|s| s + "\n")
            .map_err(|e| {
                CliError::Graph(GraphError::Kernel {
                    node: "report".to_string(),
                    op_type: String::new(),
                    reason: e.to_string(),
                })
            });
    }
    Ok(bench_text(&report, &compiled))
}

fn bench_text(report: &BenchReport, compiled: &CompiledModel) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "model:    {} ({} threads, median of {} runs)",
        report.model, report.threads, report.runs
    );
    let _ = writeln!(
        out,
        "tessera:  {:.3} ms ({:.2} GFLOP/s)",
        report.latency_ms, report.gflops
    );
    let _ = writeln!(out, "memory:   {}", compiled.memory_plan());
    if let Some(origin) = &report.graph_origin {
        let _ = writeln!(out, "graph:    {origin}");
        let _ = writeln!(
            out,
            "weights:  {}",
            if report.prepacked_weights {
                "laid out once at load where a tuned schedule allows it (--no-prepack: not)"
            } else {
                "in the model's layout; tuned kernels copy them on every run (--no-prepack)"
            }
        );
    }
    match (&report.ort_latency_ms, &report.ort_error) {
        (Some(ort), _) => {
            let _ = writeln!(
                out,
                "onnxruntime {}: {ort:.3} ms; ratio (ORT / tessera) {:.3}",
                report.ort_version.as_deref().unwrap_or("?"),
                report.ratio.unwrap_or(0.0)
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "onnxruntime: not timed: {why}");
        }
        (None, None) => {}
    }
    out.push_str(&sources_summary(compiled));
    out.push('\n');
    let total: f64 = report
        .nodes
        .iter()
        .map(|n| n.time_ms)
        .sum::<f64>()
        .max(1e-12);
    let rows: Vec<Vec<String>> = report
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.name.clone(),
                n.op_type.to_string(),
                n.kernel.clone(),
                n.source.to_string(),
                format!("{:.3}", n.time_ms),
                format!("{:.1}", 100.0 * n.time_ms / total),
                if n.time_ms > 0.0 && n.gflop > 0.0 {
                    format!("{:.2}", n.gflop / (n.time_ms / 1e3))
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    out.push_str(&table(
        &["node", "op", "kernel", "schedule", "ms", "%", "GFLOP/s"],
        &rows,
    ));
    out
}
