"""Numerics checks: a candidate's output against the eager reference, with a tolerance by dtype."""

from __future__ import annotations

from typing import Any

# ‖out − ref‖ / ‖ref‖ bounds (METHOD.md): float32 far under 1e-3; bf16 between 1e-3 and 1e-2.
TOLERANCE = {"fp32": 1e-3, "fp16": 1e-2, "bf16": 3e-2, "amp-fp16": 1e-2, "amp-bf16": 3e-2}


def flatten(x: Any) -> list[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in flatten(item)]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in flatten(x[k])]
    return []


def relative_error(out: Any, ref: Any, *, where_finite: bool = False) -> float:
    """Largest relative norm error over the tensors of ``out``; inf on NaN or a structure mismatch. ``where_finite``:
    compare only where ``ref`` is finite (a kernel's outputs can hold inf by design, e.g. a max-pool's padding)."""
    import torch

    a, b = flatten(out), flatten(ref)
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return float("inf")
        x64, y64 = x.detach().double(), y.detach().double().to(x.device)
        if where_finite:
            mask = torch.isfinite(y64)
            x64, y64 = x64[mask], y64[mask]
        if not torch.isfinite(x64).all():
            return float("inf")
        denom = y64.norm().item() or 1.0
        worst = max(worst, (x64 - y64).norm().item() / denom)
    return worst


def eager_error(mode: str, model: Any, x: Any, ref: Any) -> float:
    """How far eager, in the workload's dtype, is from the same step in float64: the rounding that any correct
    compile may add too (a training step's gradients of a deep network differ by more than the forward does)."""
    import copy

    import torch

    from tuner.steps import run_step

    m64 = copy.deepcopy(model).double()
    x64 = x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
    return relative_error(ref, run_step(mode, m64, x64, grads=True))


def tolerance_for(dtype: str, eager_err: float) -> float:
    """The dtype's bound, widened where eager itself is further than that from float64 (compiled code may round
    differently from eager by as much again, in either direction)."""
    return max(TOLERANCE[dtype], 4.0 * eager_err) if eager_err == eager_err else TOLERANCE[dtype]


def widened_by_default(tolerance: float, default_error: float) -> float:
    """The bound a compiled candidate must meet: ``tolerance``, or twice Inductor's own default compile's distance
    from eager where that is larger (a training step's small gradients can differ by more than the dtype's bound)."""
    return max(tolerance, 2.0 * default_error)
