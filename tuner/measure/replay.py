"""The workload under CUDA graphs without a compile: a compiled step captured by hand as one ``torch.cuda.CUDAGraph``
over a static copy of its input, each call copying its input in and replaying the graph.

This is what Inductor's CUDA graphs (``mode="reduce-overhead"``) run, less their per-call host work (guards, input
checks, fresh outputs), which overlaps the device's work wherever that is longer: the answer a second compile would
give, without the compile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WARMUPS = 3  # runs on a side stream before the capture (CUDA graphs capture what has run once, allocators warmed)


def replayed(step: Callable[[Any], Any], inputs: list[Any]) -> tuple[Callable[[int], Any], Any]:
    """(``call(i)``: copy input ``i % len(inputs)`` into the static input and replay; the graph's output after one
    replay of ``inputs[0]``). ``step(x)`` runs the compiled workload on ``x``. Raises what the capture raises (a
    step that syncs with the host, or reads a CPU value, cannot be captured)."""
    import torch

    static = _static_copy(inputs[0])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUPS):
            step(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step(static)

    def call(i: int) -> Any:
        _copy_in(static, inputs[i % len(inputs)])
        graph.replay()
        return out

    call(0)
    torch.cuda.synchronize()
    return call, out


def _static_copy(x: Any) -> Any:
    if isinstance(x, (tuple, list)):
        return type(x)(_static_copy(v) for v in x)
    if isinstance(x, dict):
        return {k: _static_copy(v) for k, v in x.items()}
    return x.clone() if hasattr(x, "clone") else x


def _copy_in(static: Any, x: Any) -> None:
    if isinstance(static, (tuple, list)):
        for s, v in zip(static, x):
            _copy_in(s, v)
    elif isinstance(static, dict):
        for k, s in static.items():
            _copy_in(s, x[k])
    elif hasattr(static, "copy_"):
        static.copy_(x)
