"""A long-lived spawned worker process that measures, and survives nothing it should not.

Generated code that segfaults, hangs or exhausts memory kills the worker, not the sweep:
the parent stores the trial as ``worker_died`` or ``timeout`` and starts a fresh worker.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tuner.errors import TunerError, WorkloadError
from tuner.measure.result import CaptureResult, Measurement, Status, TrialRequest
from tuner.workload import WorkloadSpec


def _child(conn: Any, spec_json: dict[str, Any], log_path: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        from tuner.measure.session import Session

        spec_json = dict(spec_json)
        if spec_json.get("input_shape") is not None:
            spec_json["input_shape"] = tuple(spec_json["input_shape"])
        session = Session(WorkloadSpec(**spec_json))
        conn.send(("ready", session.capture()))
    except TunerError as e:
        conn.send(("error", str(e)))
        return
    except Exception as e:  # the workload itself failed: report it in one line
        from tuner.measure.classify import describe

        conn.send(("error", f"the workload failed to run: {describe(e)}"))
        return
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        if msg[0] == "call" and msg[1] in ("capture_kernels", "capture_graphs"):
            try:
                conn.send(("result", getattr(session, msg[1])(msg[2])))
            except Exception as e:  # noqa: BLE001
                from tuner.measure.classify import describe

                conn.send(("error", f"{msg[1]} failed: {describe(e)}"))
            continue
        result = session.measure(msg[1])
        conn.send(("result", result))
        if _broke_context(result):
            os._exit(3)  # the CUDA context is unusable now; the parent starts a fresh worker


def _broke_context(result: Any) -> bool:
    from tuner.measure.kernels import fatal

    errors = [getattr(m, "error", None) for m in result] if isinstance(result, list) else [getattr(result, "error", None)]
    return any(e and fatal(e) for e in errors)


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-1500:]


def _death(proc: Any) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"worker process killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"worker process killed by signal {-code}"
    return f"worker process exited with code {code}"


class Worker:
    """Parent-side handle. ``start()`` captures the workload; ``measure()`` runs one trial."""

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
        self._kernel_forcing: dict[str, Any] | None = None  # replayed into a restarted worker

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def start(self) -> CaptureResult:
        self.close()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"worker-{os.getpid()}-{int(time.time() * 1000)}.log"
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child, asdict(self.spec), str(self.log_path)), daemon=True)
        self._proc.start()
        child.close()
        self._conn, self._served = parent, 0
        self.restarts += 1
        reply = self._receive(self.start_timeout_s)
        if reply is None:
            why = _death(self._proc) if not self._proc.is_alive() else "timed out"
            self.close()
            raise WorkloadError(f"the measurement worker failed to start ({why}); log: {self.log_path}: {_tail(self.log_path)}")
        kind, payload = reply
        if kind == "error":
            self.close()
            raise WorkloadError(payload)
        return payload

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

    def capture_kernels(self, forcing: dict[str, Any]) -> list[dict[str, Any]]:
        """Compile under ``forcing`` in the worker and register its Triton kernels (kept across restarts)."""
        if not self.alive:
            self.start()
        self._kernel_forcing = forcing
        return self._call("capture_kernels", forcing)

    def capture_graphs(self, forcing: dict[str, Any]) -> list[dict[str, Any]]:
        """Compile under ``forcing`` in the worker and record its graphs (with the fusions Inductor made)."""
        self._ensure()
        return self._call("capture_graphs", forcing)

    def _call(self, method: str, forcing: dict[str, Any]) -> Any:
        self._conn.send(("call", method, forcing))
        reply = self._receive(self.start_timeout_s)
        if reply is None or reply[0] == "error":
            why = reply[1] if reply else (_death(self._proc) if not self._proc.is_alive() else "timed out")
            self.close()
            raise WorkloadError(f"{why}; log: {self.log_path}: {_tail(self.log_path) if self.log_path else ''}")
        return reply[1]

    def _ensure(self) -> None:
        if not self.alive or self._served >= self.recycle_after:
            self.start()
            if self._kernel_forcing is not None:
                self._call("capture_kernels", self._kernel_forcing)

    def measure(self, request: TrialRequest) -> Any:
        """A :class:`Measurement`; for a kernel request a list of them; for a sites request a SiteRound.
        A worker that dies answers as a single :class:`Measurement` (``worker_died`` or ``timeout``)."""
        self._ensure()
        try:
            self._conn.send(("measure", request))
        except (BrokenPipeError, OSError):
            self.close()
            return Measurement(Status.WORKER_DIED, error="worker process was gone before the trial")
        started = time.monotonic()
        reply = self._receive(self.trial_timeout_s)
        self._served += 1
        if reply is not None:
            if _broke_context(reply[1]):
                self.close()  # the child exits on its own; make sure the next request starts a fresh one
            return reply[1]
        self._proc.join(10)  # the pipe can close before the dead process is reaped
        if self._proc.is_alive() and time.monotonic() - started >= self.trial_timeout_s:
            self.close()
            return Measurement(Status.TIMEOUT, error=f"no result within {self.trial_timeout_s:.0f} s")
        if self._proc.is_alive():
            self.close()
            return Measurement(Status.WORKER_DIED, error="worker process closed its pipe without a result")
        why = _death(self._proc)
        tail = _tail(self.log_path) if self.log_path else ""
        self.close()
        return Measurement(Status.WORKER_DIED, error=f"{why}; log {self.log_path}: {tail}"[:2000])

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
