"""Stable keys: canonical JSON hashed with sha256. Never ``repr()``."""

from __future__ import annotations

import hashlib
import json
from typing import Any

KEY_SCHEMA = 1


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def digest(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def task_key(kind: str, payload: dict[str, Any]) -> str:
    """The key of a tuning task: what was tuned, independent of where it was measured."""
    return digest({"schema": KEY_SCHEMA, "kind": kind, "payload": payload})


def config_hash(config: dict[str, Any]) -> str:
    return digest(config)[:32]
