"""The batch table: a database swept at one batch size, timed at others (``bench/device/batch_transfer.sh``).

    python bench/analysis/batch_transfer.py --source-batch 32 --source-sweep h200/resnet50-sweep-cost-2026-12-02-4.json \\
        --bench 8:bench-resnet50-b8-2026-12-02.json:sweep-resnet50-b8-2026-12-02.log --bench 128:... --out h200/resnet50-batch-transfer-2026-12-02.json

Each ``--bench`` is BATCH:BENCH_JSON:SWEEP_LOG (the log of that batch's own sweep, timed as mode ``tuned-bBATCH``).
The source batch's row comes from the sweep-cost file of the sweep that made the database (its bench run timed
tuned, freezing + max-autotune and Inductor's default there; tuned-strict equals tuned at the batch it was swept at).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

WALL = re.compile(r"sweep wall: ([0-9.]+) s \(--time-budget ([0-9.]+)")
DONE = re.compile(r"done: ([0-9]+) trials")
KEEP = ("median_ms", "spread_ms", "compile_s", "lookups", "benchmarks", "numerics_ok")


def bench_row(batch: int, bench: dict[str, Any], log: str) -> dict[str, Any]:
    text = Path(log).read_text()
    wall, budget = WALL.search(text).groups()  # type: ignore[union-attr]
    modes = {name: {k: r[k] for k in KEEP if k in r} for name, r in bench["results"].items()}
    own = modes.pop(f"tuned-b{batch}")
    ms = {name: r["median_ms"] for name, r in modes.items()}
    best_inductor = min(ms["default"], ms["freezing-max-autotune"])
    return {
        "batch": batch,
        "modes": modes,
        "own_sweep": {
            **own,
            "time_budget_s": float(budget),
            "wall_s": float(wall),
            "trials": int(DONE.search(text).group(1)),
            "log": log,
        },  # type: ignore[union-attr]
        "tuned_vs_default": round(ms["tuned"] / ms["default"], 3),
        "tuned_vs_best_inductor": round(ms["tuned"] / best_inductor, 3),
        "tuned_vs_own_sweep": round(ms["tuned"] / own["median_ms"], 3),
        "strict_vs_default": round(ms["tuned-strict"] / ms["default"], 3),
        "command": bench["command"],
        "date": bench["date"],
    }


def source_row(batch: int, path: str) -> dict[str, Any]:
    doc = json.loads(Path(path).read_text())
    s = doc["sweeps"][0]
    return {
        "batch": batch,
        "source": True,
        "from": path,
        "modes": {
            "default": {"median_ms": s["default_ms"]},
            "freezing-max-autotune": {"median_ms": s["freezing_max_autotune_ms"]},
            "tuned": {"median_ms": s["tuned_ms"], "benchmarks": s["benchmarks_at_compile"]},
        },
        "tuned_vs_default": round(s["tuned_ms"] / s["default_ms"], 3),
        "tuned_vs_best_inductor": round(s["tuned_ms"] / min(s["default_ms"], s["freezing_max_autotune_ms"]), 3),
        "sweep": {"budget": s["budget"], "wall_s": s["wall_s"], "trials": s["trials"], "commit": s["commit"]},
        "command": doc["bench_command"],
        "date": doc["date"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-batch", type=int, required=True)
    ap.add_argument("--source-sweep", required=True)
    ap.add_argument("--bench", action="append", required=True, help="BATCH:BENCH_JSON:SWEEP_LOG")
    ap.add_argument("--note", default="")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows, first = [source_row(a.source_batch, a.source_sweep)], None
    for spec in a.bench:
        batch, bench_path, log = spec.split(":")
        bench = json.loads(Path(bench_path).read_text())
        first = first or bench
        rows.append(bench_row(int(batch), bench, log))
    rows.sort(key=lambda r: r["batch"])
    doc = {
        k: first[k] for k in ("model", "device", "device_kind", "torch", "triton", "dtype", "channels_last", "rounds")
    }  # type: ignore[index]
    doc.update(source_batch=a.source_batch, note=a.note, rows=rows)
    Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        m = r["modes"]
        print(
            r["batch"],
            {k: v["median_ms"] for k, v in m.items()},
            r.get("own_sweep", {}).get("median_ms"),
            r["tuned_vs_default"],
            r.get("tuned_vs_own_sweep"),
        )


if __name__ == "__main__":
    main()
