#!/usr/bin/env python3
"""tessera against ONNX Runtime, row by row, in one run.

For every row of workloads.json: build the ONNX model of the row (one node, or
a small graph of standard nodes), time ONNX Runtime (CPU provider) at each
thread count, run `tessera bench OP --shape ... --threads T --json` on the
same shape, check once that both engines compute the same outputs on the same
inputs (tessera's `bench --save-io` writes its inputs and the timed kernel's
outputs; ORT runs on those inputs), and print one table of medians and ratios
(ORT time / tessera time: >= 1 means tessera is faster).

Run it through `bench/ort/compare`, which makes the virtual environment and
the release build; `--help` lists the options.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = Path(__file__).resolve().parent / "workloads.json"
# Each timed sample lasts at least this long, as in `tessera bench`
# (its TimingOptions::min_repeat_ms): a sample is the mean of as many
# back-to-back runs as fill it.
MIN_SAMPLE_MS = 100.0
WARMUP_MS = 100.0
ONNX_DTYPES = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64}


class RowFailed(Exception):
    """A row that cannot be measured or checked; the run goes on."""


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/ort/compare",
        description="Time tessera and ONNX Runtime on the rows of workloads.json, "
        "check they compute the same, print one table.",
    )
    p.add_argument("--only", help="comma-separated row filters: a row runs when its op "
                   "is one or its name starts with one (e.g. softmax,layer_norm,\"matmul 512\")")
    p.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    p.add_argument("--runs", type=int, default=20,
                   help="timed samples per engine and thread count, median and min "
                   "reported (default 20, at least 20 recommended)")
    p.add_argument("--tune", type=int, metavar="TRIALS",
                   help="run `tessera tune OP --shape ... --trials TRIALS --db DB` first")
    p.add_argument("--weights", choices=["constant", "input"], default="constant",
                   help="constant (default): inputs a row marks constant (dense and "
                   "convolution weights) are laid out ahead of time by both engines, as "
                   "deployed; input: every tensor a graph input, nothing laid out ahead")
    p.add_argument("--db", default="tuning_logs/tuning.db",
                   help="tuning database tessera bench (and --tune) use "
                   "(default tuning_logs/tuning.db)")
    p.add_argument("--out", action="append", default=[], metavar="PATH",
                   help="also write the table: PATH.md as markdown, anything else as "
                   "JSON; may be given twice")
    p.add_argument("--workloads", default=str(WORKLOADS), help="the workload file")
    p.add_argument("--tessera", default=str(ROOT / "target/release/tessera"),
                   help="the tessera binary")
    p.add_argument("--custom-op", default=str(ROOT / "target/release/examples/custom_op"),
                   help="the binary of rows with \"binary\": \"custom_op\" "
                   "(the custom_op example, a tessera CLI that knows its op! operators)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep the ONNX models and the saved inputs/outputs in DIR")
    args = p.parse_args(argv)
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        p.error(f"--threads must be comma-separated integers, not '{args.threads}'")
    if not args.threads or min(args.threads) < 1:
        p.error("--threads needs at least one positive thread count")
    if args.runs < 1:
        p.error("--runs must be positive")
    if args.tune is not None and args.tune < 1:
        p.error("--tune must be positive")
    return args


# ---------------------------------------------------------------- the model

def build_model(row, opset, constants=None):
    """The row's ONNX model: graph inputs and outputs as declared, constant
    initializers (axes, eps) for the small graphs. `constants` (name ->
    array) turns those inputs into initializers, which ORT may lay out ahead
    of time (MLAS prepacks constant GEMM and convolution weights); without,
    every tensor is a graph input and neither engine may."""
    constants = constants or {}

    def value_info(entry):
        return helper.make_tensor_value_info(entry["name"], TensorProto.FLOAT, entry["shape"])

    nodes = [
        helper.make_node(n["op_type"], n["inputs"], n["outputs"], **n.get("attributes", {}))
        for n in row["nodes"]
    ]
    initializers = [
        helper.make_tensor(i["name"], ONNX_DTYPES[i["dtype"]], i["shape"], i["values"])
        for i in row.get("initializers", [])
    ] + [
        numpy_helper.from_array(np.ascontiguousarray(array, np.float32), name)
        for name, array in constants.items()
    ]
    graph = helper.make_graph(
        nodes, re.sub(r"\W+", "_", row["name"]),
        [value_info(e) for e in row["inputs"] if e["name"] not in constants],
        [value_info(e) for e in row["outputs"]],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)  # what ORT 1.20+ reads
    onnx.checker.check_model(model, full_check=True)
    return model


def session(model_bytes, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def bound(sess, inputs, output_shapes):
    """An io_binding with `inputs` (name -> array) and preallocated outputs."""
    binding = sess.io_binding()
    keep = []
    for name, array in inputs.items():
        value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array))
        keep.append(value)
        binding.bind_ortvalue_input(name, value)
    outputs = {}
    for name, shape in output_shapes.items():
        value = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float32)
        outputs[name] = value
        binding.bind_ortvalue_output(name, value)
    return binding, outputs, keep


def time_samples(run, samples):
    """`samples` timings in ms of one run each: warm-up, then each sample the
    mean of as many back-to-back runs as fill MIN_SAMPLE_MS (the number is
    calibrated once, then raised if a sample falls short)."""
    start = time.perf_counter()
    warm = 0
    while warm < 3 or (time.perf_counter() - start) * 1e3 < WARMUP_MS:
        run()
        warm += 1
    per_run_ms = (time.perf_counter() - start) * 1e3 / warm
    number = max(1, math.ceil(MIN_SAMPLE_MS * 1.1 / max(per_run_ms, 1e-6)))
    costs = []
    while len(costs) < samples:
        t0 = time.perf_counter()
        for _ in range(number):
            run()
        elapsed_ms = (time.perf_counter() - t0) * 1e3
        if elapsed_ms < MIN_SAMPLE_MS:
            number = math.ceil(number * MIN_SAMPLE_MS * 1.1 / elapsed_ms)
            continue
        costs.append(elapsed_ms / number)
    return costs


def ort_times(model_bytes, threads, inputs, output_shapes, samples):
    sess = session(model_bytes, threads)
    binding, _, _keep = bound(sess, inputs, output_shapes)
    costs = time_samples(lambda: sess.run_with_iobinding(binding), samples)
    return statistics.median(costs), min(costs)


def ort_outputs(model_bytes, inputs, output_shapes):
    sess = session(model_bytes, 1)
    binding, outputs, _keep = bound(sess, inputs, output_shapes)
    for name, value in outputs.items():  # poison: a missed write shows
        value.numpy()[...] = np.nan
    sess.run_with_iobinding(binding)
    return {name: value.numpy().copy() for name, value in outputs.items()}


def call_overhead_ms():
    """The cost of one io_binding run of an Identity on one float: the floor
    under every ORT figure (Python call + session run)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    sess = session(model.SerializeToString(), 1)
    binding, _, _keep = bound(sess, {"x": np.zeros(1, np.float32)}, {"y": [1]})
    return statistics.median(time_samples(lambda: sess.run_with_iobinding(binding), 5))


