"""How far apart do compiled instances of one config run? One process: the workload compiled N times with Inductor's
defaults, each of a fresh copy of the model, then timed interleaved (tuner's own timing, twice over); the medians of
each instance and their spread.

    python bench/cpu/instances.py "hf:llama,num_hidden_layers=2,hidden_size=256" --mode decode --batch 2 --seq-len 64

Any model ``tuner sweep --model`` takes. Prints one JSON document (results: bench/results/cpu-xeon-2c/instances-*.json).
"""

import argparse
import copy
import json

import torch
import torch._inductor.config as c

from tuner.backend.instrument.timing import interleaved
from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs
from tuner.workloads.steps import run_step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--mode", default="infer", choices=("infer", "decode"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--instances", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    spec = WorkloadSpec(
        model=args.model, mode=args.mode, batch=args.batch, image_size=args.image_size, seq_len=args.seq_len
    )
    model, xs = build_model(spec).eval(), make_inputs(spec)
    steps = {}
    for i in range(args.instances):
        torch._dynamo.reset()
        with c.patch(freezing=spec.uses_freezing):
            fn = torch.compile(copy.deepcopy(model))
            run_step(spec.mode, fn, xs[0])
        steps[f"instance {i}"] = (lambda fn: lambda j: run_step(spec.mode, fn, xs[j % len(xs)]))(fn)
    timings = [interleaved(steps, rounds=args.rounds, min_sample_ms=20.0) for _ in range(2)]
    medians = [[round(t[k].median_ms, 4) for k in steps] for t in timings]
    print(
        json.dumps(
            {
                "workload": spec.name,
                "instances": args.instances,
                "rounds": args.rounds,
                "medians_ms": medians,
                "iqr_ms": [[round(t[k].spread_ms, 4) for k in steps] for t in timings],
                "spread_pct": [round(100 * (max(m) - min(m)) / min(m), 1) for m in medians],
            }
        )
    )


if __name__ == "__main__":
    main()
