"""A new kind of decision is one descriptor: registered (here into the live registry), its graphs record a task key
for it, its stored winner validates against its space and is forced at compile time, with no other code changed."""

import dataclasses

import torch

from tests.helpers.models import mlp
from tuner import kinds
from tuner.backend import journal
from tuner.backend.compiler import compile_with_context
from tuner.backend.context import CompileContext
from tuner.backend.instrument.context import MeasuringContext
from tuner.backend.instrument.recorder import Recorder
from tuner.core import Forcing
from tuner.search_spaces import valid_winners
from tuner.search_spaces import InvalidConfig, space_for
from tuner.search_spaces.base import Bool, Space

KNOB = "split_reductions"
NEW = "test_split_reductions"


def _space(context):
    return Space(NEW, (Bool(KNOB),), {KNOB: True}, (), dict(context))


def _register(monkeypatch):
    kind = kinds.TaskKind(
        NEW,
        _space,
        kinds.GRAPH_HOOK,
        phase="graph knobs",
        cost="graph",
        group="graph-knob",
        label="splits",
        graph_task=lambda graph, sites, info: {},
    )
    monkeypatch.setitem(kinds._REGISTRY, NEW, kind)
    return kind


def _compile(ctx):
    torch._dynamo.reset()
    m, x = mlp().eval(), torch.randn(16, 64)
    with torch.no_grad(), journal.recording() as decisions:
        torch.compile(m, backend=lambda gm, ex, **_: compile_with_context(gm, ex, ctx))(x)
    return decisions


def test_a_registered_kind_is_recorded_validated_and_forced(monkeypatch):
    _register(monkeypatch)
    assert NEW in [k.value for k in kinds.graph_hooked("cpu")] and NEW in kinds.where(phase="graph knobs")

    rec = Recorder()
    _compile(MeasuringContext(Forcing(), "cpu", rec))
    (graph,) = rec.graphs.values()
    key = graph.keys[NEW]

    assert space_for(NEW, {"space": {}}).validate({KNOB: False})[KNOB] is False
    assert valid_winners({key: (NEW, {KNOB: "yes"}, {"space": {}})}) == {}, "a config outside its space is refused"
    winners = valid_winners({key: (NEW, {KNOB: False}, {"space": {}})})
    decisions = _compile(CompileContext(Forcing.from_winners(winners), "cpu"))
    mine = [d for d in decisions if d.kind == NEW]
    assert [(d.outcome, d.answer, d.what) for d in mine] == [(journal.HIT, {KNOB: False}, "forward graph 0 splits")]


def test_a_kind_with_its_own_hook_point_brings_its_adapter(monkeypatch):
    """A decision no built-in hook point applies: its adapter is installed by every compile on its devices and asks
    the active context for its answer."""
    from tests.helpers import adapter

    monkeypatch.setitem(
        kinds._REGISTRY,
        NEW,
        kinds.TaskKind(
            NEW,
            _space,
            "attention site",
            phase="template sites",
            cost="site choice",
            group="template-site",
            devices=("cpu",),
            adapter="tests.helpers.adapter",
        ),
    )
    adapter.INSTALLED.clear()
    ctx = CompileContext(Forcing({NEW: {"k": {KNOB: False}}}), "cpu")
    _compile(ctx)
    assert adapter.INSTALLED and set(adapter.INSTALLED) == {"cpu"}
    with journal.recording() as decisions:
        assert ctx.lookup(NEW, "k", "site k") == {KNOB: False} and ctx.lookup(NEW, "other", "site other") is None
    assert [(d.outcome, d.what) for d in decisions] == [(journal.HIT, "site k"), (journal.MISS, "site other")]


def test_an_unregistered_kind_is_refused():
    try:
        space_for(NEW, {"space": {}})
    except InvalidConfig as e:
        assert "unknown task kind" in str(e)
    else:
        raise AssertionError("an unregistered kind built a space")
    assert dataclasses.is_dataclass(kinds.descriptor("cpp_graph"))


def test_a_graph_kind_with_its_own_adapter_and_phase(monkeypatch):
    """A graph-hooked kind that no built-in hook point or phase applies (as the attention backends): its adapter's
    ``found`` is kept with the recorded graph for its ``graph_task``, its ``patches`` turns a forced answer into
    Inductor's config, and its phase is a graph study of its own in every sweep on its devices."""
    from tests.helpers import adapter
    from tuner.sweep.phases import study_phases

    monkeypatch.setitem(
        kinds._REGISTRY,
        NEW,
        kinds.TaskKind(
            NEW,
            _space,
            kinds.GRAPH_HOOK,
            phase="test splits",
            cost="graph",
            group="test",
            devices=("cpu",),
            label="splits",
            answer=lambda key, config, sig: (key, {adapter.KNOB: config[KNOB]}),
            adapter="tests.helpers.adapter",
            graph_task=lambda graph, sites, info: {} if graph["found"].get(NEW) else None,
        ),
    )
    assert "test splits" in study_phases("cpu") and "test splits" not in study_phases("cuda")
    assert study_phases("cpu")[0] == "attention backends"  # registration order

    rec = Recorder()
    _compile(MeasuringContext(Forcing(), "cpu", rec))
    (graph,) = rec.graphs.values()
    assert (
        graph.found[NEW] == adapter.FOUND and kinds.descriptor(NEW).graph_task(dataclasses.asdict(graph), [], {}) == {}
    )
    adapter.PATCHED.clear()
    _compile(CompileContext(Forcing({NEW: {graph.keys[NEW]: {adapter.KNOB: False}}}), "cpu"))
    assert adapter.PATCHED == [{"split_reductions": False}]