# ---------------------------------------------------------------- tessera

def run_tessera(binary, args):
    proc = subprocess.run([binary, *args], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        raise RowFailed(f"`{Path(binary).name} {' '.join(args)}` exited {proc.returncode}: "
                        + " | ".join(last))
    return proc.stdout


def constant_inputs(row, args):
    """The row's inputs taken as constant weights: those its workload marks
    `"constant": true`, unless --weights input."""
    if args.weights == "input":
        return []
    return [e for e in row["inputs"] if e.get("constant")]


def tessera_bench(binary, row, threads, args, save_io=None):
    command = ["bench", row["op"], "--shape", row["shape"], "--threads", str(threads),
               "--json", "--repeat", str(args.runs), "--db", args.db]
    constants = constant_inputs(row, args)
    if constants:
        command += ["--constants", ",".join(e["tessera"] for e in constants)]
    if save_io is not None:
        command += ["--save-io", str(save_io)]
    text = run_tessera(binary, command)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RowFailed(f"tessera bench printed no JSON ({e}): {text[:200]}")


def check_same(row, io_dir, model_bytes, tessera_tolerance):
    """Runs ORT on the inputs tessera benched with and compares its outputs
    with the timed tessera kernel's. The bound: each engine within tessera's
    rounding tolerance of the exact result (relative error as tessera
    measures it, |a-b| / max(|b|, 1)), so twice that between them."""
    listing = json.loads((io_dir / "io.json").read_text())
    files = {e["name"]: io_dir / e["file"] for e in listing["inputs"] + listing["outputs"]}
    inputs = {}
    for entry in row["inputs"]:
        array = np.load(files[entry["tessera"]])
        if list(array.shape) != entry["shape"]:
            if not entry.get("reshape") or array.size != math.prod(entry["shape"]):
                raise RowFailed(f"input {entry['name']}: tessera's {entry['tessera']} is "
                                f"{list(array.shape)}, the model's {entry['shape']}")
            array = array.reshape(entry["shape"])
        inputs[entry["name"]] = array
    shapes = {e["name"]: e["shape"] for e in row["outputs"]}
    got = ort_outputs(model_bytes, inputs, shapes)
    bound = 2.0 * tessera_tolerance
    worst = 0.0
    for entry in row["outputs"]:
        ours = np.load(files[entry["tessera"]]).astype(np.float64)
        theirs = got[entry["name"]].astype(np.float64)
        if list(ours.shape) != list(theirs.shape):
            raise RowFailed(f"output {entry['name']}: tessera {list(ours.shape)}, "
                            f"ORT {list(theirs.shape)}")
        if np.isnan(theirs).any() or np.isnan(ours).any():
            raise RowFailed(f"output {entry['name']}: NaN in "
                            + ("ORT's" if np.isnan(theirs).any() else "tessera's") + " output")
        error = np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1.0)
        worst = max(worst, float(error.max()))
    if worst > bound:
        raise RowFailed(f"tessera and ORT differ: max rel. error {worst:.2e} > {bound:.1e}")
    return worst, bound, inputs


