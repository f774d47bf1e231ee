"""How much of a step under Inductor's CUDA graphs is the launch path, not the kernels?

Inductor's CUDA graphs (``mode="reduce-overhead"``) replay through CUDA graph trees: per call, guard checks, input
copies into static buffers, liveness checks of the previous outputs and fresh output tensors. Here one frozen model
is run four ways in one process and timed as ``tuner bench`` times modes
(``tuner.backend.instrument.timing.interleaved``: wall time of ~25-ms samples, inputs rotated): freezing +
reduce-overhead (trees); the same with
``triton.cudagraph_trees=False`` (Inductor's older one-graph wrapper); Inductor's default compile captured by hand as
one ``torch.cuda.CUDAGraph`` (input copied in, the graph replayed: the least a launch can do); and that graph's
replays alone. Each call's host time (no sync) is reported beside it, and the outputs are checked against eager.

    python bench/device/graph_launch.py --models "resnet50;vit_b_32" --batch 32 --out $OUT/graph-launch.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from tuner.backend.instrument.timing import interleaved
from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

from per_model import captured, first, frozen_rows, parser, write  # bench/device/per_model.py, beside this script


def by_hand(fn: Any, xs: list[Any]) -> tuple[Any, Any]:
    """``fn`` captured as one CUDA graph over a static input: (call(i) copying input i in, replay-only call)."""
    static = xs[0].clone()
    g, out = captured(fn, static)

    def call(i: int) -> Any:
        static.copy_(xs[i % len(xs)])
        g.replay()
        return out

    return call, lambda i: g.replay()


def host_us(fn: Any, n: int = 50) -> float:
    torch.cuda.synchronize()
    ts = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        ts.append(time.perf_counter() - t)
        torch.cuda.synchronize()
    return statistics.median(ts) * 1e6


def one_model(model: str, args: argparse.Namespace) -> dict[str, Any]:
    spec = WorkloadSpec(model, device="cuda", dtype=args.dtype, batch=args.batch, channels_last=True)
    m, xs = build_model(spec).eval(), make_inputs(spec, 3)
    with torch.no_grad():
        ref = first(m(xs[0])).float()
        trees = torch.compile(m, mode="reduce-overhead")
        one = torch.compile(m, options={"triton.cudagraphs": True, "triton.cudagraph_trees": False})
        call, replay = by_hand(torch.compile(m), xs)
        fns = {
            "trees": lambda i: trees(xs[i % 3]),
            "no-trees": lambda i: one(xs[i % 3]),
            "by-hand": call,
            "replay-only": replay,
        }
        for f in fns.values():  # compile and warm before timing
            for i in range(3):
                f(i)
        torch.cuda.synchronize()
        errs = {
            k: (first(f(0)).float() - ref).abs().max().item() / ref.abs().max().item()
            for k, f in fns.items()
            if k != "replay-only"
        }
        times = interleaved(fns, rounds=args.rounds, min_sample_ms=25.0, sync=torch.cuda.synchronize)
        hosts = {k: host_us(f) for k, f in fns.items()}
    row = {
        "model": model,
        **{
            k: {"median_ms": t.median_ms, "iqr_ms": t.spread_ms, "host_us": hosts[k], "max_rel_err": errs.get(k)}
            for k, t in times.items()
        },
    }
    print(model, {k: (round(t.median_ms, 4), round(hosts[k])) for k, t in times.items()}, errs, flush=True)
    return row


def main() -> None:
    p = parser(__doc__)
    args = p.parse_args()
    write(args, "graph_launch.py", frozen_rows(args, one_model))


if __name__ == "__main__":
    main()
