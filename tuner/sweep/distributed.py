"""``tuner sweep --workers N``: N local sweep processes cooperating through the database's task claims.

On CUDA each worker gets one visible GPU (round robin over those visible), unless they are asked to share; on the
CPU each gets its own cores (``tuner.measure.affinity``) and a thread count to match.
Workers on other machines join by running the same ``tuner sweep`` against the same database URL.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import queue
from typing import Any

from tuner.measure.affinity import core_sets, pin
from tuner.sweep.progress import Progress
from tuner.search_spaces.freezing import FREEZING
from tuner.sweep.options import SweepOptions, SweepReport
from tuner.sweep.driver import run_sweep


class QueueProgress(Progress):
    """A worker's progress, sent to the parent process, which draws every worker's on one bar."""

    def __init__(self, out: Any, index: int):
        self.out, self.index = out, index

    def _send(self, method: str, *args: Any) -> None:
        self.out.put(("progress", (self.index, method, args)))

    def start(self, total: int, names: list[str]) -> None:
        self._send("start", total, list(names))

    def task(self, name: str) -> None:
        self._send("task", name)

    def trial(self, status: str) -> None:
        self._send("trial", status)

    def note(self, text: str) -> None:
        self._send("note", text)


class MergedProgress:
    """The workers' progress on one display: a phase's planned trials count once (every worker plans the same
    tasks and they share them), every worker's trials advance it, and notes say which worker wrote them."""

    def __init__(self, shown: Progress, workers: int):
        self.shown, self.workers = shown, workers
        self.phases: dict[int, int] = {}  # worker → phases it has started
        self.opened = 0

    def handle(self, index: int, method: str, args: tuple[Any, ...]) -> None:
        label = f"worker {index + 1}/{self.workers}"
        if method == "start":
            k = self.phases.get(index, 0)
            self.phases[index] = k + 1
            if k >= self.opened:  # the first worker to reach a phase opens it for all
                self.opened = k + 1
                self.shown.start(*args)
        elif method == "task":
            self.shown.task(f"{label}: {args[0]}")
        elif method == "trial":
            self.shown.trial(*args)
        elif method == "note":
            self.shown.note(f"{label}: {args[0]}")


def _child(opts: SweepOptions, gpu: str | None, out: Any, index: int, cores: list[int] | None = None) -> None:
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    if cores is not None:  # before anything starts a process or a thread pool: they inherit it
        pin(cores)
    try:
        out.put(("ok", (index, run_sweep(opts, QueueProgress(out, index)))))
    except KeyboardInterrupt:
        out.put(("error", (index, "interrupted")))
    except Exception as e:  # reported by the parent in one line per worker
        out.put(("error", (index, f"{type(e).__name__}: {e}")))


def visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def run_workers(
    opts: SweepOptions, n: int, *, share_gpu: bool = False, progress: Progress | None = None
) -> tuple[list[SweepReport], list[str]]:
    from tuner.db import Database
    from tuner.study.context import open_storage

    Database.open(opts.db_url).close()  # one process creates the schema, before the workers race
    open_storage(opts.db_url)
    gpus = visible_gpus() if opts.spec.device == "cuda" and not share_gpu else []
    cores = cpu_plan(opts, n)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = []
    for i in range(n):
        gpu = gpus[i % len(gpus)] if gpus else None
        mine = cores[i] if cores else None
        spec = dataclasses.replace(opts.spec, threads=len(mine)) if mine else opts.spec
        # One seed for all: a study is driven by its claim holder; a worker joining it samples with a seed of its own.
        p = ctx.Process(target=_child, args=(dataclasses.replace(opts, spec=spec), gpu, out, i, mine))
        p.start()
        procs.append(p)
    merged = MergedProgress(progress or Progress(), n)
    results: dict[int, tuple[str, Any]] = {}
    gone: set[int] = set()  # workers seen dead without a result once; twice, and they count as failed
    while len(results) < n:
        try:
            kind, payload = out.get(timeout=2.0)
        except queue.Empty:
            for i, p in enumerate(procs):
                if i not in results and p.exitcode is not None:
                    if i in gone:
                        results[i] = ("error", f"worker {i + 1} exited with code {p.exitcode} without a report")
                    gone.add(i)
            continue
        except KeyboardInterrupt:  # the workers got it too: each stores what it measured and reports
            merged.shown.note("interrupted: waiting for the workers to store their trials")
            continue
        if kind == "progress":
            merged.handle(*payload)
        else:
            results[payload[0]] = (kind, payload[1])
    reports = [r for kind, r in results.values() if kind == "ok"]
    errors = [r for kind, r in results.values() if kind != "ok"]
    for p in procs:
        p.join()
    return reports, errors


def cpu_plan(opts: SweepOptions, n: int) -> list[list[int]]:
    """Each CPU worker's cores (disjoint; ``--threads`` each, else an even split); none on CUDA."""
    return core_sets(n, opts.spec.threads) if opts.spec.device == "cpu" else []


def combine(reports: list[SweepReport]) -> SweepReport:
    """One report: every task once (the worker that measured it wins, with the winners the whole-workload check
    reverted shown reverted), trials summed, the longest wall time, the whole-workload figures of the checker."""
    base = max(reports, key=lambda r: len(r.outcomes))
    best: dict[str, Any] = {}
    for r in reports:
        for o in r.outcomes:
            if o.task.key not in best or o.measured > best[o.task.key].measured:
                best[o.task.key] = o
    checker = next((r for r in reversed(reports) if r.whole_checked), None)
    if checker is not None:
        for o in checker.outcomes:
            mine = best.get(o.task.key)
            if mine is not None and o.is_default and not mine.is_default:  # reverted by the whole-workload check
                best[o.task.key] = mine.reverted(o.winner)
            elif o.winner.get(FREEZING) is False:  # set by the whole-workload check: the graph runs unfrozen
                best[o.task.key] = o
        base = dataclasses.replace(
            base,
            default_ms=checker.default_ms,
            tuned_ms=checker.tuned_ms,
            whole_checked=True,
            unfrozen_ratio=checker.unfrozen_ratio,
            baseline=checker.baseline,
        )
    order = [o.task.key for o in base.outcomes] + [k for k in best if k not in {o.task.key for o in base.outcomes}]
    merged = dataclasses.replace(base, outcomes=[best[k] for k in order])
    merged.trials_measured = sum(r.trials_measured for r in reports)
    merged.wall_s = max(r.wall_s for r in reports)
    merged.interrupted = any(r.interrupted for r in reports)
    return merged
