"""The ``tuned`` torch.compile backend and every adapter onto Inductor internals."""

from tuner.backend.counters import reset_stats, stats
from tuner.backend.tuned import tuned

__all__ = ["reset_stats", "stats", "tuned"]
