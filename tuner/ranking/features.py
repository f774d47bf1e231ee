"""Features of a (task, config) pair for the learned ranking: numbers only, from the stored signature and the config.

Two groups, one model each: template sites (the op, its GEMM-view sizes M×N×K, dtype, conv geometry, and the
choice: which implementation, block sizes, warps, stages, with the derived tile count, k-loop length, shared
memory and accumulator registers) and Triton kernels (size hints, block sizes, warps, stages, elements per thread,
programs launched). A value the pair does not have is NaN, which the gradient-boosted trees split on natively.
Everything is parsed, never evaluated: signatures may come from an imported file.
"""

from __future__ import annotations

import math
from typing import Any

from tuner.core import InputRow, Kind
from tuner.search_spaces import splitk
from tuner.search_spaces.template import DTYPE_BYTES, parse_generated

SITES = "sites"
KERNELS = "kernels"
NAN = float("nan")
OPS = ("mm", "addmm", "bmm", "convolution")
IMPLS = ("aten", "triton_mm", "triton_conv", "cpp", "other", "splitk")  # what runs a site choice
HEURISTICS = ("pointwise", "reduction", "persistent_reduction")

SITE_FEATURES = (
    "op",
    "log_m",
    "log_n",
    "log_k",
    "log_flops",
    "dtype_bytes",
    "kernel_hw",
    "stride",
    "groups",
    "is_default",
    "impl",
    "bias_epilogue",
    "block_m",
    "block_n",
    "block_k",
    "group_m",
    "num_stages",
    "num_warps",
    "log_tiles",
    "k_iters",
    "smem_kib",
    "acc_per_thread",
    "m_waste",
    "n_waste",
    "split_k",
)
KERNEL_FEATURES = (
    "heuristic",
    "log_x",
    "log_y",
    "log_r",
    "n_args",
    "xblock",
    "yblock",
    "rblock",
    "num_warps",
    "num_stages",
    "log_block",
    "per_thread",
    "log_programs",
    "is_default",
    "xblock_vs_default",
    "warps_vs_default",
)


def group_of(kind: str) -> str | None:
    """Which model ranks a task of ``kind`` (None: no model, e.g. graph knobs and fusion groupings)."""
    if kind == Kind.SITE:
        return SITES
    return KERNELS if Kind(kind).is_kernel else None


def names(group: str) -> tuple[str, ...]:
    return SITE_FEATURES if group == SITES else KERNEL_FEATURES


def _log2(v: Any) -> float:
    return math.log2(v) if isinstance(v, (int, float)) and v > 0 else NAN


def _code(value: Any, vocabulary: tuple[str, ...]) -> float:
    return float(vocabulary.index(value)) if value in vocabulary else float(len(vocabulary))


