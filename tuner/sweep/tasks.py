"""Turning what a capture saw into tuning tasks: key, kind, readable name, signature, search space."""

from __future__ import annotations

import math
from typing import Any

from tuner.core import InputRow, Kind, TaskSpec, site_name
from tuner.kinds import graph_hooked
from tuner.measure.result import CaptureResult
from tuner.search_spaces import space_for
from tuner.search_spaces.template import DTYPE_BYTES, generator_context


def _family(graph: dict[str, Any]) -> dict[str, Any]:
    """What lets a compile at other sizes use this graph's answers (``tuner.nearest``): its family and input sizes."""
    if not graph.get("family") or graph.get("shapes") is None:
        return {}
    return {"family": graph["family"], "shapes": graph["shapes"]}


def tasks_from_capture(capture: CaptureResult, model: str) -> list[TaskSpec]:
    """Template sites first (the graph-level study then runs with their winners forced), then graphs."""
    out = site_tasks(capture.sites)
    info = capture.device.get("info", {})
    for g in capture.graphs:
        for kind in graph_hooked(g.get("device", "cpu")):
            if kind.graph_task is None or (kind.forward_only and g["backward"]) or kind.value not in g.get("keys", {}):
                continue  # e.g. fusion groupings: their phase records their own tasks
            space = kind.graph_task(g, capture.sites, info)
            if space is None:
                continue
            sig = {"backward": g["backward"], "lines": g["lines"], "space": space, **_family(g)}
            name = f"{model} {'backward' if g['backward'] else 'forward'} graph {g['index']} {kind.label}".rstrip()
            out.append(TaskSpec(g["keys"][kind.value], Kind(kind.value), name, sig, space_for(kind.value, sig)))
    return out


def site_tasks(sites: list[dict[str, Any]]) -> list[TaskSpec]:
    """A template-site task for each site a recording compile met (``SiteRecord``), in order."""
    out: list[TaskSpec] = []
    for s in sites:
        space: dict[str, Any] = {"choices": s["choices"], "default": s["default"]}
        gen = generator_context(s["op"], s["inputs"], s["choices"])
        if gen is not None:
            space["generate"] = gen
        if s.get("epilogue"):
            space["epilogue"] = True  # a pointwise op reads its output: a template takes it in (``hooks/epilogue``)
        sig = {"op": s["op"], "inputs": s["inputs"], "space": space}
        if s.get("scalars") is not None:
            sig["scalars"] = s["scalars"]
        if s.get("fp32_precision"):
            sig["fp32_precision"] = s["fp32_precision"]
        out.append(TaskSpec(s["key"], Kind.SITE, site_name(s["op"], s["inputs"]), sig, space_for(Kind.SITE, sig)))
    return out


def kernel_tasks(records: list[dict[str, Any]]) -> list[TaskSpec]:
    """Triton kernel tasks from a kernel capture, the largest share of the step first (the default config's time
    times its launches per step: a kernel shared by a model's repeated blocks runs once per block), so a time
    budget goes where the step spends its time."""
    out = []
    for r in sorted(records, key=lambda r: -step_share_ms(r)):
        sig = dict(r["signature"])
        sig["default_ms"] = r.get("default_ms")
        sig["launches"] = int(r.get("launches") or 1)
        ms = f" {r['default_ms'] * 1e3:.0f}us" if r.get("default_ms") else ""
        times = f" x{sig['launches']}" if sig["launches"] > 1 else ""
        out.append(TaskSpec(r["key"], r["kind"], f"{r['name']}{ms}{times}", sig, space_for(r["kind"], sig)))
    return out


def step_share_ms(record: dict[str, Any]) -> float:
    """A captured kernel's time per step with its default config (ms): per launch, times launches per step."""
    return (record.get("default_ms") or 0.0) * int(record.get("launches") or 1)


def _input_sizes(task: TaskSpec) -> list[Any] | None:
    """A site's input sizes, at least two inputs with the last two of two dimensions or more; None for a malformed
    row or too few inputs."""
    try:
        sizes = [InputRow.parse(row).sizes for row in task.signature.get("inputs", [])]
    except (ValueError, TypeError, AttributeError):
        return None
    return None if len(sizes) < 2 or any(len(s) < 2 for s in sizes[-2:]) else sizes


