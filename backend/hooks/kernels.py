"""Hook (a): Inductor-generated Triton kernels (pointwise, reduction, persistent reduction).

Each kernel is a ``runtime.triton_heuristics.CachingAutotuner`` living in a module that
``PyCodeCache`` loaded. This adapter finds the kernels a compile produced, describes them
stably (name-stripped source + size hints: Inductor's own lookup hash), records the real
launch arguments of their first call, compiles one config into a launcher through
Inductor's own path, and forces configs at compile time through ``autotune_lookup_table``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuner.backend import counters, process
from tuner.backend.errors import HookUnavailable

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
            raise HookUnavailable(f"torch._inductor.runtime.triton_heuristics.{name} is missing; Triton kernel configs cannot be forced")
    if not hasattr(_th.CachingAutotuner, "_precompile_config"):
        raise HookUnavailable("CachingAutotuner._precompile_config is missing; Triton kernel configs cannot be benchmarked")


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


@functools.cache
def _uncounted(why: str) -> None:
    logging.getLogger("tuner").warning("backend 'tuned': a Triton kernel could not be keyed (%s); such kernels are not counted in stats()", why)


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


def config_dict(cfg: Any) -> dict[str, int]:
    """A ``triton.Config`` as the plain dict tuner stores (block sizes, num_warps, num_stages)."""
    out = {k: int(v) for k, v in dict(cfg.kwargs).items() if "BLOCK" in k}
    out["num_warps"] = int(cfg.num_warps)
    out["num_stages"] = int(cfg.num_stages)
    return out


def chosen_config(k: Any) -> dict[str, int] | None:
    """The config Inductor settled on (after the first call, ``launchers`` holds only the chosen one)."""
    launchers = getattr(k, "launchers", None) or []
    if len(launchers) != 1:
        return None
    return config_dict(launchers[0].config)


def make_config(config: dict[str, Any]) -> Any:
    from torch._inductor.runtime.triton_compat import Config

    blocks = {k: int(v) for k, v in config.items() if "BLOCK" in k}
    return Config(blocks, num_warps=int(config["num_warps"]), num_stages=int(config["num_stages"]))


# --- recording the real launch arguments -------------------------------------------------------
def clone_preserving_strides(x: Any) -> Any:
    """A tensor copied with its strides (a plain ``clone`` would make a strided view contiguous); other values as they
    are. The memory span the view covers is copied as it is, so an expanded input (stride 0: elements sharing memory,
    e.g. vit's class token) keeps its layout too."""
    import torch

    if isinstance(x, torch.Tensor):
        if x.numel() == 0:
            return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device)
        span = 1 + sum((n - 1) * st for n, st in zip(x.size(), x.stride()))
        buf = torch.as_strided(x, (span,), (1,)).clone()
        return torch.as_strided(buf, x.size(), x.stride())
    return x


@dataclass
class Captured:
    """A kernel with the arguments of its first call (cloned before the call, so inputs are intact) and how many
    times the captured step launched it (Inductor compiles a kernel shared by a model's repeated blocks once)."""

    kernel: Any
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    called: bool = False
    calls: int = 0  # launches while ``counting``: the captured step's (see :func:`stop_counting`)
    counting: bool = True


def capture_first_call(kernels: list[Any]) -> list[Captured]:
    """Wrap each kernel's ``run`` (on the instance, still a method of it) so its first call's arguments are kept.

    It must stay a bound method: Inductor's template benchmark (``TritonBenchmarkRequest.make_run_fn``) sets
    ``run.__self__.with_bandwidth_info``, and a template choice rendered during the capture shares its module, so
    its kernel object, with the same choice rendered again in a later site batch (found on the H200: every site
    batch with one of Inductor's Triton choices failed to compile)."""
    out = []
    for k in kernels:
        cap = Captured(k)
        original = k.run

        def run(self: Any, *args: Any, _cap: Captured = cap, _orig: Callable[..., Any] = original, **kwargs: Any) -> Any:
            _cap.calls += _cap.counting
            if not _cap.called:
                _cap.called = True
                _cap.args = [clone_preserving_strides(a) for a in args]
                _cap.kwargs = {n: clone_preserving_strides(v) for n, v in kwargs.items() if n != "stream"}
            return _orig(*args, **kwargs)

        process.rebind(k, "run", types.MethodType(run, k))
        out.append(cap)
    return out


def stop_counting(captured: list[Captured]) -> None:
    """The captured step is over: later calls (the same compile timed as a baseline) are not launches per step."""
    for cap in captured:
        cap.counting = False


# --- compiling and launching one config --------------------------------------------------------
_compile_lock = threading.Lock()


def _live_fn(k: Any) -> None:
    if getattr(k.fn, "fn", True) is None:  # compiled in a worker and unpickled: reload the JIT function
        with _compile_lock:
            if k.fn.fn is None:
                k.fn = k._reload_kernel().fn


def launcher(k: Any, config: dict[str, Any]) -> Any:
    """Compile ``config`` for kernel ``k`` through Inductor's own path; returns its launcher.
    Raises what Triton raises (e.g. OutOfResources) for a config that cannot run."""
    _live_fn(k)
    result = k._precompile_config(make_config(config))
    return result.make_launcher()


def raw_stream(device_index: int) -> Any:
    import torch

    return torch.cuda.current_stream(device_index).cuda_stream


def call(launch: Any, args: list[Any], kwargs: dict[str, Any], stream: Any) -> None:
    launch(*args, **kwargs, stream=stream)


def arg_names(k: Any) -> list[str]:
    return list(getattr(k.fn, "arg_names", []) or [])


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


def count_runtime_autotuning() -> None:
    """Count Inductor's runtime autotuning of kernels with several configs as benchmarks (honest stats)."""
    if process.applied("count runtime autotuning") or _th is None or not hasattr(_th.CachingAutotuner, "benchmark_all_configs"):
        return
    original = _th.CachingAutotuner.benchmark_all_configs

    def benchmark_all_configs(self: Any, *args: Any, **kwargs: Any) -> Any:
        counters.bump("benchmarks")
        return original(self, *args, **kwargs)

    process.patch("count runtime autotuning", _th.CachingAutotuner, "benchmark_all_configs", benchmark_all_configs)
