"""Other settings of the learned ranking, scored by ``ranking_eval.py``'s leave-one-model-out table: tree settings,
targets that are each candidate's rank within its task, bagging over training tasks, and two GPU-wave features. It
patches ``tuner.ranking`` in this process only; nothing here changes what a sweep does.

    python bench/analysis/ranking_variants.py bench/results/h200/{regnet_y_400mf-bf16-b32-s120,resnet18-train-bf16-b32,\\
        resnet50-bf16-b32,squeezenet1_1-bf16-b32,vit_b_16-bf16-b32}.jsonl.gz --out bench/results/h200/ranking-variants-2026-12-02.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import ranking_eval  # noqa: E402

import tuner.ranking.features as features  # noqa: E402
import tuner.ranking.model as model  # noqa: E402

SMS = 132  # the H200's


def _ranks(keys: list[str], targets: list[float]) -> list[float]:
    """Each target as its rank within its task, from -0.5 (fastest) to 0.5."""
    by_task: dict[str, list[tuple[float, int]]] = {}
    for i, (k, t) in enumerate(zip(keys, targets)):
        by_task.setdefault(k, []).append((t, i))
    out = [0.0] * len(targets)
    for rows in by_task.values():
        rows.sort()
        for r, (_, i) in enumerate(rows):
            out[i] = (r / (len(rows) - 1) if len(rows) > 1 else 0.5) - 0.5
    return out


class _Bag:
    def __init__(self, models: list[Any]):
        self.models = models

    def predict(self, rows: Any) -> list[float]:
        preds = [m.predict(rows) for m in self.models]
        return [sum(p[i] for p in preds) / len(preds) for i in range(len(preds[0]))]


def _bagged(fit: Callable[..., Any], n: int = 8, share: float = 0.7) -> Callable[..., Any]:
    def bag_fit(cls: Any, group: str, samples: Any, *, seed: int = 0) -> Any:
        samples = list(samples)
        base = fit(cls, group, samples, seed=seed)
        if base is None:
            return None
        keys, rng, models = sorted({s.task_key for s in samples}), random.Random(seed), [base.model]
        for _ in range(n - 1):
            pick = set(rng.sample(keys, int(share * len(keys))))
            r = fit(cls, group, [s for s in samples if s.task_key in pick], seed=seed)
            if r is not None and r.columns == base.columns:
                models.append(r.model)
        base.model = _Bag(models)
        return base
    return bag_fit


def _with_waves(site_features: Callable[..., list[float]]) -> Callable[..., list[float]]:
    at = features.SITE_FEATURES.index("log_tiles")

    def row(shape: Any, config: dict[str, Any]) -> list[float]:
        out = site_features(shape, config)
        if math.isnan(out[at]):
            return out + [features.NAN, features.NAN]
        tiles = 2 ** out[at]
        waves = math.ceil(tiles / SMS)
        return out + [tiles / (waves * SMS), math.log2(waves)]
    return row


@contextmanager
def variant(params: dict[str, Any] | None = None, target: str = "median", bag: bool = False, waves: bool = False) -> Iterator[None]:
    saved = (dict(model.PARAMS), model._centred, model.Ranker.fit, features.site_features, features.SITE_FEATURES)
    try:
        model.PARAMS = {**model.PARAMS, **(params or {})}
        if target == "rank":
            model._centred = _ranks
        if bag:
            model.Ranker.fit = classmethod(_bagged(saved[2].__func__))
        if waves:
            features.site_features = _with_waves(saved[3])
            features.SITE_FEATURES = saved[4] + ("wave_efficiency", "log_waves")
        yield
    finally:
        model.PARAMS, model._centred, model.Ranker.fit, features.site_features, features.SITE_FEATURES = saved


VARIANTS: dict[str, dict[str, Any]] = {
    "shipped": {},
    "depth 3": {"params": {"max_depth": 3}},
    "depth 6": {"params": {"max_depth": 6}},
    "leaves of 10": {"params": {"min_samples_leaf": 10}},
    "leaves of 40": {"params": {"min_samples_leaf": 40}},
    "300 iterations": {"params": {"max_iter": 300}},
    "learning rate 0.1": {"params": {"learning_rate": 0.1}},
    "absolute error": {"params": {"loss": "absolute_error"}},
    "rank targets": {"target": "rank"},
    "bagged": {"bag": True},
    "bagged, rank targets": {"bag": True, "target": "rank"},
    "wave features": {"waves": True},
    "wave features, depth 3": {"waves": True, "params": {"max_depth": 3}},
    "wave features, absolute error": {"waves": True, "params": {"loss": "absolute_error"}},
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", nargs="+", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        models = {p.name.split("-bf16")[0].split(".jsonl")[0]: ranking_eval.load(p, Path(tmp)) for p in args.exports}
    rows = []
    for name, kw in VARIANTS.items():
        with variant(**kw):
            table = ranking_eval.evaluate(models, 4, 3, 0)["table"]
        sites = next(r for r in table if r["model"] == "all" and r["group"] == "sites")
        row = {"variant": name, "tasks": sites["tasks"], **{f"top-{k}": sites[f"learned@{k}"] for k in ranking_eval.KS}}
        rows.append(row)
        print(f"{name:32s} " + "  ".join(f"top-{k} {row[f'top-{k}']['within_2pct']:.0%} / {row[f'top-{k}']['mean_regret']:.1%}" for k in ranking_eval.KS), flush=True)
    if args.out:
        doc = {"exports": [str(p) for p in args.exports], "command": " ".join(["python", *sys.argv]), "sites": rows}
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
