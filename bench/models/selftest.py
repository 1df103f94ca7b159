#!/usr/bin/env python3
"""Self-test of bench/models (Python only: needs numpy, onnx, onnxruntime,
not tessera). Runs every subcommand through the command line into a
temporary folder (or --keep DIR) and checks what it wrote:

- every model passes onnx.checker.check_model(full_check=True) and ORT runs
  it, with finite outputs of the declared shapes;
- light: no ConstantOfShape left, the opset kept, weights random (distinct
  values, not constant), activations O(1) (the softmax is not one-hot),
  the same seed gives the same bytes and another seed other weights;
- bert: the LayerNorm pattern and the LayerNormalization op agree;
- ops: every case of cases.json, its output shape as listed; cases meant to
  differ (Softmax opset 11 vs 13, Gelu none vs tanh) do;
- reference: the saved outputs are ORT's on the saved inputs, the manifest
  lists the graph's inputs and outputs in order; a dynamic dimension needs
  --input-shape;
- latency --json has its keys; bad input exits 2.

    target/ort-venv/bin/python bench/models/selftest.py [--all-light] [--keep DIR]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models.py"
sys.path.insert(0, str(HERE))
import light  # noqa: E402
from ort_runs import random_inputs  # noqa: E402

timings = []
failures = []


def cli(*args, expect=0):
    """Runs models.py; returns its stdout; records the time."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(MODELS), *map(str, args)],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    timings.append((" ".join(map(str, args[:2])), seconds))
    if proc.returncode != expect:
        raise AssertionError(f"models.py {' '.join(map(str, args))} exited {proc.returncode}, "
                             f"expected {expect}: {proc.stderr.strip()[-500:]}")
    return proc.stdout, proc.stderr


def check(name, fn):
    print(f"- {name} ...", flush=True)
    try:
        fn()
    except Exception as e:  # noqa: BLE001 -- report every failed check
        failures.append(name)
        print(f"  FAILED: {type(e).__name__}: {e}", flush=True)


def session(path, optimize=False):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1  # as `reference`: ORT's sums depend on the thread count
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run_model(path, seed=0):
    """Checks the file and runs it in ORT; returns (model, inputs, outputs)."""
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    inputs = random_inputs(model, seed)
    outputs = session(path).run(None, inputs)
    for value, array in zip(model.graph.output, outputs):
        declared = [d.dim_value for d in value.type.tensor_type.shape.dim]
        assert list(array.shape) == declared, f"{path.name}: output {value.name} is " \
            f"{list(array.shape)}, declared {declared}"
        assert np.isfinite(array).all(), f"{path.name}: output {value.name} not finite"
    return model, inputs, outputs


def check_reference(model_path, ref_dir, seed=0):
    """The manifest lists the graph's inputs/outputs in order and the saved
    outputs are what ORT computes on the saved inputs."""
    manifest = json.loads((ref_dir / "manifest.json").read_text())
    model = onnx.load(str(model_path))
    constants = {i.name for i in model.graph.initializer}
    assert [e["name"] for e in manifest["inputs"]] == \
        [i.name for i in model.graph.input if i.name not in constants]
    assert [e["name"] for e in manifest["outputs"]] == [o.name for o in model.graph.output]
    inputs = {e["name"]: np.load(ref_dir / e["file"]) for e in manifest["inputs"]}
    again = session(model_path).run(None, inputs)
    for entry, array in zip(manifest["outputs"], again):
        saved = np.load(ref_dir / entry["file"])
        assert saved.shape == array.shape and np.array_equal(saved, array), \
            f"{entry['file']} is not ORT's output on the saved inputs"
    leftovers = list(ref_dir.glob(".*.tmp"))
    assert not leftovers, f"temporary files left: {leftovers}"


# ------------------------------------------------------------ light

def check_light(work, name):
    path = work / f"{name}.onnx"
    cli("light", name, "--out", path, "--seed", 1)
    model, _, outputs = run_model(path)
    original = light.load(name)
    assert [o.version for o in model.opset_import] == [o.version for o in original.opset_import]
    assert not [n for n in model.graph.node if n.op_type == "ConstantOfShape"]
    floats = [numpy_helper.to_array(i) for i in model.graph.initializer if i.data_type == 1]
    assert floats, "no float initializers"
    for array in floats:
        if array.size > 1:
            assert len(np.unique(array)) > array.size // 2, "weight with repeated values"
    assert len({i.name for i in model.graph.input} & {i.name for i in model.graph.initializer}) == 0
    softmax = [n for n in model.graph.node if n.op_type == "Softmax"]
    if softmax and softmax[-1].output[0] == model.graph.output[0].name:
        assert outputs[0].max() < 0.5, f"softmax nearly one-hot ({outputs[0].max():.3f}): " \
            "activations not O(1)"
    ref = work / f"{name}_reference"
    cli("reference", path, "--inputs-dir", ref)
    check_reference(path, ref)


