"""A CUDA graph's launch knob: ``triton.cudagraphs``, named as Inductor's config (CUDA graph trees: the step's kernels
captured once and replayed as one graph, so the host no longer pays a launch per kernel).

One task per forward graph of a CUDA workload (the backward follows its forward: ``backend/hooks/restart.py``). A
step whose host work outlasts its kernels gains up to its idle share (resnet50's training step at batch 32 on the
H200: 6.4 ms of kernels in a 17-ms step); a step that keeps the device busy gains little. The sweep measures the
choice once, where the step leaves the device idle (``tuner/sweep/phases/cuda_graphs.py``); no study samples it.
"""

from __future__ import annotations

from typing import Any

from tuner.kinds import GRAPH_HOOK, TaskKind
from tuner.core import Kind
from tuner.search_spaces.base import Bool, Space

FAMILY = Kind.CUDA_GRAPH
CUDA_GRAPHS = "triton.cudagraphs"


def space(context: dict[str, Any]) -> Space:
    return Space(FAMILY, (Bool(CUDA_GRAPHS),), {CUDA_GRAPHS: False}, (), dict(context))


def on() -> dict[str, Any]:
    """The config that runs the graph under CUDA graphs."""
    return {CUDA_GRAPHS: True}


# Off is Inductor's own choice, not a miss; measured once, where the step leaves the device idle.
KIND = TaskKind(
    FAMILY,
    space,
    GRAPH_HOOK,
    phase="CUDA graphs",
    cost="graph",
    group="graph-knob",
    devices=("cuda",),
    beside_base=True,
    forward_only=True,
    quiet_miss=True,
    label="CUDA graphs",
    graph_task=lambda graph, sites, info: {},
)
