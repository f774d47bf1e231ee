"""The CPU path end to end, for real: spawned workers, real Inductor compiles, real SQLite."""

import json
import os
import re

import pytest
import torch
import torch._inductor.config as inductor_config
from typer.testing import CliRunner

import tuner.backend as tb
from tests.helpers.dbfill import copy_db
from tests.helpers.models import mlp
from tuner.cli import app
from tuner.db import Database

MLP = ["--model", "tests.helpers.models:mlp", "--input-shape", "16,64", "--device", "cpu", "--threads", "2"]
runner = CliRunner()


def _sweep(db_url, *extra):
    result = runner.invoke(app, ["sweep", *MLP, "--budget", "quick", "--db", db_url, *extra])
    assert result.exit_code == 0, result.output
    return result


def _per_task(db_url):
    db = Database.open(db_url)
    try:
        with db.session() as s:
            from sqlalchemy import func, select

            from tuner.db.models import Task, Trial

            rows = s.execute(
                select(Task.kind, Trial.config_hash, func.count()).join(Trial).group_by(Task.kind, Trial.config_hash)
            )
            return list(rows)
    finally:
        db.close()


def test_sweep_then_tuned_compile_benchmarks_nothing(sweep_at_batch_1):
    db_url, out = sweep_at_batch_1
    assert "graph breaks: none" in out and "whole workload:" in out and "done:" in out
    flat = " ".join(out.split())  # Rich wraps long lines
    said = flat.index("--budget quick is expected to take ~")  # the whole sweep's estimate, before any phase starts
    assert said < flat.index("template sites: 2 tasks") and "graph knobs ~" in flat and "fusion groupings ~" in flat
    # The capture's cost item by item, before anything else is planned: its parts add up to what it says
    m = re.search(r"capture: (\d+) s \(start ([\d.]+) s((?:, [A-Za-z ]+ [\d.]+ s)*)\)", flat)
    assert m and m.start() < said, flat[:600]
    parts = [float(m.group(2)), *map(float, re.findall(r"([\d.]+) s", m.group(3)))]
    assert abs(sum(parts) - int(m.group(1))) <= 1
    assert all(f"{item} " in m.group(3) for item in ("default compile", "eager timing")), m.group(0)
    db = Database.open(db_url)
    stats = db.stats()
    db.close()
    assert stats["tasks"] == 5  # two packed_linear sites + the graph's freezing, codegen knobs and fusion grouping
    assert stats["winners"] == 4  # freezing was not timed (--no-time-unfrozen): no answer, the frozen compile stays
    assert stats["trials"] >= 8
    # The closing count is every trial stored but those the spaces rejected unmeasured (the defaults' included).
    said_measured = int(re.search(r"done: (\d+) trials measured", flat).group(1))
    by_status = stats["trials_by_status"]
    assert said_measured == sum(n for status, n in by_status.items() if status != "invalid"), (said_measured, by_status)
    assert _freezing(db_url) == ([], None) and "without freezing" not in flat

    s = _tuned_compile_stats(db_url)
    assert s["benchmarks"] == 0
    assert (s["hits"], s["misses"]) == (4, 0), s  # the graph's two answers and its two sites'


def test_the_workload_is_timed_unfrozen_before_the_searches_and_tuned_as_it_won(db_url, cwd_root):
    """One compile settles what moves a small CPU model 10-20% (mnasnet0_5 ran 1.2x slower frozen): the workload
    unfrozen against the capture's frozen compile, before any search; the sweep then tunes the graphs that won."""
    flat = " ".join(_sweep(db_url, "--input-shape", "1,64", "--trials", "2").output.split())
    ((status, median_ms, baseline_ms),), winner = _freezing(db_url)
    assert status == "ok" and median_ms and baseline_ms
    unfrozen = winner == {"freezing": False}
    assert not unfrozen or median_ms < baseline_ms * 0.98  # kept only where it won by the minimum gain
    assert winner in ({"freezing": False}, {"freezing": True})  # every task of the swept workload has an answer
    said = flat.index("without freezing: ")
    first_search = flat.index(
        "capturing the workload again without freezing" if unfrozen else "template sites: 2 tasks"
    )
    assert said < first_search, flat
    s = _tuned_compile_stats(db_url)
    assert s["benchmarks"] == 0 and s["misses"] == 0, (
        s
    )  # unfrozen: the graph compiled again finds the answers tuned for it
    # The bar counts every trial stored, the freezing phase's too (it measures outside the studies), and its last
    # line waits for nothing
    counted = int(re.findall(r"ended .*? (\d+)/\d+ trials", flat)[-1])
    measured = int(re.search(r"done: (\d+) trials measured", flat).group(1))
    assert counted >= measured and re.search(r"ended .*? trials [0-9:]+ eta 0:00:00", flat), (counted, measured)


