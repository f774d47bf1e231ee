"""Does a split-K GEMM beat cuBLAS at skinny sites? One short device call, no compile of a model.

For each GEMM shape (bf16, the layouts a compiled ``nn.Linear`` hands its sites: the weight transposed, stride
(1, K)), this times cuBLAS (``torch.addmm`` with a 1-D bias, as Inductor's ``bias_addmm`` calls it, or ``torch.mm``)
and tuner's split-K kernel (``tuner.backend.splitk_mm``) over a grid of configs, each as a CUDA graph of calls over
copies of its inputs past the L2 (``tuner.backend.instrument.site_timing``: what a workload under CUDA graphs pays).
A config's output is checked against a float32 reference over several calls after its graph's replays (each call must
leave its tile counts zero for the next). A first pass times every block size and split at 4 warps and 3 stages; a
second, the best few with other warps and stages; then the configs a site is offered
(``tuner.search_spaces.splitk.menu``). Writes ``$OUT/splitk-sites.json`` with provenance. CUDA only.

    python bench/device/splitk_sites.py [--shape NAME=M,K,N[,nobias]] ... [--out splitk-sites.json]
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import sites_alone

# gpt2's decode step (8 sequences): q/k/v, the attention's output, the MLP's two GEMMs, the vocabulary projection;
# a Qwen2-style 8-layer model's decode GEMMs at hidden 2048 (GQA: q/k/v merged 2048 -> 2560, MLP 2048 -> 5632).
SHAPES = [
    "gpt2 qkv=8,768,2304",
    "gpt2 proj=8,768,768",
    "gpt2 fc=8,768,3072",
    "gpt2 out=8,3072,768",
    "gpt2 vocab=8,768,50257,nobias",
    "qwen qkv=8,2048,2560",
    "qwen up=8,2048,5632",
    "qwen down=8,5632,2048",
]
FIRST = {"BLOCK_N": (16, 32, 64, 128), "BLOCK_K": (32, 64, 128, 256), "SPLIT_K": (1, 2, 4, 8, 16, 32)}
SECOND = {"num_warps": (2, 4, 8), "num_stages": (2, 3, 4, 5)}
TOLERANCE = 2e-2  # bf16 output against a float32 reference, relative to the reference's largest value


def parse(text: str) -> tuple[str, tuple[int, int, int], bool]:
    name, _, sizes = text.partition("=")
    parts = sizes.split(",")
    m, k, n = (int(x) for x in parts[:3])
    return name, (m, k, n), parts[-1] != "nobias"


def _inputs(m: int, k: int, n: int, bias: bool) -> tuple[Any, ...]:
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) / k**0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g) if bias else None
    return a, w.t(), (b.expand(m, n) if bias else None)


def _graph_us(make: Any, args: tuple[Any, ...], out: Any) -> float:
    from torch._inductor.runtime.benchmarking import benchmarker

    from tuner.backend.instrument.site_timing import _graph_of, rotated

    sets = rotated(args)
    graph = _graph_of([functools.partial(make, each, out) for each in sets])
    return float(benchmarker.benchmark_gpu(graph.replay)) / len(sets) * 1e3


def _error(fn: Any, args: tuple[Any, ...], out: Any, ref: Any, calls: int = 5) -> float:
    """The worst of ``calls`` calls (a race between a tile's programs shows in some calls only)."""
    worst = 0.0
    for _ in range(calls):
        out.zero_()
        fn(*args, out=out)
        worst = max(worst, float((out.float() - ref).abs().max() / ref.abs().max()))
    return worst


def _cublas(args: tuple[Any, ...], out: Any) -> Any:
    """cuBLAS as Inductor calls it at the site: ``bias_addmm`` hands it the bias's one row (cuBLASLt adds it in its
    epilogue); with the bias expanded over the rows, cuBLAS adds it apart (its first runs here took 7.5 us, not 5.3)."""
    import torch

    a, b, bias = args
    return (
        functools.partial(torch.addmm, bias[0], a, b, out=out)
        if bias is not None
        else functools.partial(torch.mm, a, b, out=out)
    )


def _splitk(config: dict[str, int], args: tuple[Any, ...], out: Any) -> Any:
    from tuner.backend.splitk_mm import launch

    a, b, bias = args
    return functools.partial(launch, a, b, bias, out, **config)


def _valid(k: int, c: dict[str, int]) -> bool:
    return c["SPLIT_K"] * c["BLOCK_K"] <= max(k, c["BLOCK_K"])


def time_shape(m: int, k: int, n: int, bias: bool) -> dict[str, Any]:
    import torch

    from tuner.search_spaces.splitk import block_m, menu

    args = _inputs(m, k, n, bias)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ref = args[0].float() @ args[1].float() + (args[2].float() if bias else 0)
    row: dict[str, Any] = {"cublas_us": _graph_us(lambda s, o: _cublas(s, o), args, out), "configs": []}

    def measure(c: dict[str, int]) -> None:
        try:
            us = _graph_us(lambda s, o: _splitk(c, s, o), args, out)
            err = _error(lambda *s, out: _splitk(c, s, out)(), args, out, ref)
            row["configs"].append({**c, "us": us, "error": err})
        except Exception as e:  # noqa: BLE001 - a config that fails to compile or run is reported, not fatal
            row["configs"].append({**c, "error_text": f"{type(e).__name__}: {e}"[:200]})

    def found(c: dict[str, int]) -> dict[str, Any] | None:
        return next((d for d in row["configs"] if all(d.get(k_) == v for k_, v in c.items())), None)

    base = {"BLOCK_M": block_m(m), "num_warps": 4, "num_stages": 3}
    for bn, bk, s in itertools.product(*FIRST.values()):
        c = {**base, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": s}
        if _valid(k, c):
            measure(c)
    ok = sorted((c for c in row["configs"] if "us" in c and c["error"] < TOLERANCE), key=lambda c: c["us"])
    for top in ok[:3]:
        for w, st in itertools.product(*SECOND.values()):
            c = {
                **{k_: top[k_] for k_ in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K")},
                "num_warps": w,
                "num_stages": st,
            }
            if (w, st) != (top["num_warps"], top["num_stages"]):
                measure(c)
    offered = menu(m, n, k, torch.cuda.get_device_properties(0).multi_processor_count)
    for c in offered:
        if found(c) is None:
            measure(c)
    ok = sorted((c for c in row["configs"] if "us" in c and c["error"] < TOLERANCE), key=lambda c: c["us"])
    row["best"] = ok[0] if ok else None
    row["menu"] = [found(c) for c in offered]
    row["wrong"] = sum(1 for c in row["configs"] if c.get("error", 0) >= TOLERANCE)
    return row


def main() -> None:
    args = sites_alone.parse_args(
        __doc__, "--shape", "NAME=M,K,N[,nobias] (repeatable; default: decode GEMMs)", "splitk-sites.json"
    )
    rows = []
    for text in args.shape or SHAPES:
        name, (m, k, n), bias = parse(text)
        row = {"shape": name, "mkn": [m, k, n], "bias": bias, **time_shape(m, k, n, bias)}
        rows.append(row)
        best = row["best"]
        said = (
            f"split-K {best['us']:.2f} us ({ {k_: v for k_, v in best.items() if k_ not in ('us', 'error')} })"
            if best
            else "no valid config"
        )
        menu_us = " ".join(f"{c['us']:.2f}" if "us" in c else "--" for c in row["menu"])
        print(
            f"{name:12} {m}x{k}x{n}  cuBLAS {row['cublas_us']:.2f} us  {said}  menu: {menu_us}  wrong: {row['wrong']}",
            flush=True,
        )
        sites_alone.write(args.out, rows)


if __name__ == "__main__":
    main()
