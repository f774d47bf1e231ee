"""tuner: autotuning kernel search for ``torch.compile``.

Sweep a workload once (``tuner sweep --model resnet50``), keep every
measurement in a SQL database, and compile with ``backend="tuned"`` to reuse
the winners without benchmarking anything.
"""

from typing import Any

from tuner.version import __version__


def compile(model: Any, **kwargs: Any) -> Any:  # noqa: A001 - as torch.compile
    """``torch.compile(model, backend="tuned")`` traced with freezing for inference: see :mod:`tuner.compiling`."""
    from tuner.compiling import compile as _compile

    return _compile(model, **kwargs)


__all__ = ["__version__", "compile"]
