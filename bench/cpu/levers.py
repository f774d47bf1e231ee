"""Is an Inductor config a lever for CPU inference at batch 1? One process: the model compiled
frozen with Inductor's defaults and once with each patch given, then 30 interleaved calls of each; median and IQR.

    python bench/cpu/levers.py resnet18 cpp_wrapper=True cpp.weight_prepack=False cpp.threads=1 [--size 224]

(results: bench/results/cpu-xeon-2c/cpu-levers*.json). Each NAME=VALUE is one patch, compared with the defaults.
"""
import argparse
import ast
import json
import statistics
import time

import torch
import torch._inductor.config as c
import torchvision


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("patches", nargs="*", help="NAME=VALUE (a Python literal), each compared with the defaults")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    c.freezing = True
    torch.manual_seed(0)
    m = getattr(torchvision.models, args.model)().eval()
    x = torch.randn(1, 3, args.size, args.size)
    arms = [("default", {})] + [(p, {p.split("=")[0]: ast.literal_eval(p.split("=", 1)[1])}) for p in args.patches]
    fns, ref = {}, None
    with torch.no_grad():
        ref = m(x)
        for label, patch in arms:
            torch._dynamo.reset()
            with c.patch(patch):
                f = torch.compile(m)
                t = time.perf_counter()
                y = f(x)
                fns[label] = (f, time.perf_counter() - t, float((y - ref).abs().max() / ref.abs().max()))
        times = {k: [] for k in fns}
        for _ in range(args.rounds):
            for k, (f, _, _) in fns.items():
                t = time.perf_counter()
                f(x)
                times[k].append((time.perf_counter() - t) * 1e3)
    for k, v in times.items():
        q = statistics.quantiles(v, n=4)
        print(json.dumps({"model": args.model, "input": f"1x3x{args.size}x{args.size}", "mode": k, "median_ms": round(statistics.median(v), 2),
                          "iqr_ms": round(q[2] - q[0], 2), "compile_s": round(fns[k][1], 1), "rel_error": round(fns[k][2], 6)}))


if __name__ == "__main__":
    main()
