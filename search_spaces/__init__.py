"""Search spaces, one module per kind of decision, each with its kind's descriptor (``tuner.kinds``), registered here
once. :func:`space_for` rebuilds a task's space from its signature."""

from __future__ import annotations

import logging
from typing import Any

from tuner.core import Winners
from tuner.kinds import descriptor, register
from tuner.search_spaces import attention, cpp, cuda_graph, freezing, fusion, template, triton
from tuner.search_spaces.base import Bool, Choice, IntRange, InvalidConfig, Param, PowerOfTwo, Space

log = logging.getLogger("tuner")

# The order is the order a graph looks its kinds up and the whole-workload check drops winner groups in.
register(template.KIND, *triton.KINDS, cpp.KIND, cuda_graph.KIND, freezing.KIND, attention.KIND, fusion.KIND)


def space_for(kind: str, signature: dict[str, Any]) -> Space:
    """The search space of a task, from what its signature stores (never from executable data)."""
    try:
        build = descriptor(kind).space
    except KeyError:
        raise InvalidConfig(f"unknown task kind {kind!r}") from None
    try:
        return build(signature["space"])
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidConfig(f"task of kind {kind!r} has a malformed signature: {e}") from None


def valid_winners(winners: Winners) -> Winners:
    """The winners whose config is valid in the space its signature describes (one warning for each other)."""
    out = {}
    for key, (kind, config, signature) in winners.items():
        try:
            space_for(kind, signature).validate(config)
        except InvalidConfig as e:
            log.warning("ignoring stored winner %s: %s", key[:12], e)
            continue
        out[key] = (kind, config, signature)
    return out


__all__ = ["Bool", "Choice", "IntRange", "InvalidConfig", "Param", "PowerOfTwo", "Space", "space_for", "valid_winners"]
