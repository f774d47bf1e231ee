"""Hook: matrix multiplies that read the same input through frozen weights (a transformer's q, k and v projections,
an MLP's gate and up projections) merged into one, over their weights side by side.

Inductor lowers each linear layer as a GEMM of its own, and max-autotune tunes each alone. Where several read the
same input, one GEMM over ``[K, N1 + N2 + ...]`` reads the input once and fills more of the device where each N is
small (a grouped-query model's k and v: N = 256); each old output becomes a column slice of the new one. Only where
every weight, and for ``addmm`` every bias, is a constant of the graph (a frozen compile): the concatenation is
computed once, and the weights it replaces are dropped from the graph. The rewrite (:class:`MergeGemms`, a post-grad
pass) runs where the fusion study turns the knob on (``search_spaces/fusion.py``); :func:`eligible_dims` lists where it
applies. On the CPU, freezing packs linear weights for oneDNN before any post-grad pass, so it finds nothing there.
"""

from __future__ import annotations

import functools
from typing import Any

from tuner.backend.hooks.custom_pass import Base, rewrite_each, traced_call

VERSION = 1  # part of the pass's cache key: bump when the rewrite changes


def _targets() -> tuple[Any, Any]:
    import torch

    return torch.ops.aten.mm.default, torch.ops.aten.addmm.default


def _constant(node: Any, dims: int) -> bool:
    val = getattr(node, "meta", {}).get("val")
    return getattr(node, "op", None) == "get_attr" and val is not None and val.dim() == dims


def _parts(node: Any) -> tuple[Any, Any, Any] | None:
    """(input, weight, bias or None) of a GEMM whose weight (and bias) are constants; None for any other node."""
    mm, addmm = _targets()
    if node.op != "call_function" or node.kwargs or node.target not in (mm, addmm):
        return None
    bias, x, w = (None, *node.args) if node.target is mm else node.args
    if (
        len(node.args) != (2 if node.target is mm else 3)
        or not _constant(w, 2)
        or (bias is not None and not _constant(bias, 1))
    ):
        return None
    return x, w, bias


def groups(graph: Any) -> list[list[Any]]:
    """The GEMMs of ``graph`` to merge, in graph order: those of one op over one input node, with weights of one
    inner size, dtype and device, two or more."""
    by: dict[tuple[Any, ...], list[Any]] = {}
    for node in graph.nodes:
        if (parts := _parts(node)) is not None:
            x, w, _ = parts
            val = w.meta["val"]
            by.setdefault((node.target, x, int(val.shape[0]), val.dtype, val.device), []).append(node)
    return [g for g in by.values() if len(g) >= 2]


def eligible_dims(gm: Any) -> list[list[Any]]:
    """``[op, M, K, N]`` of each GEMM of this (post-AOT) graph the rewrite would merge (``mm`` or ``addmm``; a dynamic
    size as -1): what the capture's profile finds them by, to weigh the rewrite by their time."""

    def size(d: Any) -> int:
        return d if isinstance(d, int) else -1

    dims = []
    for n in (n for g in groups(gm.graph) for n in g):
        m, k = _parts(n)[0].meta["val"].shape
        dims.append([n.target.overloadpacket.__name__, size(m), size(k), size(n.meta["val"].shape[1])])
    return dims


def _tensor(gm: Any, node: Any) -> Any:
    return functools.reduce(getattr, str(node.target).split("."), gm)


def _constant_node(gm: Any, tensor: Any, fake_mode: Any) -> Any:
    """A new constant of the graph, under a name of its own."""
    i = 0
    while hasattr(gm, f"_tuner_merged_{i}"):
        i += 1
    gm.register_buffer(f"_tuner_merged_{i}", tensor)
    node = gm.graph.get_attr(f"_tuner_merged_{i}")
    node.meta["val"] = fake_mode.from_tensor(tensor, static_shapes=True)
    return node


def _merge(gm: Any, nodes: list[Any], fake_mode: Any) -> None:
    """One GEMM over the weights side by side (laid out as Inductor freezes a linear layer's: the transpose of a
    contiguous ``[N, K]``), each old output a column slice of it."""
    import torch

    g = gm.graph
    parts = [_parts(n) for n in nodes]
    weight = torch.cat([_tensor(gm, w).detach().t() for _, w, _ in parts]).t()
    with g.inserting_before(nodes[0]):
        wn = _constant_node(gm, weight, fake_mode)
        args = (parts[0][0], wn)
        if parts[0][2] is not None:
            args = (_constant_node(gm, torch.cat([_tensor(gm, b).detach() for _, _, b in parts]), fake_mode), *args)
        merged = traced_call(g, fake_mode, nodes[0].target, *args)
        start, slices = 0, []
        for n in nodes:
            width = int(n.meta["val"].shape[1])
            slices.append(traced_call(g, fake_mode, torch.ops.aten.slice.Tensor, merged, 1, start, start + width))
            start += width
    for n, part in zip(nodes, slices):
        n.replace_all_uses_with(part)
        g.erase_node(n)
    _drop_unused(gm, {c for _, w, b in parts for c in (w, b) if c is not None})


def _drop_unused(gm: Any, constants: set[Any]) -> None:
    """The replaced weights, where nothing else reads them: a model's weights are not held twice."""
    for node in constants:
        if not node.users:
            target = str(node.target)
            gm.graph.erase_node(node)
            if "." not in target and not any(n.op == "get_attr" and n.target == target for n in gm.graph.nodes):
                delattr(gm, target)


class MergeGemms(Base):  # type: ignore[misc,valid-type]
    """The post-grad pass: every group of :func:`groups`, merged; a group that fails is left as it was."""

    def __call__(self, graph: Any) -> None:
        from torch._guards import detect_fake_mode

        gm = graph.owning_module
        found = groups(graph) if gm is not None else []
        if not found:
            return
        fake_mode = detect_fake_mode([found[0][0].meta["val"]])
        rewrite_each(
            graph,
            found,
            lambda nodes: _merge(gm, nodes, fake_mode),
            "merging GEMMs that read one input",
            "they are compiled as they are",
        )

    def uuid(self) -> Any:
        return f"tuner-merge-gemms-{VERSION}"
