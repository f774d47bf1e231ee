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

log = logging.getLogger("tuner")
_VIEWS = {"_unsafe_view", "reshape", "view", "expand", "squeeze", "unsqueeze", "permute", "t", "transpose"}
_warned: list[bool] = []


def _is_view(target: Any) -> bool:
    name = getattr(getattr(target, "overloadpacket", None), "__name__", "")
    return bool(getattr(target, "is_view", False)) or name in _VIEWS


def _pointwise(target: Any) -> bool:
    import torch

    return torch.Tag.pointwise in (getattr(target, "tags", None) or ())


def feeds_pointwise(node: Any, depth: int = 3) -> bool:
    """Whether a user of ``node``, looked through at most ``depth`` views, is a pointwise op."""
    for user in getattr(node, "users", ()):
        target = getattr(user, "target", None)
        if _pointwise(target):
            return True
        if depth > 0 and _is_view(target) and feeds_pointwise(user, depth - 1):
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
