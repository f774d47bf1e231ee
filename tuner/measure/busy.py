"""How much of a compiled CUDA step the device spends running kernels: the rest is the host's (Python, autograd,
one launch per kernel), which CUDA graphs take away (``search_spaces/cuda_graph``).

Device time is the sum of the kernels' and copies' durations over a few profiled steps (``torch.profiler``, CUPTI);
the step's wall time is timed apart from the profiler, which slows the host.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

log = logging.getLogger("tuner.measure")


def device_ms(
    step: Callable[[int], Any], sync: Callable[[], None], steps: int = 10
) -> tuple[float | None, dict[str, float]]:
    """The device's busy time per step (ms), or None where the profiler sees no device activity (no CUPTI); and each
    Triton kernel's device time a launch (ms), by its name less Inductor's numeric suffix (``kernel_ms``)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for i in range(3):  # warm
        step(i)
    sync()
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(steps):
                step(i)
            sync()
    except Exception as e:  # noqa: BLE001 - a profiler this build lacks is no reason to fail the capture
        log.warning("cannot profile the device (%s): the step's idle share is unknown", e)
        return None, {}
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    us = sum(e.device_time_total for e in events)
    return (us / 1e3 / steps if us > 0 else None), kernel_ms(events)


def kernel_ms(events: list[Any]) -> dict[str, float]:
    """{Triton kernel name, less its numeric suffix: mean device time a launch (ms)} over profiled device ``events``
    (each with ``name`` and ``device_time_total`` in us). This is what a kernel costs inside the step, without the
    launch a timing of it alone includes, which for a short kernel is most of its time alone."""
    total: dict[str, list[float]] = {}
    for e in events:
        if str(e.name).startswith("triton_"):
            total.setdefault(_SUFFIX.sub("", str(e.name)), []).append(float(e.device_time_total))
    return {name: sum(t) / len(t) / 1e3 for name, t in total.items()}


_SUFFIX = re.compile(r"_\d+$")


# The library calls a compiled graph makes (ATen ops outside Inductor's Triton kernels) whose time the sweep weighs
# levers by; each counted at its outermost call, its nested ops' device time included.
LIBRARY_OPS = (
    "aten::convolution",
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::_scaled_mm",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
)


def library_ops(
    step: Callable[[int], Any], sync: Callable[[], None], steps: int = 5, device: bool = True
) -> list[dict[str, Any]]:
    """Each library call of the step (:data:`LIBRARY_OPS`), by op and the shapes of its first two inputs, with its
    time per step (ms): the device's (``device``) or, on a CPU, the host's. Empty where the profiler cannot say
    (a warning): the sweep then weighs its levers without it."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device else [])]
    for i in range(2):  # warm
        step(i)
    sync()
    try:
        with profile(activities=activities, record_shapes=True) as prof:
            for i in range(steps):
                step(i)
            sync()
        return _by_op(prof.events(), steps, "device_time_total" if device else "cpu_time_total")
    except Exception as e:  # noqa: BLE001 - a profiler this build lacks is no reason to fail the capture
        log.warning("cannot profile the step's library calls (%s): the sweep weighs its levers without them", e)
        return []


def _by_op(events: Any, steps: int, total: str) -> list[dict[str, Any]]:
    us: dict[tuple[str, str], float] = {}
    shapes: dict[tuple[str, str], list[list[int]]] = {}
    for e in events:
        if e.name not in LIBRARY_OPS or _inside_library_op(e):
            continue
        first = [list(s) for s in (e.input_shapes or [])[:2]]
        key = (e.name, repr(first))
        us[key] = us.get(key, 0.0) + float(getattr(e, total))
        shapes[key] = first
    return [
        {"op": op.removeprefix("aten::"), "shapes": shapes[(op, s)], "ms": t / 1e3 / steps} for (op, s), t in us.items()
    ]


def _inside_library_op(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name in LIBRARY_OPS:
            return True
        parent = parent.cpu_parent
    return False
