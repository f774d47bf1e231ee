"""Is an Inductor config a lever for a CPU workload? One process: the workload compiled with Inductor's defaults
(frozen for inference) and once with each patch given, then interleaved calls of each; median and IQR.

    python bench/cpu/levers.py resnet18 cpp_wrapper=True cpp.weight_prepack=False cpp.threads=1 [--image-size 224]
    python bench/cpu/levers.py "hf:qwen2,num_hidden_layers=4,hidden_size=512" cpp.enable_concat_linear=True --seq-len 16
    python bench/cpu/levers.py "hf:qwen2,..." cpp_wrapper=True --mode decode --batch 2 --seq-len 64

Any model ``tuner sweep --model`` takes, built and fed as tuner builds it (``tuner.workloads``). Each NAME=VALUE is one
patch (a Python literal), compared with the defaults; one JSON line per arm (results:
bench/results/cpu-xeon-2c/cpu-levers*.json).
"""

import argparse
import ast
import copy
import json
import statistics
import time

import torch
import torch._inductor.config as c

from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs
from tuner.workloads.steps import run_step


def _max_error(ref, y) -> float:
    ref, y = (getattr(t, "logits", t) for t in (ref, y))
    return float((y - ref).abs().max() / ref.abs().max())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("patches", nargs="*", help="NAME=VALUE (a Python literal), each compared with the defaults")
    ap.add_argument("--mode", default="infer", choices=("infer", "decode"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--image-size", "--size", type=int, default=224)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=1, help="calls a sample (more for a step of well under a millisecond)")
    args = ap.parse_args()
    spec = WorkloadSpec(
        model=args.model, mode=args.mode, batch=args.batch, image_size=args.image_size, seq_len=args.seq_len
    )
    model, xs = build_model(spec).eval(), make_inputs(spec)
    arms = [("default", {})] + [(p, {p.split("=")[0]: ast.literal_eval(p.split("=", 1)[1])}) for p in args.patches]
    ref = run_step(spec.mode, model, xs[0])
    fns = {}
    for label, patch in arms:
        torch._dynamo.reset()
        with c.patch({"freezing": spec.uses_freezing, **patch}):
            f = torch.compile(copy.deepcopy(model))
            t = time.perf_counter()
            y = run_step(spec.mode, f, xs[0])
            fns[label] = (f, time.perf_counter() - t, _max_error(ref, y))
    times = {k: [] for k in fns}
    for r in range(args.rounds):
        for k, (f, _, _) in fns.items():
            t = time.perf_counter()
            for i in range(args.calls):
                run_step(spec.mode, f, xs[(r + i) % len(xs)])
            times[k].append((time.perf_counter() - t) / args.calls * 1e3)
    for k, v in times.items():
        q = statistics.quantiles(v, n=4)
        print(
            json.dumps(
                {
                    "model": args.model,
                    "workload": spec.name,
                    "mode": k,
                    "median_ms": round(statistics.median(v), 4),
                    "iqr_ms": round(q[2] - q[0], 4),
                    "compile_s": round(fns[k][1], 1),
                    "rel_error": round(fns[k][2], 6),
                }
            )
        )


if __name__ == "__main__":
    main()
