"""Seeds from near tasks: the winners this device's database holds for other tasks of the same kind (another
workload's, another batch size's), nearest first, so a study measures what won nearby before it searches.

A template site is near another of the same op, input count, dtypes and stride order; nearer when its sizes are
closer (in powers of two). Other kinds rank the other tasks' winners by their verified speedup; another graph's
fusion grouping lends its knobs (its vetoes name that graph's fusions), on this graph's default. Every seed is
validated against this task's own space and measured here before it can win."""

from __future__ import annotations

import math
from typing import Any

from tuner.core import InputRow, Kind
from tuner.search_spaces import Space
from tuner.search_spaces import fusion as fusion_space

MAX_SEEDS = 3


def _layout(row: InputRow) -> tuple[Any, ...]:
    return (row.dtype, tuple(sorted(range(len(row.strides)), key=lambda i: -row.strides[i])))


def site_distance(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """How far apart two template sites are (None: not comparable: other op, inputs, dtypes or layouts)."""
    try:
        ra, rb = [InputRow.parse(r) for r in a.get("inputs", [])], [InputRow.parse(r) for r in b.get("inputs", [])]
    except (ValueError, TypeError):
        return None
    if (
        a.get("op") != b.get("op")
        or len(ra) != len(rb)
        or not ra
        or [_layout(r) for r in ra] != [_layout(r) for r in rb]
    ):
        return None
    if any(len(x.sizes) != len(y.sizes) for x, y in zip(ra, rb)):
        return None
    return sum(
        abs(math.log2(max(1, p)) - math.log2(max(1, q))) for x, y in zip(ra, rb) for p, q in zip(x.sizes, y.sizes)
    )


def _shared(knobs: dict[str, Any], space: Space) -> dict[str, Any]:
    """The knobs this space has too (another graph's grouping may set one that only applies there)."""
    return {k: v for k, v in knobs.items() if k in space.default}


def near_seeds(
    kind: str,
    signature: dict[str, Any],
    space: Space,
    others: list[tuple[dict[str, Any], dict[str, Any], float | None]],
) -> list[dict[str, Any]]:
    """Up to MAX_SEEDS configs from other tasks' winners, nearest (sites) or best (other kinds) first; only those
    valid in ``space`` and other than its default."""
    if kind == Kind.SITE:
        ranked = [(d, config) for sig, config, _ in others if (d := site_distance(signature, sig)) is not None]
    elif kind == Kind.FUSION:
        ranked = [
            (-(speedup or 0.0), {**space.default, **_shared(fusion_space.knobs_of(config), space)})
            for _, config, speedup in others
        ]
    else:
        ranked = [(-(speedup or 0.0), config) for _, config, speedup in others]
    out: list[dict[str, Any]] = []
    for _, config in sorted(ranked, key=lambda dc: dc[0]):
        if config != space.default and config not in out and space.is_valid(config):
            out.append(config)
        if len(out) == MAX_SEEDS:
            break
    return out
