"""Picklable results that cross the worker-process boundary. Plain data only."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tuner.core import Status


@dataclass(frozen=True)
class Measurement:
    status: Status
    median_ms: float | None = None
    min_ms: float | None = None
    spread_ms: float | None = None
    baseline_ms: float | None = None
    error: str | None = None
    compile_s: float | None = None
    baseline_spread_ms: float | None = None  # the default's spread in the same run (``spread_ms`` is the candidate's)
    timing_s: float | None = None  # a whole-workload trial's timing alone, without its compiles (seconds)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def ratio(self) -> float | None:
        if not self.ok or not self.baseline_ms or self.median_ms is None:
            return None
        return self.median_ms / self.baseline_ms

    def beats_default(self, min_gain: float) -> bool:
        """Whether this measurement shows its config faster than the default it was timed against by ``min_gain``,
        and by more than the noise it measured: the gain must clear half the sum of both sides' spreads, so the
        two interquartile boxes (median +- spread / 2) do not overlap. A gain inside them is noise, whatever
        ``min_gain`` says."""
        return self.ratio is not None and self.ratio < 1 - min_gain and not self.within_noise

    def slower_than_default(self, min_gain: float) -> bool:
        """Whether this measurement shows its config slower than the default by ``min_gain`` and past the noise."""
        return (
            self.ratio is not None and self.ratio > 1 + min_gain and self.median_ms - self.baseline_ms > self.noise_ms
        )  # type: ignore[operator]

    @property
    def noise_ms(self) -> float:
        """What a gain must exceed to count: half the sum of both sides' spreads."""
        return ((self.spread_ms or 0.0) + (self.baseline_spread_ms or 0.0)) / 2

    @property
    def within_noise(self) -> bool:
        """Whether the gain over the default (if any) lies inside the measured spreads of the two sides."""
        if self.median_ms is None or self.baseline_ms is None:
            return True
        return self.baseline_ms - self.median_ms <= self.noise_ms

    @property
    def errors(self) -> list[str]:
        return [self.error] if self.error else []


@dataclass(frozen=True)
class SiteTimings:
    """Inductor's timings (ms) of the choices at each benchmarked site, from one compile."""

    status: Status
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str | None = None
    compile_s: float | None = None
    pruned: dict[str, list[str]] = field(default_factory=dict)  # {site key: choices stopped after their probe}
    fallbacks: int = 0  # choices timed as Inductor times them, where they could not be timed the asked way
    met: tuple[str, ...] | None = None  # the keys of the sites the compile selected at (None: not said)
    recording: Recording | None = None  # the graphs and sites it met, where the batch was asked to record them

    @property
    def errors(self) -> list[str]:
        return [self.error] if self.error else []


@dataclass(frozen=True)
class AttentionTimings:
    """Each attention site's fused backends timed alone: {site id: {backend: {"ms", "spread", "error"} or {"error"}}}
    (``backend/instrument/attention_timing.time_backends``)."""

    status: Status
    timings: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    error: str | None = None

    @property
    def errors(self) -> list[str]:
        return [self.error] if self.error else []


@dataclass(frozen=True)
class KernelResults:
    """One measurement per config of a kernel batch. ``lost``: the worker died or timed out on the batch as a
    whole, so no config of it was measured on its own."""

    measurements: tuple[Measurement, ...]
    lost: bool = False

    @property
    def errors(self) -> list[str]:
        return [m.error for m in self.measurements if m.error]


@dataclass(frozen=True)
class Instances:
    """Compiled instances of the capture's config, timed beside it (``Session._instances``, CPU)."""

    instance_spread_ms: float  # the spread of their medians: how far two compiles of one config can differ here
    instance_base_ms: float  # the capture's compile's median in that timing
    warm_compile_s: float  # the median time one of them took to compile, after the capture's (cold) compile


@dataclass(frozen=True)
class Recording:
    """What a record-mode compile under some forcing saw: its graphs (keys, fusion pairs) and its template sites."""

    graphs: list[dict[str, Any]]
    sites: list[dict[str, Any]]

    @classmethod
    def of(cls, recorder: Any) -> Recording:
        """What a record-mode compile's recorder (``backend/instrument/recorder``) saw."""
        return cls([asdict(g) for g in recorder.graphs.values()], [asdict(s) for s in recorder.sites.values()])


@dataclass(frozen=True)
class CaptureResult:
    """What a record-mode compile of the workload found."""

    graphs: list[dict[str, Any]]
    sites: list[dict[str, Any]]
    graph_breaks: dict[str, int]
    device: dict[str, Any]
    environment: dict[str, Any]
    compile_s: float
    eager_ms: float | None = None
    kernels: list[dict[str, Any]] = field(default_factory=list)  # the Triton kernels' task records (CUDA)
    cores: list[int] = field(default_factory=list)  # the CPU cores the measuring process may run on
    step_ms: float | None = None  # the default compile's step, wall time (CUDA)
    busy_ms: float | None = None  # ... and the device's busy time in it (``measure/busy``); None: unknown
    library: list[dict[str, Any]] = field(default_factory=list)  # its library calls: op, input shapes, device ms
    costs: dict[str, float] = field(default_factory=dict)  # seconds each part of the capture took, in order
    instances: Instances | None = None  # where this capture timed compiled instances of its config (CPU)

    @property
    def later_compile_s(self) -> float:
        """What a later compile of the workload is expected to take: twice a compile after the capture's, where one
        was timed and that is less than the capture's own (whose cold caches, on the CPU, cost a small decode step
        12.6 s against 1.0-3.3 s for a compile of other knobs after it), else the capture's."""
        return min(self.compile_s, 2 * self.instances.warm_compile_s) if self.instances else self.compile_s

    def instance_note(self) -> str:
        """What the spread between compiled instances means for this sweep, where it was measured."""
        i = self.instances
        if i is None or not i.instance_base_ms:
            return ""
        return (
            f"compiled instances of one config differ by up to {100 * i.instance_spread_ms / i.instance_base_ms:.1f}% here "
            f"({i.instance_spread_ms:.3g} ms): a whole-workload trial's gain must exceed that"
        )

    def cost_line(self) -> str:
        """The capture's cost, item by item: ``capture: 40 s (start 6.0 s, model build 2.1 s, default compile …)``."""
        items = ", ".join(f"{name} {s:.1f} s" for name, s in self.costs.items() if s >= 0.05)
        return f"capture: {sum(self.costs.values()):.0f} s ({items})" if self.costs else ""

    @property
    def idle_share(self) -> float | None:
        """The share of the default step the device waits for the host (CUDA), where both were measured."""
        if not self.step_ms or self.busy_ms is None:
            return None
        return max(0.0, 1.0 - self.busy_ms / self.step_ms)


@dataclass(frozen=True)
class CompiledCopy:
    """A compiled copy of the workload: its callable, the first call's time, its error against the reference, and
    the site timings its compile took (when asked to benchmark sites)."""

    fn: Any
    compile_s: float
    error: float
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    pruned: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: list[float] = field(default_factory=list)  # per tensor (``error`` is the largest)
    met: frozenset[str] = frozenset()  # the keys of the template sites its compile selected at
