"""Which captured kernel runs a template site's epilogue where its library default leaves it to a kernel of its own.

A Triton template takes the pointwise ops that read its output into its own store; cuBLAS and cuDNN leave them to a
kernel. What the template saves is that kernel, which the site's own timing cannot see. The recording names the
site's epilogue ops (``hooks/epilogue.pointwise_users``); Inductor names each kernel after the ops fused into it
(``triton_poi_fused_gelu_view_3``). The kernel is a pointwise one whose name holds every epilogue op and that the step
launches as often as the site is met. Where several match, the fastest is taken. Where none does and a reduction kernel
holds the ops (a residual add fused into the layer norm after it), a template taking them in saves no kernel: the
reduction still runs, reading the sum instead of making it, so the site is credited nothing. Where no kernel holds them,
the step's median pointwise kernel stands in (``tuner.sweep.profile.epilogue_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Epilogue:
    """A site's epilogue kernel: its default time a launch timed alone and its name; ``ms`` 0 where the epilogue runs
    inside a reduction kernel, which a template taking the ops in does not remove. ``device_ms``: its device time a
    launch inside the step, as profiled (None: not profiled)."""

    ms: float
    kernel: str
    device_ms: float | None = None

    def cost(self, in_graph: bool) -> float:
        """What taking it in saves: inside a CUDA graph, where no launch is left to save, its device time in the step
        (where profiled); else its time alone."""
        return self.device_ms if in_graph and self.device_ms is not None and self.ms > 0 else self.ms


def _holds(name: str, op: str) -> bool:
    return f"_{op}_" in f"{name}_"


def _matching(site: dict[str, Any], kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The captured pointwise kernels whose names hold every one of ``site``'s epilogue ops and that the step launches
    as often as the site is met."""
    ops = [str(op) for op in site.get("epilogue_ops") or []]
    if not ops:
        return []
    count = int(site.get("count") or 1)
    return [
        k
        for k in kernels
        if "_poi_" in (name := str(k.get("name", "")))
        and int(k.get("launches") or 1) == count
        and (k.get("default_ms") or 0) > 0
        and all(_holds(name, op) for op in ops)
    ]


def _in_reduction(site: dict[str, Any], kernels: list[dict[str, Any]]) -> Epilogue | None:
    """A credit of nothing, naming the reduction kernel (``triton_per_``, ``triton_red_``) whose name holds every one of
    ``site``'s epilogue ops, of those the one fused of the fewest ops; None where none does."""
    ops = [str(op) for op in site.get("epilogue_ops") or []]
    names = [
        name
        for k in kernels
        if ("_per_" in (name := str(k.get("name", ""))) or "_red_" in name) and all(_holds(name, op) for op in ops)
    ]
    return Epilogue(0.0, min(names, key=lambda n: (n.count("_"), n))) if ops and names else None


def _fastest(found: list[dict[str, Any]]) -> Epilogue | None:
    if not found:
        return None
    best = min(found, key=lambda k: float(k["default_ms"]))
    return Epilogue(float(best["default_ms"]), str(best["name"]), float(d) if (d := best.get("device_ms")) else None)


def site_epilogue(site: dict[str, Any], kernels: list[dict[str, Any]]) -> Epilogue | None:
    """The captured pointwise kernel that runs ``site``'s epilogue (a recorded site: its ``epilogue_ops`` and
    ``count``), or None where none matches."""
    return _fastest(_matching(site, kernels))


def site_epilogues(sites: list[dict[str, Any]], kernels: list[dict[str, Any]]) -> dict[str, Epilogue]:
    """{site key: its epilogue kernel} for the recorded ``sites`` where one matches. A kernel runs one site's epilogue:
    where several sites match it, it is the one whose epilogue names the most of its ops, and no one's where two tie
    (a residual ``add`` matches the GELU kernel that only an FFN's first GEMM feeds). A site that owns no pointwise
    kernel and whose ops a reduction kernel holds is credited nothing (``Epilogue.ms`` 0): taking the add in saves no
    kernel there."""
    found = {s["key"]: (len(set(s.get("epilogue_ops") or [])), _matching(s, kernels)) for s in sites}
    claims: dict[str, list[int]] = {}
    for n, matched in found.values():
        for k in matched:
            claims.setdefault(str(k["name"]), []).append(n)
    owned = {
        key: _fastest([k for k in matched if _owns(n, claims[str(k["name"])])]) for key, (n, matched) in found.items()
    }
    return {s["key"]: e for s in sites if (e := owned[s["key"]] or _in_reduction(s, kernels)) is not None}


def _owns(n: int, claims: list[int]) -> bool:
    """Whether a site whose epilogue names ``n`` ops owns a kernel that sites naming ``claims`` ops each match."""
    return n == max(claims) and claims.count(n) == 1


def _launches(kernels: list[dict[str, Any]], name: str) -> int:
    return sum(int(k.get("launches") or 1) for k in kernels if str(k.get("name", "")) == name)


def still_apart(epilogues: dict[str, Epilogue], before: list[dict[str, Any]], after: list[dict[str, Any]]) -> set[str]:
    """The sites (of ``epilogues``) whose epilogue kernel launches no less often in ``after`` (a capture with the
    winners forced) than in ``before`` (the capture's, Inductor's defaults): the template forced there did not take it
    in. Inductor keeps apart an epilogue that shares no data at the same index with the template, one that reads its
    output through a view, unless ``aggressive_fusion`` is on (``hooks/fusion.refused_for_no_shared_data``)."""
    return {key for key, e in epilogues.items() if _launches(after, e.kernel) >= _launches(before, e.kernel) > 0}
