#!/usr/bin/env python3
"""Where a model is slower than ONNX Runtime, kernel by kernel.

Joins the per-node times of `tessera model bench M.onnx --json` (one
entry per fused kernel, named after the ONNX node it is anchored on, e.g.
`n0+Relu` or `MatMul_ffn+Add`) with ONNX Runtime's own profiler on the
same model (all graph optimisations, the same thread count). ORT fuses and
renames nodes its own way (`r2_nchwc` is the node whose output is `r2`), so
each ORT kernel is mapped back to an ONNX node by name or by output name,
and each ONNX node is charged to the tessera kernel anchored at it or,
failing that, at the nearest anchor before it in the file's node order (a
fused epilogue follows its anchor). ORT kernels that match no ONNX node
(its own fusions such as `/MatMulAddFusion`) are listed apart.

    tessera model bench m.onnx --from DIR --threads 1 --json > t.json
    bench/models/models ...  # or any .onnx
    target/ort-venv/bin/python bench/ort/nodes.py m.onnx t.json --threads 1

Prints one row per kind of tessera kernel (summed over its nodes), the
largest gap first: tessera ms, ORT ms, the difference, the node count.
"""

import argparse
import bisect
import collections
import json
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort


def ort_node_times(model_path, threads, runs):
    """Median kernel time (ms) of every node ORT runs, by ORT node name."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as scratch:
        options.profile_file_prefix = os.path.join(scratch, "ort")
        session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in session.get_inputs():
            shape = [d if isinstance(d, int) else 1 for d in i.shape]
            if "int" in i.type:
                feeds[i.name] = np.zeros(shape, dtype=np.int64)
            else:
                feeds[i.name] = np.random.default_rng(0).random(shape, dtype=np.float32)
        for _ in range(runs):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    times = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            times[e["name"][: -len("_kernel_time")]].append(e["dur"] / 1000.0)
    return {name: float(np.median(v)) for name, v in times.items()}


def onnx_names(nodes):
    """Each ONNX node's index by the name tessera gives it: its own, or,
    when it has none, `<op_type>_<first output>`."""
    return {(n.name or f"{n.op_type}_{n.output[0]}"): i for i, n in enumerate(nodes)}


def ort_name_resolver(nodes):
    """A function giving the index of the ONNX node an ORT node name stands
    for, or None: by name, by output name, or `<op_type>_<index>` (ORT's
    name for an unnamed node). The lookup tables are built once."""
    by_name = {n.name: i for i, n in enumerate(nodes) if n.name}
    by_output = {o: i for i, n in enumerate(nodes) for o in n.output}

    def resolve(ort_name):
        for candidate in (ort_name, ort_name.replace("_nchwc", "")):
            for table in (by_name, by_output):
                if candidate in table:
                    return table[candidate]
        op, _, index = ort_name.rpartition("_")
        if index.isdigit() and int(index) < len(nodes) and nodes[int(index)].op_type == op:
            return int(index)
        return None

    return resolve


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("tessera_json", help="`tessera model bench MODEL --json` output")
    parser.add_argument("--threads", type=int, default=None,
                        help="ORT intra-op threads (default: the JSON's)")
    parser.add_argument("--runs", type=int, default=30, help="ORT runs profiled")
    args = parser.parse_args()

    with open(args.tessera_json) as f:
        report = json.load(f)
    threads = args.threads or report.get("threads") or 1
    nodes = list(onnx.load(args.model, load_external_data=False).graph.node)
    names = onnx_names(nodes)

    kinds = {}
    anchors = {}
    tessera_ms = collections.defaultdict(float)
    counts = collections.Counter()
    for node in report["nodes"]:
        anchor = names.get(node["name"].split("+")[0])
        kind = node["kernel"]
        tessera_ms[kind] += node["time_ms"] or 0.0
        counts[kind] += 1
        if anchor is not None:
            anchors[anchor] = kind
    if not anchors:
        sys.exit(f"error: no node of {args.tessera_json} is named after a node of {args.model}; "
                 "give the JSON of `tessera model bench` on this model")
    order = sorted(anchors)

    ort_ms = collections.defaultdict(float)
    unmapped = {}
    onnx_index = ort_name_resolver(nodes)
    for name, ms in ort_node_times(args.model, threads, args.runs).items():
        i = onnx_index(name)
        if i is None:
            unmapped[name] = ms
            continue
        k = bisect.bisect_right(order, i) - 1
        kind = anchors[order[k]] if k >= 0 else "(before the first tessera kernel)"
        ort_ms[kind] += ms

    rows = sorted(set(tessera_ms) | set(ort_ms), key=lambda k: ort_ms[k] - tessera_ms[k])
    print(f"{args.model}, {threads} thread(s): tessera {report.get('latency_ms', 0):.3f} ms end to end"
          f" (node sum {sum(tessera_ms.values()):.3f}); ORT node sum"
          f" {sum(ort_ms.values()) + sum(unmapped.values()):.3f} ms")
    print(f"{'tessera ms':>10} {'ORT ms':>8} {'gap ms':>8} {'nodes':>5}  kernel")
    for kind in rows:
        gap = tessera_ms[kind] - ort_ms[kind]
        print(f"{tessera_ms[kind]:10.3f} {ort_ms[kind]:8.3f} {gap:+8.3f} {counts[kind]:5d}  {kind}")
    if unmapped:
        print(f"ORT kernels with no ONNX node (its own fusions, {sum(unmapped.values()):.3f} ms):")
        for name, ms in sorted(unmapped.items(), key=lambda x: -x[1]):
            print(f"{'':10} {ms:8.3f}  {name}")


if __name__ == "__main__":
    main()
