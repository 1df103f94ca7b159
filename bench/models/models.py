#!/usr/bin/env python3
"""Test models for tessera's ONNX import and their ONNX Runtime references.

Subcommands (each `--help` lists its options):

  light NAME --out m.onnx     an onnx-package light_NAME model (resnet50, ...)
                              with seeded random weights
  bert --out m.onnx           one BERT-base encoder layer, as exporters write it
  mobilenet --out m.onnx      a small MobileNet-V2-like network
  ops --out-dir DIR [--reference]
                              one model per operator case, DIR/cases.json
                              (and each case's reference in DIR/<case>/)
  reference MODEL --inputs-dir DIR
                              random inputs, ORT's outputs (no graph
                              optimisation, 1 thread), DIR/manifest.json
  latency MODEL               ORT's median latency (all optimisations on)

Every output is written atomically and depends only on the arguments and
--seed. Generated models are never committed: write them under target/.
Run it through `bench/models/models`, which makes the virtual environment
when it is missing. Exit status: 0 done, 2 bad input (message on stderr),
1 anything else.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from model_files import BadInput, write_json, write_model


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {text}")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/models/models", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def seed(q):
        q.add_argument("--seed", type=non_negative, default=0,
                       help="random seed of weights and inputs (default 0)")

    q = sub.add_parser("light", help="a light_NAME model of the onnx package, random weights")
    q.add_argument("name", metavar="NAME", help="resnet50, squeezenet, ... (a bad NAME lists them)")
    q.add_argument("--out", required=True, type=Path, help="the model file to write")
    seed(q)

    q = sub.add_parser("bert", help="one BERT-base encoder layer")
    q.add_argument("--out", required=True, type=Path)
    q.add_argument("--seq", type=positive, default=128)
    q.add_argument("--hidden", type=positive, default=768)
    q.add_argument("--heads", type=positive, default=12)
    q.add_argument("--ffn", type=positive, default=3072)
    q.add_argument("--batch", type=positive, default=1)
    q.add_argument("--opset", type=positive, default=17)
    q.add_argument("--layernorm", choices=["pattern", "op"], default="pattern",
                   help="pattern (default): ReduceMean/Sub/Pow/.../Add as exporters write "
                   "it; op: LayerNormalization (opset >= 17)")
    seed(q)

    q = sub.add_parser("mobilenet", help="a small MobileNet-V2-like network")
    q.add_argument("--out", required=True, type=Path)
    q.add_argument("--size", type=positive, default=112, help="input height and width")
    q.add_argument("--channels", type=positive, default=32, help="channels after the stem")
    q.add_argument("--classes", type=positive, default=1000)
    seed(q)

    q = sub.add_parser("ops", help="one model per operator case, and cases.json")
    q.add_argument("--out-dir", required=True, type=Path)
    q.add_argument("--reference", action="store_true",
                   help="also run `reference` on every case, into DIR/<case>/ (one process: "
                   "much faster than a `reference` call per case)")
    seed(q)

    for name, text in (("reference", "random inputs and ORT's reference outputs"),
                       ("latency", "ORT's median end-to-end latency")):
        q = sub.add_parser(name, help=text)
        q.add_argument("model", type=Path, metavar="MODEL")
        q.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                       help="the shape of an input with dynamic dimensions (repeatable)")
        seed(q)
        if name == "reference":
            q.add_argument("--inputs-dir", required=True, type=Path,
                           help="where the inputs, outputs and manifest.json go")
        else:
            q.add_argument("--threads", type=positive, default=1,
                           help="ORT intra-op threads (default 1)")
            q.add_argument("--runs", type=positive, default=20,
                           help="timed runs, the median reported (default 20)")
            q.add_argument("--warmup", type=non_negative, default=5,
                           help="untimed runs first (default 5)")
            q.add_argument("--json", action="store_true",
                           help='print {"ort_latency_ms", "threads", "runs", "ort_version", ...}')
    return p.parse_args(argv)


def run(args):
    started = time.perf_counter()
    if args.command == "light":
        import light
        write_model(args.out, light.make(args.name, args.seed))
        done = f"wrote {args.out}"
    elif args.command == "bert":
        import bert
        model = bert.make(seq=args.seq, hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                          batch=args.batch, seed=args.seed, opset=args.opset,
                          layernorm=args.layernorm)
        write_model(args.out, model)
        done = f"wrote {args.out}"
    elif args.command == "mobilenet":
        import mobilenet
        write_model(args.out, mobilenet.make(size=args.size, channels=args.channels,
                                             classes=args.classes, seed=args.seed))
        done = f"wrote {args.out}"
    elif args.command == "ops":
        import op_cases
        import ort_runs
        listing = []
        for case in op_cases.make(args.seed):
            file = f"{case.name}.onnx"
            write_model(args.out_dir / file, case.model)
            entry = op_cases.listing_entry(case, file)
            if args.reference:
                ort_runs.reference(args.out_dir / file, args.out_dir / case.name, args.seed, {})
                entry["reference_dir"] = case.name
            listing.append(entry)
        write_json(args.out_dir / "cases.json", {"seed": args.seed, "cases": listing})
        done = f"wrote {len(listing)} cases and cases.json to {args.out_dir}"
    elif args.command == "reference":
        import ort_runs
        manifest = ort_runs.reference(args.model, args.inputs_dir, args.seed,
                                      ort_runs.parse_input_shapes(args.input_shape))
        done = (f"wrote {len(manifest['inputs'])} inputs, {len(manifest['outputs'])} outputs "
                f"and manifest.json to {args.inputs_dir}")
    elif args.command == "latency":
        import ort_runs
        result = ort_runs.latency(args.model, args.threads, args.runs, args.warmup, args.seed,
                                  ort_runs.parse_input_shapes(args.input_shape))
        if args.json:
            print(json.dumps(result))
        else:
            print(f"{result['ort_latency_ms']:.3f} ms (ORT {result['ort_version']}, "
                  f"{args.threads} thread(s), median of {args.runs})")
        return 0
    print(f"{done} ({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return 0


def main(argv):
    args = parse_args(argv)
    try:
        return run(args)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
