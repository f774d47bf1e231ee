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
A phase's expected gain is its share times a rate: the fraction of that time such a phase has won on measured sweeps.
Estimates, shown as such; where the device's busy time is unknown (the CPU, or no profiler) nothing is reordered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.budget.names import CUDA_GRAPHS, FUSION, KERNELS, SITES

# The fraction of its share of the step a phase is expected to win: CUDA graphs recover most of the host's wait;
# template sites and fusion groupings win a tenth or so of their time, Triton kernel configs a few percent of theirs.
# A kind with multiply-adds of its own (attention) is given the template sites' rate. The evidence behind each rate
# is in bench/README.md under the rate's name.
RATES = {CUDA_GRAPHS: 0.8, SITES: 0.12, KERNELS: 0.03, FUSION: 0.10}
STUDY_RATE = RATES[SITES]
# A template site at a large GEMM (M and N both at least LARGE_GEMM) is weighed at LARGE_GEMM_RATE: there cuBLAS is
# hard to beat, and a Triton winner timed alone pays little in the workload. Skinny GEMMs (a decode step's rows, a
# classifier's head) and convolutions, where templates do win, keep the sites' rate.
LARGE_GEMM = 256
LARGE_GEMM_RATE = 0.02
# A GEMM whose K or N is not a multiple of 16 bytes (an odd vocabulary) leaves cuBLAS a slow unaligned kernel, which a
# Triton template beats by several times.
UNALIGNED_RATE = 0.75
# A site whose output a pointwise op reads (``space["epilogue"]``) and whose default is a library call leaves that op
# to a kernel of its own, which a template takes in: the sites are also weighed by those kernels (each the step's
# median pointwise kernel, ``tuner.sweep.profile.epilogue_ms``, once per call) at this rate, scaled down as the site's
# own rate is (a large GEMM's Triton winners pay little in the workload). It is the rate of cuDNN's own epilogue,
# which removes the same kernels.
SITE_EPILOGUE_RATE = 0.25
# The fusion study also holds the space-to-depth rewrite (``backend/hooks/conv_rewrite``), weighed by the time the
# profile finds at the few-channel strided convolutions it applies to.
S2D_RATE = 0.45
# ... and cuDNN's fused epilogue (``backend/hooks/conv_epilogue``), measured first where the recording saw convolutions
# end in a ReLU, weighed by the Triton kernels' time: the pointwise kernels it removes.
EPILOGUE_RATE = 0.25
# ... and the merge of sibling GEMMs (``backend/hooks/gemm_merge``), weighed by their profiled time.
MERGE_RATE = 0.2
# ... and Inductor's combo kernels (independent kernels launched as one), measured first where the step is a run of
# short Triton kernels (launch-weighted median at most SHORT_KERNEL_MS, near a kernel's fixed cost), weighed by those
# kernels' launches at COMBO_MS_PER_LAUNCH each: under CUDA graphs a launch costs a fraction of what the host pays.
SHORT_KERNEL_MS = 0.005
COMBO_MS_PER_LAUNCH = 0.001
# ... and broadcast transcendental values stored once (``backend/hooks/compute_once``), weighed by the profiled time of
# the Triton kernels whose fused names hold their ops (a rotary embedding's cos and sin, recomputed per element).
RECOMPUTE_RATE = 0.25
# Attention the dispatcher ran as math (``backend/hooks/attention_math``) is weighed by the time of its two batched
# GEMMs, which a fused kernel replaces along with the softmax between them, at a fraction of their time.
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
    site_epilogues_ms: float = (
        0.0  # the epilogue kernels the sites' library calls leave, rate-weighted (:func:`_site_epilogues_ms`)
    )
    math_attention: tuple[str, float] | None = (
        None  # (phase, the batched GEMMs' time) of attention run as math (:func:`_math_attention_ms`)
    )

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
        math = (
            self.math_attention[1] * MATH_ATTENTION_RATE
            if self.math_attention and self.math_attention[0] == phase
            else 0.0
        )
        return lever * RATES.get(phase, STUDY_RATE) + self.front_ms(phase) + math

    def front_ms(self, phase: str) -> float:
        """The part of ``phase``'s expected gain that its first trial holds: the fusion study measures the
        space-to-depth rewrite, cuDNN's epilogue, the GEMM merge, the values computed once and combo kernels first,
        so their gain comes at the price of one trial, not of the study."""
        if phase != FUSION:
            return 0.0
        return (
            self.s2d_ms * S2D_RATE
            + (self.triton_ms * EPILOGUE_RATE if self.epilogues else 0.0)
            + self.merge_ms * MERGE_RATE
            + self.recompute_ms * RECOMPUTE_RATE
            + self.short_launches * COMBO_MS_PER_LAUNCH
        )


def by_gain(
    names: list[str], profile: Profile, cost_s: dict[str, float], first_s: dict[str, float] | None = None
) -> list[str]:
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
    return (
        f"expected gains on the default step's {profile.step_ms:.3g} ms (estimates; the GPU waits {profile.idle_ms:.3g} ms, "
        f"Triton kernels {profile.triton_ms:.3g} ms, library and template calls {profile.library_ms:.3g} ms): "
        + ", ".join(parts)
        + "; the phases run in that order"
    )


def _ms(ms: float | None) -> str:
    return "? ms" if ms is None else f"{ms:.2g} ms"


def worth_a_trial(profile: Profile, phase: str, min_gain: float, graphs_first: bool = False) -> bool:
    """Whether a phase can be expected to win what a whole-workload trial against its base must win by: its
    expected gain at least that share of the step (unknown: it may). ``graphs_first``:
    the workload under CUDA graphs is measured first, so the trials time the step with the host's wait mostly gone."""
    ms = profile.gain_ms(phase)
    step = profile.step_ms - (profile.gain_ms(CUDA_GRAPHS) or 0.0) if graphs_first else profile.step_ms
    return ms is None or ms >= min_gain * step
