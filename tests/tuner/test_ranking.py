"""The learned ranking: features from stored signatures, a real scikit-learn model fit on trials in a real SQLite
database, and a study that measures the predicted fastest candidates instead of Inductor's whole list."""

import json
import math
import random

import pytest

from tests.helpers.replay import _context
from tuner.core import Kind
from tuner.db import Database
from tuner.keys import config_hash
from tuner.measure import Measurement, Status
from tuner.ranking import EXPLORE, Rankers
from tuner.ranking.features import IMPLS, SITE_FEATURES, SITES, featurizer
from tuner.ranking.model import MIN_TASKS, Ranker, Sample
from tuner.study.context import record
from tuner.study.study import first_to_measure, measured_before
from tuner.search_spaces import space_for
from tuner.search_spaces.template import generator_context, parse_generated

pytest.importorskip("sklearn")

TRITON = "triton::mm:" + json.dumps(
    {
        "ACC_TYPE": "tl.float32",
        "BLOCK_K": 32,
        "BLOCK_M": 64,
        "BLOCK_N": 64,
        "EVEN_K": True,
        "GROUP_M": 8,
        "USE_FAST_ACCUM": False,
        "hint_override": None,
        "num_stages": 2,
        "num_warps": 4,
    },
    sort_keys=True,
    separators=(",", ":"),
)


def _site(m, n, k):
    inputs = [["cuda", "torch.bfloat16", m, k, k, 1, 0], ["cuda", "torch.bfloat16", k, n, n, 1, 0]]
    choices = ["aten::mm:{}", TRITON]
    return {
        "op": "mm",
        "inputs": inputs,
        "space": {"choices": choices, "default": choices[0], "generate": generator_context("mm", inputs, choices)},
    }


def _synthetic_ratio(sig, config):
    """A cost with a size-dependent optimum: big-M sites want BLOCK_M=128, small ones 32; BLOCK_N 64, 4 warps."""
    parsed = parse_generated(config["choice"])
    if parsed is None:
        return 1.0
    p, m = parsed[1], sig["inputs"][0][2]
    best_m = 128 if m >= 4096 else 32
    return (
        0.6
        + 0.15 * abs(math.log2(p["BLOCK_M"] / best_m))
        + 0.1 * abs(math.log2(p["BLOCK_N"] / 64))
        + 0.05 * abs(math.log2(p["num_warps"] / 4))
    )


SIZES = [
    (256, 512, 256),
    (512, 256, 512),
    (1024, 1024, 256),
    (8192, 256, 512),
    (16384, 512, 256),
    (4096, 1024, 1024),
    (256, 256, 1024),
    (32768, 128, 128),
]


def _samples(sizes, per_task=30, seed=0):
    rng = random.Random(seed)
    out = []
    for m, n, k in sizes:
        sig = _site(m, n, k)
        for c in rng.sample(space_for(Kind.SITE, sig).configs(), per_task):
            out.append(Sample(f"{m}x{n}x{k}", sig, c, _synthetic_ratio(sig, c)))
    return out


def test_site_features_read_the_gemm_view_and_the_choices_blocks():
    sig = _site(4096, 256, 512)
    row = dict(zip(SITE_FEATURES, featurizer(SITES, sig)({"choice": TRITON})))
    assert (row["log_m"], row["log_n"], row["log_k"]) == (12, 8, 9)
    assert (row["block_m"], row["block_n"], row["block_k"], row["num_warps"]) == (64, 64, 32, 4)
    assert row["log_tiles"] == math.log2(64 * 4) and row["k_iters"] == 16
    assert row["smem_kib"] == 2 * (64 * 32 + 32 * 64) * 2 / 1024
    aten = dict(zip(SITE_FEATURES, featurizer(SITES, sig)({"choice": "aten::mm:{}"})))
    assert aten["is_default"] == 1.0 and math.isnan(aten["block_m"]) and math.isnan(aten["split_k"])


def test_a_split_k_choice_is_read_as_its_tile_and_split():
    from tuner.search_spaces import splitk

    sig = _site(8, 768, 3072)
    config = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128, "SPLIT_K": 8, "num_warps": 2, "num_stages": 4}
    row = dict(zip(SITE_FEATURES, featurizer(SITES, sig)({"choice": splitk.make_id(config)})))
    assert (row["block_m"], row["block_n"], row["block_k"], row["split_k"], row["num_warps"]) == (16, 32, 128, 8, 2)
    assert row["impl"] == IMPLS.index("splitk") and row["k_iters"] == 3072 / 128 / 8
    bad = dict(zip(SITE_FEATURES, featurizer(SITES, sig)({"choice": splitk.PREFIX + "{}"})))
    assert bad["impl"] == IMPLS.index("splitk") and math.isnan(bad["block_n"])


