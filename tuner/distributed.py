"""``tuner sweep --workers N``: N local sweep processes cooperating through the database's task claims.

On CUDA each worker gets one visible GPU (round robin over those visible), unless they are asked to share.
Workers on other machines join by running the same ``tuner sweep`` against the same database URL.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
from typing import Any

from tuner.sweep import SweepOptions, SweepReport, run_sweep


def _child(opts: SweepOptions, gpu: str | None, out: Any) -> None:
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        out.put(("ok", run_sweep(opts)))
    except KeyboardInterrupt:
        out.put(("error", "interrupted"))
    except Exception as e:  # reported by the parent in one line per worker
        out.put(("error", f"{type(e).__name__}: {e}"))


def visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def run_workers(opts: SweepOptions, n: int, *, share_gpu: bool = False) -> tuple[list[SweepReport], list[str]]:
    from tuner.db import Database
    from tuner.search import open_storage

    Database.open(opts.db_url).close()  # one process creates the schema, before the workers race
    open_storage(opts.db_url)
    gpus = visible_gpus() if opts.spec.device == "cuda" and not share_gpu else []
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = []
    for i in range(n):
        gpu = gpus[i % len(gpus)] if gpus else None
        # A different sampler seed per worker would change nothing: each task's study is driven by one claim holder.
        p = ctx.Process(target=_child, args=(dataclasses.replace(opts), gpu, out))
        p.start()
        procs.append(p)
    reports, errors = [], []
    for _ in procs:
        kind, payload = out.get()
        (reports if kind == "ok" else errors).append(payload)
    for p in procs:
        p.join()
    return reports, errors


def combine(reports: list[SweepReport]) -> SweepReport:
    """One report: every task once (the worker that measured it wins), trials summed, the longest wall time."""
    base = max(reports, key=lambda r: len(r.outcomes))
    best: dict[str, Any] = {}
    for r in reports:
        for o in r.outcomes:
            if o.task.key not in best or o.measured > best[o.task.key].measured:
                best[o.task.key] = o
    order = [o.task.key for o in base.outcomes] + [k for k in best if k not in {o.task.key for o in base.outcomes}]
    merged = dataclasses.replace(base, outcomes=[best[k] for k in order])
    merged.trials_measured = sum(r.trials_measured for r in reports)
    merged.wall_s = max(r.wall_s for r in reports)
    merged.interrupted = any(r.interrupted for r in reports)
    return merged
