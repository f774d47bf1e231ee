"""Hook (f): whether a graph is compiled frozen, and compiling its Dynamo graph again without freezing.

Inductor freezes an inference graph (weights folded in as constants, convolution weights laid out for the device,
oneDNN weight prepacking on the CPU) when ``config.freezing`` is on and gradients are off as ``compile_fx`` runs,
which is its own test. Freezing wins on most CNNs and loses on some (mobilenet_v3_small and mnasnet0_5 on a CPU,
convnext_tiny on the H200): a searched choice. It is made before the inner compile where tuner looks a graph up, so
an answer that says ``freezing: false`` stops that compile (:class:`Unfreeze`, before anything is lowered) and the
backend compiles the Dynamo graph again under :data:`UNFROZEN`: its weights are then inputs, as in a compile
without freezing. The stop costs AOT tracing and the freezing passes, not a lowering.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tuner.backend.errors import HookUnavailable
from tuner.search_spaces.fusion import FREEZING  # the fusion space's knob, named as Inductor's own config

UNFROZEN = {FREEZING: False}  # compile_fx's patch for the second compile


class Unfreeze(Exception):
    """Raised in an inner compile of a frozen graph whose answer says the graph runs faster unfrozen."""


class UnfreezeFailed(HookUnavailable):
    """The second compile, unfrozen, failed on this torch: the backend compiles with plain Inductor instead (a sweep
    stores the trial as failed)."""


@contextlib.contextmanager
def second_compile() -> Iterator[None]:
    """Around the compile again without freezing: whatever it raises becomes :class:`UnfreezeFailed`."""
    try:
        yield
    except HookUnavailable:
        raise
    except Exception as e:
        raise UnfreezeFailed(f"compiling a graph again without freezing failed: {type(e).__name__}: {e}") from e


def frozen_now(is_backward: bool) -> bool:
    """Whether the inner compile under way is of a frozen graph (``compile_fx``'s test, read where it is applied)."""
    import torch
    import torch._inductor.config as inductor_config

    return bool(getattr(inductor_config, FREEZING, False)) and not torch.is_grad_enabled() and not is_backward


def take(knobs: dict[str, Any], is_backward: bool) -> dict[str, Any]:
    """``knobs`` without the freezing knob, which is no Inductor patch at this point; raises :class:`Unfreeze` when
    it says a graph compiled frozen should not be."""
    knobs = dict(knobs)
    keep = knobs.pop(FREEZING, True)
    if not keep and frozen_now(is_backward):
        raise Unfreeze()
    return knobs
