"""A learned ranking of candidate configs: a cost model fit on the database's measured trials of this device model.

The model predicts log(candidate time / the task's default time), the ratio every trial stores against the default
timed in the same run, less the median of that task's logs: only the order within a task matters, and centring
spares the trees learning each task's offset (how slow its default happened to be). It is scikit-learn's
``HistGradientBoostingRegressor``: trees over a few thousand rows of mixed, partly missing features fit in well
under a second, need no scaling, and take NaN for "this choice has no block sizes" natively. The model is rebuilt
from the rows every time it is needed, never stored: nothing but measured numbers is shared.
With too little data (fewer than ``MIN_TASKS`` tasks, or ``MIN_SAMPLES`` trials) there is no model and callers
keep today's order.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.ranking.features import featurizer, names

MIN_TASKS = 6  # other tasks with measured trials before a model is trusted
MIN_SAMPLES = 60
CLIP = 3.0  # |log ratio| beyond this (20x) teaches nothing more about ranking
# Shallow, slow-learning trees: chosen on the leave-one-model-out table (bench/analysis/ranking_eval.py), where
# deeper ones fit the training models' sites and ranked the held-out one's worse.
PARAMS = {"max_iter": 150, "learning_rate": 0.05, "min_samples_leaf": 20, "l2_regularization": 1.0, "max_depth": 4}


@dataclass(frozen=True)
class Sample:
    task_key: str
    signature: dict[str, Any]
    config: dict[str, Any]
    ratio: float


@dataclass
class Ranker:
    group: str
    model: Any
    tasks: int
    samples: int
    columns: tuple[int, ...]  # the features some training row has (a column with no value cannot be binned)

    @staticmethod
    def load_library() -> None:
        """Import the model's library now (``prior.read_ahead``: while the capture runs); absent, nothing happens."""
        try:
            import sklearn.ensemble  # noqa: F401
        except ImportError:
            pass

    @classmethod
    def fit(cls, group: str, samples: Iterable[Sample], *, seed: int = 0) -> Ranker | None:
        """The model for ``group`` from ``samples`` (None: too little data, or scikit-learn is not installed)."""
        rows, targets, tasks = _rows(group, samples)
        if len(tasks) < MIN_TASKS or len(rows) < MIN_SAMPLES:
            return None
        try:
            from sklearn.ensemble import HistGradientBoostingRegressor
        except ImportError:
            return None
        model = HistGradientBoostingRegressor(**PARAMS, random_state=seed)
        columns = tuple(j for j in range(len(rows[0])) if any(not math.isnan(r[j]) for r in rows))
        model.fit([[r[j] for j in columns] for r in rows], targets)
        return cls(group, model, len(tasks), len(rows), columns)

    def predict(self, signature: dict[str, Any], configs: Sequence[dict[str, Any]]) -> list[float]:
        """Predicted log ratio to the default of each config (lower is faster)."""
        if not configs:
            return []
        row = featurizer(self.group, signature)
        return [float(v) for v in self.model.predict([[r[j] for j in self.columns] for r in map(row, configs)])]

    def rank(self, signature: dict[str, Any], configs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``configs``, predicted fastest first (ties keep their order)."""
        scores = self.predict(signature, configs)
        return [configs[i] for i in sorted(range(len(configs)), key=lambda i: scores[i])]


def _rows(group: str, samples: Iterable[Sample]) -> tuple[list[list[float]], list[float], set[str]]:
    rows: list[list[float]] = []
    targets: list[float] = []
    width = len(names(group))
    by_task: dict[str, Any] = {}
    keys: list[str] = []
    for s in samples:
        if not (s.ratio > 0 and math.isfinite(s.ratio)):
            continue
        try:
            row = by_task.setdefault(s.task_key, featurizer(group, s.signature))(s.config)
        except (ValueError, TypeError, KeyError):
            continue  # a signature or config this version cannot read (an imported file's): skipped
        if len(row) != width:
            continue
        rows.append(row)
        targets.append(max(-CLIP, min(CLIP, math.log(s.ratio))))
        keys.append(s.task_key)
    return rows, _centred(keys, targets), set(keys)


def _centred(keys: list[str], targets: list[float]) -> list[float]:
    """Each target less the median of its task's targets."""
    by_task: dict[str, list[float]] = {}
    for k, t in zip(keys, targets):
        by_task.setdefault(k, []).append(t)
    median = {k: statistics.median(v) for k, v in by_task.items()}
    return [t - median[k] for k, t in zip(keys, targets)]
