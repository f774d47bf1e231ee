"""tuner: autotuning kernel search for ``torch.compile``.

Sweep a workload once (``tuner sweep --model resnet50``), keep every
measurement in a SQL database, and compile with ``backend="tuned"`` to reuse
the winners without benchmarking anything.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
