"""What each sweep phase is expected to gain, from the capture's profile of the default step, and the order in which a
time budget is spent: by expected gain per second of expected cost, largest first.

The profile splits the default step (CUDA: its wall time, and the device's busy time within it) into what each phase
acts on: the time the device waits for the host (CUDA graphs), the captured Triton kernels' time (their configs and
their fusion groupings), and the rest of the busy time, the library and template calls, shared between the template
sites and the kinds that claim multiply-adds of their own (``TaskKind.work``: attention sites) by their multiply-adds;
the sites are also weighed by the pointwise kernels their library defaults leave behind, which a template takes in.
The fusion study's rewrite of few-channel strided convolutions is weighed by those convolutions' profiled time, and
cuDNN's fused convolution epilogue, where the recording saw one apply, by the Triton kernels' time; the merge of
GEMMs that read one input through frozen weights by those GEMMs' profiled time; the values computed once instead of in
every kernel that reads them broadcast, by the profiled time of the Triton kernels whose fused names hold their ops.
A phase's expected gain is its share times a rate: the fraction of that time such a phase has won on our sweeps (below).
Estimates, shown as such; where the device's busy time is unknown (the CPU, or no profiler) nothing is reordered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tuner.core import Kind, TaskSpec
from tuner.kinds import descriptor
from tuner.measure.result import CaptureResult
from tuner.search_spaces.attention import FAMILY as ATTENTION_FAMILY
from tuner.sweep.epilogues import site_epilogues
from tuner.sweep.tasks import gemm_rows_cols, gemm_unaligned, site_work, step_share_ms

CUDA_GRAPHS, SITES, KERNELS, FUSION = "CUDA graphs", "template sites", "Triton kernels", "fusion groupings"
# The fraction of its share of the step a phase is expected to win, from our H200 sweeps (bf16): CUDA graphs recover
# most of the host's wait (resnet50's training step: 17 -> 7.5 ms); the template sites of a Qwen2 prefill won 13.5% of
# their time timed back to back (bench/results/h200/sweep-qwen2-8l-bf16-b8-s512-default-2026-12-03.log); Triton
# kernel configs a few percent of theirs; a fusion grouping moved resnet50's step 10%, mostly through its
# pointwise kernels. A kind with multiply-adds of its own (attention) is given the template sites' rate.
RATES = {CUDA_GRAPHS: 0.8, SITES: 0.12, KERNELS: 0.03, FUSION: 0.10}
STUDY_RATE = RATES[SITES]
# A template site at a large GEMM (M and N both at least LARGE_GEMM) is weighed at LARGE_GEMM_RATE: timed as graph
# replays, cuBLAS held all 7 GEMM sites of the Qwen2 prefill (M=4096) in two sweeps, and the Triton winners at
# vit_b_32's (M=1600) paid nothing in the workload (0.997x without them: bench/results/h200/
# vit_b_32-bf16-b32-ablation-default-2026-12-04.json). Skinny GEMMs (a decode step's 8 rows, a classifier's head) and
# convolutions, where the templates won (max-autotune's lead on gpt2's decode; resnet50's 1x1 convolutions 2-4x),
# keep the sites' rate.
LARGE_GEMM = 256
LARGE_GEMM_RATE = 0.02
# A GEMM whose K or N is not a multiple of 16 bytes (a vocabulary of 50257 tokens) leaves cuBLAS a slow unaligned
# kernel: gpt2's decode step's vocabulary projection (8 x 768 x 50257, bf16) ran 107 us in cuBLAS's, 22 us in
# max-autotune's Triton template, profiled in the step under CUDA graphs on the H200 (bench/results/h200/
# profile-hf_gpt2-decode-bf16-b8-s512-2026-12-04.json).
UNALIGNED_RATE = 0.75
# A site whose output a pointwise op reads (``space["epilogue"]``) and whose default is a library call leaves that op
# to a kernel of its own, which a template takes in: the sites are also weighed by those kernels (each the step's
# median pointwise kernel, :func:`epilogue_ms`, once per call) at this rate, scaled down as the site's own rate is
# (a large GEMM's Triton winners paid nothing in the workload). On an H100 (bf16 b32, frozen under CUDA graphs)
# max-autotune ran mobilenet_v3_large 0.078 ms under Inductor's default kernels (0.796 against 0.875 ms); it differs
# from them at the 45 such convolution sites (its templates, taking in their epilogues) and in coordinate descent on
# the Triton kernels (0.989x on the Qwen2 prefill). At the sites' rate alone, on library calls of 0.254 ms, the sites
# were expected to win 0.031 ms (bench/results/h100/mobilenet_v3_large-bf16-b32-120-2026-12-06.json and its sweep
# log). The rate is that of cuDNN's own epilogue, which removes the same kernels.
SITE_EPILOGUE_RATE = 0.25
# The fusion study also holds the space-to-depth rewrite (``backend/hooks/conv_rewrite``): it took resnet50's 7x7/2 stem
# from 0.330 to 0.177 ms and vit_b_16's patchify convolution from 0.331 to 0.117 ms (H200, bf16). It is weighed by
# the time the profile finds at those convolutions; cuDNN spent 0.43 ms of vit_b_32's 1.5-ms step at its one.
S2D_RATE = 0.45
# ... and cuDNN's fused epilogue (``backend/hooks/conv_epilogue``), measured first where the recording saw convolutions
# end in a ReLU: it took 0.19 ms off resnet50's 1.45-ms step, whose Triton kernels ran 0.69 ms, and 0.22 ms off
# resnext50_32x4d's (H200, bf16, frozen under CUDA graphs; bench/results/h200/conv-epilogue-bf16-b32-2026-12-04.json),
# though it cost regnet_y_1_6gf 23%. It is weighed by the Triton kernels' time, the pointwise kernels it removes.
EPILOGUE_RATE = 0.25
# ... and the merge of sibling GEMMs (``backend/hooks/gemm_merge``), weighed by their profiled time: the Qwen2 prefill's
# q, k and v projections (17.1 + 2 x 9.9 us a layer, 8 layers) merged took 0.043-0.070 ms off its 2.61-ms step (H200,
# bf16, frozen under CUDA graphs; bench/results/h200/merge-gemms-qwen2-8l-bf16-b8-s512-2026-12-04.json and levers-…).
MERGE_RATE = 0.2
# ... and Inductor's combo kernels (independent kernels launched as one), measured first where the step is a run of
# short Triton kernels (launch-weighted median at most SHORT_KERNEL_MS, near a kernel's fixed cost: gpt2's decode
# step's ran 4.2-4.9 us, vit_b_32's 6-14 us, the Qwen2 prefill's 7-22 us), weighed by those kernels' launches. A prior:
# gpt2's decode step (b8, 512-position cache, ~65 Triton launches), compiled frozen and timed back to back at
# 1.167 ms (twice the sweep's 0.574 under CUDA graphs: here the host launched it), took 0.955 ms with combo kernels,
# ~3 us a launch; the Qwen2 prefill ran 1.011x slower (bench/results/h200/
# levers-hf_gpt2-decode-bf16-b8-s512-2026-12-04.json, levers-qwen2-…). Under CUDA graphs a launch costs less: a
# third of that.
SHORT_KERNEL_MS = 0.005
COMBO_MS_PER_LAUNCH = 0.001
# ... and broadcast transcendental values stored once (``backend/hooks/compute_once``), weighed by the profiled time of
# the Triton kernels whose fused names hold their ops: the Qwen2 prefill's rotary kernels, which computed a cos and a
# sin per element of q and of k (~0.27 ms of its 2.6-ms step, 17 us a layer for each), took 0.073 ms less with the
# values stored once; a Gemma prefill's step 0.097 ms less (H200, bf16, frozen under CUDA graphs;
# bench/results/h200/levers-compute-once-qwen2-gemma-8l-bf16-b8-s512-2026-12-04.json).
RECOMPUTE_RATE = 0.25
# Attention the dispatcher ran as math (``backend/hooks/attention_math``) is weighed by the time of its two batched
# GEMMs, which a fused kernel replaces along with the softmax between them: on BERT-base (H100, b8 x 512, bf16) its
# float32 bmm ran 103.5 and 86.9 us a layer, its softmax kernel 72 us and the copies before them ~22 us
# (bench/results/h100/sweep-hf_bert-base-uncased-bf16-b8-s512-2026-12-06.log), where a fused kernel of that size runs
# a few tens of us.
MATH_ATTENTION_RATE = 0.8


@dataclass(frozen=True)
class Profile:
    """The default step, split by what each phase acts on (ms)."""

    step_ms: float
    idle_ms: float
    triton_ms: float
    library_ms: float  # the busy time outside the captured Triton kernels: template sites, attention, other calls
    site_macs: float
    study_macs: dict[str, float] = field(default_factory=dict)  # {phase: multiply-adds its kinds claim}
    s2d_ms: float = 0.0  # the library time of the convolutions the space-to-depth rewrite applies to
    epilogues: bool = False  # whether the recording saw convolutions whose ReLU cuDNN's epilogue could run
    merge_ms: float = 0.0  # the library time of the GEMMs the merge applies to
    short_launches: int = 0  # Triton kernel launches a step, where they are short (:func:`short_launches`)
    recompute_ms: float = 0.0  # the Triton kernels' time that recomputes broadcast values (:func:`_recompute_ms`)
    site_rate: float = RATES[SITES]  # the sites' rate, weighted by their multiply-adds (:func:`site_rate`)
    study_ms: dict[str, float] = field(default_factory=dict)  # {phase: the profiled time of its kinds' library calls}
    site_epilogues_ms: float = 0.0  # the epilogue kernels the sites' library calls leave, rate-weighted (:func:`_site_epilogues_ms`)
    math_attention: tuple[str, float] | None = None  # (phase, the batched GEMMs' time) of attention run as math (:func:`_math_attention_ms`)

    @classmethod
    def of(cls, capture: CaptureResult, tasks: Iterable[TaskSpec]) -> Profile | None:
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
        return cls(capture.step_ms, max(0.0, capture.step_ms - capture.busy_ms), triton, max(0.0, capture.busy_ms - triton), sites, studies,
                   _s2d_ms(capture), any(g.get("epilogue_convs") for g in capture.graphs), _merge_ms(capture),
                   short_launches(capture), _recompute_ms(capture), weighted / sites if sites else RATES[SITES], study_ms,
                   _site_epilogues_ms(capture, tasks, counts), _math_attention_ms(capture, tasks))

    def lever_ms(self, phase: str) -> float | None:
        """The time of the step that ``phase`` acts on; None for a graph study whose kinds claim no multiply-adds
        (``TaskKind.work``): its share is unknown."""
        if phase == CUDA_GRAPHS:
            return self.idle_ms
        if phase in (KERNELS, FUSION):
            return self.triton_ms
        if phase in self.study_ms:
            return self.study_ms[phase]
        # The library time no study's calls were profiled for, shared by multiply-adds.
        unmeasured = {p: m for p, m in self.study_macs.items() if p not in self.study_ms}
        rest, macs = max(0.0, self.library_ms - sum(self.study_ms.values())), self.site_macs + sum(unmeasured.values())
        if phase == SITES:
            return rest * (self.site_macs / macs if macs else 1.0)
        if phase not in unmeasured:
            return None
        return rest * unmeasured[phase] / macs if macs else 0.0

    def gain_ms(self, phase: str) -> float | None:
        """What ``phase`` is expected to take off the step (ms); None where its share is unknown."""
        lever = self.lever_ms(phase)
        if lever is None:
            return None
        if phase == SITES:
            return lever * self.site_rate + self.site_epilogues_ms
        math = self.math_attention[1] * MATH_ATTENTION_RATE if self.math_attention and self.math_attention[0] == phase else 0.0
        return lever * RATES.get(phase, STUDY_RATE) + self.front_ms(phase) + math

    def front_ms(self, phase: str) -> float:
        """The part of ``phase``'s expected gain that its first trial holds: the fusion study measures the
        space-to-depth rewrite, cuDNN's epilogue, the GEMM merge, the values computed once and combo kernels first,
        so their gain comes at the price of one trial, not of the study."""
        if phase != FUSION:
            return 0.0
        return (self.s2d_ms * S2D_RATE + (self.triton_ms * EPILOGUE_RATE if self.epilogues else 0.0) + self.merge_ms * MERGE_RATE
                + self.recompute_ms * RECOMPUTE_RATE + self.short_launches * COMBO_MS_PER_LAUNCH)


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
    return phase, sum(op["ms"] for op in capture.library if op["op"] == "bmm" and op["shapes"] and repr(op["shapes"][0]) in firsts)


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
    return sum(int(k.get("launches") or 1) for k in capture.kernels) if median is not None and median <= SHORT_KERNEL_MS else 0


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


def by_gain(names: list[str], profile: Profile, cost_s: dict[str, float], first_s: dict[str, float] | None = None) -> list[str]:
    """``names`` by expected gain per second of expected cost, largest first; a phase of unknown gain after those
    with one, and a phase with no expected cost (no task known yet) last; ties keep their order. ``first_s``: {phase:
    the expected cost of its first trial}, where the part of its gain that trial holds (:meth:`Profile.front_ms`) may
    come at a better rate than the whole phase's."""
    def rate(name: str) -> float:
        cost, ms = cost_s.get(name, 0.0), profile.gain_ms(name)
        if cost <= 0:
            return -2.0
        if ms is None:
            return -1.0
        first, front = (first_s or {}).get(name, 0.0), profile.front_ms(name)
        return max(ms / cost, front / first if first > 0 else 0.0)

    return sorted(names, key=lambda n: -rate(n))


