"""The sweep's phases: each plans its tasks and runs until its deadline, sharing one :class:`SweepContext`."""

from tuner.sweep.phases.base import Phase, Plan, SweepContext, Workload, run_phases
from tuner.sweep.phases.cuda_graphs import CudaGraphPhase
from tuner.sweep.phases.freezing import FreezingPhase
from tuner.sweep.phases.graphs import FusionPhase, GraphKnobPhase, GraphStudyPhase
from tuner.sweep.phases.kernels import KernelPhase
from tuner.sweep.phases.sites import SitePhase
from tuner.sweep.phases.whole import WholeCheckPhase

BUILT_IN = tuple(
    p.name
    for p in (CudaGraphPhase, FreezingPhase, SitePhase, GraphKnobPhase, FusionPhase, KernelPhase, WholeCheckPhase)
)


def study_phases(device_type: str) -> list[str]:
    """The phases that kinds on this device name and no built-in phase has, in registration order: each is a graph
    study of its own (:class:`GraphStudyPhase`), e.g. the attention backends."""
    from tuner.kinds import registered

    return list(dict.fromkeys(k.phase for k in registered() if device_type in k.devices and k.phase not in BUILT_IN))


def search_names(device_type: str) -> list[str]:
    """The searches a sweep on this device runs between the CUDA-graph phase and the check, in their own order
    (``tuner.sweep.plan.searches``): the template sites, the graph studies, the fusion groupings, and last the
    Triton kernels on CUDA, the codegen knobs on the CPU."""
    last = KernelPhase.name if device_type == "cuda" else GraphKnobPhase.name
    return [SitePhase.name, *study_phases(device_type), FusionPhase.name, last]


def skippable(device_type: str) -> dict[str, str]:
    """{the name ``--skip`` takes: the phase}: what a sweep on this device may leave out, each task of it then keeping
    Inductor's choice. The searches (:func:`search_names`), and on CUDA the CUDA graphs."""
    names = [*([CudaGraphPhase.name] if device_type == "cuda" else []), *search_names(device_type)]
    return {n.lower().replace(" ", "-"): n for n in names}


__all__ = [
    "CudaGraphPhase",
    "FreezingPhase",
    "FusionPhase",
    "GraphKnobPhase",
    "GraphStudyPhase",
    "KernelPhase",
    "Phase",
    "Plan",
    "SitePhase",
    "SweepContext",
    "WholeCheckPhase",
    "Workload",
    "run_phases",
    "search_names",
    "skippable",
    "study_phases",
]
