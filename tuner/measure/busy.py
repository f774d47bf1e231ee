"""How much of a compiled CUDA step the device spends running kernels: the rest is the host's (Python, autograd,
one launch per kernel), which CUDA graphs take away (``search_spaces/cuda_graph``).

Device time is the sum of the kernels' and copies' durations over a few profiled steps (``torch.profiler``, CUPTI);
the step's wall time is timed apart from the profiler, which slows the host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("tuner.measure")


def device_ms(step: Callable[[int], Any], sync: Callable[[], None], steps: int = 10) -> float | None:
    """The device's busy time per step (ms), or None where the profiler sees no device activity (no CUPTI)."""
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
        return None
    us = sum(e.device_time_total for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return us / 1e3 / steps if us > 0 else None