def gains_line(profile: Profile, order: list[str], cost_s: dict[str, float]) -> str:
    """The order a time budget is spent in, each phase with its expected gain and cost."""
    parts = [f"{n} ~{_ms(profile.gain_ms(n))} in ~{cost_s[n]:.0f} s" for n in order if cost_s.get(n, 0.0) > 0]
    return (f"expected gains on the default step's {profile.step_ms:.3g} ms (estimates; the GPU waits {profile.idle_ms:.3g} ms, "
            f"Triton kernels {profile.triton_ms:.3g} ms, library and template calls {profile.library_ms:.3g} ms): "
            + ", ".join(parts) + "; the phases run in that order")


def _ms(ms: float | None) -> str:
    return "? ms" if ms is None else f"{ms:.2g} ms"


def worth_a_trial(profile: Profile, phase: str, min_gain: float, graphs_first: bool = False) -> bool:
    """Whether a phase can be expected to win what a whole-workload trial against its base must win by: its
    expected gain at least that share of the step (unknown: it may). ``graphs_first``:
    the workload under CUDA graphs is measured first, so the trials time the step with the host's wait mostly gone
    (gpt2's decode step: 2.32 ms launched by the host, 0.57 under CUDA graphs)."""
    ms = profile.gain_ms(phase)
    step = profile.step_ms - (profile.gain_ms(CUDA_GRAPHS) or 0.0) if graphs_first else profile.step_ms
    return ms is None or ms >= min_gain * step

