"""Template-site space: which of the choices Inductor offered at a selection site (ATen, Triton, CPP GEMM)."""

from __future__ import annotations

from typing import Any

from tuner.search_spaces.base import Space, choice

FAMILY = "template_choice"


def space(context: dict[str, Any]) -> Space:
    """``context``: ``choices`` (stable choice ids) and ``default`` (the one plain Inductor uses)."""
    options = [str(c) for c in context["choices"]]
    default = str(context["default"])
    if default not in options:
        options = [default, *options]
    return Space(FAMILY, (choice("choice", options),), {"choice": default}, (), {"choices": options, "default": default})
