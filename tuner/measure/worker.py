"""A long-lived spawned worker process that measures, and survives nothing it should not.

Generated code that segfaults, hangs or exhausts memory kills the worker, not the sweep:
the parent stores the trial as ``worker_died`` or ``timeout`` and starts a fresh worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from tuner.budget.clock import Costs
from tuner.errors import TunerError, WorkloadError
from tuner.measure.classify import breaks_context
from tuner.core import Forcing
from tuner.measure.jobs import CaptureKernels, GraphTrial, Job
from tuner.measure.result import CaptureResult, Status
from tuner.workloads.spec import WorkloadSpec


class CaptureOverBudget(TunerError):
    """The capture outran what a time budget left for it; the worker was stopped."""


def _leave() -> None:
    """End the worker now: every result is sent, so no one need wait on torch's teardown. On the 2-core Xeon a CPU
    worker's close took 1.4 s (0.04 s now) and a compile-worker pool's shutdown alone 2.4 s; a sweep's end on an H100
    spent ~2 s there, where the parent's join allowed 2. Its output is flushed and its multiprocessing finalizers run
    first (a semaphore left linked is reported by the parent's resource tracker); Inductor's compile workers are asked
    to leave, and do so by themselves."""
    import logging
    import sys
    from multiprocessing import util

    from tuner.backend.process import release_compile_workers

    release_compile_workers()
    util._exit_function()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


def _child(
    conn: Any,
    spec_json: dict[str, Any],
    log_path: str,
    base: dict[str, Any] | None = None,
    instance_spread_ms: float | None = None,
    instances_by: float | None = None,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        from tuner.measure.session import Session

        spec_json = dict(spec_json)
        if spec_json.get("input_shape") is not None:
            spec_json["input_shape"] = tuple(spec_json["input_shape"])
        session = Session(
            WorkloadSpec(**spec_json), base=base, instance_spread_ms=instance_spread_ms, instances_by=instances_by
        )
        conn.send(("ready", session.capture()))
    except TunerError as e:
        conn.send(("error", str(e)))
        return
    except Exception as e:  # the workload itself failed: report it in one line
        from tuner.measure.classify import describe

        conn.send(("error", f"the workload failed to run: {describe(e)}"))
        return
    while True:  # one generic loop: every job runs itself against the session
        msg = conn.recv()
        if msg[0] == "stop":
            _leave()
        job = msg[1]
        try:
            result = session.run(job)
        except Exception as e:  # noqa: BLE001 - a capture job's failure; measurement jobs answer with a status
            from tuner.measure.classify import describe

            conn.send(("error", f"{type(job).__name__} failed: {describe(e)}"))
            continue
        conn.send(("result", result))
        if breaks_context(result.errors if hasattr(result, "errors") else []):
            os._exit(3)  # the CUDA context is unusable now; the parent starts a fresh worker


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-1500:]


def _left_compiled(job: Job, result: Any) -> frozenset[str]:
    """The forcings a job left compiled in the worker, as far as the parent can tell: a whole-workload trial that
    measured compiled its baseline and its candidate; any other job, or one that failed, may have evicted them."""
    if not isinstance(job, GraphTrial) or not getattr(result, "ok", False):
        return frozenset()
    return frozenset({Forcing(job.baseline).digest, Forcing(job.candidate).digest})


def _death(proc: Any) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"worker process killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"worker process killed by signal {-code}"
    return f"worker process exited with code {code}"


class Worker:
    """Parent-side handle. ``start()`` captures the workload; ``run(job)`` runs one job (``tuner.measure.jobs``)."""

    def __init__(
        self,
        spec: WorkloadSpec,
        log_dir: Path,
        *,
        start_timeout_s: float = 1800.0,
        trial_timeout_s: float = 900.0,
        recycle_after: int = 12,
    ):
        self.spec = spec
        self.log_dir = log_dir
        self.start_timeout_s = start_timeout_s
        self.trial_timeout_s = trial_timeout_s
        self.recycle_after = recycle_after
        self._proc: Any = None
        self._conn: Any = None
        self._served = 0
        self.log_path: Path | None = None
        self.restarts = -1
        self._kernel_capture: CaptureKernels | None = None  # replayed into a restarted worker
        self.costs = Costs()  # seconds each kind of job took lately (captures as "capture")
        self._held = False  # no recycling (``held``)
        self._compiled: frozenset[str] = frozenset()  # digests of the forcings its last job left compiled (``holds``)
        self.base: dict[
            str, Any
        ] = {}  # what every compile forces beneath its job's own (``Session.base``), from the next start
        self.instance_spread_ms: float | None = None  # measured by the first capture; a restarted worker is told it
        self.instances_by: float | None = (
            None  # no instance compile of a capture ends past this (``Session.instances_by``)
        )

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """No recycling inside: the end of a sweep runs in the worker that holds the defaults' compile (its capture),
        where a fresh one would compile them again, a compile its time never counted (a 120-s mobilenet_v2 sweep's
        check took 2.8 compiles on the CPU). A worker that died still starts again."""
        self._held = True
        try:
            yield
        finally:
            self._held = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def start(self, limit_s: float | None = None) -> CaptureResult:
        """Spawn the worker and capture the workload. ``limit_s``: a time budget's limit on the capture, past which the
        worker is stopped and :class:`CaptureOverBudget` raised."""
        self.close()
        t0 = time.monotonic()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"worker-{os.getpid()}-{int(time.time() * 1000)}.log"
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_child,
            args=(
                child,
                asdict(self.spec),
                str(self.log_path),
                dict(self.base),
                self.instance_spread_ms,
                self.instances_by,
            ),
            daemon=True,
        )
        self._proc.start()
        child.close()
        self._conn, self._served, self._compiled = parent, 0, frozenset()
        self.restarts += 1
        reply = self._receive(min(self.start_timeout_s, limit_s or self.start_timeout_s))
        if reply is None and limit_s is not None and limit_s < self.start_timeout_s and self._proc.is_alive():
            self.close()
            raise CaptureOverBudget(
                f"the capture (importing, building and compiling the workload with Inductor's defaults) did not end within "
                f"the time budget ({limit_s:.0f} s were left for it): nothing was measured. Cold caches make a first "
                "compile slow; run it again (they are warm now) or give a larger --time-budget"
            )
        if reply is None:
            why = _death(self._proc) if not self._proc.is_alive() else "timed out"
            self.close()
            raise WorkloadError(
                f"the measurement worker failed to start ({why}); log: {self.log_path}: {_tail(self.log_path)}"
            )
        kind, payload = reply
        if kind == "error":
            self.close()
            raise WorkloadError(payload)
        self.costs.observe(
            "capture", payload.later_compile_s
        )  # what a compile of this workload costs, before any other
        if payload.instances is not None:
            self.instance_spread_ms = payload.instances.instance_spread_ms
        start = max(0.0, time.monotonic() - t0 - sum(payload.costs.values()))  # the interpreter and its imports
        return dataclasses.replace(payload, costs={"start": round(start, 2), **payload.costs})

    def _receive(self, timeout: float) -> tuple[str, Any] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._conn.poll(0.2):
                try:
                    return self._conn.recv()
                except (EOFError, OSError):
                    return None
            if not self._proc.is_alive():
                if self._conn.poll(0):
                    continue
                return None
        return None

    def run(self, job: Job) -> Any:
        """Run ``job`` in the worker; its own result type comes back. A worker that dies or times out answers
        with ``job.lost(...)`` (``worker_died`` or ``timeout``) and is replaced by the next job."""
        if isinstance(job, CaptureKernels):
            self._kernel_capture = None  # this job rebuilds the registry: no replay of the one before
        self._ensure()
        if isinstance(job, CaptureKernels):
            self._kernel_capture = job
        try:
            self._conn.send(("job", job))
        except (BrokenPipeError, OSError):
            self.close()
            return job.lost(Status.WORKER_DIED, "worker process was gone before the job")
        started = time.monotonic()
        reply = self._receive(self.start_timeout_s if job.capture else self.trial_timeout_s)
        if job.capture:
            self.costs.observe("capture", time.monotonic() - started)
        self._served += 0 if job.capture else 1
        if reply is not None and reply[0] == "error":
            self.close()
            raise WorkloadError(f"{reply[1]}; log: {self.log_path}: {_tail(self.log_path) if self.log_path else ''}")
        self._compiled = _left_compiled(job, reply[1] if reply is not None else None)
        if reply is not None:
            if breaks_context(getattr(reply[1], "errors", [])):
                self.close()  # the child exits on its own; make sure the next job starts a fresh one
            return reply[1]
        status, why = self._lost(started, self.start_timeout_s if job.capture else self.trial_timeout_s)
        return job.lost(status, why)

    def holds(self, forcing: Forcing) -> bool:
        """Whether the next job finds ``forcing``'s compile in the worker (``Session`` keeps its last compiles): the last
        job was a whole-workload trial that compiled it, and the worker is not about to start again."""
        return not self._starts_again and forcing.digest in self._compiled

    @property
    def _starts_again(self) -> bool:
        """Whether the next job starts a fresh worker: this one is gone, or has served its jobs and is not held."""
        return not self.alive or (self._served >= self.recycle_after and not self._held)

    def _lost(self, started: float, timeout: float) -> tuple[Status, str]:
        """Why no answer came, with the worker's log; the worker is closed."""
        self._proc.join(10)  # the pipe can close before the dead process is reaped
        if self._proc.is_alive() and time.monotonic() - started >= timeout:
            self.close()
            return Status.TIMEOUT, f"no result within {timeout:.0f} s"
        if self._proc.is_alive():
            self.close()
            return Status.WORKER_DIED, "worker process closed its pipe without a result"
        why, tail = _death(self._proc), _tail(self.log_path) if self.log_path else ""
        self.close()
        return Status.WORKER_DIED, f"{why}; log {self.log_path}: {tail}"[:2000]

    def _ensure(self) -> None:
        if self._starts_again:
            self.start()
            if self._kernel_capture is not None:  # the kernel registry lives in the worker: rebuild it
                self._conn.send(("job", self._kernel_capture))
                reply = self._receive(self.start_timeout_s)
                if reply is None or reply[0] == "error":
                    why = reply[1] if reply else _death(self._proc)
                    self.close()
                    raise WorkloadError(f"{why}; log: {self.log_path}: {_tail(self.log_path) if self.log_path else ''}")

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            if self._proc.is_alive():
                try:
                    self._conn.send(("stop",))
                except (BrokenPipeError, OSError):
                    pass
                self._proc.join(2)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
        finally:
            self._conn.close()
            self._proc = self._conn = None
