"""Does the same code, timed again by a sweep, land within the spread tuner reports?

A graph-level or fusion trial times Inductor's default beside its candidate (site batches time it once for all), so a sweep with several trials of one task has
timed the same code several times, in different windows. For each such task this lists the default's medians in
trial order and counts the consecutive pairs that differ by less than (a) the larger of the two trials' own spreads
(their interquartile ranges: one window) and (b) at most the spread ``tuner db show`` reports for the task's winner (the
winning trial's IQR, or where wider the default's drift between trials).

    python bench/analysis/remeasure.py --db postgresql+psycopg://…/name --out bench/results/cpu-xeon-2c/remeasure.json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from sqlalchemy import select

from tuner.kinds import where
from tuner.db import Database
from tuner.db.models import Task, Trial


def remeasured(db: Database) -> dict[str, Any]:
    with db.session() as s:
        rows = s.execute(
            select(Task.name, Task.kind, Trial.task_id, Trial.baseline_ms, Trial.spread_ms)
            .join(Task, Task.id == Trial.task_id)
            .where(Trial.status == "ok", Trial.baseline_ms.is_not(None), Task.kind.in_(list(where(beside_base=True))))
            .order_by(Trial.task_id, Trial.created_at, Trial.id)
        ).all()
    reported = {r["task"]: r["spread_ms"] for r in db.top_winners(limit=10**6)}
    tasks: dict[str, dict[str, Any]] = {}
    for name, kind, _, base, spread in rows:
        t = tasks.setdefault(name, {"kind": kind, "default_ms": [], "trial_spreads_ms": [], "reported_spread_ms": reported.get(name)})
        t["default_ms"].append(base)
        t["trial_spreads_ms"].append(spread or 0.0)
    out = {}
    for name, t in tasks.items():
        pairs = list(zip(t["default_ms"], t["default_ms"][1:], t["trial_spreads_ms"], t["trial_spreads_ms"][1:]))
        if not pairs:
            continue
        t["pairs"] = len(pairs)
        t["within_trial_spread"] = sum(abs(a - b) < max(sa, sb) for a, b, sa, sb in pairs)
        rep = t["reported_spread_ms"]
        t["within_reported_spread"] = None if rep is None else sum(abs(a - b) <= rep for a, b, _, _ in pairs)
        d, sp = t["default_ms"], t["trial_spreads_ms"]  # forward: the spread as it would have been reported before trial k
        ahead = [abs(d[k] - d[k - 1]) <= max(max(d[:k]) - min(d[:k]), sp[k - 1]) for k in range(2, len(d))]
        t["forward_pairs"], t["within_spread_reported_before"] = len(ahead), sum(ahead)
        out[name] = t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--out")
    args = ap.parse_args()
    db = Database.open(args.db, create=False)
    try:
        tasks = remeasured(db)
    finally:
        db.close()
    for name, t in tasks.items():
        print(f"{name} ({t['kind']}): default {min(t['default_ms']):.4g}-{max(t['default_ms']):.4g} ms over {t['pairs'] + 1} trials; "
              f"pairs within their trials' IQR {t['within_trial_spread']}/{t['pairs']}, within the reported spread "
              f"({t['reported_spread_ms']} ms) {t['within_reported_spread']}/{t['pairs']}, within the spread reported "
              f"before it {t['within_spread_reported_before']}/{t['forward_pairs']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"db": args.db.split("@")[-1], "tasks": tasks}, f, indent=1)


if __name__ == "__main__":
    main()
