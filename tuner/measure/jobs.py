"""Measurement jobs: each request is a self-contained value of its own type, with its own result type, that crosses
the process boundary as plain data. The worker's session runs it (``Session.run``: one generic loop runs every job);
``job.lost(status, error)`` is the job's answer when the worker dies or times out on it. A capture job has no
such answer: losing the worker there fails the sweep with the worker's log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tuner.errors import WorkloadError
from tuner.measure.result import AttentionTimings, KernelResults, Measurement, SiteTimings, Status

ForcingJSON = dict[str, Any]  # a :class:`tuner.core.Forcing` as JSON (``Forcing.to_json``)


@dataclass(frozen=True)
class GraphTrial:
    """The whole workload compiled under ``candidate``, timed against ``baseline``, interleaved in one process;
    ``instances`` of each side (more than one: the others compiled anew, each of a fresh copy of the model)."""

    baseline: ForcingJSON
    candidate: ForcingJSON
    rounds: int = 15
    min_sample_ms: float = 20.0
    instances: int = 1
    capture: ClassVar[bool] = False

    def lost(self, status: Status, error: str) -> Measurement:
        return Measurement(status, error=error)


@dataclass(frozen=True)
class GraphReplay:
    """The capture's compile (Inductor's defaults) captured by hand as one CUDA graph (``tuner.measure.replay``),
    timed against the same compile launched kernel by kernel, interleaved; its output checked. No compile."""

    rounds: int = 15
    min_sample_ms: float = 20.0
    capture: ClassVar[bool] = False

    def lost(self, status: Status, error: str) -> Measurement:
        return Measurement(status, error=error)


@dataclass(frozen=True)
class SiteBatch:
    """One compile under ``forcing`` in which Inductor's benchmarker times these choice ids side by side at each
    of these sites ({site key: choice ids}), the ``timing`` way (``TUNER_SITE_TIMING``'s names; None: the setting's);
    the graph's numerics are still checked. ``record``: the compile also records the graphs and sites it meets."""

    forcing: ForcingJSON
    sites: dict[str, tuple[str, ...]]
    timing: str | None = None
    record: bool = False
    capture: ClassVar[bool] = False

    def lost(self, status: Status, error: str) -> SiteTimings:
        return SiteTimings(status, error=error)


@dataclass(frozen=True)
class AttentionAlone:
    """Each of these attention sites (``backend/hooks/attention.describe``) rebuilt from its sizes, and these fused
    backends timed there alone, interleaved, each checked against math attention first. No compile. ``front_end``:
    each called through PyTorch's SDPA front end, as a site the dispatcher runs as math is rewritten, not as its op."""

    sites: tuple[dict[str, Any], ...]
    backends: tuple[str, ...]
    front_end: bool = False
    capture: ClassVar[bool] = False

    def lost(self, status: Status, error: str) -> AttentionTimings:
        return AttentionTimings(status, error=error)


@dataclass(frozen=True)
class KernelBatch:
    """These configs of one Triton kernel (its task key), each timed at the kernel against its default."""

    kernel: str
    configs: tuple[dict[str, Any], ...]
    rounds: int = 3
    capture: ClassVar[bool] = False

    def lost(self, status: Status, error: str) -> KernelResults:
        return KernelResults(tuple(Measurement(status, error=error) for _ in self.configs), lost=True)


@dataclass(frozen=True)
class CaptureKernels:
    """Compile under ``forcing``, run once, and register every Triton kernel with the real arguments of its first
    call; the answer is the kernels' task records. A restarted worker replays the latest one."""

    forcing: ForcingJSON
    capture: ClassVar[bool] = True

    def lost(self, status: Status, error: str) -> Any:
        raise WorkloadError(f"capturing the Triton kernels failed: {error}")


@dataclass(frozen=True)
class CaptureGraphs:
    """Compile under ``forcing`` in record mode; the answer is what it saw (``Recording``: graphs and template sites)."""

    forcing: ForcingJSON
    capture: ClassVar[bool] = True

    def lost(self, status: Status, error: str) -> Any:
        raise WorkloadError(f"recording the graphs failed: {error}")


Job = GraphTrial | GraphReplay | SiteBatch | AttentionAlone | KernelBatch | CaptureKernels | CaptureGraphs

__all__ = [
    "AttentionAlone",
    "CaptureGraphs",
    "CaptureKernels",
    "GraphReplay",
    "GraphTrial",
    "Job",
    "KernelBatch",
    "SiteBatch",
]