def site_work(task: TaskSpec) -> int:
    """A template site's multiply-adds, from its inputs' sizes: what orders the sites so that a phase cut short by
    its deadline tunes the largest first. A convolution counts its input positions over its stride where the site's
    Triton template says it (else every position: an upper bound); the matmul family its last two inputs (addmm's
    first is the bias). 0 where a size is symbolic or a row malformed."""
    try:
        base = dict(task.signature.get("space", {}).get("generate", {}).get("base", []))
        stride = max(1, int(base.get("STRIDE_H", 1)) * int(base.get("STRIDE_W", 1)))
    except (ValueError, TypeError, AttributeError):
        return 0
    if (sizes := _input_sizes(task)) is None:
        return 0
    if task.signature.get("op") == "convolution":
        (n, _, *space), weight = sizes[0], sizes[1]
        return n * math.prod(space) * math.prod(weight) // stride
    a, b = sizes[-2], sizes[-1]
    return math.prod(a) * b[-1]


def gemm_rows_cols(task: TaskSpec) -> tuple[int, int] | None:
    """(M, N) of a matmul-family site, from its last two inputs; None for a convolution, a symbolic size or a
    malformed row."""
    sizes = _input_sizes(task) if task.signature.get("op") != "convolution" else None
    if sizes is None:
        return None
    m, n = sizes[-2][-2], sizes[-1][-1]
    return (m, n) if isinstance(m, int) and isinstance(n, int) else None


ALIGN_BYTES = 16  # cuBLAS's fast kernels want each row of A, B and the output to start 16-byte aligned


def gemm_unaligned(task: TaskSpec) -> bool:
    """Whether a matmul-family site's K or N, in bytes of its dtype, is not a multiple of :data:`ALIGN_BYTES` (a
    row of its output or of its first input then starts unaligned); False for a convolution or an unknown dtype."""
    if task.signature.get("op") == "convolution" or (sizes := _input_sizes(task)) is None:
        return False
    try:
        width = DTYPE_BYTES.get(InputRow.parse(task.signature["inputs"][-1]).dtype)
    except (ValueError, TypeError, KeyError, IndexError):
        return False
    k, n = sizes[-2][-1], sizes[-1][-1]
    return (
        width is not None
        and isinstance(k, int)
        and isinstance(n, int)
        and bool((k * width) % ALIGN_BYTES or (n * width) % ALIGN_BYTES)
    )


def _fusion_defaults(device: str) -> dict[str, Any]:
    from tuner.backend.defaults import fusion_defaults  # imports Inductor

    return fusion_defaults(device)


def fusion_tasks(graphs: list[dict[str, Any]], model: str, short_kernels: int = 0) -> list[TaskSpec]:
    """One fusion-grouping task per recorded graph: knobs plus vetoes of its highest-scoring fusions, defaulting to
    Inductor's values as the recording read them (as this process reads them for a recording that has none).
    ``short_kernels``: the step's Triton launches where it is a run of short kernels (``tuner.sweep.profile.short_launches``)."""
    from tuner.search_spaces.fusion import MAX_PAIRS, REWRITE_KNOBS

    out = []
    for g in graphs:
        if not g.get("fusion_key"):
            continue
        pairs = [p for p, _ in sorted(g.get("pairs", {}).items(), key=lambda kv: (-kv[1], kv[0]))][:MAX_PAIRS]
        space = {
            "device": g.get("device", "cpu"),
            "defaults": g.get("fusion_defaults") or _fusion_defaults(g.get("device", "cpu")),
            "pairs": pairs,
        }
        if g.get("unshared"):
            space["unshared_epilogues"] = len(g["unshared"])
        for seen in (r.seen for r in REWRITE_KNOBS.values()):
            if g.get(seen):
                space[seen] = int(g[seen])
        if short_kernels > 0 and space["device"] == "cuda":
            space["short_kernels"] = int(short_kernels)
        sig = {"backward": g["backward"], "lines": g["lines"], "space": space, **_family(g)}
        which = "backward" if g["backward"] else "forward"
        out.append(
            TaskSpec(
                g["fusion_key"],
                Kind.FUSION,
                f"{model} {which} graph {g['index']} fusion",
                sig,
                space_for(Kind.FUSION, sig),
            )
        )
    return out
