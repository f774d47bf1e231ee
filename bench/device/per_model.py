"""What the device scripts that time one model after another share: Inductor's freezing on, the models of ``--models``
(separated by ``;``: an ``hf:`` model's options hold commas), one model's failure kept beside the others' figures, and
the JSON they write with the device, versions, command and date."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import torch


def first(out: Any) -> Any:
    """A model's first output tensor (a Hugging Face output's logits)."""
    if isinstance(out, torch.Tensor):
        return out
    return out[0] if isinstance(out, (tuple, list)) else out.logits


def frozen_rows(
    args: argparse.Namespace, one_model: Callable[[str, argparse.Namespace], dict[str, Any]]
) -> list[dict[str, Any]]:
    """``one_model(model, args)`` for each model of ``args.models``, compiled frozen (a decode step is not: its cache
    buffers change in place, and frozen, CUDA graphs would skip them); a failure is its row's error."""
    import torch._inductor.config as cfg

    cfg.freezing = args.mode != "decode"
    rows = []
    for model in args.models.split(";"):
        try:
            rows.append(one_model(model, args))
        except Exception as e:  # one model failing leaves the others' figures
            print(model, "failed:", type(e).__name__, str(e)[:300], flush=True)
            rows.append({"model": model, "error": f"{type(e).__name__}: {e}"[:500]})
        torch._dynamo.reset()
    return rows


def write(args: argparse.Namespace, script: str, rows: list[dict[str, Any]], **extra: Any) -> None:
    """The rows to ``args.out``, with the device, versions, date and the command that made them."""
    from tuner.commands.bench import provenance

    flags = " ".join(f"--{k.replace('_', '-')} {v!r}" for k, v in vars(args).items() if k != "out")
    meta = {**provenance("cuda"), **extra, "command": f"python bench/device/{script} {flags}", "rows": rows}
    with open(args.out, "w") as f:
        json.dump(meta, f, indent=1)


def parser(doc: str) -> argparse.ArgumentParser:
    """The options every such script takes (its docstring's first paragraph as the description)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--models", default="resnet50;vit_b_32", help="models separated by ;")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument(
        "--seq-len", type=int, default=128, help="an hf: model's tokens per sequence (decode: its KV cache's length)"
    )
    p.add_argument("--mode", default="infer", choices=("infer", "decode"), help="decode: an hf: model's decode step")
    p.add_argument("--out", required=True)
    return p


def captured(fn: Callable[[Any], Any], x: Any) -> tuple[Any, Any]:
    """``fn(x)`` warmed on a side stream, then captured as one ``torch.cuda.CUDAGraph``: (the graph, its output)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(x)
    return g, out


def events_ms(call: Callable[[], Any], n: int) -> float:
    """The device time of ``call()`` per call over ``n`` calls back to back, between two CUDA events."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        call()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / n


def interleaved_ms(calls: dict[str, Callable[[], Any]], rounds: int, n: int) -> dict[str, list[float]]:
    """Per name, one :func:`events_ms` sample a round; the rounds alternate the order so drift favours no one."""
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            samples[name].append(events_ms(calls[name], n))
    return samples


def variants_row(
    model: str,
    args: argparse.Namespace,
    variants: dict[str, dict[str, Any]],
    before_compile: Callable[[str], None] = lambda name: None,
) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """``model`` (channels-last) compiled under CUDA graphs once per variant (Inductor options), called five times
    each, then timed interleaved: (its row: the medians and each over the first variant's, each variant's last
    output as float, eager's output). ``before_compile(name)`` runs before each variant's compile."""
    import copy
    import statistics

    from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

    spec = WorkloadSpec(
        model,
        device="cuda",
        dtype=args.dtype,
        batch=args.batch,
        channels_last=True,
        seq_len=args.seq_len,
        mode=args.mode,
    )
    m, x = build_model(spec).eval(), make_inputs(spec, 1)[0]
    fns, outs = {}, {}
    with torch.no_grad():
        eager = first(m(x)).float()
        for name, opts in variants.items():
            torch._dynamo.reset()
            before_compile(name)
            # A copy each, as ``tuner bench`` compiles its modes: a decode step's variants would otherwise write the
            # same cache buffers
            fns[name] = torch.compile(copy.deepcopy(m), options={"triton.cudagraphs": True, **opts})
            for _ in range(5):
                outs[name] = first(fns[name](x)).float().clone()
        times = interleaved_ms({name: (lambda f=fns[name]: f(x)) for name in variants}, args.rounds, 50)
    ms = {n: statistics.median(t) for n, t in times.items()}
    base = ms[next(iter(variants))]
    return {"model": model, "ms": ms, "over_default": {n: v / base for n, v in ms.items()}}, outs, eager
