"""The capture's profile of the default step (``tuner.budget.gain.Profile``): what each phase acts on, read from
what the capture measured and recorded (its kernels, library calls, graphs and template sites)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tuner.budget.names import SITES
from tuner.budget.gain import (
    LARGE_GEMM,
    LARGE_GEMM_RATE,
    RATES,
    SHORT_KERNEL_MS,
    SITE_EPILOGUE_RATE,
    UNALIGNED_RATE,
    Profile,
)
from tuner.core import Kind, TaskSpec
from tuner.kinds import descriptor
from tuner.measure.result import CaptureResult
from tuner.search_spaces.attention import FAMILY as ATTENTION_FAMILY
from tuner.sweep.epilogues import site_epilogues
from tuner.sweep.tasks import gemm_rows_cols, gemm_unaligned, site_work, step_share_ms


def profile_of(capture: CaptureResult, tasks: Iterable[TaskSpec]) -> Profile | None:
    """The capture's profile; None where the device's busy time was not measured."""
    if not capture.step_ms or capture.busy_ms is None:
        return None
    tasks = list(tasks)
    triton = min(capture.busy_ms, sum(step_share_ms(k) for k in capture.kernels))
    counts = {s["key"]: int(s.get("count") or 1) for s in capture.sites}
    sites, weighted, studies, study_ms = 0.0, 0.0, {}, {}
    for t in tasks:
        if t.kind == Kind.SITE:
            work = site_work(t) * counts.get(t.key, 1)
            sites, weighted = sites + work, weighted + work * site_rate(t)
        elif (work := _work(t)) is not None:
            phase = descriptor(t.kind).phase
            studies[phase] = studies.get(phase, 0.0) + work
            if (ms := _library_ms(capture, descriptor(t.kind).library_ops)) > 0:
                study_ms[phase] = ms
    return Profile(
        capture.step_ms,
        max(0.0, capture.step_ms - capture.busy_ms),
        triton,
        max(0.0, capture.busy_ms - triton),
        sites,
        studies,
        _s2d_ms(capture),
        any(g.get("epilogue_convs") for g in capture.graphs),
        _merge_ms(capture),
        short_launches(capture),
        _recompute_ms(capture),
        weighted / sites if sites else RATES[SITES],
        study_ms,
        _site_epilogues_ms(capture, tasks, counts),
        _math_attention_ms(capture, tasks),
    )


def _library_ms(capture: CaptureResult, ops: tuple[str, ...]) -> float:
    """The profiled time of the step's library calls to ``ops``."""
    return sum(op["ms"] for op in capture.library if op["op"] in ops) if ops else 0.0


def _math_attention_ms(capture: CaptureResult, tasks: Iterable[TaskSpec]) -> tuple[str, float] | None:
    """(the attention study's phase, the profiled time of the batched GEMMs of the sites whose backend is math: the
    scores, ``[b*h, sq, d] x [b*h, d, sk]``, and their product with the values, ``[b*h, sq, sk] x ...``); None where
    no site runs as math."""
    firsts: set[str] = set()  # the first input of each such GEMM
    phase = None
    for t in tasks:
        sites = (t.signature.get("space") or {}).get("sites") or [] if str(t.kind) == ATTENTION_FAMILY else []
        for site in sites:
            if site.get("backend") == "math" and len(site.get("shape") or []) == 5:
                b, h, sq, d, sk = (int(x) for x in site["shape"])
                firsts |= {repr([b * h, sq, d]), repr([b * h, sq, sk])}
                phase = descriptor(t.kind).phase
    if phase is None:
        return None
    return phase, sum(
        op["ms"] for op in capture.library if op["op"] == "bmm" and op["shapes"] and repr(op["shapes"][0]) in firsts
    )


def _s2d_ms(capture: CaptureResult) -> float:
    """The profiled time of the convolutions whose input and weight shapes the space-to-depth rewrite applies to."""
    eligible = {repr(shapes) for g in capture.graphs for shapes in g.get("s2d_shapes") or []}
    return sum(op["ms"] for op in capture.library if op["op"] == "convolution" and repr(op["shapes"]) in eligible)


def site_rate(task: TaskSpec) -> float:
    """The share of its time a template site is expected to win: :data:`UNALIGNED_RATE` at a GEMM whose rows are
    not 16-byte aligned, :data:`LARGE_GEMM_RATE` at a GEMM whose M and N are both at least :data:`LARGE_GEMM`, else
    the sites' rate."""
    if gemm_unaligned(task):
        return UNALIGNED_RATE
    mn = gemm_rows_cols(task)
    return LARGE_GEMM_RATE if mn is not None and min(mn) >= LARGE_GEMM else RATES[SITES]


