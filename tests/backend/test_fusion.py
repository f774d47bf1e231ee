"""Fusion groupings on the CPU, for real: Inductor's fusions are recorded with stable ids, a veto splits a
fusion, and a grouping stored for a graph that changed falls back to Inductor's fusion without error."""

import torch
from torch._inductor.utils import run_and_get_code

import tuner.backend as tb
from tuner.backend.compiler import compile_with_context
from tuner.backend.instrument.context import MeasuringContext
from tuner.backend.instrument.recorder import Recorder
from tuner.core import Forcing, Kind
from tuner.db import Database, EnvironmentInfo, current_device
from tuner.search_spaces import space_for
from tuner.backend.defaults import fusion_defaults
from tuner.search_spaces.fusion import to_patches


class Chain(torch.nn.Module):
    """Pointwise work around a reduction: Inductor fuses several nodes into few loops."""

    def __init__(self, scale: float = 2.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.relu(x * self.scale + 1)
        return torch.sigmoid(y - y.mean(dim=-1, keepdim=True)) * 3


def _compile(model, forcing=Forcing(), recorder=None):
    def backend(gm, ex, **_):
        return compile_with_context(gm, ex, MeasuringContext(forcing, "cpu", recorder), {"fx_graph_cache": False})

    torch._dynamo.reset()
    return torch.compile(model, backend=backend)


def _loops(code: str) -> int:
    return code.count("#pragma omp for") + code.count("for(int64_t")


def test_fusions_are_recorded_with_ids_stable_across_compiles():
    x = torch.randn(64, 256)
    runs = []
    for _ in range(2):
        rec = Recorder()
        _compile(Chain(), recorder=rec)(x)
        (g,) = rec.graphs.values()
        assert g.pairs and g.fusion_key
        runs.append(g)
    assert runs[0].pairs == runs[1].pairs and runs[0].fusion_key == runs[1].fusion_key


def test_a_veto_splits_a_fusion_and_numerics_hold():
    x = torch.randn(64, 256)
    rec = Recorder()
    _compile(Chain(), recorder=rec)(x)
    (g,) = rec.graphs.values()
    ref = Chain()(x)
    y0, (code0,) = run_and_get_code(_compile(Chain()), x)
    veto = Forcing({Kind.FUSION: {g.fusion_key: {"vetoes": sorted(g.pairs)}}})
    tb.reset_stats()
    y1, (code1,) = run_and_get_code(_compile(Chain(), veto), x)
    torch.testing.assert_close(y0, ref)
    torch.testing.assert_close(y1, ref)
    assert tb.stats()["hits"] >= 1
    assert _loops(code1) > _loops(code0), "vetoing Inductor's fusions must leave more loops"


def test_stale_grouping_falls_back_to_inductors_fusion(db_url):
    """A grouping stored for the graph of Chain(2.0) is consulted by Chain(3.0), whose graph differs: a miss."""
    x = torch.randn(64, 256)
    rec = Recorder()
    _compile(Chain(2.0), recorder=rec)(x)
    (g,) = rec.graphs.values()
    ctx = {"device": "cpu", "defaults": fusion_defaults("cpu"), "pairs": sorted(g.pairs)}
    sig = {"backward": False, "lines": g.lines, "space": ctx}
    space = space_for("fusion_graph", sig)
    config = {**space.default, **{f"veto.{p}": True for p in ctx["pairs"]}, "max_fusion_size": 8}
    db = Database.open(db_url)
    dev = current_device("cpu")
    t = db.upsert_task(g.fusion_key, "fusion_graph", "chain fusion", sig, space.fingerprint())
    d, e = db.device_id(dev), db.environment_id(EnvironmentInfo("x", "y", None, "3.11", "0"))
    trial = db.record_trial(t.id, d, e, config, "ok", median_ms=1.0, baseline_ms=1.1)
    db.set_winner(t.id, d, trial.id, config, 1.0, 1.1)
    db.close()
    assert to_patches(config)["vetoes"] == sorted(g.pairs)

    torch._dynamo.reset()
    tb.reset_stats()
    changed = Chain(3.0)
    y = torch.compile(changed, backend="tuned", options={"db": db_url})(x)
    torch.testing.assert_close(y, changed(x))
    s = tb.stats()
    assert s["hits"] == 0 and s["misses"] >= 1 and s["benchmarks"] == 0
    torch._dynamo.reset()
    tb.reset_stats()
    same = Chain(2.0)
    y = torch.compile(same, backend="tuned", options={"db": db_url})(x)  # the unchanged graph gets its grouping
    torch.testing.assert_close(y, same(x))
    assert tb.stats()["hits"] >= 1


class _Node:
    """A scheduler node as Inductor's first fusion heuristic sees it (no template epilogue with no shared data can be
    built on this CPU: 2.14's loop reordering finds the shared data of every CPP GEMM epilogue tried)."""

    def __init__(self, template: bool):
        self.template = template

    def is_template(self):
        return self.template

    def is_reduction(self):
        return False

    def is_foreach(self):
        return False

    def get_nodes(self):
        return [self]

    def get_name(self):
        return "buf0"


def test_a_template_epilogue_refused_for_sharing_no_data_is_recorded_for_its_graph():
    """Inductor's own ``can_fuse`` refuses a pair that shares no indexed data unless ``aggressive_fusion`` is set; the
    recording keeps the template epilogues refused so (a pair of plain nodes, or a refusal under aggressive fusion,
    is not one)."""
    import torch._inductor.config as inductor_config

    from tuner.backend.hooks.choices import TunedChoices

    rec = Recorder()
    rec.graph("g", "fusion_graph", {"backward": False, "code": "x\n", "inputs": []})
    ctx = MeasuringContext(Forcing(), "cuda", rec)
    with ctx.activated():
        assert TunedChoices.can_fuse(None, _Node(True), _Node(False), 0) is False
        assert TunedChoices.can_fuse(None, _Node(False), _Node(False), 0) is False
        with inductor_config.patch(aggressive_fusion=True, max_fusion_size=0):
            assert TunedChoices.can_fuse(None, _Node(True), _Node(False), 0) is False  # refused for its size
    (g,) = rec.graphs.values()
    assert len(g.unshared) == 1 and not g.pairs
