"""Hook (f): the knobs ``compile_fx`` reads before the inner compile where tuner looks a graph up, and compiling the
Dynamo graph again when a graph's answer changes one of them.

- ``freezing``: Inductor freezes an inference graph (weights folded in as constants, convolution weights laid out for
  the device, oneDNN weight prepacking on the CPU) when ``config.freezing`` is on and gradients are off as
  ``compile_fx`` runs, which is its own test. Freezing wins on most CNNs and loses on some (mobilenet_v3_small and
  mnasnet0_5 on a CPU, convnext_tiny on the H200): an answer may say ``freezing: false``.
- ``triton.cudagraphs``: CUDA graph trees (the step's kernels replayed as one graph: no launch cost on the host).
  ``compile_fx`` boxes the flag for the forward and its backward before AOT tracing, so the forward graph's answer
  decides both; a backward graph's is read nowhere.

An answer that changes either stops that compile (:class:`Restart`, before anything is lowered) and the backend
compiles the Dynamo graph again under the patches it carries. The stop costs AOT tracing (and the freezing passes),
not a lowering.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tuner.backend.errors import HookUnavailable
from tuner.search_spaces.cuda_graph import CUDA_GRAPHS  # the knobs, named as Inductor's own config
from tuner.search_spaces.freezing import FREEZING


class Restart(Exception):
    """Raised in an inner compile whose graph's answer changes a knob read before it: ``patches`` for the next one."""

    def __init__(self, patches: dict[str, Any]):
        super().__init__(patches)
        self.patches = patches


class RestartFailed(HookUnavailable):
    """The second compile failed on this torch: the backend compiles with plain Inductor instead (a sweep stores the
    trial as failed)."""


@contextlib.contextmanager
def second_compile(patches: dict[str, Any]) -> Iterator[None]:
    """Around the compile again under ``patches``: whatever it raises becomes :class:`RestartFailed`."""
    try:
        yield
    except HookUnavailable:
        raise
    except Exception as e:
        raise RestartFailed(f"compiling a graph again {describe(patches)} failed: {type(e).__name__}: {e}") from e


def describe(patches: dict[str, Any]) -> str:
    """What a restart's patches do, in words."""
    said = (["without freezing"] if patches.get(FREEZING) is False else []) + (
        ["under CUDA graphs"] if patches.get(CUDA_GRAPHS) else []
    )
    return " and ".join(said) or f"with {patches}"


def frozen_now(is_backward: bool) -> bool:
    """Whether the inner compile under way is of a frozen graph (``compile_fx``'s test, read where it is applied)."""
    import torch
    import torch._inductor.config as inductor_config

    return bool(getattr(inductor_config, FREEZING, False)) and not torch.is_grad_enabled() and not is_backward


def cuda_graphs_now() -> bool:
    """Whether the compile under way runs under CUDA graphs (the user's ``mode="reduce-overhead"``, or a restart)."""
    import torch._inductor.config as inductor_config

    return bool(getattr(inductor_config.triton, "cudagraphs", False))


def take(knobs: dict[str, Any], is_backward: bool) -> dict[str, Any]:
    """``knobs`` without the knobs read before this point, which are no Inductor patch here; raises :class:`Restart`
    when they say the compile under way should have been made otherwise (never to turn off CUDA graphs the user
    asked for: an answer only turns them on)."""
    knobs = dict(knobs)
    keep_frozen, graphs = knobs.pop(FREEZING, True), knobs.pop(CUDA_GRAPHS, False)
    patches: dict[str, Any] = {}
    if not keep_frozen and frozen_now(is_backward):
        patches[FREEZING] = False
    if graphs is True and not is_backward and not cuda_graphs_now():
        patches[CUDA_GRAPHS] = True
    if patches:
        raise Restart(patches)
    return knobs
