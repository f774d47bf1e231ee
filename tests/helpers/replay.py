"""A replay runner: deterministic measurements, so search and distribution logic can be tested exactly on the CPU."""

import dataclasses
import multiprocessing as mp

from tuner.budget.presets import make_budget
from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.keys import config_hash
from tuner.measure import Measurement, Status
from tuner.study.context import StudyContext
from tuner.search_spaces import space_for
from tuner.core import Kind, TaskSpec
from tuner.sweep.winners import StoredWinners

DEV = DeviceInfo("cpu", "Replay CPU", {"cores": 2, "threads": 2, "isa": "AVX512"})
ENV = EnvironmentInfo("2.14.1", "3.8.0", None, "3.11.7", "0.1.0")


def tasks(n_graphs: int = 6) -> list[TaskSpec]:
    out = []
    for i in range(n_graphs):
        sig = {"backward": False, "lines": i, "space": {"isa": "AVX512", "threads": 2, "has_cpp_gemm": i % 2 == 0}}
        out.append(TaskSpec(f"{i:064x}", Kind.CPP_GRAPH, f"replay graph {i}", sig, space_for(Kind.CPP_GRAPH, sig)))
    for i in range(2):
        sig = {
            "op": "mm",
            "inputs": [],
            "space": {"choices": ["aten:mm", "cpp:A", "cpp:B", "cpp:C"], "default": "aten:mm"},
        }
        out.append(TaskSpec(f"{i + 100:064x}", Kind.SITE, f"replay site {i}", sig, space_for(Kind.SITE, sig)))
    return out


def replay_measure(config, rounds):
    """The same answer for the same config, every time: a pseudo-random ratio in [0.5, 1.5) of a 1 ms baseline."""
    r = 0.5 + int(config_hash(config)[:8], 16) / 16**8
    return Measurement(Status.OK, r, r, 0.0, 1.0)


def _context(url: str, db: Database, trials: int) -> StudyContext:
    from tuner.study.context import open_storage

    return StudyContext(
        db=db,
        storage=open_storage(url),
        device_id=db.device_id(DEV),
        environment_id=db.environment_id(ENV),
        device_fingerprint=DEV.fingerprint,
        sampler="tpe",
        seed=0,
        budget=dataclasses.replace(make_budget("quick"), trials=trials),
    )


def work(url: str, trials: int, out: "mp.Queue") -> None:
    from tuner.sweep.scheduler import tune_tasks

    db = Database.open(url)
    specs = tasks()
    records = [db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint()) for t in specs]
    ctx = _context(url, db, trials)
    outcomes, measured = tune_tasks(ctx, specs, records, lambda task, base: replay_measure, StoredWinners({}))
    out.put(([o.task.key for o in outcomes], measured))
    db.close()


def work_joined(url: str, trials: int, out: "mp.Queue", start: "mp.Barrier") -> None:
    """One graph task for several workers: the first claims it, the others join its study (``join=True``). They
    pass ``start`` together, so none can finish the study before another has come up (spawned processes start
    seconds apart on a loaded machine)."""
    import os
    import time

    from tuner.sweep.scheduler import tune_tasks

    def slow(config, rounds):  # long enough that the workers' trials overlap
        time.sleep(0.05)
        return replay_measure(config, rounds)

    db = Database.open(url)
    specs = tasks(1)[:1]
    records = [db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint()) for t in specs]
    ctx = _context(url, db, trials)
    start.wait(120)
    outcomes, measured = tune_tasks(ctx, specs, records, lambda task, base: slow, StoredWinners({}), join=True)
    out.put((os.getpid(), [o.task.key for o in outcomes], measured))
    db.close()
