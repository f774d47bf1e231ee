"""The workload a device script measures, from its command line: ``--model``, ``--mode``, ``--dtype``, ``--batch``,
``--seq-len``, ``--channels-last`` (as ``tuner sweep`` takes them), always on CUDA."""

from __future__ import annotations

import argparse
from typing import Any


def add(p: argparse.ArgumentParser, batch: int = 8) -> None:
    p.add_argument("--model", required=True)
    p.add_argument("--mode", default="infer", choices=("infer", "train", "decode"))
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--channels-last", action="store_true")


def spec(a: argparse.Namespace) -> Any:
    from tuner.workloads.spec import WorkloadSpec

    return WorkloadSpec(a.model, device="cuda", dtype=a.dtype, batch=a.batch, mode=a.mode, channels_last=a.channels_last,
                        **({"seq_len": a.seq_len} if a.seq_len else {}))
