"""One step of a workload, the same for sweeps and benchmarks: inference under no_grad, or forward + backward."""

from __future__ import annotations

from typing import Any


def run_step(mode: str, fn: Any, x: Any, *, grads: bool = False) -> Any:
    """With ``grads``, return what numerics compare: the output (and, training, every parameter's gradient)."""
    import torch

    if mode != "train":  # inference, or a decode step
        with torch.no_grad():
            return fn(x)
    params = list((getattr(fn, "_orig_mod", None) or fn).parameters())
    for p in params:
        p.grad = None
    out = fn(x)
    out.float().mean().backward()
    if grads:
        return [out.detach(), *[p.grad.detach().clone() for p in params if p.grad is not None]]
    return None


def synchronizer(device: str) -> Any:
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)