def test_no_model_from_too_few_tasks():
    assert Ranker.fit(SITES, _samples(SIZES[: MIN_TASKS - 1])) is None


def test_a_model_fit_on_other_sites_ranks_a_new_sites_best_first():
    ranker = Ranker.fit(SITES, _samples(SIZES))
    assert ranker is not None and ranker.tasks == len(SIZES)
    for held in [(65536, 256, 256), (128, 512, 512)]:  # sizes no training site had
        sig = _site(*held)
        pool = space_for(Kind.SITE, sig).configs()
        best = min(_synthetic_ratio(sig, c) for c in pool)
        top = ranker.rank(sig, pool)[:4]
        assert min(_synthetic_ratio(sig, c) for c in top) <= 1.02 * best
        assert sorted(_synthetic_ratio(sig, c) for c in pool)[len(pool) // 2] > 1.3 * best  # a random pick would not


def _stored(db, tuning, sizes):
    recs = []
    for m, n, k in sizes:
        sig = _site(m, n, k)
        space = space_for(Kind.SITE, sig)
        rec = db.upsert_task(f"{m:020d}{n:020d}{k:024d}", Kind.SITE, f"mm {m}x{n}x{k}", sig, space.fingerprint())
        for c in random.Random(m).sample(space.configs(), 20):
            r = _synthetic_ratio(sig, c)
            record(tuning, rec, c, Measurement(Status.OK, r * 0.1, r * 0.1, 0.0, 0.1))
        recs.append(rec)
    return recs


def test_a_study_with_a_model_measures_the_ranked_candidates_not_inductors_list(db_url):
    db = Database.open(db_url)
    tuning = _context(db_url, db, trials=20)
    _stored(db, tuning, SIZES)
    assert len(db.timed_trials((Kind.SITE,), tuning.device_id, ("ok",))) == 20 * len(SIZES)
    tuning.rankers = Rankers(db, tuning.device_id)
    sig = _site(65536, 256, 256)
    space = space_for(Kind.SITE, sig)
    rec = db.upsert_task("f" * 64, Kind.SITE, "mm new", sig, space.fingerprint())
    k = tuning.budget.ranked
    assert tuning.target(Kind.SITE, 100) == 1 + k + EXPLORE
    first = tuning.first_configs(rec, space)
    assert len(first) == k and space.default not in first and all(space.is_valid(c) for c in first)
    seen, _ = measured_before(tuning, rec)
    asked = first_to_measure(tuning, rec, space, seen)[: 1 + k]
    assert asked[0] == space.default
    best = min(_synthetic_ratio(sig, c) for c in space.configs())
    assert min(_synthetic_ratio(sig, c) for c in asked[1:]) <= 1.05 * best
    assert {config_hash(c) for c in asked[1:]} == {config_hash(c) for c in first}  # only near seeds could come between
    db.close()


def test_without_enough_data_a_study_keeps_inductors_list(db_url):
    db = Database.open(db_url)
    tuning = _context(db_url, db, trials=20)
    _stored(db, tuning, SIZES[:2])
    tuning.rankers = Rankers(db, tuning.device_id)
    sig = _site(65536, 256, 256)
    space = space_for(Kind.SITE, sig)
    rec = db.upsert_task("e" * 64, Kind.SITE, "mm new", sig, space.fingerprint())
    assert tuning.target(Kind.SITE, 100) == 100
    assert tuning.first_configs(rec, space) == space.seeds()
    db.close()


def test_trials_imported_from_a_teammates_export_train_the_model(db_url, tmp_path):
    from tuner.db.export import export_records, write_export
    from tuner.db.transfer import apply_import, read_import

    theirs = Database.open(f"sqlite:///{tmp_path / 'theirs.db'}")
    _stored(theirs, _context(f"sqlite:///{tmp_path / 'theirs.db'}", theirs, trials=20), SIZES)
    write_export(export_records(theirs), tmp_path / "theirs.jsonl.gz")
    theirs.close()
    mine = Database.open(db_url)
    tuning = _context(db_url, mine, trials=20)
    assert Rankers(mine, tuning.device_id).for_kind(Kind.SITE) is None  # nothing measured here yet
    apply_import(mine, read_import(tmp_path / "theirs.jsonl.gz"))
    ranker = Rankers(mine, tuning.device_id).for_kind(Kind.SITE)
    assert ranker is not None and ranker.tasks == len(SIZES) and ranker.samples == 20 * len(SIZES)
    mine.close()
