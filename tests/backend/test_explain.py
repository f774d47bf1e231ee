"""A compile under backend="tuned" that finds nothing says why in one warning: freezing, shapes or dtype."""

import importlib
import logging

import torch

import tuner.backend as tb
from tests.helpers.models import mlp
from tuner.backend.explain import reasons
from tuner.core import Kind
from tuner.db import Database, current_device
from tuner.core import WorkloadName

FROZEN = WorkloadName.parse("mlp/infer/cpu/fp32/16x64")


def test_workload_names_read_back():
    assert FROZEN == WorkloadName("mlp", "infer", "cpu", "fp32", (16, 64), False, True)
    assert not WorkloadName.parse("resnet18/infer/cuda/bf16/32x3x224x224/cl/nofreeze").frozen
    assert WorkloadName.parse("resnet18/train/cuda/bf16/32x3x224x224/cl").channels_last
    assert WorkloadName.parse("not a workload") is None and WorkloadName.parse("m/infer/cpu/fp32/axb") is None


def test_reasons_name_what_differs():
    said = reasons([FROZEN], [(16, 64)], {"torch.float32"}, frozen=False, grad=False)
    assert len(said) == 1 and "freezing" in said[0]
    assert reasons([FROZEN], [(16, 64)], {"torch.float32"}, frozen=True, grad=False) == []
    said = reasons([FROZEN], [(8, 64)], {"torch.bfloat16"}, frozen=True, grad=False)
    assert any("8x64" in r and "16x64" in r for r in said) and any("bfloat16" in r for r in said)
    assert reasons([FROZEN], [(16, 64)], {"torch.float32"}, frozen=False, grad=True) == []  # training never freezes


def test_a_compile_without_freezing_on_a_frozen_database_warns_and_counts_misses(db_url, monkeypatch, caplog):
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config, "freezing", False)  # Inductor's caches are off (conftest): every lookup runs
    monkeypatch.setattr(importlib.import_module("tuner.once"), "_said", set())  # warned once per process
    db = Database.open(db_url)
    device = db.device_id(current_device("cpu"))
    rec = db.upsert_task("a" * 64, Kind.CPP_GRAPH, "mlp forward graph 0", {"space": {}}, "0" * 64)
    db.link_workload("mlp/infer/cpu/fp32/16x64", [rec.id])
    db.set_winner(rec.id, device, None, {"cpp.simdlen": 0}, 1.0, 1.1)
    db.close()
    model, x = mlp().eval(), torch.randn(16, 64)
    tb.reset_stats()
    with caplog.at_level(logging.WARNING, logger="tuner"), torch.no_grad():
        y = torch.compile(model, backend="tuned", options={"db": db_url})(x)
        torch.testing.assert_close(y, model(x))
    s = tb.stats()
    assert s["hits"] == 0 and s["misses"] > 0
    warnings = [r.getMessage() for r in caplog.records if "no stored answer matched" in r.getMessage()]
    assert len(warnings) == 1 and "freezing = True" in warnings[0], caplog.text


def test_a_compile_served_from_inductors_cache_counts_what_it_applied(db_url, monkeypatch, tmp_path):
    """The AOTAutograd cache runs none of tuner's hooks: the counts recorded at the real compile stand in."""
    import torch._inductor.config as inductor_config

    import torch._functorch.config as functorch_config

    monkeypatch.setattr(inductor_config, "freezing", False)  # keep Inductor's caches in play, in a folder of its own
    monkeypatch.setattr(inductor_config, "fx_graph_cache", True)
    monkeypatch.setattr(functorch_config, "enable_autograd_cache", True)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    Database.open(db_url).close()
    model, x = mlp().eval(), torch.randn(16, 64)
    counts = []
    for _ in range(2):
        torch._dynamo.reset()
        tb.reset_stats()
        with torch.no_grad():
            torch.compile(model, backend="tuned", options={"db": db_url})(x)
        counts.append(tb.stats())
    assert counts[0]["misses"] > 0 and counts[0]["cached"] == 0
    assert counts[1]["cached"] == 1 and counts[1]["misses"] == counts[0]["misses"], counts


def _stored_missed_tasks(db_url, monkeypatch):
    """(model, input, the task keys its frozen compile looks up, their ids): each stored as a task of this workload
    that has no winner on this device."""
    import torch._inductor.config as inductor_config

    from tuner.backend import journal

    monkeypatch.setattr(inductor_config, "freezing", True)
    monkeypatch.setattr(importlib.import_module("tuner.once"), "_said", set())
    model, x = mlp().eval(), torch.randn(16, 64)
    Database.open(db_url).close()
    with journal.recording() as first, torch.no_grad():
        torch.compile(model, backend="tuned", options={"db": db_url})(x)
    missed = {d.key: d.kind for d in first if d.outcome == journal.MISS}
    assert missed
    db = Database.open(db_url)
    ids = [
        db.upsert_task(key, kind, f"task {i}", {"space": {}}, "0" * 64).id
        for i, (key, kind) in enumerate(missed.items())
    ]
    db.link_workload("mlp/infer/cpu/fp32/16x64", ids)  # the same workload: no shape, dtype or freezing reason
    db.close()
    torch._dynamo.reset()
    tb.reset_stats()
    return model, x, missed, ids


def _miss_warning(db_url, model, x, caplog):
    with caplog.at_level(logging.WARNING, logger="tuner"), torch.no_grad():
        torch.compile(model, backend="tuned", options={"db": db_url})(x)
    assert tb.stats()["hits"] == 0
    warnings = [r.getMessage() for r in caplog.records if "no stored answer matched" in r.getMessage()]
    assert len(warnings) == 1, warnings
    return warnings[0]


def test_a_database_that_holds_the_tasks_untuned_says_so(db_url, monkeypatch, caplog):
    """A sweep that ran out of time stores the tasks it captured without winners: a compile that misses them all is
    told the sweep stopped early, not that its graph differs (hf:gpt2's 60-s sweep on the H200)."""
    model, x, missed, _ = _stored_missed_tasks(db_url, monkeypatch)
    said = _miss_warning(db_url, model, x, caplog)
    assert f"{len(missed)} of its {len(missed)} lookups are tasks the database holds with no winner" in said, said
    assert "differs" not in said and "longer --time-budget" in said and "other device" not in said


def test_a_database_whose_winners_were_measured_on_another_device_says_so(db_url, monkeypatch, caplog):
    """An export swept on one card and read on another (an H100's, compiled on an H200): the tasks are there with
    winners, for the other card only. The compile is told where they were measured, not to sweep longer."""
    from tuner.db import DeviceInfo

    model, x, missed, ids = _stored_missed_tasks(db_url, monkeypatch)
    db = Database.open(db_url)
    other = db.device_id(DeviceInfo("cpu", "Another CPU model", {"cores": 96}))
    for tid in ids[:1]:
        db.set_winner(tid, other, None, {"choice": "x"}, 1.0, 2.0)
    db.close()
    said = _miss_warning(db_url, model, x, caplog)
    assert f"{len(missed)} of its {len(missed)} lookups are tasks the database holds with no winner on this" in said, (
        said
    )
    assert "1 on the Another CPU model" in said and "kept per device model" in said and "--time-budget" not in said