def check_light_seeds(work):
    a, b, c = (work / f"squeezenet_{s}.onnx" for s in "abc")
    cli("light", "squeezenet", "--out", a, "--seed", 7)
    cli("light", "squeezenet", "--out", b, "--seed", 7)
    cli("light", "squeezenet", "--out", c, "--seed", 8)
    assert a.read_bytes() == b.read_bytes(), "same seed, different files"
    assert a.read_bytes() != c.read_bytes(), "different seeds, same file"


# ------------------------------------------------------------ bert, mobilenet

def check_bert(work):
    small = ["--seq", 33, "--hidden", 96, "--heads", 4, "--ffn", 200, "--batch", 2]
    pattern, op = work / "bert_pattern.onnx", work / "bert_op.onnx"
    cli("bert", "--out", pattern, *small, "--opset", 18)
    cli("bert", "--out", op, *small, "--opset", 18, "--layernorm", "op")
    _, inputs, out_pattern = run_model(pattern)
    out_op = session(op).run(None, inputs)
    error = np.abs(out_pattern[0] - out_op[0]).max()
    assert error < 1e-4, f"LayerNorm pattern and op differ by {error}"
    full = work / "bert.onnx"
    cli("bert", "--out", full)
    ops = {n.op_type for n in run_model(full)[0].graph.node}
    assert {"Erf", "Pow", "ReduceMean", "Softmax", "Transpose", "Reshape"} <= ops, ops
    cli("reference", full, "--inputs-dir", work / "bert_reference")
    check_reference(full, work / "bert_reference")
    cli("bert", "--out", work / "x.onnx", "--layernorm", "op", "--opset", 13, expect=2)


def check_mobilenet(work):
    path = work / "mobilenet.onnx"
    cli("mobilenet", "--out", path)
    model, _, outputs = run_model(path)
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "BatchNormalization", "Clip", "Add", "GlobalAveragePool", "Gemm"} <= ops
    assert any(n.op_type == "Conv" and any(a.name == "group" and a.i > 1 for a in n.attribute)
               for n in model.graph.node), "no depthwise conv"
    assert 0.1 < outputs[0].std() < 10, f"logits std {outputs[0].std()}"
    cli("reference", path, "--inputs-dir", work / "mobilenet_reference")
    check_reference(path, work / "mobilenet_reference")


# ------------------------------------------------------------ ops

def check_ops(work):
    out = work / "ops"
    cli("ops", "--out-dir", out)
    listing = json.loads((out / "cases.json").read_text())["cases"]
    results = {}
    for case in listing:
        model, inputs, outputs = run_model(out / case["file"])
        assert model.opset_import[0].version == case["opset"], case["name"]
        assert [o["shape"] for o in case["outputs"]] == [list(a.shape) for a in outputs], case["name"]
        assert [i["name"] for i in case["inputs"]] == list(inputs), case["name"]
        results[case["name"]] = (inputs, outputs)
    ops = {c["op"] for c in listing}
    wanted = {"Conv", "BatchNormalization", "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "Exp",
              "Neg", "Abs", "Reciprocal", "Add", "Sub", "Mul", "Div", "Pow", "Sum", "MatMul",
              "Gemm", "MaxPool", "AveragePool", "GlobalAveragePool", "LRN", "Flatten", "Reshape",
              "Transpose", "Concat", "Softmax", "LayerNormalization", "ReduceMean", "Erf", "Sqrt",
              "Gelu", "Gather", "Slice", "Identity", "Dropout", "Constant", "ConstantOfShape",
              "Shape", "Unsqueeze", "Squeeze"}
    assert wanted <= ops, f"missing: {wanted - ops}"
    # cases that differ only in the semantics they test must compute differently
    for a, b in (("softmax_opset11_axis1", "softmax_opset13_axis1"), ("gelu_none", "gelu_tanh"),
                 ("averagepool_include_pad", "averagepool_exclude_pad")):
        assert not np.allclose(results[a][1][0], results[b][1][0], atol=1e-6), f"{a} == {b}"
    print(f"  {len(listing)} cases, {len(ops)} op types")
    one = listing[0]
    cli("reference", out / one["file"], "--inputs-dir", work / "ops_reference")
    check_reference(out / one["file"], work / "ops_reference")
    cli("ops", "--out-dir", work / "ops_with_reference", "--reference")
    listing = json.loads((work / "ops_with_reference" / "cases.json").read_text())["cases"]
    for case in listing:
        check_reference(work / "ops_with_reference" / case["file"],
                        work / "ops_with_reference" / case["reference_dir"])
        manifest = json.loads((work / "ops_with_reference" / case["reference_dir"]
                               / "manifest.json").read_text())
        assert np.isfinite(np.load(work / "ops_with_reference" / case["reference_dir"]
                                   / manifest["outputs"][0]["file"])).all(), case["name"]


