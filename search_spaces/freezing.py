"""Whether a graph compiled frozen runs frozen: ``freezing``, named as Inductor's config (weights folded in as
constants, convolution weights laid out for the device, oneDNN's weight prepacking on the CPU).

One task per forward graph that the capture compiled frozen (inference). Inductor's strongest mode freezes, and
freezing loses on some models (mnasnet0_5 and a 2-layer BERT on a CPU, convnext_tiny on the H200). ``false`` stops the
frozen compile before anything is lowered and compiles the Dynamo graph again unfrozen (``backend/hooks/restart.py``),
where the unfrozen graph finds answers of its own. The sweep measures the choice once, before its searches
(``tuner/sweep/phases/freezing.py``); no study samples it.
"""

from __future__ import annotations

from typing import Any

from tuner.kinds import GRAPH_HOOK, TaskKind
from tuner.search_spaces.base import Bool, Space

FAMILY = "freezing"
FREEZING = "freezing"


def space(context: dict[str, Any]) -> Space:
    return Space(FAMILY, (Bool(FREEZING),), {FREEZING: True}, (), dict(context))


def unfrozen() -> dict[str, Any]:
    """The config that compiles the graph unfrozen."""
    return {FREEZING: False}


def _graph_task(graph: dict[str, Any], sites: list[dict[str, Any]], info: dict[str, Any]) -> dict[str, Any] | None:
    """A task for a graph compiled frozen; none for any other."""
    return {} if graph.get("frozen") else None


# Frozen is Inductor's choice (where the user froze), not a miss; measured once, before the searches.
KIND = TaskKind(
    FAMILY,
    space,
    GRAPH_HOOK,
    phase="freezing",
    cost="graph",
    group="graph-knob",
    beside_base=True,
    forward_only=True,
    quiet_miss=True,
    label="freezing",
    graph_task=_graph_task,
)
