"""Triton kernel spaces (CUDA): pointwise, reduction and persistent-reduction kernels that Inductor generates.

Parameters are the kernel's constexpr block sizes (XBLOCK, YBLOCK, R0_BLOCK), ``num_warps`` and
``num_stages``. Each block ranges over powers of two up to Triton's per-dimension limit and the
kernel's own size hint (a bigger block than the dimension only masks lanes). Constraints reject
what cannot compile or would spill: more than 2**20 elements in a block, more than 256 elements
per thread, fewer elements than threads, a block other than 1 on a dimension of size 1. Only a
looped reduction has a loop to pipeline, so only there does ``num_stages`` vary. Inductor's own
choice is the default and is always in the space. Persistent reductions keep their whole
reduction in one block, so their R0_BLOCK (if Inductor passes one) is fixed.
"""

from __future__ import annotations

from typing import Any

from tuner.kinds import KERNEL_HOOK, TaskKind
from tuner.core import Kind, kernel_lookup_hash
from tuner.search_spaces.base import Choice, IntRange, Param, PowerOfTwo, Space, pow2_ceil

FAMILIES = (Kind.TRITON_POINTWISE, Kind.TRITON_REDUCTION, Kind.TRITON_PERSISTENT_REDUCTION)
MAX_BLOCK = {"X": 4096, "Y": 1024, "Z": 1024, "R0_": 4096, "R1_": 2048}  # Inductor's TRITON_MAX_BLOCK (CUDA)
MAX_NUMEL = 1 << 20  # Triton's largest tensor
MAX_PER_THREAD = 256
WARPS = (1, 32)
STAGES = (1, 5)


def _hint(size_hints: Any, prefix: str) -> int | None:
    if isinstance(size_hints, dict):
        v = size_hints.get(prefix.lower())
        return int(v) if v is not None else None
    return None


def _block_param(name: str, size_hints: Any, default: int, tunable: bool) -> Param:
    prefix = name.removesuffix("BLOCK")
    hint = _hint(size_hints, prefix)
    if not tunable or hint is None or prefix not in MAX_BLOCK:
        return Choice(name, (int(default),))
    if hint <= 1:
        return Choice(name, (1,))
    high = max(min(MAX_BLOCK[prefix], pow2_ceil(hint)), int(default))
    low = min(4 if prefix.startswith("R") else 1, int(default), high)
    return PowerOfTwo(name, low, high)


def space(family: Kind | str, context: dict[str, Any]) -> Space:
    """``context``: ``size_hints`` ({"x": …, "r0_": …}) and ``default`` (Inductor's chosen config)."""
    if family not in FAMILIES:
        raise ValueError(f"not a Triton kernel family: {family}")
    family = Kind(family)
    default = _checked_default(dict(context["default"]))
    size_hints = _checked_hints(context.get("size_hints"))
    persistent = family == Kind.TRITON_PERSISTENT_REDUCTION
    blocks = sorted(k for k in default if k.endswith("BLOCK"))
    params: list[Param] = [
        _block_param(b, size_hints, default[b], not (persistent and b.startswith("R"))) for b in blocks
    ]
    params.append(PowerOfTwo("num_warps", min(WARPS[0], default["num_warps"]), max(WARPS[1], default["num_warps"])))
    if family == Kind.TRITON_REDUCTION:  # only a looped reduction has a loop to pipeline
        params.append(
            IntRange("num_stages", min(STAGES[0], default["num_stages"]), max(STAGES[1], default["num_stages"]))
        )
    else:
        params.append(Choice("num_stages", (default["num_stages"],)))
    rnumel = _hint(size_hints, "R0_") if persistent else None

    def fits(config: dict[str, Any]) -> str | None:
        if config == default:
            return None
        numel = 1
        for b in blocks:
            numel *= int(config[b])
        if persistent and rnumel and not any(b.startswith("R") for b in blocks):
            numel *= pow2_ceil(rnumel)  # the whole reduction lives in registers
        if numel > MAX_NUMEL:
            return f"a block of {numel} elements exceeds Triton's {MAX_NUMEL}"
        per_thread = numel / (32 * int(config["num_warps"]))
        if per_thread < 1:
            return f"a block of {numel} elements leaves threads of {config['num_warps']} warps idle"
        if per_thread > MAX_PER_THREAD:
            return f"{per_thread:.0f} elements per thread (more than {MAX_PER_THREAD}) would spill registers"
        return None

    ctx = {"size_hints": size_hints, "default": default}
    return Space(family, tuple(params), default, (fits,), ctx)


_BLOCK_NAMES = tuple(f"{p}BLOCK" for p in MAX_BLOCK)
MAX_HINT = 1 << 40


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _checked_default(config: dict[str, Any]) -> dict[str, int]:
    """Inductor's config as a signature stores it: its block sizes, ``num_warps`` and ``num_stages``, each in a range
    a GPU allows (what a crafted file claims otherwise builds no space)."""
    unknown = sorted(str(k)[:40] for k in config if k not in (*_BLOCK_NAMES, "num_warps", "num_stages"))
    if unknown or "num_warps" not in config or "num_stages" not in config:
        raise ValueError(f"a kernel config holds block sizes, num_warps and num_stages (unknown: {unknown[:5]})")
    for k, v in config.items():
        if k == "num_stages":
            ok = _is_int(v) and 0 <= v <= 16
        else:
            ok = _is_int(v) and 1 <= v <= (64 if k == "num_warps" else MAX_NUMEL) and v & (v - 1) == 0
        if not ok:
            raise ValueError(f"{k}={str(v)[:20]} is out of range")
    return dict(config)


def _checked_hints(size_hints: Any) -> Any:
    if size_hints is None:
        return None
    if (
        not isinstance(size_hints, dict)
        or len(size_hints) > 5
        or not all(
            isinstance(k, str) and len(k) <= 4 and _is_int(v) and 0 <= v <= MAX_HINT for k, v in size_hints.items()
        )
    ):
        raise ValueError("size hints are up to five dimensions of at most 2**40 elements")
    return size_hints


def builder(family: str) -> Any:
    return lambda context: space(family, context)


def _by_lookup_hash(key: str, config: dict[str, Any], signature: dict[str, Any]) -> tuple[str, Any] | None:
    """Inductor's lookup table is keyed by its own hash of the kernel's source, recomputed from the signature."""
    h = kernel_lookup_hash(signature)
    return (h, dict(config)) if h else None


KINDS = tuple(
    TaskKind(
        f,
        builder(f),
        KERNEL_HOOK,
        phase="Triton kernels",
        cost="kernel",
        group="Triton-kernel",
        answer=_by_lookup_hash,
        devices=("cuda",),
        transfers=False,
    )
    for f in FAMILIES
)
