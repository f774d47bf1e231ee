"""A database swept at one batch size serves others: the nearest stored task's winner is transferred,
counted as such, and turned off by transfer=False; `tuner explain` says task by task what the database answered;
`tuner.compile` gets a frozen sweep's answers without the user setting Inductor's freezing flag."""

import json
import logging

import pytest
import torch
import torch._inductor.config as inductor_config
from typer.testing import CliRunner

import tuner
import tuner.backend as tb
from tests.helpers.dbfill import copy_db
from tests.helpers.models import mlp
from tuner.cli import app

MLP = ["--model", "tests.helpers.models:mlp", "--device", "cpu", "--threads", "2"]
runner = CliRunner()


def _compile_at(url, batch, **options):
    torch._dynamo.reset()  # as a new process: an earlier compile at another batch would make Dynamo mark it dynamic
    inductor_config.freezing = True
    tb.reset_stats()
    m, x = mlp().eval(), torch.randn(batch, 64)
    with torch.no_grad():
        y = torch.compile(m, backend="tuned", options={"db": url, **options})(x)
        torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-5)
    return tb.stats()


def test_another_batch_gets_the_nearest_stored_answers_and_benchmarks_nothing(swept_at_batch_1):
    s = _compile_at(swept_at_batch_1, 2)
    assert s["transferred"] >= 3 and s["hits"] == 0 and s["misses"] == 0 and s["benchmarks"] == 0, s
    exact = _compile_at(swept_at_batch_1, 1)
    assert exact["hits"] == s["transferred"] and exact["transferred"] == 0, exact


def test_with_transfer_off_another_batch_misses_and_says_why(swept_at_batch_1, caplog, monkeypatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("tuner.once"), "_said", set())
    with caplog.at_level(logging.WARNING, logger="tuner"):
        s = _compile_at(swept_at_batch_1, 2, transfer=False)
    assert s["transferred"] == 0 and s["hits"] == 0 and s["misses"] >= 3, s
    assert "input shapes (2x64)" in caplog.text and "stored: 1x64" in caplog.text


def test_transfer_off_through_the_environment(swept_at_batch_1, monkeypatch):
    from tuner.settings import settings

    monkeypatch.setenv("TUNER_TRANSFER", "0")
    settings.cache_clear()
    s = _compile_at(swept_at_batch_1, 2)
    assert s["transferred"] == 0 and s["misses"] >= 3


def test_dynamic_shapes_take_exact_answers_or_clean_misses(swept_at_batch_1):
    inductor_config.freezing = True
    tb.reset_stats()
    m = mlp().eval()
    f = torch.compile(m, backend="tuned", options={"db": swept_at_batch_1}, dynamic=True)
    with torch.no_grad():
        for batch in (3, 7):
            x = torch.randn(batch, 64)
            torch.testing.assert_close(f(x), m(x), rtol=1e-4, atol=1e-5)
    s = tb.stats()
    assert (
        s["benchmarks"] == 0 and s["transferred"] == 0 and s["hits"] + s["misses"] >= 1
    )  # symbolic sizes never transfer


def test_tuner_compile_freezes_for_inference_without_the_flag(swept_at_batch_1):
    inductor_config.freezing = False
    tb.reset_stats()
    m, x = mlp().eval(), torch.randn(1, 64)
    compiled = tuner.compile(m, db=swept_at_batch_1)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), m(x), rtol=1e-4, atol=1e-5)
    s = tb.stats()
    assert s["hits"] >= 3 and s["misses"] == 0 and s["benchmarks"] == 0, s
    assert inductor_config.freezing is False  # put back after the call
    assert compiled._orig_mod is m  # attributes are those of what torch.compile returned


def test_tuner_compile_refuses_a_backend():
    from tuner.errors import TunerError

    with pytest.raises(TunerError, match="instead of backend"):
        tuner.compile(mlp(), backend="inductor")


def test_tuner_compile_passes_inductor_options(tmp_path):
    from torch._inductor.utils import run_and_get_code

    m, x = mlp().eval(), torch.randn(4, 64)
    compiled = tuner.compile(m, db=f"sqlite:///{tmp_path / 'absent.db'}", options={"cpp.simdlen": 0})
    with torch.no_grad():
        y, code = run_and_get_code(compiled, x)
    torch.testing.assert_close(y, m(x).detach())
    assert "at::vec::" not in "\n".join(code)  # scalar code, as asked