def _site_epilogues_ms(capture: CaptureResult, tasks: Iterable[TaskSpec], counts: dict[str, int]) -> float:
    """What the template sites are expected to win by taking in the epilogues their library defaults leave to kernels
    of their own (:data:`SITE_EPILOGUE_RATE`): each such site's calls times the kernel that runs its epilogue where the
    capture found it (``tuner.sweep.epilogues``), else the step's median pointwise kernel."""
    each = epilogue_ms(capture)
    if not each:
        return 0.0
    found = site_epilogues(capture.sites, capture.kernels)
    total = 0.0
    for t in tasks:
        if t.kind == Kind.SITE and t.space.leaves_epilogue():
            scale = min(site_rate(t), RATES[SITES]) / RATES[SITES]
            total += counts.get(t.key, 1) * (found[t.key].ms if t.key in found else each) * SITE_EPILOGUE_RATE * scale
    return total


def _median_launch(kernels: list[dict[str, Any]], field: str = "default_ms") -> float | None:
    """The launch-weighted median of ``kernels``' default times (``field``: their device times in the step instead)
    (None: no kernel)."""
    runs = sorted((k.get(field) or 0.0, int(k.get("launches") or 1)) for k in kernels)
    total, seen = sum(n for _, n in runs), 0
    for ms, n in runs:
        seen += n
        if 2 * seen >= total:
            return ms
    return None


def short_launches(capture: CaptureResult) -> int:
    """The captured Triton kernels' launches a step where, weighted by launches, their median default time is at
    most :data:`SHORT_KERNEL_MS` (the step is a run of short kernels, where one kernel fewer is worth its launch);
    else 0."""
    median = _median_launch(capture.kernels)
    return (
        sum(int(k.get("launches") or 1) for k in capture.kernels)
        if median is not None and median <= SHORT_KERNEL_MS
        else 0
    )


def epilogue_ms(capture: CaptureResult) -> float:
    """What a pointwise kernel of the step costs, launch-weighted median of the captured ones (``triton_poi_``): what a
    site's epilogue costs where a library call leaves it to a kernel of its own and a template takes it in (0: none
    captured, as on the CPU)."""
    return _median_launch(_pointwise(capture)) or 0.0


def _pointwise(capture: CaptureResult) -> list[dict[str, Any]]:
    return [k for k in capture.kernels if "_poi_" in str(k.get("name", ""))]


def epilogue_device_ms(capture: CaptureResult) -> float | None:
    """:func:`epilogue_ms` by the kernels' device times in the step as profiled (``busy.kernel_ms``): what taking an
    epilogue in saves inside a CUDA graph; None where a captured pointwise kernel was not profiled."""
    pointwise = _pointwise(capture)
    if not pointwise or any(not k.get("device_ms") for k in pointwise):
        return None
    return _median_launch(pointwise, "device_ms")


def _merge_ms(capture: CaptureResult) -> float:
    """The profiled time of the GEMMs whose op, M, K and N the merge applies to."""
    eligible = {tuple(d) for g in capture.graphs for d in g.get("sibling_dims") or []}
    return sum(op["ms"] for op in capture.library if _gemm_dims(op) in eligible) if eligible else 0.0


def _recompute_ms(capture: CaptureResult) -> float:
    """The profiled time of the captured Triton kernels whose fused names hold an op of a value the compute-once
    rewrite stores (``triton_poi_fused_..._cos_..._sin_...``): the kernels that recompute it."""
    ops = {op for g in capture.graphs for op in g.get("broadcast_ops") or []}
    if not ops:
        return 0.0
    return sum(step_share_ms(k) for k in capture.kernels if ops & set(str(k.get("name", "")).split("_")))


def _gemm_dims(op: dict[str, Any]) -> tuple[Any, ...] | None:
    """(op, M, K, N) of a profiled ``mm`` (its inputs: ``[M, K]``, ``[K, N]``) or ``addmm`` (its bias, ending in N,
    and ``[M, K]``); None for any other call."""
    shapes = op.get("shapes") or []
    if len(shapes) < 2 or not shapes[0] or len(shapes[1]) != 2:
        return None
    if op["op"] == "mm" and len(shapes[0]) == 2:
        return "mm", shapes[0][0], shapes[0][1], shapes[1][1]
    if op["op"] == "addmm":
        return "addmm", shapes[1][0], shapes[1][1], shapes[0][-1]
    return None


def _work(task: TaskSpec) -> float | None:
    try:
        work = descriptor(task.kind).work
    except KeyError:
        return None
    return float(work(task.signature.get("space", {}))) if work is not None else None
