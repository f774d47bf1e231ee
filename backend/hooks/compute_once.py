"""Hook: transcendental values that kernels read broadcast, computed once into a buffer instead of in every kernel.

Inductor inlines a cheap pointwise value into each kernel that reads it (it stores one only where it has several
readers of many loads or a large body). A rotary embedding's ``cos`` and ``sin`` of ``[seq, head_dim]`` angles are
read broadcast over the batch and the heads, by the q and the k of every layer: inlined, each layer's kernels
compute them again for every element they write, a ``cos`` and a ``sin`` per element of q. On the H200 that made a
Qwen2 prefill's rotary kernels (b8x512, 16 heads of 64) run ~17 us a layer each, several times their memory time.
The rewrite (:class:`ComputeOnce`, a post-grad pass) stores each such value once, where the fusion study turns the
knob on (``search_spaces/fusion.py``); :func:`eligible_ops` lists where it applies.

A value qualifies where it is a costly transcendental op's output (:data:`TRANSCENDENTAL`) and the pointwise and view
ops after it reach a tensor at least :data:`AMPLIFICATION` times its size: each element of it would be computed that
many times or more. How it is stored: Inductor's own ``_inductor_test.realize`` op, which it lowers as a stored buffer
read back by its users; where this torch has no such op or lowering, the rewrite is skipped with a warning.
"""

from __future__ import annotations

import math
from typing import Any

from tuner.backend.errors import HookUnavailable
from tuner.backend.hooks.custom_pass import Base, aten_op, log, rewrite_each, traced_call

VERSION = 1  # part of the pass's cache key: bump when the rewrite changes
AMPLIFICATION = 4
HOPS = 8  # how far after the value its readers are followed
# Ops costly for every element on both devices (a precise cos or sin is tens of instructions). exp, log, sigmoid and
# tanh are left out: a GPU runs them on its special-function units at a few instructions, Inductor already stores them
# on the CPU where several kernels read them, and a squeeze-excitation gate's sigmoid would qualify in every such CNN.
TRANSCENDENTAL = ("cos", "sin", "tan", "atan", "erf")
_PASS_THROUGH = ("cat", "_to_copy", "clone", "expand", "convert_element_type")  # not tagged pointwise, lowered as such


def _numel(node: Any) -> int | None:
    val = getattr(node, "meta", {}).get("val")
    shape = getattr(val, "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return math.prod(shape)


def _passes_through(node: Any) -> bool:
    """Whether Inductor can inline ``node``'s inputs into the kernel that computes it: a pointwise or view op."""
    import torch

    op = aten_op(node)
    return op is not None and (
        torch.Tag.pointwise in op.tags or op.is_view or op.overloadpacket.__name__ in _PASS_THROUGH
    )


def _reach(node: Any) -> int:
    """The largest tensor the pointwise and view ops after ``node`` reach within :data:`HOPS` steps."""
    best, frontier, seen = 0, [node], {node}
    for _ in range(HOPS):
        frontier = [u for n in frontier for u in n.users if u not in seen and _passes_through(u)]
        seen.update(frontier)
        best = max([best, *(_numel(u) or 0 for u in frontier)])
    return best


def _op_name(node: Any) -> str | None:
    """The transcendental op ``node`` computes (``cos``), or None."""
    op = aten_op(node)
    name = op.overloadpacket.__name__ if op is not None else None
    return name if name in TRANSCENDENTAL else None


def values(graph: Any) -> list[Any]:
    """The nodes of ``graph`` whose values the rewrite stores once: transcendental ops read broadcast."""
    out = []
    for node in graph.nodes:
        if _op_name(node) and (n := _numel(node)) and _reach(node) >= AMPLIFICATION * n:
            out.append(node)
    return out


def eligible_ops(gm: Any) -> list[str]:
    """The op of each value of this (post-AOT) graph the rewrite would store (``["cos", "sin"]``): what the capture's
    profile finds the kernels that recompute them by."""
    return [str(_op_name(n)) for n in values(gm.graph)]


def _realize_op() -> Any:
    """Inductor's op that stores its input as a buffer (registered by ``torch._inductor.test_operators``)."""
    import torch

    try:
        import torch._inductor.test_operators  # noqa: F401 - defines torch.ops._inductor_test.realize
        from torch._inductor.lowering import lowerings

        op = torch.ops._inductor_test.realize.default
    except (ImportError, AttributeError) as e:
        raise HookUnavailable(f"this torch has no _inductor_test.realize op ({e})") from e
    if op not in lowerings and op.overloadpacket not in lowerings:
        raise HookUnavailable("this Inductor has no lowering for _inductor_test.realize")
    return op


def _store(graph: Any, node: Any, op: Any, fake_mode: Any) -> None:
    with graph.inserting_after(node):
        stored = traced_call(graph, fake_mode, op, node)
    node.replace_all_uses_with(stored, delete_user_cb=lambda user: user is not stored)


class ComputeOnce(Base):  # type: ignore[misc,valid-type]
    """The post-grad pass: every value of :func:`values`, stored once; one that fails is left as it was."""

    def __call__(self, graph: Any) -> None:
        from torch._guards import detect_fake_mode

        found = values(graph)
        if not found:
            return
        try:
            op = _realize_op()
        except HookUnavailable as e:
            log.warning("tuner: %s; broadcast values are computed where they are read", e)
            return
        fake_mode = detect_fake_mode([found[0].meta["val"]])
        rewrite_each(
            graph,
            found,
            lambda node: _store(graph, node, op, fake_mode),
            "storing a broadcast value once",
            "it is computed where it is read",
        )

    def uuid(self) -> Any:
        return f"tuner-compute-once-{VERSION}"
