"""``tuner explain``: compile a workload under ``backend="tuned"`` as a user would and report, task by task, what
the database answered: a hit, an answer transferred from the nearest stored sizes, or a miss and why.

The compile runs in this process with fresh Inductor caches (a cache-served graph would look nothing up), once,
through the same backend and options a user's ``torch.compile`` gets; nothing is benchmarked or stored.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import asdict
from typing import Any

from tuner.workloads.spec import WorkloadSpec


def explain_workload(spec: WorkloadSpec, db_url: str, transfer: bool = True) -> dict[str, Any]:
    """{"workload", "db", "transfer", "decisions": [...], "counts": {hit, transferred, miss}, "store": {reads, graphs},
    "note"}: ``store`` says how many times the compile read the databases' winners for how many Dynamo graphs."""
    import torch

    from tuner.backend import answers, counters, journal
    from tuner.backend.compiler import isolated_compile
    from tuner.backend.process import configure_measuring
    from tuner.workloads.steps import eager_reference, run_step
    from tuner.workloads.spec import build_model, check_device, make_inputs

    check_device(spec)
    _check_database(db_url)
    configure_measuring(spec.threads, spec.uses_freezing, sweep=False)
    model, example = build_model(spec), make_inputs(spec, sets=1)[0]
    eager_reference(spec, model, example)  # a model that rejects its input says so in one line, before any compile
    torch._dynamo.reset()  # as in a new process: no earlier compile of this code makes Dynamo mark sizes dynamic
    reads, compiles = counters.count("store_reads"), counters.count("tuned_compiles")
    with journal.recording() as decisions, isolated_compile(spec.uses_freezing):
        fn = torch.compile(copy.deepcopy(model), backend="tuned", options={"db": db_url, "transfer": transfer})
        run_step(spec.mode, fn, example, grads=True, amp=spec.amp)
    store = {"reads": counters.count("store_reads") - reads, "graphs": counters.count("tuned_compiles") - compiles}
    rows = [asdict(d) for d in decisions]
    counts = Counter(r["outcome"] for r in rows)
    db = answers.store(db_url)  # the one the compile read, kept open by the backend
    _name_sources(db, rows)
    missed = [r["key"] for r in rows if r["outcome"] == journal.MISS]
    note = None if counts[journal.HIT] or counts[journal.TRANSFERRED] else _why(db, spec, example, missed)
    return {
        "workload": spec.name,
        "db": db_url,
        "transfer": transfer,
        "decisions": rows,
        "counts": {k: counts[k] for k in (journal.HIT, journal.TRANSFERRED, journal.MISS)},
        "store": store,
        "note": note,
    }


def _check_database(url: str) -> None:
    """A missing or unusable database is one clear error here (the backend would only warn and compile on)."""
    from tuner.db import Database
    from tuner.db.engine import sqlite_path
    from tuner.errors import TunerError

    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise TunerError(f"no tuning database at {path}: run `tuner sweep` first, or name one with --db")
    Database.open(url, create=False, read_only=True).close()


def _name_sources(db: Any, rows: list[dict[str, Any]]) -> None:
    """Each transferred answer's stored task, by its readable name."""
    keys = sorted({r["source"] for r in rows if r["source"]})
    names = db.task_names(keys) if keys else {}
    for r in rows:
        if r["source"]:
            r["source_name"] = names.get(r["source"], r["source"][:12])


def _why(db: Any, spec: WorkloadSpec, example: Any, missed: list[str]) -> str | None:
    """The reason nothing matched (tasks stored untuned, freezing, shapes, dtype), as the backend warns it."""
    import torch

    from tuner.backend.explain import why_no_hit

    tensors = list(example) if isinstance(example, (list, tuple)) else [example]
    return why_no_hit(
        [db],
        spec.device,
        [t for t in tensors if isinstance(t, torch.Tensor)],
        spec.uses_freezing,
        spec.mode == "train",
        missed,
    )


__all__ = ["explain_workload"]
