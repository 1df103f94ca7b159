"""`light NAME`: the onnx package's light_NAME.onnx test models (opset 9,
real architectures, weights left as constants) with seeded random weights.

The light models hold their weights as `ConstantOfShape` nodes (every
element the same value, e.g. 0.02) fed by int64 shape initializers, plus a
few float initializers. A network of constant weights computes nearly the
same number everywhere, which checks little, so every such weight becomes an
initializer of random values drawn for its role (what reads it):

  conv / gemm / matmul weight   N(0, 2 / fan_in)  (He)
  bias, BN bias, BN mean        N(0, 0.1)
  BN scale, BN variance, a Mul  U(0.5, 1.5)
  anything else                 N(0, 1)

and then scaled by an estimate of their input's mean square (`calibrate`),
so that the activations stay O(1) all through the network (the random
batch norms would not normalise anything otherwise).

The opset is kept. The IR version becomes at least 4, so the weights are
initializers only and the graph inputs are the real inputs (IR 3 listed
every initializer as a graph input too). Initializers nothing reads are
dropped.
"""

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from model_files import BadInput, finish_model, rng_for

LIGHT_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"

# Nodes a weight passes through unchanged on its way to the node that uses
# it (densenet and inception_v2 Unsqueeze their BN-like scale and bias).
PASS_THROUGH = {"Unsqueeze", "Reshape", "Identity", "Flatten", "Squeeze"}


def available():
    """The NAMEs of light_NAME.onnx shipped with the installed onnx package."""
    return sorted(p.stem[len("light_"):] for p in LIGHT_DIR.glob("light_*.onnx"))


def load(name):
    path = LIGHT_DIR / f"light_{name}.onnx"
    if not path.is_file():
        names = available()
        raise BadInput(f"no light model '{name}' in {LIGHT_DIR}; available: "
                       + (", ".join(names) if names else "none (is onnx installed fully?)"))
    return onnx.load(str(path))


def consumers_of(graph):
    """tensor name -> [(node, input index)]"""
    readers = defaultdict(list)
    for node in graph.node:
        for index, name in enumerate(node.input):
            readers[name].append((node, index))
    return readers


def role_of(name, readers):
    """What the weight `name` is to the first node that uses it, looking
    through pass-through nodes: weight, bias, scale or other."""
    seen = set()
    frontier = [name]
    while frontier:
        tensor = frontier.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        for node, index in readers.get(tensor, []):
            op = node.op_type
            if op in PASS_THROUGH and index == 0:
                frontier.extend(node.output)
            elif op in ("Conv", "Gemm", "MatMul") and index == 1:
                return "weight"
            elif op in ("Conv", "Gemm") and index == 2:
                return "bias"
            elif op == "BatchNormalization" and index in (1, 4):
                return "scale"
            elif op == "BatchNormalization" and index in (2, 3):
                return "bias"
            elif op == "Mul":
                return "scale"
            elif op in ("Add", "Sum", "Sub"):
                return "bias"
    return "other"


def draw(name, shape, role, seed):
    """Raw values of a weight by its role; `weight`s are N(0, 1) here and
    scaled by `calibrate`."""
    rng = rng_for(seed, name)
    if role == "bias":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.1)
    if role == "scale":
        return rng.random(shape, dtype=np.float32) + np.float32(0.5)
    return rng.standard_normal(shape, dtype=np.float32)


def moments(array):
    """(mean, mean square) of a float32 array (no float64 copy: vgg19's
    largest weight has 10^8 elements)."""
    if not array.size:
        return 0.0, 0.0
    flat = array.reshape(-1)
    return float(np.mean(flat, dtype=np.float64)), float(np.dot(flat, flat)) / flat.size


def relu_moments(mean, ms):
    """(mean, mean square) of relu(x) for x ~ N(mean, ms - mean^2)."""
    sigma = math.sqrt(max(ms - mean * mean, 1e-12))
    z = mean / sigma
    cdf = 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
    pdf = math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return mean * cdf + sigma * pdf, ms * cdf + mean * sigma * pdf


def attribute(node, key, default):
    for a in node.attribute:
        if a.name == key:
            return onnx.helper.get_attribute_value(a)
    return default


