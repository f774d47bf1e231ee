"""Measurement knows nothing of search: a request in, a :class:`Measurement` out."""

from tuner.measure.result import CaptureResult, Measurement, SiteRound, Status, TrialRequest
from tuner.measure.worker import Worker

__all__ = ["CaptureResult", "Measurement", "SiteRound", "Status", "TrialRequest", "Worker"]
