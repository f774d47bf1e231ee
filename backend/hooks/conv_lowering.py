"""Hook: Inductor's convolution lowering decides whether a 1x1 convolution is a matrix multiply as it would without
the flag tuner sets to list template choices.

Every compile tuner makes sets ``max_autotune_gemm`` (``compiler.base_patches``) so that template choices exist at
the selection sites. Inductor's convolution lowering (``torch/_inductor/kernel/conv.py``) reads that flag for one
more decision: with it on, a channels-last 1x1 convolution is lowered as a matrix multiply, as max-autotune lowers it.
Inductor's default keeps it a convolution, and the matrix multiplies can run the step slower; every tuned compile
would start from them.

So the lowering reads Inductor's config through a view (:class:`ConfigView`, bound as ``kernel/conv.py``'s
``config``). While a tuned compile lowers a graph (:func:`as_before`), the view answers ``max_autotune`` and
``max_autotune_gemm`` with what they held before tuner's patches; every other flag, ``conv_1x1_as_mm`` (Inductor's
own request for the rewrite) included, and every read outside a tuned compile, is Inductor's own. A 1x1 site still
offers the matrix multiply as one of its choices where Inductor lists it (``conv1x1_via_mm``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from tuner.backend import process
from tuner.backend.errors import HookUnavailable

# In the keys of Inductor's caches for tuned compiles (``compiler._cache_tag``): an entry lowered with the 1x1
# convolutions as matrix multiplies under the same answers is not served to a compile that keeps them convolutions.
CACHE_TAG = "conv1x1-as-inductor"
FLAGS = ("max_autotune", "max_autotune_gemm")  # the flags tuner sets that the lowering also reads
_held: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("tuner_conv_lowering", default=None)


class ConfigView:
    """Inductor's config module, but for :data:`FLAGS` inside :func:`as_before`."""

    def __init__(self, config: Any) -> None:
        object.__setattr__(self, "_config", config)

    def __getattr__(self, name: str) -> Any:
        held = _held.get()
        if held is not None and name in held:
            return held[name]
        return getattr(self._config, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._config, name, value)


def _conv_module() -> Any:
    try:
        from torch._inductor.kernel import conv
    except ImportError as e:
        raise HookUnavailable(f"torch._inductor.kernel.conv is unavailable: {e}") from None
    if not hasattr(conv, "config"):
        raise HookUnavailable("torch._inductor.kernel.conv no longer reads Inductor's config as `config`")
    return conv


def install() -> None:
    """Bind the view once per process. Raises :class:`HookUnavailable` where the lowering has moved."""
    conv = _conv_module()
    if not isinstance(conv.config, ConfigView):
        process.patch("conv_lowering.config", conv, "config", ConfigView(conv.config))


def flags_now() -> dict[str, Any]:
    """:data:`FLAGS` as they are now (read before tuner's patches apply)."""
    import torch._inductor.config as inductor_config

    return {name: getattr(inductor_config, name) for name in FLAGS}


@contextlib.contextmanager
def as_before(flags: dict[str, Any]) -> Iterator[None]:
    """Inside: the lowering reads ``flags`` for :data:`FLAGS`."""
    token = _held.set(dict(flags))
    try:
        yield
    finally:
        _held.reset(token)
