"""Fusion groupings of one graph: Inductor's fusion knobs plus vetoes of individual fusions.

(a) Graph-level knobs, named as Inductor's config (a config applies as ``inductor_config.patch``):
``max_fusion_size``, ``aggressive_fusion``, ``epilogue_fusion``, ``prologue_fusion``,
``score_fusion_memory_threshold``, the three ``realize_*_threshold`` (always set explicitly: 2.14
resolves two of them per device when left None), ``split_reductions``, ``loop_ordering_after_fusion``;
on CUDA also ``combo_kernels`` and ``triton.tiling_prevents_{pointwise,reduction}_fusion``.
(b) Per-pair decisions: ``veto.<pair id>`` (true: Inductor may not make that fusion) for the pairs with
the highest scores among those Inductor made while the graph was captured.
(c) Evidence: where the recording saw Inductor refuse template epilogues only because they share no data at the
same index (``unshared_epilogues``), the study first measures the default with ``aggressive_fusion``, which admits
them: each one fused is a kernel launch fewer and an output not written and read back. On the CPU,
``cpp.max_horizontal_fusion_size`` stays in the C++ codegen space (``cpp_graph``), tuned before this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.core import Kind
from tuner.search_spaces.base import Bool, Param, Space, choice, with_default

FAMILY = Kind.FUSION
MAX_PAIRS = 12
_CUDA_ONLY = ("combo_kernels", "triton.tiling_prevents_pointwise_fusion", "triton.tiling_prevents_reduction_fusion")


def inductor_defaults(device: str) -> dict[str, Any]:
    """This Inductor's own values, with the per-device thresholds resolved as 2.14 would resolve them."""
    from tuner.backend.process import inductor_flag as flag

    cpu = device == "cpu"
    d: dict[str, Any] = {
        "max_fusion_size": int(flag("max_fusion_size")),
        "aggressive_fusion": bool(flag("aggressive_fusion")),
        "epilogue_fusion": bool(flag("epilogue_fusion")),
        "prologue_fusion": bool(flag("prologue_fusion")),
        "score_fusion_memory_threshold": int(flag("score_fusion_memory_threshold")),
        "realize_reads_threshold": int(flag("realize_reads_threshold")),
        "realize_opcount_threshold": int(flag("realize_opcount_threshold") or (50 if cpu else 30)),
        "realize_acc_reads_threshold": int(flag("realize_acc_reads_threshold") or (12 if cpu else 8)),
        "split_reductions": bool(flag("split_reductions")),
        "loop_ordering_after_fusion": bool(flag("loop_ordering_after_fusion")),
    }
    if not cpu:
        for name in _CUDA_ONLY:
            d[name] = bool(flag(name))
    return d



def space(context: dict[str, Any]) -> Space:
    """``context``: ``device``, ``defaults`` (Inductor's values at capture), ``pairs`` (ids of fusions to search)."""
    d = {str(k): v for k, v in dict(context["defaults"]).items()}
    ints = {
        "max_fusion_size": [8, 16, 32, 64, 128],
        "score_fusion_memory_threshold": [1, 10, 100],
        "realize_reads_threshold": [2, 4, 8],
        "realize_opcount_threshold": [10, 30, 50, 100],
        "realize_acc_reads_threshold": [4, 8, 12, 16],
    }
    params: list[Param] = []
    for name in sorted(d):
        if name in ints:
            params.append(choice(name, with_default(ints[name], int(d[name]))))
        elif name in _CUDA_ONLY and context.get("device") == "cpu":
            continue
        else:
            params.append(Bool(name))
    pairs = [str(p) for p in context.get("pairs", [])][:MAX_PAIRS]
    params += [Bool(f"veto.{p}") for p in pairs]
    default = {**{p.name: d[p.name] for p in params if p.name in d}, **{f"veto.{p}": False for p in pairs}}
    ctx = {"device": context.get("device"), "defaults": d, "pairs": pairs}
    if int(context.get("unshared_epilogues") or 0) > 0:  # absent otherwise: older tasks keep their fingerprint
        ctx["unshared_epilogues"] = int(context["unshared_epilogues"])
    return FusionSpace(FAMILY, tuple(params), default, (), ctx)


@dataclass(frozen=True)
class FusionSpace(Space):
    def evidence(self) -> list[dict[str, Any]]:
        """The default with ``aggressive_fusion``, where the graph has template epilogues only it would fuse."""
        if not self.context.get("unshared_epilogues") or self.default.get("aggressive_fusion", True):
            return []
        return [{**self.default, "aggressive_fusion": True}]


def knobs_of(config: dict[str, Any]) -> dict[str, Any]:
    """The graph-level knobs of a grouping: the part that means the same in another graph (vetoes name its pairs)."""
    return {k: v for k, v in config.items() if not k.startswith("veto.")}


def to_patches(config: dict[str, Any]) -> dict[str, Any]:
    """Inductor config patches, plus ``vetoes``: the pair ids Inductor may not fuse."""
    out = {k: v for k, v in config.items() if not k.startswith("veto.")}
    out["vetoes"] = sorted(k.removeprefix("veto.") for k, v in config.items() if k.startswith("veto.") and v)
    return out
