"""A small helper to write ONNX graphs by hand the way exporters write them:
nodes with generated output names, constants and weights as initializers,
seeded random weights."""

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from model_files import finish_model, rng_for


class GraphBuilder:
    """Collects nodes and initializers of one graph.

    `seed` makes the weights: each weight's values depend on the seed and
    the weight's name only.
    """

    def __init__(self, seed):
        self.seed = seed
        self.nodes = []
        self.initializers = []
        self._names = set()
        self._count = {}

    def fresh(self, stem):
        """A tensor name not used yet: stem, stem_1, stem_2, ..."""
        n = self._count.get(stem, 0)
        self._count[stem] = n + 1
        name = stem if n == 0 else f"{stem}_{n}"
        while name in self._names:
            n += 1
            self._count[stem] = n + 1
            name = f"{stem}_{n}"
        self._names.add(name)
        return name

    # ------------------------------------------------------------ constants

    def const(self, stem, array):
        """An initializer holding `array` as given (its dtype kept)."""
        name = self.fresh(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def int64s(self, stem, values):
        """A 1-D int64 initializer: Reshape shapes, axes, Slice bounds."""
        return self.const(stem, np.asarray(values, dtype=np.int64))

    def scalar(self, stem, value):
        """A 0-D float32 initializer (Div by sqrt(d), Pow 2, Clip bounds)."""
        return self.const(stem, np.asarray(value, dtype=np.float32))

    def normal(self, stem, shape, std, mean=0.0):
        name = self.fresh(stem)
        values = rng_for(self.seed, name).normal(mean, std, size=shape).astype(np.float32)
        self.initializers.append(numpy_helper.from_array(values, name))
        return name

    def uniform(self, stem, shape, low, high):
        name = self.fresh(stem)
        values = rng_for(self.seed, name).uniform(low, high, size=shape).astype(np.float32)
        self.initializers.append(numpy_helper.from_array(values, name))
        return name

    def he_weight(self, stem, shape, fan_in):
        """A weight followed by a ReLU-like activation: N(0, 2 / fan_in)."""
        return self.normal(stem, shape, math.sqrt(2.0 / fan_in))

    def linear_weight(self, stem, shape, fan_in):
        """A weight with no rectifier after it: N(0, 1 / fan_in)."""
        return self.normal(stem, shape, 1.0 / math.sqrt(fan_in))

    # ---------------------------------------------------------------- nodes

    def node(self, op_type, inputs, outputs=1, stem=None, **attributes):
        """Appends a node; `outputs` is a count (names generated from `stem`,
        default the op type in lower case) or a list of names. Returns the
        output name, or the list of names when there are several."""
        if isinstance(outputs, int):
            stem = stem or op_type.lower()
            outputs = [self.fresh(stem) for _ in range(outputs)]
        else:
            self._names.update(outputs)
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), **attributes))
        return outputs[0] if len(outputs) == 1 else outputs

    # ---------------------------------------------------------------- model

    def model(self, name, inputs, outputs, opset, metadata=None, full_check=True):
        """The finished, checked model. `inputs` and `outputs` are
        (name, shape) pairs of float32 tensors; a shape of None leaves the
        output's shape to shape inference."""
        def value_info(entry):
            tensor, shape = entry
            return helper.make_tensor_value_info(tensor, TensorProto.FLOAT, shape)

        graph = helper.make_graph(self.nodes, name, [value_info(i) for i in inputs],
                                  [value_info(o) for o in outputs],
                                  initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="tessera bench/models")
        for key, value in (metadata or {}).items():
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value
        if any(shape is None for _, shape in outputs):
            model = fill_output_shapes(model)
        return finish_model(model, full_check=full_check)


def fill_output_shapes(model):
    """Graph outputs declared without a shape get the inferred one."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    by_name = {o.name: o for o in inferred.graph.output}
    for output in model.graph.output:
        if not output.type.tensor_type.HasField("shape"):
            output.type.CopyFrom(by_name[output.name].type)
    return model
