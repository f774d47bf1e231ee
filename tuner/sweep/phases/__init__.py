"""The sweep's phases: each plans its tasks and runs until its deadline, sharing one :class:`SweepContext`."""

from tuner.sweep.phases.base import Phase, Plan, SweepContext, Workload, run_phases
from tuner.sweep.phases.cuda_graphs import CudaGraphPhase
from tuner.sweep.phases.graphs import AttentionPhase, FusionPhase, GraphKnobPhase
from tuner.sweep.phases.kernels import KernelPhase
from tuner.sweep.phases.sites import SitePhase
from tuner.sweep.phases.whole import WholeCheckPhase

__all__ = [
    "AttentionPhase", "CudaGraphPhase", "FusionPhase", "GraphKnobPhase", "KernelPhase", "Phase", "Plan", "SitePhase", "SweepContext", "WholeCheckPhase",
    "Workload", "run_phases",
]
