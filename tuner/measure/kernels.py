"""Kernel-level measurement of Triton kernel configs, inside the worker process.

A kernel is measured with the real arguments of its first call in the workload, through
Inductor's own launcher path. Candidates of a batch compile in parallel threads (Triton's
compile spends most of its time in ptxas, outside the GIL); the GPU then times them one at a
time, each interleaved with the default config (A B A B), as medians of ``triton.testing.do_bench``
(which flushes L2 between calls). Every candidate's outputs are checked against the default's
before it may be timed. Each candidate is first probed briefly: one clearly slower than the kernel's best so far
is stored as ``pruned`` with its probe time instead of being timed in full (early exit).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from tuner.backend import counters
from tuner.backend.hooks import kernels as kh
from tuner.backend.instrument import capture as kc
from tuner.backend.instrument.pruning import PRUNED_NOTE, clearly_slower
from tuner.core import Kind
from tuner.keys import config_hash, task_key
from tuner.measure.classify import breaks_context, classify, describe
from tuner.measure.numerics import relative_error
from tuner.measure.result import Measurement, Status
from tuner.settings import settings

log = logging.getLogger("tuner.measure")
PROBE_REP_MS = 2  # a probe's timing: do_bench's repetitions fill this long (a full timing: ``rep_ms`` per round, twice)
PROBE_FLOOR_MS = 0.002  # do_bench times on the device, so only its resolution bounds the margin
_OUTPUT_ARG = re.compile(r"^(in_)?out_ptr\d+$")


def _fresh(args: list[Any]) -> list[Any]:
    return [kc.clone_preserving_strides(a) for a in args]


def _outputs(k: Any, args: list[Any]) -> list[Any]:
    import torch

    names = kc.arg_names(k)
    outs = [a for n, a in zip(names, args) if _OUTPUT_ARG.match(n) and isinstance(a, torch.Tensor)]
    return outs or [a for a in args if isinstance(a, torch.Tensor)]


@dataclass
class KernelEntry:
    key: str
    kind: str
    name: str
    signature: dict[str, Any]
    captured: Any
    default: dict[str, int]
    reference: list[Any] = field(default_factory=list)
    launchers: dict[str, Any] = field(default_factory=dict)
    default_ms: float | None = None
    best_ms: float | None = None  # the fastest full timing of this kernel in this process (what a probe is held to)
    launches: int = 1  # per captured step, over every kernel object with this source

    def record(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "name": self.name,
            "signature": self.signature,
            "default_ms": self.default_ms,
            "launches": self.launches,
        }


class KernelBench:
    def __init__(self, device_index: int, tolerance: float, rounds: int = 3, rep_ms: int = 10):
        self.device_index = device_index
        self.tolerance = tolerance
        self.rounds = rounds
        self.rep_ms = rep_ms
        self.entries: dict[str, KernelEntry] = {}

    # --- building the registry from a compile's kernels --------------------------------------------
    def register(self, captured: list[Any]) -> list[dict[str, Any]]:
        """Turn the kernels a compile produced (and ran once) into task records; identical kernels are one task.
        A kernel that cannot be re-launched on its own is logged and recorded with ``status`` and ``error``."""
        self.entries.clear()
        unmeasurable: dict[str, dict[str, Any]] = {}
        for cap in captured:
            k = cap.kernel
            family = kh.heuristic(k)
            default = kc.chosen_config(k)
            if not cap.called or family not in kh.TUNABLE or default is None:
                continue
            payload = kh.payload(k)
            if payload["size_hints"] is None or any(p in payload["size_hints"] for p in ("z", "r1_")):
                continue  # 3-D tilings and 2-D reductions are left to Inductor for now
            kind = Kind.triton(family)
            key = task_key(kind, payload)
            if key in self.entries:
                self.entries[key].launches += cap.calls
                continue
            if key in unmeasurable:
                continue
            name = re.sub(r"_\d+$", "", str((getattr(k, "inductor_meta", {}) or {}).get("kernel_name", family)))
            sig = {
                **payload,
                "size_hints_str": str(k.size_hints),
                "space": {"size_hints": payload["size_hints"], "default": default},
            }
            entry = KernelEntry(key, kind, name, sig, cap, default, launches=max(1, cap.calls))
            try:
                entry.reference = self._run_once(entry, self._launcher(entry, default))
                entry.default_ms = entry.best_ms = self._time(entry, entry.launchers[config_hash(default)])
            except Exception as e:  # noqa: BLE001 - a kernel we cannot re-launch is not tuned, but stored with why
                why = describe(e)
                log.warning("kernel %s cannot be measured on its own: %s", name, why)
                unmeasurable[key] = {**entry.record(), "status": classify(e).value, "error": why}
                continue
            self.entries[key] = entry
        return [e.record() for e in self.entries.values()] + list(unmeasurable.values())

    # --- one kernel ---------------------------------------------------------------------------------
    def _launcher(self, entry: KernelEntry, config: dict[str, Any]) -> Any:
        h = config_hash(config)
        if h not in entry.launchers:
            entry.launchers[h] = kc.launcher(entry.captured.kernel, config)
        return entry.launchers[h]

    def _run_once(self, entry: KernelEntry, launch: Any) -> list[Any]:
        import torch

        args = _fresh(entry.captured.args)
        kc.call(launch, args, dict(entry.captured.kwargs), kc.raw_stream(self.device_index))
        torch.cuda.synchronize(self.device_index)
        return [t.clone() for t in _outputs(entry.captured.kernel, args)]

    def _time(self, entry: KernelEntry, launch: Any, args: list[Any] | None = None) -> float:
        import triton.testing

        args = args if args is not None else _fresh(entry.captured.args)
        kwargs, stream = dict(entry.captured.kwargs), kc.raw_stream(self.device_index)
        return float(
            triton.testing.do_bench(
                lambda: kc.call(launch, args, kwargs, stream), warmup=2, rep=self.rep_ms, return_mode="median"
            )
        )

    def _interleaved(self, entry: KernelEntry, cand: Any, base: Any) -> tuple[float, float, float, float, float]:
        """Median, min and spread (range over rounds) of the candidate, then the default's median and spread."""
        args_c, args_b = _fresh(entry.captured.args), _fresh(entry.captured.args)
        c, b = [], []
        for r in range(self.rounds):
            if r % 2 == 0:
                c.append(self._time(entry, cand, args_c))
                b.append(self._time(entry, base, args_b))
            else:
                b.append(self._time(entry, base, args_b))
                c.append(self._time(entry, cand, args_c))
        return statistics.median(c), min(c), max(c) - min(c), statistics.median(b), max(b) - min(b)

    def measure(self, key: str, configs: list[dict[str, Any]], rounds: int | None = None) -> list[Measurement]:
        entry = self.entries.get(key)
        if entry is None:
            return [
                Measurement(Status.RUNTIME_ERROR, error="this kernel is not in the workload's compiled graphs any more")
            ] * len(configs)
        if rounds:
            self.rounds = max(2, min(int(rounds), 7))
        errors: dict[int, Measurement] = {}
        todo = [(i, c) for i, c in enumerate(configs) if config_hash(c) not in entry.launchers]
        if todo:  # compile in parallel; the GPU is used one config at a time below
            with cf.ThreadPoolExecutor(max_workers=min(settings().compile_threads, len(todo))) as pool:
                futures = {pool.submit(kc.launcher, entry.captured.kernel, c): (i, c) for i, c in todo}
                for f in cf.as_completed(futures):
                    i, c = futures[f]
                    try:
                        entry.launchers[config_hash(c)] = f.result()
                    except Exception as e:  # noqa: BLE001 - OutOfResources, PTXAS errors, …
                        errors[i] = Measurement(classify(e, compiling=True), error=describe(e))
        base = entry.launchers[config_hash(entry.default)]
        out: list[Measurement] = []
        for i, c in enumerate(configs):
            if i in errors:
                out.append(errors[i])
                continue
            out.append(self._measure_one(entry, entry.launchers[config_hash(c)], base))
            if out[-1].error and breaks_context([out[-1].error]):
                out.extend(
                    Measurement(Status.WORKER_DIED, error="not measured: an earlier config broke the CUDA context")
                    for _ in configs[i + 1 :]
                )
                break
        return out

    def _measure_one(self, entry: KernelEntry, launch: Any, base: Any) -> Measurement:
        try:
            out = self._run_once(entry, launch)
            err = relative_error(out, entry.reference, where_finite=True)
            if not err <= self.tolerance:
                return Measurement(
                    Status.INACCURATE, error=f"outputs differ from the default config's (relative error {err:.3g})"
                )
            probe = self._probe(entry, launch)
            if probe is not None:
                return probe
            med, lo, spread, base_ms, base_spread = self._interleaved(entry, launch, base)
        except Exception as e:  # noqa: BLE001
            return Measurement(classify(e, compiling=False), error=describe(e))
        entry.best_ms = min(entry.best_ms or med, med)
        return Measurement(Status.OK, med, lo, spread, base_ms, baseline_spread_ms=base_spread)

    def _probe(self, entry: KernelEntry, launch: Any) -> Measurement | None:
        """Early exit: a short timing of the candidate; a ``pruned`` measurement when it is clearly slower than the
        kernel's best timed so far (``tuner.backend.instrument.pruning``), else None (it gets the full interleaved
        timing)."""
        import triton.testing

        args, kwargs, stream = (
            _fresh(entry.captured.args),
            dict(entry.captured.kwargs),
            kc.raw_stream(self.device_index),
        )
        runs = sorted(
            float(t)
            for t in triton.testing.do_bench(
                lambda: kc.call(launch, args, kwargs, stream), warmup=1, rep=PROBE_REP_MS, return_mode="all"
            )
        )
        med = statistics.median(runs)
        iqr = runs[(3 * len(runs)) // 4] - runs[len(runs) // 4]
        if not clearly_slower(med, entry.best_ms, PROBE_FLOOR_MS, iqr):
            return None
        counters.bump("pruned")
        return Measurement(Status.PRUNED, med, runs[0], iqr, entry.default_ms, error=PRUNED_NOTE)