# ------------------------------------------------------------ reference, latency, errors

def check_dynamic(work):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 5])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 5])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "dyn", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    path = work / "dynamic.onnx"
    onnx.save(model, str(path))
    _, err = cli("reference", path, "--inputs-dir", work / "dyn", expect=2)
    assert "--input-shape x=" in err, err
    cli("reference", path, "--inputs-dir", work / "dyn", "--input-shape", "x=3,5")
    manifest = json.loads((work / "dyn" / "manifest.json").read_text())
    assert manifest["inputs"][0]["shape"] == [3, 5]
    cli("reference", path, "--inputs-dir", work / "dyn", "--input-shape", "x=3,6", expect=2)
    cli("reference", path, "--inputs-dir", work / "dyn", "--input-shape", "x3,5", expect=2)


def check_latency(work):
    path = work / "mobilenet.onnx"
    if not path.exists():
        cli("mobilenet", "--out", path)
    out, _ = cli("latency", path, "--threads", 2, "--runs", 5, "--warmup", 1, "--json")
    result = json.loads(out)
    assert {"ort_latency_ms", "threads", "runs", "ort_version"} <= set(result), result
    assert result["threads"] == 2 and result["runs"] == 5 and result["ort_latency_ms"] > 0
    out, _ = cli("latency", path, "--runs", 3)
    assert out.strip().endswith(")") and " ms " in out, out


def check_errors(work):
    _, err = cli("light", "nosuchnet", "--out", work / "x.onnx", expect=2)
    assert "resnet50" in err, err
    cli("reference", work / "missing.onnx", "--inputs-dir", work / "y", expect=2)
    (work / "garbage.onnx").write_bytes(b"not a model")
    cli("latency", work / "garbage.onnx", expect=2)
    cli("bert", "--out", work / "x.onnx", "--hidden", 100, expect=2)
    cli("mobilenet", "--out", work / "x.onnx", "--size", 0, expect=2)  # argparse: exit 2
    assert not (work / "x.onnx").exists()


def main(argv):
    p = argparse.ArgumentParser(description="Self-test of bench/models.")
    p.add_argument("--all-light", action="store_true",
                   help="every light model, not only resnet50 (vgg19 alone takes ~10 s)")
    p.add_argument("--keep", type=Path, help="keep what it writes in this folder")
    args = p.parse_args(argv)
    context = None
    if args.keep:
        work = args.keep
        work.mkdir(parents=True, exist_ok=True)
    else:
        context = tempfile.TemporaryDirectory(prefix="tessera-models-")
        work = Path(context.name)
    names = light.available() if args.all_light else ["resnet50"]
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}")
    for name in names:
        check(f"light {name}", lambda name=name: check_light(work, name))
    check("light: seeds", lambda: check_light_seeds(work))
    check("bert", lambda: check_bert(work))
    check("mobilenet", lambda: check_mobilenet(work))
    check("ops", lambda: check_ops(work))
    check("reference: dynamic dimensions", lambda: check_dynamic(work))
    check("latency", lambda: check_latency(work))
    check("bad input exits 2", lambda: check_errors(work))
    print("\ntimes (s):")
    for what, seconds in timings:
        print(f"  {seconds:6.2f}  {what}")
    if context:
        context.cleanup()
    if failures:
        print(f"\n{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
