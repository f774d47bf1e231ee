"""``tuner db revalidate``: re-measure a workload's stored winners against Inductor's default on this machine's torch
and device (after a torch upgrade, say), keep those that still win and put the others back to the default.

The workload is captured as a sweep captures it, so tasks are keyed by this torch: a winner whose task key changed
is not found (``tuner explain`` shows those). Each winner is checked against the space its stored signature describes,
as a compile checks it. Template sites are re-timed together in one compile (each against its
default, as a sweep verifies its finalists); graph knobs and fusion groupings each by timing the whole workload with
the kept site winners forced, with and without it. Every measurement is stored as a trial. A winner is kept when it
is still faster by the budget's minimum gain; one that no longer wins, fails or no longer fits its space is reverted.
Triton kernels (CUDA) are not revalidated yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tuner.budget.presets import Budget, make_budget
from tuner.core import Forcing, Kind, TaskSpec
from tuner.db import Database, DeviceInfo, EnvironmentInfo, TaskRecord
from tuner.measure import GraphTrial, SiteBatch, Worker
from tuner.measure.result import Measurement
from tuner.study.context import record
from tuner.settings import settings
from tuner.sweep.site_batches import measure_split, saves_a_kernel
from tuner.sweep.tasks import fusion_tasks, tasks_from_capture
from tuner.core import WorkloadName
from tuner.workloads.spec import WorkloadSpec

KEPT, REVERTED = "kept", "reverted"


@dataclass(frozen=True)
class Drift:
    """One stored winner, as stored and as measured now."""

    task: str
    kind: str
    stored_speedup: float | None  # default / winner when it was stored
    speedup: float | None  # default / winner now (None: it could not be measured)
    verdict: str  # KEPT or REVERTED
    why: str = ""


@dataclass
class _Run:
    db: Database
    worker: Worker
    device_id: int
    environment_id: int
    budget: Budget

    def settle(
        self, task: TaskSpec, rec: TaskRecord, config: dict[str, Any], stored: float | None, m: Measurement | None
    ) -> Drift:
        """Keep the winner when ``m`` shows it still wins; else put the task back to its default."""
        if m is not None:
            record(self, rec, config, m)
        speedup = 1 / m.ratio if m is not None and m.ratio else None
        # a site's template kept for the epilogue kernel it saves, which timing it alone cannot see, stays while no
        # slower alone (``site_batches.with_epilogue``)
        saves = (
            task.kind == Kind.SITE and m is not None and m.ok and saves_a_kernel(task.space, config["choice"], m.ratio)
        )
        if m is not None and (m.beats_default(self.budget.min_gain) or saves):
            self.db.set_winner(rec.id, self.device_id, None, config, m.median_ms, m.baseline_ms)
            return Drift(task.name, str(task.kind), stored, speedup, KEPT)
        why = (
            _why_not(m, self.budget.min_gain)
            if speedup
            else (m.error or m.status.value)
            if m is not None
            else "not valid in its space here"
        )
        self.db.keep_default(rec.id, self.device_id, task.space.default)
        return Drift(task.name, str(task.kind), stored, speedup, REVERTED, why)


def _why_not(m: Measurement, min_gain: float) -> str:
    """Why a timed winner did not beat its default: by too little, or by no more than the noise both sides showed."""
    if m.ratio is not None and m.ratio < 1 - min_gain:
        return (
            f"faster only within the noise (spreads {m.spread_ms or 0.0:.3g} and {m.baseline_spread_ms or 0.0:.3g} ms)"
        )
    return "no longer faster" if m.ratio is None or m.ratio >= 1 else f"faster by less than {min_gain:.0%}"


def _stored(
    db: Database, device_id: int, fingerprint: str, tasks: list[TaskSpec]
) -> list[tuple[TaskSpec, TaskRecord, dict[str, Any], float | None]]:
    """The tasks of this workload with a stored winner other than their default: (task, record, config, speedup)."""
    from tuner.search_spaces import InvalidConfig, space_for

    winners = db.winners_for_device(fingerprint)
    out = []
    for t in tasks:
        if t.key not in winners:
            continue
        kind, config, signature = winners[t.key]
        try:  # the space the winner was chosen in (a fusion grouping's pairs are those recorded under the winners)
            t = TaskSpec(t.key, t.kind, t.name, signature, space_for(kind, signature))
        except InvalidConfig:
            pass  # a stored signature this tuner cannot read: the captured task's space decides
        if config == t.space.default:
            continue
        rec = db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint())
        out.append((t, rec, config, db.winner_speedup(rec.id, device_id)))
    return out


def revalidate(spec: WorkloadSpec, db_url: str, note: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Re-measure ``spec``'s stored winners here; {"workload", "device", "torch", "drift": [...]}."""
    budget = make_budget("default")
    db = Database.open(db_url, create=False)
    worker = Worker(spec, settings().cache_dir / "logs", trial_timeout_s=budget.trial_timeout_s)
    try:
        note(f"capturing {spec.name} (compiling with Inductor's defaults)")
        capture = worker.start()
        device = DeviceInfo(**capture.device)
        run = _Run(db, worker, db.device_id(device), db.environment_id(EnvironmentInfo(**capture.environment)), budget)
        tasks = tasks_from_capture(capture, spec.model) + fusion_tasks(capture.graphs, spec.model)
        stored = _stored(db, run.device_id, device.fingerprint, tasks)
        note(f"{len(stored)} stored winner(s) of {len(tasks)} task(s) to re-measure")
        sites = [s for s in stored if s[0].kind == Kind.SITE]
        drift = _sites(run, sites)
        kept = Forcing.union(t.forcing(c) for (t, _, c, _), d in zip(sites, drift) if d.verdict == KEPT)
        drift += _graphs(run, [s for s in stored if s[0].kind != Kind.SITE], kept)
    finally:
        worker.close()
        db.close()
    return {
        "workload": spec.name,
        "device": device.name,
        "torch": capture.environment.get("torch"),
        "tasks": len(tasks),
        "drift": [asdict(d) for d in drift],
    }


