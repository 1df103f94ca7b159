"""ONNX Runtime's latency for one model, for `tessera model bench`.

Run by tessera as `python - MODEL THREADS RUNS WARMUP SHAPES_JSON` with this
file on stdin. Prints one JSON object: ort_latency_ms (median), ort_version;
or exits 3 with the reason when onnxruntime or numpy cannot be imported.
"""
import json
import sys
import time

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # reported by tessera as "ONNX Runtime not installed"
    print(f"cannot import onnxruntime/numpy: {e}", file=sys.stderr)
    sys.exit(3)

model, threads, runs, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
shapes = json.loads(sys.argv[5])
options = ort.SessionOptions()
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
feeds = {}
for i in session.get_inputs():
    shape = shapes.get(i.name) or i.shape
    if any(not isinstance(d, int) for d in shape):
        print(f"input {i.name} has a dynamic shape {i.shape}", file=sys.stderr)
        sys.exit(2)
    feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
for _ in range(warmup):
    session.run(None, feeds)
times = []
for _ in range(runs):
    start = time.perf_counter()
    session.run(None, feeds)
    times.append((time.perf_counter() - start) * 1e3)
times.sort()
print(json.dumps({"ort_latency_ms": times[len(times) // 2], "ort_version": ort.__version__}))
