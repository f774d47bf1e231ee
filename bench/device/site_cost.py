"""What one site batch costs on the GPU, by where its choices come from: Inductor's own list or tuner's generated
configs (the ones a learned ranking mostly picks). One process, one workload: the capture, then site batches of
the default plus N choices at every site, N from Inductor's list and N generated, each timed; Python stacks are
dumped to ``$OUT/stacks.txt`` every 60 s so a slow batch shows where its time goes.

    python3 bench/device/site_cost.py --model resnet50 --dtype bf16 --batch 32 --channels-last --per-site 2
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import time
from pathlib import Path


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
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "."))
    stacks = open(out / "stacks.txt", "w")
    faulthandler.dump_traceback_later(60, repeat=True, file=stacks)

    from tuner.core import Kind
    from tuner.measure.jobs import SiteBatch
    from tuner.measure.session import Session
    from tuner.ranking import Rankers
    from tuner.ranking.prior import rows_for
    from tuner.tasks import tasks_from_capture
    from tuner.workload import WorkloadSpec

    shape = tuple(int(x) for x in args.input_shape.split(",")) if args.input_shape else None
    spec = WorkloadSpec(model=args.model, device=args.device, dtype=args.dtype, batch=args.batch, channels_last=args.channels_last, input_shape=shape)
    t0 = time.perf_counter()
    session = Session(spec)
    capture = session.capture()
    result = {"model": args.model, "capture_s": time.perf_counter() - t0, "capture_compile_s": capture.compile_s, "batches": []}
    sites = [t for t in tasks_from_capture(capture, args.model) if t.kind == Kind.SITE]
    from tuner.db import Database

    rankers = Rankers(Database.open(f"sqlite:///{out / 'empty.db'}"), 0, rows_for(args.device, capture.device["name"]))
    for order in args.orders.split(","):
        request = {}
        for t in sites:
            default = str(t.space.default["choice"])
            if order == "listed":
                picks = [c for c in t.signature["space"]["choices"] if c != default][: args.per_site]
            else:
                picks = [c["choice"] for c in rankers.first(Kind.SITE, t.signature, t.space, 4 * args.per_site) if c["choice"] not in t.signature["space"]["choices"]][: args.per_site]
            request[t.key] = (default, *picks)
        n = sum(len(v) for v in request.values())
        t1 = time.perf_counter()
        timings = session.time_sites(SiteBatch({}, request))
        wall = time.perf_counter() - t1
        timed = sum(1 for k, v in timings.timings.items() for c in v)
        row = {"order": order, "choices": n, "wall_s": wall, "per_choice_s": wall / n, "status": timings.status.value,
               "timed": timed, "compile_s": timings.compile_s, "error": (timings.error or "")[:500]}
        result["batches"].append(row)
        print(json.dumps(row), flush=True)
        (out / f"site-cost-{args.model}.json").write_text(json.dumps(result, indent=1))
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
