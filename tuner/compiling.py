"""``tuner.compile``: ``torch.compile`` with the tuned backend, traced with freezing for inference.

A database's inference workloads are swept with freezing (weights folded into the graph as constants), and Dynamo
decides at trace time, through ``torch._inductor.config.freezing``, whether weights become constants or graph
inputs: a backend cannot freeze a graph that was traced unfrozen (its weights arrive as inputs). A plain
``torch.compile(model, backend="tuned")`` without that flag therefore matches none of a frozen sweep's graphs.
``tuner.compile`` sets the flag around every call that runs without gradients (the calls that trace), so the
stored answers apply without touching Inductor's config; a training call is traced as it would be anyway.

Freezing folds the weights at the first call: change them afterwards (``load_state_dict``) and the compiled model
keeps the old ones until ``torch._dynamo.reset()``, as with Inductor's own freezing. ``freeze=False`` opts out.
"""

from __future__ import annotations

from typing import Any

from tuner.errors import TunerError


class Compiled:
    """A compiled model that turns freezing on while it runs without gradients. Attributes are the compiled
    model's (``OptimizedModule``), so ``state_dict()`` and friends work as on the result of ``torch.compile``."""

    def __init__(self, compiled: Any, freeze: bool):
        self.__dict__["_compiled"] = compiled
        self.__dict__["_freeze"] = freeze

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        from tuner.backend.process import tracing_frozen

        if self._freeze and not torch.is_grad_enabled():
            with tracing_frozen():
                return self._compiled(*args, **kwargs)
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._compiled, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._compiled, name, value)

    def __repr__(self) -> str:
        return f"tuner.Compiled({self._compiled!r})"


def compile(  # noqa: A001 - the name users expect, as torch.compile
    model: Any,
    *,
    db: str | None = None,
    shared_db: str | None = None,
    freeze: bool = True,
    transfer: bool = True,
    fusion: bool = True,
    mode: str | None = None,
    **compile_kwargs: Any,
) -> Compiled:
    """``torch.compile(model, backend="tuned")`` with freezing for calls without gradients.

    ``db``/``shared_db``: the databases (default ``TUNER_DB``/``TUNER_SHARED_DB``); ``transfer=False``: exact
    entries only; ``fusion=False``: Inductor's own fusion; ``mode``: as torch.compile's (here it combines with
    ``db``, which ``torch.compile(mode=..., options=...)`` refuses); ``options``: Inductor's config names, or any
    other option of ``backend="tuned"``; other keyword arguments (``dynamic``, ``fullgraph``) go to
    ``torch.compile``."""
    import torch

    from tuner.backend.tuned import tuned

    if "backend" in compile_kwargs:
        raise TunerError(
            "tuner.compile: it compiles with backend 'tuned'; give db=, transfer=, fusion= or options= instead of backend="
        )
    options = {
        **(compile_kwargs.pop("options", None) or {}),
        "transfer": transfer,
        "fusion": fusion,
        **({"db": db} if db else {}),
        **({"shared_db": shared_db} if shared_db else {}),
    }

    def backend(gm: Any, example_inputs: Any) -> Any:
        return tuned(gm, example_inputs, options=options, mode=mode)

    return Compiled(torch.compile(model, backend=backend, **compile_kwargs), freeze)


__all__ = ["Compiled", "compile"]
