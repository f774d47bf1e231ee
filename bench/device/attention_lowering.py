"""Which attention does a workload's compile run, and what would a fused one give? One device call.

For the workload of the command line (``workload_args``): the fused SDPA backends this torch enables; the kernels
eager runs for attention; the attention ops of the graph Inductor lowers under its defaults (fused SDPA, or
``bmm`` of a decomposed one, with dtypes); then the same compile under ``sdpa_kernel`` of each fused backend (why it
refuses one, where it does) and the step's time under each, beside the default, interleaved in one process.
Writes ``$OUT/attention-lowering.json``.

    python bench/device/attention_lowering.py --model hf:bert-base-uncased --dtype bf16 --batch 8 --seq-len 512
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import warnings
from typing import Any

import workload_args

FUSED = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


def _graph_ops(seen: collections.Counter) -> Any:
    """A post-grad pass that counts the graph's attention and batched-GEMM calls by op and input dtype."""

    def spy(graph: Any) -> None:
        for n in graph.nodes:
            name = str(n.target)
            if n.op == "call_function" and ("attention" in name or "bmm" in name):
                dtypes = [str(a.meta["val"].dtype) for a in n.args[:2] if hasattr(a, "meta") and "val" in a.meta]
                seen[f"{name} {','.join(dtypes)}"] += 1

    return spy


def compiled(model: Any, backend: str | None, seen: collections.Counter) -> Any:
    """The model compiled under Inductor's defaults, within ``sdpa_kernel(backend)`` where one is named."""
    import contextlib

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch._dynamo.reset()
    torch._inductor.config.post_grad_custom_pre_pass = _graph_ops(seen)
    scope = sdpa_kernel([getattr(SDPBackend, backend)]) if backend else contextlib.nullcontext()
    fn = torch.compile(model)

    def step(x: Any) -> Any:
        with scope, torch.no_grad():
            return fn(x)
    return step


def eager_kernels(model: Any, x: Any) -> list[str]:
    import torch

    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        model(x)
        torch.cuda.synchronize()
    keys = ("flash", "fmha", "attention", "attn", "softmax")
    return sorted({e.name[:120] for e in prof.events() if any(k in e.name.lower() for k in keys)})


def sdp_choices(model: Any, x: Any) -> list[dict[str, Any]]:
    """Each eager SDPA call's inputs and the backend the dispatcher picks for them (``torch._fused_sdp_choice``)."""
    import torch
    from torch.nn.attention import SDPBackend

    real, calls = torch.nn.functional.scaled_dot_product_attention, []

    def spy(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False, **kw: Any) -> Any:
        pick = torch._fused_sdp_choice(q, k, v, attn_mask, dropout_p, is_causal, **kw)
        mask = None if attn_mask is None else [str(attn_mask.dtype), list(attn_mask.shape), list(attn_mask.stride())]
        calls.append({"q": [str(q.dtype), list(q.shape), list(q.stride())], "k_stride": list(k.stride()), "mask": mask,
                      "dropout": dropout_p, "causal": is_causal, "kw": {k2: str(v2) for k2, v2 in kw.items()}, "pick": SDPBackend(pick).name})
        return real(q, k, v, attn_mask, dropout_p, is_causal, **kw)

    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        with torch.no_grad():
            model(x)
    finally:
        torch.nn.functional.scaled_dot_product_attention = real
    return calls[:2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    workload_args.add(p)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "attention-lowering.json"))
    a = p.parse_args()
    import torch

    from tuner.commands.bench import provenance
    from tuner.measure.timing import interleaved
    from tuner.workloads.spec import build_model, make_inputs

    torch._inductor.config.force_disable_caches = True
    spec = workload_args.spec(a)
    model, xs = build_model(spec), make_inputs(spec)
    out: dict[str, Any] = {**provenance("cuda"), "workload": spec.name,
                           "enabled": {b: bool(getattr(torch.backends.cuda, f"{b}_sdp_enabled")()) for b in ("flash", "mem_efficient", "cudnn", "math")},
                           "eager_kernels": eager_kernels(model, xs[0]), "sdp_choices": sdp_choices(model, xs[0]), "compiles": {}}
    print("eager SDPA calls:", out["sdp_choices"])
    steps = {}
    for backend in (None, *FUSED):
        seen: collections.Counter = collections.Counter()
        step = compiled(model, backend, seen)
        name = backend or "default"
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            try:
                y = step(xs[0])
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a refused backend is a result
                out["compiles"][name] = {"error": f"{type(e).__name__}: {str(e)[:600]}", "warnings": [str(w.message)[:300] for w in said][:8]}
                print(name, "refused:", str(e)[:300])
                continue
        ref = model(xs[0]) if backend is None else None
        out["compiles"][name] = {"ops": dict(seen), "warnings": [str(w.message)[:300] for w in said][:8]}
        if ref is not None:
            out["compiles"][name]["max_abs_vs_eager"] = float((y.float() - ref.float()).abs().max())
        steps[name] = (lambda s: lambda i: s(xs[i % len(xs)]))(step)
        print(name, dict(seen))
    t = interleaved(steps, rounds=a.rounds, min_sample_ms=50.0, sync=torch.cuda.synchronize)
    out["median_ms"] = {k: v.median_ms for k, v in t.items()}
    print(json.dumps({**out["enabled"], **out["median_ms"]}), "\n", out["eager_kernels"])
    with open(a.out, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
