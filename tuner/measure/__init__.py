"""Measurement knows nothing of search: a job in (``tuner.measure.jobs``), its own result type out."""

from tuner.measure.jobs import (
    AttentionAlone,
    CaptureGraphs,
    CaptureKernels,
    GraphReplay,
    GraphTrial,
    Job,
    KernelBatch,
    SiteBatch,
)
from tuner.measure.result import (
    AttentionTimings,
    CaptureResult,
    KernelResults,
    Measurement,
    Recording,
    SiteTimings,
    Status,
)
from tuner.measure.worker import Worker

__all__ = [
    "AttentionAlone",
    "AttentionTimings",
    "CaptureGraphs",
    "CaptureKernels",
    "CaptureResult",
    "GraphReplay",
    "GraphTrial",
    "Job",
    "KernelBatch",
    "KernelResults",
    "Measurement",
    "Recording",
    "SiteBatch",
    "SiteTimings",
    "Status",
    "Worker",
]