# ---------------------------------------------------------------- one row

def measure_row(row, opset, args, work):
    binary = args.custom_op if row.get("binary") == "custom_op" else args.tessera
    result = {"name": row["name"], "op": row["op"], "shape": row["shape"],
              "binary": Path(binary).name, "tessera": {}, "ort": {}}
    model = build_model(row, opset)
    model_bytes = model.SerializeToString()
    slug = re.sub(r"\W+", "_", row["name"]).strip("_")
    (work / f"{slug}.onnx").write_bytes(model_bytes)
    if args.tune:
        # Constant weights are laid out ahead of time while tuning too, so the
        # search ranks schedules as they are then timed (and deployed).
        tune = ["tune", row["op"], "--shape", row["shape"], "--trials", str(args.tune),
                "--db", args.db]
        tuned_constants = constant_inputs(row, args)
        if tuned_constants:
            tune += ["--constants", ",".join(e["tessera"] for e in tuned_constants)]
        run_tessera(binary, tune)
        result["tuned_trials"] = args.tune
    io_dir = work / slug
    inputs = None
    constants = [e["name"] for e in constant_inputs(row, args)]
    result["weights"] = "constant" if constants else "input"
    for i, threads in enumerate(args.threads):
        report = tessera_bench(binary, row, threads, args, save_io=io_dir if i == 0 else None)
        median_ms, min_ms = report["median_ms"], report["min_ms"]
        if constants and report.get("prepacked_gflops"):
            # The kernel with its constants laid out ahead, as deployed:
            # timed in the same run, reported as GFLOP/s of the same flops.
            # (None: the schedule reads them where they are, nothing to lay out.)
            scale = report["gflops"] / report["prepacked_gflops"]
            median_ms, min_ms = median_ms * scale, min_ms * scale
        result["tessera"][threads] = {"median_ms": median_ms, "min_ms": min_ms}
        result["schedule"] = report["source"]
        result["schedule_reason"] = report["source_reason"]
        if i == 0:
            error, bound, inputs = check_same(row, io_dir, model_bytes, report["tolerance"])
            result["check"] = {"max_rel_error": error, "bound": bound,
                               "how": "ORT on tessera's inputs vs the timed tessera kernel"}
            if constants:
                model_bytes = build_model(
                    row, opset, {name: inputs.pop(name) for name in constants}
                ).SerializeToString()
        median, fastest = ort_times(model_bytes, threads, inputs,
                                    {e["name"]: e["shape"] for e in row["outputs"]}, args.runs)
        result["ort"][threads] = {"median_ms": median, "min_ms": fastest}
    result["ratio"] = {t: result["ort"][t]["median_ms"] / result["tessera"][t]["median_ms"]
                       for t in args.threads}
    return result


# ---------------------------------------------------------------- report

def cpu_model():
    model, flags = platform.processor() or "unknown", set()  # non-Linux: no flags
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    isa = [f for f in ("avx2", "fma", "avx512f", "amx_tile") if f in flags]
    return f"{model} ({os.cpu_count()} cores; {', '.join(isa) or 'no AVX2'})"


