"""Hook (c)/(d): whole graphs, through ``compile_fx``'s ``inner_compile`` callback.

``inner_compile`` sees each post-AOT graph (forward, and later the backward) just
before Inductor lowers it, so graph-level knobs can be patched per graph there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from tuner.backend.errors import HookUnavailable
from tuner.keys import digest

try:
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
except ImportError as e:  # pragma: no cover
    compile_fx = compile_fx_inner = None  # type: ignore[assignment]
    _IMPORT_ERROR: Exception | None = e
else:
    _IMPORT_ERROR = None

_ADDR = re.compile(r"0x[0-9a-f]{6,}")
_ARGS = re.compile(r"def forward\(([^)]*)\)")
_ASSIGNED = re.compile(r"^\s+([A-Za-z_]\w*) = ", re.M)
_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")  # an integer literal, not part of a name or a float


def _meta(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return {
            "dtype": str(x.dtype),
            "shape": [str(s) for s in x.shape],
            "stride": [str(s) for s in x.stride()],
            "device": x.device.type,
        }
    if isinstance(x, (int, float, bool)) or x is None:
        return x
    return type(x).__name__


def graph_payload(gm: Any, example_inputs: Sequence[Any], is_backward: bool) -> dict[str, Any]:
    """The graph's code (addresses stripped) plus its inputs' metadata: stable across processes."""
    return {
        "code": _ADDR.sub("0x", gm.code),
        "inputs": [_meta(x) for x in example_inputs],
        "backward": bool(is_backward),
    }


def canonical_names(code: str) -> str:
    """FX code with its local names (arguments and assigned values) renamed in order of appearance: torch versions
    name the same nodes differently (``mul_1`` for ``mul_3``), which changes a graph's key but not what it is."""
    args = _ARGS.search(code)
    names = dict.fromkeys(n.strip() for n in [*(args.group(1).split(",") if args else []), *_ASSIGNED.findall(code)])
    rename = {n: f"v{i}" for i, n in enumerate(n for n in names if n and n != "self")}
    if not rename:
        return code
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(rename, key=len, reverse=True))) + r")(?!\w)")
    return pattern.sub(lambda m: rename[m.group(1)], code)


def graph_family(payload: dict[str, Any]) -> str:
    """What a graph is at any sizes and names: its code with integer literals left out and local names canonical,
    its inputs' dtypes and ranks, and whether it is a backward graph (``tuner.nearest`` gives a graph of the same
    family its nearest stored answer)."""
    inputs = [[x["dtype"], len(x["shape"]), x["device"]] if isinstance(x, dict) else x for x in payload["inputs"]]
    code = _INT.sub("#", canonical_names(payload["code"]))
    return digest({"code": code, "inputs": inputs, "backward": payload["backward"]})[:32]


def graph_shapes(payload: dict[str, Any]) -> list[list[int]] | None:
    """The sizes of the graph's tensor inputs; None when any is symbolic (a dynamic-shape graph)."""
    try:
        return [[int(d) for d in x["shape"]] for x in payload["inputs"] if isinstance(x, dict)]
    except ValueError:
        return None


def check() -> None:
    if _IMPORT_ERROR is not None:
        raise HookUnavailable(f"torch._inductor.compile_fx is unavailable: {_IMPORT_ERROR}")


def compile_graph(
    gm: Any,
    example_inputs: Sequence[Any],
    *,
    patches: dict[str, Any],
    around_inner: Callable[[Any, Sequence[Any], bool], Any],
) -> Any:
    """``compile_fx`` with ``patches``; ``around_inner(gm, inputs, is_backward)`` is a context manager entered around each inner compile."""

    def inner(gm_: Any, inputs_: Sequence[Any], **kw: Any) -> Any:
        with around_inner(gm_, inputs_, bool(kw.get("is_backward", False))):
            return compile_fx_inner(gm_, inputs_, **kw)

    return compile_fx(gm, example_inputs, inner_compile=inner, config_patches=patches)
