"""Hook: whether the template site being lowered has an epilogue, a pointwise op that reads its output.

A library call (cuBLAS, cuDNN) writes its output and the pointwise ops after it run as a kernel of their own; a
Triton template takes them into its own store (Inductor's epilogue fusion), a kernel fewer. The recording compile asks
this at each site, from the FX node Inductor is lowering (``V.graph.current_node``): its users, looked through views,
include an op tagged pointwise. Where this Inductor does not say which node it lowers, the answer is False (no site is
credited with an epilogue) and a warning says so once.
"""

from __future__ import annotations

import logging
from typing import Any

from tuner.backend.hooks.custom_pass import aten_op
from tuner.once import warn_once

log = logging.getLogger("tuner")
_RESHAPES = ("_unsafe_view", "reshape")  # views in effect, not tagged as views


def pointwise_users(node: Any, depth: int = 3) -> list[str]:
    """The names of the pointwise ops that read ``node``, looked through at most ``depth`` views (each once, sorted):
    what a Triton template takes into its store where a library call leaves them to a kernel of its own."""
    import torch

    out: set[str] = set()
    for user in node.users:
        op = aten_op(user)
        if op is None:
            continue
        if torch.Tag.pointwise in op.tags:
            out.add(_named(user, op))
        elif depth > 0 and (op.is_view or op.overloadpacket.__name__ in _RESHAPES):
            out.update(pointwise_users(user, depth - 1))
    return sorted(out)


def _named(node: Any, op: Any) -> str:
    """The op a kernel fusing ``node`` is named after: the ATen op it was decomposed from (``original_aten``, as Inductor
    names kernels: a GELU decomposed into ``mul`` and ``erf`` still names ``triton_poi_fused_gelu_…``), else its own."""
    original = node.meta.get("original_aten")
    packet = getattr(original, "overloadpacket", None)
    return str(getattr(packet, "__name__", None) or op.overloadpacket.__name__)


def current_site_epilogue() -> list[str]:
    """The pointwise ops that read the output of the FX node Inductor is lowering now (a site's op), by name."""
    try:
        from torch._inductor.virtualized import V

        node = V.graph.current_node
    except (ImportError, AttributeError, AssertionError) as e:
        warn_once(
            log,
            f"tuner: this Inductor does not say which node it lowers ({e}); no template site is credited "
            "with an epilogue",
            key="current_node",
        )
        return []
    return pointwise_users(node) if node is not None else []
