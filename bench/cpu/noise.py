"""How much another worker disturbs a CPU measurement: the same whole-workload trial (resnet18,
1x3x64x64: every template site forced to Inductor's own default, against Inductor's defaults, so both sides run
the same code and any gain is noise) timed 10 times by one process while a second process compiles models without
pause, both as ``--workers 2`` ran them before (each on every core, torch's default threads) and as they run now
(each pinned to its own core, one thread), then also with quiet timing windows (``tuner.measure.quiet``). Reports each
setting's ratios and medians, their IQRs and the trials' own spreads. ``python bench/cpu/noise.py --out
bench/results/cpu-xeon-2c/worker-noise-2026-12-01.json``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time
from pathlib import Path

REPEATS = 10


def _compile_forever(cores: list[int] | None, threads: int | None, stop: "mp.Event", polite: bool = False) -> None:
    """The other worker: compile a fresh model again and again (its own Inductor compile workers included);
    ``polite``: each compile inside tuner's shared compile lock, as a sweep's worker compiles now."""
    import contextlib
    import os

    if cores is not None:
        os.sched_setaffinity(0, cores)
    import torch
    import torchvision

    if threads:
        torch.set_num_threads(threads)
    import torch._inductor.config as cfg

    cfg.fx_graph_cache = False
    x = torch.randn(1, 3, 64, 64)
    from tuner.measure import quiet

    while not stop.is_set():
        torch._dynamo.reset()
        with torch.no_grad(), quiet.compiling() if polite else contextlib.nullcontext():
            torch.compile(torchvision.models.resnet18().eval())(x)


def _measure(cores: list[int] | None, threads: int | None, out: "mp.Queue", quiet_windows: bool = False) -> None:
    import os

    if cores is not None:
        os.sched_setaffinity(0, cores)
    from tuner.measure.jobs import GraphTrial
    from tuner.measure.session import Session
    from tuner.workloads.spec import WorkloadSpec

    session = Session(WorkloadSpec(model="resnet18", device="cpu", input_shape=(1, 3, 64, 64), threads=threads))
    session._quiet = quiet_windows  # a sweep's CPU session times inside quiet windows; the first two settings did not
    capture = session.capture()
    same_code = {
        "template_choice": {site["key"]: site["default"] for site in capture.sites}
    }  # Inductor's own choices, forced
    rows = []
    for _ in range(REPEATS):
        m = session.time_graph(GraphTrial({}, same_code, 15, 25.0))  # the default budget's rounds and sample length
        rows.append(
            {
                "median_ms": m.median_ms,
                "spread_ms": m.spread_ms,
                "baseline_ms": m.baseline_ms,
                "baseline_spread_ms": m.baseline_spread_ms,
                "ratio": m.ratio,
                "noise_says_win": m.beats_default(0.02),
            }
        )
    out.put({"cores": sorted(os.sched_getaffinity(0)), "rows": rows})


def run(
    label: str, mine: list[int] | None, theirs: list[int] | None, threads: int | None, windows: bool = False
) -> dict:
    ctx = mp.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    other = ctx.Process(target=_compile_forever, args=(theirs, threads, stop, windows))
    other.start()
    time.sleep(5)  # the other worker is compiling when the measurements start
    meas = ctx.Process(target=_measure, args=(mine, threads, out, windows))
    meas.start()
    got = out.get(timeout=1200)
    meas.join()
    stop.set()
    other.join(120)
    if other.is_alive():
        other.terminate()
    rows = got["rows"]
    medians, ratios = [r["median_ms"] for r in rows], [r["ratio"] for r in rows]
    iqr = lambda v: (lambda q: q[2] - q[0])(statistics.quantiles(v, n=4))  # noqa: E731
    return {
        "setting": label,
        "measuring_cores": got["cores"],
        "threads": threads,
        "trials": rows,
        "median_of_medians_ms": statistics.median(medians),
        "iqr_of_medians_ms": iqr(medians),
        "iqr_of_ratios": iqr(ratios),
        "worst_ratio": min(ratios),
        "median_trial_spread_ms": statistics.median(r["spread_ms"] for r in rows),
        "false_wins_by_min_gain_alone": sum(r["ratio"] < 0.98 for r in rows),
        "false_wins_noise_aware": sum(r["noise_says_win"] for r in rows),
    }


def main() -> None:
    import os
    import tempfile

    os.environ.setdefault("TUNER_CACHE_DIR", tempfile.mkdtemp(prefix="tuner-noise-"))  # the lock both processes share

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    results = [
        run("before: both processes on every core, torch's default threads", None, None, None),
        run("pinned: each process on its own core, one thread", cores[:1], cores[1:2], 1),
        run("pinned + quiet windows: also, no compile while a trial is timed", cores[:1], cores[1:2], 1, windows=True),
    ]
    import datetime
    import platform

    import torch

    doc = {
        "device": f"{len(cores)}-core CPU",
        "device_kind": "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python bench/cpu/noise.py --out " + str(args.out),
        "repeats": REPEATS,
        "results": results,
    }
    print(json.dumps(doc, indent=1))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
