"""The learned ranking: which candidates a task measures first, predicted by a cost model fit on the database.

``Rankers`` fits one model per group (template sites, Triton kernels) on every timed trial of this device model,
the database's and the shipped prior's (``tuner.ranking.prior``), once per sweep, when a study first asks. A task with a
model measures its default, the ``budget.ranked`` candidates predicted fastest (from every valid config of its space,
Inductor's offered ones included) and
``EXPLORE`` more that Optuna picks; a task without one keeps the unranked order (Inductor's list, then Optuna).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tuner.core import Kind
from tuner.kinds import KERNEL_HOOK, where
from tuner.ranking.features import KERNELS, SITES, group_of
from tuner.ranking.model import Ranker, Sample
from tuner.ranking.prior import PriorRows

EXPLORE = 2  # candidates beyond the ranked ones that the sampler picks (what the model has not learned)
MAX_POOL = 20000  # candidates predicted per task at most (a deterministic sample of a larger space)
TIMED = ("ok", "pruned")  # a pruned trial's probe time still says it is slow
GROUP_KINDS = {SITES: (Kind.SITE,), KERNELS: where(hook=KERNEL_HOOK)}

__all__ = ["EXPLORE", "PriorRows", "Ranker", "Rankers", "Sample"]


@dataclass
class Rankers:
    db: Any
    device_id: int
    prior: PriorRows = field(default_factory=PriorRows)  # the shipped measurements of this device model
    fitted: dict[str, Ranker | None] = field(default_factory=dict)

    def for_kind(self, kind: str) -> Ranker | None:
        group = group_of(kind)
        if group is None:
            return None
        if group not in self.fitted:
            rows = self.db.timed_trials(GROUP_KINDS[group], self.device_id, TIMED) + self.prior.timed(
                GROUP_KINDS[group]
            )
            self.fitted[group] = Ranker.fit(group, [Sample(*row) for row in rows])
        return self.fitted[group]

    def first(self, kind: str, signature: dict[str, Any], space: Any, k: int) -> list[dict[str, Any]]:
        """The ``k`` valid configs other than the default predicted fastest; [] without a model."""
        ranker = self.for_kind(kind)
        if ranker is None or k <= 0:
            return []
        pool = [c for c in space.configs() if c != space.default]
        if len(pool) > MAX_POOL:
            pool = random.Random(0).sample(pool, MAX_POOL)
        return ranker.rank(signature, pool)[:k]

    def target(self, kind: str, unranked: int, k: int) -> int:
        """Distinct configs a task measures: the default, ``k`` ranked and ``EXPLORE`` with a model (never more
        than ``unranked``), else ``unranked``."""
        return min(unranked, 1 + k + EXPLORE) if self.for_kind(kind) is not None else unranked
