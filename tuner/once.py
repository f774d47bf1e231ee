"""Warnings said once per process: a condition met at every compile (a missing hook, an unreadable row, a database
that does not open) is worth one line, not one per call."""

from __future__ import annotations

import logging

_said: set[tuple[str, str]] = set()  # (logger name, key) of each warning this process has given


def warn_once(log: logging.Logger, message: str, key: str | None = None) -> None:
    """``message`` as a warning on ``log`` the first time this process meets ``key`` there (default: the message)."""
    seen = (log.name, message if key is None else key)
    if seen not in _said:
        _said.add(seen)
        log.warning(message)
