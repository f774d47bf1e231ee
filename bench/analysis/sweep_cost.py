"""What a sweep cost and what it reached: ``bench/results/<device>/<model>-sweep-cost.json`` and its PNG, from one
bench run (``bench/device/sweep_cost.sh bench``) and the sweeps it benchmarked (``... sweep``: each sweep's log,
whose last line is its wall time, and its database's ``tuner db stats --json``).

    python bench/analysis/sweep_cost.py --bench B.json --out bench/results/h200/resnet50-sweep-cost-2026-12-01-3.json \\
        --sweep 60:s60:sweep-resnet50-60-2026-12-01-2.log:resnet50-60-2026-12-01-4.stats.json:6853389 ...

Each ``--sweep`` is BUDGET_S:LABEL:LOG:STATS:COMMIT; LABEL is the bench mode ``tuned-LABEL`` that timed its database
(``-`` when no bench run timed it: a run kept for its wall time only). BUDGET_S ``default`` is a ``--budget default``
sweep with no ``--time-budget``: its time budget is the one it took from max-autotune's expected compile time (its log
says which), or none.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

WALL = re.compile(r"sweep wall: ([0-9.]+) s")
IMPLICIT = re.compile(
    r"takes a time budget\s+of\s+([0-9.]+)\s+s", re.S
)  # tuner.sweep.plan.sized's note (wrapped lines)


def sweep_row(spec: str, bench: dict[str, Any]) -> dict[str, Any]:
    budget, label, log, stats_path, commit = spec.split(":")
    text = Path(log).read_text()
    walls = WALL.findall(text)
    stats = json.loads(Path(stats_path).read_text())
    by_status = stats.get("trials_by_status", {})
    results = bench["results"]
    implicit = IMPLICIT.search(re.sub(r"\n\[ *[0-9.]+\] ", " ", text)) if budget == "default" else None
    s = float(implicit.group(1)) if implicit else None if budget == "default" else float(budget)
    row: dict[str, Any] = {
        "budget": "default",
        "time_budget_s": s,
        "time_budget_from": "max-autotune estimate" if implicit else ("--time-budget" if s else None),
        "wall_s": float(walls[-1]),
        "promised_s": 1.1 * s + 20 if s else None,
        "trials": by_status.get("ok", 0) + by_status.get("pruned", 0),
        "pruned": by_status.get("pruned", 0),
        "rejected_by_space": by_status.get("invalid", 0),
        "commit": commit,
        "log": log,
    }
    row["kept_promise"] = row["wall_s"] <= row["promised_s"] if s else None
    if label != "-":
        row.update(
            tuned_ms=results[f"tuned-{label}"]["median_ms"],
            freezing_max_autotune_ms=results["freezing-max-autotune"]["median_ms"],
            default_ms=results["default"]["median_ms"],
            benchmarks_at_compile=results[f"tuned-{label}"].get("benchmarks"),
        )
    return row


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [s for s in doc["sweeps"] if "tuned_ms" in s]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([s["wall_s"] for s in timed], [s["tuned_ms"] for s in timed], "o-", label="tuned (sweep's database)")
    fma, default = timed[0]["freezing_max_autotune_ms"], timed[0]["default_ms"]
    ax.axhline(
        fma, color="C1", ls="--", label=f"freezing + max-autotune ({doc['max_autotune_compile_s']:.0f} s compile)"
    )
    ax.axhline(default, color="C2", ls=":", label="Inductor default")
    ax.axvline(doc["max_autotune_compile_s"], color="C1", lw=0.5)
    ax.set_xlabel("sweep wall time, s (one GPU)")
    ax.set_ylabel("median latency, ms")
    ax.set_title(f"{doc['model']} on {doc['device']}: latency against sweep time")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", type=Path, required=True)
    ap.add_argument("--sweep", action="append", required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    bench = json.loads(args.bench.read_text())
    doc = {
        "model": bench["model"],
        "device": bench["device"],
        "device_kind": bench["device_kind"],
        "torch": bench["torch"],
        "triton": bench.get("triton"),
        "date": bench["date"],
        "gpus": 1,
        "workload": {k: bench[k] for k in ("dtype", "batch", "channels_last", "mode")},
        "max_autotune_compile_s": bench["results"]["freezing-max-autotune"]["compile_s"],
        "bench_command": bench["command"],
        "sweeps": sorted(
            (sweep_row(s, bench) for s in args.sweep), key=lambda r: (r["time_budget_s"] or 1e9, r["commit"])
        ),
        "note": args.note,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    if any("tuned_ms" in s for s in doc["sweeps"]):
        plot(doc, args.out.with_suffix(".png"))
    print(json.dumps(doc["sweeps"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
