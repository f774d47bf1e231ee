"""Offline evaluation of the learned ranking (``tuner.ranking``): leave one model out, on stored measurements.

Each export is imported (validated, as ``tuner db import`` does) into its own SQLite file, and its measured trials
are read with the query a sweep trains on. For each model held out, a ranker is fit on the other models' trials
(sites and Triton kernels each get their own model) and orders this model's *measured* candidates at every task
with at least ``--min-candidates`` of them. A task always times its default (the baseline of every ratio), so an
order's top-K is the default plus its first K candidates; its regret is the best ratio among those over the best
ratio measured at the task, minus one. Orders compared: the learned one, Inductor's list (the choices it offered,
in its order, then the rest at random) and random (mean over ``--shuffles`` draws). No device needed.

    python bench/analysis/ranking_eval.py bench/results/h200/*.jsonl.gz --out bench/results/h200/ranking-eval-2026-12-01.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from tuner.core import Kind
from tuner.kinds import KERNEL_HOOK, where
from sqlalchemy import select

from tuner.db import Database
from tuner.db.models import Device
from tuner.db.transfer import apply_import, read_import
from tuner.keys import config_hash
from tuner.ranking.features import KERNELS, SITES, group_of
from tuner.ranking.model import Ranker, Sample

KS = (2, 4, 8, 16)
NEAR = 0.02  # "within 2% of the best measured choice"
STATUSES = ("ok", "pruned")


def load(path: Path, tmp: Path) -> list[tuple[str, Sample]]:
    """(kind, sample) of every timed trial in one export, read back through a validated import."""
    db = Database.open(f"sqlite:///{tmp / (path.name + '.db')}")
    try:
        apply_import(db, read_import(path))
        with db.session() as s:
            device_ids = list(s.scalars(select(Device.id)))
        return [
            (str(kind), Sample(*row))
            for device_id in device_ids
            for kind in (Kind.SITE, *where(hook=KERNEL_HOOK))
            for row in db.timed_trials((kind,), device_id, STATUSES)
        ]
    finally:
        db.close()


def tasks_of(samples: list[Sample]) -> dict[str, tuple[dict[str, Any], dict[str, float]]]:
    """{task key: (signature, {config hash: best ratio measured})}."""
    out: dict[str, tuple[dict[str, Any], dict[str, float]]] = {}
    for s in samples:
        sig, ratios = out.setdefault(s.task_key, (s.signature, {}))
        h = config_hash(s.config)
        ratios[h] = min(ratios.get(h, 9e9), s.ratio)
    return out


def inductor_order(
    signature: dict[str, Any], configs: list[dict[str, Any]], rng: random.Random
) -> list[dict[str, Any]]:
    offered = [str(c) for c in signature.get("space", {}).get("choices", [])]
    listed = sorted((c for c in configs if c.get("choice") in offered), key=lambda c: offered.index(c["choice"]))
    rest = [c for c in configs if c.get("choice") not in offered]
    rng.shuffle(rest)
    return listed + rest


def regret(order: list[dict[str, Any]], ratios: dict[str, float], default_ratio: float, k: int) -> float:
    best = min(ratios.values())
    got = min([default_ratio, *(ratios[config_hash(c)] for c in order[:k])])
    return got / best - 1.0


def evaluate(
    models: dict[str, list[tuple[str, Sample]]],
    min_candidates: int,
    shuffles: int,
    seed: int,
    train_only: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """``train_only``: models whose trials train every fit but are never held out (exports whose candidates a ranker
    chose, which cannot test one)."""
    rows: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    fits: dict[str, dict[str, Any]] = {}
    for held, held_samples in models.items():
        if held in train_only:
            continue
        for group in (SITES, KERNELS):
            held_keys = {s.task_key for _, s in held_samples}  # a task two models share is never trained on
            train = [
                s
                for name, ss in models.items()
                if name != held
                for kind, s in ss
                if group_of(kind) == group and s.task_key not in held_keys
            ]
            ranker = Ranker.fit(group, train, seed=seed)
            fits[f"{held}/{group}"] = {
                "train_tasks": ranker.tasks if ranker else 0,
                "train_samples": ranker.samples if ranker else len(train),
                "fitted": ranker is not None,
            }
            if ranker is None:
                continue
            test = [s for kind, s in held_samples if group_of(kind) == group]
            _score(rows, held, group, ranker, tasks_of(test), test, min_candidates, shuffles, seed)
    return {"fits": fits, "table": _table(rows)}


def _score(
    rows: Any,
    held: str,
    group: str,
    ranker: Ranker,
    tasks: dict[str, Any],
    test: list[Sample],
    min_candidates: int,
    shuffles: int,
    seed: int,
) -> None:
    configs_by_task: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for s in test:
        configs_by_task[s.task_key][config_hash(s.config)] = s.config
    for key, (sig, ratios) in tasks.items():
        default = sig.get("space", {}).get("default")
        default_cfg = {"choice": default} if group == SITES else dict(default or {})
        dh = config_hash(default_cfg)
        if dh not in ratios:
            continue
        cands = [c for h, c in configs_by_task[key].items() if h != dh]
        if len(cands) < min_candidates:
            continue
        rng = random.Random(seed)
        learned = ranker.rank(sig, cands)
        for k in KS:
            rows[(held, group)][f"learned@{k}"].append(regret(learned, ratios, ratios[dh], k))
            rows[(held, group)][f"inductor@{k}"].append(
                statistics.fmean(
                    regret(inductor_order(sig, cands, rng), ratios, ratios[dh], k) for _ in range(shuffles)
                )
            )
            rows[(held, group)][f"random@{k}"].append(
                statistics.fmean(regret(rng.sample(cands, len(cands)), ratios, ratios[dh], k) for _ in range(shuffles))
            )
        rows[(held, group)]["candidates"].append(len(cands))


def _table(rows: dict[tuple[str, str], dict[str, list[float]]]) -> list[dict[str, Any]]:
    out = []
    pooled: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (held, group), cols in sorted(rows.items()):
        out.append(_summary(held, group, cols))
        for name, vals in cols.items():
            pooled[group][name] += vals
    out += [_summary("all", group, cols) for group, cols in sorted(pooled.items())]
    return out


def _summary(held: str, group: str, cols: dict[str, list[float]]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "model": held,
        "group": group,
        "tasks": len(cols["candidates"]),
        "median_candidates": statistics.median(cols["candidates"]),
    }
    for name, vals in cols.items():
        if name == "candidates":
            continue
        row[name] = {"mean_regret": statistics.fmean(vals), "within_2pct": sum(v <= NEAR for v in vals) / len(vals)}
    return row


def render(table: list[dict[str, Any]]) -> str:
    lines = [
        "| held out | group | tasks | order | " + " | ".join(f"top-{k}: within 2% / mean regret" for k in KS) + " |",
        "|" + "---|" * (4 + len(KS)),
    ]
    for row in table:
        for order in ("learned", "inductor", "random"):
            cells = [f"{row[f'{order}@{k}']['within_2pct']:.0%} / {row[f'{order}@{k}']['mean_regret']:.1%}" for k in KS]
            lines.append(f"| {row['model']} | {row['group']} | {row['tasks']} | {order} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _name(path: Path) -> str:
    return path.name.split("-bf16")[0].split(".jsonl")[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", nargs="+", type=Path, help="tuner export files (.jsonl or .jsonl.gz), one per model")
    ap.add_argument("--train-only", nargs="*", type=Path, default=[], help="exports that only train (never held out)")
    ap.add_argument("--min-candidates", type=int, default=4, help="rank only tasks with this many measured candidates")
    ap.add_argument("--shuffles", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        models = {_name(p): load(p, Path(tmp)) for p in [*args.exports, *args.train_only]}
    result = evaluate(models, args.min_candidates, args.shuffles, args.seed, frozenset(map(_name, args.train_only)))
    result["exports"] = [str(p) for p in args.exports]
    result["train_only"] = [str(p) for p in args.train_only]
    result["command"] = " ".join(["python", "bench/analysis/ranking_eval.py", *sys.argv[1:]])
    print(render(result["table"]))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
