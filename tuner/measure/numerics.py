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
    return max(tensor_errors(out, ref, where_finite=where_finite), default=0.0)


def tensor_errors(out: Any, ref: Any, *, where_finite: bool = False) -> list[float]:
    """Each tensor's relative norm error, in :func:`flatten`'s order; ``[inf]`` on a structure mismatch."""
    import torch

    a, b = flatten(out), flatten(ref)
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return [float("inf")]
    out_errors = []
    for x, y in zip(a, b):
        x64, y64 = x.detach().double(), y.detach().double().to(x.device)
        if where_finite:
            mask = torch.isfinite(y64)
            x64, y64 = x64[mask], y64[mask]
        if not torch.isfinite(x64).all():
            out_errors.append(float("inf"))
            continue
        out_errors.append((x64 - y64).norm().item() / (y64.norm().item() or 1.0))
    return out_errors


def eager_errors(mode: str, model: Any, x: Any, ref: Any) -> list[float]:
    """How far eager, in the workload's dtype, is from the same step in float64, tensor by tensor: the rounding that
    any correct compile may add too. Per tensor, because under mixed precision a small gradient is 50% off in eager
    while the outputs are within 1% (resnet18, amp-bf16), and one bound for all would admit anything."""
    import copy

    import torch

    from tuner.workloads.steps import run_step

    m64 = copy.deepcopy(model).double()
    x64 = x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
    return tensor_errors(ref, run_step(mode, m64, x64, grads=True))


Bound = list[float]  # a tolerance per tensor of a step's outputs (and gradients), in flatten's order


def tolerance_for(dtype: str, eager_errs: list[float]) -> Bound:
    """The dtype's bound for each tensor, widened where eager itself is further than that from float64 (compiled
    code may round differently from eager by as much again, in either direction)."""
    return [max(TOLERANCE[dtype], 4.0 * e) if e == e else TOLERANCE[dtype] for e in eager_errs]


def widened_by_default(bound: Bound, default_errors: list[float]) -> Bound:
    """The bound a compiled candidate must meet, per tensor: ``bound``, or twice Inductor's own default compile's
    distance from eager where that is larger (a training step's small gradients differ by more than the dtype's)."""
    if len(default_errors) != len(bound):
        return bound
    return [max(t, 2.0 * e) for t, e in zip(bound, default_errors)]


def gross(bound: Bound) -> Bound:
    """The per-tensor bound past which a compile is wrong, not merely rounded differently: 1 (100%), or the tensor's
    own bound where eager cannot reproduce it that closely (a gradient that is zero by construction)."""
    return [max(1.0, t) for t in bound]


def within(errors: list[float], bound: Bound) -> bool:
    """Whether every tensor's error is inside its bound (a structure mismatch never is)."""
    return len(errors) == len(bound) and all(e <= t for e, t in zip(errors, bound))


def worst_excess(errors: list[float], bound: Bound) -> tuple[float, float]:
    """(error, bound) of the tensor furthest over (or nearest to) its bound, for messages."""
    if len(errors) != len(bound):
        return float("inf"), max(bound, default=0.0)
    return max(zip(errors, bound), key=lambda et: et[0] / et[1] if et[1] else float("inf"))