def _tuned_compile_stats(db_url):
    """The lookup counts of a user's frozen compile of the mlp at batch 1 with ``backend="tuned"``, checked against
    eager."""
    inductor_config.freezing = True
    tb.reset_stats()
    m, x = mlp().eval(), torch.randn(1, 64)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # CPU winners are keyed by thread count: deploy with the count tuned for
    try:
        with torch.no_grad():
            torch.testing.assert_close(torch.compile(m, backend="tuned", options={"db": db_url})(x), m(x))
    finally:
        torch.set_num_threads(threads)
    return tb.stats()


def _freezing(db_url):
    """(the freezing task's trials with ``freezing: false``, its winner's config)."""
    from sqlalchemy import select

    from tuner.db.models import Task, Trial, Winner

    db = Database.open(db_url)
    try:
        with db.session() as s:
            (task_id,) = s.scalars(select(Task.id).where(Task.kind == "freezing"))
            arms = [
                t for t in s.scalars(select(Trial).where(Trial.task_id == task_id)) if t.config.get("freezing") is False
            ]
            assert len(arms) <= 1
            return [(t.status, t.median_ms, t.baseline_ms) for t in arms], s.scalar(
                select(Winner.config).where(Winner.task_id == task_id)
            )
    finally:
        db.close()


def test_rerun_continues_the_same_studies(sweep_at_batch_1, tmp_path, cwd_root):
    db_url = copy_db(sweep_at_batch_1[0], tmp_path / "copy.db")  # swept with --trials 3
    first = _per_task(db_url)
    graph_first = [r for r in first if r[0] == "cpp_graph"]
    assert len(graph_first) == 3  # the default and two proposals
    _sweep(db_url, "--input-shape", "1,64", "--trials", "4", "--no-fusion")
    graph_second = [r for r in _per_task(db_url) if r[0] == "cpp_graph"]
    assert len(graph_second) >= 4, "the rerun adds trials up to the new target"
    assert {h for _, h, _ in graph_first} <= {h for _, h, _ in graph_second}


def test_a_workload_faster_unfrozen_is_captured_again_and_tuned_unfrozen(sweep_at_batch_1, tmp_path, cwd_root):
    """Where the workload won unfrozen (here an earlier sweep's stored answer), the sweep captures it again without
    freezing and tunes the graphs a tuned compile then runs: the frozen graph's answer restarts the compile unfrozen,
    and the unfrozen graph finds answers of its own."""
    from sqlalchemy import select

    from tuner.db.models import Task, Winner

    db_url = copy_db(sweep_at_batch_1[0], tmp_path / "copy.db")
    db = Database.open(db_url)
    with db.session() as s:
        (task_id,) = s.scalars(select(Task.id).where(Task.kind == "freezing"))
        device_id = s.scalars(select(Winner.device_id)).first()
    db.set_winner(task_id, device_id, None, {"freezing": False}, None, None)
    db.close()
    flat = " ".join(_sweep(db_url, "--input-shape", "1,64", "--trials", "3").output.split())
    assert "an earlier sweep found this workload faster without freezing" in flat
    again = flat.index("capturing the workload again without freezing")
    assert again < flat.index("graph knobs: 1 tasks")  # its linear layers are no template site unfrozen
    db = Database.open(db_url)
    stats = db.stats()
    db.close()
    assert stats["tasks"] == 7, stats  # the frozen graph's five, the unfrozen graph's codegen knobs and fusion grouping

    s = _tuned_compile_stats(db_url)
    assert s["benchmarks"] == 0 and s["misses"] == 0 and s["hits"] >= 4, (
        s
    )  # the frozen graph's answer, the unfrozen one's


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "resnet5O"], "unknown model 'resnet5O'; did you mean resnet50"),
        (["--model", "no_such_pkg.mod:build"], "cannot load model factory"),
        (["--model", "tests.helpers.models:broken", "--input-shape", "4,8"], "broken on purpose"),
        (["--model", "tests.helpers.models:mlp", "--input-shape", "16,x"], "--input-shape must be"),
        (["--model", "tests.helpers.models:mlp", "--input-shape", "16,65"], "the workload failed to run"),
        (["--model", "resnet18", "--dtype", "fp8"], "--dtype must be one of"),
        (["--model", "resnet18", "--budget", "huge"], "--budget must be one of"),
        (
            ["--model", "resnet18", "--skip", "graph-knob"],
            "--skip: no search 'graph-knob' on cpu; did you mean graph-knobs?",
        ),
        (
            ["--model", "resnet18", "--skip", "cuda-graphs"],
            "no search 'cuda-graphs' on cpu (one of template-sites, attention-backends, fusion-groupings, graph-knobs)",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_1(args, message, db_url, cwd_root):
    result = runner.invoke(app, ["sweep", *args, "--device", "cpu", "--db", db_url])
    assert result.exit_code == 1, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_unknown_site_timing_is_one_line_and_exit_1(monkeypatch, db_url):
    from tuner.settings import settings

    monkeypatch.setenv("TUNER_SITE_TIMING", "graphs")
    settings.cache_clear()
    try:
        result = runner.invoke(app, ["sweep", *MLP, "--db", db_url])
    finally:
        monkeypatch.delenv("TUNER_SITE_TIMING")
        settings.cache_clear()
    assert result.exit_code == 1, result.output
    assert "TUNER_SITE_TIMING must be one of auto, pipelined, launch, cudagraph, not 'graphs'" in " ".join(
        result.output.split()
    )
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "url", ["sqlite:////proc/no/tuning.db", "postgresql+psycopg://nobody@127.0.0.1:1/x?connect_timeout=2"]
)
def test_unusable_database_is_one_line_and_exit_1(url):
    result = runner.invoke(app, ["sweep", "--model", "resnet18", "--device", "cpu", "--db", url])
    assert result.exit_code == 1
    assert "error:" in result.output and "Traceback" not in result.output


