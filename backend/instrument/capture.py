"""The sweep's hold on Inductor's Triton kernels: the real launch arguments of each kernel's first call, its launches
per step, and one config compiled into a launcher through Inductor's own path (``tuner.measure.kernels`` times them).
The kernels themselves are found by ``backend/hooks/kernels.py``."""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuner.backend import process


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
def storage_span(shape: Any, stride: Any) -> int:
    """The elements a tensor of these sizes and strides reaches in its storage."""
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride))


def clone_preserving_strides(x: Any) -> Any:
    """A tensor copied with its strides (a plain ``clone`` would make a strided view contiguous); other values as they
    are. The memory span the view covers is copied as it is, so an expanded input (stride 0: elements sharing memory,
    e.g. vit's class token) keeps its layout too."""
    import torch

    if isinstance(x, torch.Tensor):
        if x.numel() == 0:
            return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device)
        buf = torch.as_strided(x, (storage_span(x.size(), x.stride()),), (1,)).clone()
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

        def run(
            self: Any, *args: Any, _cap: Captured = cap, _orig: Callable[..., Any] = original, **kwargs: Any
        ) -> Any:
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
