"""`reference` and `latency`: random inputs for a model's graph inputs, the
reference outputs of ONNX Runtime, and ORT's end-to-end latency.

Inputs are drawn per graph input (initializers are not inputs), seeded,
normal(0, 1) float32 unless the model's metadata asks otherwise: a model may
carry the metadata property `tessera.input_ranges`, a JSON object
{input name: [low, high]}, for inputs that must stay in a range (the base of
Sqrt or Pow, a divisor); those are drawn uniform(low, high).
"""

import json
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from model_files import BadInput, rng_for, sanitise, write_json, write_npy

INPUT_RANGES_KEY = "tessera.input_ranges"
NUMPY_OF = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16,
}


def load_model(path):
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such model file")
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 -- any parse failure is the user's file
        raise BadInput(f"{path}: not an ONNX model ({type(e).__name__}: {e})")


def parse_input_shapes(entries):
    """['NAME=1,3,224,224', ...] -> {NAME: [1, 3, 224, 224]}"""
    shapes = {}
    for entry in entries or []:
        name, sep, dims = entry.rpartition("=")
        try:
            shape = [int(d) for d in dims.split(",") if d.strip()] if sep else None
        except ValueError:
            shape = None
        if not name or shape is None or any(d < 0 for d in shape):
            raise BadInput(f"--input-shape '{entry}': expected NAME=D1,D2,... "
                           "with non-negative integer dimensions")
        shapes[name] = shape
    return shapes


def graph_inputs(model, given_shapes):
    """[(name, shape, numpy dtype)] of the inputs a caller must feed, in graph
    order: graph inputs that are not initializers. A dimension without a
    fixed value needs --input-shape."""
    constants = {i.name for i in model.graph.initializer}
    unknown = set(given_shapes) - {i.name for i in model.graph.input}
    if unknown:
        raise BadInput(f"--input-shape names no graph input: {', '.join(sorted(unknown))} "
                       f"(inputs: {', '.join(i.name for i in model.graph.input if i.name not in constants)})")
    result = []
    for value in model.graph.input:
        if value.name in constants:
            continue
        tensor = value.type.tensor_type
        if tensor.elem_type not in NUMPY_OF:
            raise BadInput(f"input {value.name}: element type "
                           f"{onnx.TensorProto.DataType.Name(tensor.elem_type)} is not a "
                           "float type; only float inputs can be drawn at random")
        declared = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if value.name in given_shapes:
            shape = given_shapes[value.name]
            if len(shape) != len(declared) or any(
                    d is not None and d != s for d, s in zip(declared, shape)):
                raise BadInput(f"--input-shape {value.name}={','.join(map(str, shape))} "
                               f"does not fit the declared shape {describe(tensor)}")
        elif any(d is None for d in declared):
            raise BadInput(f"input {value.name} has the dynamic shape {describe(tensor)}; "
                           f"give it with --input-shape {value.name}=D1,D2,...")
        else:
            shape = declared
        result.append((value.name, shape, NUMPY_OF[tensor.elem_type]))
    return result


def describe(tensor_type):
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in tensor_type.shape.dim]
    return "[" + ", ".join(dims) + "]"


def input_ranges(model):
    for prop in model.metadata_props:
        if prop.key == INPUT_RANGES_KEY:
            return {name: tuple(bounds) for name, bounds in json.loads(prop.value).items()}
    return {}


def random_inputs(model, seed, given_shapes=None):
    """{name: array} for every input of `model`, seeded (see the module doc)."""
    ranges = input_ranges(model)
    inputs = {}
    for name, shape, dtype in graph_inputs(model, given_shapes or {}):
        rng = rng_for(seed, "input", name)
        if name in ranges:
            low, high = ranges[name]
            values = rng.uniform(low, high, size=shape)
        else:
            values = rng.normal(0.0, 1.0, size=shape)
        inputs[name] = values.astype(dtype)
    return inputs


def session(model_path, threads, optimize):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    options.log_severity_level = 3  # errors only: no warnings about unused initializers
    try:
        return ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 -- ORT refuses the model: say so plainly
        raise BadInput(f"{model_path}: ONNX Runtime {ort.__version__} cannot load it: {e}")


def reference(model_path, inputs_dir, seed, given_shapes):
    """Writes the inputs, ORT's outputs (no graph optimisation, 1 thread)
    and manifest.json into `inputs_dir`; returns the manifest."""
    model = load_model(model_path)
    inputs = random_inputs(model, seed, given_shapes)
    sess = session(model_path, threads=1, optimize=False)
    output_names = [o.name for o in sess.get_outputs()]
    outputs = sess.run(output_names, inputs)

    inputs_dir = Path(inputs_dir)
    manifest = {
        "model": str(model_path),
        "seed": seed,
        "ort_version": ort.__version__,
        "onnx_version": onnx.__version__,
        "ort_session": "CPU provider, ORT_DISABLE_ALL, 1 intra-op thread",
        "inputs": [],
        "outputs": [],
    }
    for kind, named in (("input", inputs.items()), ("output", zip(output_names, outputs))):
        for i, (name, array) in enumerate(named):
            file = f"{kind}_{i}_{sanitise(name)}.npy"
            write_npy(inputs_dir / file, array)
            manifest[kind + "s"].append({"name": name, "file": file, "shape": list(array.shape),
                                         "dtype": str(array.dtype)})
    write_json(inputs_dir / "manifest.json", manifest)
    return manifest


def latency(model_path, threads, runs, warmup, seed, given_shapes):
    """ORT's median end-to-end latency in ms (ORT_ENABLE_ALL, `threads`
    intra-op threads): each run is one `InferenceSession.run` on the same
    random inputs, outputs allocated by ORT, timed alone."""
    model = load_model(model_path)
    inputs = random_inputs(model, seed, given_shapes)
    del model
    sess = session(model_path, threads=threads, optimize=True)
    for _ in range(warmup):
        sess.run(None, inputs)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        sess.run(None, inputs)
        times.append((time.perf_counter() - start) * 1e3)
    return {
        "ort_latency_ms": statistics.median(times),
        "min_ms": min(times),
        "threads": threads,
        "runs": runs,
        "warmup": warmup,
        "ort_version": ort.__version__,
        "model": str(model_path),
    }