def git_commit():
    proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def table_rows(results, threads):
    header = (["workload"] + [f"tessera {t}T ms" for t in threads]
              + [f"ORT {t}T ms" for t in threads] + [f"ratio {t}T" for t in threads]
              + ["weights", "schedule", "check"])
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["name"]] + ["–"] * (3 * len(threads) + 1) + ["FAILED", r["error"]])
            continue
        rows.append(
            [r["name"]]
            + [fmt(r["tessera"][t]["median_ms"]) for t in threads]
            + [fmt(r["ort"][t]["median_ms"]) for t in threads]
            + [fmt(r["ratio"][t], 2) for t in threads]
            + [r["weights"]]
            + [r["schedule"] + (f" ({r['tuned_trials']} trials)" if "tuned_trials" in r else ""),
               f"ok {r['check']['max_rel_error']:.1e}"]
        )
    return header, rows


def render_text(header, rows):
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render_markdown(meta, header, rows, results, threads):
    out = ["# tessera against ONNX Runtime", ""]
    out += [f"- {k}: {v}" for k, v in meta.items()]
    out += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    out += ["", "Minimum times (ms):", ""]
    for r in results:
        if "error" not in r:
            mins = ", ".join(f"{t}T tessera {fmt(r['tessera'][t]['min_ms'])} / ORT "
                             f"{fmt(r['ort'][t]['min_ms'])}" for t in threads)
            out.append(f"- {r['name']}: {mins}")
    return "\n".join(out) + "\n"


def main(argv):
    args = parse_args(argv)
    spec = json.loads(Path(args.workloads).read_text())
    rows = spec["rows"]
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        rows = [r for r in rows
                if any(w == r["op"] or r["name"].startswith(w) for w in wanted)]
        if not rows:
            sys.exit(f"error: --only {args.only} selects no row of {args.workloads}")
    for binary in {args.custom_op if r.get("binary") == "custom_op" else args.tessera
                   for r in rows}:
        if not Path(binary).is_file():
            sys.exit(f"error: {binary} does not exist (build it: cargo build --release "
                     "--bin tessera --example custom_op, or run bench/ort/compare)")
    load_before = os.getloadavg()
    overhead = call_overhead_ms()
    keep = Path(args.keep) if args.keep else None
    work_context = tempfile.TemporaryDirectory(prefix="tessera-ort-") if keep is None else None
    work = keep if keep is not None else Path(work_context.name)
    work.mkdir(parents=True, exist_ok=True)

    results = []
    for n, row in enumerate(rows, 1):
        print(f"[{n}/{len(rows)}] {row['name']}", file=sys.stderr, flush=True)
        try:
            result = measure_row(row, spec["opset"], args, work)
            results.append(result)
            print("  " + ", ".join(
                f"{t}T tessera {fmt(result['tessera'][t]['median_ms'])} ms / ORT "
                f"{fmt(result['ort'][t]['median_ms'])} ms = {fmt(result['ratio'][t], 2)}"
                for t in args.threads) + f" ({result['schedule']})", file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 -- any failure fails the row, not the run
            print(f"  failed: {e}", file=sys.stderr, flush=True)
            results.append({"name": row["name"], "op": row["op"], "shape": row["shape"],
                            "error": f"{type(e).__name__}: {e}"})
    if work_context is not None:
        work_context.cleanup()

    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "onnxruntime": ort.__version__,
        "onnx": onnx.__version__,
        "opset": spec["opset"],
        "tessera commit": git_commit(),
        "threads": ",".join(map(str, args.threads)),
        "samples": f"median and min of {args.runs}, each the mean of back-to-back runs "
                   f"filling >= {MIN_SAMPLE_MS:.0f} ms (both engines)",
        "ORT session": "CPU provider, intra_op_num_threads = threads, inter_op_num_threads 1, "
                       "sequential, ORT_ENABLE_ALL, io_binding",
        "ORT call overhead": f"{overhead * 1e3:.1f} us (Identity on one float)",
        "tuning": f"tessera tune --trials {args.tune} into {args.db}" if args.tune
                  else f"none in this run (bench times the best record of {args.db} or the default schedule)",
        "load average before/after": f"{load_before[0]:.2f} / {os.getloadavg()[0]:.2f}",
    }
    header, table = table_rows(results, args.threads)
    print()
    for key, value in meta.items():
        print(f"{key}: {value}")
    print()
    print(render_text(header, table))
    print("\nratio = ORT median / tessera median: >= 1 means tessera is faster")
    print("weights = constant: the inputs a row marks constant are ORT initializers and "
          "tessera's kernel with them laid out ahead of time (bench --constants), as each "
          "engine deploys a model; input: every tensor a graph input")
    for path in map(Path, args.out):
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".md":
            path.write_text(render_markdown(meta, header, table, results, args.threads))
        else:
            path.write_text(json.dumps({"meta": meta, "rows": results}, indent=2) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    failed = [r["name"] for r in results if "error" in r]
    if failed:
        print(f"\n{len(failed)} row(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
