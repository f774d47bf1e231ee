"""Inductor's custom post-grad pass interface, as tuner's graph rewrites use it (``rewrites``: the space-to-depth stem,
cuDNN's epilogue, merged GEMMs; ``attention``: the attention backends): the base class of a pass, where a compile puts
one, how a pass adds a node and which ATen op a node calls."""

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


def aten_op(node: Any) -> Any:
    """The ATen op overload an FX ``node`` calls, or None for any other node."""
    import torch

    return node.target if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) else None


def placed(knobs: dict[str, Any], slot: str, current: Any, make: Any, what: str) -> dict[str, Any]:
    """``knobs`` with the pass ``make()`` in Inductor's ``slot`` (``post_grad_custom_pre_pass`` or ``…_post_pass``).
    Where this torch has no custom-pass interface, or the user set a pass of their own there (``current``), ``what``
    is skipped with a warning and Inductor compiles the graph as it is."""
    if IMPORT_ERROR is not None:
        log.warning(
            "tuner: %s",
            HookUnavailable(f"torch._inductor.custom_graph_pass is unavailable ({IMPORT_ERROR}); {what} is skipped"),
        )
        return knobs
    if current is not None:
        log.warning("tuner: a %s is already set; %s is skipped", slot, what)
        return knobs
    return {**knobs, slot: make()}


def traced_call(graph: Any, fake_mode: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
    """A new node computing ``target(*args)``, its fake value set as Inductor's passes expect."""
    import torch

    node = graph.call_function(target, args, kwargs)
    with fake_mode:
        node.meta["val"] = target(*torch.fx.node.map_arg(args, lambda a: a.meta["val"]), **kwargs)
    return node


def rewrite_each(graph: Any, items: list[Any], rewrite: Any, what: str, kept: str) -> None:
    """``rewrite(item)`` for each item of ``graph``; where one fails on this torch (its aten ops or fake tensors behave
    otherwise), the nodes it added are removed and a warning says ``what`` failed and ``kept`` how it is compiled."""
    for item in items:
        before = set(graph.nodes)
        try:
            rewrite(item)
        except Exception as e:  # noqa: BLE001 - this torch lowers it otherwise: keep what was there
            for node in reversed([n for n in graph.nodes if n not in before]):
                graph.erase_node(node)
            log.warning("tuner: %s failed on this torch (%s: %s); %s", what, type(e).__name__, e, kept)
    graph.lint()