def test_db_commands(db_url, tmp_path):
    assert runner.invoke(app, ["db", "upgrade", "--db", db_url]).exit_code == 0
    r = runner.invoke(app, ["db", "stats", "--json", "--db", db_url])
    assert r.exit_code == 0 and json.loads(r.output)["trials"] == 0
    assert runner.invoke(app, ["db", "show", "--db", db_url]).exit_code == 0
    missing = runner.invoke(app, ["db", "stats", "--db", f"sqlite:///{tmp_path / 'nope.db'}"])
    assert missing.exit_code == 1 and "no tuning data" in missing.output
    v = runner.invoke(app, ["--version"])
    assert v.exit_code == 0 and v.output.startswith("tuner ")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two workers need two cores")
def test_two_local_workers_share_one_sweep(db_url, cwd_root):
    result = runner.invoke(
        app,
        ["sweep", *MLP[:-2], "--threads", "1", "--budget", "quick", "--trials", "2", "--workers", "2", "--db", db_url],
        terminal_width=400,
    )
    assert result.exit_code == 0, result.output
    assert (
        "worker 1/2: capturing" in result.output and "worker 2/2: capturing" in result.output
    )  # the workers' progress, drawn here
    # Each worker measured on its own core: the plan said so before they started, and each worker's
    # measuring process reported the cores it may run on, as the kernel gives them (os.sched_getaffinity).
    cores = sorted(os.sched_getaffinity(0))
    assert f"worker 1 on core {cores[0]}, worker 2 on core {cores[1]} (1 thread each" in result.output
    seen = {
        w: re.search(rf"worker {w}/2: measuring on CPU core\(s\) ([0-9,]+) with 1 thread", result.output)
        for w in (1, 2)
    }
    assert all(seen.values()), result.output
    sets = [set(map(int, m.group(1).split(","))) for m in seen.values()]
    assert sets[0].isdisjoint(sets[1]) and all(len(x) == 1 for x in sets)
    db = Database.open(db_url)
    s = db.stats()
    db.close()
    assert s["tasks"] == 5 and s["winners"] == 5


def test_the_closing_table_names_a_graph_s_task_without_the_model_its_title_names():
    from tuner.cli.render import task_label

    workload = "hf:mistral,num_hidden_layers=2/infer/cpu/fp32/1x128"
    assert task_label("hf:mistral,num_hidden_layers=2 forward graph 0 fusion", workload) == "forward graph 0 fusion"
    assert task_label("packed_linear 128x256,1x1,256x256", workload) == "packed_linear 128x256,1x1,256x256"
    assert (
        task_label("resnet50_32x4d forward graph 0", "resnet50/infer/cpu/fp32/1x3x224x224")
        == "resnet50_32x4d forward graph 0"
    )
    import io

    from rich.console import Console

    from tuner.cli.render import RichProgress

    out = io.StringIO()
    with RichProgress(Console(file=out, width=200), workload=workload) as progress:  # a phase's task lines too
        progress.start(1, ["hf:mistral,num_hidden_layers=2 forward graph 0 fusion"])
    assert "1 tasks: forward graph 0 fusion" in out.getvalue()
