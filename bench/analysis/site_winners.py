"""Where a sweep's template-site winners came from: Inductor's own list of choices, or configs beyond it.

Reads an export (``tuner db export``) and, per template site, compares the best choice Inductor offered (the
site's seeds, every one measured: what max-autotune measures too) with the best generated config, and says at
which trial the sweep first came within 2% of its best. Then a replay: had a site measured only K of the
choices the sweep measured there (the default and K-1 drawn at random, or the first K in the sweep's order),
how much slower would its best have been? No device needed: it reads stored measurements.

    python bench/analysis/site_winners.py bench/results/h200/resnet50-bf16-b32-2026-11-30.jsonl.gz --out site-winners.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
from collections import defaultdict
from typing import Any

from tuner.core import Kind


def _rows(path: str) -> list[dict[str, Any]]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _site_trials(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(template-site task, its trials in the order they were stored) for every site with trials."""
    tasks = {r["key"]: r for r in rows if r.get("type") == "task" and r.get("kind") == Kind.SITE}
    trials: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in sorted((r for r in rows if r.get("type") == "trial" and r.get("task") in tasks), key=lambda r: r["created_at"]):
        trials[r["task"]].append(r)
    return [(tasks[key], trs) for key, trs in trials.items()]


def _ratio(trial: dict[str, Any]) -> float | None:
    """A measured trial's time over its default's, timed in the same round; None for one that did not run."""
    ok = trial["status"] == "ok" and trial.get("median_ms") and trial.get("baseline_ms")
    return trial["median_ms"] / trial["baseline_ms"] if ok else None


def site_report(rows: list[dict[str, Any]], within: float = 0.02) -> list[dict[str, Any]]:
    """One row per template site with measured trials: the best ratio (to the site's default, timed in the same
    round) among Inductor's choices and among generated configs, and when the sweep first got within ``within``."""
    out = []
    for task, trs in _site_trials(rows):
        offered = set(task["signature"]["space"]["choices"])
        ratios = [(r["config"]["choice"] in offered, _ratio(r)) for r in trs]
        measured = [x for _, x in ratios if x is not None]
        if not measured:
            continue
        best = min(measured)
        seeds = [x for s, x in ratios if s and x is not None]
        generated = [x for s, x in ratios if not s and x is not None]
        out.append({
            "site": task["name"],
            "trials": len(trs),
            "offered_trials": sum(1 for s, _ in ratios if s),
            "generated_trials": sum(1 for s, _ in ratios if not s),
            "best_ratio": round(best, 4),
            "best_offered_ratio": round(min(seeds), 4) if seeds else None,
            "best_generated_ratio": round(min(generated), 4) if generated else None,
            "first_within_trial": next(i + 1 for i, (_, x) in enumerate(ratios) if x is not None and x <= best * (1 + within)),
        })
    return out


def _site_ratios(rows: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, float], list[str]]]:
    """{site: (default, {choice: median ratio over its measurements}, choices in the order first measured)}."""
    out = {}
    for task, trs in _site_trials(rows):
        seen: dict[str, list[float]] = defaultdict(list)
        for r in trs:
            if (x := _ratio(r)) is not None:
                seen[r["config"]["choice"]].append(x)
        if seen:
            out[task["name"]] = (task["signature"]["space"]["default"], {c: statistics.median(v) for c, v in seen.items()}, list(seen))
    return out


def subset_replay(rows: list[dict[str, Any]], ks: tuple[int, ...] = (4, 8, 12, 16), draws: int = 200, within: float = 0.02) -> dict[str, Any]:
    """{K: mean over sites of (best among K measured / best of all measured), for random draws and for the
    sweep's own order, and the share of random draws within ``within`` of the best}."""
    sites = _site_ratios(rows)
    out = {}
    for k in ks:
        rand, hit, ordered = [], [], []
        for default, ratios, order in sites.values():
            best = min(ratios.values())
            others = [c for c in ratios if c != default]
            base = [ratios[default]] if default in ratios else []
            found = [min(base + [ratios[c] for c in random.Random(i).sample(others, min(k - 1, len(others)))]) / best for i in range(draws)]
            rand.append(statistics.mean(found))
            hit.append(sum(x <= 1 + within for x in found) / draws)
            ordered.append(min(ratios[c] for c in order[:k]) / best)
        out[str(k)] = {"random": round(statistics.mean(rand), 3), "random_within": round(statistics.mean(hit), 3),
                       "sweep_order": round(statistics.mean(ordered), 3)}
    return out


def summary(sites: list[dict[str, Any]]) -> dict[str, Any]:
    wins = [s for s in sites if s["best_generated_ratio"] is not None and s["best_offered_ratio"] is not None
            and s["best_generated_ratio"] < s["best_offered_ratio"]]
    return {
        "sites": len(sites),
        "trials": sum(s["trials"] for s in sites),
        "offered_trials": sum(s["offered_trials"] for s in sites),
        "generated_trials": sum(s["generated_trials"] for s in sites),
        "generated_best": len(wins),
        "generated_gain_over_best_offered": [round(1 - s["best_generated_ratio"] / s["best_offered_ratio"], 3) for s in wins],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("export", help="a file written by `tuner db export`")
    p.add_argument("--out", help="write the report here as JSON")
    args = p.parse_args()
    rows = _rows(args.export)
    sites = site_report(rows)
    import datetime as dt
    import sys

    report = {
        "source": args.export, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]), "summary": summary(sites), "subset_replay": subset_replay(rows), "sites": sites,
    }
    for s in sites:
        print(f"{s['site'][:42]:42} trials {s['trials']:3} (offered {s['offered_trials']:2}, generated {s['generated_trials']:2})"
              f"  best {s['best_ratio']:.3f}  offered {s['best_offered_ratio'] or float('nan'):.3f}"
              f"  generated {s['best_generated_ratio'] or float('nan'):.3f}  within 2% at trial {s['first_within_trial']}")
    print(json.dumps(report["summary"]))
    print("best of K measured / best of all, per site on average:", json.dumps(report["subset_replay"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
