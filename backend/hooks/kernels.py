"""Hook (a): Inductor-generated Triton kernels (pointwise, reduction, persistent reduction).

Each kernel is a ``runtime.triton_heuristics.CachingAutotuner`` living in a module that
``PyCodeCache`` loaded. This adapter finds the kernels a compile produced, describes them
stably (name-stripped source + size hints: Inductor's own lookup hash) and forces configs at
compile time through ``autotune_lookup_table``. Capturing their launches and compiling other
configs is the sweep's (``backend/instrument/capture.py``).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from tuner.backend import counters, process
from tuner.backend.errors import HookUnavailable
from tuner.once import warn_once

try:
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.runtime import triton_heuristics as _th
except ImportError as e:  # pragma: no cover - depends on the torch build
    PyCodeCache = _th = None  # type: ignore[assignment]
    _IMPORT_ERROR: Exception | None = e
else:
    _IMPORT_ERROR = None

TUNABLE = ("pointwise", "reduction", "persistent_reduction")
_NAME = re.compile(r"^def [^(]+\(")


def check() -> None:
    if _IMPORT_ERROR is not None:
        raise HookUnavailable(f"torch._inductor.runtime.triton_heuristics is unavailable: {_IMPORT_ERROR}")
    for name in ("CachingAutotuner", "generate_lookup_hash_from_source_code"):
        if not hasattr(_th, name):
            raise HookUnavailable(
                f"torch._inductor.runtime.triton_heuristics.{name} is missing; Triton kernel configs cannot be forced"
            )
    if not hasattr(_th.CachingAutotuner, "_precompile_config"):
        raise HookUnavailable(
            "CachingAutotuner._precompile_config is missing; Triton kernel configs cannot be benchmarked"
        )


# --- finding kernels ---------------------------------------------------------------------------
def modules_mark() -> int:
    return len(PyCodeCache.modules) if PyCodeCache is not None else 0


def kernels_since(mark: int) -> list[Any]:
    """The CachingAutotuner objects in modules loaded since ``mark`` (each object once)."""
    if PyCodeCache is None:
        return []
    seen: dict[int, Any] = {}
    for mod in list(PyCodeCache.modules)[mark:]:
        for v in list(vars(mod).values()):
            if isinstance(v, _th.CachingAutotuner) and id(v) not in seen:
                seen[id(v)] = v
    return list(seen.values())


def heuristic(k: Any) -> str:
    return str(getattr(k, "heuristic_type", "") or "").split(".")[-1].lower()


def _size_hints(k: Any) -> Any:
    sh = k.size_hints
    return dict(sh) if isinstance(sh, dict) else list(sh) if sh is not None else None


def tunable(kernels: list[Any]) -> list[tuple[str, str, str]]:
    """(heuristic, lookup hash, name) of each kernel whose config tuner tunes (templates and others left out). Used
    for counting only: a kernel this torch lays out otherwise is left out with one warning, never a failed compile."""
    out = []
    for k in kernels:
        if (kind := heuristic(k)) not in TUNABLE:
            continue
        try:
            out.append((kind, lookup_hash(k), str(getattr(k.fn, "__name__", "kernel"))))
        except (AttributeError, TypeError) as e:
            _uncounted(type(e).__name__)
    return out


def _uncounted(why: str) -> None:
    warn_once(
        logging.getLogger("tuner"),
        f"backend 'tuned': a Triton kernel could not be keyed ({why}); such kernels are not counted in stats()",
    )


def lookup_hash(k: Any) -> str:
    """Inductor's own key for ``autotune_lookup_table``: size hints + name-stripped source."""
    return _th.generate_lookup_hash_from_source_code(str(k.size_hints), k.fn.src)


def payload(k: Any) -> dict[str, Any]:
    """What identifies the kernel across processes and graphs (no name, no file path)."""
    meta = getattr(k, "triton_meta", {}) or {}
    return {
        "heuristic": heuristic(k),
        "src": _NAME.sub("(", k.fn.src.strip(), count=1),
        "size_hints": _size_hints(k),
        "signature": {str(a): str(t) for a, t in dict(meta.get("signature", {})).items()},
        "constants": {str(a): repr(v) for a, v in dict(meta.get("constants", {})).items()},
    }


# --- compile time ------------------------------------------------------------------------------
def lookup_table_patch(table: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Inductor config patches that force ``table`` ({lookup hash: config}) and keep Inductor from moving away."""
    if not table:
        return {}
    return {"autotune_lookup_table": dict(table), "coordinate_descent_tuning": False, "dynamic_scale_rblock": False}


def forget_loaded_kernels() -> None:
    """A module loaded earlier in this process keeps its kernels' configs: forget loaded modules so the
    next compile imports them afresh and sees the lookup table (compiled functions keep theirs)."""
    if PyCodeCache is not None and hasattr(PyCodeCache, "cache_clear"):
        PyCodeCache.cache_clear()
    try:  # kernels compiled earlier in this process are reused by source unless forgotten too
        from torch._inductor.async_compile import CompiledTritonKernels

        CompiledTritonKernels.cache_clear()
    except (ImportError, AttributeError):
        pass


def _counted(name: str, owner: Any, attr: str, *counts: str) -> None:
    """Wrap ``owner.attr`` (once per process, under ``name``) so that each call bumps the counters ``counts``."""
    if process.applied(name) or not hasattr(owner, attr):
        return
    original = getattr(owner, attr)

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        for c in counts:
            counters.bump(c)
        return original(self, *args, **kwargs)

    process.patch(name, owner, attr, counted)


def count_runtime_autotuning() -> None:
    """Count Inductor's runtime autotuning of kernels with several configs as benchmarks (honest stats)."""
    if _th is not None:
        _counted("count runtime autotuning", _th.CachingAutotuner, "benchmark_all_configs", "benchmarks")


def count_multi_kernel_timing() -> None:
    """Count a multi-kernel's timing of its variants at its first call as a benchmark: ``triton.multi_kernel=1``, which
    tuner never offers, but a user's ``TORCHINDUCTOR_MULTI_KERNEL=1`` sets (2 and 3 pick by the value, timing nothing)."""
    try:
        from torch._inductor.codegen.multi_kernel import MultiKernelCall
    except ImportError:  # pragma: no cover - depends on the torch build
        return
    _counted("count multi-kernel timing", MultiKernelCall, "benchmark_sub_kernels", "benchmarks", "multi_kernel_timed")
