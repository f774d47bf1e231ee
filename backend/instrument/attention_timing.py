"""An attention site's backends timed alone, without a compile: each fused kernel called on inputs of the site's sizes.

A site (``backend/hooks/attention.describe``: batch, heads, query length, head size, key length, dtype, causality) is
rebuilt as random query, key and value tensors; each backend's ATen op runs on them as a CUDA graph of calls back to
back over copies that together outgrow the L2 (``site_timing.rotated``, ``_graph_of``): the device's time, as a
workload under CUDA graphs pays it. Each backend's output is checked against ATen's math attention in float32 first;
one that differs, or that this torch or device refuses, gets no time. A site's mask is rebuilt in its recorded layout
(flash, which takes none, is not timed there); a site recorded with a mask but not its layout is measured in the
workload.
"""

from __future__ import annotations

import functools
from typing import Any

from tuner.backend.hooks.attention import attention_of, call
from tuner.backend.instrument.capture import storage_span
from tuner.backend.instrument.site_timing import _graph_of, rotated
from tuner.search_spaces.attention import ALONE_TOLERANCE as TOLERANCE, DECODE, KV_HEADS


def inputs(site: dict[str, Any], device: str, seed: int = 0) -> dict[str, Any]:
    """The call's arguments (``call``'s form): query ``(b, h, sq, d)``, key and value ``(b, hk, sk, d)`` (``hk`` the
    site's key/value heads where its query heads group over them, else ``h``), normal values, laid out with the
    strides the site records (the model's query is often a view of a fused projection), else contiguous."""
    import torch

    b, h, sq, d, sk = (int(x) for x in site["shape"])
    hk = int(site.get(KV_HEADS) or h)
    dtype = getattr(torch, str(site["dtype"]))
    gen = torch.Generator(device).manual_seed(seed)
    shapes = [(b, h, sq, d), (b, hk, sk, d), (b, hk, sk, d)]
    strides = site.get("strides") or [None] * 3

    def normal(shape: tuple[int, ...], stride: list[int] | None) -> Any:
        if stride is None:
            return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
        flat = torch.randn(storage_span(shape, stride), generator=gen, device=device, dtype=torch.float32).to(dtype)
        return torch.as_strided(flat, shape, stride)

    q, k, v = (normal(shape, stride) for shape, stride in zip(shapes, strides))
    return {"q": q, "k": k, "v": v, "mask": mask(site, device), "causal": bool(site.get("causal")), "scale": None}


def mask(site: dict[str, Any], device: str) -> Any:
    """The site's mask in its recorded layout, masking nothing (all true; a bias of zeros), or None without one. A fused
    kernel reads all of a mask whatever it holds; one that masked whole rows would leave math attention's reference
    undefined there."""
    import torch

    layout = site.get("mask_layout")
    if not site.get("mask") or not layout:
        return None
    shape, stride = layout["shape"], layout["stride"]
    dtype = getattr(torch, str(layout["dtype"]))
    flat = (torch.ones if dtype == torch.bool else torch.zeros)(storage_span(shape, stride), dtype=dtype, device=device)
    return torch.as_strided(flat, shape, stride)


def _reference(a: dict[str, Any]) -> Any:
    """Math attention over the inputs in float32: what each backend's output is checked against. A boolean mask as
    SDPA's front end reads it (false: a key not attended to); ATen's math op called with it directly adds it as 0 and
    1."""
    import torch

    q, k, v = (a[n].float() for n in "qkv")
    k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], 1) for t in (k, v))  # grouped heads, each query head's own
    m = a["mask"]
    if m is not None:
        m = torch.zeros(m.shape, device=m.device).masked_fill(~m, float("-inf")) if m.dtype == torch.bool else m.float()
    return torch.ops.aten._scaled_dot_product_attention_math.default(q, k, v, m, 0.0, a["causal"])[0]


