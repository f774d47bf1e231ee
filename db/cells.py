"""JSON cells that may be damaged: a hand-edited or corrupted cell is read as :class:`Unreadable` instead of failing the
whole query, so every reader can skip that row and carry on (one warning), and ``tuner db check`` can list and drop it.

PostgreSQL's JSONB refuses text that is not JSON, so only SQLite (where JSON is text) can hold such a cell."""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy import JSON, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator

from tuner.once import warn_once

log = logging.getLogger("tuner.db")


class Unreadable:
    """A stored JSON cell that does not parse; ``raw`` is its text (cut short)."""

    __slots__ = ("raw",)

    def __init__(self, raw: str):
        self.raw = raw[:200]

    def __repr__(self) -> str:
        return f"Unreadable({self.raw!r})"


class SafeJSON(TypeDecorator):
    """JSON (JSONB on PostgreSQL); on SQLite stored as the same text, read back as :class:`Unreadable` where it is not
    JSON (nested too deeply included)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(Text() if dialect.name == "sqlite" else JSON())

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        if dialect.name == "sqlite":
            return json.dumps(value)
        return value

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        if dialect.name != "sqlite" or value is None:
            return value
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return Unreadable(str(value))


def readable(*cells: Any, where: str = "") -> bool:
    """Whether none of ``cells`` is :class:`Unreadable`; the first time a process meets one, one warning says so."""
    if not any(isinstance(c, Unreadable) for c in cells):
        return True
    warn_once(
        log,
        f"{where or 'tuning database'}: skipped a stored row whose JSON cannot be read; `tuner db check` "
        "lists such rows and `tuner db check --drop` removes them",
        key=where,
    )
    return False


__all__ = ["SafeJSON", "Unreadable", "readable"]
