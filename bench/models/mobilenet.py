"""`mobilenet`: a small MobileNet-V2-like network (opset 13).

  stem     Conv 3x3 stride 2 (3 -> C) + BatchNormalization + ReLU6
  block 1  expand 1x1 (C -> 4C) + BN + ReLU6, depthwise 3x3 + BN + ReLU6,
           project 1x1 (4C -> C) + BN, residual Add
  block 2  the same, C -> 2C with a stride-2 depthwise conv, no residual
  block 3  the same, 2C -> 2C (expand to 8C), residual Add
  head     GlobalAveragePool, Flatten, Gemm (transB=1) to the classes

ReLU6 is Clip with min 0 and max 6 as initializer inputs (opset >= 11).
Convolutions have no bias (the BN after them holds it), as in
torchvision's MobileNetV2 before BN folding. Weights are He-initialised,
BN scale and variance U(0.5, 1.5), BN bias and mean N(0, 0.1).
"""

from graph_builder import GraphBuilder
from model_files import BadInput

OPSET = 13
EXPANSION = 4


class Net:
    def __init__(self, seed):
        self.g = GraphBuilder(seed)
        self.relu6_bounds = [self.g.scalar("relu6_min", 0.0), self.g.scalar("relu6_max", 6.0)]

    def conv_bn(self, x, c_in, c_out, stem, kernel=1, stride=1, group=1, relu6=True):
        """Conv (no bias, pads keep the size at stride 1) + BN (+ ReLU6)."""
        g = self.g
        fan_in = c_in // group * kernel * kernel
        weight = g.he_weight(f"{stem}.weight", [c_out, c_in // group, kernel, kernel], fan_in)
        pad = kernel // 2
        y = g.node("Conv", [x, weight], stem=f"{stem}.conv", kernel_shape=[kernel, kernel],
                   strides=[stride, stride], pads=[pad] * 4, group=group)
        bn = [g.uniform(f"{stem}.bn.scale", [c_out], 0.5, 1.5),
              g.normal(f"{stem}.bn.bias", [c_out], 0.1),
              g.normal(f"{stem}.bn.mean", [c_out], 0.1),
              g.uniform(f"{stem}.bn.var", [c_out], 0.5, 1.5)]
        y = g.node("BatchNormalization", [y, *bn], stem=f"{stem}.bn", epsilon=1e-5)
        if relu6:
            y = g.node("Clip", [y, *self.relu6_bounds], stem=f"{stem}.relu6")
        return y

    def inverted_residual(self, x, c_in, c_out, stride, stem):
        wide = c_in * EXPANSION
        y = self.conv_bn(x, c_in, wide, f"{stem}.expand")
        y = self.conv_bn(y, wide, wide, f"{stem}.depthwise", kernel=3, stride=stride, group=wide)
        y = self.conv_bn(y, wide, c_out, f"{stem}.project", relu6=False)
        if stride == 1 and c_in == c_out:
            y = self.g.node("Add", [x, y], stem=f"{stem}.residual")
        return y


def make(size=112, channels=32, classes=1000, seed=0):
    """The checked model: input `input` [1, 3, size, size], output `logits`
    [1, classes]."""
    if size < 4 or channels < 1 or classes < 1:
        raise BadInput("--size must be at least 4, --channels and --classes positive")
    net = Net(seed)
    g = net.g
    c = channels
    y = net.conv_bn("input", 3, c, "stem", kernel=3, stride=2)
    y = net.inverted_residual(y, c, c, 1, "block1")
    y = net.inverted_residual(y, c, 2 * c, 2, "block2")
    y = net.inverted_residual(y, 2 * c, 2 * c, 1, "block3")
    y = g.node("GlobalAveragePool", [y], stem="pool")
    y = g.node("Flatten", [y], stem="flatten", axis=1)
    weight = g.linear_weight("classifier.weight", [classes, 2 * c], 2 * c)
    bias = g.normal("classifier.bias", [classes], 0.1)
    g.node("Gemm", [y, weight, bias], outputs=["logits"], transB=1)
    return g.model("mobilenet_v2_like", [("input", [1, 3, size, size])],
                   [("logits", [1, classes])], OPSET)
