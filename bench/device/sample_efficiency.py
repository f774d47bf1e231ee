"""Sample efficiency: how many Optuna trials reach within 2% of an exhaustive sweep of the same space?

Two steps, so the device time goes only to measuring:

  measure (on the GPU): every valid config of N Triton kernels' spaces, at the kernel, each against the
          default in the same run (as a sweep measures them) -> one JSON table.
      python bench/device/sample_efficiency.py measure --model resnet50 --dtype bf16 --batch 32 --channels-last \
          --kernels 10 --out bench/results/h200/sample-efficiency-resnet50-2026-11-30.json
  replay  (anywhere): drive real Optuna studies (TPE, random; several seeds; Inductor's default enqueued
          first, as in a sweep) against the measured table, and count the measured trials until the best
          ratio found is within 2% of the exhaustive best.
      python bench/device/sample_efficiency.py replay bench/results/h200/sample-efficiency-resnet50-2026-11-30.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from typing import Any


def measure(args: argparse.Namespace) -> None:
    import torch
    import torch._inductor.config as inductor_config

    from tuner.keys import config_hash
    from tuner.measure.session import Session
    from tuner.search_spaces import space_for
    from tuner.workloads.spec import WorkloadSpec

    spec = WorkloadSpec(model=args.model, device="cuda", dtype=args.dtype, batch=args.batch, channels_last=args.channels_last)
    inductor_config.freezing = True
    t0 = time.monotonic()
    session = Session(spec)
    session.capture()
    records = session.capture_kernels({})
    picked = []
    for r in sorted(records, key=lambda r: -(r["default_ms"] or 0)):
        space = space_for(r["kind"], r["signature"])
        n = len(space.configs())
        if 8 <= n <= args.max_configs:
            picked.append((r, space))
        if len(picked) == args.kernels:
            break
    out: dict[str, Any] = {
        "model": args.model, "dtype": args.dtype, "batch": args.batch, "device": torch.cuda.get_device_name(),
        "torch": torch.__version__, "triton": __import__("triton").__version__,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "command": " ".join(sys.argv), "kernels": [],
    }
    for r, space in picked:
        if time.monotonic() - t0 > args.time_limit:
            break
        configs = space.configs()
        rows = []
        for i in range(0, len(configs), 16):
            batch = configs[i : i + 16]
            for c, m in zip(batch, session.kernels.measure(r["key"], batch, rounds=3)):
                rows.append({"config": c, "hash": config_hash(c), "status": m.status.value, "ratio": m.ratio, "median_ms": m.median_ms})
        ok = [x["ratio"] for x in rows if x["ratio"] is not None]
        print(f"{r['name']}: {len(rows)} configs, best ratio {min(ok):.3f}" if ok else f"{r['name']}: nothing ran", flush=True)
        out["kernels"].append({"key": r["key"], "kind": r["kind"], "name": r["name"], "default_ms": r["default_ms"],
                               "signature": r["signature"], "rows": rows})
        with open(args.out, "w") as f:  # after every kernel: a killed run keeps what it measured
            json.dump(out, f, indent=1)


def trials_to_reach(kernel: dict[str, Any], sampler: str, seed: int, within: float, cap: int) -> int | None:
    import optuna

    from tuner.keys import config_hash
    from tuner.study.samplers import make_sampler
    from tuner.search_spaces import space_for

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = space_for(kernel["kind"], kernel["signature"])
    table = {r["hash"]: r["ratio"] for r in kernel["rows"]}
    best = min(v for v in table.values() if v is not None)
    study = optuna.create_study(sampler=make_sampler(sampler, space, seed), direction="minimize")
    study.enqueue_trial(space.optuna_params(space.default))
    seen: set[str] = set()
    found = float("inf")
    for _ in range(cap * 4):
        ot = study.ask()
        config = space.suggest(ot)
        h = config_hash(config)
        if h not in table:  # invalid in the space: rejected before anything is measured
            study.tell(ot, state=optuna.trial.TrialState.FAIL)
            continue
        seen.add(h)
        value = table[h]
        if value is None:
            study.tell(ot, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(ot, value)
            found = min(found, value)
        if found <= best * (1 + within):
            return len(seen)
        if len(seen) >= cap:
            break
    return None


def replay(args: argparse.Namespace) -> None:
    data = json.load(open(args.file))
    samplers = args.samplers.split(",")
    rows = []
    print(f"{'kernel':44} {'space':>5} {'best':>6}  " + "  ".join(f"{s + ' (median trials)':>22}" for s in samplers))
    for k in data["kernels"]:
        ok = [r["ratio"] for r in k["rows"] if r["ratio"] is not None]
        if not ok:
            continue
        res = {}
        for s in samplers:
            counts = [trials_to_reach(k, s, seed, args.within, len(k["rows"])) for seed in range(args.seeds)]
            reached = [c for c in counts if c is not None]
            res[s] = {"median": statistics.median(reached) if reached else None, "all": counts}
        rows.append({"kernel": k["name"], "kind": k["kind"], "space": len(k["rows"]), "best_ratio": min(ok), **res})
        print(f"{k['name'][:44]:44} {len(k['rows']):>5} {min(ok):>6.3f}  " + "  ".join(f"{str(res[s]['median']):>22}" for s in samplers))
    summary = {s: statistics.median([r[s]["median"] for r in rows if r[s]["median"] is not None]) for s in samplers}
    frac = statistics.median([r["tpe"]["median"] / r["space"] for r in rows if r.get("tpe", {}).get("median")]) if "tpe" in samplers else None
    print(f"median over kernels: {summary}; TPE needs {frac:.0%} of the space (median)" if frac else summary)
    if args.out:
        json.dump({"source": args.file, "within": args.within, "seeds": args.seeds, "kernels": rows, "summary": summary}, open(args.out, "w"), indent=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--model", default="resnet50")
    m.add_argument("--device", default="cuda", choices=["cuda"])
    m.add_argument("--dtype", default="bf16")
    m.add_argument("--batch", type=int, default=32)
    m.add_argument("--channels-last", action="store_true")
    m.add_argument("--kernels", type=int, default=10)
    m.add_argument("--max-configs", type=int, default=120)
    m.add_argument("--time-limit", type=float, default=240.0)
    m.add_argument("--out", required=True)
    r = sub.add_parser("replay")
    r.add_argument("file")
    r.add_argument("--samplers", default="tpe,random")
    r.add_argument("--seeds", type=int, default=10)
    r.add_argument("--within", type=float, default=0.02)
    r.add_argument("--out")
    args = p.parse_args()
    measure(args) if args.cmd == "measure" else replay(args)


if __name__ == "__main__":
    main()
