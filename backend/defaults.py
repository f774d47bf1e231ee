"""This Inductor's own values of the knobs a search space defaults to. They are read here, in the one package that
reads Inductor, and the sweep stores them in each task's signature (a space's ``defaults``), so that a space never
reads Inductor itself and an answer is judged against the values its sweep saw."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tuner.backend.process import has_inductor_flag
from tuner.backend.process import inductor_flag as flag
from tuner.search_spaces import fusion


def values(names: Iterable[str]) -> dict[str, Any]:
    """Each named Inductor flag's current value."""
    return {name: flag(name) for name in names}


def fusion_defaults(device: str) -> dict[str, Any]:
    """This Inductor's own values, with the per-device thresholds resolved as 2.14 would resolve them."""
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
    if not cpu:  # each that this Inductor has (PDL is newer than the oldest torch supported)
        d.update(
            {
                name: int(flag(name)) if name in fusion.CHOICES else bool(flag(name))
                for name in fusion.CUDA_ONLY
                if has_inductor_flag(name)
            }
        )
    return d


__all__ = ["fusion_defaults", "values"]
