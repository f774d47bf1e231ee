"""Do two databases swept from the same workload (say before and after a change to tuner) hold the same winners?

    python bench/analysis/compare_winners.py sqlite:///before.db sqlite:///after.db [--bench-a A.json --bench-b B.json]
        [--out result.json]

Per task key held by either: its name, kind, each side's winner and whether they agree. With two ``tuner bench``
JSONs, each tuned mode's ratio over the best Inductor mode of its own run and whether the two ratios lie within each
other's spread (the IQRs of the two medians behind each ratio, added). Reads only; changes neither database.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tuner.db import Database


def winners(url: str) -> dict[str, dict[str, Any]]:
    db = Database.open(url, create=False, read_only=True)
    try:
        return {w["task"] + " [" + w["kind"] + "]": w["config"] for w in db.top_winners(limit=10**6)}
    finally:
        db.close()


def ratio(doc: dict[str, Any], mode: str = "tuned") -> tuple[float, float] | None:
    """(tuned / best Inductor, the ratio's spread from both medians' IQRs), or None."""
    modes, best = doc.get("results", {}), doc.get("best_inductor")
    mine, anchor = modes.get(mode), modes.get(best) if best else None
    if not mine or not anchor:
        return None
    r = mine["median_ms"] / anchor["median_ms"]
    spread = r * (
        (mine.get("spread_ms") or 0) / mine["median_ms"] + (anchor.get("spread_ms") or 0) / anchor["median_ms"]
    )
    return r, spread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--bench-a")
    ap.add_argument("--bench-b")
    ap.add_argument("--out")
    args = ap.parse_args()
    wa, wb = winners(args.a), winners(args.b)
    rows = [
        {"task": t, "a": wa.get(t), "b": wb.get(t), "same": wa.get(t) == wb.get(t)} for t in sorted(set(wa) | set(wb))
    ]
    out: dict[str, Any] = {
        "a": args.a,
        "b": args.b,
        "tasks": rows,
        "same_winners": sum(r["same"] for r in rows),
        "tasks_total": len(rows),
    }
    if args.bench_a and args.bench_b:
        ra, rb = (ratio(json.load(open(p))) for p in (args.bench_a, args.bench_b))
        out["ratios"] = {"a": ra, "b": rb, "within_spread": bool(ra and rb and abs(ra[0] - rb[0]) <= ra[1] + rb[1])}
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
