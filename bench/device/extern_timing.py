"""Does Inductor's site benchmark overcharge ATen GEMMs? One short device call settles it.

vit_b_16's sweep on the H200 stored, for its classifier GEMM (32x768 @ 768x1000, a few microseconds of work),
0.046 ms for ATen's ``bias_addmm`` and 0.011 ms for a Triton config; its large GEMMs were timed 0.03-0.05 ms
above what cuBLAS takes for them inside the compiled graph. A fixed cost on every ATen timing fits: Inductor
flushes L2 (a memset of L2's size, about 17 us on an H200) before each timed run, so a Python launch that takes
longer than that shows up as device time.

For each GEMM shape, bf16, 1-D bias, this times ``torch.addmm`` four ways in one process:
  site      Inductor's benchmarker as at a template site (``benchmarker.benchmark_gpu``)
  graph     Inductor's CUDA-graph benchmark, where this torch has one (no Python launch in the timing)
  loop      20 calls back to back, per call (launches overlap the device work, as in a compiled graph)
  cpu_us    the host time of one call (what the site timing may add)
and writes ``$OUT/extern-timing.json`` with provenance. CUDA only.

    python bench/device/extern_timing.py [--out extern-timing.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from tuner.backend.instrument.site_timing import pipelined_ms

# (name, M, K, N): vit_b_16 b32 (6304 = 32 x 197 tokens) and resnet50's classifier.
SHAPES = [
    ("vit qkv", 6304, 768, 2304),
    ("vit proj", 6304, 768, 768),
    ("vit mlp1", 6304, 768, 3072),
    ("vit mlp2", 6304, 3072, 768),
    ("vit head", 32, 768, 1000),
    ("resnet50 fc", 32, 2048, 1000),
]


def _cpu_us(fn: Any, calls: int = 200) -> float:
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def measure(m: int, k: int, n: int) -> dict[str, float | None]:
    import torch
    from torch._inductor.runtime.benchmarking import benchmarker

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

    def fn() -> None:
        torch.addmm(bias, a, b, out=out)

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    graph = getattr(benchmarker, "benchmark_gpu_with_cuda_graph", None)
    site = [benchmarker.benchmark_gpu(fn) for _ in range(5)]
    return {
        "site_ms": statistics.median(site),
        "graph_ms": statistics.median(graph(fn) for _ in range(5)) if graph else None,
        "loop_ms": pipelined_ms(fn, calls=20, samples=25),
        "cpu_us": _cpu_us(fn),
    }


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "extern-timing.json"))
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("error: bench/device/extern_timing.py needs a CUDA GPU")
    from tuner.commands.bench import provenance

    rows = []
    for name, m, k, n in SHAPES:
        r = {"shape": name, "m": m, "k": k, "n": n, **measure(m, k, n)}
        rows.append(r)
        print(f"{name:12} M={m:5} K={k:4} N={n:4}  site {r['site_ms']:.4f}  graph {r['graph_ms'] or float('nan'):.4f}"
              f"  loop {r['loop_ms']:.4f} ms  host {r['cpu_us']:.1f} us")
    import inspect

    from torch._inductor import config as ic
    from torch._inductor import ir
    from torch._inductor.runtime.benchmarking import benchmarker

    hooks = {  # the ways to time candidates without their Python launch, where this torch has them
        "config.autotune_cudagraph_benchmarking": hasattr(ic, "autotune_cudagraph_benchmarking"),
        "benchmarker.benchmark_gpu_with_cuda_graph": hasattr(benchmarker, "benchmark_gpu_with_cuda_graph"),
        "ChoiceCaller._benchmark_with_cudagraphs": "_benchmark_with_cudagraphs" in inspect.getsource(ir.ChoiceCaller.__init__),
    }
    print(hooks)
    with open(args.out, "w") as f:
        json.dump({**provenance("cuda"), "dtype": "bf16", "op": "addmm, 1-D bias", "hooks": hooks, "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
