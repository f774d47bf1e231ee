"""The split-K choices of a skinny GEMM site (few rows: a decode step's tokens, a classifier's batch).

Neither cuBLAS nor Inductor's templates (max-autotune's list) split K for such a GEMM, unless K is 32 times both
other sizes (Inductor's ``decompose_k``); with 8 rows the device mostly idles (``tuner.backend.splitk_mm``). A site
of at most :data:`SKINNY_M` rows, bf16 or fp16, on CUDA, is offered a short :func:`menu` of tuner's own kernel:
narrow data-parallel tiles (a GEMV's shape) and tiles whose K is split so that every SM gets work. A choice's id is
``tuner::splitk:{params}``; every id is checked before it is used (:func:`parse`): it may come from an imported file.
"""

from __future__ import annotations

import json
from typing import Any

from tuner.keys import canonical_json

PREFIX = "tuner::splitk:"
SKINNY_M = 64
MIN_K = 64
SPLIT_FIRST = 2
PROGRAMS_PER_SM = 4  # a split K's programs: gpt2's 3072-deep GEMM (8 x 768 out) ran best split 8 ways over 16 columns
PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages")
_RANGES = {
    "BLOCK_M": (16, 64),
    "BLOCK_N": (16, 256),
    "BLOCK_K": (16, 256),
    "SPLIT_K": (1, 64),
    "num_warps": (1, 8),
    "num_stages": (1, 6),
}
_POW2 = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps")


def make_id(config: dict[str, int]) -> str:
    return PREFIX + canonical_json({k: int(config[k]) for k in PARAMS})


def is_id(cid: Any) -> bool:
    return isinstance(cid, str) and cid.startswith(PREFIX)


def parse(cid: Any) -> dict[str, int] | None:
    """A split-K id's config; None when ``cid`` is not one. Raises ValueError for a split-K id out of range."""
    if not is_id(cid):
        return None
    try:
        params = json.loads(cid[len(PREFIX) :]) if len(cid) < 500 else None
    except ValueError:
        params = None
    if not isinstance(params, dict) or set(params) != set(PARAMS):
        raise ValueError(f"{cid[:120]!r}: a split-K choice has exactly the parameters {', '.join(PARAMS)}")
    for k, v in params.items():
        low, high = _RANGES[k]
        if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high or (k in _POW2 and v & (v - 1)):
            raise ValueError(
                f"{cid[:120]!r}: {k}={v!r} is outside {low}..{high}" + (" (a power of two)" if k in _POW2 else "")
            )
    return params


def applies(m: int, n: int, k: int) -> bool:
    return 1 <= m <= SKINNY_M and n >= 16 and k >= MIN_K


def block_m(m: int) -> int:
    """The rows of a tile: the GEMM's rows rounded up to a power of two, 16 to 64."""
    return max(16, min(64, 1 << (m - 1).bit_length()))


def _pow2_floor(x: int) -> int:
    return 1 << (max(1, x).bit_length() - 1)


def menu(m: int, n: int, k: int, sms: int) -> list[dict[str, int]]:
    """What a skinny site is offered, likeliest first: tiles of 16 and 32 columns over all of K, and the same split K
    ways, sized to :data:`PROGRAMS_PER_SM` programs an SM (each program keeps 128 of K at least). Where K is at least
    :data:`SPLIT_FIRST` times N the splits come first, else the whole-K tiles: a split pays where K is long against
    N, a whole-K tile where it is not."""
    rows = block_m(m)
    tiles_m = -(-m // rows)
    wide_k = min(256, _pow2_floor(k))

    def split(block_n: int) -> int:
        tiles = tiles_m * -(-n // block_n)
        return min(_pow2_floor(PROGRAMS_PER_SM * sms // max(1, tiles)), _pow2_floor(k // 128), 64)

    whole = [{"BLOCK_N": bn, "BLOCK_K": wide_k, "SPLIT_K": 1, "num_warps": 2, "num_stages": 3} for bn in (16, 32)]
    cut = [{"BLOCK_N": bn, "BLOCK_K": 128, "SPLIT_K": split(bn), "num_warps": 4, "num_stages": 3} for bn in (16, 32)]
    cut = [c for c in cut if c["SPLIT_K"] > 1]
    return [{"BLOCK_M": rows, **c} for c in (cut + whole if k >= SPLIT_FIRST * n else whole + cut)]