def runner(backend: str, a: dict[str, Any], front_end: bool = False) -> Any:
    """A call of ``backend``'s attention on ``a``'s tensors, returning its output: the fused ATen op, as Inductor keeps
    it at a site the dispatcher gave a fused kernel; with ``front_end``, PyTorch's own SDPA front end under
    ``sdpa_kernel``, as the rewrite of a site the dispatcher runs as math traces it (``attention_math.sdpa``: a mask
    whose last dimension has stride 0, which the raw ops refuse, made contiguous first)."""
    if front_end:
        from tuner.backend.hooks.attention_math import sdpa

        grouped = a["k"].shape[1] != a["q"].shape[1]
        return functools.partial(sdpa, backend, a["q"], a["k"], a["v"], a["mask"], a["causal"], a["scale"], grouped)
    op, args, kwargs = call(backend, a)
    return (lambda: op(*args, **kwargs)) if attention_of(backend) else (lambda: op(*args, **kwargs)[0])


def _error(backend: str, a: dict[str, Any], ref: Any, front_end: bool) -> float:
    """max |backend - reference| / max |reference|."""
    got = runner(backend, a, front_end)().float()
    return float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-6))


def _graph(backend: str, a: dict[str, Any], front_end: bool) -> tuple[Any, int]:
    """A CUDA graph of the backend's calls over rotated copies of q, k and v, and how many calls it holds."""
    sets = rotated((a["q"], a["k"], a["v"]))
    return _graph_of(
        [functools.partial(runner, backend, {**a, "q": q, "k": k, "v": v}, front_end) for q, k, v in sets]
    ), len(sets)


ROUNDS = 5  # each backend's graph replayed in turn, round by round: its time, the median of its rounds


def time_backends(
    site: dict[str, Any], backends: list[str], device: str = "cuda", rounds: int = ROUNDS, front_end: bool = False
) -> dict[str, dict[str, Any]]:
    """{backend: {"ms": per call (median of ``rounds``), "spread": the rounds' interquartile range, "error": relative
    error} or {"error": why it has no time} for ``site`` on ``device`` (CUDA): the backends interleaved, round by round,
    each called as :func:`runner` calls it."""
    try:
        a = inputs(site, device)
        ref = _reference(a)
    except Exception as e:  # noqa: BLE001 - a site not rebuilt as recorded (a mask that does not broadcast, say): no time
        return {b: {"error": f"the site could not be rebuilt ({_error_text(e)})"} for b in backends}
    out: dict[str, dict[str, Any]] = {}
    graphs: dict[str, tuple[Any, int]] = {}
    for backend in backends:
        if backend == "flash" and a["mask"] is not None:
            out[backend] = {"error": "the flash kernel takes no mask"}
            continue
        if backend == DECODE and not site.get(DECODE):
            out[backend] = {
                "error": "tuner's decode kernel takes at most 16 queries a head, half precision, no causal mask"
            }
            continue
        try:
            err = _error(backend, a, ref, front_end)
            if not err <= TOLERANCE[str(site["dtype"])]:
                out[backend] = {"error": f"differs from math attention by {err:.3g} of its largest value"}
                continue
            graphs[backend] = _graph(backend, a, front_end)
            out[backend] = {"error": err}
        except Exception as e:  # noqa: BLE001 - a backend this torch, device or site refuses gets no time
            out[backend] = {"error": _error_text(e)}
    for backend, timed in interleaved_graphs(graphs, rounds).items():
        out[backend].update(timed)
    return out


def interleaved_graphs(graphs: dict[str, tuple[Any, int]], rounds: int = ROUNDS) -> dict[str, dict[str, float]]:
    """{name: {"ms": per call (median of ``rounds``), "spread": the rounds' interquartile range}} of ``graphs``
    ({name: (a CUDA graph, the calls it holds)}), replayed in turn, round by round."""
    import statistics

    from torch._inductor.runtime.benchmarking import benchmarker

    runs: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(rounds):
        for name, (graph, calls) in graphs.items():
            runs[name].append(float(benchmarker.benchmark_gpu(graph.replay)) / calls)
    out = {}
    for name, ms in runs.items():
        q = statistics.quantiles(ms, n=4) if len(ms) > 1 else [ms[0]] * 3
        out[name] = {"ms": statistics.median(ms), "spread": q[2] - q[0]}
    return out


def _error_text(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
