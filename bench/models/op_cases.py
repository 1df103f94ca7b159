"""`ops`: one small model per operator case, for checking tessera's ONNX
import op by op against ONNX Runtime.

Each case is one node (a few for the patterns exporters write: Constant
and ConstantOfShape feeding an Add, Shape -> Gather -> Unsqueeze -> Concat
-> Reshape), with odd shapes, broadcasting and attributes away from their
defaults. Weights (convolution, Gemm, BN parameters, LayerNorm scale and
bias) and constant operands (Reshape shapes, Gather indices, Slice bounds,
axes, Clip bounds) are initializers; data are graph inputs.

Every case's file is `<op>_<variant>.onnx`; cases.json lists them with
their op type, opset, inputs, outputs and a tolerance hint: `reduction`,
the longest number of terms any output element sums over (1 for
elementwise ops), which bounds the rounding error a faithful
implementation may differ by.
"""

import json
import math
from dataclasses import dataclass, field

import numpy as np
from onnx import helper

from graph_builder import GraphBuilder
from model_files import rng_for
from ort_runs import INPUT_RANGES_KEY

INT64_MAX = 2**63 - 1
X4 = [2, 3, 4, 5]  # the usual 4-D data shape of elementwise cases


@dataclass
class Case:
    name: str
    op: str
    opset: int
    inputs: list  # [(name, shape)]
    reduction: int
    model: object = None
    ranges: dict = field(default_factory=dict)
    output_shape: list = None  # None: from shape inference


class CaseMaker:
    """Builds the cases; `seed` makes their weights."""

    def __init__(self, seed):
        self.seed = seed
        self.cases = []

    def weights(self, case_name, tensor, kind, shape, fan_in=None):
        """The values of the weight `tensor` of a case, of `kind`: he
        (N(0, 2 / fan_in)), bias (N(0, 0.1)), scale (U(0.5, 1.5)) or
        normal (N(0, 1))."""
        rng = rng_for(self.seed, case_name, tensor)
        if kind == "he":
            values = rng.normal(0.0, math.sqrt(2.0 / fan_in), size=shape)
        elif kind == "bias":
            values = rng.normal(0.0, 0.1, size=shape)
        elif kind == "scale":
            values = rng.uniform(0.5, 1.5, size=shape)
        else:
            values = rng.normal(0.0, 1.0, size=shape)
        return values.astype(np.float32)

    def add(self, name, op, opset, data, node_inputs=None, constants=None, reduction=1,
            ranges=None, **attributes):
        """One single-node case. `data`: graph inputs {name: shape} (in
        order); `constants`: initializers {name: array}; `node_inputs`: the
        node's input names in order ('' for an absent optional one),
        default the data names then the constant names."""
        constants = constants or {}
        g = GraphBuilder(self.seed)
        for tensor, array in constants.items():
            g.const(tensor, array)
        if node_inputs is None:
            node_inputs = list(data) + list(constants)
        g.node(op, node_inputs, outputs=["y"], **attributes)
        self.finish(Case(name, op, opset, list(data.items()), reduction, ranges=ranges or {}), g)

    def finish(self, case, g):
        metadata = {}
        if case.ranges:
            metadata[INPUT_RANGES_KEY] = json.dumps(case.ranges)
        case.model = g.model(case.name, case.inputs, [("y", case.output_shape)],
                             case.opset, metadata)
        self.cases.append(case)


# ------------------------------------------------------------ the cases

