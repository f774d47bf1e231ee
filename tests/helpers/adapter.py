"""A kind's own adapter, as ``backend/hooks`` would hold one (``TaskKind.adapter``): it records each install, and for
a graph-hooked kind what it found in a graph and the patches it made of the kind's answer."""

from typing import Any

INSTALLED: list[str] = []
PATCHED: list[dict[str, Any]] = []
FOUND = [{"nodes": 1}]
KNOB = "test.split_reductions"  # the answer's knob, as a kind's answer names it: this adapter makes Inductor's of it


def install(device_type: str) -> None:
    INSTALLED.append(device_type)


def found(gm: Any) -> list[dict[str, Any]]:
    return FOUND


def patches(knobs: dict[str, Any], config: Any) -> dict[str, Any]:
    out = dict(knobs)
    if KNOB in out:
        out["split_reductions"] = bool(out.pop(KNOB))
        PATCHED.append({"split_reductions": out["split_reductions"]})
    return out
