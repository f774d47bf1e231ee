"""A task stored before its space grew (a knob added to the fusion grouping since, ``triton.multi_kernel``) is searched
in the space it was stored with: a compile validates its winners against the stored signature, so a study in the grown
space would store winners the compile then ignores. Real SQLite."""

from tuner.backend.defaults import fusion_defaults
from tuner.core import Kind, TaskSpec
from tuner.search_spaces import valid_winners
from tuner.db import Database
from tuner.search_spaces import space_for
from tuner.search_spaces.fusion import MULTI_KERNEL
from tuner.sweep.phases.base import Workload


def _grouping(defaults):
    sig = {"backward": False, "lines": 10, "space": {"device": "cuda", "defaults": defaults, "pairs": []}}
    return TaskSpec("f" * 64, Kind.FUSION, "m forward graph 0 fusion", sig, space_for(Kind.FUSION, sig))


def test_a_grouping_stored_before_its_space_grew_is_searched_in_the_stored_space(db_url):
    grown = fusion_defaults("cuda")
    older = {k: v for k, v in grown.items() if k != MULTI_KERNEL}
    db = Database.open(db_url)
    try:
        before = _grouping(older)
        db.upsert_task(before.key, before.kind, before.name, before.signature, before.space.fingerprint())
        ((task, rec),) = Workload(db, "m").register_pairs([_grouping(grown)])
        assert MULTI_KERNEL not in task.space.names() and task.signature == rec.signature == before.signature
        winner = {**task.space.default, "max_fusion_size": 128}
        assert valid_winners({task.key: (str(task.kind), winner, rec.signature)}), (
            "the compile keeps what the study finds"
        )

        fresh = _grouping(grown)
        ((same, _),) = Workload(db, "m").register_pairs(
            [TaskSpec("e" * 64, fresh.kind, fresh.name, fresh.signature, fresh.space)]
        )
        assert MULTI_KERNEL in same.space.names()  # a task stored now has the grown space
    finally:
        db.close()
