"""Search spaces, one module per kernel family, registered by task kind. :func:`space_for` rebuilds a task's space
from its signature."""

from __future__ import annotations

from typing import Any

from tuner.core import Kind
from tuner.search_spaces import cpp, cuda_graph, fusion, template, triton
from tuner.search_spaces.base import Bool, Choice, IntRange, InvalidConfig, Param, PowerOfTwo, Space

FAMILIES = {cpp.FAMILY: cpp.space, cuda_graph.FAMILY: cuda_graph.space, template.FAMILY: template.space, fusion.FAMILY: fusion.space, **{f: triton.builder(f) for f in triton.FAMILIES}}


def space_for(kind: str, signature: dict[str, Any]) -> Space:
    """The search space of a task, from what its signature stores (never from executable data)."""
    try:
        build = FAMILIES[Kind(kind)]
    except (KeyError, ValueError):
        raise InvalidConfig(f"unknown task kind {kind!r}") from None
    try:
        return build(signature["space"])
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidConfig(f"task of kind {kind!r} has a malformed signature: {e}") from None


__all__ = ["Bool", "Choice", "FAMILIES", "IntRange", "InvalidConfig", "Param", "PowerOfTwo", "Space", "space_for"]
