"""Seeds from near tasks: another batch size's template-site winner is measured early at this site."""

from tests.helpers.replay import _context, tasks
from tuner.core import Kind
from tuner.db import Database
from tuner.study.study import first_to_measure, measured_before
from tuner.search_spaces import space_for
from tuner.study.seeds import near_seeds, site_distance


def _row(sizes, strides, dtype="torch.float32"):
    return ["cpu", dtype, *sizes, *strides, 0]


def _site(batch, dtype="torch.float32", op="mm"):
    sig = {"op": op, "inputs": [_row([batch, 64], [64, 1], dtype), _row([64, 32], [1, 64], dtype)]}
    sig["space"] = {"choices": ["aten:mm", "cpp:A", "cpp:B", "cpp:C"], "default": "aten:mm"}
    return sig


def test_sites_are_near_by_size_only_with_the_same_op_dtypes_and_layout():
    assert site_distance(_site(8), _site(8)) == 0
    assert site_distance(_site(8), _site(16)) == 1.0 < site_distance(_site(8), _site(64))
    assert site_distance(_site(8), _site(8, dtype="torch.bfloat16")) is None
    assert site_distance(_site(8), _site(8, op="addmm")) is None
    transposed = _site(8)
    transposed["inputs"][1] = _row([64, 32], [32, 1])
    assert site_distance(_site(8), transposed) is None


def test_the_nearest_valid_winners_seed_first():
    space = space_for(Kind.SITE, _site(8))
    others = [
        (_site(64), {"choice": "cpp:C"}, 1.5),
        (_site(16), {"choice": "cpp:B"}, 1.1),
        (_site(16, dtype="torch.bfloat16"), {"choice": "cpp:A"}, 3.0),  # not comparable
        (_site(32), {"choice": "triton:evil"}, 9.0),  # not in this site's space
        (_site(8), {"choice": "aten:mm"}, 1.0),  # this site's default: nothing to seed
    ]
    assert near_seeds(Kind.SITE, _site(8), space, others) == [{"choice": "cpp:B"}, {"choice": "cpp:C"}]


def test_a_study_measures_another_graphs_winner_first(db_url):
    """Graph knobs: the best verified winner of another graph (another workload, batch size) is asked first. A graph
    study measures no default trial of its own: every trial times the default beside it (``TaskKind.beside_base``)."""
    db = Database.open(db_url)
    tuning = _context(db_url, db, trials=4)
    mine, other = tasks(3)[0], tasks(3)[2]  # both with the CPP GEMM knobs
    rec, other_rec = (db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint()) for t in (mine, other))
    won = {**other.space.default, "cpp.simdlen": 0, "cpp.min_chunk_size": 64}
    assert mine.space.is_valid(won) and won not in mine.space.seeds()
    db.set_winner(other_rec.id, tuning.device_id, None, won, 1.0, 1.5)
    seen, _ = measured_before(tuning, rec)
    asked = first_to_measure(tuning, rec, mine.space, seen)[:2]
    assert asked[0] == won and mine.space.default not in asked
    db.close()


def _fusion_sig(unshared: int = 0):
    from tuner.backend.defaults import fusion_defaults

    space = {"device": "cuda", "defaults": fusion_defaults("cuda"), "pairs": ["p1", "p2"]}
    if unshared:
        space["unshared_epilogues"] = unshared
    return {"backward": False, "lines": 10, "space": space}


def test_a_graph_whose_template_epilogues_share_no_data_tries_aggressive_fusion_before_other_graphs_knobs(db_url):
    """The recording saw Inductor refuse template epilogues for sharing no indexed data (which ``aggressive_fusion``
    admits): that grouping is asked first, before another graph's winning knobs; without such refusals, the other
    graph's knobs come first, as before. The evidence is part of the space's context, so older tasks keep their
    fingerprint."""
    from tuner.core import TaskSpec

    plain, seen_unshared = space_for(Kind.FUSION, _fusion_sig()), space_for(Kind.FUSION, _fusion_sig(3))
    assert plain.evidence() == [] and plain.fingerprint() == space_for(Kind.FUSION, _fusion_sig(0)).fingerprint()
    (lead,) = seen_unshared.evidence()
    assert lead == {**seen_unshared.default, "aggressive_fusion": True} and seen_unshared.is_valid(lead)
    db = Database.open(db_url)
    tuning = _context(db_url, db, trials=4)
    other = {**plain.default, "max_fusion_size": 8}
    other_rec = db.upsert_task("other-graph", Kind.FUSION, "other", _fusion_sig(), plain.fingerprint())
    db.set_winner(other_rec.id, tuning.device_id, None, other, 1.0, 1.3)
    for key, sig, first in (("mine-a", _fusion_sig(3), lead), ("mine-b", _fusion_sig(), other)):
        task = TaskSpec(key, Kind.FUSION, key, sig, space_for(Kind.FUSION, sig))
        rec = db.upsert_task(task.key, task.kind, task.name, task.signature, task.space.fingerprint())
        assert first_to_measure(tuning, rec, task.space, measured_before(tuning, rec)[0])[0] == first
    db.close()
