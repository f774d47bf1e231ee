"""The sweep's phases: each plans its tasks and runs until its deadline, sharing one :class:`SweepContext`."""

from tuner.phases.base import Phase, Plan, SweepContext, Workload, run_phases
from tuner.phases.cuda_graphs import CudaGraphPhase
from tuner.phases.graphs import FusionPhase, GraphKnobPhase
from tuner.phases.kernels import KernelPhase
from tuner.phases.sites import SitePhase
from tuner.phases.whole import WholeCheckPhase

__all__ = [
    "CudaGraphPhase", "FusionPhase", "GraphKnobPhase", "KernelPhase", "Phase", "Plan", "SitePhase", "SweepContext", "WholeCheckPhase",
    "Workload", "run_phases",
]