def stored_specs(db_url: str, device_type: str, threads: int | None) -> tuple[list[WorkloadSpec], list[str]]:
    """Every workload the database holds for ``device_type`` whose model tuner builds itself, as a spec to capture
    again; and the stored models it will not load: a ``pkg.module:factory`` name in a database (an imported file's,
    say) is code named by data, and only the user may name it (``--model``)."""
    from tuner.workloads.model_zoo import is_builtin

    db = Database.open(db_url, create=False)
    try:
        names = [w for w in map(WorkloadName.parse, db.workload_names()) if w is not None and w.device == device_type]
    finally:
        db.close()
    specs = [_spec(w, threads) for w in names if is_builtin(w.model)]
    return specs, sorted({w.model for w in names if not is_builtin(w.model)})


def _spec(w: WorkloadName, threads: int | None) -> WorkloadSpec:
    """The workload a stored name describes, to capture again: a decode step by its batch and KV-cache length (its
    input shape is one token per sequence), any other by its full input shape."""
    common = {
        "model": w.model,
        "device": w.device,
        "mode": w.mode,
        "batch": w.shape[0],
        "dtype": w.dtype,
        "threads": threads,
        "channels_last": w.channels_last,
        "freezing": w.frozen or w.mode == "train",
    }
    if w.mode == "decode" and w.kv is not None:
        return WorkloadSpec(**common, seq_len=w.kv)
    return WorkloadSpec(**common, input_shape=w.shape)


def _sites(run: _Run, stored: list[Any]) -> list[Drift]:
    """Every site's winner against its default, in one compile (split where a choice fails)."""
    if not stored:
        return []
    request = {t.key: (t.space.default["choice"], c["choice"]) for t, _, c, _ in stored if t.space.is_valid(c)}
    timings = measure_split(lambda req: run.worker.run(SiteBatch({}, req)), request)
    return [
        run.settle(t, rec, c, s, timings.get(t.key, {}).get(c["choice"]) if t.key in request else None)
        for t, rec, c, s in stored
    ]


def _graphs(run: _Run, stored: list[Any], base: Forcing) -> list[Drift]:
    """Each graph-level winner: the whole workload with it on top of the kept site winners, against them alone."""
    out = []
    for t, rec, c, s in stored:
        if not t.space.is_valid(c):
            out.append(run.settle(t, rec, c, s, None))
            continue
        trial = GraphTrial(
            base.to_json(), base.merged(t.forcing(c)).to_json(), run.budget.verify_rounds, run.budget.min_sample_ms
        )
        out.append(run.settle(t, rec, c, s, run.worker.run(trial)))
    return out


__all__ = ["Drift", "revalidate", "stored_specs"]
