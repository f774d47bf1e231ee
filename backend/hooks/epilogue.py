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

log = logging.getLogger("tuner")
_RESHAPES = ("_unsafe_view", "reshape")  # views in effect, not tagged as views
_warned: list[bool] = []


def feeds_pointwise(node: Any, depth: int = 3) -> bool:
    """Whether a user of ``node``, looked through at most ``depth`` views, is a pointwise op."""
    import torch

    for user in node.users:
        op = aten_op(user)
        if op is None:
            continue
        if torch.Tag.pointwise in op.tags:
            return True
        if depth > 0 and (op.is_view or op.overloadpacket.__name__ in _RESHAPES) and feeds_pointwise(user, depth - 1):
            return True
    return False


def current_site_has_epilogue() -> bool:
    """Whether the FX node Inductor is lowering now (a site's op) feeds a pointwise op."""
    try:
        from torch._inductor.virtualized import V

        node = V.graph.current_node
    except (ImportError, AttributeError, AssertionError) as e:
        if not _warned:
            _warned.append(True)
            log.warning("tuner: this Inductor does not say which node it lowers (%s); no template site is credited with an epilogue", e)
        return False
    return node is not None and feeds_pointwise(node)
