"""Inductor's custom post-grad pass interface, as tuner's graph rewrites use it (``conv_rewrite``: the space-to-depth
stem; ``attention``: the attention backends): the base class of a pass, and where a compile puts one."""

from __future__ import annotations

import logging
from typing import Any

from tuner.backend.errors import HookUnavailable

try:
    from torch._inductor.custom_graph_pass import CustomGraphPass as Base
except ImportError as e:  # pragma: no cover - depends on the torch build
    Base = object  # type: ignore[assignment,misc]
    IMPORT_ERROR: Exception | None = e
else:
    IMPORT_ERROR = None

log = logging.getLogger("tuner.backend")


def placed(knobs: dict[str, Any], slot: str, current: Any, make: Any, what: str) -> dict[str, Any]:
    """``knobs`` with the pass ``make()`` in Inductor's ``slot`` (``post_grad_custom_pre_pass`` or ``…_post_pass``).
    Where this torch has no custom-pass interface, or the user set a pass of their own there (``current``), ``what``
    is skipped with a warning and Inductor compiles the graph as it is."""
    if IMPORT_ERROR is not None:
        log.warning("tuner: %s", HookUnavailable(f"torch._inductor.custom_graph_pass is unavailable ({IMPORT_ERROR}); {what} is skipped"))
        return knobs
    if current is not None:
        log.warning("tuner: a %s is already set; %s is skipped", slot, what)
        return knobs
    return {**knobs, slot: make()}
