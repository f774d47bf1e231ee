"""Hook (g): benchmarks that Inductor's graph passes run during a compile.

``pad_mm`` decides whether a matmul with unaligned sizes (e.g. GPT-2's LM head, 50257 columns) runs faster padded
by timing both on the GPU, unless its cache already knows. Those timings are benchmarks at compile time like
autotuning, so ``stats()["benchmarks"]`` counts them, read from Dynamo's counter that ``pad_mm`` bumps each time
it times a matmul.
"""

from __future__ import annotations

import functools
import inspect
import logging

import torch

log = logging.getLogger("tuner")

PAD_MM = ("inductor", "pad_mm_bench")


@functools.cache
def _counted() -> bool:
    """Whether this torch's ``pad_mm`` bumps the counter read here (said once when it does not)."""
    try:
        from torch._inductor.fx_passes import pad_mm

        found = PAD_MM[1] in inspect.getsource(pad_mm)
    except (ImportError, OSError, TypeError) as e:
        log.warning(
            "backend 'tuned': cannot read Inductor's pad_mm pass on torch %s (%s): its benchmarks at compile "
            "time are not counted in stats()",
            torch.__version__,
            e,
        )
        return False
    if not found:
        log.warning(
            "backend 'tuned': Inductor's pad_mm pass on torch %s has no '%s' counter: its benchmarks at "
            "compile time are not counted in stats()",
            torch.__version__,
            PAD_MM[1],
        )
    return found


def benchmarks_so_far() -> int:
    """How many matmuls Inductor's ``pad_mm`` pass has timed in this process."""
    if not _counted():
        return 0
    from torch._dynamo.utils import counters

    return int(counters[PAD_MM[0]][PAD_MM[1]])
