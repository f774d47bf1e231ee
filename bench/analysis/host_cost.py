"""What one site batch costs in the sweep's own process, no device needed: opening each site's study (the ranked
candidates included), asking it for a batch, storing and telling the results. The sites are an export's (their real
spaces and signatures), the ranker is fit on the shipped prior as in a sweep, and the timings are made up.

Three ways: the first configs enqueued in Optuna's RDB storage and asked for (``enqueue``: the earlier way),
measured without asking and added once finished (``direct``: ``tuner.study.direct``), and Optuna's in-memory storage
(the floor the RDB storage is compared with; sweeps keep their studies in the database).

    python bench/analysis/host_cost.py bench/results/h200/resnet50-bf16-b32-2026-11-30.jsonl.gz --repeat 3 \\
        --out bench/results/cpu-epyc-2c/resnet50-site-host-cost-2026-12-02.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tuner.budget.presets import make_budget
from tuner.core import Kind, TaskSpec
from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.db.models import Task
from tuner.db.transfer import apply_import, read_import
from tuner.measure import Measurement, Status
from tuner.ranking import Rankers
from tuner.ranking.prior import rows_for
from tuner.study.context import open_storage, StudyContext
from tuner.study.study import enqueue_new, first_to_measure, measured_before, open_study, Study
from tuner.search_spaces import space_for
from tuner.sweep.site_batches import site_target

DEVICE = DeviceInfo("cuda", "NVIDIA H200", {"capability": "9.0", "sm_count": 132})  # the prior's device model
ENV = EnvironmentInfo("2.11.0", "3.6.0", "13.0", "3.12.3", "0.1.0")
WAYS = ("enqueue", "direct", "memory")


def sites_of(export: Path, tmp: Path) -> list[tuple[str, str, dict[str, Any]]]:
    db = Database.open(f"sqlite:///{tmp / 'export.db'}")
    try:
        apply_import(db, read_import(export))
        with db.session() as s:
            return [(t.key, t.name, t.signature) for t in s.scalars(select(Task)) if t.kind == Kind.SITE]
    finally:
        db.close()


def one_batch(sites: list[tuple[str, str, dict[str, Any]]], way: str, tmp: Path, choices: int) -> dict[str, float]:
    import optuna

    url = f"sqlite:///{tmp / f'{way}-{time.monotonic_ns()}.db'}"
    db = Database.open(url)
    device_id, prior = db.device_id(DEVICE), rows_for(DEVICE.kind, DEVICE.name)
    storage = optuna.storages.InMemoryStorage() if way == "memory" else open_storage(url)
    tuning = StudyContext(
        db=db,
        storage=storage,
        device_id=device_id,
        environment_id=db.environment_id(ENV),
        device_fingerprint=DEVICE.fingerprint,
        sampler="tpe",
        seed=0,
        budget=make_budget("default"),
        prior=prior,
        rankers=Rankers(db, device_id, prior),
    )
    specs = [TaskSpec(k, Kind.SITE, n, sig, space_for(Kind.SITE, sig)) for k, n, sig in sites]
    recs = [db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint()) for t in specs]
    tuning.rankers.for_kind(Kind.SITE)  # fit once, as a sweep does before its first site
    t0 = time.perf_counter()
    askers = []
    for task, rec in zip(specs, recs):
        seen, invalid = measured_before(tuning, rec)
        study, first = open_study(tuning, rec, task.space), first_to_measure(tuning, rec, task.space, seen)
        if way == "enqueue":  # as sweeps seeded their studies before tuner.study.direct
            enqueue_new(study, [task.space.optuna_params(c) for c in first])
            first = []
        askers.append(
            Study(
                tuning,
                rec,
                task.space,
                study,
                seen,
                site_target(tuning, task),
                lambda t: None,
                invalid=invalid,
                queue=first,
            )
        )
    t1 = time.perf_counter()
    pending = [a.ask_batch(choices) for a in askers]
    t2 = time.perf_counter()
    for asker, p in zip(askers, pending):
        asker.tell_batch(p, [Measurement(Status.OK, 0.05, 0.05, 0.0, 0.06) for _ in p])
    t3 = time.perf_counter()
    db.close()
    return {
        "trials": sum(len(p) for p in pending),
        "open_s": t1 - t0,
        "ask_s": t2 - t1,
        "tell_s": t3 - t2,
        "total_s": t3 - t0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export", type=Path)
    ap.add_argument("--choices", type=int, default=10, help="candidates asked per site (a --budget default batch)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    with tempfile.TemporaryDirectory() as d:
        sites = sites_of(args.export, Path(d))
        for _ in range(args.repeat):
            for way in WAYS:  # interleaved, so drift on a shared machine spreads over all three
                rows[way].append(one_batch(sites, way, Path(d), args.choices))
    out = {way: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for way, rs in rows.items()}
    for way, r in out.items():
        print(
            f"{way:8s} {len(sites)} sites, {r['trials']:.0f} trials: open {r['open_s']:.1f} s, ask {r['ask_s']:.1f} s, "
            f"tell and store {r['tell_s']:.1f} s, total {r['total_s']:.1f} s (median of {args.repeat})"
        )
    if args.out:
        doc = {
            "export": str(args.export),
            "sites": len(sites),
            "choices": args.choices,
            "repeat": args.repeat,
            "machine": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python", *sys.argv]),
            "median": out,
            "runs": rows,
        }
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
