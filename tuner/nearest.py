"""Answers for tasks the database has no exact entry for: the winner of the nearest stored task of the same kind.

Keys are exact, so a database swept at batch 32 has no entry for the same model's sites and graphs at batch 8. A
stored task stands in for a missing one when they are the same computation at other sizes:

* a template site: the same op, fp32 matmul precision and number of inputs, each input of the same device, dtype
  and rank, with the same order of strides over the dimensions that are longer than 1 in both (so contiguous and
  channels-last never mix);
* a graph (its C++ codegen knobs or its fusion grouping): the same *family*, the graph's code with its integer
  literals left out and its inputs' dtypes and ranks (``backend/hooks/graph.graph_family``).

Of those, the one whose sizes are nearest (the sum of ``|log2 a - log2 b|`` over every dimension) gives its
winner. The backend then checks that the answer fits the new sizes (a site's choice must be one Inductor offers
or can build there computing the site's op: a conv config of the site's kernel, stride and padding, an mm config
with the site's ``EVEN_K`` and derived params, ``backend/hooks/templates``) and counts it as ``transferred`` in
``tuner.backend.stats()``. Nothing here trusts a stored
signature: rows that do not parse are left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tuner.core import Forcing, InputRow, Kind, Winners
from tuner.kinds import GRAPH_HOOK, descriptor
from tuner.keys import digest

Sizes = tuple[tuple[int, ...], ...]


def _rows(inputs: Any) -> list[InputRow] | None:
    try:
        return [InputRow.parse(list(r)) for r in inputs]
    except (TypeError, ValueError):
        return None  # symbolic sizes (dynamic shapes) or a malformed row


def _order(sizes: tuple[int, ...], strides: tuple[int, ...], keep: set[int]) -> list[int]:
    return sorted((d for d in range(len(sizes)) if d in keep), key=lambda d: (-strides[d], d))


def _same_layout(a: InputRow, b: InputRow) -> bool:
    if (a.device, a.dtype, len(a.sizes)) != (b.device, b.dtype, len(b.sizes)):
        return False
    keep = {d for d in range(len(a.sizes)) if a.sizes[d] > 1 and b.sizes[d] > 1}
    return _order(a.sizes, a.strides, keep) == _order(b.sizes, b.strides, keep)


def distance(a: Sizes, b: Sizes) -> float:
    """How far apart two tasks' sizes are: ``|log2 x - log2 y|`` summed over every dimension (inf: other ranks)."""
    if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b)):
        return math.inf
    return sum(abs(math.log2(max(x, 1)) - math.log2(max(y, 1))) for xs, ys in zip(a, b) for x, y in zip(xs, ys))


@dataclass(frozen=True)
class _Site:
    key: str
    op: str
    precision: str
    rows: tuple[InputRow, ...]
    choice: str

    def matches(self, op: str, precision: str, rows: list[InputRow]) -> bool:
        """A site stored before signatures kept the precision (empty) matches any."""
        if (self.op, len(self.rows)) != (op, len(rows)) or self.precision not in ("", precision):
            return False
        return all(map(_same_layout, self.rows, rows))


@dataclass(frozen=True)
class _Graph:
    key: str
    kind: str
    family: str
    shapes: Sizes
    config: dict[str, Any]


@dataclass(frozen=True)
class Transfer:
    """What a task without an entry gets: the stored ``config`` of task ``source`` (a key), ``distance`` away."""

    source: str
    config: dict[str, Any]
    distance: float


def _nearest(candidates: Iterable[tuple[str, Sizes, dict[str, Any]]], sizes: Sizes) -> Transfer | None:
    best = min(((distance(s, sizes), key, cfg) for key, s, cfg in candidates), default=None, key=lambda t: (t[0], t[1]))
    if best is None or math.isinf(best[0]):
        return None
    return Transfer(best[1], best[2], best[0])


def parse_shapes(value: Any) -> Sizes | None:
    """A stored signature's ``shapes`` as sizes; None where they do not parse (symbolic, malformed or missing)."""
    try:
        return tuple(tuple(int(d) for d in s) for s in value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Nearest:
    """The stored winners that can stand in for other sizes, by kind."""

    sites: tuple[_Site, ...] = ()
    graphs: tuple[_Graph, ...] = ()
    _cache: dict[Any, Transfer | None] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_winners(cls, winners: Winners) -> Nearest:
        """From ``{task key: (kind, config, signature)}`` of winners already validated against their spaces."""
        sites, graphs = [], []
        for key, (kind, config, sig) in sorted(winners.items()):
            if kind == Kind.SITE:
                rows = _rows(sig.get("inputs", []))
                op, choice = sig.get("op"), config.get("choice")
                if rows and isinstance(op, str) and isinstance(choice, str):
                    sites.append(_Site(key, op, str(sig.get("fp32_precision", "")), tuple(rows), choice))
            elif descriptor(kind).hook == GRAPH_HOOK and descriptor(kind).transfers:
                shapes, family = parse_shapes(sig.get("shapes")), sig.get("family")
                if shapes is not None and isinstance(family, str):  # the answer as a compile applies it
                    graphs.append(
                        _Graph(key, str(kind), family, shapes, Forcing.of_task(kind, key, config, sig).get(kind, key))
                    )
        return cls(tuple(sites), tuple(graphs))

    @property
    def digest(self) -> str:
        return digest([[s.key for s in self.sites], [g.key for g in self.graphs]])[:16]

    def without(self, *kinds: str) -> Nearest:
        """These kinds' graph answers left out (a site answer is the site kind's)."""
        drop = {str(k) for k in kinds}
        return Nearest(() if Kind.SITE in drop else self.sites, tuple(g for g in self.graphs if g.kind not in drop))

    def __bool__(self) -> bool:
        return bool(self.sites or self.graphs)

    def site(self, payload: dict[str, Any]) -> Transfer | None:
        """The winner of the nearest stored site of the same op and layout as ``payload`` (a site's key payload)."""
        rows = _rows(payload.get("inputs", []))
        if not rows:
            return None
        op, precision = str(payload.get("op")), str(payload.get("fp32_precision", ""))
        key = ("site", op, precision, tuple(rows))
        if key not in self._cache:
            same = [s for s in self.sites if s.matches(op, precision, rows)]
            sizes = tuple(r.sizes for r in rows)
            self._cache[key] = _nearest(
                ((s.key, tuple(r.sizes for r in s.rows), {"choice": s.choice}) for s in same), sizes
            )
        return self._cache[key]

    def graph(self, kind: str, family: str, shapes: Sizes | None) -> Transfer | None:
        """The winner of the nearest stored graph task of ``kind`` in ``family``, as a compile applies it (a fusion
        grouping as its Inductor patches and vetoes)."""
        if shapes is None:
            return None
        key = ("graph", str(kind), family, shapes)
        if key not in self._cache:
            same = [g for g in self.graphs if g.kind == kind and g.family == family]
            self._cache[key] = _nearest(((g.key, g.shapes, g.config) for g in same), shapes)
        return self._cache[key]


__all__ = ["Nearest", "Transfer", "distance", "parse_shapes"]
