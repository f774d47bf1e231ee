"""The shipped prior (tuner.ranking.prior): real export files read through the validated import, a real
scikit-learn model fit from them for a device model whose database is empty, and seeds from their winners."""

import gzip
import logging
import os

import pytest

from tests.helpers.replay import _context
from tuner.core import Kind
from tuner.db import Database, DeviceInfo
from tuner.ranking import Rankers
from tuner.ranking.prior import PRIOR_DIR, PriorRows, _plan, describe, prior_files, rows_for
from tuner.study.study import _near_winners
from tuner.search_spaces import space_for
from tuner.study.seeds import near_seeds
from tuner.settings import settings

H200 = ("cuda", "NVIDIA H200")


@pytest.fixture
def fresh_prior_cache():
    rows_for.cache_clear()
    _plan.cache_clear()
    settings.cache_clear()
    yield
    rows_for.cache_clear()
    _plan.cache_clear()
    settings.cache_clear()


def test_the_shipped_priors_are_valid_exports_of_h200_workloads_other_than_the_measured_ones():
    files = describe()
    assert len(files) == len(prior_files()) >= 3 and all("error" not in f for f in files)
    assert {d for f in files for d in f["devices"]} == {"NVIDIA H200"}
    workloads = [w for f in files for w in f["workloads"]]
    # The sweep-cost figures are measured on resnet50 and regnet_y_400mf: the prior must never have seen them.
    assert not any(w.split("/")[0] in ("resnet50", "regnet_y_400mf") for w in workloads)
    assert (PRIOR_DIR / "README.md").is_file()


def test_rows_for_the_h200_hold_timed_site_and_kernel_trials_and_winners(fresh_prior_cache):
    rows = rows_for(*H200)
    kinds = {k for k, *_ in rows.trials}
    assert Kind.SITE in kinds and kinds & {
        Kind.TRITON_POINTWISE,
        Kind.TRITON_REDUCTION,
        Kind.TRITON_PERSISTENT_REDUCTION,
    }
    assert all(r > 0 for *_, r in rows.trials)
    assert rows.winners and rows.files
    assert rows_for("cuda", "NVIDIA H100 80GB HBM3") == PriorRows()  # another device model: nothing
    assert rows_for("cpu", "NVIDIA H200") == PriorRows()
    assert rows.devices == ("NVIDIA H200",)


def test_a_device_model_with_no_prior_of_its_own_learns_from_its_architectures(fresh_prior_cache):
    """An H100 (compute capability 9.0) gets the H200's rows, said to be the H200's; another architecture gets none."""
    h200 = rows_for(*H200)
    h100 = rows_for("cuda", "NVIDIA H100 80GB HBM3", "9.0")
    assert h100.trials == h200.trials and h100.winners == h200.winners and h100.devices == ("NVIDIA H200",)
    assert rows_for("cuda", "NVIDIA A100-SXM4-80GB", "8.0") == PriorRows()
    assert rows_for(*H200, "9.0") == h200  # its own model's rows first


def test_TUNER_PRIOR_0_turns_it_off(fresh_prior_cache, monkeypatch):
    monkeypatch.setenv("TUNER_PRIOR", "0")
    assert rows_for(*H200) == PriorRows()


def test_a_damaged_prior_file_is_skipped_with_a_warning(fresh_prior_cache, tmp_path, caplog):
    good = prior_files()[0]
    (tmp_path / good.name).write_bytes(good.read_bytes())
    with gzip.open(tmp_path / "bad.jsonl.gz", "wt") as f:
        f.write('{"type": "header", "format": "not tuner"}\n')
    with caplog.at_level(logging.WARNING, logger="tuner.ranking"):
        rows = rows_for(*H200, directory=tmp_path)
    assert rows.files == (good.name,) and rows.trials
    assert "bad.jsonl.gz" in caplog.text


def test_an_empty_database_ranks_with_the_prior_and_not_without_it(db_url, fresh_prior_cache):
    db = Database.open(db_url)
    device_id = db.device_id(DeviceInfo(*H200, {"sms": 132}))
    assert Rankers(db, device_id).for_kind(Kind.SITE) is None  # no trials here
    with_prior = Rankers(db, device_id, rows_for(*H200))
    site, kernel = with_prior.for_kind(Kind.SITE), with_prior.for_kind(Kind.TRITON_POINTWISE)
    assert site is not None and site.tasks >= 6 and kernel is not None
    db.close()


def test_a_new_study_is_seeded_from_the_priors_winners_only_when_its_database_has_none(db_url, fresh_prior_cache):
    db = Database.open(db_url)
    tuning = _context(db_url, db, trials=4)
    tuning.prior = PriorRows(winners=(("cpp_graph", "a" * 64, {}, {"cpp.simdlen": 0}, 1.3),))
    rec = db.upsert_task("b" * 64, Kind.CPP_GRAPH, "g", {}, "fp")
    assert _near_winners(tuning, rec) == [({}, {"cpp.simdlen": 0}, 1.3)]
    other = db.upsert_task("c" * 64, Kind.CPP_GRAPH, "h", {}, "fp")
    db.set_winner(other.id, tuning.device_id, None, {"cpp.simdlen": 8}, 1.0, 1.1)
    assert _near_winners(tuning, rec) == [({}, {"cpp.simdlen": 8}, 1.1)]  # the database's own come first
    db.close()


def test_another_graphs_fusion_winner_lends_its_knobs_not_its_vetoes():
    mine = space_for(Kind.FUSION, {"space": {"device": "cuda", "defaults": _fusion_defaults(), "pairs": ["p1", "p2"]}})
    theirs = {**_fusion_defaults(), "aggressive_fusion": True, "veto.q9": True}
    seeds = near_seeds(Kind.FUSION, {}, mine, [({}, theirs, 1.1)])
    assert seeds == [{**mine.default, "aggressive_fusion": True}]
    assert mine.is_valid(seeds[0]) and not mine.is_valid(theirs)


def _fusion_defaults():
    return {
        "max_fusion_size": 64,
        "aggressive_fusion": False,
        "epilogue_fusion": True,
        "prologue_fusion": True,
        "score_fusion_memory_threshold": 10,
        "realize_reads_threshold": 4,
        "realize_opcount_threshold": 30,
        "realize_acc_reads_threshold": 8,
        "split_reductions": True,
        "loop_ordering_after_fusion": False,
        "combo_kernels": False,
        "triton.tiling_prevents_pointwise_fusion": True,
        "triton.tiling_prevents_reduction_fusion": True,
    }


def test_the_priors_are_read_ahead_and_the_model_library_loaded_only_for_a_device_they_hold():
    """What a sweep starts before its capture: in a new process, a CPU sweep's read-ahead validates the files but loads
    no model library (the files hold only the H200's rows), nor does a CUDA sweep's that does not rank; a CUDA sweep's
    that ranks loads it; then the rows are only filtered."""
    import subprocess
    import sys

    code = """
import sys
from tuner.ranking.prior import _plan, prior_files, read_ahead, rows_for
read_ahead("cpu").join()
assert _plan.cache_info().currsize == len(prior_files()) > 0
read_ahead("cuda", ranking=False).join()
assert "sklearn.ensemble" not in sys.modules
read_ahead("cuda").join()
assert "sklearn.ensemble" in sys.modules
misses = _plan.cache_info().misses
assert rows_for("cuda", "NVIDIA H200").files and _plan.cache_info().misses == misses
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TUNER_PRIOR": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
