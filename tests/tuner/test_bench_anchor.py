"""tuner bench's anchor: Inductor at its strongest as a mode, every mode's record saying what it ran, and each tuned
mode set against the best Inductor mode timed in the same run."""

from tuner.commands.bench import best_inductor, lever_worth, modes_for, run_bench
from tuner.workloads.spec import WorkloadSpec

MLP = WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(2, 64), threads=2)


def test_the_strongest_mode_is_freezing_plus_max_autotune_with_cuda_graphs_on_a_gpu():
    table = modes_for(MLP, "sqlite://")
    strongest, without = table["freezing-max-autotune"], table["freezing-max-autotune-no-cudagraphs"]
    assert strongest.describe("cuda") == {
        "backend": "inductor",
        "inductor_mode": "max-autotune",
        "freezing": True,
        "cuda_graphs": True,
    }
    assert without.describe("cuda") == {
        "backend": "inductor",
        "inductor_mode": "max-autotune-no-cudagraphs",
        "freezing": True,
        "cuda_graphs": False,
    }
    assert strongest.describe("cpu")["cuda_graphs"] is False  # a CPU has none
    assert table["default"].describe("cuda") == {
        "backend": "inductor",
        "inductor_mode": None,
        "freezing": False,
        "cuda_graphs": False,
    }
    assert table["tuned-no-cuda-graphs"].describe("cuda")["cuda_graphs"] is False
    assert table["eager"].describe("cuda")["backend"] == "eager"


def test_every_record_says_what_it_ran_and_tuned_is_set_against_the_best_inductor_mode(tmp_path):
    modes = ["eager", "default", "freezing", "tuned", "tuned-without-fusion-grouping", "tuned-no-cuda-graphs"]
    doc = run_bench(MLP, modes, f"sqlite:///{tmp_path / 'none.db'}", rounds=3)
    r = doc["results"]
    for name in r:
        assert {"backend", "inductor_mode", "freezing", "cuda_graphs"} <= set(r[name]), name
    assert (
        r["freezing"]["freezing"] is True and r["default"]["freezing"] is False and r["tuned"]["cuda_graphs"] is False
    )
    best = min(("default", "freezing"), key=lambda n: r[n]["median_ms"])
    assert doc["best_inductor"] == best  # eager and tuned are no anchors
    assert r["tuned"]["vs_best_inductor"] == round(r["tuned"]["median_ms"] / r[best]["median_ms"], 3)
    assert "vs_best_inductor" not in r["default"] and "vs_best_inductor" not in r["eager"]
    assert "vs_best_inductor" in r["tuned-without-fusion-grouping"]  # an ablated mode is a tuned mode
    assert r["tuned-no-cuda-graphs"]["cuda_graphs"] is False  # what it ran, not merely the option it was given
    assert r["tuned-without-fusion-grouping"]["vs_tuned"] == round(
        r["tuned-without-fusion-grouping"]["median_ms"] / r["tuned"]["median_ms"], 3
    )
    # where each compile's time went, by Inductor's own timers: regions of this compile alone, largest first
    regions = r["default"]["compile_regions"]
    seconds = [s for s, _ in regions.values()]
    assert seconds == sorted(seconds, reverse=True) and "compile_regions" not in r["eager"]
    for name in (
        "default",
        "freezing",
        "tuned",
    ):  # each compile's own, not the process's sum so far: one graph, entered once
        spent, entered = r[name]["compile_regions"]["_compile.compile_inner"]
        assert 0 < spent <= r[name]["compile_s"] and entered == 1, name


def test_each_lever_s_share_of_tuned_s_lead_over_the_best_inductor_mode():
    r = {
        "freezing-reduce-overhead": {"backend": "inductor", "median_ms": 2.0},
        "tuned": {"backend": "tuned", "median_ms": 1.5},
        "tuned-no-cuda-graphs": {"backend": "tuned", "median_ms": 1.9},
        "tuned-without-template-site": {"backend": "tuned", "median_ms": 1.45},
    }
    lever_worth(r, "freezing-reduce-overhead")
    assert r["tuned-no-cuda-graphs"]["vs_tuned"] == 1.267 and r["tuned-no-cuda-graphs"]["share_of_gain"] == 0.8
    assert r["tuned-without-template-site"]["share_of_gain"] == -0.1  # a lever that cost time here
    assert "share_of_gain" not in r["tuned"]
    r["tuned"]["median_ms"] = 2.1  # no lead over the best mode: no share to hand out
    lever_worth(r, "freezing-reduce-overhead")
    assert "vs_tuned" in r["tuned-no-cuda-graphs"] and all("share_of_gain" not in v for v in r.values())


def test_no_inductor_mode_no_anchor():
    assert best_inductor({"eager": {"backend": "eager", "median_ms": 1.0}}) is None


def test_a_frozen_inductor_mode_is_compiled_again_not_served_the_unfrozen_one():
    """Dynamo serves a module compiled earlier by an equal Inductor backend; freezing is set around the compile
    only, so `freezing` after `default` (and `freezing-max-autotune` after `max-autotune`) must differ in options."""
    import torch
    from torch._dynamo.utils import counters

    from tests.helpers.models import mlp
    from tuner.commands.bench import compile_mode

    table = modes_for(MLP, "sqlite://")
    model, x = mlp().eval(), torch.randn(2, 64)
    torch._dynamo.reset()
    compile_mode(MLP, table["default"], model, x)
    before = counters["frames"]["ok"]
    fn, _, _ = compile_mode(MLP, table["freezing"], model, x)
    assert counters["frames"]["ok"] > before, "the frozen mode was served the unfrozen compile"


def test_on_a_gpu_the_strongest_mode_comes_with_inductors_default_kernels_under_cuda_graphs():
    """A tuned win that CUDA graphs alone would give is no win over Inductor: where freezing + max-autotune is timed on
    a GPU, Inductor's default kernels frozen under CUDA graphs are timed beside it."""
    from tuner.commands.bench import with_anchors

    names = ["default", "freezing-max-autotune", "tuned"]
    assert with_anchors("cuda", names) == ["default", "freezing-reduce-overhead", "freezing-max-autotune", "tuned"]
    assert with_anchors("cpu", names) == names and with_anchors("cuda", ["default", "tuned"]) == ["default", "tuned"]
    assert modes_for(MLP, "sqlite://")["freezing-reduce-overhead"].describe("cuda") == {
        "backend": "inductor",
        "inductor_mode": "reduce-overhead",
        "freezing": True,
        "cuda_graphs": True,
    }


def test_a_tuned_mode_whose_output_is_off_shows_no_ratio():
    from tuner.cli.bench_cmd import _vs_best

    assert _vs_best({"vs_best_inductor": 0.861, "numerics_ok": False}) == "numerics off"
    assert _vs_best({"vs_best_inductor": 0.861, "numerics_ok": True}) == "0.861x"
    assert _vs_best({"median_ms": 1.0}) == ""
