"""`bert`: one BERT-base encoder layer, node for node as exporters (PyTorch
/ Hugging Face) write it.

  hidden_states [b, s, h]
  Q, K, V = MatMul(x, W[h, h]) + bias
            Reshape [b, s, heads, d], Transpose -> [b, heads, s, d] (K: [b, heads, d, s])
  scores  = MatMul(Q, K) / sqrt(d) + mask[b, 1, 1, s]   (0, or -10000 at the last positions)
  context = MatMul(Softmax(scores, axis=-1), V), Transpose back, Reshape [b, s, h]
  x1      = LayerNorm(x + MatMul(context, Wo) + bo)
  out     = LayerNorm(x1 + MatMul(GELU(MatMul(x1, W1) + b1), W2) + b2)

LayerNorm is the ReduceMean/Sub/Pow/ReduceMean/Add(eps)/Sqrt/Div/Mul/Add
pattern, or with layernorm="op" the LayerNormalization op (opset >= 17).
GELU is the exact one as exported: x * 0.5 * (1 + Erf(x / sqrt(2))).
Reshape shapes are int64 initializers. Weights are N(0, 1/fan_in) (the
activations stay O(1)), biases N(0, 0.1), LayerNorm scales U(0.5, 1.5).
"""

import math

import numpy as np

from graph_builder import GraphBuilder
from model_files import BadInput

EPSILON = 1e-12  # Hugging Face BERT's layer_norm_eps
MASKED = -10000.0


def attention_mask(batch, seq):
    """[b, 1, 1, s]: 0 where attended, -10000 at the last positions (batch
    item i masks (i + 1) * max(1, s / 8) of them, never all)."""
    mask = np.zeros((batch, 1, 1, seq), dtype=np.float32)
    for i in range(batch):
        masked = min(seq - 1, (i + 1) * max(1, seq // 8))
        if masked:
            mask[i, ..., seq - masked:] = MASKED
    return mask


def reduce_mean_last(g, x, opset, stem):
    """ReduceMean over the last axis, keepdims: axes as an attribute before
    opset 18, as an input from 18."""
    if opset >= 18:
        return g.node("ReduceMean", [x, g.int64s("axes_last", [-1])], stem=stem, keepdims=1)
    return g.node("ReduceMean", [x], stem=stem, axes=[-1], keepdims=1)


def layer_norm(g, x, hidden, opset, how, stem):
    scale = g.uniform(f"{stem}.weight", [hidden], 0.5, 1.5)
    bias = g.normal(f"{stem}.bias", [hidden], 0.1)
    if how == "op":
        return g.node("LayerNormalization", [x, scale, bias], stem=stem, axis=-1,
                      epsilon=EPSILON)
    mean = reduce_mean_last(g, x, opset, f"{stem}.mean")
    centred = g.node("Sub", [x, mean], stem=f"{stem}.centred")
    square = g.node("Pow", [centred, g.scalar("two", 2.0)], stem=f"{stem}.square")
    variance = reduce_mean_last(g, square, opset, f"{stem}.variance")
    shifted = g.node("Add", [variance, g.scalar("epsilon", EPSILON)], stem=f"{stem}.var_eps")
    std = g.node("Sqrt", [shifted], stem=f"{stem}.std")
    normed = g.node("Div", [centred, std], stem=f"{stem}.normed")
    scaled = g.node("Mul", [normed, scale], stem=f"{stem}.scaled")
    return g.node("Add", [scaled, bias], stem=stem)


def dense(g, x, fan_in, fan_out, stem):
    """MatMul by a [fan_in, fan_out] weight, then Add of the bias."""
    weight = g.linear_weight(f"{stem}.weight", [fan_in, fan_out], fan_in)
    product = g.node("MatMul", [x, weight], stem=f"{stem}.matmul")
    return g.node("Add", [product, g.normal(f"{stem}.bias", [fan_out], 0.1)], stem=stem)


def gelu(g, x):
    """x * 0.5 * (1 + Erf(x / sqrt(2))), in the exporter's node order."""
    scaled = g.node("Div", [x, g.scalar("sqrt2", math.sqrt(2.0))], stem="gelu.div")
    erf = g.node("Erf", [scaled], stem="gelu.erf")
    shifted = g.node("Add", [erf, g.scalar("one", 1.0)], stem="gelu.add")
    product = g.node("Mul", [x, shifted], stem="gelu.mul")
    return g.node("Mul", [product, g.scalar("half", 0.5)], stem="gelu")


def make(seq=128, hidden=768, heads=12, ffn=3072, batch=1, seed=0, opset=17,
         layernorm="pattern"):
    """The checked encoder-layer model."""
    if min(seq, hidden, heads, ffn, batch) < 1:
        raise BadInput("--seq, --hidden, --heads, --ffn and --batch must be positive")
    if hidden % heads:
        raise BadInput(f"--hidden {hidden} is not a multiple of --heads {heads}")
    if opset < 13:
        raise BadInput(f"--opset {opset}: the layer needs opset >= 13 (Softmax over the "
                       "last axis alone)")
    if layernorm == "op" and opset < 17:
        raise BadInput(f"--layernorm op needs --opset >= 17 (LayerNormalization), not {opset}")
    head_dim = hidden // heads
    g = GraphBuilder(seed)
    x = "hidden_states"

    def heads_view(tensor, perm, stem):
        split = g.node("Reshape", [tensor, g.int64s("shape_heads", [batch, seq, heads, head_dim])],
                       stem=f"{stem}.split")
        return g.node("Transpose", [split], stem=f"{stem}.heads", perm=perm)

    q = heads_view(dense(g, x, hidden, hidden, "attention.query"), [0, 2, 1, 3], "query")
    k = heads_view(dense(g, x, hidden, hidden, "attention.key"), [0, 2, 3, 1], "key")
    v = heads_view(dense(g, x, hidden, hidden, "attention.value"), [0, 2, 1, 3], "value")

    scores = g.node("MatMul", [q, k], stem="scores")
    scores = g.node("Div", [scores, g.scalar("sqrt_head_dim", math.sqrt(head_dim))],
                    stem="scores.scaled")
    scores = g.node("Add", [scores, g.const("attention_mask", attention_mask(batch, seq))],
                    stem="scores.masked")
    probs = g.node("Softmax", [scores], stem="probs", axis=-1)
    context = g.node("MatMul", [probs, v], stem="context")
    context = g.node("Transpose", [context], stem="context.merged", perm=[0, 2, 1, 3])
    context = g.node("Reshape", [context, g.int64s("shape_hidden", [batch, seq, hidden])],
                     stem="context.flat")

    attended = dense(g, context, hidden, hidden, "attention.output")
    attended = g.node("Add", [attended, x], stem="attention.residual")
    x1 = layer_norm(g, attended, hidden, opset, layernorm, "attention.layernorm")

    inner = gelu(g, dense(g, x1, hidden, ffn, "intermediate"))
    out = dense(g, inner, ffn, hidden, "output")
    out = g.node("Add", [out, x1], stem="output.residual")
    out = layer_norm(g, out, hidden, opset, layernorm, "output.layernorm")

    return g.model("bert_encoder_layer", [(x, [batch, seq, hidden])], [(out, [batch, seq, hidden])],
                   opset)
