"""Freezing as a choice, on the CPU for real: the recording marks a graph compiled frozen, which gets a task of the
``freezing`` kind (its grouping no longer holds the knob), and a compile whose answer says ``freezing: false`` stops
the frozen compile before lowering and compiles the Dynamo graph again with its weights as inputs."""

import optuna
import pytest
import torch
import torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code

import tuner.backend as tb
from tests.backend.test_conv_rewrite import _compiled, _grouping, _inference, _input, stem
from tuner.backend.hooks import restart as restart_hook
from tuner.core import Forcing, Kind
from tuner.search_spaces import space_for
from tuner.search_spaces.freezing import FREEZING, unfrozen

FROZEN = Kind("freezing")


def _unfrozen(g):
    """The answer that compiles the recorded graph ``g`` unfrozen."""
    return Forcing({FROZEN: {g.keys[FROZEN]: unfrozen()}})


def test_a_frozen_graph_is_recorded_with_a_freezing_task_that_no_study_samples():
    model, x = stem(), _input()
    g, grouping = _grouping(model, x, freezing=True)
    assert g.frozen and FROZEN in g.keys and FREEZING not in grouping.space.default
    space = space_for(FROZEN, {"space": {}})
    assert space.default == {FREEZING: True} and space.is_valid(unfrozen())
    unfrozen_g, _ = _grouping(model, x, freezing=False)
    assert not unfrozen_g.frozen
    # A grouping stored before freezing was a kind of its own still holds the knob, which its study never samples.
    old = space_for(Kind.FUSION, {"space": {**grouping.signature["space"], "frozen": 1}})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    assert old.default[FREEZING] is True and all(old.suggest(study.ask())[FREEZING] is True for _ in range(20))


def test_an_unfrozen_answer_compiles_the_graph_again_with_its_weights_as_inputs():
    model, x = stem(), _input()
    g, grouping = _grouping(model, x, freezing=True)
    with _inference(freezing=True):
        _, (frozen_code,) = run_and_get_code(_compiled(model, Forcing({FROZEN: {g.keys[FROZEN]: {FREEZING: True}}})), x)
        tb.reset_stats()
        y, (code,) = run_and_get_code(_compiled(model, _unfrozen(g)), x)
        expected = model(x)
    assert "_frozen_param" in frozen_code and "_frozen_param" not in code
    torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-4)
    s = tb.stats()
    # The frozen graph's freezing answered (a hit; its codegen knobs and grouping had none: misses); the graph compiled
    # unfrozen has neither stored (two misses). Nothing benchmarked.
    assert s["hits"] == 1 and s["misses"] == 4 and s["benchmarks"] == 0, s


def test_an_older_groupings_frozen_answer_does_not_outvote_an_unfrozen_one():
    """A database with a grouping stored before freezing was a kind of its own (its default says frozen) and the
    freezing kind's "unfrozen": the graph compiles unfrozen."""
    model, x = stem(), _input()
    g, grouping = _grouping(model, x, freezing=True)
    old = space_for(Kind.FUSION, {"space": {**grouping.signature["space"], "frozen": 1}})
    both = _unfrozen(g).merged(Forcing({Kind.FUSION: {grouping.key: old.default}}))
    with _inference(freezing=True):
        _, (code,) = run_and_get_code(_compiled(model, both), x)
    assert "_frozen_param" not in code


@pytest.mark.gpu
def test_on_the_gpu_an_unfrozen_answer_compiles_the_graph_unfrozen():
    """As on torch 2.11 with CUDA, bf16 and channels-last, where convnext_tiny ran faster unfrozen."""
    model = stem().cuda().to(torch.bfloat16)
    x = _input().cuda().to(torch.bfloat16)
    g, _ = _grouping(model, x, device="cuda", freezing=True)
    assert g.frozen
    with _inference(True):
        y, (code,) = run_and_get_code(_compiled(model, _unfrozen(g), device="cuda"), x)
        ref = model.float()(x.float())
    assert "_frozen_param" not in code
    assert (y.float() - ref).abs().max() <= 0.02 * ref.abs().max()


@pytest.mark.parametrize("grad, backward", [(True, False), (False, True)])
def test_a_graph_that_is_not_frozen_is_never_stopped(grad, backward):
    with inductor_config.patch(freezing=True), torch.set_grad_enabled(grad):
        assert restart_hook.take({FREEZING: False, "epilogue_fusion": True}, is_backward=backward) == {
            "epilogue_fusion": True
        }
    with inductor_config.patch(freezing=True), torch.no_grad(), pytest.raises(restart_hook.Restart):
        restart_hook.take({FREEZING: False}, is_backward=False)


def test_an_unfrozen_compile_that_fails_says_so_as_a_missing_hook(monkeypatch):
    """As on a torch whose compile_fx cannot compile a frozen trace unfrozen: the error names the second compile and
    is a HookUnavailable, so the tuned backend compiles with plain Inductor and a sweep stores the trial as failed."""
    from tuner.backend.hooks import graph as graph_hook

    model, x = stem(), _input()
    g, _ = _grouping(model, x, freezing=True)
    real = graph_hook.compile_graph

    def failing(gm, inputs, *, patches, around_inner):
        if patches.get(FREEZING) is False:
            raise RuntimeError("simulated: this torch cannot")
        return real(gm, inputs, patches=patches, around_inner=around_inner)

    monkeypatch.setattr(graph_hook, "compile_graph", failing)
    with _inference(freezing=True), pytest.raises(Exception) as info:
        _compiled(model, _unfrozen(g))(x)
    chain, e = [], info.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    failed = [e for e in chain if isinstance(e, restart_hook.RestartFailed)]
    assert failed and "without freezing failed: RuntimeError: simulated" in str(failed[0])