def calibrate(graph, values, drawn, dims):
    """Scales the drawn weights so every activation stays O(1).

    Walks the nodes in graph (topological) order with an estimate of each
    tensor's mean and mean square ("ms"; graph inputs: N(0, 1)), assuming
    independent, roughly normal values:

      Conv / Gemm / MatMul   the drawn N(0, 1) weight times
                             sqrt(2 / (fan_in * ms_in)) (He on the estimated
                             input): output mean 0, ms 2 (+ the bias's)
      BatchNormalization     drawn mean * sqrt(ms_in), var * ms_in
      Relu, Clip             the moments of a rectified normal
      Sum, Add, Mul          of a sum / product of independent terms
      MaxPool                ms * (1 + ln(window) / 2) (the max of a window
                             of correlated values; measured 1.4 to 5 for 3x3)
      Concat                 weighted by the sizes along the axis
      anything else          as its first input

    Without it the random batch norms normalise nothing: resnet50's
    activations grow to ~1e4 and its softmax is one-hot. `values` (name ->
    array) is updated in place; only names in `drawn` are scaled. Returns
    the estimates {tensor: (mean, ms)}. `dims` are the tensors' inferred
    shapes (a weight may be reshaped on its way: inception_v1's classifier)."""
    est = {}
    source = {}  # tensor -> the initializer it is a pass-through view of

    for name in values:
        source[name] = name

    def of(name):
        if name in est:
            return est[name]
        if name in values:
            return moments(values[name])
        return 0.0, 1.0  # a graph input

    for node in graph.node:
        op = node.op_type
        ins = [of(i) for i in node.input if i]
        out = ins[0] if ins else (0.0, 1.0)
        weight = source.get(node.input[1]) if len(node.input) > 1 else None
        shape = dims.get(node.input[1]) if len(node.input) > 1 else None
        if op in ("Conv", "Gemm", "MatMul") and weight is not None and shape:
            w = values[weight]
            if op == "Conv":
                fan_in = math.prod(shape[1:])
            elif op == "Gemm":
                fan_in = shape[1] if attribute(node, "transB", 0) else shape[0]
            else:
                fan_in = shape[-2]
            alpha = attribute(node, "alpha", 1.0) if op == "Gemm" else 1.0
            if weight in drawn:
                w *= np.float32(math.sqrt(2.0 / (fan_in * ins[0][1])) / abs(alpha or 1.0))
            ms = fan_in * moments(w)[1] * ins[0][1] * alpha**2
            mean = 0.0
            if len(node.input) > 2 and node.input[2]:
                beta = attribute(node, "beta", 1.0) if op == "Gemm" else 1.0
                bias_mean, bias_ms = of(node.input[2])
                mean, ms = beta * bias_mean, ms + beta**2 * bias_ms
            out = mean, ms
        elif op == "BatchNormalization" and all(n in values for n in node.input[1:5]):
            scale, bias, mean, var = (values[n] for n in node.input[1:5])
            x_mean, x_ms = ins[0]
            if all(n in drawn for n in node.input[3:5]):
                mean *= np.float32(math.sqrt(x_ms))
                var *= np.float32(x_ms)
            s, b, m, v = (a.astype(np.float64) for a in (scale, bias, mean, var))
            gain = s / np.sqrt(v)
            out = (float(np.mean(gain * (x_mean - m) + b)),
                   float(np.mean(gain**2 * (x_ms - 2 * m * x_mean + m**2)
                                 + 2 * gain * (x_mean - m) * b + b**2)))
        elif op in ("Relu", "Clip", "LeakyRelu"):
            out = relu_moments(*ins[0])
        elif op in ("Sum", "Add"):
            mean = sum(m for m, _ in ins)
            out = mean, mean**2 + sum(ms - m * m for m, ms in ins)
        elif op == "Mul":
            out = math.prod(m for m, _ in ins), math.prod(ms for _, ms in ins)
        elif op == "MaxPool":
            factor = 1.0 + 0.5 * math.log(math.prod(attribute(node, "kernel_shape", [1])))
            out = ins[0][0] * math.sqrt(factor), ins[0][1] * factor
        elif op == "Concat":
            axis = attribute(node, "axis", 1)
            weights = [(dims.get(i) or [1] * (axis + 1))[axis] for i in node.input]
            total = max(sum(weights), 1)
            out = (sum(w * m for w, (m, _) in zip(weights, ins)) / total,
                   sum(w * ms for w, (_, ms) in zip(weights, ins)) / total)
        elif op in PASS_THROUGH and node.input[0] in source:
            source[node.output[0]] = source[node.input[0]]
        for name in node.output:
            est[name] = out
    return est


def inferred_dims(model):
    """tensor name -> shape from ONNX shape inference (0 for an unknown
    dimension), for calibrate."""
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    dims = {i.name: list(i.dims) for i in graph.initializer}
    for value in list(graph.value_info) + list(graph.input) + list(graph.output):
        dims[value.name] = [d.dim_value for d in value.type.tensor_type.shape.dim]
    return dims


def randomise(model, seed):
    """`model` with every ConstantOfShape weight and float initializer
    replaced by a random initializer (in place; also returned)."""
    graph = model.graph
    readers = consumers_of(graph)
    initializers = {i.name: i for i in graph.initializer}

    shapes = {}  # weight name -> shape, in the order they appear
    kept_nodes = []
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            kept_nodes.append(node)
            continue
        shape_name = node.input[0]
        if shape_name not in initializers:
            raise BadInput(f"ConstantOfShape {node.output[0]}: its shape {shape_name} "
                           "is computed, not an initializer; cannot make it a weight")
        shapes[node.output[0]] = [int(d) for d in numpy_helper.to_array(initializers[shape_name])]
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT and init.name not in shapes:
            shapes[init.name] = list(init.dims)

    values = {name: draw(name, shape, role_of(name, readers), seed)
              for name, shape in shapes.items()}
    del graph.node[:]
    graph.node.extend(kept_nodes)
    kept = [i for i in graph.initializer if i.name not in shapes]
    for init in kept:
        values[init.name] = numpy_helper.to_array(init)
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    constant_names = set(shapes) | set(initializers)
    real_inputs = [i for i in graph.input if i.name not in constant_names]
    del graph.input[:]
    graph.input.extend(real_inputs)
    del graph.initializer[:]
    graph.initializer.extend(i for i in kept if i.name in used)
    model.ir_version = max(model.ir_version, 4)

    # shape inference sees the weights' shapes without their values
    graph.input.extend(onnx.helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
                       for name, shape in shapes.items() if name in used)
    dims = inferred_dims(model)
    del graph.input[len(real_inputs):]

    calibrate(graph, values, set(shapes), dims)
    graph.initializer.extend(numpy_helper.from_array(values[name], name)
                             for name in shapes if name in used)
    return model


def make(name, seed):
    """The checked light model `name` with random weights."""
    model = randomise(load(name), seed)
    return finish_model(model, full_check=True)
