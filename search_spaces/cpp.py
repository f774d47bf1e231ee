"""CPU graph-level space: Inductor's C++/OpenMP codegen knobs, and CPP GEMM blocking where that template is in play.

Config keys are Inductor config names (``cpp.simdlen``), so a config is applied as one Inductor config patch
with nothing to translate. The default is
read from the installed Inductor, so trial one is exactly what Inductor would do.
"""

from __future__ import annotations

import re
from typing import Any

from tuner.kinds import GRAPH_HOOK, TaskKind
from tuner.core import Kind
from tuner.search_spaces.base import Bool, Space, choice, with_default

FAMILY = Kind.CPP_GRAPH
_CACHE_BLOCKINGS = (None, "1,1,4", "2,4,8", "4,8,16", "8,16,32")


MAX_THREADS = 1024  # more than any CPU a graph is compiled for has: a task claiming more came from a crafted file
_ISA = re.compile(r"^[A-Za-z0-9_ +-]{0,32}$")


def _thread_factors(threads: int, limit: int = 12) -> list[str]:
    """The first ``limit`` splits m,n,k of ``threads`` (m*n*k == threads), m then n ascending: linear in ``threads``."""
    out = []
    for m in range(1, threads + 1):
        rest, mod = divmod(threads, m)
        for n in range(1, rest + 1) if mod == 0 else ():
            if rest % n == 0:
                out.append(f"{m},{n},{rest // n}")
                if len(out) == limit:
                    return out
    return out


KNOBS = (
    "cpp.simdlen",
    "cpp.min_chunk_size",
    "cpp.max_horizontal_fusion_size",
    "cpp.enable_tiling_heuristics",
    "cpp.enable_loop_tail_vec",
    "cpp.gemm_max_k_slices",
    "cpp.gemm_thread_factors",
    "cpp.gemm_cache_blocking",
)


# Inductor's own values of the knobs, the same on torch 2.11 to 2.14: a space never reads Inductor (only backend/ does);
# tests/search_spaces/test_spaces.py holds these to the installed Inductor's (backend/defaults.py).
DEFAULTS = {
    "cpp.simdlen": None,
    "cpp.min_chunk_size": 512,
    "cpp.max_horizontal_fusion_size": 16,
    "cpp.enable_tiling_heuristics": True,
    "cpp.enable_loop_tail_vec": True,
    "cpp.gemm_max_k_slices": 1,
    "cpp.gemm_thread_factors": None,
    "cpp.gemm_cache_blocking": None,
}


def space(context: dict[str, Any]) -> Space:
    """``context``: ``isa`` (e.g. AVX512), ``threads``, ``has_cpp_gemm``; all from the task's signature."""
    d = DEFAULTS
    isa, threads = context.get("isa", ""), context.get("threads", 1)
    if not isinstance(isa, str) or not _ISA.match(isa):
        raise ValueError(f"isa {str(isa)[:40]!r} is not an instruction set's name")
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads {str(threads)[:20]} is outside [1, {MAX_THREADS}]")
    simd = [None, 0, 256] + ([512] if "AVX512" in isa else [])
    params = [
        choice("cpp.simdlen", with_default(simd, d["cpp.simdlen"])),
        choice("cpp.min_chunk_size", with_default([1, 64, 256, 512, 1024, 4096], d["cpp.min_chunk_size"])),
        choice("cpp.max_horizontal_fusion_size", with_default([0, 4, 16, 64], d["cpp.max_horizontal_fusion_size"])),
        Bool("cpp.enable_tiling_heuristics"),
        Bool("cpp.enable_loop_tail_vec"),
    ]
    keep = [p.name for p in params]
    if context.get("has_cpp_gemm"):
        params += [
            choice("cpp.gemm_max_k_slices", with_default([1, 2, 4], d["cpp.gemm_max_k_slices"])),
            choice(
                "cpp.gemm_thread_factors", with_default([None, *_thread_factors(threads)], d["cpp.gemm_thread_factors"])
            ),
            choice("cpp.gemm_cache_blocking", with_default(list(_CACHE_BLOCKINGS), d["cpp.gemm_cache_blocking"])),
        ]
        keep = [p.name for p in params]
    default = {k: d[k] for k in keep}
    return Space(FAMILY, tuple(params), default, (), dict(context))


def graph_task(graph: dict[str, Any], sites: list[dict[str, Any]], info: dict[str, Any]) -> dict[str, Any]:
    """A captured CPU graph's task space: the machine's ISA and threads, and whether a CPP GEMM site is in play."""
    has_gemm = any(s.get("graph") == graph["key"] and any(c.startswith("cpp:") for c in s["choices"]) for s in sites)
    return {"isa": info.get("isa", ""), "threads": info.get("threads", 1), "has_cpp_gemm": has_gemm}


KIND = TaskKind(
    FAMILY,
    space,
    GRAPH_HOOK,
    phase="graph knobs",
    cost="graph",
    group="graph-knob",
    devices=("cpu",),
    beside_base=True,
    graph_task=graph_task,
)
