"""One place that says which failures are expected, and how they are stored."""

from __future__ import annotations

from tuner.measure.result import Status

_COMPILE_MARKERS = ("BackendCompilerFailed", "CppCompileError", "CompilationError", "InductorError", "LoweringException")


def classify(exc: BaseException, *, compiling: bool) -> Status:
    """Compile-time failures (generated code that does not build) vs failures while running it."""
    names = {t.__name__ for t in type(exc).__mro__}
    if compiling or names & set(_COMPILE_MARKERS):
        return Status.COMPILE_ERROR
    return Status.RUNTIME_ERROR


def describe(exc: BaseException, limit: int = 800) -> str:
    """Error text to store: the type and the first meaningful lines, never a live traceback."""
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()][:6]
    out = f"{type(exc).__name__}: " + " | ".join(lines)
    return out[:limit]
