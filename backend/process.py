"""The one owner of process-wide state: every patch and flag tuner sets on torch goes through here, is recorded,
and can be undone (:func:`restore`).

- Hooks the ``tuned`` backend installs once per process (:func:`patch`): the template selector, the counter of
  Inductor's runtime autotuning.
- Per-object rebinds on objects a compile made (:func:`rebind`): a kernel's ``run`` to keep its first call's
  arguments, a site choice's ``benchmark`` to time it as a CUDA graph.
- Settings a measuring process needs before anything is traced (:func:`configure_measuring`): a sweep's spawned
  worker or ``tuner bench``, never a user's compile.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_MISSING = object()


@dataclass
class _Patch:
    target: Any  # an object, or a weak reference to one (rebinds)
    attr: str
    original: Any


_patches: dict[str, _Patch] = {}  # process-wide patches by name (each applied once)
_rebinds: list[_Patch] = []  # per-object rebinds, weakly held


def patch(name: str, target: Any, attr: str, value: Any) -> None:
    """Set ``target.attr = value`` process-wide under ``name``; setting it again keeps the first original."""
    if name not in _patches:
        _patches[name] = _Patch(target, attr, getattr(target, attr, _MISSING))
    setattr(target, attr, value)


def applied(name: str) -> bool:
    return name in _patches


def rebind(obj: Any, attr: str, value: Any) -> None:
    """Shadow ``obj.attr`` with ``value`` on this instance only; :func:`restore` takes the shadow away."""
    try:
        target: Any = weakref.ref(obj)
    except TypeError:
        target = obj
    _rebinds.append(_Patch(target, attr, obj.__dict__.get(attr, _MISSING)))
    setattr(obj, attr, value)


def restore() -> None:
    """Undo every patch and rebind, newest first."""
    for p in reversed(_rebinds):
        obj = p.target() if isinstance(p.target, weakref.ref) else p.target
        if obj is not None:
            _reset(obj, p.attr, p.original, instance=True)
    _rebinds.clear()
    for p in reversed(list(_patches.values())):
        _reset(p.target, p.attr, p.original, instance=False)
    _patches.clear()


def _reset(obj: Any, attr: str, original: Any, *, instance: bool) -> None:
    if original is not _MISSING:
        setattr(obj, attr, original)
    elif instance:
        obj.__dict__.pop(attr, None)
    else:
        with contextlib.suppress(AttributeError):
            delattr(obj, attr)


def configure_measuring(threads: int | None, freezing: bool, *, sweep: bool) -> None:
    """Settings a measuring process (a sweep's spawned worker, ``tuner bench``; never a user's compile) needs before
    anything is traced: its thread count, freezing as Dynamo reads it (at trace time, so it must be global) and
    room for many recompiles. ``sweep``: no AOTAutograd cache entries are left behind by sweep compiles."""
    import torch
    import torch._inductor.config as inductor_config

    if threads:
        torch.set_num_threads(threads)
    inductor_config.freezing = freezing
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 512)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit, 4096)
    if sweep:
        torch._functorch.config.enable_autograd_cache = False
        share_triton_cache()


def warm_compile_workers() -> None:
    """Start Inductor's pool of compile workers now, in processes of their own, as its registered backend does when
    first called; a measuring process calls this before it builds the model, so that the pool's start overlaps the
    build instead of the first compile (where, until the pool is ready, kernels compile one by one in this process).
    Where this torch lacks the helper, nothing changes but the time."""
    import logging

    try:
        from torch._inductor.async_compile import maybe_warm_pool
    except ImportError:
        logging.getLogger("tuner.backend").info(
            "torch._inductor.async_compile.maybe_warm_pool is missing: the compile workers start with the first compile"
        )
        return
    maybe_warm_pool()


def release_compile_workers(wait_s: float = 0.1) -> None:
    """Ask Inductor's compile-worker pools to shut down, waiting at most ``wait_s`` for them (a process about to end
    at once: each pool is asked first, then waited on, so a pool asked leaves cleanly by itself). Where this torch
    lacks the helper, nothing is asked: the workers then leave when they find this process gone."""
    import logging
    import threading

    try:
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:
        logging.getLogger("tuner.backend").info("torch._inductor.async_compile.shutdown_compile_workers is missing")
        return
    asked = threading.Thread(target=shutdown_compile_workers, daemon=True)
    asked.start()
    asked.join(wait_s)


def share_triton_cache() -> None:
    """Have this process's Triton build with the ptxas Inductor's compile workers use (torch's own, where the build
    ships one), so that a kernel the workers compiled is found in Triton's cache here. Inductor points its workers at
    it but not the parent process that compiles through them, whose ptxas is then another one, and Triton's cache
    keys include the ptxas version: on the H200 (torch 2.11) every Triton choice of a site batch, compiled by the
    workers, was compiled again in the sweep's process when timed (``bench/device/site_cost.py``). Where this torch
    lacks the helper, nothing changes but the time."""
    import logging

    try:
        from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path
    except ImportError:
        logging.getLogger("tuner.backend").info(
            "torch._inductor.runtime.compile_tasks._set_triton_ptxas_path is missing: "
            "Triton kernels the compile workers built may be built again when timed"
        )
        return
    _set_triton_ptxas_path()


def inductor_options(mode: str | None, **patches: Any) -> dict[str, Any]:
    """``torch.compile(backend="inductor", options=...)`` for Inductor's ``mode`` plus ``patches``. Dynamo serves a
    module compiled earlier in the process by an equal Inductor backend, and equal means the same mode and options:
    a config set around the compile only (``freezing``) does not tell two compiles apart, these options do."""
    import torch

    return {**(torch._inductor.list_mode_options(mode) if mode else {}), **patches}


@contextlib.contextmanager
def tracing_frozen() -> Iterator[None]:
    """Freezing on while Dynamo traces (it reads the flag then), put back afterwards (``tuner.compile``)."""
    import torch._inductor.config as inductor_config

    with inductor_config.patch(freezing=True):
        yield


def inductor_flag(name: str) -> Any:
    """The current value of an Inductor config flag (dotted names reach sub-configs)."""
    import torch._inductor.config as inductor_config

    obj: Any = inductor_config
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def has_inductor_flag(name: str) -> bool:
    """Whether this Inductor has the config flag (a flag newer than the oldest torch supported may be missing)."""
    try:
        inductor_flag(name)
    except AttributeError:
        return False
    return True


__all__ = [
    "applied",
    "configure_measuring",
    "has_inductor_flag",
    "inductor_flag",
    "inductor_options",
    "patch",
    "rebind",
    "restore",
    "tracing_frozen",
]