class SiteShape:
    """A site's GEMM view and conv geometry, read once per task (every config of a site shares it)."""

    def __init__(self, signature: dict[str, Any]):
        self.op = str(signature.get("op"))
        rows = [InputRow.parse(r) for r in signature.get("inputs", [])]
        self.dtype_bytes = float(DTYPE_BYTES.get(rows[-1].dtype, NAN)) if rows else NAN
        self.m, self.n, self.k = _mnk(self.op, rows)
        self.kernel_hw = self.groups = NAN
        base = dict((str(k), v) for k, v in (signature.get("space", {}).get("generate") or {}).get("base", []))
        self.stride = float(base["STRIDE_H"]) if isinstance(base.get("STRIDE_H"), int) else NAN
        if self.op == "convolution" and len(rows) >= 2 and len(rows[1].sizes) == 4:
            x, w = rows[0].sizes, rows[1].sizes
            self.kernel_hw = float(w[2] * w[3])
            self.groups = float(x[1] // max(1, w[1]))
        self.default = str(signature.get("space", {}).get("default"))


def _mnk(op: str, rows: list[InputRow]) -> tuple[float, float, float]:
    try:
        if op == "convolution":
            x, w = rows[0].sizes, rows[1].sizes
            return float(x[0] * math.prod(x[2:])), float(w[0]), float(math.prod(w[1:]))
        a, b = rows[-2].sizes, rows[-1].sizes
        return float(math.prod(a[:-1])), float(b[-1]), float(a[-1])
    except (IndexError, ValueError):
        return NAN, NAN, NAN


def _impl(cid: str, parsed: tuple[str, dict[str, Any]] | None) -> str:
    if splitk.is_id(cid):
        return "splitk"
    if parsed is not None:
        return "triton_conv" if parsed[0] == "conv2d" else "triton_mm"
    if cid.startswith("aten"):
        return "aten"
    return "cpp" if "cpp" in cid.lower() else "other"


def site_features(shape: SiteShape, config: dict[str, Any]) -> list[float]:
    cid = str(config.get("choice"))
    parsed = parse_generated(cid)
    p = parsed[1] if parsed else _splitk_params(cid)
    bm, bn, bk, stages, warps = (_count(p, n) for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps"))
    split = _count(p, "SPLIT_K")
    tiles = math.ceil(shape.m / bm) * math.ceil(shape.n / bn) if not math.isnan(bm + bn + shape.m + shape.n) else NAN
    return [
        _code(shape.op, OPS),
        _log2(shape.m),
        _log2(shape.n),
        _log2(shape.k),
        _log2(shape.m * shape.n * shape.k),
        shape.dtype_bytes,
        shape.kernel_hw,
        shape.stride,
        shape.groups,
        float(cid == shape.default),
        _code(_impl(cid, parsed), IMPLS),
        float("bias_addmm" in cid),
        bm,
        bn,
        bk,
        _count(p, "GROUP_M"),
        stages,
        warps,
        _log2(tiles),
        shape.k / bk / (split if split == split else 1) if bk == bk else NAN,
        stages * (bm * bk + bk * bn) * shape.dtype_bytes / 1024,
        bm * bn / (32 * warps),
        _waste(shape.m, bm),
        _waste(shape.n, bn),
        split,
    ]


def _splitk_params(cid: str) -> dict[str, Any]:
    """A split-K choice's block sizes, split, warps and stages (``search_spaces/splitk``); {} for any other choice or a
    malformed one."""
    try:
        return splitk.parse(cid) or {}
    except ValueError:
        return {}


def _waste(dim: float, block: float) -> float:
    """The share of a block's rows past the dimension's end (a padded last tile), averaged over the tiles."""
    if math.isnan(dim + block) or block <= 0:
        return NAN
    return 1.0 - dim / (math.ceil(dim / block) * block)


class KernelShape:
    def __init__(self, signature: dict[str, Any]):
        hints = signature.get("size_hints") or {}
        self.heuristic = str(signature.get("heuristic"))
        self.x, self.y, self.r = (float(hints.get(k, 1) or 1) for k in ("x", "y", "r0_"))
        self.n_args = float(sum(1 for v in (signature.get("signature") or {}).values() if str(v).startswith("*")))
        self.default = dict(signature.get("space", {}).get("default") or {})


def kernel_features(shape: KernelShape, config: dict[str, Any]) -> list[float]:
    x, y, r, warps, stages = (_count(config, n) for n in ("XBLOCK", "YBLOCK", "R0_BLOCK", "num_warps", "num_stages"))
    numel = math.prod(v for v in (x, y, r) if v == v)
    programs = math.ceil(shape.x / x) * (math.ceil(shape.y / y) if y == y else 1) if x == x else NAN
    dx, dw = _count(shape.default, "XBLOCK"), _count(shape.default, "num_warps")
    return [
        _code(shape.heuristic, HEURISTICS),
        _log2(shape.x),
        _log2(shape.y),
        _log2(shape.r),
        shape.n_args,
        x,
        y,
        r,
        warps,
        stages,
        _log2(numel),
        numel / (32 * warps),
        _log2(programs),
        float(config == shape.default),
        _log2(x / dx) if dx == dx and x == x else NAN,
        _log2(warps / dw) if dw == dw else NAN,
    ]


def _count(values: dict[str, Any], name: str) -> float:
    """A block size, warp or stage count as a float; NaN when absent or not a positive integer (an imported file's
    zero would otherwise divide by zero)."""
    v = values.get(name)
    return float(v) if isinstance(v, int) and v > 0 else NAN


def featurizer(group: str, signature: dict[str, Any]) -> Any:
    """A function config -> feature row for one task; raises ValueError on a signature it cannot read."""
    try:
        if group == SITES:
            site = SiteShape(signature)
            return lambda config: site_features(site, config)
        kernel = KernelShape(signature)
        return lambda config: kernel_features(kernel, config)
    except (TypeError, AttributeError, KeyError) as e:
        raise ValueError(f"unreadable signature: {e}") from None
