"""The truth about compiles that Inductor serves from its caches.

A graph served from the AOTAutograd cache runs none of tuner's hooks, and one served from the FX-graph cache skips
lowering, so its template sites are never looked up: ``stats()`` would say 0 hits and 0 misses for a compile that
applied every winner (the cache key carries the answers' digest, so the cached code is what that forcing made).
So the first real compile of a graph under a forcing records its hits and misses here, keyed by the graph, its
inputs and the forcing, and a later compile that Inductor serves from a cache counts what was recorded, plus one
``cached``. Records are small JSON files in tuner's cache folder, read as plain numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner.backend import counters

COUNTED = ("hits", "transferred", "misses")
_CACHE_HITS = (("aot_autograd", "autograd_cache_hit"), ("inductor", "fxgraph_cache_hit"))


def inductor_cache_hits() -> int:
    """How many times Inductor's caches have served a graph in this process (0 where this torch lacks the counters)."""
    try:
        from torch._dynamo.utils import counters as dynamo_counters
    except ImportError:
        return 0
    return sum(int(dynamo_counters[group][name]) for group, name in _CACHE_HITS)


def compile_key(gm: Any, example_inputs: Sequence[Any], forcing_digest: str, extra: Any) -> str | None:
    """The graph's code, its inputs' metadata, the forcing and anything else that changes the compile; None for a
    graph it cannot describe (its counts are then just what the lookups saw)."""
    try:
        return _key(gm, example_inputs, forcing_digest, extra)
    except Exception:  # noqa: BLE001 - bookkeeping must never fail a compile
        return None


def _key(gm: Any, example_inputs: Sequence[Any], forcing_digest: str, extra: Any) -> str:
    import torch

    meta = [
        (tuple(x.shape), str(x.dtype), tuple(x.stride()), str(x.device)) if isinstance(x, torch.Tensor) else repr(x)
        for x in example_inputs
    ]
    text = json.dumps([str(getattr(gm, "code", "")), repr(meta), forcing_digest, repr(extra), torch.__version__])
    return hashlib.sha256(text.encode()).hexdigest()


def _path(folder: Path, key: str) -> Path:
    return folder / "compile-stats" / f"{key[:40]}.json"


def remember(folder: Path, key: str, delta: dict[str, int]) -> None:
    path = _path(folder, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({k: int(delta.get(k, 0)) for k in COUNTED}))
        tmp.replace(path)
    except OSError:
        pass  # the counts of a later cache-served compile are then incomplete, nothing worse


def recalled(folder: Path, key: str) -> dict[str, int] | None:
    try:
        data = json.loads(_path(folder, key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k, 0), int) and data.get(k, 0) >= 0 for k in COUNTED):
        return None
    return {k: data.get(k, 0) for k in COUNTED}


def settle(folder: Path, key: str | None, delta: dict[str, int], served_from_cache: bool) -> dict[str, int]:
    """Record a real compile's counts, or count a cache-served one's as recorded; returns the graph's counts."""
    if key is None:
        return delta
    if not served_from_cache:
        if any(delta.get(k) for k in COUNTED):
            remember(folder, key, delta)
        return delta
    counters.bump("cached")
    past = recalled(folder, key)
    if past is None:
        return delta
    for k in COUNTED:
        if past[k] > delta.get(k, 0):
            counters.bump(k, past[k] - delta.get(k, 0))
    return {**delta, **{k: max(past[k], delta.get(k, 0)) for k in COUNTED}}
