"""tuner bench keeps what it measured when stopped early: the JSON is written after each mode's compile."""

import json

from typer.testing import CliRunner

from tuner.commands.bench import run_bench
from tuner.cli import app
from tuner.workloads.spec import WorkloadSpec

MLP = WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(2, 64), threads=2)


def test_each_compile_is_checkpointed_before_the_timing(tmp_path):
    seen = []
    result = run_bench(MLP, ["eager", "default"], f"sqlite:///{tmp_path / 'none.db'}", rounds=3, checkpoint=seen.append)
    assert [sorted(d["results"]) for d in seen] == [["eager"], ["default", "eager"]]
    assert all(d["partial"] is True and "median_ms" not in d["results"]["eager"] for d in seen)
    assert seen[-1]["results"]["default"]["compile_s"] > 0
    assert "partial" not in result and result["results"]["default"]["median_ms"] > 0


def test_the_cli_leaves_the_whole_document_unmarked(tmp_path):
    out = tmp_path / "bench.json"
    args = [
        "bench",
        "--model",
        "tests.helpers.models:mlp",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--input-shape",
        "2,64",
        "--modes",
        "default",
        "--rounds",
        "3",
        "--db",
        f"sqlite:///{tmp_path / 'none.db'}",
        "--out",
        str(out),
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "default: compiled in" in r.output
    doc = json.loads(out.read_text())
    assert "partial" not in doc and doc["results"]["default"]["median_ms"] > 0
    import torchvision

    assert doc["torch"] and torchvision.__version__.startswith(
        doc["libraries"]["torchvision"]
    )  # what built the model is named


def test_a_tuned_mode_that_matched_nothing_is_said_below_the_table(tmp_path, swept_at_batch_1):
    """The table's hit/tr/miss column, and one line where a tuned mode found none of its database's answers (its
    time is then Inductor's defaults', whatever its 0 benchmarks suggest)."""
    args = [
        "bench",
        "--model",
        "tests.helpers.models:mlp",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--input-shape",
        "1,64",
        "--modes",
        "tuned",
        "--also-db",
        f"empty=sqlite:///{tmp_path / 'empty.db'}",
        "--rounds",
        "3",
        "--db",
        swept_at_batch_1,
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())  # the console wraps long lines
    assert text.count("none of the database's answers matched this workload") == 1, r.output
    assert "tuned-empty: none of the database's answers matched" in text and "tuned: none" not in text


def test_the_freezing_mode_is_inductors_defaults_on_the_frozen_graph(tmp_path):
    """What tuned starts from for inference: separates freezing's cost from the answers' (hf:gpt2 on the H200)."""
    from tuner.commands.bench import modes_for

    assert modes_for(MLP, "sqlite://")["freezing"].freezing and not modes_for(MLP, "sqlite://")["default"].freezing
    result = run_bench(MLP, ["freezing"], f"sqlite:///{tmp_path / 'none.db'}", rounds=3)
    assert result["results"]["freezing"]["numerics_ok"] and result["results"]["freezing"]["median_ms"] > 0


def test_widely_spread_timings_are_said_below_the_table():
    from tuner.cli.bench_cmd import noisy

    quiet = {"default": {"median_ms": 2.694, "spread_ms": 0.0475}, "tuned": {"median_ms": 2.679, "spread_ms": 0.0465}}
    assert noisy(quiet) == []
    loud = {**quiet, "tuned": {"median_ms": 3.563, "spread_ms": 0.7557}}  # hf:gpt2 (H200)
    (line,) = noisy(loud)
    assert "tuned's IQR is 21% of its median" in line and "not results" in line


def test_on_the_cpu_each_mode_is_timed_over_three_compiled_instances(tmp_path):
    """Two compiles of one config can run 5-10% apart on the CPU: a mode's time is the median of its instances'
    medians, each of a fresh copy of the model, and its spread covers the gap between them."""
    from tuner.commands.bench import CPU_INSTANCES, instances_for
    from tuner.backend.instrument.timing import Timing, pooled

    assert instances_for("cpu") == CPU_INSTANCES == 3 and instances_for("cuda") == 1 and instances_for("cpu", 1) == 1
    doc = run_bench(MLP, ["eager", "default"], f"sqlite:///{tmp_path / 'none.db'}", rounds=3)
    for r in doc["results"].values():
        assert len(r["instance_medians_ms"]) == 3 and min(r["instance_medians_ms"]) <= r["median_ms"] <= max(
            r["instance_medians_ms"]
        )
        # each figure is rounded to 4 decimals: the spread by up to 0.5e-4 down, the gap between two medians 1e-4 up
        assert r["spread_ms"] >= max(r["instance_medians_ms"]) - min(r["instance_medians_ms"]) - 1.5e-4
    one = run_bench(MLP, ["default"], f"sqlite:///{tmp_path / 'none.db'}", rounds=3, instances=1)
    assert "instance_medians_ms" not in one["results"]["default"]
    t = pooled([Timing(1.0, 0.9, 0.01, 5), Timing(1.2, 1.1, 0.02, 5), Timing(1.1, 1.0, 0.03, 5)])
    assert (t.median_ms, t.min_ms, t.samples) == (1.1, 0.9, 15) and abs(t.spread_ms - 0.2) < 1e-9
