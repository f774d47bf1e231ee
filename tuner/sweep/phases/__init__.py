"""The sweep's phases: each plans its tasks and runs until its deadline, sharing one :class:`SweepContext`."""

from tuner.sweep.phases.base import Phase, Plan, SweepContext, Workload, run_phases
from tuner.sweep.phases.cuda_graphs import CudaGraphPhase
from tuner.sweep.phases.freezing import FreezingPhase
from tuner.sweep.phases.graphs import FusionPhase, GraphKnobPhase, GraphStudyPhase
from tuner.sweep.phases.kernels import KernelPhase
from tuner.sweep.phases.sites import SitePhase
from tuner.sweep.phases.whole import WholeCheckPhase

BUILT_IN = tuple(p.name for p in (CudaGraphPhase, FreezingPhase, SitePhase, GraphKnobPhase, FusionPhase, KernelPhase, WholeCheckPhase))


def study_phases(device_type: str) -> list[str]:
    """The phases that kinds on this device name and no built-in phase has, in registration order: each is a graph
    study of its own (:class:`GraphStudyPhase`), e.g. the attention backends."""
    from tuner.kinds import registered

    return list(dict.fromkeys(k.phase for k in registered() if device_type in k.devices and k.phase not in BUILT_IN))

__all__ = [
    "CudaGraphPhase", "FreezingPhase", "FusionPhase", "GraphKnobPhase", "GraphStudyPhase", "KernelPhase", "Phase", "Plan", "SitePhase", "SweepContext", "WholeCheckPhase",
    "Workload", "run_phases", "study_phases",
]
