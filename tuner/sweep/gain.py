"""What each sweep phase is expected to gain, from the capture's profile of the default step, and the order in which a
time budget is spent: by expected gain per second of expected cost, largest first.

The profile splits the default step (CUDA: its wall time, and the device's busy time within it) into what each phase
acts on: the time the device waits for the host (CUDA graphs), the captured Triton kernels' time (their configs and
their fusion groupings), and the rest of the busy time, the library and template calls, shared between the template
sites and the kinds that claim multiply-adds of their own (``TaskKind.work``: attention sites) by their multiply-adds.
The fusion study's rewrite of few-channel strided convolutions is weighed by those convolutions' profiled time, and
cuDNN's fused convolution epilogue, where the recording saw one apply, by the Triton kernels' time.
A phase's expected gain is its share times a rate: the fraction of that time such a phase has won on our sweeps (below).
Estimates, shown as such; where the device's busy time is unknown (the CPU, or no profiler) nothing is reordered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tuner.core import Kind, TaskSpec
from tuner.kinds import descriptor
from tuner.measure.result import CaptureResult
from tuner.sweep.tasks import site_work, step_share_ms

CUDA_GRAPHS, SITES, KERNELS, FUSION = "CUDA graphs", "template sites", "Triton kernels", "fusion groupings"
# The fraction of its share of the step a phase is expected to win, from our H200 sweeps (bf16): CUDA graphs recover
# most of the host's wait (resnet50's training step: 17 -> 7.5 ms); the template sites of a Qwen2 prefill won 13.5% of
# their time timed back to back (bench/results/h200/sweep-qwen2-8l-bf16-b8-s512-default-2026-12-03.log); Triton
# kernel configs a few percent of theirs; a fusion grouping moved resnet50's step 10%, mostly through its
# pointwise kernels. A kind with multiply-adds of its own (attention) is given the template sites' rate.
RATES = {CUDA_GRAPHS: 0.8, SITES: 0.12, KERNELS: 0.03, FUSION: 0.10}
STUDY_RATE = RATES[SITES]
# The fusion study also holds the space-to-depth rewrite (``backend/hooks/conv_rewrite``): it took resnet50's 7x7/2 stem
# from 0.330 to 0.177 ms and vit_b_16's patchify convolution from 0.331 to 0.117 ms (H200, bf16). It is weighed by
# the time the profile finds at those convolutions; cuDNN spent 0.43 ms of vit_b_32's 1.5-ms step at its one.
S2D_RATE = 0.45
# ... and cuDNN's fused epilogue (``backend/hooks/conv_epilogue``), measured first where the recording saw convolutions
# end in a ReLU: it took 0.19 ms off resnet50's 1.45-ms step, whose Triton kernels ran 0.69 ms, and 0.22 ms off
# resnext50_32x4d's (H200, bf16, frozen under CUDA graphs; bench/results/h200/conv-epilogue-bf16-b32-2026-12-04.json),
# though it cost regnet_y_1_6gf 23%. It is weighed by the Triton kernels' time, the pointwise kernels it removes.
EPILOGUE_RATE = 0.25


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

    @classmethod
    def of(cls, capture: CaptureResult, tasks: Iterable[TaskSpec]) -> Profile | None:
        """The capture's profile; None where the device's busy time was not measured."""
        if not capture.step_ms or capture.busy_ms is None:
            return None
        triton = min(capture.busy_ms, sum(step_share_ms(k) for k in capture.kernels))
        counts = {s["key"]: int(s.get("count") or 1) for s in capture.sites}
        sites, studies = 0.0, {}
        for t in tasks:
            if t.kind == Kind.SITE:
                sites += site_work(t) * counts.get(t.key, 1)
            elif (work := _work(t)) is not None:
                phase = descriptor(t.kind).phase
                studies[phase] = studies.get(phase, 0.0) + work
        return cls(capture.step_ms, max(0.0, capture.step_ms - capture.busy_ms), triton, max(0.0, capture.busy_ms - triton), sites, studies,
                   _s2d_ms(capture), any(g.get("epilogue_convs") for g in capture.graphs))

    def lever_ms(self, phase: str) -> float | None:
        """The time of the step that ``phase`` acts on; None for a graph study whose kinds claim no multiply-adds
        (``TaskKind.work``): its share is unknown."""
        if phase == CUDA_GRAPHS:
            return self.idle_ms
        if phase in (KERNELS, FUSION):
            return self.triton_ms
        macs = self.site_macs + sum(self.study_macs.values())
        if phase == SITES:
            return self.library_ms * (self.site_macs / macs if macs else 1.0)
        if phase not in self.study_macs:
            return None
        return self.library_ms * self.study_macs[phase] / macs if macs else 0.0

    def gain_ms(self, phase: str) -> float | None:
        """What ``phase`` is expected to take off the step (ms); None where its share is unknown."""
        lever = self.lever_ms(phase)
        if lever is None:
            return None
        return lever * RATES.get(phase, STUDY_RATE) + self.front_ms(phase)

    def front_ms(self, phase: str) -> float:
        """The part of ``phase``'s expected gain that its first trial holds: the fusion study measures the
        space-to-depth rewrite and cuDNN's epilogue first, so their gain comes at the price of one trial, not of the
        study."""
        if phase != FUSION:
            return 0.0
        return self.s2d_ms * S2D_RATE + (self.triton_ms * EPILOGUE_RATE if self.epilogues else 0.0)


def _s2d_ms(capture: CaptureResult) -> float:
    """The profiled time of the convolutions whose input and weight shapes the space-to-depth rewrite applies to."""
    eligible = {repr(shapes) for g in capture.graphs for shapes in g.get("s2d_shapes") or []}
    return sum(op["ms"] for op in capture.library if op["op"] == "convolution" and repr(op["shapes"]) in eligible)


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


def worth_a_trial(profile: Profile, phase: str, min_gain: float) -> bool:
    """Whether a phase whose every trial is the whole workload against its base can be expected to win one: its
    expected gain at least the share of the step a winner must beat its base by (unknown: it may)."""
    ms = profile.gain_ms(phase)
    return ms is None or ms >= min_gain * profile.step_ms

