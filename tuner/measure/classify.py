"""The one place that says which failures are expected, which leave the worker unusable, and how they are stored."""

from __future__ import annotations

from tuner.measure.result import Status

_COMPILE_MARKERS = (
    "BackendCompilerFailed",
    "CppCompileError",
    "CompilationError",
    "InductorError",
    "LoweringException",
)
# CUDA errors after which the context is unusable: the worker must be replaced.
_CONTEXT_BREAKERS = (
    "illegal memory access",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "device-side assert",
)


class CompileFailed(Exception):
    """A compile (or the first run, which is when Dynamo and Inductor compile) of generated code failed."""


class Inaccurate(Exception):
    """A compile whose outputs differ from the reference by more than the tolerance."""


def classify(exc: BaseException, *, compiling: bool = False) -> Status:
    """Compile-time failures (generated code that does not build) vs failures while running it."""
    if isinstance(exc, Inaccurate):
        return Status.INACCURATE
    names = {t.__name__ for t in type(exc).__mro__}
    if compiling or isinstance(exc, CompileFailed) or names & set(_COMPILE_MARKERS):
        return Status.COMPILE_ERROR
    return Status.RUNTIME_ERROR


def describe(exc: BaseException, limit: int = 800) -> str:
    """Error text to store: the type and the first meaningful lines, never a live traceback. A wrapped failure
    (:class:`CompileFailed`) is described by what it wraps."""
    if isinstance(exc, CompileFailed) and exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, Inaccurate):
        return str(exc)[:limit]
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()][:6]
    out = f"{type(exc).__name__}: " + " | ".join(lines)
    return out[:limit]


def breaks_context(errors: list[str]) -> bool:
    """Whether any of these stored errors is a CUDA error that leaves the context unusable."""
    return any(m in e.lower() for e in errors for m in _CONTEXT_BREAKERS)
