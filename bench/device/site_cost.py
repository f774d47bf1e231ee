"""What one site batch costs on the GPU, by where its choices come from: Inductor's own list or tuner's generated
configs (the ones a learned ranking mostly picks), and by when they are timed: at the site as Inductor lowers it
(``TUNER_SITE_DEFER=0``) or when it schedules, their compiles overlapping the lowering (``=1``). One process, one
workload: the capture, then site batches of the default plus N choices at every site, each timed; each batch of a
later mode takes the next N choices, so none finds its kernels in Triton's cache. Per batch: the Triton compiles
(``make_cubin``) done in this process's main thread and elsewhere, and the time Inductor waited on precompiles.
Python stacks are dumped to ``$OUT/stacks.txt`` every 60 s so a slow batch shows where its time goes.

    python3 bench/device/site_cost.py --model resnet50 --dtype bf16 --batch 32 --channels-last --per-site 2 \
        --orders generated --defer 0,1
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path

SPENT: Counter[str] = Counter()  # seconds and counts, reset per batch


def _instrument() -> None:
    """Count Triton's cubin builds by thread and Inductor's precompile waits (bench only: plain wrappers)."""
    from torch._inductor import select_algorithm as sa

    try:
        from triton.backends.nvidia.compiler import CUDABackend
    except ImportError:
        CUDABackend = None
    if CUDABackend is not None and hasattr(CUDABackend, "make_cubin"):
        make_cubin = CUDABackend.make_cubin

        def timed_cubin(self, *a, **k):
            where = "main" if threading.current_thread() is threading.main_thread() else "other"
            t = time.perf_counter()
            try:
                return make_cubin(self, *a, **k)
            finally:
                SPENT[f"cubin_{where}_s"] += time.perf_counter() - t
                SPENT[f"cubin_{where}_n"] += 1

        CUDABackend.make_cubin = timed_cubin
    make_precompile_fn = sa.AlgorithmSelectorCache.make_precompile_fn

    def timed_make(self, *a, **k):
        fn = make_precompile_fn(self, *a, **k)

        def wait():
            t = time.perf_counter()
            try:
                return fn()
            finally:
                SPENT["precompile_wait_s"] += time.perf_counter() - t
                SPENT["precompile_waits"] += 1

        return wait

    sa.AlgorithmSelectorCache.make_precompile_fn = timed_make


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--per-site", type=int, default=2)
    ap.add_argument("--orders", default="listed,generated")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--input-shape", default=None)
    ap.add_argument("--defer", default="1", help="TUNER_SITE_DEFER values to run, e.g. 0,1")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "."))
    stacks = open(out / "stacks.txt", "w")
    faulthandler.dump_traceback_later(60, repeat=True, file=stacks)

    _instrument()
    from tuner.core import Kind
    from tuner.measure.jobs import SiteBatch
    from tuner.measure.session import Session
    from tuner.ranking import Rankers
    from tuner.ranking.prior import rows_for
    from tuner.sweep.tasks import tasks_from_capture
    from tuner.settings import settings
    from tuner.workloads.spec import WorkloadSpec

    shape = tuple(int(x) for x in args.input_shape.split(",")) if args.input_shape else None
    spec = WorkloadSpec(
        model=args.model,
        device=args.device,
        dtype=args.dtype,
        batch=args.batch,
        channels_last=args.channels_last,
        input_shape=shape,
    )
    t0 = time.perf_counter()
    session = Session(spec)
    capture = session.capture()
    import torch

    ptxas = Path(torch.__file__).parent / "bin" / "ptxas"
    result = {
        "model": args.model,
        "capture_s": time.perf_counter() - t0,
        "capture_compile_s": capture.compile_s,
        "torch_ptxas": ptxas.exists(),
        "TRITON_PTXAS_PATH": os.environ.get("TRITON_PTXAS_PATH"),
        "batches": [],
    }
    sites = [t for t in tasks_from_capture(capture, args.model) if t.kind == Kind.SITE]
    from tuner.db import Database

    rankers = Rankers(Database.open(f"sqlite:///{out / 'empty.db'}"), 0, rows_for(args.device, capture.device["name"]))
    runs = [(order, defer) for defer in args.defer.split(",") for order in args.orders.split(",")]
    for i, (order, defer) in enumerate(runs):
        os.environ["TUNER_SITE_DEFER"] = defer
        settings.cache_clear()
        SPENT.clear()
        first = (i // len(args.orders.split(","))) * args.per_site  # each mode takes the next choices: cold kernels
        request = {}
        for t in sites:
            default = str(t.space.default["choice"])
            if order == "listed":
                picks = [c for c in t.signature["space"]["choices"] if c != default][first : first + args.per_site]
            else:
                ranked = rankers.first(Kind.SITE, t.signature, t.space, 8 * args.per_site)
                picks = [c["choice"] for c in ranked if c["choice"] not in t.signature["space"]["choices"]][
                    first : first + args.per_site
                ]
            request[t.key] = (default, *picks)
        n = sum(len(v) for v in request.values())
        t1 = time.perf_counter()
        timings = session.time_sites(SiteBatch({}, request))
        wall = time.perf_counter() - t1
        timed = sum(1 for k, v in timings.timings.items() for c in v)
        row = {
            "order": order,
            "defer": defer,
            "choices": n,
            **{k: round(v, 3) for k, v in SPENT.items()},
            "wall_s": wall,
            "per_choice_s": wall / n,
            "status": timings.status.value,
            "timed": timed,
            "compile_s": timings.compile_s,
            "error": (timings.error or "")[:500],
        }
        result["batches"].append(row)
        print(json.dumps(row), flush=True)
        (out / f"site-cost-{args.model}.json").write_text(json.dumps(result, indent=1))
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
