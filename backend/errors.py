"""Raised by an adapter when the installed Inductor lacks the hook it wraps."""

from tuner.errors import TunerError


class HookUnavailable(TunerError):
    """An Inductor internal that tuner hooks is missing or changed in this torch version."""