def _explain(url, *args):
    result = runner.invoke(app, ["explain", *MLP, *args, "--json", "--db", url])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_explain_lists_every_task_as_hit_transferred_or_miss_with_the_reason(swept_at_batch_1):
    exact = _explain(swept_at_batch_1, "--input-shape", "1,64")
    assert exact["counts"]["hit"] >= 3 and exact["counts"]["miss"] == 0 and exact["note"] is None
    assert {d["kind"] for d in exact["decisions"]} >= {"template_choice", "cpp_graph", "fusion_graph"}

    moved = _explain(swept_at_batch_1, "--input-shape", "4,64")
    assert moved["counts"] == {"hit": 0, "transferred": exact["counts"]["hit"], "miss": 0}
    site = next(d for d in moved["decisions"] if d["kind"] == "template_choice")
    assert site["what"].startswith("packed_linear 4x64") and site["source_name"].startswith("packed_linear 1x64")
    assert "log2 sizes away" in site["reason"]

    strict = _explain(swept_at_batch_1, "--input-shape", "4,64", "--strict")
    assert strict["counts"]["miss"] == exact["counts"]["hit"]
    assert all("transfer is off" in d["reason"] for d in strict["decisions"])
    assert "input shapes (4x64)" in strict["note"]

    unfrozen = _explain(swept_at_batch_1, "--input-shape", "1,64", "--no-freezing")
    assert unfrozen["counts"]["hit"] == 0 and "freezing = True" in unfrozen["note"]


def test_explain_on_a_missing_database_is_one_line(tmp_path):
    result = runner.invoke(app, ["explain", *MLP, "--input-shape", "1,64", "--db", f"sqlite:///{tmp_path / 'nope.db'}"])
    assert result.exit_code == 1 and "no tuning database" in result.output


def test_bench_reports_each_tuned_modes_lookups(swept_at_batch_1, tmp_path):
    out = tmp_path / "bench.json"
    args = [
        "bench",
        *MLP,
        "--input-shape",
        "2,64",
        "--modes",
        "default,tuned,tuned-strict",
        "--rounds",
        "3",
        "--db",
        swept_at_batch_1,
        "--out",
        str(out),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    r = json.loads(out.read_text())["results"]
    assert r["tuned"]["lookups"]["transferred"] >= 3 and r["tuned"]["benchmarks"] == 0
    assert r["tuned-strict"]["transfer"] is False and r["tuned-strict"]["lookups"] == {
        "hits": 0,
        "transferred": 0,
        "misses": r["tuned"]["lookups"]["transferred"],
    }
    assert all(v["numerics_ok"] for k, v in r.items() if k != "default") and r["default"]["median_ms"] > 0


def test_revalidate_re_measures_stored_winners_keeps_winners_and_reverts_the_rest(swept_at_batch_1, tmp_path, cwd_root):
    from tuner.budget.presets import PRESETS
    from tuner.core import Kind
    from tuner.db import Database, current_device

    url = copy_db(swept_at_batch_1, tmp_path / "copy.db")
    db = Database.open(url)
    device = db.device_id(current_device("cpu"))
    with db.session() as s:
        from sqlalchemy import select

        from tuner.db.models import Task, Winner

        graph_id = s.scalar(select(Task.id).where(Task.kind == str(Kind.CPP_GRAPH)))
        trials_before = db.stats()["trials"]
    stale = {**db.winner_config(graph_id, device), "cpp.simdlen": 4096}  # as a winner no longer valid here would be
    db.set_winner(graph_id, device, None, stale, 1.0, 2.0)
    db.close()

    result = runner.invoke(app, ["db", "revalidate", *MLP, "--input-shape", "1,64", "--json", "--db", url])
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    drift = {d["task"]: d for d in report["drift"]}
    graph = next(d for d in drift.values() if d["kind"] == "cpp_graph")
    assert graph["verdict"] == "reverted" and "not valid" in graph["why"] and graph["stored_speedup"] == 2.0
    floor = 1 / (1 - PRESETS["default"].min_gain)
    for d in drift.values():
        assert d["verdict"] in ("kept", "reverted")
        if d["verdict"] == "kept":
            assert d["speedup"] > floor
    db = Database.open(url)
    try:
        assert db.stats()["trials"] == trials_before + len(drift) - 1  # every measurement stored (not the invalid one)
        with db.session() as s:
            winners = {tid: cfg for tid, cfg in s.execute(select(Winner.task_id, Winner.config))}
        assert winners[graph_id] != stale
    finally:
        db.close()
