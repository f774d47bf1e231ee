"""An answer that runs a workload under CUDA graphs (``search_spaces/cuda_graph``, ``backend/hooks/restart``): the
compile restarts with Inductor's ``triton.cudagraphs`` on. On the CPU Inductor then skips CUDA graphs for the graph and
counts the skip, which shows the patch reached ``compile_fx``; the GPU side is tests/gpu/test_cuda_graphs.py."""

import dataclasses
import logging

import pytest
import torch
import torch._inductor.config as inductor_config
from torch._dynamo.utils import counters

from tests.helpers.models import mlp
from tuner.backend.compiler import compile_with_context
from tuner.backend.instrument.context import MeasuringContext
from tuner.backend.instrument.recorder import Recorder
from tuner.backend.hooks import restart
from tuner.core import Forcing, Kind
from tuner.search_spaces.cuda_graph import CUDA_GRAPHS


def _compile(model, forcing, **ctx_kw):
    ctx = MeasuringContext(forcing, "cpu", **ctx_kw)
    torch._dynamo.reset()
    fn = torch.compile(model, backend=lambda gm, ex, **_: compile_with_context(gm, ex, ctx))
    return fn, ctx


def _graph_key(model, x):
    """The graph's CUDA-graph task key (looked up on the CPU too: ``unfrozen``)."""
    rec = Recorder()
    fn, _ = _compile(model, Forcing(), recorder=rec)
    with torch.no_grad():
        fn(x)
    return next(iter(rec.graphs.values())).keys[Kind.CUDA_GRAPH]


@pytest.fixture
def unfrozen(monkeypatch):
    """No freezing, and the CUDA-graph kind looked up on CPU graphs as on CUDA ones: Inductor then reads the flag and
    skips CUDA graphs for the CPU device (counted), which shows the answer reached it."""
    from tuner import kinds

    desc = kinds.descriptor(Kind.CUDA_GRAPH)
    monkeypatch.setitem(kinds._REGISTRY, Kind.CUDA_GRAPH, dataclasses.replace(desc, devices=("cpu", "cuda")))
    before = inductor_config.freezing
    inductor_config.freezing = False
    yield
    inductor_config.freezing = before


def _skips():
    return sum(counters["inductor"][k] for k in ("cudagraph_skips",))


def test_an_answer_turning_cuda_graphs_on_restarts_the_compile_under_them(unfrozen):
    m, x = mlp().eval(), torch.randn(8, 64)
    key = _graph_key(m, x)
    fn, ctx = _compile(m, Forcing({Kind.CUDA_GRAPH: {key: {CUDA_GRAPHS: True}}}))
    before = _skips()
    with torch.no_grad():
        y = fn(x)
    torch.testing.assert_close(y, m(x).detach())
    assert ctx.cuda_graphs_on
    assert _skips() > before, "Inductor never saw triton.cudagraphs: the restart did not carry the patch"


def test_the_cuda_graphs_option_off_keeps_them_off(unfrozen):
    m, x = mlp().eval(), torch.randn(8, 64)
    key = _graph_key(m, x)
    fn, ctx = _compile(m, Forcing({Kind.CUDA_GRAPH: {key: {CUDA_GRAPHS: True}}}), cuda_graphs=False)
    before = _skips()
    with torch.no_grad():
        fn(x)
    assert not ctx.cuda_graphs_on and _skips() == before


def test_only_a_forward_graph_turns_them_on_and_never_off():
    assert restart.take({CUDA_GRAPHS: True, "epilogue_fusion": False}, is_backward=True) == {"epilogue_fusion": False}
    assert restart.take({CUDA_GRAPHS: False}, is_backward=False) == {}
    with inductor_config.patch({"triton.cudagraphs": True}):  # the user's mode="reduce-overhead": already on
        assert restart.take({CUDA_GRAPHS: True}, is_backward=False) == {}
    with pytest.raises(restart.Restart) as r:
        restart.take({CUDA_GRAPHS: True}, is_backward=False)
    assert r.value.patches == {CUDA_GRAPHS: True}


def test_the_tuned_backend_says_when_a_workload_runs_under_cuda_graphs(unfrozen, db_url, caplog):
    """Through backend="tuned" and a stored answer: one warning, and the option that turns it off."""
    from tuner.db import Database, current_device

    m, x = mlp().eval(), torch.randn(8, 64)
    key = _graph_key(m, x)
    db = Database.open(db_url)
    task = db.upsert_task(key, "cuda_graph", "test", {"space": {}}, "fp")
    db.set_winner(task.id, db.device_id(current_device("cpu")), None, {CUDA_GRAPHS: True}, 1.0, 2.0)
    db.close()
    torch._dynamo.reset()
    before = _skips()
    with caplog.at_level(logging.WARNING, logger="tuner"), torch.no_grad():
        y = torch.compile(m, backend="tuned", options={"db": db_url})(x)
    torch.testing.assert_close(y, m(x).detach())
    assert "runs under CUDA graphs" in caplog.text and "'cuda_graphs': False" in caplog.text
    assert _skips() > before


def _lookups(ctx, payload):
    from tuner.backend import journal

    with journal.recording() as decisions:
        knobs = ctx.graph_knobs(payload)
    return knobs, [(d.kind, d.outcome) for d in decisions]


def test_a_cuda_graphs_lookup_is_a_forward_graphs_and_never_a_miss():
    """A backward graph has no task of its own; a forward graph with no answer runs as Inductor would (off), and its
    fusion lookup alone says whether the graph is known, so a database swept before this kind counts no extra miss."""
    from tuner.backend.journal import HIT, MISS
    from tuner.core import Kind
    from tuner.keys import task_key
    from tuner.search_spaces.cuda_graph import on

    forward = {"code": "def forward(self, x):\n    return (x,)", "inputs": [], "backward": False}
    backward = {**forward, "backward": True}
    assert _lookups(MeasuringContext(Forcing(), "cuda"), forward)[1] == [(Kind.FUSION, MISS)]
    answers = Forcing({Kind.CUDA_GRAPH: {task_key(Kind.CUDA_GRAPH, p): on() for p in (forward, backward)}})
    knobs, seen = _lookups(MeasuringContext(answers, "cuda"), forward)
    assert knobs == on() and seen == [(Kind.CUDA_GRAPH, HIT), (Kind.FUSION, MISS)]
    knobs, seen = _lookups(MeasuringContext(answers, "cuda"), backward)
    assert knobs == {} and seen == [(Kind.FUSION, MISS)]