def conv_cases(m):
    def conv(name, x, w_shape, bias=True, group=1, **attrs):
        fan_in = math.prod(w_shape[1:])
        constants = {"w": m.weights(name, "w", "he", w_shape, fan_in)}
        if bias:
            constants["b"] = m.weights(name, "b", "bias", [w_shape[0]])
        m.add(name, "Conv", 13, {"x": x}, constants=constants, reduction=fan_in,
              group=group, kernel_shape=w_shape[2:], **attrs)

    conv("conv_basic", [1, 4, 13, 13], [8, 4, 3, 3], pads=[1, 1, 1, 1])
    conv("conv_nobias", [1, 4, 13, 13], [8, 4, 3, 3], bias=False)
    conv("conv_group2", [1, 4, 13, 13], [6, 2, 3, 3], group=2, pads=[1, 1, 1, 1])
    conv("conv_depthwise", [1, 6, 13, 13], [6, 1, 3, 3], group=6, pads=[1, 1, 1, 1])
    conv("conv_depthwise_multiplier2", [1, 3, 13, 13], [6, 1, 3, 3], group=3, bias=False)
    conv("conv_stride2", [1, 4, 13, 13], [8, 4, 3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    conv("conv_pads_asymmetric", [1, 4, 13, 13], [8, 4, 3, 3], pads=[0, 1, 2, 1])
    conv("conv_dilation2", [1, 4, 13, 13], [8, 4, 3, 3], dilations=[2, 2], pads=[2, 2, 2, 2])
    conv("conv_same_upper", [1, 4, 14, 14], [8, 4, 3, 3], auto_pad="SAME_UPPER", strides=[2, 2])
    conv("conv_rect_kernel", [2, 3, 7, 33], [5, 3, 3, 5], strides=[1, 2], pads=[1, 2, 1, 2])
    conv("conv_pointwise", [1, 4, 7, 7], [16, 4, 1, 1], bias=False)


def batch_norm_cases(m):
    for name, opset, x, epsilon in (("batchnormalization_opset15", 15, [2, 5, 7, 7], 1e-3),
                                    ("batchnormalization_opset9", 9, [1, 3, 13, 13], 1e-5)):
        c = x[1]
        constants = {"scale": m.weights(name, "scale", "scale", [c]),
                     "bias": m.weights(name, "bias", "bias", [c]),
                     "mean": m.weights(name, "mean", "bias", [c]),
                     "var": m.weights(name, "var", "scale", [c])}
        m.add(name, "BatchNormalization", opset, {"x": x}, constants=constants,
              epsilon=epsilon, momentum=0.7)


def unary_cases(m):
    x = [2, 3, 7, 13]
    positive = {"x": [0.1, 4.0]}
    away_from_zero = {"x": [0.5, 2.0]}
    m.add("relu_basic", "Relu", 13, {"x": x})
    m.add("sigmoid_basic", "Sigmoid", 13, {"x": x})
    m.add("tanh_basic", "Tanh", 13, {"x": x})
    m.add("leakyrelu_alpha", "LeakyRelu", 13, {"x": x}, alpha=0.2)
    m.add("exp_basic", "Exp", 13, {"x": x})
    m.add("neg_basic", "Neg", 13, {"x": x})
    m.add("abs_basic", "Abs", 13, {"x": x})
    m.add("reciprocal_basic", "Reciprocal", 13, {"x": x}, ranges=away_from_zero)
    m.add("erf_basic", "Erf", 13, {"x": x})
    m.add("sqrt_basic", "Sqrt", 13, {"x": x}, ranges=positive)
    m.add("identity_basic", "Identity", 13, {"x": x})
    m.add("dropout_opset13", "Dropout", 13, {"x": x})
    m.add("dropout_opset9_ratio", "Dropout", 9, {"x": x}, ratio=0.3)
    for name, opset, gelu in (("gelu_none", 20, "none"), ("gelu_tanh", 20, "tanh")):
        m.add(name, "Gelu", opset, {"x": x}, approximate=gelu)


def clip_cases(m):
    x = {"x": [2, 3, 7, 13]}
    m.add("clip_opset9_attributes", "Clip", 9, x, min=-0.5, max=0.7)
    bounds = {"min": np.float32(-0.5), "max": np.float32(0.7)}
    m.add("clip_opset13_inputs", "Clip", 13, x, constants=bounds)
    m.add("clip_opset13_min_only", "Clip", 13, x, node_inputs=["x", "min"],
          constants={"min": np.float32(0.0)})
    m.add("clip_opset13_relu6", "Clip", 13, x,
          constants={"min": np.float32(0.0), "max": np.float32(6.0)})


def binary_cases(m):
    shapes = {
        "same": (X4, X4),
        "bcast_last": (X4, [5]),
        "bcast_middle": (X4, [3, 1, 5]),
        "scalar": (X4, []),
        "bcast_first": ([3, 1, 5], X4),
        "outer": ([13, 1], [1, 33]),
    }
    for op in ("Add", "Sub", "Mul", "Div", "Pow"):
        for variant, (a, b) in shapes.items():
            ranges = {"b": [0.5, 2.0]} if op == "Div" else {}
            if op == "Pow":
                ranges = {"a": [0.5, 2.0], "b": [-2.0, 2.0]}
            m.add(f"{op.lower()}_{variant}", op, 13, {"a": a, "b": b}, ranges=ranges)
    m.add("pow_square", "Pow", 13, {"a": X4}, constants={"b": np.float32(2.0)})
    m.add("pow_sqrt", "Pow", 13, {"a": X4}, constants={"b": np.float32(0.5)},
          ranges={"a": [0.1, 4.0]})
    m.add("sum_three", "Sum", 13, {"a": X4, "b": X4, "c": X4}, reduction=3)
    m.add("sum_broadcast", "Sum", 13, {"a": X4, "b": [5], "c": [3, 1, 5]}, reduction=3)


def matmul_cases(m):
    for name, a, b in (("matmul_2d", [13, 33], [33, 7]),
                       ("matmul_batched_3d", [3, 13, 33], [3, 33, 7]),
                       ("matmul_batched_4d", [2, 3, 13, 17], [2, 3, 17, 7]),
                       ("matmul_broadcast", [2, 3, 5, 7], [7, 4]),
                       ("matmul_broadcast_batch", [3, 1, 5, 7], [4, 7, 6]),
                       ("matmul_1d_left", [7], [7, 4]),
                       ("matmul_1d_right", [3, 5, 7], [7])):
        k = a[-1]
        m.add(name, "MatMul", 13, {"a": a, "b": b}, reduction=k)
    m.add("matmul_weight", "MatMul", 13, {"a": [2, 13, 33]},
          constants={"w": m.weights("matmul_weight", "w", "he", [33, 7], 33)}, reduction=33)


def gemm_cases(m):
    def gemm(name, a, b, c, **attrs):
        k = a[0] if attrs.get("transA") else a[1]
        constants = {"b": m.weights(name, "b", "he", b, k)}
        if c is not None:
            constants["c"] = m.weights(name, "c", "bias", c)
        m.add(name, "Gemm", 13, {"a": a}, constants=constants, reduction=k, **attrs)

    gemm("gemm_basic", [13, 33], [33, 7], [7])
    gemm("gemm_transB", [13, 33], [7, 33], [13, 7], transB=1)
    gemm("gemm_transA_alpha_beta", [33, 13], [33, 7], [7], transA=1, alpha=0.5, beta=2.0)
    gemm("gemm_transAB", [33, 13], [7, 33], [13, 7], transA=1, transB=1, alpha=0.25, beta=0.5)
    gemm("gemm_no_c", [13, 33], [7, 33], None, transB=1, alpha=1.5)


def pool_cases(m):
    def pool(name, op, x, kernel, **attrs):
        m.add(name, op, 13, {"x": x}, reduction=math.prod(kernel), kernel_shape=kernel, **attrs)

    pool("maxpool_basic", "MaxPool", [1, 3, 13, 13], [2, 2], strides=[2, 2])
    pool("maxpool_pads", "MaxPool", [1, 3, 13, 13], [3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    pool("maxpool_ceil", "MaxPool", [1, 3, 14, 14], [3, 3], strides=[2, 2], ceil_mode=1)
    pool("maxpool_dilation2", "MaxPool", [1, 3, 13, 13], [2, 2], dilations=[2, 2])
    pool("maxpool_pads_asymmetric", "MaxPool", [1, 2, 7, 9], [3, 3], pads=[0, 1, 1, 0])
    pool("averagepool_include_pad", "AveragePool", [1, 3, 13, 13], [3, 3], strides=[2, 2],
         pads=[1, 1, 1, 1], count_include_pad=1)
    pool("averagepool_exclude_pad", "AveragePool", [1, 3, 13, 13], [3, 3], strides=[2, 2],
         pads=[1, 1, 1, 1], count_include_pad=0)
    pool("averagepool_rect", "AveragePool", [2, 3, 7, 33], [3, 2], strides=[1, 2])
    m.add("globalaveragepool_basic", "GlobalAveragePool", 13, {"x": [2, 5, 7, 13]},
          reduction=7 * 13)
    m.add("lrn_size3", "LRN", 13, {"x": [1, 7, 5, 5]}, reduction=3, size=3, alpha=1e-3,
          beta=0.6, bias=2.0)
    m.add("lrn_size5", "LRN", 13, {"x": [2, 9, 7, 7]}, reduction=5, size=5, alpha=0.01)


def shape_cases(m):
    for axis in (0, 1, 2, -1):
        m.add(f"flatten_axis{axis}".replace("-", "m"), "Flatten", 13, {"x": X4}, axis=axis)
    for variant, shape in (("minus1", [6, -1]), ("zero", [0, -1, 5]),
                           ("zero_zero_minus1", [0, 0, -1]), ("flat", [-1])):
        m.add(f"reshape_{variant}", "Reshape", 13, {"x": X4},
              constants={"shape": np.array(shape, np.int64)})
    for variant, x, perm in (("nhwc", X4, [0, 2, 3, 1]), ("mixed", X4, [3, 1, 0, 2]),
                             ("2d", [13, 33], [1, 0]), ("default", [2, 3, 7], None)):
        attrs = {} if perm is None else {"perm": perm}
        m.add(f"transpose_{variant}", "Transpose", 13, {"x": x}, **attrs)
    for variant, axis, shapes in (("axis0", 0, ([2, 3, 4], [1, 3, 4], [3, 3, 4])),
                                  ("axis1", 1, ([2, 3, 4], [2, 1, 4], [2, 5, 4])),
                                  ("axis_last", -1, ([2, 3, 4], [2, 3, 1], [2, 3, 7]))):
        m.add(f"concat_{variant}", "Concat", 13,
              dict(zip(("a", "b", "c"), shapes)), axis=axis)
    m.add("unsqueeze_opset11", "Unsqueeze", 11, {"x": [2, 3, 4]}, axes=[0, 3])
    m.add("unsqueeze_opset13", "Unsqueeze", 13, {"x": [2, 3, 4]},
          constants={"axes": np.array([-1, 1], np.int64)})
    m.add("squeeze_opset11", "Squeeze", 11, {"x": [2, 1, 4, 1]}, axes=[1])
    m.add("squeeze_opset13", "Squeeze", 13, {"x": [2, 1, 4, 1]},
          constants={"axes": np.array([1, -1], np.int64)})
    m.add("squeeze_opset13_all", "Squeeze", 13, {"x": [1, 7, 1, 13]})


def normalisation_cases(m):
    m.add("softmax_opset11_axis1", "Softmax", 11, {"x": [2, 5, 7]}, reduction=35, axis=1)
    m.add("softmax_opset13_axis1", "Softmax", 13, {"x": [2, 5, 7]}, reduction=5, axis=1)
    m.add("softmax_opset13_last", "Softmax", 13, {"x": [3, 13, 33]}, reduction=33, axis=-1)
    for name, axis, norm_shape, bias in (("layernormalization_last", -1, [33], True),
                                         ("layernormalization_axis_m2", -2, [7, 33], True),
                                         ("layernormalization_nobias", -1, [33], False)):
        constants = {"scale": m.weights(name, "scale", "scale", norm_shape)}
        if bias:
            constants["bias"] = m.weights(name, "bias", "bias", norm_shape)
        m.add(name, "LayerNormalization", 17, {"x": [2, 7, 33]}, constants=constants,
              reduction=math.prod(norm_shape), axis=axis, epsilon=1e-5)
    x = [2, 3, 7, 13]
    m.add("reducemean_keepdims1", "ReduceMean", 13, {"x": x}, reduction=3, axes=[1],
          keepdims=1)
    m.add("reducemean_keepdims0", "ReduceMean", 13, {"x": x}, reduction=39, axes=[-1, 1],
          keepdims=0)
    m.add("reducemean_all", "ReduceMean", 13, {"x": x}, reduction=math.prod(x), keepdims=0)
    m.add("reducemean_opset18_keepdims1", "ReduceMean", 18, {"x": x}, reduction=91,
          constants={"axes": np.array([2, 3], np.int64)}, keepdims=1)
    m.add("reducemean_opset18_keepdims0", "ReduceMean", 18, {"x": x}, reduction=13,
          constants={"axes": np.array([-1], np.int64)}, keepdims=0)


def gather_slice_cases(m):
    m.add("gather_axis0", "Gather", 13, {"x": [13, 7]},
          constants={"indices": np.array([0, 3, 12, -1, 3], np.int64)}, axis=0)
    m.add("gather_axis1_2d", "Gather", 13, {"x": [3, 13, 5]},
          constants={"indices": np.array([[0, 2], [12, -1], [5, 5]], np.int64)}, axis=1)
    m.add("gather_scalar", "Gather", 13, {"x": [13, 7]},
          constants={"indices": np.array(4, np.int64)}, axis=0)
    m.add("gather_scalar_axis1", "Gather", 13, {"x": [3, 13, 5]},
          constants={"indices": np.array(-2, np.int64)}, axis=1)

    def slice_case(name, x, starts, ends, axes=None, steps=None):
        constants = {"starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64)}
        if axes is not None:
            constants["axes"] = np.array(axes, np.int64)
        if steps is not None:
            constants["steps"] = np.array(steps, np.int64)
        m.add(name, "Slice", 13, {"x": x}, constants=constants)

    slice_case("slice_steps", [13, 33], [1, 2], [11, 30], [0, 1], [1, 3])
    slice_case("slice_negative_step", [13, 33], [-1], [-INT64_MAX], [1], [-2])
    slice_case("slice_reverse_range", [7, 13], [10, 5], [2, 0], [1, 0], [-3, -1])
    slice_case("slice_to_end", [2, 3, 33], [2], [INT64_MAX], [-1], [1])
    slice_case("slice_no_axes", [7, 13], [1, -5], [5, 13])


def pattern_cases(m):
    """Few-node cases: what exporters write around constants and shapes."""
    seed = m.seed

    g = GraphBuilder(seed)
    c = helper.make_tensor("c_value", 1, [5], [0.5, -1.0, 2.0, 0.0, 3.25])
    g.node("Constant", [], outputs=["c"], value=c)
    g.node("Add", ["x", "c"], outputs=["y"])
    m.finish(Case("constant_add", "Constant", 13, [("x", X4)], 1), g)

    g = GraphBuilder(seed)
    g.node("Constant", [], outputs=["c"], value_float=-0.75)
    g.node("Mul", ["x", "c"], outputs=["y"])
    m.finish(Case("constant_value_float", "Constant", 13, [("x", X4)], 1), g)

    g = GraphBuilder(seed)
    shape = g.int64s("shape", [3, 1, 5])
    value = helper.make_tensor("value", 1, [1], [1.5])
    g.node("ConstantOfShape", [shape], outputs=["filled"], value=value)
    g.node("Add", ["x", "filled"], outputs=["y"])
    m.finish(Case("constantofshape_add", "ConstantOfShape", 13, [("x", X4)], 1), g)

    # x.reshape(x.shape[0], -1) as torch.onnx writes it
    g = GraphBuilder(seed)
    dims = g.node("Shape", ["x"], stem="dims")
    batch = g.node("Gather", [dims, g.const("zero", np.array(0, np.int64))], stem="batch",
                   axis=0)
    batch = g.node("Unsqueeze", [batch, g.int64s("axes", [0])], stem="batch_1d")
    target = g.node("Concat", [batch, g.int64s("minus_one", [-1])], stem="target", axis=0)
    g.node("Reshape", ["x", target], outputs=["y"])
    # (shape inference cannot follow the shape through Gather and Concat)
    m.finish(Case("shape_reshape_pattern", "Shape", 13, [("x", X4)], 1,
                  output_shape=[X4[0], math.prod(X4[1:])]), g)


def make(seed):
    """Every case, models built and checked."""
    m = CaseMaker(seed)
    for group in (conv_cases, batch_norm_cases, unary_cases, clip_cases, binary_cases,
                  matmul_cases, gemm_cases, pool_cases, shape_cases, normalisation_cases,
                  gather_slice_cases, pattern_cases):
        group(m)
    names = [c.name for c in m.cases]
    duplicates = {n for n in names if names.count(n) > 1}
    assert not duplicates, f"case names used twice: {duplicates}"
    return m.cases


def listing_entry(case, file):
    """The case's entry in cases.json."""
    def shape_of(value):
        return [d.dim_value for d in value.type.tensor_type.shape.dim]

    return {
        "name": case.name,
        "file": file,
        "op": case.op,
        "opset": case.opset,
        "inputs": [{"name": n, "shape": s} for n, s in case.inputs],
        "outputs": [{"name": o.name, "shape": shape_of(o)} for o in case.model.graph.output],
        "reduction": case.reduction,
        **({"input_ranges": case.ranges} if case.ranges else {}),
    }
