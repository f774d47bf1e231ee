"""Picklable requests and results that cross the worker-process boundary. Plain data only."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INVALID = "invalid"
    INACCURATE = "inaccurate"
    WORKER_DIED = "worker_died"


@dataclass(frozen=True)
class TrialRequest:
    """Time ``candidate`` against ``baseline`` (forcings as JSON), interleaved, in one process."""

    baseline: dict[str, Any]
    candidate: dict[str, Any]
    rounds: int = 15
    min_sample_ms: float = 20.0
    # Template sites instead: while compiling ``candidate``, Inductor's benchmarker times these choice ids
    # side by side at each of these sites ({site key: choice ids}); the graph's numerics are still checked.
    # The answer is a :class:`SiteRound`.
    sites: dict[str, tuple[str, ...]] | None = None
    # A Triton kernel instead: these configs of this kernel (task key), at the kernel, against its default.
    # The answer is a list of :class:`Measurement`, one per config.
    kernel: str | None = None
    configs: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Measurement:
    status: Status
    median_ms: float | None = None
    min_ms: float | None = None
    spread_ms: float | None = None
    baseline_ms: float | None = None
    error: str | None = None
    compile_s: float | None = None
    rel_error: float | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def ratio(self) -> float | None:
        if not self.ok or not self.baseline_ms or self.median_ms is None:
            return None
        return self.median_ms / self.baseline_ms


@dataclass(frozen=True)
class SiteRound:
    """Inductor's timings (ms) of the choices at each benchmarked site, from one compile."""

    status: Status
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str | None = None
    compile_s: float | None = None


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
    extra: dict[str, Any] = field(default_factory=dict)
